"""The schedule of one graph as the update and cancel walks change it: jobs recorded and released, statuses, edge
weights, the graph growing and shrinking, all through the tables of a :class:`~kubeflux.match.view.ScheduleView`,
so the fingerprints (and with them every cached evaluation) stay true.

:class:`Schedule` holds that view (:attr:`Schedule.view`) and makes its writes; the view knows nothing of it. The
engine holds the schedule; the update walk (:mod:`~kubeflux.match.record`), the cancel walk
(:mod:`~kubeflux.match.cancel`), replays and releases (:mod:`~kubeflux.match.update`) and graph changes
(:mod:`~kubeflux.match.elastic`) are given it. The select walk is given only the view, so it cannot reach a write:
it reads, and leaves its choices as marks (:mod:`~kubeflux.match.state`). A schedule never chooses resources (no
request, no policy scoring) nor emits anything to a writer.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable
from typing import Any

from kubeflux.match.meta import JobMeta
from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import Planner
from kubeflux.match.view import WEIGHT_MAX, ScheduleView, prime
from kubeflux.resources.graph import Status, paused_gc


class Schedule:
    """A graph's schedule with the writes that record, release and re-weigh (see the module docstring)."""

    def __init__(self, view: ScheduleView) -> None:
        self.view = view
        """The tables this schedule writes, and what the walks read of them."""
        self._epoch = 0
        """Counts the one-way changes (:meth:`touch`)."""

    # What the scheduler reads of the schedule besides the engine (its books and its view of the graph).

    @property
    def plans(self) -> dict[int, Planner]:
        """:attr:`ScheduleView.plans`."""
        return self.view.plans

    @property
    def allocations(self) -> dict[int, dict[int, int]]:
        """:attr:`ScheduleView.allocations`."""
        return self.view.allocations

    @property
    def subplans(self) -> dict[int, MultiPlanner]:
        """:attr:`ScheduleView.subplans`."""
        return self.view.subplans

    def root_subplan(self) -> MultiPlanner:
        return self.view.root_subplan()

    def touch(self, uid: int, delta: int = 0) -> None:
        """Record a change of ``uid``'s state (a span, status, property or structure) in the fingerprints of
        it and its ancestors, so no cached evaluation of them is reused. Without ``delta`` the change is
        one-way (a fresh token); a reversible change passes the hash it adds (and later its negation)."""
        view = self.view
        if not delta:
            self._epoch += 1
            delta = hash(("touch", uid, self._epoch))
        fp = view.fp
        vertices = view.graph.vertices
        if len(fp) < len(vertices):
            fp.extend([0] * (len(vertices) - len(fp)))
        while uid != -1:
            view.bump(uid, delta)
            uid = vertices[uid].parent

    def graph_changed(self, uid: int) -> None:
        """The containment children of ``uid`` changed (attach, remove, a node added or removed)."""
        self.view.forget_structure(uid)
        self.touch(uid)

    def add_plan(self, uid: int, meta: JobMeta, needs: int) -> None:
        view = self.view
        plan = view.plan_table.get(uid)
        if plan is None:
            plan = view.new_plan(uid)
        span = plan.add_span(meta.at, meta.duration, needs)
        key: Any = view.uid_objects()[uid]  # (see uid_objects)
        job: Any = meta.jobid
        view.vertices_of_job(job).add(key)
        table = view.span_table(meta.alloc_type)
        if table is None:
            return
        spans = table.get(uid)
        if spans is None:
            table[key] = {job: span}
        else:
            spans[job] = span

    def add_job_data(self, uid: int, meta: JobMeta, aggregates: dict[str, int], fingerprint: int) -> None:
        view = self.view
        jobid: Any = meta.jobid  # boxed once for every table below (see uid_objects)
        key: Any = view.uid_objects()[uid]
        tags = view.tag_table.get(uid)
        if tags is None:
            view.tag_table[key] = {jobid}
        else:
            tags.add(jobid)
        view.vertices_of_job(jobid).add(key)
        uses = view.use_table.get(uid)
        if uses is None:
            uses = view.use_table[key] = {}
        previous = uses.get(jobid)
        if previous is not None:
            fingerprint += previous[2]
            view.unbound(uid, previous[0], previous[1])
        at: Any = meta.at
        end: Any = meta.at + meta.duration
        uses[jobid] = (at, end, fingerprint)
        if view.children(uid):  # only non-leaf evaluations are cached, so only they need their bounds
            bounds = view.bounds.get(uid)
            if bounds is None:
                view.bounds[key] = [at, end]
            elif not bounds or bounds[-1] <= at:  # the latest window yet (jobs placed one after another)
                bounds.append(at)
                bounds.append(end)
            else:
                insort(bounds, at)
                insort(bounds, end)
            if view.layouts:
                for bounds_of_span in view.span_bounds(uid):
                    insort(bounds_of_span, at)
                    insort(bounds_of_span, end)
        subplan = view.subplans.get(uid)
        if subplan is not None and aggregates:
            counts = [aggregates.get(type, 0) for type in subplan.resource_types]
            spans = view.job2span.get(uid)
            if spans is None:
                spans = view.job2span[uid] = {}
            spans[jobid] = subplan.add_span(at, meta.duration, counts)

    def pop_span(self, uid: int, jobid: int) -> int | None:
        """Take ``jobid``'s planner span on ``uid`` (an allocation or a reservation) out of the job tables; its
        id in ``uid``'s planner, None if there is none."""
        view = self.view
        spans = view.allocation_table.get(uid)
        if spans is None or jobid not in spans:
            spans = view.reservation_table.get(uid)
            if spans is None or jobid not in spans:
                return None
        return spans.pop(jobid)

    def mark(self, uid: int, status: Status) -> None:
        """Set a subtree root's status (Fluxion marks only the root; pruning stops at it)."""
        view = self.view
        view.settle()
        vertex = view.graph.vertices[uid]
        if vertex.status == status:
            return
        self.touch(uid, _status_hash(uid, status) - _status_hash(uid, vertex.status))
        vertex.status = status
        view.status_epoch += 1
        delta = view.nodes_within(uid)
        view.nodes_up += delta if status == Status.UP else -delta

    def plan_span(self, uid: int, meta: JobMeta, amount: int) -> None:
        """Add ``meta``'s planner span of ``amount`` units on ``uid``; PlannerError if it does not fit.

        The fingerprints are left to the update walk that records the job on ``uid`` next (as a match's own
        walk adds a span and its share of the fingerprints together); :meth:`unplan` undoes it if none follows."""
        self.view.settle()
        self.add_plan(uid, meta, amount)

    def unplan(self, uid: int, jobid: int) -> int:
        """Remove ``jobid``'s planner span on ``uid``; return the units it held (0 if there was none)."""
        view = self.view
        view.settle()
        span = self.pop_span(uid, jobid)
        if span is None:
            return 0
        plan = view.plans[uid]
        amount = plan.span_resources(span)
        plan.rem_span(span)
        self.touch(uid)
        return amount

    def drop_use(self, uid: int, jobid: int) -> None:
        """Forget that ``jobid`` uses ``uid`` (its exclusivity record) and its share of the fingerprints."""
        view = self.view
        use = view.x_uses.get(uid, {}).pop(jobid, None)
        if use is not None:
            view.unbound(uid, use[0], use[1])
            self.touch(uid, -use[2])

    def update_weight(self, edge: int, target: int, meta: JobMeta) -> int:
        """Re-weigh ``edge`` by its target's free aggregate (``first``'s explore order); returns the change to
        the source's fingerprint."""
        view = self.view
        subplan = view.subplans.get(target)
        if subplan is None:
            return 0
        order_type = view.prune_filters.order_type(view.graph.vertices[target].type)
        if order_type is None:
            return 0
        # A type absent below the target is in Fluxion's filter with total 0 (see PruningFilters.order_type).
        avail = subplan.avail_resources_at(meta.now, order_type) if order_type in subplan.resource_types else 0
        if avail == 0 and subplan.span_count() == 0:
            return 0
        old = view.edge_weight[edge]
        new = view.edge_weight[edge] = max(avail, 0)
        if new != old:
            view.reorder(edge, target, old, new)
        return _weight_hash(edge, new) - _weight_hash(edge, old)

    def refresh(self, changed: Iterable[int], added: Iterable[int] = (), removed: Iterable[int] = ()) -> None:
        """Re-initialise after vertices were ``added`` to or ``removed`` from the graph (Fluxion's
        ``initialize`` after ``attach``/``remove``); ``changed`` are the surviving vertices whose containment
        children changed. Sizes the per-edge tables, forgets cached children and evaluations there, gives new
        vertices their aggregate filters and every surviving filter its new totals, keeping the spans it holds.
        """
        self.view.restructure()
        self.view.settle()
        graph = self.view.graph
        grow = len(graph.edges) - len(self.view.edge_weight)
        if grow > 0:
            self.view.edge_weight.extend([WEIGHT_MAX] * grow)
        for uid in changed:
            self.graph_changed(uid)
        kept = self.view.subplans
        self.view.subplans = {}
        with paused_gc():
            prime(self.view, self.view.root)
        for uid, fresh in self.view.subplans.items():
            old = kept.get(uid)
            if old is not None:
                old.update([(type, fresh.resource_total(type)) for type in fresh.resource_types])
                self.view.subplans[uid] = old
        for uid, old in kept.items():
            if uid not in self.view.subplans and self.view.job2span.get(uid) and not graph.vertices[uid].removed:
                self.view.subplans[uid] = old  # still holds job spans: keep it until they are cancelled
        vertices = graph.vertices
        for uid in added:
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.view.nodes_up += 1
        for uid in removed:
            if vertices[uid].type == "node" and vertices[uid].status == Status.UP:
                self.view.nodes_up -= 1


def _weight_hash(edge: int, weight: int) -> int:
    return 0 if weight == WEIGHT_MAX else hash(("weight", edge, weight))


def _status_hash(uid: int, status: Status) -> int:
    return 0 if status == Status.UP else hash(("status", uid, status.value))
