"""The schedule of one graph as the walks read it: what every walk of the engine reads, in tables by vertex uid or edge.

Planner spans per vertex (the time axis of its units), exclusivity uses, job tags, the aggregate filters of
subtrees (Fluxion's pruning filters), runs of leaves recorded as one pool, and per vertex a fingerprint of its
subtree's state, which a cached evaluation is checked against. The graph itself holds only structure.

:class:`ScheduleView` is what the select walk is given (:class:`~kubeflux.match.traverser.Traverser` holds one, and
no :class:`~kubeflux.match.schedule.Schedule`, which holds the view, never the other way round): the tables, the
questions the walk asks of them (is a vertex free, held, within its subtree's filter), and the structure it walks
(children, parents, ``first``'s explore order), found once and kept. The one thing reading may write is a pool of
leaves (:meth:`ScheduleView.settle_source`): the same records, written leaf by leaf when a walk needs them so. The
``*_table`` attributes are the tables as they stand, pools not yet written (what the walks read, settling a
source's pools before its leaves); the properties of the same names without ``_table`` settle every pool first.
Recording and releasing jobs, status and graph changes are :class:`~kubeflux.match.schedule.Schedule`'s, which the
update and cancel walks are given.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import attrgetter, lt
from typing import Any

from kubeflux.match.evaluation import BLOCK, Layout, Pool, job_key
from kubeflux.match.meta import AllocType, JobMeta, PruningFilters
from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import Planner, PlannerRangeError, UnitPlanner
from kubeflux.match.policy import PolicySpec
from kubeflux.match.ranked import Below
from kubeflux.match.request import Request
from kubeflux.resources.graph import CONTAINMENT, Graph, Status, Vertex, paused_gc

WEIGHT_MAX = 2**64 - 1


class ScheduleView:
    """The tables of one graph's schedule and the questions the walks ask of them (see the module docstring)."""

    dominant: str = CONTAINMENT
    """The subsystem walked (:class:`~kubeflux.match.subsystems.SubsystemView` walks others)."""

    def __init__(self, graph: Graph, prune: PruningFilters, base: int, duration: int) -> None:
        self.graph = graph
        self.prune_filters = prune
        self.base = base
        self.horizon = duration
        self.root = graph.roots[self.dominant]
        n_edges = len(graph.edges)
        self.edge_weight = [WEIGHT_MAX] * n_edges
        self._uid_objects: list[Any] = []
        self.plan_table: dict[int, Planner] = {}
        self.allocation_table: dict[int, dict[int, int]] = {}
        self.reservation_table: dict[int, dict[int, int]] = {}
        self.job_vertices: dict[int, set[int]] = {}
        """Per job, the vertices where it was recorded (a superset of those still holding some of its state)."""
        self.released_in_part: set[int] = set()
        """Jobs released in part: a vertex may have let go of the job while one below it still holds it, out of
        the cancel walk's reach (see :func:`~kubeflux.match.cancel.cancel`)."""
        self.use_table: dict[int, dict[int, tuple[int, int, int]]] = {}
        self.tag_table: dict[int, set[int]] = {}
        self.pools: dict[int, list[Pool]] = {}
        """Per vertex, the jobs' records on runs of its leaves not yet written leaf by leaf."""
        self.subplans: dict[int, MultiPlanner] = {}
        self.job2span: dict[int, dict[int, int]] = {}
        self.status_epoch = 0
        """Counts the status changes (:meth:`Schedule.mark`)."""
        self.nodes_up = sum(1 for uid in graph.by_type.get("node", ()) if graph.vertices[uid].status == Status.UP)
        self.fp = [0] * len(graph.vertices)
        """Per vertex, a fingerprint of the scheduling state of its subtree (a sum of hashes of its spans,
        statuses and edge weights); a cached :class:`Evaluation` is valid while it is unchanged."""
        self._kids: dict[int, list[tuple[int, int]]] = {}
        self._parent_edges: dict[int, int] = {}
        self._ids_above: bool | None = None
        """Whether no vertex the walks reach has an id below -1 (see :meth:`positive_scores`), found
        by the walk that primes the aggregate filters; None until then."""
        self._out_types: dict[int, set[str]] = {}
        self.layouts: dict[int, Layout] = {}
        """Per wide vertex, the sum of its children's fingerprints per block (kept by :meth:`bump`)."""
        self.kid_pos: dict[int, int] = {}
        self._by_weight: dict[int, tuple[list[tuple[int, int]] | None, list[tuple[int, int]]]] = {}
        """Per vertex, its children heaviest first (``first``'s explore order) with their sort keys, kept in order
        as edge weights change. The keys are None while every child still has the weight in
        :attr:`_uniform_weight`."""
        self._uniform_weight: dict[int, int] = {}
        self._leaf_families: dict[int, str] = {}
        """Per vertex, the type of its children when they are all leaves of one type, else "" (see
        :meth:`leaf_family`)."""
        self._nodes_within: dict[int, int] = {}
        """Per vertex whose status was set, the node vertices in its subtree (until the graph changes)."""
        self.below_ranges: dict[tuple[bool, bool], dict[int, Below]] = {}
        """Per (node-centric, down to the nodes only), what was found below vertices for the early stops of wide
        walks (:func:`~kubeflux.match.ranked.leaf_ranges`), kept until the structure below them changes."""
        self.bounds: dict[int, list[int]] = {}
        """Per vertex, the starts and ends of the spans in its subtree (sorted, with repeats): an evaluation
        made for one time window still holds for another if no bound lies where the window's ends moved."""
        graph.on_made.append(self._made)
        with paused_gc():
            prime(self, self.root)

    @property
    def plans(self) -> dict[int, Planner]:
        """Per vertex, its planner (the time axis of its units), for the vertices that have held a span."""
        self.settle()
        return self.plan_table

    @property
    def allocations(self) -> dict[int, dict[int, int]]:
        """Per vertex, the allocations holding it: jobid -> span id in its planner."""
        self.settle()
        return self.allocation_table

    @property
    def reservations(self) -> dict[int, dict[int, int]]:
        """Per vertex, the reservations holding it: jobid -> span id in its planner."""
        self.settle()
        return self.reservation_table

    @property
    def x_uses(self) -> dict[int, dict[int, tuple[int, int, int]]]:
        """Per vertex, the jobs whose allocation or reservation includes it: jobid -> (start, end, hash).
        Fluxion's exclusivity checker (a planner of 2^30 units, one per job); ``hash`` is the job's share of
        the vertex's fingerprint."""
        self.settle()
        return self.use_table

    @property
    def tags(self) -> dict[int, set[int]]:
        """Per vertex, the jobs recorded on it."""
        self.settle()
        return self.tag_table

    def uid_objects(self) -> list[Any]:
        """Per vertex, its uid as the graph holds it (:attr:`Vertex.uid`): the one int object that the tables by
        vertex store as their key.

        Compiled code (mypyc) holds an ``int`` unboxed and makes a new int object at each store into a dict, set,
        list or tuple, where the pure sources store the object they were given: without this, every table keyed
        by vertex would hold its own copy of each key (32 bytes, a million of them at 2,000 nodes of 64 cores).
        For the same reason the code that records a job keeps its id and window as ``Any`` locals, boxed once."""
        objects = self._uid_objects
        vertices = self.graph.vertices
        if len(objects) < len(vertices):
            objects.extend(map(attrgetter("uid"), vertices[len(objects) :]))
        return objects

    def _made(self, uids: list[int]) -> None:
        """Reserved leaves were made (:meth:`Graph.make_leaves`): their uid objects replace the placeholder's."""
        objects = self._uid_objects
        for uid in uids:
            if uid < len(objects):
                objects[uid] = uid

    def settle(self) -> None:
        """Write every pool leaf by leaf: whatever reads or changes records outside the match and cancel walks
        sees them whole."""
        while self.pools:
            self.settle_source(next(iter(self.pools)))

    def pools_matter(self, source: int, meta: JobMeta, children: list[tuple[int, int]]) -> bool:
        """Whether visiting ``source``'s leaves for ``meta`` could find other answers with its pools written: a
        pool's spans meet the window, or an allocation's mere presence counts (a new allocation avoids any
        vertex allocated exclusively), or the leaves' fingerprints are summed per block (a wide vertex)."""
        if source in self.layouts or len(children) >= 2 * BLOCK:
            return True
        at, end = meta.at, meta.at + meta.duration
        allocating = meta.alloc_type == AllocType.ALLOCATE
        for pool in self.pools[source]:
            held = pool.meta
            if held.at < end and at < held.at + held.duration:
                return True
            if allocating and held.alloc_type == AllocType.ALLOCATE:
                return True
        return False

    def settle_source(self, source: int) -> None:
        """Write the pools of ``source``'s leaves leaf by leaf (before anything reads those leaves' records)."""
        for pool in self.pools.pop(source, ()):
            record_leaves(self, source, pool.run.leaves, pool.meta, True, pool.total)

    def _children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of a vertex's containment out-edges, in order (a node's reserved leaves made: the
        walk descends into it)."""
        if uid in self.graph.reserved:
            self.graph.make_leaves(uid)
        edges = self.graph.edges
        out: list[Any] = self.graph.vertices[uid].out  # Any: the graph's int objects, not new ones (uid_objects)
        if not self.graph.other_edges:  # (every out-edge is a child's: 5,000 nodes of 64 cores are primed at start)
            return [(index, edges[index].target) for index in out]
        records: list[Any] = [edges[index] for index in out]  # (lists, not a loop: a fresh vertex's first visit)
        return [
            (index, edge.target)
            for index, edge in zip(out, records, strict=True)
            if edge.subsystem == CONTAINMENT and edge.relation == "contains"
        ]

    def children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of ``uid``'s children in the walked subsystem, in edge order (do not modify)."""
        kids = self._kids.get(uid)
        if kids is None:
            kids = self._kids[self.uid_objects()[uid]] = self._children(uid)
        return kids

    def walk_parent(self, uid: int) -> int:
        """``uid``'s parent in the walked subsystem."""
        return self.graph.vertices[uid].parent

    def walk_parents(self, uid: int) -> list[int]:
        """Every vertex the walk reaches ``uid`` from: in a containment DAG a vertex may have several (in a tree,
        its one parent)."""
        graph = self.graph
        if not graph.shared_children:
            parent = graph.vertices[uid].parent
            return [] if parent == -1 else [parent]
        parents = []
        for index in graph.in_edges(uid):
            edge = graph.edges[index]
            if edge.subsystem == CONTAINMENT and edge.relation == "contains":
                parents.append(edge.source)
        return parents

    def parent_edge(self, uid: int) -> int:
        """The containment edge into ``uid`` from its parent (found once: a rack's node is one of 64 out-edges)."""
        found = self._parent_edges.get(uid)
        if found is not None:
            return found
        graph = self.graph
        parent = graph.vertices[uid].parent
        for index in graph.vertices[parent].out:
            edge = graph.edges[index]
            if edge.target == uid and edge.subsystem == CONTAINMENT and edge.relation == "contains":
                self._parent_edges[uid] = index
                return index
        raise KeyError(uid)

    def walk_parent_edge(self, uid: int) -> int:
        """The edge into ``uid`` from its parent in the walked subsystem, -1 for the root."""
        return -1 if self.graph.vertices[uid].parent == -1 else self.parent_edge(uid)

    def has_children(self, uid: int) -> bool:
        return bool(self.children(uid))

    def _prime_leaf(self, vertex: Vertex) -> bool:
        """Whether a vertex without children has its type tracked as a leaf type by the root's filter."""
        return True

    def avail(self, uid: int, at: int, duration: int) -> int:
        plan = self.plan_table.get(uid)
        if plan is None:
            return self.graph.vertices[uid].size
        return plan.avail_resources_during(at, duration)

    def _x_busy(self, uid: int, at: int, duration: int) -> bool:
        """Whether any job holds ``uid`` during ``[at, at + duration)``."""
        uses = self.use_table.get(uid)
        if not uses:
            return False
        end = at + duration
        # A loop, not any() over a generator (ruff's SIM110): this runs on every leaf visit, and is faster.
        for start, stop, _share in uses.values():  # noqa: SIM110
            if start < end and at < stop:
                return True
        return False

    def held(self, meta: JobMeta, uid: int) -> bool:
        """Whether another job holds ``uid`` or anything below it during ``meta``'s window, as far as a vertex
        wanted exclusively cares (an allocation counts whenever it is, for a new allocation)."""
        if meta.alloc_type == AllocType.ALLOCATE and self.allocation_table.get(uid):
            return True
        return self._x_busy(uid, meta.at, meta.duration)

    def by_subplan(self, meta: JobMeta, uid: int, resource: Request) -> bool:
        """Whether ``uid``'s aggregate filter has what ``resource`` asks below it during ``meta``'s window."""
        subplan = self.subplans.get(uid)
        if subplan is None or not resource.user_data:
            return True
        counts = [resource.user_data.get(type, 0) for type in subplan.resource_types]
        try:
            return subplan.avail_during(meta.at, meta.duration, counts)
        except PlannerRangeError:
            return False

    def busy(self, uid: int, at: int, end: int) -> bool:
        """Whether a job holds ``uid`` or something below it during ``[at, end)``."""
        self.settle()
        return self._x_busy(uid, at, end - at)

    def holds_span(self, uid: int, jobid: int) -> bool:
        """Whether ``jobid`` has a planner span on ``uid`` (an allocation or a reservation)."""
        return jobid in self.allocations.get(uid, ()) or jobid in self.reservations.get(uid, ())

    def root_subplan(self) -> MultiPlanner:
        return self.subplans[self.root]

    def slot_fits(self, vertex: Vertex, slot: Request) -> bool:
        """Whether ``vertex`` has a child of each type the slot asks. Found by a scan that stops when they are
        all seen (a node's first children are cores), so a node's first visit does not list its 64 children;
        the set of its children's types is kept only when the scan went through them all."""
        types = self._out_types.get(vertex.uid)
        if types is None and vertex.uid in self.graph.reserved:
            types = self._out_types[vertex.uid] = {kind for kind, _ in self.graph.reserved[vertex.uid].kinds()}
        if types is None:
            wanted = {child.type for child in slot.with_}
            graph = self.graph
            vertices, edges = graph.vertices, graph.edges
            for i in vertex.out:
                wanted.discard(vertices[edges[i].target].type)
                if not wanted:
                    return True
            types = self._out_types[vertex.uid] = {vertices[edges[i].target].type for i in vertex.out}
        # A loop, not all() over a generator (ruff's SIM110): this runs at every vertex a slot passes.
        for child in slot.with_:  # noqa: SIM110
            if child.type not in types:
                return False
        return True

    def leaf_family(self, source: int, children: list[tuple[int, int]]) -> str | None:
        """The type of ``source``'s children if they are all leaves (no out-edges) of one type, else None."""
        family = self._leaf_families.get(source)
        if family is None:
            vertices = self.graph.vertices
            family = vertices[children[0][1]].type
            for _edge, target in children:
                vertex = vertices[target]
                if vertex.out or vertex.type != family:
                    family = ""
                    break
            self._leaf_families[source] = family
        return family or None

    def heaviest_first(self, source: int, children: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``first``'s explore order of ``source``'s children: heaviest edge, then highest uniq_id, first."""
        known = self._by_weight.get(source)
        if known is None:
            weight = self.edge_weight
            vertices = self.graph.vertices
            kids = [vertices[target] for _edge, target in children]
            ids = [vertex.uniq_id for vertex in kids]
            weights = [weight[edge] for edge, _target in children]
            uniform = weights[0]
            # (comparisons mapped over the lists, not a loop: a fresh vertex's first visit makes this order)
            if weights.count(uniform) == len(weights) and ids[0] > -1 and all(map(lt, ids, ids[1:])):
                # Equal weights and ascending uniq_ids (a freshly read graph): the order is the children reversed,
                # and the sort keys are made only if a weight changes (see _reorder).
                family = kids[0].type
                if any([vertex.out for vertex in kids]) or any([vertex.type != family for vertex in kids]):
                    family = ""
                known = self._by_weight[source] = (None, children[::-1])
                self._uniform_weight[source] = uniform
                self._leaf_families.setdefault(source, family)
                return known[1]
            # uniq_ids differ, so the keys never tie and the edges are never compared
            keyed = sorted([((-weight[edge], -vertices[target].uniq_id), edge, target) for edge, target in children])
            order = [(edge, target) for _, edge, target in keyed]
            known = self._by_weight[source] = ([key for key, _, _ in keyed], order)
        return known[1]

    def positive_scores(self, spec: PolicySpec) -> bool:
        """Whether every score a policy of ``spec`` gives a vertex is positive: not scored by performance class, and
        no vertex id below -1 (a score is MATCH_MET, plus node factors of (id + 2) * 10000 or more, plus id + 1)."""
        if spec.performance_class:
            return False
        if self._ids_above is None:
            self._ids_above = all(vertex.id >= -1 for vertex in self.graph.vertices)
        return self._ids_above

    def new_plan(self, uid: int) -> Planner:
        """``uid``'s planner, made when it first holds a span (a one-unit vertex keeps a small table)."""
        vertex = self.graph.vertices[uid]
        kind = UnitPlanner if vertex.size == 1 else Planner
        plan = self.plan_table[self.uid_objects()[uid]] = kind(vertex.size, self.base, self.horizon, vertex.type)
        return plan

    def span_table(self, alloc_type: AllocType) -> dict[int, dict[int, int]] | None:
        """Where a span of this kind is listed per vertex and job (None for a satisfiability test)."""
        if alloc_type == AllocType.ALLOCATE:
            return self.allocation_table
        if alloc_type == AllocType.ALLOCATE_ORELSE_RESERVE:
            return self.reservation_table
        return None

    def vertices_of_job(self, jobid: Any) -> set[int]:
        """The vertices where ``jobid`` is recorded (see :attr:`job_vertices`); ``jobid`` is ``Any``: the caller's
        int object is the key (see :meth:`uid_objects`)."""
        found = self.job_vertices.get(jobid)
        if found is None:
            found = self.job_vertices[jobid] = set()
        return found

    def unbound(self, uid: int, start: int, end: int) -> None:
        bounds = self.bounds.get(uid)
        if bounds:
            del bounds[bisect_left(bounds, start)]
            del bounds[bisect_left(bounds, end)]
            for span_bounds in self.span_bounds(uid):
                del span_bounds[bisect_left(span_bounds, start)]
                del span_bounds[bisect_left(span_bounds, end)]

    def span_bounds(self, uid: int) -> list[list[int]]:
        """The bounds lists of the spans of its parent's layout that ``uid`` is in, one per level (none when the
        parent is not laid out)."""
        layout = self.layouts.get(self.graph.vertices[uid].parent)
        if layout is None or not layout.bounds:
            return []
        position = self.kid_pos.get(uid, layout.width) // BLOCK
        if position * BLOCK >= layout.width:
            return []
        found = []
        for level in layout.bounds:
            found.append(level[position])
            position //= BLOCK
        return found

    def bump(self, uid: int, delta: int) -> None:
        """Add ``delta`` to ``uid``'s fingerprint and to the fingerprint of its block in its parent."""
        self.fp[uid] += delta
        parent = self.graph.vertices[uid].parent
        layout = self.layouts.get(parent)
        if layout is not None:
            position = self.kid_pos.get(uid, layout.width) // BLOCK
            if position * BLOCK >= layout.width:  # not laid out yet: lay the parent out again
                del self.layouts[parent]
                return
            for level in layout.fps:
                level[position] += delta
                position //= BLOCK

    # What a change of the schedule (:class:`~kubeflux.match.schedule.Schedule`) makes the view forget or redo of
    # what it found and kept of the graph's structure.

    def forget_structure(self, uid: int) -> None:
        """Forget what was found of ``uid``'s containment children (attach, remove, a node added or removed)."""
        self._parent_edges.clear()
        self._kids.pop(uid, None)
        self.layouts.pop(uid, None)
        self.layouts.pop(self.graph.vertices[uid].parent, None)  # its spans' bounds hold uid's
        self._out_types.pop(uid, None)
        self._by_weight.clear()
        self._leaf_families.clear()
        self._nodes_within.clear()
        if self.below_ranges:
            above = uid
            while above != -1:
                for kept in self.below_ranges.values():
                    kept.pop(above, None)
                above = self.graph.vertices[above].parent
        if not self.children(uid):
            # A vertex that lost its children is a leaf: no evaluation of it is cached, so it keeps no span bounds
            # (add_job_data records none for a leaf, and a release must not take out bounds never put in).
            self.bounds.pop(uid, None)
        elif uid not in self.bounds:  # a leaf that grew children: its own span bounds
            self.bounds[uid] = sorted(t for use in self.x_uses.get(uid, {}).values() for t in use[:2])

    def restructure(self) -> None:
        """Forget the parent edges and vertex ids found, after vertices were added or removed."""
        self._parent_edges.clear()
        self._ids_above = None

    def nodes_within(self, uid: int) -> int:
        """The node vertices in ``uid``'s subtree (kept until the graph changes)."""
        found = self._nodes_within.get(uid)
        if found is None:
            stack = [uid]
            found = 0
            reserved = self.graph.reserved
            while stack:
                current = stack.pop()
                if self.graph.vertices[current].type == "node":
                    found += 1
                if current not in reserved:  # (a node's reserved leaves are no nodes)
                    stack.extend(target for _, target in self.children(current))
            self._nodes_within[uid] = found
        return found

    def reorder(self, edge: int, target: int, old: int, new: int) -> None:
        """Move ``edge`` to its new place in its source's explore order (heaviest first, then highest uniq_id)."""
        vertex = self.graph.vertices[target]
        known = self._by_weight.get(vertex.parent)
        if known is None:
            return
        keys, order = known
        if keys is None:
            uniform = self._uniform_weight[vertex.parent]
            keys = [(-uniform, -self.graph.vertices[kid].uniq_id) for _, kid in order]
            self._by_weight[vertex.parent] = (keys, order)
        position = bisect_left(keys, (-old, -vertex.uniq_id))
        if position == len(order) or order[position][0] != edge:
            del self._by_weight[vertex.parent]
            return
        del keys[position], order[position]
        position = bisect_left(keys, (-new, -vertex.uniq_id))
        keys.insert(position, (-new, -vertex.uniq_id))
        order.insert(position, (edge, target))


def record_leaves(
    schedule: ScheduleView,
    source: int,
    leaves: list[tuple[int, int, int]],
    meta: JobMeta,
    full: bool,
    total: int | None = None,
) -> int:
    """Record ``meta``'s job on exclusive leaves of ``source`` in ``schedule`` (planner span when ``full``, tags,
    use, fingerprint) during its window; each leaf's share of the fingerprint is a hash of it and the job, the last
    one made up so they add up to ``total`` if given (a pool written late: its source already counts it).
    Returns the fingerprint change."""
    jobid, at, duration, alloc_type = meta.jobid, meta.at, meta.duration, meta.alloc_type
    key = job_key(jobid, at, duration, alloc_type)
    plans, tags, x_uses, fp = schedule.plan_table, schedule.tag_table, schedule.use_table, schedule.fp
    keys = schedule.uid_objects()
    job: Any = jobid  # one int object for every record below (see ScheduleView.uid_objects)
    start: Any = at
    end: Any = at + duration
    table = schedule.span_table(alloc_type)
    wide = source in schedule.layouts
    last = len(leaves) - 1
    added = shares = 0
    held_by_job = schedule.vertices_of_job(job)
    for i, (_edge, uid, needs) in enumerate(leaves):
        if full:
            plan = plans.get(uid)
            if plan is None:
                plan = schedule.new_plan(uid)
            span = plan.add_span(at, duration, needs)
            if table is not None:
                spans = table.get(uid)
                if spans is None:
                    table[keys[uid]] = {job: span}
                else:
                    spans[job] = span
        held = tags.get(uid)
        if held is None:
            tags[keys[uid]] = {job}
        else:
            held.add(job)
        own = hash((uid, needs, key))
        if total is not None and i == last:
            own = total - shares
        shares += own
        uses = x_uses.get(uid)
        if uses is None:
            x_uses[keys[uid]] = {job: (start, end, own)}
        else:
            previous = uses.get(job)
            if previous is not None:
                own += previous[2]
                schedule.unbound(uid, previous[0], previous[1])
            uses[job] = (start, end, own)
        if wide:
            schedule.bump(uid, own)
        else:
            fp[uid] += own
        added += own
        held_by_job.add(keys[uid])  # (one at a time: no list of keys is made)
    return added


def prime(view: ScheduleView, root: int) -> None:
    """Create each non-leaf vertex's subtree aggregate filter (Fluxion's ``prime_pruning_filter``)."""
    while not _prime_pass(view, root):
        pass


def _listed(view: ScheduleView, uid: int) -> tuple[list[tuple[int, int]], bool]:
    """``uid``'s children, for the prime, and whether one of them has children too. Kept
    (:meth:`ScheduleView.children`) in that case, as every match walks through it; listed and dropped when all are
    leaves (a node's cores: a match lists them when it first descends into that node, which under a packing policy
    it does for few of them — 157 of 5,000 nodes for 10,000 one-core pods, where keeping them all took 22 MB and
    325,000 tuples at ``kubeflux serve``'s start)."""
    kids = view._kids.get(uid)
    fresh = kids is None
    if kids is None:
        kids = view._children(uid)
    vertices = view.graph.vertices
    inner = any(vertices[child].out for _, child in kids)
    if fresh and inner:
        view._kids[view.uid_objects()[uid]] = kids
    return kids, inner


def _prime_pass(view: ScheduleView, root: int) -> bool:
    """One walk of :meth:`_prime`; False when a leaf made the root track a type of which a vertex with children
    was already summed (a childless node attached to a graph of nodes with cores): the sums above it may lack
    it, so the walk must be made again, now tracking that type from the start."""
    filters = view.prune_filters
    vertices = view.graph.vertices
    reserved = view.graph.reserved
    stack: list[tuple[int, bool]] = [(root, False)]
    aggregates: dict[int, dict[str, int]] = {}
    summed: set[str] = set()
    ids_above = True
    while stack:
        uid, done = stack.pop()
        vertex = vertices[uid]
        if uid in reserved:  # a node whose leaves are not made: summed from their counts, as made they would be
            if vertex.id < -1:
                ids_above = False
            kinds = reserved[uid].kinds()
            for kind, _ in kinds:
                if kind not in filters.total:
                    filters.add("cluster", kind)
                    if kind in summed:
                        return False
            summed.add(vertex.type)
            aggregates[uid] = {kind: units for kind, units in kinds if kind in filters.total}
            _prime_subplan(view, vertex, aggregates[uid])
            continue
        children, inner = _listed(view, uid) if vertex.out else ([], False)
        if not done:
            if vertex.id < -1:
                ids_above = False
            if not children:
                if vertex.type not in filters.total and view._prime_leaf(vertex):
                    filters.add("cluster", vertex.type)
                    if vertex.type in summed:
                        return False
                continue
            if inner:
                stack.append((uid, True))
                stack.extend((child, False) for _, child in reversed(children))
                continue
            # Only leaves below (a node's cores): seen here in the order the stack would give them, then summed.
            for _, child in children:
                leaf = vertices[child]
                if leaf.id < -1:
                    ids_above = False
                if leaf.type not in filters.total and view._prime_leaf(leaf):
                    filters.add("cluster", leaf.type)
                    if leaf.type in summed:
                        return False
        summed.add(vertex.type)  # a leaf of its type is found before its parent sums it, so only these count
        mine: dict[str, int] = {}
        for _, child in children:
            child_vertex = vertices[child]
            if child_vertex.type in filters.total:
                mine[child_vertex.type] = mine.get(child_vertex.type, 0) + child_vertex.size
            below = aggregates.pop(child, None)
            if below is not None:
                for type, count in below.items():
                    if type in filters.total:
                        mine[type] = mine.get(type, 0) + count
        aggregates[uid] = mine
        _prime_subplan(view, vertex, mine)
    view._ids_above = ids_above
    return True


def _prime_subplan(view: ScheduleView, vertex: Vertex, below: dict[str, int]) -> None:
    """``vertex``'s aggregate filter over what is ``below`` it. Like Fluxion's prime_pruning_filter: only the
    tracked types present below the vertex, by name (the last one orders first's explore: a node's filter holds
    cores but not nodes)."""
    types = sorted(type for type in view.prune_filters.types_for(vertex.type) if type in below)
    if types:
        view.subplans[vertex.uid] = MultiPlanner([(type, below[type]) for type in types], view.base, view.horizon)
