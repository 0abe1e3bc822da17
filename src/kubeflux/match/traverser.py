"""The depth-first-and-up (DFU) traverser: Fluxion's matching walk, step for step (``dfu_impl.cpp``), and the facade
that sequences a match (Fluxion's ``dfu.cpp``).

``select`` walks the containment tree from the root, pruning subtrees that cannot satisfy the request (status,
exclusivity, per-subtree aggregate filters), lets the policy score candidates on the way up and marks the edges of
the chosen ones; evaluations of unchanged subtrees are reused. ``update`` then hands the marks to the update walk
(:mod:`kubeflux.match.record`), ``cancel`` to the cancel walk (:mod:`kubeflux.match.cancel`).

The engine's parts, each a module: the per-graph schedule (:mod:`~kubeflux.match.schedule`) and what the walks
share about the current match (:mod:`~kubeflux.match.state`: the one state object every walk receives; a
:class:`Traverser` is one), the records a visit leaves (:mod:`~kubeflux.match.evaluation`), the select walk (here),
the update walk and the cancel walk. The select walk must never write the schedule: it reads it and leaves marks.
"""

from __future__ import annotations

from collections.abc import Callable

from kubeflux.match import cancel as cancel_walk
from kubeflux.match import record
from kubeflux.match.evaluation import (
    BLOCK,
    CACHE_PER_VERTEX,
    FAILED,
    Evaluation,
    Kids,
)
from kubeflux.match.leaves import add_leaves, first_leaf_slots, kind_plan, leaf_candidates, own_exclusive, own_leaves
from kubeflux.match.meta import AllocType, Errno, JobMeta, MatchFailure
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.schedule import fresh
from kubeflux.match.scoring import MATCH_UNMET, EdgeEval, EdgeGroup, Scoring
from kubeflux.match.slotbound import too_few_slots
from kubeflux.match.slots import count_slots, leaf_slots, own_slot, take_slot
from kubeflux.match.state import SLOT
from kubeflux.match.wide import WideWalk
from kubeflux.match.writers import Writer
from kubeflux.resources.graph import Vertex


class Traverser(WideWalk):
    """DFU matching over the containment subsystem of one graph: the select walk, and the facade that sequences a
    match (:meth:`select`, then :meth:`update`) and a cancel."""

    def select(self, resources: list[Request], meta: JobMeta, exclusive: bool) -> None:
        """Find and mark the best resources for ``resources`` at ``meta.at``; raise MatchFailure if none."""
        self._bounded = None
        if self.slot_bounds and too_few_slots(self, resources, meta):
            raise MatchFailure(Errno.EBUSY)
        self.next_sequence()
        self._labels = tuple(self.task_labels)
        self._cache_context(meta)
        self._sign(resources)
        self._count_free(resources)
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
        edges = self.graph.edges
        last = -1
        for mark in self._marks(dfu):
            self._apply_mark(mark)
            source = edges[mark[0]].source
            if source != last:
                # A slot's marks come source by source (a node's cores): the path above a source is stamped by its
                # first mark, and stamping it again changes nothing (a mark stamps only an edge below its source).
                self._apply_path(source)
                self._mark_ancestors(source, dfu)
                last = source
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
        if slot is not None and self._slot_fits(vertex, slot):
            return plan[2]
        return plan[3]

    def _prune(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> int:
        """The units of ``vertex`` free during ``meta``'s window if the walk may descend into it, else 0 (it is
        pruned). The select walk changes no planner, so the count holds until the vertex's visit ends."""
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return 0
        avail = self._avail(vertex.uid, meta.at, meta.duration)
        if avail == 0:
            return 0
        if vertex.type == "node" and self.policy.spec.node_exclusive and self._held(meta, vertex.uid):
            # The update walk will hold the node whole, planning every vertex below it: a node another job uses is
            # out, as if the jobspec asked for it exclusively. Fluxion checks only the node's own planner here,
            # which suffices while every job holds its nodes whole; a node a job holds in part (a pod of another
            # policy, a replayed or partly released job) would fail its update walk half way.
            return 0
        return avail if self._prune_resources(meta, exclusive, vertex, resources) else 0

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

    def _dom_dfv(self, meta: JobMeta, uid: int, resources: list[Request], pristine: bool, excl: bool) -> Evaluation:
        """Visit ``uid`` (or reuse the evaluation of an unchanged subtree for the same request and window)."""
        children = self._kid_edges(uid)
        if not children or (self.excluded is not None and uid == self.root):
            # (the root's evaluation depends on the nodes the match excludes: never kept nor reused)
            return self._evaluate(meta, uid, resources, pristine, excl, children)
        fp = self.fp[uid]
        key = (
            self._cache_key(meta, resources, pristine, excl)
            if uid == self.root
            else self._part_key(meta, resources, pristine, excl)
        )
        table = self._cache.get(uid)
        if table is None:
            table = self._cache[uid] = {}
        else:
            entry = table.get(key)  # (a vertex ``first`` visits again has mostly changed since: test first)
            if entry is not None:
                hit = fresh(entry, fp, self.bounds.get(uid), meta)
                if hit is not None:
                    return hit
        evaluation = self._evaluate(meta, uid, resources, pristine, excl, children)
        table[key] = (fp, meta.at, meta.at + meta.duration, evaluation)
        if len(table) > CACHE_PER_VERTEX:
            del table[next(iter(table))]
        return evaluation

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
        x_in = excl or own_exclusive(self._exclusives, vertex.type, resources)
        kind, next_resources, nslots, label, check_pristine = self._match_kind(vertex, resources, pristine)
        if kind == "none":
            return FAILED
        avail = self._prune(meta, x_in, vertex, resources)
        if not avail:
            return FAILED
        self.policy.discover(vertex)
        dfu = Scoring() if self.scoring_type is Scoring else self.scoring_type()  # (see _finish)
        kids = Kids()
        if kind == "slot":
            slots = None  # the slot cut in one loop when it is made of the vertex's own leaves (see leaf_slots)
            if self.leaf_slots and not check_pristine and not self.policy.spec.stop_on_first:
                slots = leaf_slots(self, meta, children, next_resources, label, own_slot(vertex, resources))
            elif self.leaf_batches and self.policy.spec.stop_on_first and len(next_resources) == 1 and children:
                slots = first_leaf_slots(self, self._leaf_kind, meta, children, next_resources, nslots, label)
            if slots is None:
                self._dom_slot(meta, children, next_resources, nslots, check_pristine, label, dfu, kids)
            elif slots:
                dfu.evals(SLOT).add_all(slots)
        else:
            if (
                kind == "resource"
                and len(next_resources) == 1
                and children
                and self.leaf_batches
                and self.policy.spec.stop_on_first
            ):
                chosen = own_leaves(
                    self, self._leaf_kind, meta, vertex, children, next_resources, check_pristine, x_in, avail
                )
                if isinstance(chosen, Evaluation):
                    return chosen
                if chosen is not None:  # the leaves are explored, in an order a sort may change
                    add_leaves(dfu, next_resources[0].type, chosen[0], chosen[1], chosen[2], True)
                    children = []
            if children:
                self._explore(meta, children, next_resources, check_pristine, x_in, dfu, 0, kids)
            self._explore_aux(meta, vertex, next_resources, x_in, dfu)
        return self._finish(vertex, resources, x_in, dfu, kids, avail)

    def _finish(
        self, vertex: Vertex, resources: list[Request], x_in: bool, dfu: Scoring, kids: Kids, avail: int
    ) -> Evaluation:
        """The end of a vertex's visit, once its children are explored: the policy's verdict and choices (``avail``:
        the vertex's free units, which :meth:`_prune` found)."""
        if avail == 0 or not self.policy.finish_vertex(vertex, resources, dfu):
            return self.evaluation_type(False, kids=kids) if kids else FAILED
        if self.evaluation_type is Evaluation:  # (a native call when compiled; a class in a variable is not)
            evaluation = Evaluation(True, x_in, avail, dfu.overall_score, kids=kids or None)
        else:
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
            # Checked before the blocks, so a vertex's leaf family is first asked with all its children (and only in
            # a tree, where the first child's parent is the vertex explored).
            if self.leaf_batches and len(resources) == 1 and children and not self.graph.shared_children:
                source = self._walk_parent(children[0][1])
                if self._leaf_family(source, children) == resources[0].type:
                    leaves_found = self._first_leaves(meta, children, resources, pristine, excl, dfu, None)
                    if leaves_found is not None:
                        return leaves_found
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
        if (
            self.leaf_batches
            and len(resources) == 1
            and resources[0].type != SLOT
            and self._leaf_family(source, order) == resources[0].type
        ):
            leaves_found = self._first_leaves(meta, order, resources, pristine, excl, dfu, max(multiplier, 1))
            if leaves_found is not None:
                return leaves_found
        shares = {r.type: [effective_max(r), 0, 0, 0] for r in resources}  # per_share, prev_total, current, shares
        satisfied: set[str] = set()
        vertices = self.graph.vertices
        inline = pristine and self.leaf_shortcut and self.leaf_batches
        for edge, target in order:
            vertex = vertices[target]
            if vertex.type in satisfied:
                continue
            if inline and not vertex.out and vertex.type not in shares:
                # A leaf of a type nothing asks for, above every request (a node's gpus when a slot of cores is
                # wanted): its visit only adds it to the candidates of its type, which no share counts, no choice
                # takes and no mark follows; with every score positive they only tell the root that the type is
                # there, which the root checks only of types that are there (see _resolve_graph).
                if self._positive_scores():
                    continue
                if self._leaf_kind(vertex, resources, pristine) is False:
                    if self._pristine_leaf(meta, edge, vertex, resources, excl, dfu):
                        found = True
                    continue
            if not self._visit_child(meta, edge, target, resources, pristine, excl, dfu, kids):
                continue
            found = True
            if tally_shares(shares, satisfied, resources, dfu.total_count, max(multiplier, 1)):
                break
        return found

    def _first_leaves(
        self,
        meta: JobMeta,
        order: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        needed: int | None,
    ) -> bool | None:
        """The explore of children that are all leaves of the one requested type (a socket's cores): what
        :meth:`_visit_leaf` does child by child, in one loop; under ``first`` (``needed`` shares), with what
        :func:`tally_shares` does, stopping when ``needed`` are found. None when the leaves need :meth:`_evaluate`
        (see :meth:`_leaf_kind`)."""
        found = leaf_candidates(self, self._leaf_kind, meta, order, resources, pristine, excl, needed, dfu)
        if found is None:
            return None
        candidates, x_in, descending = found
        add_leaves(dfu, resources[0].type, candidates, x_in, descending, needed is not None)
        return bool(candidates)

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
        excluded = self.excluded
        if excluded is not None and target in excluded and meta.alloc_type != AllocType.SATISFIABILITY:
            return False  # as a node marked down: pruned (satisfiability ignores status)
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

    def _pristine_leaf(
        self, meta: JobMeta, edge: int, vertex: Vertex, resources: list[Request], x_in: bool, dfu: Scoring
    ) -> bool:
        """:meth:`_visit_leaf` of a leaf whose type no request names, above every request: only the slots'
        aggregate filters can prune it, and only if it has one."""
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return False
        plan = self._plans.get(vertex.uid)
        avail = vertex.size if plan is None else plan.avail_resources_during(meta.at, meta.duration)
        if avail == 0:
            return False
        if vertex.uid in self.subplans and not self._prune_resources(meta, x_in, vertex, resources):
            return False
        policy = self.policy
        base = policy.leaf_base(vertex.type)
        if base is None:
            policy.discover(vertex)
            score = policy.finish_leaf(vertex)
        else:
            score = base + vertex.id
        dfu.add(vertex.type, EdgeGroup(score, avail, 0, x_in, edges=[EdgeEval(avail, avail, x_in, edge)]))
        return True

    def _visit_leaf(
        self, meta: JobMeta, edge: int, vertex: Vertex, resources: list[Request], x_in: bool, dfu: Scoring
    ) -> bool:
        """:meth:`_visit_child` for a vertex without out-edges that asks for nothing below it (a core, a gpu): it
        has no candidates to score or choose, only its own availability and score, and nothing to cache."""
        if vertex.status and meta.alloc_type != AllocType.SATISFIABILITY:  # Status.UP is 0
            return False
        avail = self._avail(vertex.uid, meta.at, meta.duration)
        if avail == 0 or not self._prune_resources(meta, x_in, vertex, resources):
            return False
        policy = self.policy
        policy.discover(vertex)
        score = policy.finish_leaf(vertex)
        dfu.add(vertex.type, EdgeGroup(score, avail, 0, x_in, edges=[EdgeEval(avail, avail, x_in, edge)]))
        return True

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
        qualified_slots = count_slots(shape, dfu_slot)
        groups = []
        for _ in range(qualified_slots):
            slot_group = take_slot(shape, dfu_slot, label)
            if slot_group is None:
                return
            groups.append(slot_group)
        for group in groups:
            dfu.add(SLOT, group)

    def update(self, writer: Writer, meta: JobMeta, *, full: bool = True) -> int:
        """Record the marked resources for ``meta`` and emit them; returns the number of slots (see
        :func:`kubeflux.match.record.update`)."""
        return record.update(self, writer, meta, full=full)

    def cancel(self, jobid: int) -> None:
        """Remove every span of ``jobid`` (allocation or reservation) from the graph."""
        cancel_walk.cancel(self, jobid)


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
