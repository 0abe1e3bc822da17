"""The update walk (Fluxion's ``dfu_impl_update.cpp``): record a match in the schedule and emit it to a writer.

It follows only the edges the select walk marked, adds the job's planner spans, exclusivity uses, tags and
aggregate-filter spans on the way up, re-weighs ``first``'s explore order, and writes each recorded vertex. Runs of
exclusive leaves are recorded in one loop, or as one pool when the job is new to the graph.

Functions of a :class:`~kubeflux.match.state.WalkState`. Must never choose resources or read a request.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubeflux.match.evaluation import Evaluation, LeafRun, Pool, job_key
from kubeflux.match.meta import Errno, JobMeta, MatchFailure
from kubeflux.match.schedule import record_leaves
from kubeflux.match.state import WalkState
from kubeflux.match.writers import Writer


def update(state: WalkState, writer: Writer, meta: JobMeta, *, full: bool = True) -> int:
    """Record the marked resources for ``meta`` and emit them; returns the number of slots.

    ``full=False`` is the replay of an allocation made elsewhere (``update``): the exclusive vertices already
    hold their planner spans, so only tags, exclusivity checkers and aggregate filters are recorded.
    """
    if state.root_seq != state.sequence:
        raise MatchFailure(Errno.EINVAL, "resource state wasn't properly set up for update")
    state._level = 0
    state._fresh = full and meta.jobid not in state.job_vertices
    if not full:
        state._settle()
    nslots = [0]
    root_vertex = state.graph.vertices[state.root]
    shadow = root_vertex.type in state.policy.exclusive_types
    evaluation = state.root_eval if full else None
    recorded = _upd_dfv(
        state,
        state.root,
        writer,
        state.root_needs,
        state.root_excl,
        meta,
        {},
        nslots,
        shadow,
        False,
        evaluation,
        [0],
        full,
    )
    if full and not recorded:
        # As Fluxion's update: a match whose walk records nothing fails (nothing it chose is exclusive, or its
        # choices lie below a vertex no mark leads to), rather than succeed holding nothing.
        raise MatchFailure(Errno.EBUSY)
    return nslots[0]


def _upd_dfv(
    state: WalkState,
    uid: int,
    writer: Writer,
    needs: int,
    excl: bool,
    meta: JobMeta,
    to_parent: dict[str, int],
    nslots: list[int],
    emit_shadow: bool,
    excl_parent: bool,
    evaluation: Evaluation | None,
    changed: list[int],
    full: bool = True,
) -> int:
    """Record the job below ``uid``; ``changed[0]`` accumulates the fingerprint change of the subtree."""
    vertices = state.graph.vertices
    vertex = vertices[uid]
    exclusive_types = state.policy.exclusive_types
    mod = emit_shadow or vertex.type in exclusive_types
    excl = excl or mod
    level = state._level = state._level + 1
    n_plans = 0
    aggregates: dict[str, int] = {}
    sequence = state.sequence
    kid_evals = None
    if evaluation is not None:
        state._apply_own(evaluation)
        kid_evals = evaluation.kids
    delta = [0]
    children: Iterable[tuple[int, int]]
    marked_now = state._marked_seq == sequence
    run = state._run_marks.get(uid) if marked_now else None
    if run is not None and (not mod or run.whole):
        # The run is all the edges marked below uid (and, when uid is held whole, all its children whole).
        n_plans += _upd_leaves(state, uid, run.leaves, writer, meta, aggregates, excl, delta, full, nslots, run)
        children = ()
    elif mod or not marked_now:
        children = state._kid_edges(uid)
    else:
        edges = state.graph.edges
        marked = state._marked.get(uid, ())
        if len(marked) == 1:  # one marked child (a one-core job's path down): no sort
            (edge,) = marked
            children = ((edge, edges[edge].target),)
        else:
            children = [(edge, edges[edge].target) for edge in sorted(marked)]
    if children:
        edge_seq, edge_excl, edge_needs = state.edge_seq, state.edge_excl, state.edge_needs
        slot_leader = state.slot_leader
        reweigh = state.policy.spec.stop_on_first
        leaves: list[tuple[int, int, int]] = []
        for edge, target in children:
            if edge_seq[edge] != sequence and not mod:
                continue
            x = edge_excl[edge] or mod
            child = vertices[target]
            child_needs = child.size if mod else edge_needs[edge]
            if not child.out or not state._kid_edges(target):  # (a method call, not a bound method in a local)
                if x or child.type in exclusive_types:  # a shared leaf records nothing
                    leaves.append((edge, target, child_needs))
                continue
            if leaves:
                n_plans += _upd_leaves(state, uid, leaves, writer, meta, aggregates, excl, delta, full, nslots)
                leaves = []
            child_eval = kid_evals.get(target) if kid_evals else None
            n_sub = _upd_dfv(
                state, target, writer, child_needs, x, meta, aggregates, nslots, mod, excl, child_eval, delta, full
            )
            if n_sub > 0:
                if edge in slot_leader and edge_seq[edge] == sequence:
                    nslots[0] += 1
                if reweigh:
                    delta[0] += state._update_weight(edge, target, meta)
                writer.edge(level, state.graph, edge, excl)
                n_plans += n_sub
        if leaves:
            n_plans += _upd_leaves(state, uid, leaves, writer, meta, aggregates, excl, delta, full, nslots)
    if excl:
        n_plans += 1
        if full:
            state._add_plan(uid, meta, needs)
    if n_plans > 0:
        own = hash((uid, meta.jobid, meta.at, meta.duration, int(meta.alloc_type), needs, excl))
        state._add_job_data(uid, meta, aggregates, own)
        delta[0] += own
        total = state.prune_filters.total
        if vertex.type in total:
            used = vertex.size if excl else vertex.size - needs
            to_parent[vertex.type] = to_parent.get(vertex.type, 0) + used
        for type, count in aggregates.items():
            if type in total:
                to_parent[type] = to_parent.get(type, 0) + count
        writer.vertex(level, vertex, needs, excl, excl_parent)
    if delta[0]:
        state._bump(uid, delta[0])
        changed[0] += delta[0]
    state._level = level - 1
    return n_plans


def _upd_leaves(
    state: WalkState,
    source: int,
    leaves: list[tuple[int, int, int]],
    writer: Writer,
    meta: JobMeta,
    to_parent: dict[str, int],
    excl_parent: bool,
    changed: list[int],
    full: bool,
    nslots: list[int],
    run: LeafRun | None = None,
) -> int:
    """:meth:`_upd_dfv` for a run of exclusive leaves (edge, leaf, needs) of ``source``, in order: most of an
    allocation's vertices are its cores, so they are recorded in one loop (or, for a marked :class:`LeafRun`
    of a job new to the graph, as one pool), without the walk's bookkeeping for children, aggregate filters
    and span bounds, which a leaf does not have. Returns the count."""
    jobid = meta.jobid
    total = state.prune_filters.total
    if run is None and excl_parent and state._fresh and state.leaf_runs and not state.graph.shared_children:
        run = state._run_of(source, leaves)  # a node's gpus next to its sockets, say
    if run is not None and state._fresh and source not in state._layouts:  # after the pools before it
        added = hash((run.signature, job_key(jobid, meta.at, meta.duration, meta.alloc_type)))
        pool = Pool(jobid, run, meta.at, meta.duration, meta.alloc_type, added)
        state._pools.setdefault(source, []).append(pool)
        state._job_vertices(jobid).update(run.uids)
        for type, size in run.sizes.items():
            if type in total:
                to_parent[type] = to_parent.get(type, 0) + size
    else:
        if source in state._pools:  # they were recorded first
            state._settle_source(source)
        added = record_leaves(state, source, leaves, jobid, meta.at, meta.duration, meta.alloc_type, full)
        vertices = state.graph.vertices
        for _edge, uid, _needs in leaves:
            vertex = vertices[uid]
            if vertex.type in total:
                to_parent[vertex.type] = to_parent.get(vertex.type, 0) + vertex.size
    writer.leaves(state._level + 1, state.graph, leaves, excl_parent, None if run is None else run.texts)
    if source in state._leads:
        sequence = state.sequence
        for edge, _leaf, _count in leaves:
            if edge in state.slot_leader and (run is not None or state.edge_seq[edge] == sequence):
                nslots[0] += 1
    changed[0] += added
    return len(leaves)
