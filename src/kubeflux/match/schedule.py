"""The schedule of one graph: what every walk of the engine reads and records, in tables by vertex uid or edge.

Planner spans per vertex (the time axis of its units), exclusivity uses, job tags, the aggregate filters of
subtrees (Fluxion's pruning filters), runs of leaves recorded as one pool, and per vertex a fingerprint of its
subtree's state, with the lookups that reuse a cached evaluation while that fingerprint is unchanged. The graph
itself holds only structure.

:class:`Schedule` is the base of :class:`~kubeflux.match.state.WalkState`, the one object the select, update and
cancel walks share. It must never choose resources (no request, no policy scoring) nor emit anything to a writer.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from operator import attrgetter
from typing import Any

from kubeflux.match.evaluation import BLOCK, CacheTable, Evaluation, Excluded, Layout, LeafRun, Pool, T, job_key
from kubeflux.match.meta import AllocType, JobMeta, PruningFilters
from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import Planner, UnitPlanner
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request
from kubeflux.match.scoring import Scoring
from kubeflux.resources.graph import CONTAINMENT, Graph, Status, Vertex, paused_gc

WEIGHT_MAX = 2**64 - 1
MatchKind = tuple[str, list[Request], int, str, bool]
"""What :meth:`Traverser._match_kind` answers: (kind, next resources, nslots, slot label, pristine)."""
KindPlan = tuple[list[Request], Request | None, MatchKind, MatchKind]
"""A request list, the slot a vertex must fit, the answer if it does, the answer otherwise."""
KINDS_KEPT = 4096
"""Answers of :meth:`Traverser._kind_plan` kept (by request list and vertex type) before they are forgotten."""


class Schedule:
    """The scheduling state of one graph (see the module docstring)."""

    scoring_type: type[Scoring] = Scoring
    evaluation_type: type[Evaluation] = Evaluation
    wide_blocks = True
    """Whether wide vertices explore through cached spans of children (see :meth:`_explore_blocks`)."""
    leaf_shortcut = True
    """Whether a child with no out-edges is visited by :meth:`_visit_leaf` (see :meth:`_visit_child`)."""
    leaf_runs = True
    """Whether marks on a run of one vertex's exclusive leaves are recorded as one pool (see :class:`LeafRun`)."""
    leaf_batches = True
    """Whether ``first`` explores a vertex whose children are all leaves of the requested type in one loop (see
    :meth:`_first_leaves`)."""
    leaf_slots = True
    """Whether a slot made of a vertex's own leaves is cut in one loop (see :func:`kubeflux.match.slots.leaf_slots`)."""
    slot_bounds = True
    """Whether a walk for slots that the root's children cannot hold is refused before it is made (see
    :mod:`kubeflux.match.slotbound`)."""

    count_free_parts = True
    """Whether evaluations below the root are kept for a slot request whatever its count (see
    :meth:`WalkState._count_free`); off for traversers whose slots read it lower down."""

    dominant: str = CONTAINMENT
    """The subsystem walked (:class:`~kubeflux.match.subsystems.SubsystemTraverser` walks others)."""

    def __init__(self, graph: Graph, policy: MatchPolicy, prune: PruningFilters, base: int, duration: int) -> None:
        self.graph = graph
        self.policy = policy
        self.prune_filters = prune
        self.base = base
        self.horizon = duration
        self.root = graph.roots[self.dominant]
        self.sequence = 0
        self.sequence_object: Any = 0
        """:attr:`sequence` as one int object, the one :attr:`edge_seq` stores (see :meth:`uid_objects`)."""
        self.task_labels: list[str] = []
        self.preorder = 0
        self.postorder = 0
        self._level = 0
        n_edges = len(graph.edges)
        self.edge_needs = [0] * n_edges
        self.edge_excl = [False] * n_edges
        self.edge_seq = [0] * n_edges
        self.edge_weight = [WEIGHT_MAX] * n_edges
        self.slot_leader: set[int] = set()
        self._leads: dict[int, int] = {}
        """Per vertex, how many of its out-edges are in :attr:`slot_leader` (only :meth:`_lead` and
        :meth:`_unlead_edge` change either)."""
        self.root_needs = 0
        self.root_excl = False
        self.root_seq = 0
        self._uid_objects: list[Any] = []
        self._plans: dict[int, Planner] = {}
        self._allocations: dict[int, dict[int, int]] = {}
        self._reservations: dict[int, dict[int, int]] = {}
        self.job_vertices: dict[int, set[int]] = {}
        """Per job, the vertices where it was recorded (a superset of those still holding some of its state)."""
        self.released_in_part: set[int] = set()
        """Jobs released in part: a vertex may have let go of the job while one below it still holds it, out of
        the cancel walk's reach (see :meth:`cancel`)."""
        self._x_uses: dict[int, dict[int, tuple[int, int, int]]] = {}
        self._tags: dict[int, set[int]] = {}
        self._pools: dict[int, list[Pool]] = {}
        """Per vertex, the jobs' records on runs of its leaves not yet written leaf by leaf."""
        self._run_marks: dict[int, LeafRun] = {}
        """The runs marked by the current match (``_marked_seq``), by source, instead of their edges' stamps."""
        self._fresh = False
        self._bounded: tuple[tuple[str, int], ...] | None = None
        """The slot elements the current walk's bound counted the root's children for (None: it did not count);
        its blocks counted empty are skipped (:func:`~kubeflux.match.slotbound.empty_block`)."""
        self.subplans: dict[int, MultiPlanner] = {}
        self.job2span: dict[int, dict[int, int]] = {}
        self.status_epoch = 0
        """Counts the status changes (:meth:`WalkState.mark`)."""
        self.nodes_up = sum(1 for uid in graph.by_type.get("node", ()) if graph.vertices[uid].status == Status.UP)
        self.fp = [0] * len(graph.vertices)
        """Per vertex, a fingerprint of the scheduling state of its subtree (a sum of hashes of its spans,
        statuses and edge weights); a cached :class:`Evaluation` is valid while it is unchanged."""
        self.root_eval: Evaluation | None = None
        self.excluded: Excluded | None = None
        """Node vertices below the root that the current match must treat as down (set by the engine for one
        match; see :meth:`Engine.match`): a scheduler hides the nodes a pod may not use this way instead of
        marking them down, which would change their fingerprints and so void their cached evaluations."""
        self._cache: dict[int, CacheTable[Evaluation]] = {}
        self._kids: dict[int, list[tuple[int, int]]] = {}
        self._parent_edges: dict[int, int] = {}
        self._ids_above: bool | None = None
        """Whether no vertex the walks reach has an id below -1 (see :meth:`WalkState._positive_scores`), found
        by the walk that primes the aggregate filters; None until then."""
        self._out_types: dict[int, set[str]] = {}
        self._layouts: dict[int, Layout] = {}
        """Per wide vertex, the sum of its children's fingerprints per block (kept by :meth:`_bump`)."""
        self._kid_pos: dict[int, int] = {}
        self._marked: dict[int, set[int]] = {}
        """The edges stamped by the current match (``_marked_seq``), by source: the update walk's children."""
        self._marked_seq = -1
        self._by_weight: dict[int, tuple[list[tuple[int, int]] | None, list[tuple[int, int]]]] = {}
        """Per vertex, its children heaviest first (``first``'s explore order) with their sort keys, kept in order
        as edge weights change. The keys are None while every child still has the weight in
        :attr:`_uniform_weight`."""
        self._uniform_weight: dict[int, int] = {}
        self._shapes: dict[tuple[object, ...], int] = {}
        self._signatures: dict[int, int] = {}
        self._free_list = -1
        """The current walk's request list id when it numbers evaluations without its slot count, else -1."""
        self._free_number = -1
        self._labels: tuple[str, ...] = ()
        self._context = -1
        """The number of the current select walk's cache context (see :meth:`WalkState._cache_context`)."""
        self._leaf_kinds: dict[tuple[int, str, bool], bool | None] = {}
        self._kinds: dict[tuple[int, str, bool], KindPlan] = {}
        """What a request list says of a vertex type (see :meth:`Traverser._kind_plan`)."""
        self._exclusives: dict[tuple[int, str], tuple[list[Request], bool]] = {}
        self._leaf_families: dict[int, str] = {}
        """Per vertex, the type of its children when they are all leaves of one type, else "" (see
        :meth:`_leaf_family`)."""
        self._nodes_within: dict[int, int] = {}
        """Per vertex whose status was set, the node vertices in its subtree (until the graph changes)."""
        self._epoch = 0
        self.bounds: dict[int, list[int]] = {}
        """Per vertex, the starts and ends of the spans in its subtree (sorted, with repeats): an evaluation
        made for one time window still holds for another if no bound lies where the window's ends moved."""
        with paused_gc():
            self._prime(self.root)

    @property
    def plans(self) -> dict[int, Planner]:
        """Per vertex, its planner (the time axis of its units), for the vertices that have held a span."""
        self._settle()
        return self._plans

    @property
    def allocations(self) -> dict[int, dict[int, int]]:
        """Per vertex, the allocations holding it: jobid -> span id in its planner."""
        self._settle()
        return self._allocations

    @property
    def reservations(self) -> dict[int, dict[int, int]]:
        """Per vertex, the reservations holding it: jobid -> span id in its planner."""
        self._settle()
        return self._reservations

    @property
    def x_uses(self) -> dict[int, dict[int, tuple[int, int, int]]]:
        """Per vertex, the jobs whose allocation or reservation includes it: jobid -> (start, end, hash).
        Fluxion's exclusivity checker (a planner of 2^30 units, one per job); ``hash`` is the job's share of
        the vertex's fingerprint."""
        self._settle()
        return self._x_uses

    @property
    def tags(self) -> dict[int, set[int]]:
        """Per vertex, the jobs recorded on it."""
        self._settle()
        return self._tags

    def next_sequence(self) -> None:
        """Start a new match: a new :attr:`sequence` (edges stamped with an older one are not this match's)."""
        self.sequence += 1
        self.sequence_object = self.sequence

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

    def _settle(self) -> None:
        """Write every pool leaf by leaf: whatever reads or changes records outside the match and cancel walks
        sees them whole."""
        while self._pools:
            self._settle_source(next(iter(self._pools)))

    def _pools_matter(self, source: int, meta: JobMeta, children: list[tuple[int, int]]) -> bool:
        """Whether visiting ``source``'s leaves for ``meta`` could find other answers with its pools written: a
        pool's spans meet the window, or an allocation's mere presence counts (a new allocation avoids any
        vertex allocated exclusively), or the leaves' fingerprints are summed per block (a wide vertex)."""
        if source in self._layouts or (self.wide_blocks and len(children) >= 2 * BLOCK):
            return True
        at, end = meta.at, meta.at + meta.duration
        allocating = meta.alloc_type == AllocType.ALLOCATE
        for pool in self._pools[source]:
            if pool.at < end and at < pool.at + pool.duration:
                return True
            if allocating and pool.alloc_type == AllocType.ALLOCATE:
                return True
        return False

    def _settle_source(self, source: int) -> None:
        """Write the pools of ``source``'s leaves leaf by leaf (before anything reads those leaves' records)."""
        for pool in self._pools.pop(source, ()):
            leaves = pool.run.leaves
            record_leaves(self, source, leaves, pool.jobid, pool.at, pool.duration, pool.alloc_type, True, pool.total)

    def _children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of a vertex's containment out-edges, in order."""
        edges = self.graph.edges
        out: list[Any] = self.graph.vertices[uid].out  # Any: the graph's int objects, not new ones (uid_objects)
        records: list[Any] = [edges[index] for index in out]  # (lists, not a loop: a fresh vertex's first visit)
        return [
            (index, edge.target)
            for index, edge in zip(out, records, strict=True)
            if edge.subsystem == CONTAINMENT and edge.relation == "contains"
        ]

    def _kid_edges(self, uid: int) -> list[tuple[int, int]]:
        kids = self._kids.get(uid)
        if kids is None:
            kids = self._kids[self.uid_objects()[uid]] = self._children(uid)
        return kids

    def touch(self, uid: int, delta: int = 0) -> None:
        """Record a change of ``uid``'s state (a span, status, property or structure) in the fingerprints of
        it and its ancestors, so no cached evaluation of them is reused. Without ``delta`` the change is
        one-way (a fresh token); a reversible change passes the hash it adds (and later its negation)."""
        if not delta:
            self._epoch += 1
            delta = hash(("touch", uid, self._epoch))
        fp = self.fp
        if len(fp) < len(self.graph.vertices):
            fp.extend([0] * (len(self.graph.vertices) - len(fp)))
        vertices = self.graph.vertices
        while uid != -1:
            self._bump(uid, delta)
            uid = vertices[uid].parent

    def _bump(self, uid: int, delta: int) -> None:
        """Add ``delta`` to ``uid``'s fingerprint and to the fingerprint of its block in its parent."""
        self.fp[uid] += delta
        parent = self.graph.vertices[uid].parent
        layout = self._layouts.get(parent)
        if layout is not None:
            position = self._kid_pos.get(uid, layout.width) // BLOCK
            if position * BLOCK >= layout.width:  # not laid out yet: lay the parent out again
                del self._layouts[parent]
                return
            for level in layout.fps:
                level[position] += delta
                position //= BLOCK

    def graph_changed(self, uid: int) -> None:
        """The containment children of ``uid`` changed (attach, remove, a node added or removed)."""
        self._parent_edges.clear()
        self._kids.pop(uid, None)
        self._layouts.pop(uid, None)
        self._layouts.pop(self.graph.vertices[uid].parent, None)  # its spans' bounds hold uid's
        self._out_types.pop(uid, None)
        self._by_weight.clear()
        self._leaf_families.clear()
        self._nodes_within.clear()
        if not self._kid_edges(uid):
            # A vertex that lost its children is a leaf: no evaluation of it is cached, so it keeps no span bounds
            # (_add_job_data records none for a leaf, and a release must not take out bounds never put in).
            self.bounds.pop(uid, None)
        elif uid not in self.bounds:  # a leaf that grew children: its own span bounds
            self.bounds[uid] = sorted(t for use in self.x_uses.get(uid, {}).values() for t in use[:2])
        self.touch(uid)

    def _prime(self, root: int) -> None:
        """Create each non-leaf vertex's subtree aggregate filter (Fluxion's ``prime_pruning_filter``)."""
        while not self._prime_pass(root):
            pass

    def _prime_pass(self, root: int) -> bool:
        """One walk of :meth:`_prime`; False when a leaf made the root track a type of which a vertex with children
        was already summed (a childless node attached to a graph of nodes with cores): the sums above it may lack
        it, so the walk must be made again, now tracking that type from the start."""
        filters = self.prune_filters
        vertices = self.graph.vertices
        stack: list[tuple[int, bool]] = [(root, False)]
        aggregates: dict[int, dict[str, int]] = {}
        summed: set[str] = set()
        ids_above = True
        while stack:
            uid, done = stack.pop()
            vertex = vertices[uid]
            # Kept: first visits a vertex never seen before on every match, and would make its list then.
            children = self._kid_edges(uid) if vertex.out else []
            if not done:
                if vertex.id < -1:
                    ids_above = False
                if not children:
                    if vertex.type not in filters.total and self._prime_leaf(vertex):
                        filters.add("cluster", vertex.type)
                        if vertex.type in summed:
                            return False
                    continue
                stack.append((uid, True))
                stack.extend((child, False) for _, child in reversed(children))
                continue
            summed.add(vertex.type)  # a leaf of its type is found before its parent sums it, so only these count
            mine: dict[str, int] = {}
            for _, child in children:
                child_vertex = vertices[child]
                if child_vertex.type in filters.total:
                    mine[child_vertex.type] = mine.get(child_vertex.type, 0) + child_vertex.size
                for type, count in aggregates.pop(child, {}).items():
                    if type in filters.total:
                        mine[type] = mine.get(type, 0) + count
            aggregates[uid] = mine
            # Like Fluxion's prime_pruning_filter: only the tracked types present below the vertex, by name
            # (the last one orders first's explore: a node's filter holds cores but not nodes).
            types = sorted(type for type in filters.types_for(vertex.type) if type in mine)
            if types:
                self.subplans[uid] = MultiPlanner([(type, mine[type]) for type in types], self.base, self.horizon)
        self._ids_above = ids_above
        return True

    def _prime_leaf(self, vertex: Vertex) -> bool:
        """Whether a vertex without children has its type tracked as a leaf type by the root's filter."""
        return True

    def prime_jobspec(self, resources: list[Request], to_parent: dict[str, int]) -> None:
        total = self.prune_filters.total
        for resource in resources:
            if resource.exclusive is True:
                self.policy.exclusive_types.add(resource.type)
            if resource.type in total:
                to_parent[resource.type] = to_parent.get(resource.type, 0) + resource.min
            resource.user_data = {}
            self.prime_jobspec(resource.with_, resource.user_data)
            for type, count in resource.user_data.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + resource.min * count

    def _avail(self, uid: int, at: int, duration: int) -> int:
        plan = self._plans.get(uid)
        if plan is None:
            return self.graph.vertices[uid].size
        return plan.avail_resources_during(at, duration)

    def _x_busy(self, uid: int, at: int, duration: int) -> bool:
        """Whether any job holds ``uid`` during ``[at, at + duration)``."""
        uses = self._x_uses.get(uid)
        if not uses:
            return False
        end = at + duration
        # A loop, not any() over a generator (ruff's SIM110): this runs on every leaf visit, and is faster.
        for start, stop, _share in uses.values():  # noqa: SIM110
            if start < end and at < stop:
                return True
        return False

    def _add_plan(self, uid: int, meta: JobMeta, needs: int) -> None:
        plan = self._plans.get(uid)
        if plan is None:
            plan = self._new_plan(uid)
        span = plan.add_span(meta.at, meta.duration, needs)
        key: Any = self.uid_objects()[uid]  # (see uid_objects)
        job: Any = meta.jobid
        self._job_vertices(job).add(key)
        table = self._span_table(meta.alloc_type)
        if table is None:
            return
        spans = table.get(uid)
        if spans is None:
            table[key] = {job: span}
        else:
            spans[job] = span

    def _new_plan(self, uid: int) -> Planner:
        """``uid``'s planner, made when it first holds a span (a one-unit vertex keeps a small table)."""
        vertex = self.graph.vertices[uid]
        kind = UnitPlanner if vertex.size == 1 else Planner
        plan = self._plans[self.uid_objects()[uid]] = kind(vertex.size, self.base, self.horizon, vertex.type)
        return plan

    def _span_table(self, alloc_type: AllocType) -> dict[int, dict[int, int]] | None:
        """Where a span of this kind is listed per vertex and job (None for a satisfiability test)."""
        if alloc_type == AllocType.ALLOCATE:
            return self._allocations
        if alloc_type == AllocType.ALLOCATE_ORELSE_RESERVE:
            return self._reservations
        return None

    def _job_vertices(self, jobid: Any) -> set[int]:
        """The vertices where ``jobid`` is recorded (see :attr:`job_vertices`); ``jobid`` is ``Any``: the caller's
        int object is the key (see :meth:`uid_objects`)."""
        found = self.job_vertices.get(jobid)
        if found is None:
            found = self.job_vertices[jobid] = set()
        return found

    def _add_job_data(self, uid: int, meta: JobMeta, aggregates: dict[str, int], fingerprint: int) -> None:
        jobid: Any = meta.jobid  # boxed once for every table below (see uid_objects)
        key: Any = self.uid_objects()[uid]
        tags = self._tags.get(uid)
        if tags is None:
            self._tags[key] = {jobid}
        else:
            tags.add(jobid)
        self._job_vertices(jobid).add(key)
        uses = self._x_uses.get(uid)
        if uses is None:
            uses = self._x_uses[key] = {}
        previous = uses.get(jobid)
        if previous is not None:
            fingerprint += previous[2]
            self._unbound(uid, previous[0], previous[1])
        at: Any = meta.at
        end: Any = meta.at + meta.duration
        uses[jobid] = (at, end, fingerprint)
        if self._kid_edges(uid):  # only non-leaf evaluations are cached, so only they need their bounds
            bounds = self.bounds.get(uid)
            if bounds is None:
                self.bounds[key] = [at, end]
            elif not bounds or bounds[-1] <= at:  # the latest window yet (jobs placed one after another)
                bounds.append(at)
                bounds.append(end)
            else:
                insort(bounds, at)
                insort(bounds, end)
            if self._layouts:
                for span_bounds in self._span_bounds(uid):
                    insort(span_bounds, at)
                    insort(span_bounds, end)
        subplan = self.subplans.get(uid)
        if subplan is not None and aggregates:
            counts = [aggregates.get(type, 0) for type in subplan.resource_types]
            spans = self.job2span.get(uid)
            if spans is None:
                spans = self.job2span[uid] = {}
            spans[jobid] = subplan.add_span(at, meta.duration, counts)

    def _unbound(self, uid: int, start: int, end: int) -> None:
        bounds = self.bounds.get(uid)
        if bounds:
            del bounds[bisect_left(bounds, start)]
            del bounds[bisect_left(bounds, end)]
            for span_bounds in self._span_bounds(uid):
                del span_bounds[bisect_left(span_bounds, start)]
                del span_bounds[bisect_left(span_bounds, end)]

    def _span_bounds(self, uid: int) -> list[list[int]]:
        """The bounds lists of the spans of its parent's layout that ``uid`` is in, one per level (none when the
        parent is not laid out)."""
        layout = self._layouts.get(self.graph.vertices[uid].parent)
        if layout is None or not layout.bounds:
            return []
        position = self._kid_pos.get(uid, layout.width) // BLOCK
        if position * BLOCK >= layout.width:
            return []
        found = []
        for level in layout.bounds:
            found.append(level[position])
            position //= BLOCK
        return found

    def _pop_span(self, uid: int, jobid: int) -> int | None:
        """Take ``jobid``'s planner span on ``uid`` (an allocation or a reservation) out of the job tables; its
        id in ``uid``'s planner, None if there is none."""
        spans = self._allocations.get(uid)
        if spans is None or jobid not in spans:
            spans = self._reservations.get(uid)
            if spans is None or jobid not in spans:
                return None
        return spans.pop(jobid)

    def _walk_parent(self, uid: int) -> int:
        """``uid``'s parent in the walked subsystem."""
        return self.graph.vertices[uid].parent

    def _walk_parents(self, uid: int) -> list[int]:
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

    def _parent_edge(self, uid: int) -> int:
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


def record_leaves(
    schedule: Schedule,
    source: int,
    leaves: list[tuple[int, int, int]],
    jobid: int,
    at: int,
    duration: int,
    alloc_type: AllocType,
    full: bool,
    total: int | None = None,
) -> int:
    """Record ``jobid`` on exclusive leaves of ``source`` in ``schedule`` (planner span, tags, use, fingerprint) during
    ``[at, at + duration)``; each leaf's share of the fingerprint is a hash of it and the job, the last one
    made up so they add up to ``total`` if given (a pool written late: its source already counts it).
    Returns the fingerprint change."""
    key = job_key(jobid, at, duration, alloc_type)
    plans, tags, x_uses, fp = schedule._plans, schedule._tags, schedule._x_uses, schedule.fp
    keys = schedule.uid_objects()
    job: Any = jobid  # one int object for every record below (see Schedule.uid_objects)
    start: Any = at
    end: Any = at + duration
    table = schedule._span_table(alloc_type)
    wide = source in schedule._layouts
    last = len(leaves) - 1
    added = shares = 0
    held_by_job = schedule._job_vertices(job)
    for i, (_edge, uid, needs) in enumerate(leaves):
        if full:
            plan = plans.get(uid)
            if plan is None:
                plan = schedule._new_plan(uid)
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
                schedule._unbound(uid, previous[0], previous[1])
            uses[job] = (start, end, own)
        if wide:
            schedule._bump(uid, own)
        else:
            fp[uid] += own
        added += own
        held_by_job.add(keys[uid])  # (one at a time: no list of keys is made)
    return added


def same_window(bounds: list[int] | None, start: int, end: int, at: int, until: int) -> bool:
    """Whether a subtree looks the same during ``[at, until)`` as during ``[start, end)``: no span of
    the subtree starts or ends where the window's ends moved over.

    A span ``[s, t)`` meets a window ``[a, e)`` when ``s < e`` and ``a < t``; moving ``a`` between ``start``
    and ``at`` changes that only for ``t`` in ``(low, high]`` of the two, moving ``e`` between ``end`` and
    ``until`` only for ``s`` in ``[low, high)`` of those. Starts and ends share one sorted list, so both
    ranges are checked against every bound (``bounds``: those of the subtree, or of the span of children)."""
    if not bounds:
        return True
    low, high = (start, at) if start < at else (at, start)
    i = bisect_right(bounds, low)
    if i < len(bounds) and bounds[i] <= high:
        return False
    low, high = (end, until) if end < until else (until, end)
    i = bisect_left(bounds, low)
    return i == len(bounds) or bounds[i] >= high


def cached(table: CacheTable[T], key: tuple[object, ...], fp: int, bounds: list[int] | None, meta: JobMeta) -> T | None:
    """The value kept under ``key`` if the subtree (or span of children) is unchanged (``fp``) and looks the same in
    ``meta``'s window as in the one it was computed for (``bounds``: its sorted span bounds; see
    :func:`same_window`)."""
    hit = table.get(key)
    if hit is None:
        return None
    return fresh(hit, fp, bounds, meta)


def fresh(hit: tuple[int, int, int, T], fp: int, bounds: list[int] | None, meta: JobMeta) -> T | None:
    """:func:`cached` of an entry already found (``hit``: fingerprint, window start and end, value)."""
    if hit[0] != fp:
        return None
    at, end = meta.at, meta.at + meta.duration
    if (hit[1] == at and hit[2] == end) or same_window(bounds, hit[1], hit[2], at, end):
        return hit[3]
    return None
