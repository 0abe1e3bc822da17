"""The state every walk of one graph shares: the schedule, the marks of the current match, ``first``'s explore order.

The select walk marks the edges it chose (stamped with the match's sequence number, or kept in an evaluation until
the update walk reaches it); the update walk follows only marked edges. ``first`` explores children heaviest edge
first, an edge's weight being the free count of its target's subtree at ``now``, kept in order as weights change.
The methods at the end change the schedule from outside a match (replay, release, find, status, graph growth)
through the same tables, so the caches stay true.

:class:`WalkState` is the one object the walks receive (:mod:`~kubeflux.match.record`, :mod:`~kubeflux.match.cancel`
take it as their first argument; :class:`~kubeflux.match.traverser.Traverser` is one). It must never walk the
graph to choose resources.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from operator import lt

from kubeflux.match.evaluation import LEAD, NO_LEAD, NOT_LEAD, CacheKey, Evaluation, LeafRun, Mark
from kubeflux.match.meta import AllocType, JobMeta
from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import PlannerRangeError
from kubeflux.match.request import Request
from kubeflux.match.schedule import WEIGHT_MAX, Schedule
from kubeflux.match.scoring import Scoring
from kubeflux.resources.graph import Status, Vertex, paused_gc

SLOT = "slot"


class WalkState(Schedule):
    """A graph's schedule plus what the walks share about the current match (see the module docstring)."""

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
        if len({edge for edge, _uid, _needs in leaves}) != len(leaves):
            return None
        whole = whole and len(leaves) == len(self._kid_edges(source))
        uids = [uid for _edge, uid, _needs in leaves]
        return LeafRun(source, leaves, uids, sizes, whole, hash((source, tuple(leaves))))

    def _run_of(self, source: int, leaves: list[tuple[int, int, int]]) -> LeafRun:
        """The exclusive leaves (edge, leaf, needs) of ``source`` that the update walk records in one piece, as a
        :class:`LeafRun` (when they are not all its marks, say a node's gpus next to its sockets). Only for a
        source the job holds whole: no other job's match reads its leaves during the job's window, so the pool
        stays unwritten."""
        vertices = self.graph.vertices
        sizes: dict[str, int] = {}
        for _edge, uid, _needs in leaves:
            vertex = vertices[uid]
            sizes[vertex.type] = sizes.get(vertex.type, 0) + vertex.size
        uids = [uid for _edge, uid, _needs in leaves]
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
        self.edge_seq[edge] = self.sequence_object  # one object for all (see Schedule.uid_objects)
        if self._marked_seq != self.sequence:
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

    def _heaviest_first(self, source: int, children: list[tuple[int, int]]) -> list[tuple[int, int]]:
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

    def _positive_scores(self) -> bool:
        """Whether every score the policy gives a vertex is positive: not scored by performance class, and no
        vertex id below -1 (a score is MATCH_MET, plus node factors of (id + 2) * 10000 or more, plus id + 1)."""
        if self.policy.spec.performance_class:
            return False
        if self._ids_above is None:
            self._ids_above = all(vertex.id >= -1 for vertex in self.graph.vertices)
        return self._ids_above

    def _held(self, meta: JobMeta, uid: int) -> bool:
        """Whether another job holds ``uid`` or anything below it during ``meta``'s window, as far as a vertex
        wanted exclusively cares (an allocation counts whenever it is, for a new allocation)."""
        if meta.alloc_type == AllocType.ALLOCATE and self._allocations.get(uid):
            return True
        return self._x_busy(uid, meta.at, meta.duration)

    def _by_subplan(self, meta: JobMeta, uid: int, resource: Request) -> bool:
        """Whether ``uid``'s aggregate filter has what ``resource`` asks below it during ``meta``'s window."""
        subplan = self.subplans.get(uid)
        if subplan is None or not resource.user_data:
            return True
        counts = [resource.user_data.get(type, 0) for type in subplan.resource_types]
        try:
            return subplan.avail_during(meta.at, meta.duration, counts)
        except PlannerRangeError:
            return False

    def _slot_fits(self, vertex: Vertex, slot: Request) -> bool:
        """Whether ``vertex`` has a child of each type the slot asks. Found by a scan that stops when they are
        all seen (a node's first children are cores), so a node's first visit does not list its 64 children;
        the set of its children's types is kept only when the scan went through them all."""
        types = self._out_types.get(vertex.uid)
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

    def _leaf_family(self, source: int, children: list[tuple[int, int]]) -> str | None:
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
        self.status_epoch += 1
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

    def refresh(self, changed: Iterable[int], added: Iterable[int] = (), removed: Iterable[int] = ()) -> None:
        """Re-initialise after vertices were ``added`` to or ``removed`` from the graph (Fluxion's
        ``initialize`` after ``attach``/``remove``); ``changed`` are the surviving vertices whose containment
        children changed. Sizes the per-edge tables, forgets cached children and evaluations there, gives new
        vertices their aggregate filters and every surviving filter its new totals, keeping the spans it holds.
        """
        self._settle()
        self._parent_edges.clear()
        self._ids_above = None
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

    def _cache_context(self, meta: JobMeta) -> None:
        """Number what every cache key of this walk shares (see :meth:`_cache_key`): whether the window fits the
        planners' horizon, the kind of match, the task labels and the policy (the scheduler switches it per pod).
        Set at the start of each select walk, so a key is a short tuple of small integers."""
        at, duration = meta.at, meta.duration
        in_range = self.base <= at and at + duration <= self.base + self.horizon
        self._context = self._intern(("context", in_range, int(meta.alloc_type), self._labels, self.policy.spec))

    def _cache_key(self, meta: JobMeta, resources: list[Request], pristine: bool, excl: bool) -> CacheKey:
        """What an evaluation depends on besides the subtree's state and the spans its window meets: the request,
        the walk's flags, and the walk's context (:meth:`_cache_context`, numbered when the walk began)."""
        return (self._signatures[id(resources)], pristine, excl, self._context)

    def _part_key(self, meta: JobMeta, resources: list[Request], pristine: bool, excl: bool) -> CacheKey:
        """:meth:`_cache_key` of an evaluation below the root, or of a span of the root's children: the request of
        the walk's own slots alone (``slot(N) → …``) is numbered without its count ``N`` (see :meth:`_count_free`)."""
        if id(resources) == self._free_list:
            return (self._free_number, pristine, excl, self._context)
        return (self._signatures[id(resources)], pristine, excl, self._context)

    def _count_free(self, resources: list[Request]) -> None:
        """Note whether the walk's request list (signed: see :meth:`_sign`) is numbered without its slot count below
        the root (:meth:`_part_key`): when it is one ``slot(N)`` alone, the policy does not stop early
        (``stop_on_1_matches``, whose explore stops after ``N`` shares), and the traverser allows it
        (:attr:`count_free_parts`).

        Why that is exact: ``N`` is read by the root alone (its best-k choice of ``N`` slots, the walk's early stop
        after ``N`` candidates among the root's children, the slot bound), and, below it, only where a vertex's
        own request holds the slot (``node → slot(N)``, not this shape) or where ``first``'s explore counts shares
        toward it. Below the root, a vertex where the slot fits offers every slot it can cut (the same for any
        ``N``); one where it does not passes its children's candidates up unchosen. So an evaluation below the
        root, and a span of the root's children, is the same for every ``N``, and a match for 10 slots reuses those
        made for 8 (a scheduler's gangs of many sizes otherwise evict each other's evaluations)."""
        self._free_list = -1
        if not self.count_free_parts or self.policy.spec.stop_on_first or len(resources) != 1:
            return
        slot = resources[0]
        if slot.type != SLOT:
            return
        inner = self._signatures[id(slot.with_)]
        self._free_number = self._intern(("any count", slot.type, slot.exclusive, slot.label, inner))
        self._free_list = id(resources)


def _weight_hash(edge: int, weight: int) -> int:
    return 0 if weight == WEIGHT_MAX else hash(("weight", edge, weight))


def _status_hash(uid: int, status: Status) -> int:
    return 0 if status == Status.UP else hash(("status", uid, status.value))
