"""The update walk (Fluxion's ``dfu_impl_update.cpp``): record a match in the schedule and emit it to a writer.

It follows only the edges the select walk marked, adds the job's planner spans, exclusivity uses, tags and
aggregate-filter spans on the way up, re-weighs ``first``'s explore order, and writes each recorded vertex. Runs of
exclusive leaves are recorded in one loop, or as one pool when the job is new to the graph.

An :class:`UpdateWalk` holds what every vertex of one walk shares: the marks (:class:`~kubeflux.match.state.WalkState`),
the schedule it writes, the writer, the job and the policy. Must never choose resources or read a request.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubeflux.match.evaluation import Evaluation, LeafRun, Pool, job_key
from kubeflux.match.meta import Errno, JobMeta, MatchFailure
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.view import record_leaves
from kubeflux.match.writers import Writer


def update(
    state: WalkState,
    schedule: Schedule,
    writer: Writer,
    meta: JobMeta,
    policy: MatchPolicy,
    *,
    leaf_runs: bool = True,
    full: bool = True,
) -> int:
    """Record the marked resources for ``meta`` under ``policy`` and emit them; returns the number of slots.

    ``full=False`` is the replay of an allocation made elsewhere (``update``): the exclusive vertices already
    hold their planner spans, so only tags, exclusivity checkers and aggregate filters are recorded. ``leaf_runs``:
    whether runs of exclusive leaves may be recorded as one pool (the traverser's own flag).
    """
    view = schedule.view
    if state.root_seq != state.sequence:
        raise MatchFailure(Errno.EINVAL, "resource state wasn't properly set up for update")
    walk = UpdateWalk(state, schedule, writer, meta, policy, full, leaf_runs)
    if not full:
        view.settle()
    root = view.root
    shadow = view.graph.vertices[root].type in policy.exclusive_types
    evaluation = state.root_eval if full else None
    recorded = walk.vertex(root, state.root_needs, state.root_excl, shadow, False, evaluation, {})
    if full and not recorded:
        # As Fluxion's update: a match whose walk records nothing fails (nothing it chose is exclusive, or its
        # choices lie below a vertex no mark leads to), rather than succeed holding nothing.
        raise MatchFailure(Errno.EBUSY)
    return walk.nslots


class UpdateWalk:
    """One update walk: what every vertex it records shares (see the module docstring)."""

    __slots__ = (
        "delta",
        "exclusive_types",
        "fresh",
        "full",
        "leaf_runs",
        "level",
        "meta",
        "nslots",
        "reweigh",
        "schedule",
        "state",
        "view",
        "writer",
    )

    def __init__(
        self,
        state: WalkState,
        schedule: Schedule,
        writer: Writer,
        meta: JobMeta,
        policy: MatchPolicy,
        full: bool,
        leaf_runs: bool,
    ) -> None:
        self.state = state
        self.schedule = schedule
        self.view = schedule.view
        """What the walk reads of the schedule it writes."""
        self.writer = writer
        self.meta = meta
        self.exclusive_types = policy.exclusive_types
        self.reweigh = policy.spec.stop_on_first
        """Whether edges are re-weighed (``first``'s explore order)."""
        self.full = full
        self.leaf_runs = leaf_runs
        self.fresh = full and meta.jobid not in schedule.view.job_vertices
        """Whether the job is new to the graph (its runs of leaves may be kept as pools)."""
        self.level = 0
        """The depth of the vertex being recorded (the writer's level)."""
        self.nslots = 0
        """Task slots recorded so far."""
        self.delta = 0
        """The fingerprint change of the subtree being recorded so far."""

    def vertex(
        self,
        uid: int,
        needs: int,
        excl: bool,
        emit_shadow: bool,
        excl_parent: bool,
        evaluation: Evaluation | None,
        to_parent: dict[str, int],
    ) -> int:
        """Record the job below ``uid`` (``needs`` of its units, exclusively or not; all of it under an exclusive
        type, ``emit_shadow``), adding its aggregates to ``to_parent`` and its fingerprint change to :attr:`delta`;
        ``evaluation``: the select walk's evaluation of ``uid``, whose marks are stamped now. Returns the number of
        vertices recorded."""
        state, schedule, view = self.state, self.schedule, self.view
        vertices = view.graph.vertices
        vertex = vertices[uid]
        exclusive_types = self.exclusive_types
        mod = emit_shadow or vertex.type in exclusive_types
        excl = excl or mod
        level = self.level = self.level + 1
        outer = self.delta
        self.delta = 0
        n_plans = 0
        aggregates: dict[str, int] = {}
        sequence = state.sequence
        kid_evals = None
        if evaluation is not None:
            state.apply_own(evaluation)
            kid_evals = evaluation.kids
        children: Iterable[tuple[int, int]]
        marked_now = state.marked_seq == sequence
        run = state.run_marks.get(uid) if marked_now else None
        if run is not None and (not mod or run.whole):
            # The run is all the edges marked below uid (and, when uid is held whole, all its children whole).
            n_plans += self._leaves(uid, run.leaves, aggregates, excl, run)
            children = ()
        elif mod or not marked_now:
            children = view.children(uid)
        else:
            edges = view.graph.edges
            marked = state.marked.get(uid, ())
            if len(marked) == 1:  # one marked child (a one-core job's path down): no sort
                (edge,) = marked
                children = ((edge, edges[edge].target),)
            else:
                children = [(edge, edges[edge].target) for edge in sorted(marked)]
        if children:
            edge_seq, edge_excl, edge_needs = state.edge_seq, state.edge_excl, state.edge_needs
            slot_leader = state.slot_leader
            leaves: list[tuple[int, int, int]] = []
            for edge, target in children:
                if edge_seq[edge] != sequence and not mod:
                    continue
                x = edge_excl[edge] or mod
                child = vertices[target]
                child_needs = child.size if mod else edge_needs[edge]
                if not child.out or not view.children(target):  # (a method call, not a bound method in a local)
                    if x or child.type in exclusive_types:  # a shared leaf records nothing
                        leaves.append((edge, target, child_needs))
                    continue
                if leaves:
                    n_plans += self._leaves(uid, leaves, aggregates, excl)
                    leaves = []
                child_eval = kid_evals.get(target) if kid_evals else None
                n_sub = self.vertex(target, child_needs, x, mod, excl, child_eval, aggregates)
                if n_sub > 0:
                    if edge in slot_leader and edge_seq[edge] == sequence:
                        self.nslots += 1
                    if self.reweigh:
                        self.delta += schedule.update_weight(edge, target, self.meta)
                    self.writer.edge(view.graph, edge)
                    n_plans += n_sub
            if leaves:
                n_plans += self._leaves(uid, leaves, aggregates, excl)
        meta = self.meta
        if excl:
            n_plans += 1
            if self.full:
                schedule.add_plan(uid, meta, needs)
        if n_plans > 0:
            own = hash((uid, meta.jobid, meta.at, meta.duration, int(meta.alloc_type), needs, excl))
            schedule.add_job_data(uid, meta, aggregates, own)
            self.delta += own
            total = view.prune_filters.total
            if vertex.type in total:
                used = vertex.size if excl else vertex.size - needs
                to_parent[vertex.type] = to_parent.get(vertex.type, 0) + used
            for type, count in aggregates.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + count
            self.writer.vertex(level, vertex, needs, excl)
        delta = self.delta
        if delta:
            view.bump(uid, delta)
        self.delta = outer + delta
        self.level = level - 1
        return n_plans

    def _leaves(
        self,
        source: int,
        leaves: list[tuple[int, int, int]],
        to_parent: dict[str, int],
        excl_parent: bool,
        run: LeafRun | None = None,
    ) -> int:
        """:meth:`vertex` for a run of exclusive leaves (edge, leaf, needs) of ``source``, in order: most of an
        allocation's vertices are its cores, so they are recorded in one loop (or, for a marked :class:`LeafRun`
        of a job new to the graph, as one pool), without the walk's bookkeeping for children, aggregate filters
        and span bounds, which a leaf does not have. Returns the count."""
        state, view, meta = self.state, self.view, self.meta
        jobid = meta.jobid
        total = view.prune_filters.total
        if run is None and excl_parent and self.fresh and self.leaf_runs and not view.graph.shared_children:
            run = state.run_of(source, leaves)  # a node's gpus next to its sockets, say
        if run is not None and self.fresh and source not in view.layouts:  # after the pools before it
            added = hash((run.signature, job_key(jobid, meta.at, meta.duration, meta.alloc_type)))
            pool = Pool(meta, run, added)
            view.pools.setdefault(source, []).append(pool)
            view.vertices_of_job(jobid).update(run.uids)
            for type, size in run.sizes.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + size
        else:
            if source in view.pools:  # they were recorded first
                view.settle_source(source)
            added = record_leaves(view, source, leaves, meta, self.full)
            vertices = view.graph.vertices
            for _edge, uid, _needs in leaves:
                vertex = vertices[uid]
                if vertex.type in total:
                    to_parent[vertex.type] = to_parent.get(vertex.type, 0) + vertex.size
        texts = None if run is None else run.texts
        self.writer.leaves(self.level + 1, view.graph, leaves, texts)
        if source in state.leads:
            sequence = state.sequence
            for edge, _leaf, _count in leaves:
                if edge in state.slot_leader and (run is not None or state.edge_seq[edge] == sequence):
                    self.nslots += 1
        self.delta += added
        return len(leaves)
