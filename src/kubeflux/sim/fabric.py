"""The fabric a coupled job feels: topology domains (zones, racks …) it spans, and how much longer it computes.

``kubeflux simulate --topology-penalty rack=0.1,zone=0.5`` gives each topology level (a node label of the run's
levels, :mod:`kubeflux.scheduler.topology`) a penalty ``p``: a coupled job (:func:`kubeflux.sim.jobs.coupled_quorum`:
an MPI job whose ranks compute together) whose pods sit in ``k`` domains of the level computes ``1 + p·(k − 1)``
times as long, and the factors of the levels multiply (a job over 2 racks in 2 zones: ``(1 + 0.1)·(1 + 0.5)``). The
factor is decided when the job begins computing, from the nodes its bound pods are on then
(:meth:`Slowdown.begin`): its pods' run times (and an injected crash's point) are stretched by it; pods that start
after it began are not. A node without a level's label is in that level's unknown domain, one domain like any other.
A domain is its whole path (rack ``r1`` of zone ``a`` and rack ``r1`` of zone ``b`` are two racks).

``jobs.csv`` records the domains each job spanned, one column per level some node carries (:func:`span_columns`):
a coupled job's when it began computing (:meth:`Slowdown.begin`, with a penalty or without: one point, so a penalty
changes the count only by changing the schedule), any other job's over all the nodes its pods were bound to.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubeflux.scheduler.objects import Node
from kubeflux.scheduler.topology import domains_of, level_type, present_levels
from kubeflux.sim.jobs import SimJob
from kubeflux.sim.pods import SimPod

__all__ = ["Fabric", "Slowdown", "parse_penalty", "span_column", "span_columns"]


def parse_penalty(text: str, levels: Sequence[str]) -> dict[str, float]:
    """``"rack=0.1,zone=0.5"`` as {level label: penalty}, normalized: in the order of ``levels``, a level of penalty 0
    left out (``"zone=0.5, rack=0.1"``, ``"rack=0.1,zone=0.5,"`` and ``"topology.kubeflux.io/rack=0.10,zone=.5"`` are
    one value; ``"rack=0"`` is ``""``'s). A level is named by its type (``rack``) or its label
    (``topology.kubeflux.io/rack``). ValueError naming the part for a part that is not ``LEVEL=NUMBER``, a level not
    among ``levels``, a level named twice, or a penalty that is negative or not finite."""
    penalty: dict[str, float] = {}
    by_name = {level_type(label): label for label in levels} | {label: label for label in levels}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, equals, value = part.partition("=")
        name = name.strip()
        if not equals or not name:
            raise ValueError(f"{part!r}: expected LEVEL=NUMBER (e.g. rack=0.1)")
        label = by_name.get(name)
        if label is None:
            have = ", ".join(f"{level_type(level)} ({level})" for level in levels) or "none"
            raise ValueError(f"{part!r}: {name!r} is not a topology level of the run (its levels: {have})")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value.strip()!r} is not a number") from None
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{part!r}: the penalty must be a finite number >= 0")
        if label in penalty:
            raise ValueError(f"{part!r}: level {name!r} is given twice")
        penalty[label] = number
    return {label: penalty[label] for label in levels if penalty.get(label)}


@dataclass(frozen=True, slots=True)
class Fabric:
    """A run's topology levels (node labels, top first) and each one's penalty per extra domain (0 for none)."""

    levels: tuple[str, ...]
    penalties: tuple[float, ...] = ()
    """One per level (empty: none has a penalty)."""

    @classmethod
    def of(cls, levels: Sequence[str], penalty: dict[str, float] | None = None) -> Fabric:
        """The fabric of ``levels`` with ``penalty`` ({label: p}, as :func:`parse_penalty` gives it)."""
        given = penalty or {}
        penalties = tuple(given.get(label, 0.0) for label in levels) if any(given.values()) else ()
        return cls(tuple(levels), penalties)

    def present(self, nodes: Iterable[Node]) -> tuple[str, ...]:
        """The levels some node of ``nodes`` carries, in order (those that get a ``jobs.csv`` column)."""
        carried = {label: True for node in nodes for label in self.levels if label in node.labels}
        return present_levels(self.levels, carried)

    def spans(self, nodes: Iterable[Node], levels: tuple[str, ...] | None = None) -> tuple[int, ...]:
        """How many domains of each of ``levels`` (default: all of the fabric's) ``nodes`` are in (0 without
        nodes); a domain is its path from the top level down (:func:`~kubeflux.scheduler.topology.domains_of`:
        :data:`~kubeflux.scheduler.topology.UNKNOWN` where a node lacks the label)."""
        chosen = self.levels if levels is None else levels
        depths = [self.levels.index(label) + 1 for label in chosen]
        seen: list[set[tuple[tuple[str, str], ...]]] = [set() for _ in chosen]
        for node in nodes:
            path = domains_of(node.labels, self.levels)
            for domains, depth in zip(seen, depths, strict=True):
                domains.add(path[:depth])
        return tuple(len(domains) for domains in seen)

    def slowdown(self, spans: Sequence[int]) -> float:
        """The factor a coupled job spanning ``spans`` (one count per level) computes longer by."""
        factor = 1.0
        for p, k in zip(self.penalties, spans, strict=False):
            if p and k > 1:
                factor *= 1.0 + p * (k - 1)
        return factor


class Slowdown:
    """Notes the domains a coupled job spans when it begins computing and stretches its run as its fabric says (the
    simulated cluster's job book calls :meth:`begin` in every run with topology levels, a penalty or none);
    ``nodes`` is the cluster's node list by index (kept current by it)."""

    def __init__(self, fabric: Fabric, nodes: list[Node]) -> None:
        self.fabric = fabric
        self.nodes = nodes

    def begin(self, job: SimJob, members: Iterable[SimPod]) -> None:
        """``job`` begins computing with ``members``: its spans are noted (:attr:`SimJob.spans`) and each member's
        run time and crash point stretched by the slowdown."""
        nodes = self.nodes
        bound = {sp.node_index for sp in job.attempt() if sp.node_index >= 0 and sp.finished_at is None}
        spans = self.fabric.spans(nodes[index] for index in sorted(bound))
        job.spans = spans
        factor = self.fabric.slowdown(spans)
        if factor == 1.0:
            return
        for sp in members:
            if sp.run_time is not None:
                sp.run_time *= factor
            if sp.fail_after is not None:
                sp.fail_after *= factor


def span_column(fabric: Fabric, level: str, jobs: Sequence[SimJob], nodes: Sequence[Node]) -> list[int | None]:
    """Per job, the domains of ``level`` it spanned (:attr:`SimJob.spans` of a coupled job that began computing,
    else the nodes its last attempt's pods were bound to); None for a job none of whose pods was bound."""
    index = fabric.levels.index(level)
    column: list[int | None] = []
    for job in jobs:
        if job.spans is not None:
            column.append(job.spans[index])
            continue
        bound = {sp.node_index for sp in job.attempt() if sp.node_index >= 0}
        column.append(fabric.spans((nodes[i] for i in sorted(bound)), (level,))[0] if bound else None)
    return column


def span_columns(fabric: Fabric, jobs: Sequence[SimJob], nodes: Sequence[Node]) -> dict[str, list[int | None]]:
    """{level type: :func:`span_column`} for each level some node carries (empty: no column)."""
    return {level_type(level): span_column(fabric, level, jobs, nodes) for level in fabric.present(nodes)}
