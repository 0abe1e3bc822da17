"""Candidate bookkeeping of the DFU walk (Fluxion's ``scoring_api_t``, ``evals_t`` and edge groups).

While the traverser walks up from the leaves, each vertex collects, per resource type, the *edge groups* that
lead to qualified candidates below it, with their scores. A policy then picks the best ``k`` of each type; the
picked edges are marked and the update walk follows only marked edges.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Final

import numpy as np
import numpy.typing as npt

from kubeflux.match import stdsort

MATCH_UNMET: Final = 0
MATCH_MET: Final = 1


@dataclass(slots=True, init=False)
class EdgeEval:
    """One edge into a candidate: how many units it offers (``count``) and will take (``needs``).

    Its ``__init__`` is written out (the walks make one per candidate edge; see docs/native.md)."""

    count: int
    needs: int
    exclusive: bool
    edge: int
    """Index into the graph's edges; -1 for the virtual edge into the root."""

    def __init__(self, count: int, needs: int, exclusive: bool, edge: int) -> None:
        self.count = count
        self.needs = needs
        self.exclusive = exclusive
        self.edge = edge


@dataclass(slots=True, init=False)
class EdgeGroup:
    score: int
    count: int
    needs: int = 0
    exclusive: bool = False
    root: bool = False
    task_label: str = ""
    edges: list[EdgeEval] = field(default_factory=list)

    def __init__(
        self,
        score: int,
        count: int,
        needs: int = 0,
        exclusive: bool = False,
        root: bool = False,
        task_label: str = "",
        edges: list[EdgeEval] | None = None,
    ) -> None:  # (written out: see docs/native.md)
        self.score = score
        self.count = count
        self.needs = needs
        self.exclusive = exclusive
        self.root = root
        self.task_label = task_label
        self.edges = [] if edges is None else edges


_SCORE = attrgetter("score")


PARTIAL_MIN: Final = 64
"""Below this many candidates a best-k choice simply sorts them all."""
RANKED_MAX: Final = 8192
"""Candidate sets larger than this are ranked through their parts (see :meth:`Evals._sources`)."""
LOOKUP_PER_FLATTEN: Final = 256
"""Picking one candidate by position through the parts costs less than flattening this many."""


class Evals:
    """The candidates of one resource type below a vertex.

    ``groups`` lists them in the order Fluxion collects them. It is built only when read: a vertex passes its
    children's candidates up as references (``parts``) next to the groups it adds itself (``own``), so a wide
    vertex costs one reference per child rather than a copy of every candidate below it, and a best-k choice
    can merge the children's ranked lists instead of sorting everything.
    """

    __slots__ = (
        "_groups",
        "_items",
        "_ranked",
        "_scores",
        "best_i",
        "best_k",
        "cursor",
        "descending_scores",
        "own",
        "parts",
        "qualified",
        "size",
        "total",
        "truncated",
    )

    def __init__(self) -> None:
        self.own: list[EdgeGroup] = []
        self.parts: list[Evals] = []
        self.qualified = 0
        self.total = 0
        self.size = 0
        """The number of candidate groups."""
        self.best_k = 0
        self.best_i = 0
        self.cursor = -1
        self.truncated = False
        self.descending_scores = False
        """Whether the candidates are known to be in strictly descending score order (see :meth:`add_all`)."""
        self._items: list[Evals | EdgeGroup] = []
        self._groups: list[EdgeGroup] | None = None
        self._ranked: dict[bool, list[EdgeGroup]] = {}
        self._scores: npt.NDArray[np.int64] | None = None

    @property
    def groups(self) -> list[EdgeGroup]:
        groups = self._groups
        if groups is None:
            if not self.parts:
                groups = self._groups = self.own.copy()
                return groups
            groups = self._groups = []
            for item in self._items:
                if isinstance(item, Evals):
                    groups.extend(item.groups)
                else:
                    groups.append(item)
        return groups

    @groups.setter
    def groups(self, groups: list[EdgeGroup]) -> None:
        self._groups = groups
        self.descending_scores = False

    def group_at(self, index: int) -> EdgeGroup:
        """``groups[index]`` without building ``groups``: the parts are skipped by their sizes."""
        evals = self
        while evals._groups is None:
            for item in evals._items:
                if isinstance(item, Evals):
                    if index < item.size:
                        evals = item
                        break
                    index -= item.size
                elif index == 0:
                    return item
                else:
                    index -= 1
            else:
                raise IndexError(index)
        return evals._groups[index]

    def add(self, group: EdgeGroup) -> None:
        self.descending_scores = False
        self.total += group.count
        if group.score > 0:
            self.qualified += group.count
        self.size += 1
        self.own.append(group)
        self._items.append(group)
        if self._groups is not None:
            self._groups.append(group)

    def add_all(self, groups: list[EdgeGroup], *, descending_scores: bool = False) -> None:
        """:meth:`add` each of ``groups``, in order; ``descending_scores`` tells that their scores strictly
        decrease, so a descending best-k choice among them alone need not sort them."""
        self.descending_scores = descending_scores and not self.size
        for group in groups:
            self.total += group.count
            if group.score > 0:
                self.qualified += group.count
        self.size += len(groups)
        self.own.extend(groups)
        self._items.extend(groups)
        if self._groups is not None:
            self._groups.extend(groups)

    def merge(self, other: Evals) -> None:
        self.descending_scores = False
        self.qualified += other.qualified
        self.total += other.total
        self.size += other.size
        self.parts.append(other)
        self._items.append(other)
        if self._groups is not None:
            self._groups.extend(other.groups)

    def scores(self) -> npt.NDArray[np.int64]:
        """The candidates' scores in collection order (computed once; the parts' arrays are reused)."""
        scores = self._scores
        if scores is None:
            chunks: list[npt.NDArray[np.int64]] = []
            run: list[int] = []
            for item in self._items:
                if isinstance(item, Evals):
                    if run:
                        chunks.append(np.array(run, dtype=np.int64))
                        run = []
                    chunks.append(item.scores())
                else:
                    run.append(item.score)
            if run:
                chunks.append(np.array(run, dtype=np.int64))
            scores = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
            self._scores = scores
        return scores

    def ranked(self, descending: bool) -> list[EdgeGroup]:
        """The candidates by score, best first (ties in no particular order); computed once per direction.

        The parts' ranked lists are concatenated before sorting, so the sort only merges sorted runs."""
        ranked = self._ranked.get(descending)
        if ranked is None:
            runs = [group for source in self._sources(descending) for group in source]
            ranked = self._ranked[descending] = sorted(runs, key=_SCORE, reverse=descending)
        return ranked

    def _sources(self, descending: bool) -> list[list[EdgeGroup]]:
        """Ranked lists that together hold every candidate: the parts' and this vertex's own.

        A large part contributes its own sources rather than one ranked list of everything in it, so a change
        deep below re-sorts only the small part it touched."""
        if not self.own and len(self.parts) == 1:
            return self.parts[0]._sources(descending)
        sources: list[list[EdgeGroup]] = []
        for part in self.parts:
            if part.size > RANKED_MAX and part._ranked.get(descending) is None:
                sources.extend(part._sources(descending))
            else:
                sources.append(part.ranked(descending))
        if self.own:
            sources.append(sorted(self.own, key=_SCORE, reverse=descending))
        return sources

    def _best_without_ties(self, k: int, descending: bool) -> list[EdgeGroup] | None:
        """The groups that ``std::sort`` puts first to cover ``k`` units, if no tie can change them, else None.

        When the chosen groups and the first one left out all have different scores, every correct sort puts
        exactly these first, in this order, so libstdc++'s introsort need not be replayed.
        """
        sources = self._sources(descending)
        best: Iterator[EdgeGroup] = (
            heapq.merge(*sources, key=_SCORE, reverse=descending) if len(sources) > 1 else chain(*sources)
        )
        chosen: list[EdgeGroup] = []
        remaining = k
        previous: int | None = None
        for group in best:
            if group.score == previous:
                return None
            if remaining <= 0:
                return chosen
            previous = group.score
            chosen.append(group)
            remaining -= group.count
        return chosen

    def choose_best_k(self, k: int, descending: bool, partial: bool = False) -> bool:
        """Order the candidates by score (as ``std::sort`` does) and take the best covering ``k`` units.

        With ``partial`` and many candidates only the chosen prefix is computed: ``groups`` then holds just the
        chosen groups (``truncated``), which is all a best-k choice reads afterwards.
        """
        if k == 0 or k > self.qualified:
            return False
        chosen = None
        if partial and self.size >= PARTIAL_MIN:
            chosen = self._best_without_ties(k, descending)
            if chosen is None and k < self.size:
                scores = self.scores()
                first = stdsort.first_positions(-scores if descending else scores, k)
                if first is not None:
                    positions = first.tolist()
                    if len(positions) * LOOKUP_PER_FLATTEN < self.size:  # a few picks among many: look them up
                        chosen = [self.group_at(i) for i in positions]
                    else:
                        groups = self.groups
                        chosen = [groups[i] for i in positions]
        if chosen is not None:
            self.groups = chosen
            self.truncated = True
        elif self.size > 1 and not (descending and self.descending_scores):
            stdsort.sort(self.groups, _SCORE, descending)
        groups = self.groups
        i = 0
        remaining = k
        while remaining > 0:
            group = groups[i]
            group.needs = remaining if remaining <= group.count else group.count
            remaining -= group.count
            i += 1
        self.best_k = k
        self.best_i = i
        return True

    def next_group(self) -> EdgeGroup | None:
        """Iterate the groups in order (Fluxion's ``eval_egroups_iter_next``); None past the end."""
        if self.truncated:
            raise RuntimeError("candidates were truncated by a partial best-k choice")
        if self.cursor < len(self.groups):
            self.cursor += 1
        return self.groups[self.cursor] if self.cursor < len(self.groups) else None

    def reset_cursor(self) -> None:
        self.cursor = -1


class Scoring:
    """Per-vertex candidate sets by resource type (one subsystem: the dominant one).

    A type's candidates taken in from one child alone are that child's own :class:`Evals`, borrowed rather than
    wrapped (``first`` visits one child per vertex, so most of a walk's candidate sets come from one child): the
    first call that would change them (:meth:`evals`, :meth:`merge_types` of a second child) wraps them then, so a
    child's candidates, which its cached evaluation keeps, are never changed.
    """

    __slots__ = ("_borrowed", "aux", "avail", "by_type", "hier_constrain_now", "overall_score")

    def __init__(self) -> None:
        self.by_type: dict[str, Evals] = {}
        self.hier_constrain_now = False
        self.overall_score = -1
        self.avail = 0
        self._borrowed: set[str] | None = None
        self.aux: dict[str, dict[str, Evals]] | None = None
        """Each auxiliary subsystem's candidates, by type (:mod:`~kubeflux.match.subsystems`); None in a walk of
        one subsystem, and until a walk with auxiliary subsystems finds one."""

    def evals(self, type: str) -> Evals:
        """The candidates of ``type``, this vertex's own to change."""
        evals = self.by_type.get(type)
        if evals is None:
            evals = self.by_type[type] = Evals()
        elif self._borrowed and type in self._borrowed:
            evals = self._own(type, evals)
        return evals

    def _own(self, type: str, borrowed: Evals) -> Evals:
        """Wrap a borrowed child's candidates of ``type`` (what :meth:`merge_types` would have made of them)."""
        assert self._borrowed is not None
        self._borrowed.discard(type)
        evals = self.by_type[type] = Evals()
        evals.merge(borrowed)
        return evals

    def add(self, type: str, group: EdgeGroup) -> None:
        evals = self.by_type.get(type)
        if evals is None:
            evals = self.by_type[type] = Evals()
        elif self._borrowed and type in self._borrowed:
            evals = self._own(type, evals)
        evals.add(group)

    def qualified_count(self, type: str) -> int:
        evals = self.by_type.get(type)
        return 0 if evals is None else evals.qualified

    def total_count(self, type: str) -> int:
        evals = self.by_type.get(type)
        return 0 if evals is None else evals.total

    def choose_accum_best_k(self, type: str, k: int, descending: bool, *, partial: bool = True) -> None:
        if self.evals(type).choose_best_k(k, descending, partial=partial):
            self.hier_constrain_now = True

    def choose_accum_all(self, type: str, descending: bool) -> None:
        evals = self.evals(type)
        if evals.choose_best_k(evals.qualified, descending):
            self.hier_constrain_now = True

    def merge_types(self, by_type: dict[str, Evals]) -> None:
        """Take in the candidates a child passed up (never changing them: see the class docstring)."""
        mine = self.by_type
        borrowed = self._borrowed
        for type, evals in by_type.items():
            current = mine.get(type)
            if current is None:
                mine[type] = evals
                if borrowed is None:
                    borrowed = self._borrowed = set()
                borrowed.add(type)
            else:
                if borrowed and type in borrowed:
                    current = self._own(type, current)
                current.merge(evals)
