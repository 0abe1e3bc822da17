"""The depth-first-and-up (DFU) traverser: Fluxion's matching walk, step for step.

``select`` walks the containment tree from the root, pruning subtrees that cannot satisfy the request
(status, exclusivity, per-subtree aggregate filters), lets the policy score candidates on the way up and marks
the edges of the chosen ones. ``update`` then walks only the marked edges, records the job in each chosen
vertex's planner (the time axis) and emits the vertices to a writer. ``cancel`` removes a job's spans.

Scheduling state lives here, in tables indexed by vertex ``uid`` or edge index; the graph holds only structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum

from kubeflux.match.planner import MultiPlanner, Planner, PlannerRangeError
from kubeflux.match.policy import MatchPolicy
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.scoring import MATCH_UNMET, EdgeEval, EdgeGroup, Scoring
from kubeflux.match.writers import Writer
from kubeflux.resources.graph import CONTAINMENT, Graph, Status, Vertex

X_CHECKER_NJOBS = 1 << 30
ANY_TYPE = "ALL"
SLOT = "slot"
WEIGHT_MAX = 2**64 - 1


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


class MatchFailure(Exception):
    def __init__(self, errno: Errno, message: str = "") -> None:
        super().__init__(message or errno.value)
        self.errno = errno


class PruningFilters:
    """Which aggregate counts each vertex type tracks for its subtree (``--prune-filters``)."""

    def __init__(self, spec: str = "ALL:core,ALL:node") -> None:
        self.anchors: dict[str, set[str]] = {}
        self.total: set[str] = set()
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

    def types_for(self, vertex_type: str) -> list[str]:
        out = sorted(self.anchors.get(vertex_type, ()))
        if vertex_type != ANY_TYPE and ANY_TYPE in self.anchors:
            out.extend(sorted(self.anchors[ANY_TYPE]))
        return out


class Traverser:
    """DFU matching over the containment subsystem of one graph."""

    def __init__(self, graph: Graph, policy: MatchPolicy, prune: PruningFilters, base: int, duration: int) -> None:
        self.graph = graph
        self.policy = policy
        self.prune_filters = prune
        self.base = base
        self.horizon = duration
        self.root = graph.roots[CONTAINMENT]
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
        self.root_needs = 0
        self.root_excl = False
        self.root_seq = 0
        self.plans: dict[int, Planner] = {}
        self.allocations: dict[int, dict[int, int]] = {}
        self.reservations: dict[int, dict[int, int]] = {}
        self.x_checkers: dict[int, Planner] = {}
        self.x_spans: dict[int, dict[int, int]] = {}
        self.tags: dict[int, set[int]] = {}
        self.subplans: dict[int, MultiPlanner] = {}
        self.job2span: dict[int, dict[int, int]] = {}
        self.nodes_up = sum(1 for uid in graph.by_type.get("node", ()) if graph.vertices[uid].status == Status.UP)
        self._prime(self.root)

    # ------------------------------------------------------------------ set-up

    def _children(self, uid: int) -> list[tuple[int, int]]:
        """(edge index, target) of a vertex's containment out-edges, in order."""
        graph = self.graph
        result = []
        for index in graph.vertices[uid].out:
            edge = graph.edges[index]
            if edge.subsystem == CONTAINMENT and edge.relation == "contains":
                result.append((index, edge.target))
        return result

    def _prime(self, root: int) -> None:
        """Create each non-leaf vertex's subtree aggregate filter (Fluxion's ``prime_pruning_filter``)."""
        filters = self.prune_filters
        vertices = self.graph.vertices
        stack: list[tuple[int, bool]] = [(root, False)]
        aggregates: dict[int, dict[str, int]] = {}
        while stack:
            uid, done = stack.pop()
            vertex = vertices[uid]
            children = self._children(uid)
            if not done:
                if not children:
                    if vertex.type not in filters.total:
                        filters.add("cluster", vertex.type)
                    continue
                stack.append((uid, True))
                stack.extend((child, False) for _, child in reversed(children))
                continue
            mine: dict[str, int] = {}
            for _, child in children:
                child_vertex = vertices[child]
                if child_vertex.type in filters.total:
                    mine[child_vertex.type] = mine.get(child_vertex.type, 0) + child_vertex.size
                for type, count in aggregates.pop(child, {}).items():
                    if type in filters.total:
                        mine[type] = mine.get(type, 0) + count
            aggregates[uid] = mine
            types = filters.types_for(vertex.type)
            if types:
                self.subplans[uid] = MultiPlanner(
                    [(type, mine.get(type, 0)) for type in types], self.base, self.horizon
                )

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
        plan = self.plans.get(uid)
        if plan is None:
            return self.graph.vertices[uid].size
        return plan.avail_resources_during(at, duration)

    def _x_busy(self, uid: int, at: int, duration: int) -> bool:
        checker = self.x_checkers.get(uid)
        return checker is not None and checker.avail_resources_during(at, duration) < X_CHECKER_NJOBS

    # ------------------------------------------------------------------ select (match phase)

    def select(self, resources: list[Request], meta: JobMeta, exclusive: bool) -> None:
        """Find and mark the best resources for ``resources`` at ``meta.at``; raise MatchFailure if none."""
        self.sequence += 1
        self.preorder = 0
        self.postorder = 0
        dfu = Scoring()
        root = self.root
        ok, x_in = self._dom_dfv(meta, root, resources, True, exclusive, dfu)
        if not ok:
            raise MatchFailure(Errno.EBUSY)
        group = EdgeGroup(
            dfu.overall_score, dfu.avail, 0, exclusive, True, edges=[EdgeEval(dfu.avail, dfu.avail, exclusive, -1)]
        )
        dfu.add(self.graph.vertices[root].type, group)
        needs = self._resolve_graph(root, resources, dfu)
        self.root_needs = max(needs, 0)
        self.root_excl = x_in
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
        self._enforce(dfu, unconstrained=True)
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
        graph = self.graph
        for child in slot.with_:
            if not any(graph.vertices[graph.edges[index].target].type == child.type for index in vertex.out):
                return False
        return True

    def _prune(self, meta: JobMeta, exclusive: bool, vertex: Vertex, resources: list[Request]) -> bool:
        if meta.alloc_type != AllocType.SATISFIABILITY and vertex.status != Status.UP:
            return False
        uid = vertex.uid
        if self._avail(uid, meta.at, meta.duration) == 0:
            return False
        for resource in resources:
            if vertex.type != resource.type and resource.type != SLOT:
                continue
            if resource.type != SLOT:
                if exclusive and resource.exclusive is False:
                    raise MatchFailure(
                        Errno.EINVAL, f"exclusivity conflicts at jobspec={resource.label} : vertex={vertex.name}"
                    )
                if exclusive or resource.exclusive is True:
                    if meta.alloc_type == AllocType.ALLOCATE and self.allocations.get(uid):
                        return False
                    if self._x_busy(uid, meta.at, meta.duration):
                        return False
            subplan = self.subplans.get(uid)
            if subplan is not None and resource.user_data:
                counts = [resource.user_data.get(type, 0) for type in subplan.resource_types]
                try:
                    if not subplan.avail_during(meta.at, meta.duration, counts):
                        return False
                except PlannerRangeError:
                    return False
        return True

    def _dom_dfv(
        self, meta: JobMeta, uid: int, resources: list[Request], pristine: bool, excl: bool, to_parent: Scoring
    ) -> tuple[bool, bool]:
        """Visit ``uid``; on success its best candidates are in ``to_parent``. Returns (ok, exclusive)."""
        vertex = self.graph.vertices[uid]
        x_in = excl or any(r.type == vertex.type and r.exclusive is True for r in resources)
        kind, next_resources, nslots, label, check_pristine = self._match_kind(vertex, resources, pristine)
        self.preorder += 1
        if kind == "none":
            return False, excl
        if not self._prune(meta, x_in, vertex, resources):
            return False, excl
        self.policy.discover(vertex)
        dfu = Scoring()
        if kind == "slot":
            self._dom_slot(meta, uid, next_resources, nslots, check_pristine, label, dfu)
        else:
            self._explore(meta, uid, next_resources, check_pristine, x_in, dfu, 0)
        avail = self._avail(uid, meta.at, meta.duration)
        if avail == 0:
            return False, x_in
        if not self.policy.finish_vertex(vertex, resources, dfu):
            return False, x_in
        self._resolve(dfu, to_parent)
        to_parent.avail = avail
        to_parent.overall_score = dfu.overall_score
        self.postorder += 1
        return True, x_in

    def _explore(
        self,
        meta: JobMeta,
        uid: int,
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        multiplier: int,
    ) -> bool:
        vertices = self.graph.vertices
        found = False
        if not self.policy.spec.stop_on_first:
            for edge, target in self._children(uid):
                ok, x_out = self._dom_dfv(meta, target, resources, pristine, excl, dfu)
                if ok:
                    count = dfu.avail
                    group = EdgeGroup(dfu.overall_score, count, 0, x_out, edges=[EdgeEval(count, count, x_out, edge)])
                    dfu.add(vertices[target].type, group)
                    found = True
            return found
        shares = {r.type: [effective_max(r), 0, 0, 0] for r in resources}  # per_share, prev_total, current, shares
        satisfied: set[str] = set()
        order = sorted(self._children(uid), key=lambda pair: (self.edge_weight[pair[0]], vertices[pair[1]].uniq_id))
        for edge, target in reversed(order):
            if vertices[target].type in satisfied:
                continue
            ok, x_out = self._dom_dfv(meta, target, resources, pristine, excl, dfu)
            if not ok:
                continue
            count = dfu.avail
            group = EdgeGroup(dfu.overall_score, count, 0, x_out, edges=[EdgeEval(count, count, x_out, edge)])
            dfu.add(vertices[target].type, group)
            found = True
            for type, tally in shares.items():
                total = dfu.total_count(type)
                if total > tally[1]:
                    tally[2] += total - tally[1]
                    tally[1] = total
                    if tally[0] > 0 and tally[2] >= tally[0]:
                        tally[3] += 1
                        tally[2] = 0
            needed = max(multiplier, 1)
            for resource in resources:
                if shares[resource.type][3] >= needed:
                    satisfied.add(resource.type)
            if all(shares[r.type][3] >= needed for r in resources):
                break
        return found

    def _dom_slot(
        self, meta: JobMeta, uid: int, shape: list[Request], nslots: int, pristine: bool, label: str, dfu: Scoring
    ) -> None:
        dfu_slot = Scoring()
        if not self._explore(meta, uid, shape, pristine, True, dfu_slot, nslots):
            return
        self.policy.finish_slot(dfu_slot)
        qualified_slots = self._count_slots(shape, dfu_slot)
        groups = []
        for _ in range(qualified_slots):
            slot_group = EdgeGroup(1, 1, 0, True, task_label=label)
            for element in shape:
                evals = dfu_slot.evals(element.type)
                count = calc_count(element, evals.qualified)
                taken = 0
                while taken < count:
                    group = evals.next_group()
                    if group is None:
                        return
                    first = group.edges[0]
                    slot_group.edges.append(EdgeEval(first.count, first.count, True, first.edge))
                    slot_group.score += group.score
                    taken += first.count
            groups.append(slot_group)
        for group in groups:
            dfu.add(SLOT, group)

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

    def _resolve(self, dfu: Scoring, to_parent: Scoring) -> None:
        if dfu.overall_score > MATCH_UNMET:
            if dfu.hier_constrain_now:
                self._enforce(dfu, unconstrained=False)
            else:
                to_parent.merge(dfu)

    def _enforce(self, dfu: Scoring, unconstrained: bool) -> None:
        sequence = self.sequence
        graph = self.graph
        for type, evals in dfu.by_type.items():
            if evals.best_k == 0:
                continue
            for i in range(evals.best_i):
                group = evals.groups[i]
                if group.root:
                    continue
                leader = True
                task_slot = bool(group.task_label) and group.task_label in self.task_labels
                for item in group.edges:
                    edge = item.edge
                    self.edge_needs[edge] = item.needs
                    self.edge_excl[edge] = item.exclusive
                    self.edge_seq[edge] = sequence
                    if type == SLOT and task_slot:
                        if leader:
                            self.slot_leader.add(edge)
                        else:
                            self.slot_leader.discard(edge)
                        leader = False
                    if unconstrained:
                        self._mark_ancestors(graph.edges[edge].source, dfu)

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
                self.edge_seq[edge] = self.sequence
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
        nslots = [0]
        root_vertex = self.graph.vertices[self.root]
        shadow = root_vertex.type in self.policy.exclusive_types
        self._upd_dfv(self.root, writer, self.root_needs, self.root_excl, meta, {}, nslots, shadow, False, full)
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
        full: bool = True,
    ) -> int:
        vertices = self.graph.vertices
        vertex = vertices[uid]
        mod = emit_shadow or vertex.type in self.policy.exclusive_types
        excl = excl or mod
        self._level += 1
        n_plans = 0
        aggregates: dict[str, int] = {}
        sequence = self.sequence
        for edge, target in self._children(uid):
            if self.edge_seq[edge] != sequence and not mod:
                continue
            x = self.edge_excl[edge] or mod
            child_needs = vertices[target].size if mod else self.edge_needs[edge]
            n_sub = self._upd_dfv(target, writer, child_needs, x, meta, aggregates, nslots, mod, excl, full)
            if n_sub > 0:
                if edge in self.slot_leader and self.edge_seq[edge] == sequence:
                    nslots[0] += 1
                if self.policy.spec.stop_on_first:
                    self._update_weight(edge, target, meta)
                writer.edge(self._level, self.graph, edge, excl)
                n_plans += n_sub
        if excl:
            n_plans += 1
            if full:
                self._add_plan(uid, meta, needs)
        if n_plans > 0:
            self._add_job_data(uid, meta, aggregates)
            total = self.prune_filters.total
            if vertex.type in total:
                used = vertex.size if excl else vertex.size - needs
                to_parent[vertex.type] = to_parent.get(vertex.type, 0) + used
            for type, count in aggregates.items():
                if type in total:
                    to_parent[type] = to_parent.get(type, 0) + count
            writer.vertex(self._level, vertex, needs, excl, excl_parent)
        self._level -= 1
        return n_plans

    def _add_plan(self, uid: int, meta: JobMeta, needs: int) -> None:
        plan = self.plans.get(uid)
        if plan is None:
            vertex = self.graph.vertices[uid]
            plan = self.plans[uid] = Planner(vertex.size, self.base, self.horizon, vertex.type)
        span = plan.add_span(meta.at, meta.duration, needs)
        if meta.alloc_type == AllocType.ALLOCATE:
            self.allocations.setdefault(uid, {})[meta.jobid] = span
        elif meta.alloc_type == AllocType.ALLOCATE_ORELSE_RESERVE:
            self.reservations.setdefault(uid, {})[meta.jobid] = span

    def _add_job_data(self, uid: int, meta: JobMeta, aggregates: dict[str, int]) -> None:
        self.tags.setdefault(uid, set()).add(meta.jobid)
        checker = self.x_checkers.get(uid)
        if checker is None:
            checker = self.x_checkers[uid] = Planner(X_CHECKER_NJOBS, self.base, self.horizon, "x_checker")
        self.x_spans.setdefault(uid, {})[meta.jobid] = checker.add_span(meta.at, meta.duration, 1)
        subplan = self.subplans.get(uid)
        if subplan is not None and aggregates:
            counts = [aggregates.get(type, 0) for type in subplan.resource_types]
            self.job2span.setdefault(uid, {})[meta.jobid] = subplan.add_span(meta.at, meta.duration, counts)

    def _update_weight(self, edge: int, target: int, meta: JobMeta) -> None:
        subplan = self.subplans.get(target)
        if subplan is None:
            return
        types = subplan.resource_types
        avail = subplan.avail_resources_at(meta.now, types[-1])
        if avail == 0 and subplan.span_count() == 0:
            return
        self.edge_weight[edge] = max(avail, 0)

    # ------------------------------------------------------------------ cancel

    def cancel(self, jobid: int) -> None:
        """Remove every span of ``jobid`` (allocation or reservation) from the graph."""
        self.preorder = 0
        self.postorder = 0
        if jobid in self.tags.get(self.root, ()):
            self._rem_dfv(self.root, jobid)
        else:
            self._rem_exhaustive(jobid)

    def _rem_dfv(self, uid: int, jobid: int) -> None:
        self.preorder += 1
        tags = self.tags.get(uid)
        if tags is None or jobid not in tags:
            return
        tags.discard(jobid)
        span = self.x_spans.get(uid, {}).pop(jobid, None)
        if span is not None:
            self.x_checkers[uid].rem_span(span)
        spans = self.job2span.get(uid)
        if spans is not None and jobid in spans:
            self.subplans[uid].rem_span(spans.pop(jobid))
        self._rem_plan(uid, jobid)
        for edge, target in self._children(uid):
            self.slot_leader.discard(edge)
            self._rem_dfv(target, jobid)
        self.postorder += 1

    def _rem_plan(self, uid: int, jobid: int) -> None:
        for table in (self.allocations, self.reservations):
            spans = table.get(uid)
            if spans is not None and jobid in spans:
                self.plans[uid].rem_span(spans.pop(jobid))
                return

    def _rem_exhaustive(self, jobid: int) -> None:
        for uid in list(self.allocations) + list(self.reservations):
            self._rem_plan(uid, jobid)

    # ------------------------------------------------------------------ queries

    def root_subplan(self) -> MultiPlanner:
        return self.subplans[self.root]

    def mark(self, uid: int, status: Status) -> None:
        """Set a subtree root's status (Fluxion marks only the root; pruning stops at it)."""
        vertex = self.graph.vertices[uid]
        if vertex.status == status:
            return
        vertex.status = status
        stack = [uid]
        delta = 0
        while stack:
            current = stack.pop()
            if self.graph.vertices[current].type == "node":
                delta += 1
            stack.extend(target for _, target in self._children(current))
        self.nodes_up += delta if status == Status.UP else -delta

    # ------------------------------------------------------------------ graph growth and shrink

    def refresh(self, added: list[int] | None = None, removed: list[int] | None = None) -> None:
        """Re-initialise after vertices were ``added`` to or ``removed`` from the graph (Fluxion's
        ``initialize`` after ``attach``/``remove``): size the per-edge tables, give new vertices their aggregate
        filters and every surviving filter its new totals, keeping the spans it holds.
        """
        graph = self.graph
        grow = len(graph.edges) - len(self.edge_needs)
        if grow > 0:
            self.edge_needs.extend([0] * grow)
            self.edge_excl.extend([False] * grow)
            self.edge_seq.extend([0] * grow)
            self.edge_weight.extend([WEIGHT_MAX] * grow)
        kept = self.subplans
        self.subplans = {}
        self._prime(self.root)
        for uid, fresh in self.subplans.items():
            old = kept.get(uid)
            if old is not None:
                old.update([(type, fresh.resource_total(type)) for type in fresh.resource_types])
                self.subplans[uid] = old
        vertices = graph.vertices
        for uid in added or ():
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.nodes_up += 1
        for uid in removed or ():
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.nodes_up -= 1
