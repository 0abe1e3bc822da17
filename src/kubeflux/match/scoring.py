"""Candidate bookkeeping of the DFU walk (Fluxion's ``scoring_api_t``, ``evals_t`` and edge groups).

While the traverser walks up from the leaves, each vertex collects, per resource type, the *edge groups* that
lead to qualified candidates below it, with their scores. A policy then picks the best ``k`` of each type; the
picked edges are marked and the update walk follows only marked edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeflux.match import stdsort

MATCH_UNMET = 0
MATCH_MET = 1


@dataclass(slots=True)
class EdgeEval:
    """One edge into a candidate: how many units it offers (``count``) and will take (``needs``)."""

    count: int
    needs: int
    exclusive: bool
    edge: int
    """Index into the graph's edges; -1 for the virtual edge into the root."""


@dataclass(slots=True)
class EdgeGroup:
    score: int
    count: int
    needs: int = 0
    exclusive: bool = False
    root: bool = False
    task_label: str = ""
    edges: list[EdgeEval] = field(default_factory=list)


def _score(group: EdgeGroup) -> int:
    return group.score


class Evals:
    """The candidates of one resource type below a vertex."""

    __slots__ = ("best_i", "best_k", "cursor", "groups", "qualified", "total")

    def __init__(self) -> None:
        self.groups: list[EdgeGroup] = []
        self.qualified = 0
        self.total = 0
        self.best_k = 0
        self.best_i = 0
        self.cursor = -1

    def add(self, group: EdgeGroup) -> None:
        self.total += group.count
        if group.score > 0:
            self.qualified += group.count
        self.groups.append(group)

    def merge(self, other: Evals) -> None:
        self.qualified += other.qualified
        self.total += other.total
        self.groups.extend(other.groups)

    def choose_best_k(self, k: int, descending: bool) -> bool:
        if k == 0 or k > self.qualified:
            return False
        stdsort.sort(self.groups, _score, descending)
        i = 0
        remaining = k
        while remaining > 0:
            group = self.groups[i]
            group.needs = remaining if remaining <= group.count else group.count
            remaining -= group.count
            i += 1
        self.best_k = k
        self.best_i = i
        return True

    def next_group(self) -> EdgeGroup | None:
        """Iterate the groups in order (Fluxion's ``eval_egroups_iter_next``); None past the end."""
        if self.cursor < len(self.groups):
            self.cursor += 1
        return self.groups[self.cursor] if self.cursor < len(self.groups) else None

    def reset_cursor(self) -> None:
        self.cursor = -1


class Scoring:
    """Per-vertex candidate sets by resource type (one subsystem: the dominant one)."""

    __slots__ = ("avail", "by_type", "hier_constrain_now", "overall_score")

    def __init__(self) -> None:
        self.by_type: dict[str, Evals] = {}
        self.hier_constrain_now = False
        self.overall_score = -1
        self.avail = 0

    def evals(self, type: str) -> Evals:
        evals = self.by_type.get(type)
        if evals is None:
            evals = self.by_type[type] = Evals()
        return evals

    def add(self, type: str, group: EdgeGroup) -> None:
        self.evals(type).add(group)

    def qualified_count(self, type: str) -> int:
        evals = self.by_type.get(type)
        return 0 if evals is None else evals.qualified

    def total_count(self, type: str) -> int:
        evals = self.by_type.get(type)
        return 0 if evals is None else evals.total

    def choose_accum_best_k(self, type: str, k: int, descending: bool) -> None:
        if self.evals(type).choose_best_k(k, descending):
            self.hier_constrain_now = True

    def choose_accum_all(self, type: str, descending: bool) -> None:
        evals = self.evals(type)
        if evals.choose_best_k(evals.qualified, descending):
            self.hier_constrain_now = True

    def merge(self, other: Scoring) -> None:
        for type, evals in other.by_type.items():
            self.evals(type).merge(evals)
