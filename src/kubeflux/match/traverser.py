"""The depth-first-and-up (DFU) traverser: Fluxion's matching walk, step for step.

``select`` walks the containment tree from the root, pruning subtrees that cannot satisfy the request
(status, exclusivity, per-subtree aggregate filters), lets the policy score candidates on the way up and marks
the edges of the chosen ones. ``update`` then walks only the marked edges, records the job in each chosen
vertex's planner (the time axis) and emits the vertices to a writer. ``cancel`` removes a job's spans.

Scheduling state lives here, in tables indexed by vertex ``uid`` or edge index; the graph holds only structure.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import TypeVar

from kubeflux.match.planner import MultiPlanner, Planner, PlannerRangeError, UnitPlanner
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.scoring import MATCH_MET, MATCH_UNMET, EdgeEval, EdgeGroup, Evals, Scoring
from kubeflux.match.writers import Writer
from kubeflux.resources.graph import CONTAINMENT, Graph, Status, Vertex, paused_gc

ANY_TYPE = "ALL"
SLOT = "slot"
WEIGHT_MAX = 2**64 - 1
CACHE_PER_VERTEX = 8
"""Evaluations kept per vertex (one per request shape and time window); the oldest is dropped first."""
BLOCK = 32
"""Children per block when a wide vertex's static explore is cached block by block."""
WIDE_CANCEL = 16
"""A cancel walks a vertex's children through the job's own vertices, not by visiting each child, when it has more
children than this plus twice the job's vertex count (a pod's cancel at the root of a 5,000-node cluster would
otherwise cost 5,000 visits; a job holding many of the children is cheaper to walk child by child)."""

T = TypeVar("T")
CacheKey = tuple[object, ...]
CacheTable = dict[CacheKey, tuple[int, int, int, T]]
"""Cached values by key, each with the fingerprint and the window (start, end) it was computed for."""

Mark = tuple[int, int, bool, int]
"""An edge chosen by a best-k choice: (edge, needs, exclusive, slot-leader action)."""
NO_LEAD, LEAD, NOT_LEAD = 0, 1, 2


class AllocType(IntEnum):
    ALLOCATE = 0
    ALLOCATE_ORELSE_RESERVE = 1
    SATISFIABILITY = 2


class Errno(Enum):
    """Why a match failed: the error numbers Fluxion reports and that decide its output."""

    EBUSY = "EBUSY"
    """Not now: the resources are busy (or down)."""
    ENODEV = "ENODEV"
    """Never: the request cannot be satisfied by this graph."""
    EINVAL = "EINVAL"
    """A malformed request (e.g. exclusivity conflicts under a slot)."""
    ENOENT = "ENOENT"
    ERANGE = "ERANGE"


@dataclass(slots=True)
class JobMeta:
    jobid: int
    at: int
    duration: int
    alloc_type: AllocType = AllocType.ALLOCATE
    now: int = 0


class Kids:
    """The children's evaluations that hold marks, by child uid: set one by one, or whole blocks of them (a wide
    vertex refers to its blocks' tables instead of copying them; a lookup follows the few marked paths only)."""

    __slots__ = ("blocks", "own")

    def __init__(self) -> None:
        self.own: dict[int, Evaluation] = {}
        self.blocks: list[Kids] = []

    def __setitem__(self, uid: int, evaluation: Evaluation) -> None:
        self.own[uid] = evaluation

    def __bool__(self) -> bool:
        return bool(self.own) or bool(self.blocks)

    def get(self, uid: int) -> Evaluation | None:
        evaluation = self.own.get(uid)
        if evaluation is None:
            for block in self.blocks:
                evaluation = block.get(uid)
                if evaluation is not None:
                    break
        return evaluation


@dataclass(slots=True, eq=False)
class Evaluation:
    """What visiting one vertex gave its parent: whether it qualifies, its score and candidates, its choices.

    Evaluations are cached per vertex and reused while the subtree's fingerprint (:attr:`Traverser.fp`) and the
    request are unchanged, so a match walks only the subtrees that changed since the last one. ``marks`` are
    the edges this vertex's own best-k choice picked; ``kids`` are the children's evaluations that hold marks.
    """

    ok: bool
    x_in: bool = False
    avail: int = 0
    score: int = 0
    merged: dict[str, Evals] | None = None
    """Candidates passed up unchosen, by type (None when this vertex chose them itself)."""
    marks: list[Mark] | None = None
    kids: Kids | None = None
    applied: int = -1
    """The match sequence whose edges this evaluation's marks were last stamped on."""
    group: EdgeGroup | None = None
    run: LeafRun | None = None
    """The marks as one run of exclusive leaves of one source, when they are that (see :class:`LeafRun`)."""

    def group_for(self, edge: int) -> EdgeGroup:
        """The candidate group this vertex offers its parent through ``edge`` (its one parent edge)."""
        group = self.group
        if group is None:
            count = self.avail
            group = self.group = EdgeGroup(
                self.score, count, 0, self.x_in, edges=[EdgeEval(count, count, self.x_in, edge)]
            )
        return group


FAILED = Evaluation(False)


@dataclass(slots=True, eq=False)
class LeafRun:
    """An evaluation's marks when they are all exclusive leaves of one source, with nothing to do for slot
    leaders (a socket's cores, say): the update walk records them as one pool (see :class:`_Pool`) and writes
    them as one piece of text, so a large job costs per socket rather than per core while the evaluation is
    reused."""

    source: int
    leaves: list[tuple[int, int, int]]
    """(edge, leaf, needs), in edge order (the update walk's order)."""
    uids: list[int]
    """The leaves alone, kept for the job's vertex set (one set update per pool)."""
    sizes: dict[str, int]
    """The leaves' total size per type (for the aggregate filters above)."""
    whole: bool
    """Whether the run is every child of its source, each whole (what holding the source whole records)."""
    signature: int
    texts: dict[object, str] = field(default_factory=dict)
    """Writers' text for these leaves, by writer and level (see :meth:`Writer.leaves`)."""


@dataclass(slots=True, eq=False)
class _Pool:
    """A job's records on a run of leaves not yet written leaf by leaf: the planner spans, tags, uses and
    fingerprints :meth:`Traverser._record` would write. Nothing reads a leaf's records without its parent's
    pools being written first (:meth:`Traverser._settle_source`), and a cancel that finds its pool unwritten
    drops it whole."""

    jobid: int
    run: LeafRun
    at: int
    duration: int
    alloc_type: AllocType
    total: int
    """The pool's share of its source's fingerprint: what its leaves' shares add up to once written."""


BlockPart = tuple[Scoring, bool, Kids]
"""A span of children's candidates, whether any qualified, and their evaluations that hold marks."""


@dataclass(slots=True, eq=False)
class Layout:
    """A wide vertex's children cut into spans: ``blocks`` of :data:`BLOCK` children, and per level the sum of
    the children's fingerprints in each span (``fps[0]`` per block) and the cached candidates of each span."""

    width: int
    blocks: list[list[tuple[int, int]]]
    fps: list[list[int]] = field(default_factory=list)
    cache: list[list[CacheTable[BlockPart]]] = field(default_factory=list)


class MatchFailure(Exception):
    def __init__(self, errno: Errno, message: str = "") -> None:
        super().__init__(message or errno.value)
        self.errno = errno


class PruningFilters:
    """Which aggregate counts each vertex type tracks for its subtree (``--prune-filters``)."""

    def __init__(self, spec: str = "ALL:core,ALL:node") -> None:
        self.anchors: dict[str, set[str]] = {}
        self.total: set[str] = set()
        self._order_types: dict[str, str | None] = {}
        for pair in spec.split(","):
            if not pair.strip():
                continue
            anchor, sep, low = pair.partition(":")
            anchor, low = anchor.strip(), low.strip()
            if not sep or not anchor or not low:
                raise ValueError(f"invalid prune filter {pair!r}: expected HIGH:LOW such as ALL:core")
            self.add(anchor, low)

    def add(self, anchor: str, low: str) -> None:
        if anchor == ANY_TYPE:
            for types in self.anchors.values():
                types.discard(low)
            self.anchors.setdefault(ANY_TYPE, set()).add(low)
        elif low not in self.anchors.get(ANY_TYPE, set()):
            self.anchors.setdefault(anchor, set()).add(low)
        self.total.add(low)
        self._order_types.clear()

    def types_for(self, vertex_type: str) -> list[str]:
        out = sorted(self.anchors.get(vertex_type, ()))
        if vertex_type != ANY_TYPE and ANY_TYPE in self.anchors:
            out.extend(sorted(self.anchors[ANY_TYPE]))
        return out

    def order_type(self, vertex_type: str) -> str | None:
        """The type whose free count at ``now`` weighs an edge into a vertex of ``vertex_type`` (``first``'s explore
        order), None when its filter tracks nothing.

        Fluxion's filter on a vertex tracks every type the anchors name for it except its own, a type absent below
        the vertex with total 0, and the weight is the free count of the last of them (by name). Ours keeps only
        the types present below; so the weight type comes from this list, not from the filter: a socket's filter
        ends with ``node``, none of which is below it, so a used socket weighs 0, not its free cores."""
        if vertex_type not in self._order_types:
            types = sorted({type for type in self.types_for(vertex_type) if type != vertex_type})
            self._order_types[vertex_type] = types[-1] if types else None
        return self._order_types[vertex_type]


class Traverser:
    """DFU matching over the containment subsystem of one graph."""

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
        self._pools: dict[int, list[_Pool]] = {}
        """Per vertex, the jobs' records on runs of its leaves not yet written leaf by leaf."""
        self._run_marks: dict[int, LeafRun] = {}
        """The runs marked by the current match (``_marked_seq``), by source, instead of their edges' stamps."""
        self._fresh = False
        self.subplans: dict[int, MultiPlanner] = {}
        self.job2span: dict[int, dict[int, int]] = {}
        self.nodes_up = sum(1 for uid in graph.by_type.get("node", ()) if graph.vertices[uid].status == Status.UP)
        self.fp = [0] * len(graph.vertices)
        """Per vertex, a fingerprint of the scheduling state of its subtree (a sum of hashes of its spans,
        statuses and edge weights); a cached :class:`Evaluation` is valid while it is unchanged."""
        self.root_eval: Evaluation | None = None
        self._cache: dict[int, CacheTable[Evaluation]] = {}
        self._kids: dict[int, list[tuple[int, int]]] = {}
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
        self._labels: tuple[str, ...] = ()
        self._leaf_kinds: dict[tuple[int, str, bool], bool | None] = {}
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

    # ------------------------------------------------------------------ per-vertex records

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
            self._record(source, leaves, pool.jobid, pool.at, pool.duration, pool.alloc_type, True, pool.total)

    # ------------------------------------------------------------------ set-up

    def _children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of a vertex's containment out-edges, in order."""
        edges = self.graph.edges
        result = []
        for index in self.graph.vertices[uid].out:
            edge = edges[index]
            if edge.subsystem == CONTAINMENT and edge.relation == "contains":
                result.append((index, edge.target))
        return result

    def _kid_edges(self, uid: int) -> list[tuple[int, int]]:
        kids = self._kids.get(uid)
        if kids is None:
            kids = self._kids[uid] = self._children(uid)
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
        self._kids.pop(uid, None)
        self._layouts.pop(uid, None)
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
        while stack:
            uid, done = stack.pop()
            vertex = vertices[uid]
            # Kept: first visits a vertex never seen before on every match, and would make its list then.
            children = self._kid_edges(uid) if vertex.out else []
            if not done:
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

    # ------------------------------------------------------------------ planner helpers

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
        for start, stop, _ in uses.values():  # noqa: SIM110
            if start < end and at < stop:
                return True
        return False

    # ------------------------------------------------------------------ select (match phase)

    def select(self, resources: list[Request], meta: JobMeta, exclusive: bool) -> None:
        """Find and mark the best resources for ``resources`` at ``meta.at``; raise MatchFailure if none."""
        self.sequence += 1
        self._labels = tuple(self.task_labels)
        self._sign(resources)
        root = self.root
        evaluation = self._dom_dfv(meta, root, resources, True, exclusive)
        self.root_eval = evaluation
        if not evaluation.ok:
            raise MatchFailure(Errno.EBUSY)
        self._apply_own(evaluation)
        dfu = Scoring()
        if evaluation.merged is not None:
            dfu.merge_types(evaluation.merged)
        dfu.avail = evaluation.avail
        dfu.overall_score = evaluation.score
        group = EdgeGroup(
            evaluation.score,
            evaluation.avail,
            0,
            exclusive,
            True,
            edges=[EdgeEval(evaluation.avail, evaluation.avail, exclusive, -1)],
        )
        dfu.add(self.graph.vertices[root].type, group)
        needs = self._resolve_graph(root, resources, dfu)
        self.root_needs = max(needs, 0)
        self.root_excl = evaluation.x_in
        self.root_seq = self.sequence
        if needs < 0:
            raise MatchFailure(Errno.ENODEV)

    def _sign(self, resources: list[Request]) -> int:
        """Intern the shape of a request list (and of every list below it) as a small integer cache key.

        A request remembers its own shape, so a jobspec matched again (the engine reuses its requests) costs
        one lookup per top-level request; the lists below were registered when the shape was first computed
        and stay registered while they live."""
        shapes = []
        for request in resources:
            shape = request.shape
            if shape < 0:
                inner = self._sign(request.with_)
                shape = request.shape = self._intern(
                    (request.type, request.count, request.exclusive, request.label, inner)
                )
            shapes.append(shape)
        number = self._signatures[id(resources)] = self._intern(tuple(shapes))
        return number

    def forget_requests(self, resources: list[Request]) -> None:
        """Drop the signatures of a request list and of the lists below it, which their owner no longer matches
        (and whose ids a later list may take)."""
        self._signatures.pop(id(resources), None)
        for request in resources:
            self.forget_requests(request.with_)

    def _intern(self, shape: tuple[object, ...]) -> int:
        number = self._shapes.get(shape)
        if number is None:
            number = self._shapes[shape] = len(self._shapes)
        return number

    def _resolve_graph(self, root: int, resources: list[Request], dfu: Scoring) -> int:
        if not self.policy.finish_graph(resources, dfu):
            return -1
        needs = 1
        root_type = self.graph.vertices[root].type
        for resource in resources:
            if resource.type == root_type:
                count = calc_count(resource, dfu.avail)
                if count == 0:
                    return -1
                needs = count
        for evals in dfu.by_type.values():
            if evals.qualified == 0:
                return -1
        graph = self.graph
        for mark in self._marks(dfu):
            self._apply_mark(mark)
            source = graph.edges[mark[0]].source
            self._apply_path(source)
            self._mark_ancestors(source, dfu)
        return needs

    def _match_kind(
        self, vertex: Vertex, resources: list[Request], pristine: bool
    ) -> tuple[str, list[Request], int, str, bool]:
        """Fluxion's ``test``: (kind, next resources, nslots, slot label, pristine)."""
        slot: Request | None = None
        matched_resource: Request | None = None
        nslots = 0
        matched = False
        for resource in resources:
            if resource.type == vertex.type:
                if matched:
                    return "none", resources, 0, "", pristine
                matched_resource = resource
                for child in resource.with_:
                    if child.type == SLOT:
                        slot = child
                        nslots = effective_max(child)
                matched = True
            elif resource.type == SLOT:
                if matched:
                    return "none", resources, 0, "", pristine
                slot = resource
                nslots = effective_max(resource)
                matched = True
        if slot is not None and self._slot_fits(vertex, slot):
            return "slot", slot.with_, nslots, slot.label, False
        if matched_resource is not None:
            return "resource", matched_resource.with_, nslots, "", False
        return ("pristine" if pristine else "none"), resources, nslots, "", pristine

    def _slot_fits(self, vertex: Vertex, slot: Request) -> bool:
        types = self._out_types.get(vertex.uid)
        if types is None:
            graph = self.graph
            types = self._out_types[vertex.uid] = {graph.vertices[graph.edges[i].target].type for i in vertex.out}
        return all(child.type in types for child in slot.with_)

    def _prune(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> bool:
        """Whether the walk may descend into ``vertex`` (False prunes it)."""
        if meta.alloc_type != AllocType.SATISFIABILITY and vertex.status != Status.UP:
            return False
        if self._avail(vertex.uid, meta.at, meta.duration) == 0:
            return False
        if vertex.type == "node" and self.policy.spec.node_exclusive and self._held(meta, vertex.uid):
            # The update walk will hold the node whole, planning every vertex below it: a node another job uses is
            # out, as if the jobspec asked for it exclusively. Fluxion checks only the node's own planner here,
            # which suffices while every job holds its nodes whole; a node a job holds in part (a pod of another
            # policy, a replayed or partly released job) would fail its update walk half way.
            return False
        return self._prune_resources(meta, exclusive, vertex, resources)

    def _held(self, meta: JobMeta, uid: int) -> bool:
        """Whether another job holds ``uid`` or anything below it during ``meta``'s window, as far as a vertex
        wanted exclusively cares (an allocation counts whenever it is, for a new allocation)."""
        if meta.alloc_type == AllocType.ALLOCATE and self._allocations.get(uid):
            return True
        return self._x_busy(uid, meta.at, meta.duration)

    def _prune_resources(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> bool:
        for resource in resources:
            if vertex.type != resource.type and resource.type != SLOT:
                continue
            if resource.type != SLOT and not self._by_excl(meta, exclusive, vertex, resource):
                return False
            if not self._by_subplan(meta, vertex.uid, resource):
                return False
        return True

    def _by_excl(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resource: Request) -> bool:
        if exclusive and resource.exclusive is False:
            conflict = f"exclusivity conflicts at jobspec={resource.label} : vertex={vertex.name}"
            raise MatchFailure(Errno.EINVAL, conflict)
        return not ((exclusive or resource.exclusive is True) and self._held(meta, vertex.uid))

    def _by_subplan(self, meta: JobMeta, uid: int, resource: Request) -> bool:
        subplan = self.subplans.get(uid)
        if subplan is None or not resource.user_data:
            return True
        counts = [resource.user_data.get(type, 0) for type in subplan.resource_types]
        try:
            return subplan.avail_during(meta.at, meta.duration, counts)
        except PlannerRangeError:
            return False

    def _dom_dfv(self, meta: JobMeta, uid: int, resources: list[Request], pristine: bool, excl: bool) -> Evaluation:
        """Visit ``uid`` (or reuse the evaluation of an unchanged subtree for the same request and window)."""
        children = self._kid_edges(uid)
        if not children:
            return self._evaluate(meta, uid, resources, pristine, excl, children)
        fp = self.fp[uid]
        key = self._cache_key(meta, resources, pristine, excl)
        table = self._cache.get(uid)
        if table is None:
            table = self._cache[uid] = {}
        else:
            hit = self._cached(table, key, fp, uid, meta)
            if hit is not None:
                return hit
        evaluation = self._evaluate(meta, uid, resources, pristine, excl, children)
        _remember(table, key, (fp, meta.at, meta.at + meta.duration, evaluation))
        return evaluation

    def _cache_key(self, meta: JobMeta, resources: list[Request], pristine: bool, excl: bool) -> CacheKey:
        """What an evaluation depends on besides the subtree's state and the spans its window meets: the request,
        the walk's flags, whether the window fits the planners' horizon, the task labels and the policy (the
        scheduler switches it per pod)."""
        at, duration = meta.at, meta.duration
        in_range = self.base <= at and at + duration <= self.base + self.horizon
        return (
            self._signatures[id(resources)],
            pristine,
            excl,
            in_range,
            meta.alloc_type,
            self._labels,
            self.policy.spec,
        )

    def _cached(
        self,
        table: CacheTable[T],
        key: tuple[object, ...],
        fp: int,
        uid: int,
        meta: JobMeta,
    ) -> T | None:
        """The value kept under ``key`` if the subtree of ``uid`` is unchanged (``fp``) and looks the same in
        ``meta``'s window as in the one it was computed for."""
        hit = table.get(key)
        if hit is None or hit[0] != fp:
            return None
        at, end = meta.at, meta.at + meta.duration
        if (hit[1] == at and hit[2] == end) or self._same_window(uid, hit[1], hit[2], at, end):
            return hit[3]
        return None

    def _same_window(self, uid: int, start: int, end: int, at: int, until: int) -> bool:
        """Whether ``uid``'s subtree looks the same during ``[at, until)`` as during ``[start, end)``: no span of
        the subtree starts or ends where the window's ends moved over.

        A span ``[s, t)`` meets a window ``[a, e)`` when ``s < e`` and ``a < t``; moving ``a`` between ``start``
        and ``at`` changes that only for ``t`` in ``(low, high]`` of the two, moving ``e`` between ``end`` and
        ``until`` only for ``s`` in ``[low, high)`` of those. Starts and ends share one sorted list, so both
        ranges are checked against every bound."""
        bounds = self.bounds.get(uid)
        if not bounds:
            return True
        low, high = (start, at) if start < at else (at, start)
        i = bisect_right(bounds, low)
        if i < len(bounds) and bounds[i] <= high:
            return False
        low, high = (end, until) if end < until else (until, end)
        i = bisect_left(bounds, low)
        return i == len(bounds) or bounds[i] >= high

    def _evaluate(
        self,
        meta: JobMeta,
        uid: int,
        resources: list[Request],
        pristine: bool,
        excl: bool,
        children: list[tuple[int, int]],
    ) -> Evaluation:
        vertex = self.graph.vertices[uid]
        if uid in self._pools and self._pools_matter(uid, meta, children):
            self._settle_source(uid)
        x_in = excl or any(r.type == vertex.type and r.exclusive is True for r in resources)
        kind, next_resources, nslots, label, check_pristine = self._match_kind(vertex, resources, pristine)
        if kind == "none":
            return FAILED
        if not self._prune(meta, x_in, vertex, resources):
            return FAILED
        self.policy.discover(vertex)
        dfu = self.scoring_type()
        kids = Kids()
        if kind == "slot":
            self._dom_slot(meta, children, next_resources, nslots, check_pristine, label, dfu, kids)
        else:
            if children:
                self._explore(meta, children, next_resources, check_pristine, x_in, dfu, 0, kids)
            self._explore_aux(meta, vertex, next_resources, x_in, dfu)
        avail = self._avail(uid, meta.at, meta.duration)
        if avail == 0 or not self.policy.finish_vertex(vertex, resources, dfu):
            return self.evaluation_type(False, kids=kids) if kids else FAILED
        evaluation = self.evaluation_type(True, x_in, avail, dfu.overall_score, kids=kids or None)
        if dfu.overall_score > MATCH_UNMET:
            if dfu.hier_constrain_now:
                evaluation.marks = self._marks(dfu) or None
                if evaluation.marks is not None and self.leaf_runs:
                    evaluation.run = self._leaf_run(evaluation.marks)
            else:
                self._pass_up(evaluation, dfu)
        return evaluation

    def _explore_aux(self, meta: JobMeta, vertex: Vertex, resources: list[Request], excl: bool, dfu: Scoring) -> None:
        """Explore ``vertex``'s edges in the auxiliary subsystems (none when matching over containment alone)."""

    def _pass_up(self, evaluation: Evaluation, dfu: Scoring) -> None:
        """Hand the candidates a vertex did not choose among to its parent."""
        if dfu.by_type:
            evaluation.merged = dfu.by_type

    def _explore(
        self,
        meta: JobMeta,
        children: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        multiplier: int,
        kids: Kids,
    ) -> bool:
        found = False
        if not self.policy.spec.stop_on_first:
            if self.wide_blocks and len(children) >= 2 * BLOCK:
                return self._explore_blocks(meta, children, resources, pristine, excl, dfu, kids)
            for edge, target in children:
                if self._visit_child(meta, edge, target, resources, pristine, excl, dfu, kids):
                    found = True
            return found
        if not children:
            return False
        source = self._walk_parent(children[0][1])
        order = self._heaviest_first(source, children)
        if self.leaf_batches and len(resources) == 1 and self._leaf_family(source, order) == resources[0].type:
            leaves_found = self._first_leaves(meta, order, resources, pristine, excl, dfu, max(multiplier, 1))
            if leaves_found is not None:
                return leaves_found
        shares = {r.type: [effective_max(r), 0, 0, 0] for r in resources}  # per_share, prev_total, current, shares
        satisfied: set[str] = set()
        vertices = self.graph.vertices
        for edge, target in order:
            if vertices[target].type in satisfied:
                continue
            if not self._visit_child(meta, edge, target, resources, pristine, excl, dfu, kids):
                continue
            found = True
            if tally_shares(shares, satisfied, resources, dfu.total_count, max(multiplier, 1)):
                break
        return found

    def _walk_parent(self, uid: int) -> int:
        """``uid``'s parent in the walked subsystem."""
        return self.graph.vertices[uid].parent

    def _walk_parents(self, uid: int) -> list[int]:
        """Every vertex the walk reaches ``uid`` from: in a containment DAG a vertex may have several."""
        graph = self.graph
        parents = []
        for index in graph.in_edges(uid):
            edge = graph.edges[index]
            if edge.subsystem == CONTAINMENT and edge.relation == "contains":
                parents.append(edge.source)
        return parents

    def _heaviest_first(self, source: int, children: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``first``'s explore order of ``source``'s children: heaviest edge, then highest uniq_id, first."""
        known = self._by_weight.get(source)
        if known is None:
            weight = self.edge_weight
            vertices = self.graph.vertices
            uniform = weight[children[0][0]]
            previous = -1
            family = vertices[children[0][1]].type
            for edge, target in children:
                vertex = vertices[target]
                uniq_id = vertex.uniq_id
                if weight[edge] != uniform or uniq_id <= previous:
                    break
                previous = uniq_id
                if vertex.out or vertex.type != family:
                    family = ""
            else:
                # Equal weights and ascending uniq_ids (a freshly read graph): the order is the children reversed,
                # and the sort keys are made only if a weight changes (see _reorder).
                known = self._by_weight[source] = (None, children[::-1])
                self._uniform_weight[source] = uniform
                self._leaf_families.setdefault(source, family)
                return known[1]
            # uniq_ids differ, so the keys never tie and the edges are never compared
            keyed = sorted([((-weight[edge], -vertices[target].uniq_id), edge, target) for edge, target in children])
            order = [(edge, target) for _, edge, target in keyed]
            known = self._by_weight[source] = ([key for key, _, _ in keyed], order)
        return known[1]

    def _leaf_family(self, source: int, children: list[tuple[int, int]]) -> str | None:
        """The type of ``source``'s children if they are all leaves (no out-edges) of one type, else None."""
        family = self._leaf_families.get(source)
        if family is None:
            vertices = self.graph.vertices
            family = vertices[children[0][1]].type
            for _, target in children:
                vertex = vertices[target]
                if vertex.out or vertex.type != family:
                    family = ""
                    break
            self._leaf_families[source] = family
        return family or None

    def _first_leaves(
        self,
        meta: JobMeta,
        order: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        needed: int,
    ) -> bool | None:
        """``first``'s explore of children that are all leaves of the one requested type (a socket's cores): what
        :meth:`_visit_leaf` and :func:`tally_shares` do child by child, in one loop. None when the leaves need
        :meth:`_evaluate` (see :meth:`_leaf_kind`)."""
        resource = resources[0]
        vertices = self.graph.vertices
        leaf = self._leaf_kind(vertices[order[0][1]], resources, pristine)
        if leaf is None or resource.type == SLOT:
            return None
        x_in = excl or leaf
        if x_in and resource.exclusive is False:
            conflict: str | None = f"exclusivity conflicts at jobspec={resource.label} : vertex="
        else:
            conflict = None
        check_held = x_in or resource.exclusive is True
        skip_allocated = check_held and conflict is None and meta.alloc_type == AllocType.ALLOCATE
        any_status = meta.alloc_type == AllocType.SATISFIABILITY
        at, duration = meta.at, meta.duration
        plans, subplans, policy = self._plans, self.subplans, self.policy
        allocations, uses = self._allocations, self._x_uses
        base = policy.leaf_base(resource.type)
        evals = dfu.evals(resource.type)
        per_share = effective_max(resource)
        total = evals.total
        previous = current = shares = 0
        groups: list[EdgeGroup] = []
        descending, last_score = True, float("inf")
        for edge, target in order:
            vertex = vertices[target]
            if vertex.status and not any_status:  # Status.UP is 0
                continue
            plan = plans.get(target)
            if plan is not None and skip_allocated and allocations.get(target):
                continue  # held whatever its availability (see _held), and no error to raise first
            avail = vertex.size if plan is None else plan.avail_resources_during(at, duration)
            if avail == 0:
                continue
            if conflict is not None:
                raise MatchFailure(Errno.EINVAL, conflict + vertex.name)
            if check_held and (target in allocations or target in uses) and self._held(meta, target):
                continue
            if target in subplans and not self._by_subplan(meta, target, resource):
                continue
            if base is None:
                policy.discover(vertex)
                score = policy.finish_leaf(vertex)
            else:
                score = base + vertex.id
            if score >= last_score:
                descending = False
            last_score = score
            groups.append(EdgeGroup(score, avail, 0, x_in, False, "", [EdgeEval(avail, avail, x_in, edge)]))
            total += avail
            if total > previous:
                current += total - previous
                previous = total
                if per_share > 0 and current >= per_share:
                    shares += 1
                    current = 0
            if shares >= needed:
                break
        evals.add_all(groups, descending_scores=descending)
        return bool(groups)

    def _visit_child(
        self,
        meta: JobMeta,
        edge: int,
        target: int,
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        kids: Kids,
    ) -> bool:
        """Visit one child; when it qualifies, take its candidates and its own group into ``dfu``."""
        vertex = self.graph.vertices[target]
        if self.leaf_shortcut and not vertex.out:
            leaf = self._leaf_kind(vertex, resources, pristine)
            if leaf is not None:
                return self._visit_leaf(meta, edge, vertex, resources, excl or leaf, dfu)
        evaluation = self._dom_dfv(meta, target, resources, pristine, excl)
        if evaluation.kids is not None or evaluation.marks is not None:
            kids[target] = evaluation
        if not evaluation.ok:
            return False
        self._take(evaluation, vertex.type, edge, dfu)
        return True

    def _take(self, evaluation: Evaluation, type: str, edge: int, dfu: Scoring) -> None:
        """Take a qualifying child's candidates and its own group (reached through ``edge``) into ``dfu``."""
        if evaluation.merged is not None:
            dfu.merge_types(evaluation.merged)
        dfu.add(type, evaluation.group_for(edge))

    def _leaf_kind(self, vertex: Vertex, resources: list[Request], pristine: bool) -> bool | None:
        """For a vertex without out-edges: None if :meth:`_evaluate` must see it (it fails the request's shape,
        or the request asks for something below it); else whether the request makes it exclusive. Memoised per
        request shape and vertex type, since all of a node's cores answer the same."""
        signature = self._signatures.get(id(resources))
        if signature is None:
            return None
        key = (signature, vertex.type, pristine)
        if key in self._leaf_kinds:
            return self._leaf_kinds[key]
        kind, next_resources, _, _, _ = self._match_kind(vertex, resources, pristine)
        answer: bool | None = None
        if kind == "pristine" or (kind == "resource" and not next_resources):
            answer = any(r.type == vertex.type and r.exclusive is True for r in resources)
        self._leaf_kinds[key] = answer
        return answer

    def _visit_leaf(
        self, meta: JobMeta, edge: int, vertex: Vertex, resources: list[Request], x_in: bool, dfu: Scoring
    ) -> bool:
        """:meth:`_visit_child` for a vertex without out-edges that asks for nothing below it (a core, a gpu): it
        has no candidates to score or choose, only its own availability and score, and nothing to cache."""
        if meta.alloc_type != AllocType.SATISFIABILITY and vertex.status != Status.UP:
            return False
        avail = self._avail(vertex.uid, meta.at, meta.duration)
        if avail == 0 or not self._prune_resources(meta, x_in, vertex, resources):
            return False
        policy = self.policy
        policy.discover(vertex)
        score = policy.finish_leaf(vertex)
        dfu.add(vertex.type, EdgeGroup(score, avail, 0, x_in, edges=[EdgeEval(avail, avail, x_in, edge)]))
        return True

    def _explore_blocks(
        self,
        meta: JobMeta,
        children: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        kids: Kids,
    ) -> bool:
        """The static explore of a wide vertex, through a tree of spans over its children.

        Level 0 spans are :data:`BLOCK` consecutive children, each level above groups :data:`BLOCK` spans of the
        level below, up to at most :data:`BLOCK` spans on top. A span's candidates (a part of the vertex's
        candidates, in the same order) are kept while the sum of its children's fingerprints is unchanged, so
        re-evaluating a vertex with thousands of children after one of them changed re-merges one span per level."""
        parent = self.graph.vertices[children[0][1]].parent
        layout = self._layouts.get(parent)
        if layout is None or layout.width != len(children):
            layout = self._layouts[parent] = self._layout(children)
        key = self._cache_key(meta, resources, pristine, excl)
        top = len(layout.fps) - 1
        found = False
        for index in range(len(layout.fps[top])):
            if _take_part(self._span(meta, parent, layout, top, index, key, resources, pristine, excl), dfu, kids):
                found = True
        return found

    def _layout(self, children: list[tuple[int, int]]) -> Layout:
        fp = self.fp
        layout = Layout(len(children), [children[i : i + BLOCK] for i in range(0, len(children), BLOCK)])
        level = [sum([fp[target] for _, target in block]) for block in layout.blocks]
        layout.fps.append(level)
        while len(level) > BLOCK:
            level = [sum(level[i : i + BLOCK]) for i in range(0, len(level), BLOCK)]
            layout.fps.append(level)
        layout.cache = [[{} for _ in level] for level in layout.fps]
        for position, (_, target) in enumerate(children):
            self._kid_pos[target] = position
        return layout

    def _span(
        self,
        meta: JobMeta,
        parent: int,
        layout: Layout,
        level: int,
        index: int,
        key: tuple[object, ...],
        resources: list[Request],
        pristine: bool,
        excl: bool,
    ) -> BlockPart:
        table = layout.cache[level][index]
        fingerprint = layout.fps[level][index]
        hit = self._cached(table, key, fingerprint, parent, meta)
        if hit is not None:
            return hit
        part_dfu = Scoring()
        part_kids = Kids()
        if level == 0:
            found = self._explore(meta, layout.blocks[index], resources, pristine, excl, part_dfu, 0, part_kids)
        else:
            found = False
            below = layout.fps[level - 1]
            for sub in range(index * BLOCK, min((index + 1) * BLOCK, len(below))):
                part = self._span(meta, parent, layout, level - 1, sub, key, resources, pristine, excl)
                if _take_part(part, part_dfu, part_kids):
                    found = True
        result = (part_dfu, found, part_kids)
        _remember(table, key, (fingerprint, meta.at, meta.at + meta.duration, result))
        return result

    def _dom_slot(
        self,
        meta: JobMeta,
        children: list[tuple[int, int]],
        shape: list[Request],
        nslots: int,
        pristine: bool,
        label: str,
        dfu: Scoring,
        kids: Kids,
    ) -> None:
        dfu_slot = Scoring()
        if not self._explore(meta, children, shape, pristine, True, dfu_slot, nslots, kids):
            return
        self.policy.finish_slot(dfu_slot)
        qualified_slots = self._count_slots(shape, dfu_slot)
        groups = []
        for _ in range(qualified_slots):
            slot_group = self._take_slot(shape, dfu_slot, label)
            if slot_group is None:
                return
            groups.append(slot_group)
        for group in groups:
            dfu.add(SLOT, group)

    @staticmethod
    def _take_slot(shape: list[Request], dfu_slot: Scoring, label: str) -> EdgeGroup | None:
        """The next slot's edges: for each element, the next best candidates covering its count (None when
        they run out)."""
        slot_group = EdgeGroup(MATCH_MET, 1, 0, True, task_label=label)
        for element in shape:
            evals = dfu_slot.evals(element.type)
            count = calc_count(element, evals.qualified)
            taken = 0
            while taken < count:
                group = evals.next_group()
                if group is None:
                    return None
                first = group.edges[0]
                slot_group.edges.append(EdgeEval(first.count, first.count, True, first.edge))
                slot_group.score += group.score
                taken += first.count
        return slot_group

    def _count_slots(self, shape: list[Request], dfu_slot: Scoring) -> int:
        fits = 2**32 - 1
        for element in shape:
            evals = dfu_slot.evals(element.type)
            count = calc_count(element, evals.qualified)
            shares = 0
            if count != 0:
                current = 0
                for group in evals.groups:
                    current += group.edges[0].count
                    if current >= count:
                        shares += 1
                        current = 0
            fits = min(fits, shares)
            evals.reset_cursor()
        return fits

    def _marks(self, dfu: Scoring) -> list[Mark]:
        """The edges a vertex's best-k choice marks (Fluxion's ``enforce``), in Fluxion's order.

        Below the root the marks are kept in the vertex's :class:`Evaluation` and stamped only when the update
        walk reaches the vertex, so a cached evaluation can be reused by a later match.
        """
        marks: list[Mark] = []
        labels = self.task_labels
        for type, evals in dfu.by_type.items():
            if evals.best_k == 0:
                continue
            if type != SLOT:
                marks.extend(
                    [
                        (item.edge, item.needs, item.exclusive, NO_LEAD)
                        for group in evals.groups[: evals.best_i]
                        if not group.root
                        for item in group.edges
                    ]
                )
                continue
            for i in range(evals.best_i):
                group = evals.groups[i]
                if group.root:
                    continue
                lead = LEAD if type == SLOT and group.task_label and group.task_label in labels else NO_LEAD
                for item in group.edges:
                    marks.append((item.edge, item.needs, item.exclusive, lead))
                    if lead == LEAD:
                        lead = NOT_LEAD
        return marks

    def _leaf_run(self, marks: list[Mark]) -> LeafRun | None:
        """``marks`` as a :class:`LeafRun`, if they are exclusive leaves of one source without slot leaders (and
        the containment is a tree: a leaf with two parents could be read through the one its pool is not under)."""
        if self.graph.shared_children:
            return None
        edges, vertices = self.graph.edges, self.graph.vertices
        source = edges[marks[0][0]].source
        leaves = []
        sizes: dict[str, int] = {}
        whole = True
        for edge, needs, exclusive, lead in marks:
            record = edges[edge]
            if record.source != source or not exclusive or lead != NO_LEAD:
                return None
            target = record.target
            vertex = vertices[target]
            if vertex.out and self._kid_edges(target):
                return None
            leaves.append((edge, target, needs))
            sizes[vertex.type] = sizes.get(vertex.type, 0) + vertex.size
            whole = whole and needs == vertex.size
        leaves.sort()
        if len({edge for edge, _, _ in leaves}) != len(leaves):
            return None
        whole = whole and len(leaves) == len(self._kid_edges(source))
        uids = [uid for _, uid, _ in leaves]
        return LeafRun(source, leaves, uids, sizes, whole, hash((source, tuple(leaves))))

    def _run_of(self, source: int, leaves: list[tuple[int, int, int]]) -> LeafRun:
        """The exclusive leaves (edge, leaf, needs) of ``source`` that the update walk records in one piece, as a
        :class:`LeafRun` (when they are not all its marks, say a node's gpus next to its sockets). Only for a
        source the job holds whole: no other job's match reads its leaves during the job's window, so the pool
        stays unwritten."""
        vertices = self.graph.vertices
        sizes: dict[str, int] = {}
        for _, uid, _ in leaves:
            vertex = vertices[uid]
            sizes[vertex.type] = sizes.get(vertex.type, 0) + vertex.size
        uids = [uid for _, uid, _ in leaves]
        return LeafRun(source, leaves, uids, sizes, False, hash((source, tuple(leaves))))

    def _unrun(self, source: int) -> None:
        """Stamp a marked run's edges one by one: another mark under its source joins it."""
        for edge, _, needs in self._run_marks.pop(source).leaves:
            self.mark_edge(edge, needs, True)

    def _new_marks(self) -> None:
        """Start the current match's marks (the first stamp of a match)."""
        if self._marked_seq != self.sequence:
            self._marked_seq = self.sequence
            self._marked = {}
            self._run_marks = {}

    def _apply_mark(self, mark: Mark) -> None:
        edge, needs, exclusive, lead = mark
        self.edge_needs[edge] = needs
        self.edge_excl[edge] = exclusive
        self._stamp(edge)
        if lead == LEAD:
            self._lead(edge)
        elif lead == NOT_LEAD:
            self._unlead_edge(edge)

    def _lead(self, edge: int) -> None:
        if edge not in self.slot_leader:
            self.slot_leader.add(edge)
            source = self.graph.edges[edge].source
            self._leads[source] = self._leads.get(source, 0) + 1

    def _unlead_edge(self, edge: int) -> None:
        if edge in self.slot_leader:
            self.slot_leader.discard(edge)
            source = self.graph.edges[edge].source
            left = self._leads[source] - 1
            if left:
                self._leads[source] = left
            else:
                del self._leads[source]

    def _stamp(self, edge: int) -> None:
        """Mark ``edge`` as chosen by the current match, and index it by its source for the update walk."""
        self.edge_seq[edge] = self.sequence
        self._new_marks()
        source = self.graph.edges[edge].source
        if source in self._run_marks:
            self._unrun(source)
        marked = self._marked.get(source)
        if marked is None:
            self._marked[source] = {edge}
        else:
            marked.add(edge)

    def _apply_own(self, evaluation: Evaluation) -> None:
        """Stamp an evaluation's own marks for the current match (once)."""
        sequence = self.sequence
        if evaluation.marks is None or evaluation.applied == sequence:
            return
        evaluation.applied = sequence
        self._new_marks()
        run = evaluation.run
        if run is not None and run.source not in self._marked and run.source not in self._run_marks:
            self._run_marks[run.source] = run  # stands for its edges' stamps (see _upd_dfv)
            return
        for mark in evaluation.marks:
            self._apply_mark(mark)

    def _apply_path(self, uid: int) -> None:
        """Stamp the marks of the evaluations from the root down to ``uid`` (the edges above ``uid``)."""
        path = []
        while uid != self.root and uid != -1:
            path.append(uid)
            uid = self._walk_parent(uid)
        evaluation: Evaluation | None = self.root_eval
        for step in reversed(path):
            if evaluation is None or evaluation.kids is None:
                return
            evaluation = evaluation.kids.get(step)
            if evaluation is not None:
                self._apply_own(evaluation)

    def _mark_ancestors(self, parent: int, dfu: Scoring) -> None:
        graph = self.graph
        vertices = graph.vertices
        while True:
            grand = vertices[parent].parent
            if grand == -1:
                return
            edge = self._parent_edge(parent)
            if self.edge_seq[edge] == self.sequence:
                return
            target_type = vertices[parent].type
            constrained = True
            evals = dfu.by_type.get(target_type)
            if evals is not None and evals.best_k == 0:
                constrained = False
            if not constrained:
                self.edge_needs[edge] = vertices[parent].size
                self.edge_excl[edge] = False
                self._stamp(edge)
            parent = grand

    def _parent_edge(self, uid: int) -> int:
        graph = self.graph
        parent = graph.vertices[uid].parent
        for index in graph.vertices[parent].out:
            edge = graph.edges[index]
            if edge.target == uid and edge.subsystem == CONTAINMENT and edge.relation == "contains":
                return index
        raise KeyError(uid)

    # ------------------------------------------------------------------ update (allocate phase)

    def update(self, writer: Writer, meta: JobMeta, *, full: bool = True) -> int:
        """Record the marked resources for ``meta`` and emit them; returns the number of slots.

        ``full=False`` is the replay of an allocation made elsewhere (``update``): the exclusive vertices already
        hold their planner spans, so only tags, exclusivity checkers and aggregate filters are recorded.
        """
        if self.root_seq != self.sequence:
            raise MatchFailure(Errno.EINVAL, "resource state wasn't properly set up for update")
        self._level = 0
        self._fresh = full and meta.jobid not in self.job_vertices
        if not full:
            self._settle()
        nslots = [0]
        root_vertex = self.graph.vertices[self.root]
        shadow = root_vertex.type in self.policy.exclusive_types
        evaluation = self.root_eval if full else None
        recorded = self._upd_dfv(
            self.root, writer, self.root_needs, self.root_excl, meta, {}, nslots, shadow, False, evaluation, [0], full
        )
        if full and not recorded:
            # As Fluxion's update: a match whose walk records nothing fails (nothing it chose is exclusive, or its
            # choices lie below a vertex no mark leads to), rather than succeed holding nothing.
            raise MatchFailure(Errno.EBUSY)
        return nslots[0]

    def _upd_dfv(
        self,
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
        vertices = self.graph.vertices
        vertex = vertices[uid]
        mod = emit_shadow or vertex.type in self.policy.exclusive_types
        excl = excl or mod
        self._level += 1
        n_plans = 0
        aggregates: dict[str, int] = {}
        sequence = self.sequence
        kid_evals = None
        if evaluation is not None:
            self._apply_own(evaluation)
            kid_evals = evaluation.kids
        delta = [0]
        children: Iterable[tuple[int, int]]
        run = self._run_marks.get(uid) if self._marked_seq == sequence else None
        if run is not None and (not mod or run.whole):
            # The run is all the edges marked below uid (and, when uid is held whole, all its children whole).
            n_plans += self._upd_leaves(uid, run.leaves, writer, meta, aggregates, excl, delta, full, nslots, run)
            children = []
        elif mod or self._marked_seq != sequence:
            children = self._kid_edges(uid)
        else:
            edges = self.graph.edges
            children = [(edge, edges[edge].target) for edge in sorted(self._marked.get(uid, ()))]
        kid_edges = self._kid_edges
        exclusive_types = self.policy.exclusive_types
        edge_seq, edge_excl, edge_needs = self.edge_seq, self.edge_excl, self.edge_needs
        leaves: list[tuple[int, int, int]] = []
        for edge, target in children:
            if edge_seq[edge] != sequence and not mod:
                continue
            x = edge_excl[edge] or mod
            child = vertices[target]
            child_needs = child.size if mod else edge_needs[edge]
            if not child.out or not kid_edges(target):
                if x or child.type in exclusive_types:  # a shared leaf records nothing
                    leaves.append((edge, target, child_needs))
                continue
            if leaves:
                n_plans += self._upd_leaves(uid, leaves, writer, meta, aggregates, excl, delta, full, nslots)
                leaves = []
            child_eval = kid_evals.get(target) if kid_evals else None
            n_sub = self._upd_dfv(
                target, writer, child_needs, x, meta, aggregates, nslots, mod, excl, child_eval, delta, full
            )
            if n_sub > 0:
                if edge in self.slot_leader and self.edge_seq[edge] == sequence:
                    nslots[0] += 1
                if self.policy.spec.stop_on_first:
                    delta[0] += self._update_weight(edge, target, meta)
                writer.edge(self._level, self.graph, edge, excl)
                n_plans += n_sub
        if leaves:
            n_plans += self._upd_leaves(uid, leaves, writer, meta, aggregates, excl, delta, full, nslots)
        if excl:
            n_plans += 1
            if full:
                self._add_plan(uid, meta, needs)
        if n_plans > 0:
            own = hash((uid, meta.jobid, meta.at, meta.duration, int(meta.alloc_type), needs, excl))
            self._add_job_data(uid, meta, aggregates, own)
            delta[0] += own
            total = self.prune_filters.total
            if vertex.type in total:
                used = vertex.size if excl else vertex.size - needs
                to_parent[vertex.type] = to_parent.get(vertex.type, 0) + used
            for type, count in aggregates.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + count
            writer.vertex(self._level, vertex, needs, excl, excl_parent)
        if delta[0]:
            self._bump(uid, delta[0])
            changed[0] += delta[0]
        self._level -= 1
        return n_plans

    def _upd_leaves(
        self,
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
        total = self.prune_filters.total
        if run is None and excl_parent and self._fresh and self.leaf_runs and not self.graph.shared_children:
            run = self._run_of(source, leaves)  # a node's gpus next to its sockets, say
        if run is not None and self._fresh and source not in self._layouts:  # after the pools before it
            added = hash((run.signature, _job_key(jobid, meta.at, meta.duration, meta.alloc_type)))
            pool = _Pool(jobid, run, meta.at, meta.duration, meta.alloc_type, added)
            self._pools.setdefault(source, []).append(pool)
            self._job_vertices(jobid).update(run.uids)
            for type, size in run.sizes.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + size
        else:
            if source in self._pools:  # they were recorded first
                self._settle_source(source)
            added = self._record(source, leaves, jobid, meta.at, meta.duration, meta.alloc_type, full)
            vertices = self.graph.vertices
            for _, uid, _ in leaves:
                vertex = vertices[uid]
                if vertex.type in total:
                    to_parent[vertex.type] = to_parent.get(vertex.type, 0) + vertex.size
        writer.leaves(self._level + 1, self.graph, leaves, excl_parent, None if run is None else run.texts)
        if source in self._leads:
            sequence = self.sequence
            for edge, _, _ in leaves:
                if edge in self.slot_leader and (run is not None or self.edge_seq[edge] == sequence):
                    nslots[0] += 1
        changed[0] += added
        return len(leaves)

    def _record(
        self,
        source: int,
        leaves: list[tuple[int, int, int]],
        jobid: int,
        at: int,
        duration: int,
        alloc_type: AllocType,
        full: bool,
        total: int | None = None,
    ) -> int:
        """Record ``jobid`` on exclusive leaves of ``source`` (planner span, tags, use, fingerprint) during
        ``[at, at + duration)``; each leaf's share of the fingerprint is a hash of it and the job, the last one
        made up so they add up to ``total`` if given (a pool written late: its source already counts it).
        Returns the fingerprint change."""
        end = at + duration
        job_key = _job_key(jobid, at, duration, alloc_type)
        plans, tags, x_uses, fp = self._plans, self._tags, self._x_uses, self.fp
        table = self._span_table(alloc_type)
        wide = source in self._layouts
        last = len(leaves) - 1
        added = shares = 0
        for i, (_, uid, needs) in enumerate(leaves):
            if full:
                plan = plans.get(uid)
                if plan is None:
                    plan = self._new_plan(uid)
                span = plan.add_span(at, duration, needs)
                if table is not None:
                    spans = table.get(uid)
                    if spans is None:
                        table[uid] = {jobid: span}
                    else:
                        spans[jobid] = span
            held = tags.get(uid)
            if held is None:
                tags[uid] = {jobid}
            else:
                held.add(jobid)
            own = hash((uid, needs, job_key))
            if total is not None and i == last:
                own = total - shares
            shares += own
            uses = x_uses.get(uid)
            if uses is None:
                x_uses[uid] = {jobid: (at, end, own)}
            else:
                previous = uses.get(jobid)
                if previous is not None:
                    own += previous[2]
                    self._unbound(uid, previous[0], previous[1])
                uses[jobid] = (at, end, own)
            if wide:
                self._bump(uid, own)
            else:
                fp[uid] += own
            added += own
        self._job_vertices(jobid).update([uid for _, uid, _ in leaves])
        return added

    def _add_plan(self, uid: int, meta: JobMeta, needs: int) -> None:
        plan = self._plans.get(uid)
        if plan is None:
            plan = self._new_plan(uid)
        span = plan.add_span(meta.at, meta.duration, needs)
        self._job_vertices(meta.jobid).add(uid)
        table = self._span_table(meta.alloc_type)
        if table is None:
            return
        spans = table.get(uid)
        if spans is None:
            table[uid] = {meta.jobid: span}
        else:
            spans[meta.jobid] = span

    def _new_plan(self, uid: int) -> Planner:
        """``uid``'s planner, made when it first holds a span (a one-unit vertex keeps a small table)."""
        vertex = self.graph.vertices[uid]
        kind = UnitPlanner if vertex.size == 1 else Planner
        plan = self._plans[uid] = kind(vertex.size, self.base, self.horizon, vertex.type)
        return plan

    def _span_table(self, alloc_type: AllocType) -> dict[int, dict[int, int]] | None:
        """Where a span of this kind is listed per vertex and job (None for a satisfiability test)."""
        if alloc_type == AllocType.ALLOCATE:
            return self._allocations
        if alloc_type == AllocType.ALLOCATE_ORELSE_RESERVE:
            return self._reservations
        return None

    def _job_vertices(self, jobid: int) -> set[int]:
        """The vertices where ``jobid`` is recorded (see :attr:`job_vertices`)."""
        found = self.job_vertices.get(jobid)
        if found is None:
            found = self.job_vertices[jobid] = set()
        return found

    def _add_job_data(self, uid: int, meta: JobMeta, aggregates: dict[str, int], fingerprint: int) -> None:
        self._tags.setdefault(uid, set()).add(meta.jobid)
        self._job_vertices(meta.jobid).add(uid)
        uses = self._x_uses.get(uid)
        if uses is None:
            uses = self._x_uses[uid] = {}
        previous = uses.get(meta.jobid)
        if previous is not None:
            fingerprint += previous[2]
            self._unbound(uid, previous[0], previous[1])
        end = meta.at + meta.duration
        uses[meta.jobid] = (meta.at, end, fingerprint)
        if self._kid_edges(uid):  # only non-leaf evaluations are cached, so only they need their bounds
            bounds = self.bounds.get(uid)
            if bounds is None:
                self.bounds[uid] = [meta.at, end]
            else:
                insort(bounds, meta.at)
                insort(bounds, end)
        subplan = self.subplans.get(uid)
        if subplan is not None and aggregates:
            counts = [aggregates.get(type, 0) for type in subplan.resource_types]
            self.job2span.setdefault(uid, {})[meta.jobid] = subplan.add_span(meta.at, meta.duration, counts)

    def _update_weight(self, edge: int, target: int, meta: JobMeta) -> int:
        """Re-weigh ``edge`` by its target's free aggregate (``first``'s explore order); returns the change to
        the source's fingerprint."""
        subplan = self.subplans.get(target)
        if subplan is None:
            return 0
        order_type = self.prune_filters.order_type(self.graph.vertices[target].type)
        if order_type is None:
            return 0
        # A type absent below the target is in Fluxion's filter with total 0 (see PruningFilters.order_type).
        avail = subplan.avail_resources_at(meta.now, order_type) if order_type in subplan.resource_types else 0
        if avail == 0 and subplan.span_count() == 0:
            return 0
        old = self.edge_weight[edge]
        new = self.edge_weight[edge] = max(avail, 0)
        if new != old:
            self._reorder(edge, target, old, new)
        return _weight_hash(edge, new) - _weight_hash(edge, old)

    def _reorder(self, edge: int, target: int, old: int, new: int) -> None:
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

    # ------------------------------------------------------------------ cancel

    def cancel(self, jobid: int) -> None:
        """Remove every span of ``jobid`` (allocation or reservation) from the graph."""
        self.preorder = 0
        self.postorder = 0
        walked = jobid in self._tags.get(self.root, ())
        if walked:
            self._rem_dfv(self.root, jobid, _JobTree(self, jobid))
        if not walked or jobid in self.released_in_part:
            self._sweep(jobid)
        self.job_vertices.pop(jobid, None)
        self.released_in_part.discard(jobid)

    def _sweep(self, jobid: int) -> None:
        """Remove what the walk could not reach (the job's state below a vertex that no longer holds it, or all of
        it when the root does not): every vertex the job was recorded on is looked at, not every vertex."""
        self._settle()
        for uid in sorted(self.job_vertices.get(jobid, ())):
            if jobid in self.tags.get(uid, ()):
                delta = self._rem_own(uid, jobid)
                if uid in self._leads:
                    for edge, _ in self._kid_edges(uid):
                        self._unlead_edge(edge)
                self.touch(uid, -delta if delta else 0)
            else:
                span = self._pop_span(uid, jobid)
                if span is not None:
                    self.plans[uid].rem_span(span)
                    self.touch(uid)

    def _rem_dfv(self, uid: int, jobid: int, held: _JobTree) -> int:
        """Remove ``jobid`` below ``uid``; returns the fingerprint change of the subtree.

        As Fluxion's cancel, every child of a vertex the job holds is visited (and counted in :attr:`preorder`);
        under a wide vertex only the children the job was recorded on are walked, and the others only counted."""
        self.preorder += 1
        delta = self._rem_own(uid, jobid)
        if delta is None:
            return 0
        if uid in self._pools:
            delta += self._drop_pools(uid, jobid)
        kids = self._kid_edges(uid)
        if len(kids) > WIDE_CANCEL + 2 * held.size:
            mine = held.children(uid)
            self.preorder += len(kids) - len(mine)
            if uid in self._leads:
                for edge, _ in kids:
                    self._unlead_edge(edge)
            for target in mine:
                delta += self._rem_dfv(target, jobid, held)
        else:
            unlead = self._unlead_edge if uid in self._leads else None
            vertices = self.graph.vertices
            leaves = []
            for edge, target in kids:
                if unlead is not None:
                    unlead(edge)
                if vertices[target].out:
                    delta += self._rem_dfv(target, jobid, held)
                else:
                    leaves.append(target)
            if leaves:
                delta += self._rem_leaves(uid, leaves, jobid)
        self._bump(uid, -delta)
        self.postorder += 1
        return delta

    def _drop_pools(self, source: int, jobid: int) -> int:
        """Drop ``jobid``'s unwritten pools on ``source``'s leaves (counted as the leaf-by-leaf walk would count
        them); returns their share of the fingerprints."""
        pools = self._pools[source]
        kept = [pool for pool in pools if pool.jobid != jobid]
        if len(kept) == len(pools):
            return 0
        dropped = 0
        for pool in pools:
            if pool.jobid == jobid:
                dropped += pool.total
                self.postorder += len(pool.run.leaves)
        if kept:
            self._pools[source] = kept
        else:
            del self._pools[source]
        return dropped

    def _rem_leaves(self, source: int, leaves: list[int], jobid: int) -> int:
        """:meth:`_rem_dfv` for children of ``source`` without out-edges (most of a large job's vertices: its
        cores), in one loop: :meth:`_rem_own` without the parts a leaf does not have (aggregate filter, span
        bounds) unless it has them. Returns the fingerprint change."""
        tags, x_uses, plans, fp = self._tags, self._x_uses, self._plans, self.fp
        allocations, reservations = self._allocations, self._reservations
        bounds, job2span = self.bounds, self.job2span
        wide = source in self._layouts
        total = 0
        held = 0
        for uid in leaves:
            if wide or uid in bounds or uid in job2span:
                delta = self._rem_own(uid, jobid)
                if delta is not None:
                    held += 1
                    total += delta
                    self._bump(uid, -delta)
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
        self.preorder += len(leaves)
        self.postorder += held
        return total

    def _rem_own(self, uid: int, jobid: int) -> int | None:
        """Remove what ``jobid`` holds on ``uid`` itself; its share of the fingerprint, None if it holds nothing."""
        tags = self._tags.get(uid)
        if tags is None or jobid not in tags:
            return None
        tags.discard(jobid)
        uses = self._x_uses.get(uid)
        use = uses.pop(jobid, None) if uses is not None else None
        delta = 0
        if use is not None:
            delta = use[2]
            if uid in self.bounds:
                self._unbound(uid, use[0], use[1])
        spans = self.job2span.get(uid)
        if spans is not None and jobid in spans:
            self.subplans[uid].rem_span(spans.pop(jobid))
        span = self._pop_span(uid, jobid)
        if span is not None:
            self._plans[uid].rem_span(span)
        return delta

    def _unbound(self, uid: int, start: int, end: int) -> None:
        bounds = self.bounds.get(uid)
        if bounds:
            del bounds[bisect_left(bounds, start)]
            del bounds[bisect_left(bounds, end)]

    def _pop_span(self, uid: int, jobid: int) -> int | None:
        """Take ``jobid``'s planner span on ``uid`` (an allocation or a reservation) out of the job tables; its
        id in ``uid``'s planner, None if there is none."""
        spans = self._allocations.get(uid)
        if spans is None or jobid not in spans:
            spans = self._reservations.get(uid)
            if spans is None or jobid not in spans:
                return None
        return spans.pop(jobid)

    # ------------------------------------------------------------------ queries

    def root_subplan(self) -> MultiPlanner:
        return self.subplans[self.root]

    def mark(self, uid: int, status: Status) -> None:
        """Set a subtree root's status (Fluxion marks only the root; pruning stops at it)."""
        self._settle()
        vertex = self.graph.vertices[uid]
        if vertex.status == status:
            return
        self.touch(uid, _status_hash(uid, status) - _status_hash(uid, vertex.status))
        vertex.status = status
        delta = self._nodes_within.get(uid)
        if delta is None:
            stack = [uid]
            delta = 0
            while stack:
                current = stack.pop()
                if self.graph.vertices[current].type == "node":
                    delta += 1
                stack.extend(target for _, target in self._kid_edges(current))
            self._nodes_within[uid] = delta
        self.nodes_up += delta if status == Status.UP else -delta

    # ------------------------------------------------------------------ for replay, release and find
    # (kubeflux.match.update, .elastic, .find change the schedule from outside a match through these, so the
    # caches above stay true)

    def mark_edge(self, edge: int, needs: int, exclusive: bool) -> None:
        """Mark ``edge`` for the update walk of the current sequence, as a match's choice would."""
        self.edge_needs[edge] = needs
        self.edge_excl[edge] = exclusive
        self._stamp(edge)

    def plan_span(self, uid: int, meta: JobMeta, amount: int) -> None:
        """Add ``meta``'s planner span of ``amount`` units on ``uid``; PlannerError if it does not fit.

        The fingerprints are left to the update walk that records the job on ``uid`` next (as a match's own
        walk adds a span and its share of the fingerprints together); :meth:`unplan` undoes it if none follows."""
        self._settle()
        self._add_plan(uid, meta, amount)

    def busy(self, uid: int, at: int, end: int) -> bool:
        """Whether a job holds ``uid`` or something below it during ``[at, end)``."""
        self._settle()
        return self._x_busy(uid, at, end - at)

    def holds_span(self, uid: int, jobid: int) -> bool:
        """Whether ``jobid`` has a planner span on ``uid`` (an allocation or a reservation)."""
        return jobid in self.allocations.get(uid, ()) or jobid in self.reservations.get(uid, ())

    def unplan(self, uid: int, jobid: int) -> int:
        """Remove ``jobid``'s planner span on ``uid``; return the units it held (0 if there was none)."""
        self._settle()
        span = self._pop_span(uid, jobid)
        if span is None:
            return 0
        plan = self.plans[uid]
        amount = plan.span_resources(span)
        plan.rem_span(span)
        self.touch(uid)
        return amount

    def drop_use(self, uid: int, jobid: int) -> None:
        """Forget that ``jobid`` uses ``uid`` (its exclusivity record) and its share of the fingerprints."""
        use = self.x_uses.get(uid, {}).pop(jobid, None)
        if use is not None:
            self._unbound(uid, use[0], use[1])
            self.touch(uid, -use[2])

    def unlead(self, uid: int) -> None:
        """Forget that the edge into ``uid`` leads a task slot."""
        if self.graph.vertices[uid].parent != -1:
            self._unlead_edge(self._parent_edge(uid))

    def children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of ``uid``'s children in the walked subsystem, in edge order (do not modify)."""
        return self._kid_edges(uid)

    def has_children(self, uid: int) -> bool:
        return bool(self._kid_edges(uid))

    # ------------------------------------------------------------------ graph growth and shrink

    def refresh(self, changed: Iterable[int], added: Iterable[int] = (), removed: Iterable[int] = ()) -> None:
        """Re-initialise after vertices were ``added`` to or ``removed`` from the graph (Fluxion's
        ``initialize`` after ``attach``/``remove``); ``changed`` are the surviving vertices whose containment
        children changed. Sizes the per-edge tables, forgets cached children and evaluations there, gives new
        vertices their aggregate filters and every surviving filter its new totals, keeping the spans it holds.
        """
        self._settle()
        graph = self.graph
        grow = len(graph.edges) - len(self.edge_needs)
        if grow > 0:
            self.edge_needs.extend([0] * grow)
            self.edge_excl.extend([False] * grow)
            self.edge_seq.extend([0] * grow)
            self.edge_weight.extend([WEIGHT_MAX] * grow)
        for uid in changed:
            self.graph_changed(uid)
        kept = self.subplans
        self.subplans = {}
        with paused_gc():
            self._prime(self.root)
        for uid, fresh in self.subplans.items():
            old = kept.get(uid)
            if old is not None:
                old.update([(type, fresh.resource_total(type)) for type in fresh.resource_types])
                self.subplans[uid] = old
        for uid, old in kept.items():
            if uid not in self.subplans and self.job2span.get(uid) and not graph.vertices[uid].removed:
                self.subplans[uid] = old  # still holds job spans: keep it until they are cancelled
        vertices = graph.vertices
        for uid in added:
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.nodes_up += 1
        for uid in removed:
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.nodes_up -= 1


def tally_shares(
    shares: dict[str, list[int]],
    satisfied: set[str],
    resources: list[Request],
    total_count: Callable[[str], int],
    needed: int,
) -> bool:
    """Count a matched child toward the requested types' shares (Fluxion's ``tally_shares``); note the types
    now satisfied; True when every requested type has ``needed`` shares (``is_enough``)."""
    for type, tally in shares.items():
        total = total_count(type)
        if total > tally[1]:
            tally[2] += total - tally[1]
            tally[1] = total
            if tally[0] > 0 and tally[2] >= tally[0]:
                tally[3] += 1
                tally[2] = 0
    enough = True
    for resource in resources:
        if shares[resource.type][3] >= needed:
            satisfied.add(resource.type)
        else:
            enough = False
    return enough


def _remember(table: CacheTable[T], key: CacheKey, entry: tuple[int, int, int, T]) -> None:
    """Keep ``entry`` under ``key``, dropping the oldest entry beyond :data:`CACHE_PER_VERTEX`."""
    table[key] = entry
    if len(table) > CACHE_PER_VERTEX:
        del table[next(iter(table))]


class _JobTree:
    """The vertices a job was recorded on, grouped by their parent in the walked subsystem (built on first use:
    only a cancel that meets a wide vertex needs it)."""

    __slots__ = ("_by_parent", "_jobid", "_traverser", "size")

    def __init__(self, traverser: Traverser, jobid: int) -> None:
        self._traverser = traverser
        self._jobid = jobid
        self._by_parent: dict[int, list[int]] | None = None
        self.size = len(traverser.job_vertices.get(jobid, ()))

    def children(self, uid: int) -> list[int]:
        """The children of ``uid`` the job was recorded on, in uid order."""
        if self._by_parent is None:
            traverser = self._traverser
            vertices = traverser.graph.vertices
            walk_parents = traverser._walk_parents
            by_parent: dict[int, list[int]] = {}
            for vertex in sorted(traverser.job_vertices.get(self._jobid, ())):
                if not vertices[vertex].removed:
                    for parent in walk_parents(vertex):
                        by_parent.setdefault(parent, []).append(vertex)
            self._by_parent = by_parent
        return self._by_parent.get(uid, [])


def _job_key(jobid: int, at: int, duration: int, alloc_type: AllocType) -> int:
    """A hash of what a job's record on a vertex is: its leaves' fingerprint shares are made from it."""
    return hash((jobid, at, duration, int(alloc_type)))


def _take_part(part: BlockPart, dfu: Scoring, kids: Kids) -> bool:
    """Add a span's candidates and marked children to a vertex's; whether any of them qualified."""
    dfu.merge_types(part[0].by_type)
    if part[2]:
        kids.blocks.append(part[2])
    return part[1]


def _weight_hash(edge: int, weight: int) -> int:
    return 0 if weight == WEIGHT_MAX else hash(("weight", edge, weight))


def _status_hash(uid: int, status: Status) -> int:
    return 0 if status == Status.UP else hash(("status", uid, status.value))
