"""A gang's reservation kept from one scheduling pass to the next, when the engine would make the same one again.

Every full pass cancels the reservations and makes them again in queue order (:mod:`kubeflux.scheduler.core`).
For a gang of alike members the engine's reservation (``allocate_orelse_reserve`` of one gang jobspec) is the most
expensive call of a pass: a walk at now, then one at each candidate start. Most passes follow a pod's end somewhere
else, and the engine answers exactly what it answered before; this module tells when that is certain. The pass
then leaves the reservation in the engine as it is: its cancel is deferred (``ClusterBooks.drop_deferred``) until
the gang is reached, unless something reads the engine first (a match, a replay, another reservation), in which
case it is cancelled then and its cores are put back with the engine's ``update_leaves`` when it is the same.
Either way the schedule is the one a new search gives; only engine job ids differ (a reservation left in place
keeps its id).

Why it is certain. The reservation ``R`` (start ``T``, duration ``d``) was the first the engine found: it walks
at now, then at each start where the root's aggregate counts hold the gang throughout ``d``, and at ``T`` its
policy chose ``R``'s cores as the best of those free throughout ``[T, T + d)``. Now:

* no walk before ``T`` can succeed when the whole graph's free cores and gpus (an upper bound of what any walk
  finds) hold the gang from no start in ``[now, T)``: asked of the root's planner, with the reservation in the
  graph or not alike (every window starting in ``[T - d, T)`` holds ``T - 1``, before it; earlier ones end by T);
* at ``T`` the walk succeeds, since ``R``'s own cores are still free then (checked), and chooses them again when
  nothing better became free: allocations since only made vertices busy; each vertex released since (pods ended,
  other reservations cancelled) is in the graph's release log (:attr:`GraphView.released`), and is harmless when it
  is one of ``R``'s own (free then already: a pod that was to end before ``T`` ended sooner), when it is busy
  during ``[T, T + d)``, or, under a node-centric policy (whose order is static: node ids), when its node comes
  after every node of ``R``. A release the graph cannot name the vertices of (a job cancelled whole, a node
  replaced, down or back) keeps nothing.

Policies whose order depends on free amounts (``first``) or that hold nodes whole are never kept. The same pods,
the same planned duration, the same hidden nodes (the static filters' result, rebuilt at every node event) and a
start still later than now are required as well; anything else is searched again as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.graphview import GraphView
from kubeflux.scheduler.objects import Pod

__all__ = ["KeptReservation", "keeps_reservations", "still_first"]


@dataclass(slots=True, eq=False)
class KeptReservation:
    """A gang reservation as the engine made it, and the graph's release log position it was made at."""

    jobid: int
    at: int
    duration: int
    pods: tuple[Pod, ...]
    hidden: Any  # compared by identity only; not `object`, which a mypyc-compiled dataclass cannot resolve
    """The static-fit entry whose unfit nodes the match hid (identity: a new one after every node event)."""
    leaves: tuple[int, ...]
    """The core and gpu vertices it holds."""
    counts: dict[str, int]
    """How many of each (``core``, ``gpu``) it holds in all."""
    per_node: tuple[tuple[str, int], ...]
    """(node, members there), in the engine's order."""
    since: tuple[int, int]
    """:meth:`ReleaseLog.mark` of :attr:`GraphView.released` when it was made (with itself absent)."""


def keeps_reservations(policy: str) -> bool:
    """Whether reservations under the engine policy ``policy`` may be kept (a static order, no whole nodes)."""
    spec = parse_policy(policy)
    return not spec.stop_on_first and not spec.node_exclusive


def still_first(
    kept: KeptReservation,
    graph: GraphView,
    owner: object,
    pods: list[Pod],
    duration: int,
    hidden: object,
    start: int,
    *,
    held: bool = False,
) -> bool:
    """Whether the engine, asked now (at ``start``) for the same gang, would answer ``kept`` again (see the
    module docstring); ``owner`` is the job whose own cancelled reservation the release log names. ``held``: the
    reservation is still in the graph (never cancelled since it was made, so its cores are its own)."""
    if (
        kept.duration != duration
        or kept.hidden is not hidden
        or kept.at <= start
        or start + 1 >= graph.engine.graph_end
        or len(kept.pods) != len(pods)
        or any(a is not b for a, b in zip(kept.pods, pods, strict=True))
    ):
        return False
    freed = graph.released.since(kept.since)
    if freed is None:
        return False
    schedule = graph.engine.schedule
    plans = schedule.plans
    at = kept.at
    if not held:
        for uid in kept.leaves:
            plan = plans.get(uid)
            if plan is not None and not plan.avail_during(at, duration, 1):
                return False
    if not _nothing_sooner(schedule.root_subplan(), kept, start):
        return False
    ranks = graph.node_ranks() if graph.node_centric else None
    last = -1 if ranks is None else max(ranks.get(node, 1 << 62) for node, _ in kept.per_node)
    own = set(kept.leaves)
    for uid, by in freed:
        if by is owner or uid in own:  # one of its own cores, free then already: the walk chose it
            continue
        plan = plans.get(uid)
        if (plan is None or plan.avail_during(at, duration, 1)) and (
            ranks is None or ranks.get(graph.node_of(uid) or "", -1) <= last
        ):
            return False
    return True


def _nothing_sooner(root: MultiPlanner, kept: KeptReservation, start: int) -> bool:
    """Whether the whole graph's free cores and gpus (an upper bound of what any walk finds) hold the gang
    throughout its duration from no start in ``[start, T)``. The answer is the same whether the reservation itself
    is in the graph or not: a window starting in ``[T - d, T)`` holds ``T - 1``, before it, and an earlier one
    ends by ``T``."""
    wanted = [kept.counts.get(kind, 0) for kind in root.resource_types]
    if not any(wanted):
        return False
    at, duration = kept.at, kept.duration

    def holds(free: list[int]) -> bool:
        return all(have >= want for have, want in zip(free, wanted, strict=True))

    if holds(root.avail_resources_array_during(at - 1, 1)):
        return False
    last = at - duration - 1  # the latest start of a window ending before T
    if start > last:
        return True
    if holds(root.avail_resources_array_during(start, duration)):
        return False
    sooner = root.avail_time_first(start + 1, duration, wanted) if start + 1 <= last else None
    return sooner is None or sooner > last
