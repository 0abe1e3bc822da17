"""The cancel walk (Fluxion's ``rem_dfv`` and ``rem_exv``): take a job's spans, uses, tags and aggregate spans out of
the schedule.

As Fluxion's, it walks from the root through every vertex that still holds the job; under a wide vertex only the
children the job was recorded on are walked. What the walk cannot reach (a job released in part, or one the root
does not hold) is swept from the vertices the job was recorded on.

Functions of the :class:`~kubeflux.match.schedule.Schedule` they change and the
:class:`~kubeflux.match.state.WalkState` whose slot leaders they forget and whose visit counts they keep. Must never
read the current match's marks or evaluations.
"""

from __future__ import annotations

from typing import Final

from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.view import ScheduleView

WIDE_CANCEL: Final = 16
"""A cancel walks a vertex's children through the job's own vertices, not by visiting each child, when it has more
children than this plus half the job's vertex count (a pod's cancel at the root of a 5,000-node cluster would
otherwise cost 5,000 visits; a job holding many of the children is cheaper to walk child by child). Grouping the
job's vertices by parent, once per cancel, costs less per vertex than a visit does per child: a gang of 16 nodes
of 64 cores (1,040 vertices) on 1,000 nodes is cancelled through its tree."""


def cancel(schedule: Schedule, state: WalkState, jobid: int) -> None:
    """Remove every span of ``jobid`` (allocation or reservation) from the graph."""
    view = schedule.view
    state.preorder = 0
    state.postorder = 0
    walked = jobid in view.tag_table.get(view.root, ())
    if walked:
        _rem_dfv(schedule, state, view.root, jobid, _JobTree(schedule.view, jobid))
    if not walked or jobid in view.released_in_part:
        _sweep(schedule, state, jobid)
    view.job_vertices.pop(jobid, None)
    view.released_in_part.discard(jobid)


def _sweep(schedule: Schedule, state: WalkState, jobid: int) -> None:
    """Remove what the walk could not reach (the job's state below a vertex that no longer holds it, or all of
    it when the root does not): every vertex the job was recorded on is looked at, not every vertex."""
    view = schedule.view
    view.settle()
    for uid in sorted(view.job_vertices.get(jobid, ())):
        if jobid in view.tags.get(uid, ()):
            delta = _rem_own(schedule, uid, jobid)
            if uid in state.leads:
                for edge, _ in view.children(uid):
                    state.unlead_edge(edge)
            schedule.touch(uid, -delta if delta else 0)
        else:
            span = schedule.pop_span(uid, jobid)
            if span is not None:
                view.plans[uid].rem_span(span)
                schedule.touch(uid)


def _rem_dfv(schedule: Schedule, state: WalkState, uid: int, jobid: int, held: _JobTree) -> int:
    """Remove ``jobid`` below ``uid``; returns the fingerprint change of the subtree.

    As Fluxion's cancel, every child of a vertex the job holds is visited (and counted in :attr:`preorder`);
    under a wide vertex only the children the job was recorded on are walked, and the others only counted."""
    view = schedule.view
    state.preorder += 1
    delta = _rem_own(schedule, uid, jobid)
    if delta is None:
        return 0
    if uid in view.pools:
        delta += _drop_pools(schedule, state, uid, jobid)
    kids = view.children(uid)
    if len(kids) > WIDE_CANCEL + held.size // 2:
        mine = held.children(uid)
        state.preorder += len(kids) - len(mine)
        if uid in state.leads:
            for edge, _target in kids:
                state.unlead_edge(edge)
        for target in mine:
            delta += _rem_dfv(schedule, state, target, jobid, held)
    else:
        unlead = uid in state.leads  # (the method called, not kept bound in a local: see Timeline.count_end)
        vertices = view.graph.vertices
        leaves = []
        for edge, target in kids:
            if unlead:
                state.unlead_edge(edge)
            if vertices[target].out:
                delta += _rem_dfv(schedule, state, target, jobid, held)
            else:
                leaves.append(target)
        if leaves:
            delta += _rem_leaves(schedule, state, uid, leaves, jobid)
    view.bump(uid, -delta)
    state.postorder += 1
    return delta


def _drop_pools(schedule: Schedule, state: WalkState, source: int, jobid: int) -> int:
    """Drop ``jobid``'s unwritten pools on ``source``'s leaves (counted as the leaf-by-leaf walk would count
    them); returns their share of the fingerprints."""
    view = schedule.view
    pools = view.pools[source]
    kept = [pool for pool in pools if pool.meta.jobid != jobid]
    if len(kept) == len(pools):
        return 0
    dropped = 0
    for pool in pools:
        if pool.meta.jobid == jobid:
            dropped += pool.total
            state.postorder += len(pool.run.leaves)
    if kept:
        view.pools[source] = kept
    else:
        del view.pools[source]
    return dropped


def _rem_leaves(schedule: Schedule, state: WalkState, source: int, leaves: list[int], jobid: int) -> int:
    """:meth:`_rem_dfv` for children of ``source`` without out-edges (most of a large job's vertices: its
    cores), in one loop: :meth:`_rem_own` without the parts a leaf does not have (aggregate filter, span
    bounds) unless it has them. Returns the fingerprint change."""
    view = schedule.view
    tags, x_uses, plans, fp = view.tag_table, view.use_table, view.plan_table, view.fp
    allocations, reservations = view.allocation_table, view.reservation_table
    bounds, job2span = view.bounds, view.job2span
    wide = source in view.layouts
    total = 0
    held = 0
    for uid in leaves:
        if wide or uid in bounds or uid in job2span:
            delta = _rem_own(schedule, uid, jobid)
            if delta is not None:
                held += 1
                total += delta
                view.bump(uid, -delta)
            continue
        mine = tags.get(uid)
        if mine is None or jobid not in mine:
            continue
        held += 1
        mine.discard(jobid)
        uses = x_uses.get(uid)
        use = uses.pop(jobid, None) if uses is not None else None
        if use is not None:
            total += use[2]
            fp[uid] -= use[2]
        spans = allocations.get(uid)
        if spans is None or jobid not in spans:
            spans = reservations.get(uid)
            if spans is None or jobid not in spans:
                continue
        plans[uid].rem_span(spans.pop(jobid))
    state.preorder += len(leaves)
    state.postorder += held
    return total


def _rem_own(schedule: Schedule, uid: int, jobid: int) -> int | None:
    """Remove what ``jobid`` holds on ``uid`` itself; its share of the fingerprint, None if it holds nothing."""
    view = schedule.view
    tags = view.tag_table.get(uid)
    if tags is None or jobid not in tags:
        return None
    tags.discard(jobid)
    uses = view.use_table.get(uid)
    use = uses.pop(jobid, None) if uses is not None else None
    delta = 0
    if use is not None:
        delta = use[2]
        if uid in view.bounds:
            view.unbound(uid, use[0], use[1])
    spans = view.job2span.get(uid)
    if spans is not None and jobid in spans:
        view.subplans[uid].rem_span(spans.pop(jobid))
    span = schedule.pop_span(uid, jobid)
    if span is not None:
        view.plan_table[uid].rem_span(span)
    return delta


class _JobTree:
    """The vertices a job was recorded on, grouped by their parent in the walked subsystem (built on first use:
    only a cancel that meets a wide vertex needs it)."""

    __slots__ = ("_by_parent", "_jobid", "_traverser", "size")

    def __init__(self, traverser: ScheduleView, jobid: int) -> None:
        self._traverser = traverser
        self._jobid = jobid
        self._by_parent: dict[int, list[int]] | None = None
        self.size = len(traverser.job_vertices.get(jobid, ()))

    def children(self, uid: int) -> list[int]:
        """The children of ``uid`` the job was recorded on, in uid order."""
        if self._by_parent is None:
            traverser = self._traverser
            vertices = traverser.graph.vertices
            by_parent: dict[int, list[int]] = {}
            held = sorted(traverser.job_vertices.get(self._jobid, ()))
            # (Methods called on the traverser, not bound ones kept in locals: compiled, those are Python calls.)
            if traverser.graph.shared_children:
                for vertex in held:
                    if not vertices[vertex].removed:
                        for parent in traverser.walk_parents(vertex):
                            by_parent.setdefault(parent, []).append(vertex)
            else:  # (a tree: each vertex has its one walk parent, and no list of them is made per vertex)
                for vertex in held:
                    if not vertices[vertex].removed:
                        by_parent.setdefault(traverser.walk_parent(vertex), []).append(vertex)
            self._by_parent = by_parent
        return self._by_parent.get(uid, [])
