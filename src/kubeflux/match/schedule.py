"""The schedule of one graph as the update and cancel walks change it: jobs recorded and released, statuses, edge
weights, the graph growing and shrinking, all through the tables of :class:`~kubeflux.match.view.ScheduleView`, so
the fingerprints (and with them every cached evaluation) stay true.

:class:`Schedule` is that view with its writes. The engine holds it; the update walk (:mod:`~kubeflux.match.record`),
the cancel walk (:mod:`~kubeflux.match.cancel`), replays and releases (:mod:`~kubeflux.match.update`) and graph
changes (:mod:`~kubeflux.match.elastic`) are given it. The select walk is given only the view: it reads, and leaves
its choices as marks (:mod:`~kubeflux.match.state`). A schedule never chooses resources (no request, no policy
scoring) nor emits anything to a writer.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import Any

from kubeflux.match.meta import JobMeta
from kubeflux.match.view import WEIGHT_MAX, ScheduleView, prime
from kubeflux.resources.graph import Status, paused_gc


class Schedule(ScheduleView):
    """A graph's schedule with the writes that record, release and re-weigh (see the module docstring)."""

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
            self.bump(uid, delta)
            uid = vertices[uid].parent

    def graph_changed(self, uid: int) -> None:
        """The containment children of ``uid`` changed (attach, remove, a node added or removed)."""
        self._parent_edges.clear()
        self._kids.pop(uid, None)
        self.layouts.pop(uid, None)
        self.layouts.pop(self.graph.vertices[uid].parent, None)  # its spans' bounds hold uid's
        self._out_types.pop(uid, None)
        self._by_weight.clear()
        self._leaf_families.clear()
        self._nodes_within.clear()
        if not self.children(uid):
            # A vertex that lost its children is a leaf: no evaluation of it is cached, so it keeps no span bounds
            # (_add_job_data records none for a leaf, and a release must not take out bounds never put in).
            self.bounds.pop(uid, None)
        elif uid not in self.bounds:  # a leaf that grew children: its own span bounds
            self.bounds[uid] = sorted(t for use in self.x_uses.get(uid, {}).values() for t in use[:2])
        self.touch(uid)

    def add_plan(self, uid: int, meta: JobMeta, needs: int) -> None:
        plan = self.plan_table.get(uid)
        if plan is None:
            plan = self.new_plan(uid)
        span = plan.add_span(meta.at, meta.duration, needs)
        key: Any = self.uid_objects()[uid]  # (see uid_objects)
        job: Any = meta.jobid
        self.vertices_of_job(job).add(key)
        table = self.span_table(meta.alloc_type)
        if table is None:
            return
        spans = table.get(uid)
        if spans is None:
            table[key] = {job: span}
        else:
            spans[job] = span

    def add_job_data(self, uid: int, meta: JobMeta, aggregates: dict[str, int], fingerprint: int) -> None:
        jobid: Any = meta.jobid  # boxed once for every table below (see uid_objects)
        key: Any = self.uid_objects()[uid]
        tags = self.tag_table.get(uid)
        if tags is None:
            self.tag_table[key] = {jobid}
        else:
            tags.add(jobid)
        self.vertices_of_job(jobid).add(key)
        uses = self.use_table.get(uid)
        if uses is None:
            uses = self.use_table[key] = {}
        previous = uses.get(jobid)
        if previous is not None:
            fingerprint += previous[2]
            self.unbound(uid, previous[0], previous[1])
        at: Any = meta.at
        end: Any = meta.at + meta.duration
        uses[jobid] = (at, end, fingerprint)
        if self.children(uid):  # only non-leaf evaluations are cached, so only they need their bounds
            bounds = self.bounds.get(uid)
            if bounds is None:
                self.bounds[key] = [at, end]
            elif not bounds or bounds[-1] <= at:  # the latest window yet (jobs placed one after another)
                bounds.append(at)
                bounds.append(end)
            else:
                insort(bounds, at)
                insort(bounds, end)
            if self.layouts:
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

    def pop_span(self, uid: int, jobid: int) -> int | None:
        """Take ``jobid``'s planner span on ``uid`` (an allocation or a reservation) out of the job tables; its
        id in ``uid``'s planner, None if there is none."""
        spans = self.allocation_table.get(uid)
        if spans is None or jobid not in spans:
            spans = self.reservation_table.get(uid)
            if spans is None or jobid not in spans:
                return None
        return spans.pop(jobid)

    def mark(self, uid: int, status: Status) -> None:
        """Set a subtree root's status (Fluxion marks only the root; pruning stops at it)."""
        self.settle()
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
                stack.extend(target for _, target in self.children(current))
            self._nodes_within[uid] = delta
        self.nodes_up += delta if status == Status.UP else -delta

    def plan_span(self, uid: int, meta: JobMeta, amount: int) -> None:
        """Add ``meta``'s planner span of ``amount`` units on ``uid``; PlannerError if it does not fit.

        The fingerprints are left to the update walk that records the job on ``uid`` next (as a match's own
        walk adds a span and its share of the fingerprints together); :meth:`unplan` undoes it if none follows."""
        self.settle()
        self.add_plan(uid, meta, amount)

    def unplan(self, uid: int, jobid: int) -> int:
        """Remove ``jobid``'s planner span on ``uid``; return the units it held (0 if there was none)."""
        self.settle()
        span = self.pop_span(uid, jobid)
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
            self.unbound(uid, use[0], use[1])
            self.touch(uid, -use[2])

    def update_weight(self, edge: int, target: int, meta: JobMeta) -> int:
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

    def refresh(self, changed: Iterable[int], added: Iterable[int] = (), removed: Iterable[int] = ()) -> None:
        """Re-initialise after vertices were ``added`` to or ``removed`` from the graph (Fluxion's
        ``initialize`` after ``attach``/``remove``); ``changed`` are the surviving vertices whose containment
        children changed. Sizes the per-edge tables, forgets cached children and evaluations there, gives new
        vertices their aggregate filters and every surviving filter its new totals, keeping the spans it holds.
        """
        self.settle()
        self._parent_edges.clear()
        self._ids_above = None
        graph = self.graph
        grow = len(graph.edges) - len(self.edge_weight)
        if grow > 0:
            self.edge_weight.extend([WEIGHT_MAX] * grow)
        for uid in changed:
            self.graph_changed(uid)
        kept = self.subplans
        self.subplans = {}
        with paused_gc():
            prime(self, self.root)
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


def _weight_hash(edge: int, weight: int) -> int:
    return 0 if weight == WEIGHT_MAX else hash(("weight", edge, weight))


def _status_hash(uid: int, status: Status) -> int:
    return 0 if status == Status.UP else hash(("status", uid, status.value))
