"""Growing and shrinking the graph under a live engine (resource-query's ``attach`` and ``remove``).

``attach`` adds a JGF subgraph (vertices already present are reused, see :func:`~kubeflux.resources.jgf.add_jgf`)
and re-initialises the aggregate filters: new vertices get theirs, ancestors get larger totals, spans stay.

``remove`` detaches a subtree (by containment path) or the vertices of broker ranks, each with everything below it
(a JGF ranks its nodes, not their sockets and cores; Fluxion leaves those unreachable). Jobs that hold resources
there first release them, as a partial release would: their spans leave the removed vertices and the aggregate
spans of the ancestors shrink accordingly, so the ancestors' filters (whose totals then shrink) stay exact. A job
that held nothing else is gone from the graph (its id stays known until it is cancelled).
"""

from __future__ import annotations

from collections.abc import Iterable

from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.update import ResourceSetError, holding, release_held
from kubeflux.resources.graph import CONTAINMENT
from kubeflux.resources.jgf import JgfDocument, add_jgf


def attach(schedule: Schedule, state: WalkState, document: JgfDocument) -> list[int]:
    """Add ``document``'s new vertices and edges; return the uids added."""
    view = schedule.view
    added = add_jgf(view.graph, document)
    vertices = view.graph.vertices
    fresh = set(added)
    changed = {vertices[uid].parent for uid in added if vertices[uid].parent not in fresh} - {-1}
    state.refresh()
    schedule.refresh(sorted(changed), added=added)
    return added


def remove_path(schedule: Schedule, state: WalkState, path: str) -> list[int]:
    """Remove the subtree at containment ``path``; return the removed uids. ResourceSetError if there is none."""
    view = schedule.view
    root = view.graph.uid_at(path)
    if root is None:
        raise ResourceSetError(f"no vertex at {path} in the resource graph")
    if root == view.root:
        raise ResourceSetError(f"{path} is the root of the resource graph; it cannot be removed")
    return _remove(schedule, state, {root: _subtree(schedule, root)})


def remove_ranks(schedule: Schedule, state: WalkState, ranks: Iterable[int]) -> list[int]:
    """Remove every vertex of ``ranks`` and everything below it; return the removed uids. ResourceSetError for an
    unknown rank."""
    view = schedule.view
    graph = view.graph
    groups: dict[int, list[int]] = {}
    for rank in sorted(set(ranks)):
        uids = [uid for uid in graph.by_rank.get(rank, ()) if not graph.vertices[uid].removed]
        if not uids:
            raise ResourceSetError(f"rank {rank} is not in the resource graph")
        root = min(uids, key=lambda uid: len(graph.vertices[uid].paths.get(CONTAINMENT, "")))
        if root == view.root:
            raise ResourceSetError(f"rank {rank} holds the root of the resource graph; it cannot be removed")
        groups[root] = uids
    return _remove(schedule, state, groups)


def _subtree(schedule: Schedule, root: int) -> list[int]:
    graph = schedule.view.graph
    found, stack = [], [root]
    while stack:
        uid = stack.pop()
        found.append(uid)
        graph.make_leaves(uid)  # (a node's reserved leaves: made, and removed with it)
        stack.extend(graph.vertices[uid].children)
    return found


def _remove(schedule: Schedule, state: WalkState, groups: dict[int, list[int]]) -> list[int]:
    # Everything below a removed vertex goes with it, whatever its rank (a JGF gives its nodes a rank and the
    # sockets and cores below them none): the jobs holding any of it release it all first.
    view = schedule.view
    doomed: set[int] = set()
    for uids in groups.values():
        for uid in uids:
            if uid not in doomed:
                doomed.update(_subtree(schedule, uid))
    jobs = sorted(
        {
            jobid
            for table in (view.tags, view.allocations, view.reservations)
            for uid in doomed
            for jobid in table.get(uid, ())
        }
    )
    for jobid in jobs:
        held = set(holding(schedule, jobid))
        release_held(schedule, state, jobid, sorted(doomed & held))
    graph = view.graph
    parents = {graph.vertices[uid].parent for uid in doomed} - doomed - {-1}
    removed: list[int] = []
    for root in groups:
        removed.extend(graph.remove_subtree(root))
    for uid in doomed - set(removed):
        removed.extend(graph.remove_subtree(uid))
    state.refresh()
    schedule.refresh(sorted(parents), removed=removed)
    return removed
