"""The depth-first-and-up (DFU) select walk: Fluxion's matching walk, step for step (``dfu_impl.cpp``).

``select`` walks the containment tree from the root, pruning subtrees that cannot satisfy the request (status,
exclusivity, per-subtree aggregate filters), lets the policy score candidates on the way up and marks the edges of
the chosen ones; evaluations of unchanged subtrees are reused. The engine then hands the marks to the update walk
(:mod:`kubeflux.match.record`).

The engine's parts, each a module: the schedule as the walks read it (:mod:`~kubeflux.match.view`) and as the update
and cancel walks change it (:mod:`~kubeflux.match.schedule`), the marks the walks of a match share
(:mod:`~kubeflux.match.state`), what a visit is for (:mod:`~kubeflux.match.visit`), the records a visit leaves
(:mod:`~kubeflux.match.evaluation`), the select walk (here, with its wide vertices in :mod:`~kubeflux.match.wide`
and its leaves in :mod:`~kubeflux.match.leaves` and :mod:`~kubeflux.match.slots`), the update walk and the cancel
walk. A :class:`Traverser` holds the walk state and the schedule's view, not the schedule: the select walk reads the
schedule and leaves marks, and never writes it.
"""

from __future__ import annotations

from collections.abc import Callable

from kubeflux.match import wide
from kubeflux.match.evaluation import (
    BLOCK,
    CACHE_PER_VERTEX,
    FAILED,
    CacheTable,
    Evaluation,
    Excluded,
    Kids,
    fresh,
)
from kubeflux.match.keys import CacheKeys
from kubeflux.match.leaves import (
    KindPlan,
    LeafWalk,
    add_leaves,
    first_leaf_slots,
    kind_plan,
    leaf_candidates,
    own_exclusive,
    own_leaves,
)
from kubeflux.match.meta import AllocType, Errno, JobMeta, MatchFailure
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.scoring import MATCH_UNMET, EdgeEval, EdgeGroup, Scoring
from kubeflux.match.slotbound import Elements, too_few_slots
from kubeflux.match.slots import count_slots, leaf_slots, own_slot, take_slot
from kubeflux.match.state import SLOT, WalkState
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import Vertex

_NO_UIDS: frozenset[int] = frozenset()
"""No uid excluded: the walk of a few levels child by child (:meth:`Traverser._explore_wide`)."""


class Traverser:
    """DFU matching over the containment subsystem of one graph: the select walk (see the module docstring)."""

    wide_blocks = True
    """Whether wide vertices explore through cached spans of children (see :mod:`kubeflux.match.wide`)."""
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
    :meth:`CacheKeys.count_free`); off for traversers whose slots read it lower down."""

    def __init__(self, state: WalkState) -> None:
        self.state = state
        self.schedule = state.schedule
        """The schedule as the walk reads it (a view: the select walk never writes the schedule)."""
        self.graph = state.graph
        self.excluded: Excluded | None = None
        """Node vertices below the root that the current walk must treat as down (given to :meth:`select` for one
        walk; see :meth:`Engine.match`): a scheduler hides the nodes a pod may not use this way instead of
        marking them down, which would change their fingerprints and so void their cached evaluations. None
        between walks, and below a vertex with no excluded node under it."""
        self.level_types: frozenset[str] = frozenset()  # levels above the nodes (racks): wide.levels_below
        self.covers: Callable[[int], object] | None = None  # a level with an excluded node below (see select)
        self.keys = CacheKeys()
        self._cache: dict[int, CacheTable[Evaluation]] = {}
        self._leaf_kinds: dict[tuple[int, str, bool], bool | None] = {}
        self._kinds: dict[tuple[int, str, bool], KindPlan] = {}
        """What a request list says of a vertex type (see :meth:`_match_kind`)."""
        self._exclusives: dict[tuple[int, str], tuple[list[Request], bool]] = {}
        self._leaves = self._leaf_walk()
        self._bounded: Elements | None = None
        """The slot elements the current walk's bound counted the root's children for (None: it did not count);
        its blocks counted empty are skipped (:func:`~kubeflux.match.slotbound.empty_block`)."""

    def select(self, root_visit: Visit, excluded: Excluded | None = None) -> None:
        """Find and mark the best resources for the root's visit (its request, at its ``meta.at``, under its
        policy), the nodes in ``excluded`` treated as down (see :attr:`excluded`; its ``covers(uid)``, if it has
        one, tells the vertices above the nodes that have an excluded node below them); raise MatchFailure if
        none."""
        self.excluded = excluded
        self.covers = getattr(excluded, "covers", None) if excluded is not None else None
        try:
            self._select(root_visit)
        finally:
            self.excluded = None
            self.covers = None

    def _select(self, root_visit: Visit) -> None:
        resources, meta, exclusive, policy = (
            root_visit.resources,
            root_visit.meta,
            root_visit.exclusive,
            root_visit.policy,
        )
        schedule, state = self.schedule, self.state
        self._leaves = self._leaf_walk()  # (the settings as they are now: a test may change them between walks)
        self._bounded = None
        if self.slot_bounds:
            refused, self._bounded = too_few_slots(schedule, resources, meta)
            if refused:
                raise MatchFailure(Errno.EBUSY)
        state.next_sequence()
        at, duration = meta.at, meta.duration
        in_range = schedule.base <= at and at + duration <= schedule.base + schedule.horizon
        self.keys.begin(meta, in_range, tuple(state.task_labels), policy.spec)
        self.keys.sign(resources)
        self.keys.count_free(resources, self.count_free_parts and not policy.spec.stop_on_first)
        root = schedule.root
        evaluation = self._dom_dfv(root_visit, root)
        state.root_eval = evaluation
        if not evaluation.ok:
            raise MatchFailure(Errno.EBUSY)
        state.apply_own(evaluation)
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
        needs = self._resolve_graph(root, resources, dfu, policy)
        state.root_needs = max(needs, 0)
        state.root_excl = evaluation.x_in
        state.root_seq = state.sequence
        if needs < 0:
            raise MatchFailure(Errno.ENODEV)

    def prime_jobspec(self, resources: list[Request], to_parent: dict[str, int], policy: MatchPolicy) -> None:
        """Fluxion's ``prime_jobspec``: each request's aggregate counts of the tracked types below it (its
        ``user_data``), summed into ``to_parent``; the types requested exclusively go to ``policy``."""
        total = self.schedule.prune_filters.total
        for resource in resources:
            if resource.exclusive is True:
                policy.exclusive_types.add(resource.type)
            if resource.type in total:
                to_parent[resource.type] = to_parent.get(resource.type, 0) + resource.min
            resource.user_data = {}
            self.prime_jobspec(resource.with_, resource.user_data, policy)
            self.aggregate_up(resource, to_parent, total)

    def aggregate_up(self, resource: Request, to_parent: dict[str, int], total: set[str]) -> None:
        """Add ``resource``'s aggregates (its ``user_data``: the tracked types below it) to its parent's: ``min``
        times each."""
        for type, count in resource.user_data.items():
            if type in total:
                to_parent[type] = to_parent.get(type, 0) + resource.min * count

    def forget_requests(self, resources: list[Request]) -> None:
        """Forget the cache keys of a request list its owner no longer matches (see :meth:`CacheKeys.forget`)."""
        self.keys.forget(resources)

    def _resolve_graph(self, root: int, resources: list[Request], dfu: Scoring, policy: MatchPolicy) -> int:
        if not policy.finish_graph(resources, dfu):
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
        self.state.mark_choices(dfu)
        return needs

    def _match_kind(
        self, vertex: Vertex, resources: list[Request], pristine: bool
    ) -> tuple[str, list[Request], int, str, bool]:
        """Fluxion's ``test``: (kind, next resources, nslots, slot label, pristine). What the request says of a
        vertex type is worked out once per request list (:func:`~kubeflux.match.leaves.kind_plan`); only whether a
        slot fits is asked of each vertex."""
        plan = self._kinds.get((id(resources), vertex.type, pristine))
        if plan is None or plan[0] is not resources:
            plan = kind_plan(self._kinds, vertex.type, resources, pristine)
        slot = plan[1]
        if slot is not None and self.schedule.slot_fits(vertex, slot):
            return plan[2]
        return plan[3]

    def _prune(self, visit: Visit, exclusive: bool, vertex: Vertex) -> int:
        """The units of ``vertex`` free during the visit's window if the walk may descend into it, else 0 (it is
        pruned). The select walk changes no planner, so the count holds until the vertex's visit ends."""
        meta = visit.meta
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return 0
        schedule = self.schedule
        avail = schedule.avail(vertex.uid, meta.at, meta.duration)
        if avail == 0:
            return 0
        if vertex.type == "node" and visit.policy.spec.node_exclusive and schedule.held(meta, vertex.uid):
            # The update walk will hold the node whole, planning every vertex below it: a node another job uses is
            # out, as if the jobspec asked for it exclusively. Fluxion checks only the node's own planner here,
            # which suffices while every job holds its nodes whole; a node a job holds in part (a pod of another
            # policy, a replayed or partly released job) would fail its update walk half way.
            return 0
        return avail if self._prune_resources(meta, exclusive, vertex, visit.resources) else 0

    def _prune_resources(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> bool:
        for resource in resources:
            if vertex.type != resource.type and resource.type != SLOT:
                continue
            if resource.type != SLOT and not self._by_excl(meta, exclusive, vertex, resource):
                return False
            if not self.schedule.by_subplan(meta, vertex.uid, resource):
                return False
        return True

    def _by_excl(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resource: Request) -> bool:
        if exclusive and resource.exclusive is False:
            conflict = f"exclusivity conflicts at jobspec={resource.label} : vertex={vertex.name}"
            raise MatchFailure(Errno.EINVAL, conflict)
        return not ((exclusive or resource.exclusive is True) and self.schedule.held(meta, vertex.uid))

    def _dom_dfv(self, visit: Visit, uid: int) -> Evaluation:
        """Visit ``uid`` (or reuse the evaluation of an unchanged subtree for the same request and window)."""
        schedule = self.schedule
        children = schedule.children(uid)
        root = uid == schedule.root
        if not children or (self.excluded is not None and (root or self.covers is not None)):
            # (the root's evaluation, or a level's above an excluded node, depends on them: never kept nor reused)
            return self._evaluate(visit, uid, children)
        fp = schedule.fp[uid]
        keys = self.keys
        key = (
            keys.root_key(visit.resources, visit.pristine, visit.exclusive)
            if root
            else keys.part_key(visit.resources, visit.pristine, visit.exclusive)
        )
        table = self._cache.get(uid)
        if table is None:
            table = self._cache[uid] = {}
        else:
            entry = table.get(key)  # (a vertex ``first`` visits again has mostly changed since: test first)
            if entry is not None:
                hit = fresh(entry, fp, schedule.bounds.get(uid), visit.meta)
                if hit is not None:
                    return hit
        evaluation = self._evaluate(visit, uid, children)
        meta = visit.meta
        table[key] = (fp, meta.at, meta.at + meta.duration, evaluation)
        if len(table) > CACHE_PER_VERTEX:
            del table[next(iter(table))]
        return evaluation

    def _evaluate(self, visit: Visit, uid: int, children: list[tuple[int, int]]) -> Evaluation:
        schedule = self.schedule
        vertex = self.graph.vertices[uid]
        resources, meta, policy = visit.resources, visit.meta, visit.policy
        if uid in schedule.pools and schedule.pools_matter(uid, meta, children):
            schedule.settle_source(uid)
        x_in = visit.exclusive or own_exclusive(self._exclusives, vertex.type, resources)
        kind, next_resources, nslots, label, check_pristine = self._match_kind(vertex, resources, visit.pristine)
        if kind == "none":
            return FAILED
        avail = self._prune(visit, x_in, vertex)
        if not avail:
            return FAILED
        policy.discover(vertex)
        dfu = Scoring()
        kids = Kids()
        stop_on_first = policy.spec.stop_on_first
        if kind == "slot":
            below = visit.below(next_resources, check_pristine, True)
            slots = None  # the slot cut in one loop when it is made of the vertex's own leaves (see leaf_slots)
            if self.leaf_slots and not check_pristine and not stop_on_first:
                slots = leaf_slots(schedule, below, children, label, own_slot(vertex, resources))
            elif self.leaf_batches and stop_on_first and len(next_resources) == 1 and children:
                slots = first_leaf_slots(self._leaves, below, children, nslots, label)
            if slots is None:
                self._dom_slot(below, children, nslots, label, dfu, kids)
            elif slots:
                dfu.evals(SLOT).add_all(slots)
        else:
            below = visit.below(next_resources, check_pristine, x_in)
            if kind == "resource" and len(next_resources) == 1 and children and self.leaf_batches and stop_on_first:
                chosen = own_leaves(self._leaves, below, vertex, children, avail)
                if isinstance(chosen, Evaluation):
                    return chosen
                if chosen is not None:  # the leaves are explored, in an order a sort may change
                    add_leaves(dfu, next_resources[0].type, chosen[0], chosen[1], chosen[2], True)
                    children = []
            if children and wide.levels_below(self.level_types, self.graph.vertices, children, policy.spec):
                self._explore_wide(below, children, dfu, kids)
            elif children:
                self._explore(below, children, dfu, 0, kids)
            self._explore_aux(below, vertex, dfu)
        return self._finish(visit, vertex, x_in, dfu, kids, avail)

    def _finish(self, visit: Visit, vertex: Vertex, x_in: bool, dfu: Scoring, kids: Kids, avail: int) -> Evaluation:
        """The end of a vertex's visit, once its children are explored: the policy's verdict and choices (``avail``:
        the vertex's free units, which :meth:`_prune` found)."""
        if avail == 0 or not visit.policy.finish_vertex(vertex, visit.resources, dfu):
            return Evaluation(False, kids=kids) if kids else FAILED
        evaluation = Evaluation(True, x_in, avail, dfu.overall_score, kids=kids or None)
        if dfu.overall_score > MATCH_UNMET:
            if dfu.hier_constrain_now:
                evaluation.marks = self.state.choice_marks(dfu) or None
                if evaluation.marks is not None and self.leaf_runs:
                    evaluation.run = self.state.leaf_run(evaluation.marks)
            else:
                self._pass_up(evaluation, dfu)
        return evaluation

    def _explore_aux(self, visit: Visit, vertex: Vertex, dfu: Scoring) -> None:
        """Explore ``vertex``'s edges in the auxiliary subsystems (none when matching over containment alone)."""

    def _pass_up(self, evaluation: Evaluation, dfu: Scoring) -> None:
        """Hand the candidates a vertex did not choose among to its parent."""
        if dfu.by_type:
            evaluation.merged = dfu.by_type

    def _explore(
        self, visit: Visit, children: list[tuple[int, int]], dfu: Scoring, multiplier: int, kids: Kids
    ) -> bool:
        found = False
        resources = visit.resources
        schedule = self.schedule
        if not visit.policy.spec.stop_on_first:
            # Checked before the blocks, so a vertex's leaf family is first asked with all its children (and only in
            # a tree, where the first child's parent is the vertex explored).
            if self.leaf_batches and len(resources) == 1 and children and not self.graph.shared_children:
                source = schedule.walk_parent(children[0][1])
                if schedule.leaf_family(source, children) == resources[0].type:
                    leaves_found = self._first_leaves(visit, children, dfu, None)
                    if leaves_found is not None:
                        return leaves_found
            if self.wide_blocks and len(children) >= 2 * BLOCK:
                return self._explore_wide(visit, children, dfu, kids)
            for edge, target in children:
                if self._visit_child(visit, edge, target, dfu, kids):
                    found = True
            return found
        if not children:
            return False
        source = schedule.walk_parent(children[0][1])
        order = schedule.heaviest_first(source, children)
        if (
            self.leaf_batches
            and len(resources) == 1
            and resources[0].type != SLOT
            and schedule.leaf_family(source, order) == resources[0].type
        ):
            leaves_found = self._first_leaves(visit, order, dfu, max(multiplier, 1))
            if leaves_found is not None:
                return leaves_found
        shares = {r.type: [effective_max(r), 0, 0, 0] for r in resources}  # per_share, prev_total, current, shares
        satisfied: set[str] = set()
        vertices = self.graph.vertices
        inline = visit.pristine and self.leaf_shortcut and self.leaf_batches
        for edge, target in order:
            vertex = vertices[target]
            if vertex.type in satisfied:
                continue
            if inline and not vertex.out and vertex.type not in shares:
                # A leaf of a type nothing asks for, above every request (a node's gpus when a slot of cores is
                # wanted): its visit only adds it to the candidates of its type, which no share counts, no choice
                # takes and no mark follows; with every score positive they only tell the root that the type is
                # there, which the root checks only of types that are there (see _resolve_graph).
                if schedule.positive_scores(visit.policy.spec):
                    continue
                if self._leaf_kind(vertex, resources, visit.pristine) is False:
                    if self._pristine_leaf(visit, edge, vertex, dfu):
                        found = True
                    continue
            if not self._visit_child(visit, edge, target, dfu, kids):
                continue
            found = True
            if tally_shares(shares, satisfied, resources, dfu.total_count, max(multiplier, 1)):
                break
        return found

    def _leaf_walk(self) -> LeafWalk:
        return LeafWalk(self.schedule, self._leaf_kind, self.leaf_runs)

    def _explore_wide(self, visit: Visit, children: list[tuple[int, int]], dfu: Scoring, kids: Kids) -> bool:
        """The static explore of a wide vertex (see :mod:`kubeflux.match.wide`): through its cached spans of
        children, in the policy's order with an early stop, or, with nodes excluded or over a few levels (racks) with
        an early stop, child by child (:func:`kubeflux.match.wide.explore_allowed`)."""
        schedule = self.schedule
        parent = self.graph.vertices[children[0][1]].parent
        layout = wide.layout_of(schedule, parent, children)
        needed, stops = wide.early_count(schedule, visit.policy, parent, layout, visit.resources)
        order = wide.InOrder(layout, needed, stops) if needed > 0 or self.excluded is not None else None
        if order is not None:
            excluded = self.excluded if visit.meta.alloc_type != AllocType.SATISFIABILITY else None
            if excluded is not None:
                if self.covers is None:
                    self.excluded = None  # (the children below are allowed, and nothing deeper is ever excluded)
                try:
                    return wide.explore_allowed(self._visit_child, visit, order, excluded, dfu, kids)
                finally:
                    self.excluded = excluded
            if needed and layout.width < 2 * BLOCK:  # a few levels (racks): not a block of them walked whole
                return wide.explore_allowed(self._visit_child, visit, order, _NO_UIDS, dfu, kids)
        key = self.keys.part_key(visit.resources, visit.pristine, visit.exclusive)
        spans = wide.Spans(schedule, visit, parent, layout, key, self._explore, self._bounded)
        if order is not None:
            return wide.explore_in_order(spans, order, dfu, kids)
        return wide.explore_all(spans, dfu, kids)

    def _first_leaves(
        self, visit: Visit, order: list[tuple[int, int]], dfu: Scoring, needed: int | None
    ) -> bool | None:
        """The explore of children that are all leaves of the one requested type (a socket's cores): what
        :meth:`_visit_leaf` does child by child, in one loop; under ``first`` (``needed`` shares), with what
        :func:`tally_shares` does, stopping when ``needed`` are found. None when the leaves need :meth:`_evaluate`
        (see :meth:`_leaf_kind`)."""
        found = leaf_candidates(self._leaves, visit, order, needed, dfu)
        if found is None:
            return None
        candidates, x_in, descending = found
        add_leaves(dfu, visit.resources[0].type, candidates, x_in, descending, needed is not None)
        return bool(candidates)

    def _visit_child(self, visit: Visit, edge: int, target: int, dfu: Scoring, kids: Kids) -> bool:
        """Visit one child; when it qualifies, take its candidates and its own group into ``dfu``."""
        excluded = self.excluded
        if excluded is not None:
            if target in excluded and visit.meta.alloc_type != AllocType.SATISFIABILITY:
                return False  # as a node marked down: pruned (satisfiability ignores status)
            covers = self.covers
            if covers is not None and not covers(target):  # nothing excluded below it: walked (and cached) as such
                self.excluded = None  # (back by the end of the walk if the visit raises: select)
                found = self._visit_child(visit, edge, target, dfu, kids)
                self.excluded = excluded
                return found
        vertex = self.graph.vertices[target]
        if self.leaf_shortcut and not vertex.out:
            leaf = self._leaf_kind(vertex, visit.resources, visit.pristine)
            if leaf is not None:
                return self._visit_leaf(visit, edge, vertex, visit.exclusive or leaf, dfu)
        evaluation = self._dom_dfv(visit, target)
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
        signature = self.keys.signature(resources)
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

    def _pristine_leaf(self, visit: Visit, edge: int, vertex: Vertex, dfu: Scoring) -> bool:
        """:meth:`_visit_leaf` of a leaf whose type no request names, above every request: only the slots'
        aggregate filters can prune it, and only if it has one."""
        meta, x_in = visit.meta, visit.exclusive
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return False
        plan = self.schedule.plan_table.get(vertex.uid)
        avail = vertex.size if plan is None else plan.avail_resources_during(meta.at, meta.duration)
        if avail == 0:
            return False
        if vertex.uid in self.schedule.subplans and not self._prune_resources(meta, x_in, vertex, visit.resources):
            return False
        policy = visit.policy
        base = policy.leaf_base(vertex.type)
        if base is None:
            policy.discover(vertex)
            score = policy.finish_leaf(vertex)
        else:
            score = base + vertex.id
        dfu.add(vertex.type, EdgeGroup(score, avail, 0, x_in, edges=[EdgeEval(avail, avail, x_in, edge)]))
        return True

    def _visit_leaf(self, visit: Visit, edge: int, vertex: Vertex, x_in: bool, dfu: Scoring) -> bool:
        """:meth:`_visit_child` for a vertex without out-edges that asks for nothing below it (a core, a gpu): it
        has no candidates to score or choose, only its own availability and score, and nothing to cache."""
        meta = visit.meta
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return False
        avail = self.schedule.avail(vertex.uid, meta.at, meta.duration)
        if avail == 0 or not self._prune_resources(meta, x_in, vertex, visit.resources):
            return False
        policy = visit.policy
        policy.discover(vertex)
        score = policy.finish_leaf(vertex)
        dfu.add(vertex.type, EdgeGroup(score, avail, 0, x_in, edges=[EdgeEval(avail, avail, x_in, edge)]))
        return True

    def _dom_slot(
        self, visit: Visit, children: list[tuple[int, int]], nslots: int, label: str, dfu: Scoring, kids: Kids
    ) -> None:
        """The slots ``children`` offer for the slot shape ``visit.resources`` (held exclusively), added to ``dfu``."""
        shape = visit.resources
        dfu_slot = Scoring()
        if not self._explore(visit, children, dfu_slot, nslots, kids):
            return
        visit.policy.finish_slot(dfu_slot)
        qualified_slots = count_slots(shape, dfu_slot)
        groups = []
        for _ in range(qualified_slots):
            slot_group = take_slot(shape, dfu_slot, label)
            if slot_group is None:
                return
            groups.append(slot_group)
        for group in groups:
            dfu.add(SLOT, group)


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
