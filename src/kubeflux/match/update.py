"""Replaying and partly releasing allocations given as resource sets (resource-query's ``update`` and
``partial-cancel``; Fluxion's ``resource_reader_jgf::update/partial_cancel`` and ``dfu_impl_t::update/remove``).

A *resource set* is the JGF a ``jgf`` match writer emits (text or an already decoded ``dict``); a partial release
also accepts an RFC 20 R (``{"execution": {"R_lite": [{"rank": "0-3", ...}]}}``), which names whole broker ranks.

Replay (:func:`replay`), in two phases as in Fluxion:

1. *read*: every JGF vertex must name a vertex of this graph (same paths and rank, same type, basename, id,
   name; its ``size`` is the amount held and may not exceed the vertex's size). An ``exclusive`` vertex gets a
   planner span for the job; a shared one must be free for the whole window. Every JGF edge must be an edge of
   the graph; it is marked with the amount and exclusivity of its target, as a match's select phase marks it.
2. *walk*: the update walk follows the marked edges without planning again (``full=False``): it
   records the job's tags, exclusivity checkers and subtree aggregate filters and emits the vertices to the
   writer, so the replayed job is indistinguishable from a matched one.

Everything is checked before anything changes: a refused resource set leaves no trace. A resource set must hold
the path from the containment root (Fluxion would plan its vertices and record nothing else, which only makes
sense for a traverser of another dominant subsystem).

Partial release (:func:`release`): the named vertices (or every vertex of the named ranks that the job holds) are
purged of the job (tag, exclusivity span, aggregate span, planner span). Their freed amounts are then taken off
the aggregate filters of their ancestors, deepest first; an ancestor whose aggregate span drains gives up its tag
and exclusivity span too. The job is fully released when the containment root no longer carries its tag.
A vertex under which the job still holds something keeps its tag and exclusivity span, though (see
:func:`release_held`).

An exclusive vertex that another job holds during the window (even shared) is refused, as a match would refuse
it; Fluxion's reader checks only the vertex's own planner.

A caller that already knows the graph vertices (the scheduler puts a pod onto the cores it names and releases
exactly those) uses :func:`replay_leaves` and :func:`release_vertices`: the same state changes, in the same order,
as replaying or releasing the JGF of those vertices, without writing, encoding and re-reading a document.

Two deliberate differences from Fluxion's JGF reader, both where Fluxion refuses the input: a JGF vertex whose
``size`` is smaller than the graph vertex's is replayed as that amount (Fluxion refuses it, so a partly allocated
memory pool could not be replayed); and a partial release may list vertices the job holds shared (without a
planner span, such as the cluster root in the job's own JGF): they are released through their aggregate spans
like any ancestor, so releasing a job with its own JGF works.

One where Fluxion accepts the input and corrupts its state: a partial release that names a vertex but not all the
job holds below it (a node without its cores), or that drains an ancestor's aggregate span while the job holds
a vertex below it the filters do not count (a gpu), leaves that vertex held by the job, as a shared ancestor is.
Fluxion drops the job's records there, so a later match takes the vertex as free and its update walk meets the
busy vertices below it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeflux.match import cancel as cancel_walk
from kubeflux.match import record as update_walk
from kubeflux.match.meta import JobMeta
from kubeflux.match.planner import PlannerError
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.writers import Writer
from kubeflux.resources.graph import CONTAINMENT, Graph, GraphFormatError
from kubeflux.resources.jgf import JgfDocument, JgfVertex, decode_idset, jgf_document

ResourceSet = str | bytes | Mapping[str, Any]
"""JGF or RFC 20 R, as JSON text or as a decoded object."""


class ResourceSetError(ValueError):
    """A resource set that is malformed or does not fit the graph or the job; the message says which part."""


@dataclass(slots=True)
class _Held:
    """One JGF vertex resolved to a graph vertex."""

    uid: int
    amount: int
    exclusive: bool


@dataclass(slots=True)
class _HeldSet:
    """A resource set resolved to the graph: what a replay records."""

    held: list[_Held]
    marks: list[tuple[int, _Held]]
    """(edge index, its target) for each edge to mark, as a match's select walk marks it."""
    root: _Held
    """The containment root's entry (the amount and exclusivity the update walk starts from)."""


# ---------------------------------------------------------------------------------------------------- parsing


def load_resource_set(rset: ResourceSet, *, source: str = "<resource set>") -> JgfDocument | frozenset[int]:
    """A JGF document, or the broker ranks an RFC 20 R names; ResourceSetError for anything else."""
    if isinstance(rset, Mapping):
        data: Any = dict(rset)
    else:
        try:
            data = json.loads(rset)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ResourceSetError(f"{source}: not valid JSON: {error}") from error
    if not isinstance(data, dict):
        raise ResourceSetError(f"{source}: a resource set must be a JSON object (JGF or RFC 20 R)")
    if "graph" in data:
        try:
            return jgf_document(data, source=source)
        except GraphFormatError as error:
            raise ResourceSetError(str(error)) from error
    if "execution" in data:
        return _r_lite_ranks(data["execution"], source)
    raise ResourceSetError(f"{source}: neither JGF (key 'graph') nor RFC 20 R (key 'execution')")


def load_jgf_set(rset: ResourceSet, *, source: str = "<resource set>") -> JgfDocument:
    document = load_resource_set(rset, source=source)
    if not isinstance(document, JgfDocument):
        raise ResourceSetError(f"{source}: a replayed allocation must be JGF (it names vertices, R names only ranks)")
    return document


def _r_lite_ranks(execution: Any, source: str) -> frozenset[int]:
    r_lite = execution.get("R_lite") if isinstance(execution, dict) else None
    if not isinstance(r_lite, list):
        raise ResourceSetError(f"{source}: execution.R_lite must be an array")
    ranks: set[int] = set()
    for position, entry in enumerate(r_lite):
        if not isinstance(entry, dict) or not isinstance(entry.get("rank"), str):
            raise ResourceSetError(f"{source}: execution.R_lite[{position}].rank must be an idset string")
        try:
            ranks.update(decode_idset(entry["rank"], f"{source}: execution.R_lite[{position}].rank"))
        except GraphFormatError as error:
            raise ResourceSetError(str(error)) from error
    return frozenset(ranks)


def _resolve(schedule: Schedule, record: JgfVertex, source: str) -> int:
    """The graph vertex a JGF vertex stands for (Fluxion's ``find_vtx``)."""
    graph = schedule.view.graph
    where = f"{source}: node {record.key!r}"
    uid: int | None = None
    for path in record.paths.values():
        candidate = graph.uid_at(path)
        if candidate is None or graph.vertices[candidate].rank != record.rank:
            raise ResourceSetError(f"{where}: no vertex at {path} with rank {record.rank} in the resource graph")
        if uid is not None and uid != candidate:
            raise ResourceSetError(f"{where}: its paths name different vertices")
        uid = candidate
    if uid is None:
        raise ResourceSetError(f"{where}: no paths")
    vertex = graph.vertices[uid]
    differences = [
        f"{name}=({mine!r}, {theirs!r})"
        for name, mine, theirs in (
            ("type", vertex.type, record.type),
            ("basename", vertex.basename, record.basename),
            ("id", vertex.id, record.id),
            ("name", vertex.name, record.name),
            ("paths", vertex.paths, record.paths),
        )
        if mine != theirs
    ]
    if record.size > vertex.size:
        differences.append(f"size=({vertex.size}, {record.size})")
    if differences:
        raise ResourceSetError(f"{where}: inconsistent with the resource graph: {' '.join(differences)}")
    return uid


# ---------------------------------------------------------------------------------------------------- replay


def replay(
    schedule: Schedule, state: WalkState, writer: Writer, document: JgfDocument, meta: JobMeta, policy: MatchPolicy
) -> None:
    """Record the allocation ``document`` describes for ``meta`` and emit it to ``writer``.

    ``meta.alloc_type`` says whether the spans are allocations or reservations. Raises ResourceSetError, with
    the graph unchanged, if a vertex or edge is not in the graph or a vertex is not free during the window.
    ``policy``: the match policy the job is recorded under (a node-exclusive one holds its nodes whole).
    """
    view = schedule.view
    source = document.source
    graph = view.graph
    skipped = document.free_ranks or frozenset()
    held: dict[str, _Held] = {}
    for record in document.vertices:
        if record.key in held:
            raise ResourceSetError(f"{source}: duplicate JGF node id {record.key!r}")
        uid = _resolve(schedule, record, source)
        if record.rank not in skipped:
            held[record.key] = _Held(uid, record.size, record.exclusive)

    marks: list[tuple[int, _Held]] = []
    root_mark: _Held | None = None
    for position, edge in enumerate(document.edges):
        parent, child = held.get(edge.source), held.get(edge.target)
        if parent is None or child is None:
            if document.free_ranks is not None:
                continue
            raise ResourceSetError(f"{source}: edges[{position}] ({edge.source} -> {edge.target}): no such node")
        if parent.uid == view.root and root_mark is None:
            root_mark = parent
        index = graph.find_out_edge(parent.uid, child.uid)
        if index is None:
            raise ResourceSetError(
                f"{source}: edges[{position}]: {graph.vertices[parent.uid].name} -> "
                f"{graph.vertices[child.uid].name} is not an edge of the resource graph"
            )
        marks.append((index, child))

    if root_mark is None:
        root = graph.vertices[view.root].name
        raise ResourceSetError(
            f"{source}: no edge leaves the root {root}: a resource set must hold the path from the root"
            if held
            else f"{source}: the resource set holds no vertex"
        )
    _record(schedule, state, writer, _HeldSet(list(held.values()), marks, root_mark), meta, policy)


def replay_leaves(
    schedule: Schedule, state: WalkState, writer: Writer, leaves: Iterable[int], meta: JobMeta, policy: MatchPolicy
) -> None:
    """:func:`replay` of the resource set that holds the vertices ``leaves`` exclusively and whole, and the path
    from the root to each of them shared: the same state as replaying the JGF of those vertices, without writing
    and reading that document. Raises ResourceSetError, with the graph unchanged, if a leaf is not in the graph
    or not free during the window."""
    view = schedule.view
    graph = view.graph
    exclusive = set(leaves)
    _check_uids(graph, exclusive, "")
    held: dict[int, _Held] = {}
    for leaf in exclusive:
        uid = leaf
        while uid != -1 and uid not in held:
            vertex = graph.vertex(uid)  # (a reserved leaf: its node's leaves made)
            if vertex.removed:
                raise ResourceSetError(f"{vertex.name} is not in the resource graph")
            held[uid] = _Held(uid, vertex.size, uid in exclusive)
            uid = vertex.parent
    root = held.get(view.root)
    if root is None:
        raise ResourceSetError("the resource set holds no vertex" if not held else "it does not reach the root")
    ordered = [held[uid] for uid in sorted(held)]
    marks = [(_parent_edge(schedule, item.uid), item) for item in ordered if item.uid != view.root]
    _record(schedule, state, writer, _HeldSet(ordered, marks, root), meta, policy)


def _check_uids(graph: Graph, uids: Iterable[int], prefix: str) -> None:
    """ResourceSetError (its message after ``prefix``) for a vertex uid that is not one of ``graph``'s."""
    count = len(graph.vertices)
    for uid in uids:
        if not 0 <= uid < count:
            raise ResourceSetError(f"{prefix}no vertex with uid {uid} in the resource graph")


def _parent_edge(schedule: Schedule, uid: int) -> int:
    """The containment edge into ``uid`` from its parent."""
    graph = schedule.view.graph
    parent = graph.vertices[uid].parent
    for index in graph.in_edges(uid):
        edge = graph.edges[index]
        if edge.source == parent and edge.subsystem == CONTAINMENT:
            return index
    raise ResourceSetError(f"{graph.vertices[uid].name} has no containment edge from its parent")


def _record(
    schedule: Schedule, state: WalkState, writer: Writer, held: _HeldSet, meta: JobMeta, policy: MatchPolicy
) -> None:
    """Plan what ``held`` holds (all or nothing), mark its edges, then record the job with the update walk."""
    _plan(schedule, held.held, meta, policy)
    state.next_sequence()
    for index, child in held.marks:
        state.mark_edge(index, child.amount, child.exclusive)
    state.root_needs = held.root.amount
    state.root_excl = held.root.exclusive
    state.root_seq = state.sequence
    update_walk.update(state, schedule, writer, meta, policy, full=False)


def _plan(schedule: Schedule, held: Iterable[_Held], meta: JobMeta, policy: MatchPolicy) -> None:
    """Plan the exclusive vertices; check that the shared ones are free. All or nothing.

    Under a node-exclusive policy the update walk holds each node on the path whole, everything below it
    included, as a match would: a node another job uses during the window is refused, as select passes over it.
    """
    view = schedule.view
    vertices = view.graph.vertices
    at, end = meta.at, meta.at + meta.duration
    whole = policy.spec.node_exclusive
    planned: list[int] = []
    held = list(held)
    try:
        below_whole: set[int] = set()
        for item in held:
            if whole and vertices[item.uid].type == "node":
                if view.busy(item.uid, at, end):
                    raise ResourceSetError(
                        f"{vertices[item.uid].name} is used by another job during [{at}, {end}), and under the "
                        f"{policy.spec.name} policy a replay holds its nodes whole"
                    )
                # The update walk records the node and everything below it, named or not, whole: plan them so.
                for uid in _subtree(schedule, item.uid):
                    try:
                        schedule.plan_span(uid, meta, vertices[uid].size)
                    except PlannerError as error:
                        raise ResourceSetError(
                            f"{vertices[uid].name} is not free during [{at}, {end}): {error}"
                        ) from error
                    planned.append(uid)
                    below_whole.add(uid)
        for item in held:
            if item.uid in below_whole:
                continue
            if item.exclusive:
                if view.busy(item.uid, at, end):
                    raise ResourceSetError(f"{vertices[item.uid].name} is held by another job during [{at}, {end})")
                try:
                    schedule.plan_span(item.uid, meta, item.amount)
                except PlannerError as error:
                    name = vertices[item.uid].name
                    raise ResourceSetError(f"{name} is not free during [{at}, {end}): {error}") from error
                planned.append(item.uid)
            else:
                plan = view.plans.get(item.uid)
                if plan is not None and plan.avail_resources_during(at, meta.duration) < vertices[item.uid].size:
                    raise ResourceSetError(f"{vertices[item.uid].name} is not free during [{at}, {end})")
    except ResourceSetError:
        for uid in planned:
            schedule.unplan(uid, meta.jobid)
        raise


def _subtree(schedule: Schedule, uid: int) -> list[int]:
    """``uid`` and every vertex below it in the walked subsystem."""
    found = [uid]
    for vertex in found:
        found.extend(child for _, child in schedule.view.children(vertex))
    return found


# ---------------------------------------------------------------------------------------------------- release


def release(schedule: Schedule, state: WalkState, jobid: int, resources: JgfDocument | frozenset[int]) -> bool:
    """Release part of ``jobid``'s allocation; True when nothing of the job is left (it is then fully released).

    ``resources`` is a JGF document of vertices the job holds, or a set of broker ranks (every vertex of those
    ranks that the job holds is released). Raises ResourceSetError, with the graph unchanged, if a vertex is
    not in the graph or not held by the job, or a rank is unknown.
    """
    view = schedule.view
    graph = view.graph
    if isinstance(resources, JgfDocument):
        skipped = resources.free_ranks or frozenset()
        named = []
        for record in resources.vertices:
            uid = _resolve(schedule, record, resources.source)
            if record.rank not in skipped:
                named.append(uid)
        return release_vertices(schedule, state, jobid, named, source=resources.source)
    purge: list[int] = []
    for rank in sorted(resources):
        uids = graph.by_rank.get(rank)
        if not uids:
            raise ResourceSetError(f"rank {rank} is not in the resource graph")
        purge.extend(uid for uid in uids if jobid in view.tags.get(uid, ()))
    if not purge:
        raise ResourceSetError(f"ranks {sorted(resources)} hold nothing that job {jobid} holds: nothing to release")
    return release_held(schedule, state, jobid, purge)


def release_vertices(
    schedule: Schedule, state: WalkState, jobid: int, uids: Iterable[int], *, source: str = "<resource set>"
) -> bool:
    """:func:`release` of the graph vertices ``uids`` (the vertices a JGF document of them would name, without
    writing and reading it); True when nothing of the job is left. Vertices the job holds shared are released
    through their aggregate spans. Raises ResourceSetError, with the graph unchanged, if the job does not hold
    one of them or holds none exclusively; ``source`` names the resource set in the message."""
    view = schedule.view
    graph = view.graph
    uids = list(uids)
    _check_uids(graph, uids, f"{source}: ")
    purge: list[int] = []
    named: set[int] = set()
    x_uses, allocations = view.x_uses, view.allocations
    for uid in uids:
        uses = x_uses.get(uid)
        if uses is None or jobid not in uses:
            raise ResourceSetError(f"{source}: job {jobid} does not hold {graph.vertex(uid).name}")
        spans = allocations.get(uid)
        if spans is None or jobid not in spans:
            continue  # held shared (an ancestor of what it holds): released with its aggregate span
        if uid not in named:
            named.add(uid)
            purge.append(uid)
    if not purge:
        raise ResourceSetError(f"{source} names nothing that job {jobid} holds: nothing to release")
    if _releases_all(schedule, jobid, purge):
        cancel_walk.cancel(
            schedule, state, jobid
        )  # the same end state, without taking each ancestor's share off piece by piece
        return True
    return release_held(schedule, state, jobid, purge)


def _releases_all(schedule: Schedule, jobid: int, purge: list[int]) -> bool:
    """Whether ``purge`` names every vertex ``jobid`` holds exclusively (a pod's whole job, for instance)."""
    view = schedule.view
    allocations = view.allocations
    named = set(purge)
    return jobid in view.tags.get(view.root, ()) and all(
        uid in named for uid in view.job_vertices.get(jobid, ()) if jobid in allocations.get(uid, ())
    )


def release_held(schedule: Schedule, state: WalkState, jobid: int, uids: Iterable[int]) -> bool:
    """Purge ``jobid`` from every vertex of ``uids``, then take what each held off the aggregate spans of its own
    ancestors (deepest first; an ancestor purged itself has none left); True if nothing of the job is left.

    A vertex keeps the job's tag and exclusivity record while the job still holds a vertex below it: one of
    ``uids`` with such a vertex below (a node held whole, named without all of its cores) gives up only its own
    planner span and stays held like a shared ancestor, and an ancestor whose aggregate span drains keeps them
    while the job holds a vertex below it that the filters do not count (a gpu, say). Fluxion drops them in both
    cases, and a later match then takes the vertex as free and finds what is below it busy. Only the root
    draining ends the job, as in Fluxion (what is left is purged then). An ancestor kept so, with no aggregate
    span left, keeps the job until it ends, as Fluxion keeps one that never had an aggregate span for it."""
    view = schedule.view
    vertices = view.graph.vertices
    uids = list(uids)
    above = _above_held(schedule, jobid, set(uids))
    reductions: dict[int, dict[str, int]] = {}
    depth: dict[int, int] = {}
    view.released_in_part.add(jobid)
    for uid in uids:
        amount = _let_go(schedule, state, uid, jobid) if uid in above else _purge(schedule, state, uid, jobid)
        type = vertices[uid].type
        chain = []
        ancestor = vertices[uid].parent
        while ancestor != -1:
            chain.append(ancestor)
            ancestor = vertices[ancestor].parent
        for level, ancestor in enumerate(reversed(chain)):
            depth[ancestor] = level
            totals = reductions.setdefault(ancestor, {})
            totals[type] = totals.get(type, 0) + amount
    above.discard(view.root)
    for ancestor in sorted(reductions, key=lambda uid: -depth[uid]):
        _reduce(schedule, ancestor, jobid, reductions[ancestor], above)

    if jobid in view.tags.get(view.root, ()):
        return False
    for uid in holding(schedule, jobid):
        _purge(schedule, state, uid, jobid)
    view.job_vertices.pop(jobid, None)
    view.released_in_part.discard(jobid)
    return True


def _above_held(schedule: Schedule, jobid: int, released: set[int]) -> set[int]:
    """The vertices above a vertex that holds a planner span of ``jobid`` and is not among ``released``."""
    view = schedule.view
    vertices = view.graph.vertices
    above: set[int] = set()
    for uid in view.job_vertices.get(jobid, ()):
        if uid in released or not view.holds_span(uid, jobid):
            continue
        parent = vertices[uid].parent
        while parent != -1 and parent not in above:
            above.add(parent)
            parent = vertices[parent].parent
    return above


def _purge(schedule: Schedule, state: WalkState, uid: int, jobid: int) -> int:
    """Remove everything ``jobid`` holds on ``uid``; return the amount its planner span held."""
    view = schedule.view
    tags = view.tags.get(uid)
    if tags is not None:
        tags.discard(jobid)
    schedule.drop_use(uid, jobid)
    aggregate = view.job2span.get(uid, {}).pop(jobid, None)
    if aggregate is not None:
        view.subplans[uid].rem_span(aggregate)
    return _let_go(schedule, state, uid, jobid)


def _let_go(schedule: Schedule, state: WalkState, uid: int, jobid: int) -> int:
    """Remove ``jobid``'s own hold on ``uid`` (its planner span and slot lead); return the amount the span held."""
    state.unlead(uid)
    return schedule.unplan(uid, jobid)


def _reduce(schedule: Schedule, uid: int, jobid: int, counts: Mapping[str, int], above: set[int]) -> None:
    """Take ``counts`` off the job's aggregate span on ancestor ``uid``; a drained span releases the vertex unless
    the job holds the vertex itself (a planner span of its own) or a vertex below it (one of ``above``).

    No fingerprint token of its own: a vertex below it gave up a planner span just before, and that change
    already reached the fingerprint of every ancestor (cached evaluations of them are not reused).
    """
    view = schedule.view
    tags = view.tags.get(uid)
    subplan = view.subplans.get(uid)
    spans = view.job2span.get(uid, {})
    if tags is None or jobid not in tags or subplan is None or jobid not in spans:
        return
    span = spans[jobid]
    types = subplan.resource_types
    amounts = {type: min(count, subplan.span_planned(span, type)) for type, count in counts.items() if type in types}
    drained = subplan.reduce_span(span, amounts)
    if drained:
        del spans[jobid]
        # a vertex held whole (a node) stays held until it is named
        if not view.holds_span(uid, jobid) and uid not in above:
            tags.discard(jobid)
            schedule.drop_use(uid, jobid)


def holding(schedule: Schedule, jobid: int) -> list[int]:
    """Every vertex that still holds some state of ``jobid``."""
    view = schedule.view
    tables: list[Mapping[int, Any]] = [
        view.tags,
        view.x_uses,
        view.job2span,
        view.allocations,
        view.reservations,
    ]
    candidates = view.job_vertices.get(jobid, ())
    return sorted(uid for uid in candidates if any(jobid in table.get(uid, ()) for table in tables))
