"""The simulation driver: the thin shell that runs scheduler cores against the simulated cluster in virtual time.

One run:

1. Virtual time 0 is the first submission: a job submitted at ``s`` arrives at ``s - first``.
2. The loop takes one time point at a time (:meth:`EventLoop.run_time_point`): pod endings, node changes,
   lifecycle stages and arrivals at that time, in the tie order of :mod:`kubeflux.sim.clock`. Every change is
   sent at once, as a watch event, to every scheduler's ``observe`` (each scheduler sees every pod).
3. Then each scheduler, in the order of the mapping, is asked ``schedule(now)`` once, and its decisions are
   applied before the next one is asked: :class:`Bind` binds the pod (Running after the start delay),
   :class:`Unschedulable` sets ``PodScheduled=False/Unschedulable`` and records ``FailedScheduling``,
   :class:`Reject` leaves the pod Pending and marks its job REJECTED, :class:`PodWarning` records a ``Warning``
   event on the pod (any scheduler's pod), :class:`Evict` ends the pod (any scheduler's) unless the workload's
   PodDisruptionBudgets refuse it (:mod:`kubeflux.sim.budgets`, when the decision goes through the Eviction
   API), :class:`~kubeflux.scheduler.messages.Deallocate` frees a pending pod's ResourceClaim
   (:meth:`~kubeflux.sim.claims.ClaimController.deallocate`). A refused Bind (the pod is gone or bound, the node
   is gone) is recorded as a ``FailedBinding`` event and told back to a scheduler that implements
   :class:`~kubeflux.scheduler.interface.Unreserve`.
4. Each scheduler's ``next_wakeup`` is scheduled as a wake-up entry (the last of its time point).

When the workload defines Kueue objects, its jobs that name a LocalQueue arrive held by the admission layer
(:mod:`kubeflux.sim.kueue.layer`), which creates a Job's pods when it admits it and keeps a lone pod's or a pod
group's gated until then; the others arrive as above.

The run ends when no work can progress any more: no entry is left (no pod will end or start, no node will
change, no job will arrive) and no scheduler asked for a wake-up; or at ``until``. While only wake-ups are left
the cluster is frozen and only a scheduler's own timers (back-offs, Permit timeouts) can move anything; a
scheduler that keeps waking up without binding a pod (coscheduling cycling a gang that can never fit) would
loop for ever, so after :data:`IDLE_WAKEUP_LIMIT` such wake-up time points in a row the run stops and says so in
:attr:`RunRecord.problems`.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from kubeflux.scheduler.decisions import apply_decisions
from kubeflux.scheduler.interface import (
    PREEMPTED_REASON,
    Bind,
    Deallocate,
    EventKind,
    Evict,
    IgnoresStatusUpdates,
    PodWarning,
    Reject,
    Scheduler,
    Unreserve,
    Unschedulable,
)
from kubeflux.scheduler.objects import DisruptionBudget, Node, PodPhase
from kubeflux.scheduler.storage import ClaimBinding, ClaimRef, PersistentVolume, PersistentVolumeClaim, StorageObject
from kubeflux.sim.budgets import DisruptionBudgets
from kubeflux.sim.claims import ClaimController
from kubeflux.sim.clock import EventLoop, Priority
from kubeflux.sim.cluster import Cluster, Lifecycle, NodeOutage
from kubeflux.sim.fabric import Fabric, Slowdown, span_columns
from kubeflux.sim.jobs import SimJob
from kubeflux.sim.kueue.layer import KueueLayer
from kubeflux.sim.pods import SimPod
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.model import Workload, WorkloadJob
from kubeflux.sim.workloads.tenants import default_local_queues

Progress = Callable[[float, int], None]
"""``progress(now, jobs_submitted)``, called every 256 time points (it decides itself whether to print)."""

IDLE_WAKEUP_LIMIT = 1000
"""Consecutive time points holding nothing but scheduler wake-ups and binding no pod, after which a run is taken
to be livelocked and stops (see the module docstring)."""


@dataclass(slots=True)
class SimulationOptions:
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    outages: Sequence[NodeOutage] = ()
    until: float | None = None
    """Stop at this virtual time (seconds from the first submission); None runs until nothing is left to do."""
    keep_events: bool = False
    """Keep every Kubernetes Event (Scheduled, FailedScheduling …) in :attr:`Cluster.kube_events`."""
    couple: bool = True
    """Coupled jobs compute together (:func:`kubeflux.sim.jobs.coupled_quorum`); False runs every pod on its own
    from its Running, as KWOK does."""
    fabric: Fabric | None = None
    """The topology levels (``jobs.csv`` records the domains each job spanned, for those some node carries) and
    their penalties, which slow coupled jobs spread over domains (:mod:`kubeflux.sim.fabric`); None: neither."""


GC_YOUNG_THRESHOLD = 100_000
"""Allocations between two young-generation collections during a run (Python's default: 700)."""


@contextmanager
def few_collections() -> Iterator[None]:
    """Run with rare young collections and no old-generation ones, then restore the collector's thresholds.

    A run allocates millions of objects that live to its end (pods, events, records) and almost no cyclic
    garbage; with the default thresholds the collector rescans the whole growing heap again and again, about 40 %
    of an LCG run. Young cyclic garbage is still collected, every :data:`GC_YOUNG_THRESHOLD` allocations. At the
    end the survivors are moved to the oldest generation (``gc.freeze`` then ``gc.unfreeze``), where they would
    have ended anyway: otherwise the first collection after the run rescans them all at once (about 2 s of CPU
    after an LCG run). They stay tracked, and later full collections reclaim them as usual. (Skipped when the
    program has frozen objects of its own: unfreezing would release them.)
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 1_000_000, 1_000_000)
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*thresholds)


class Simulation:
    """One workload on one cluster under one or more schedulers.

    ``schedulers`` maps a ``schedulerName`` to the core that owns pods naming it; ``primary`` (default: the first
    key) is the name given to pods whose template leaves it empty, i.e. the scheduler under test, and ``label``
    the name written in the :class:`RunRecord` (default: ``primary``).
    """

    def __init__(
        self,
        workload: Workload,
        nodes: Sequence[Node],
        schedulers: Mapping[str, Scheduler],
        *,
        primary: str | None = None,
        label: str | None = None,
        options: SimulationOptions | None = None,
    ) -> None:
        if not schedulers:
            raise ValueError("schedulers: at least one scheduler is needed")
        self.workload = workload = default_local_queues(workload)  # Kueue's default LocalQueue, if it has one
        self.schedulers = dict(schedulers)
        self._unreserving = {name: s for name, s in self.schedulers.items() if isinstance(s, Unreserve)}
        """The schedulers that take refused Binds back, found once: a runtime Protocol check costs ~50 µs, and
        decisions are applied for every scheduler at every time point (a tenth of an LCG run under fcfs)."""
        self.primary = primary if primary is not None else next(iter(self.schedulers))
        if self.primary not in self.schedulers:
            raise ValueError(f"primary: no scheduler named {self.primary!r} (have {sorted(self.schedulers)})")
        self.label = label or self.primary
        self.options = options or SimulationOptions()
        self.loop = EventLoop()
        self.cluster = Cluster(
            self.loop,
            nodes,
            self.options.lifecycle,
            primary_scheduler=self.primary,
            workload_name=workload.name,
            keep_events=self.options.keep_events,
            couple=self.options.couple,
        )
        fabric = self.options.fabric
        if fabric is not None and fabric.levels:  # a coupled job's spans are noted when it begins, penalty or not
            self.cluster.book.slowdown = Slowdown(fabric, self.cluster.nodes)
        self.problems: list[str] = list(workload.problems)
        self._sink = ClusterSink(self.cluster, self.problems, DisruptionBudgets())
        self.kueue = KueueLayer(workload.kueue, self.cluster) if workload.kueue else None
        """The admission layer in front of the schedulers, when the workload defines Kueue objects."""
        for scheduler in self.schedulers.values():
            quiet = isinstance(scheduler, IgnoresStatusUpdates) and scheduler.ignores_status_updates
            self.cluster.subscribe(scheduler.observe, status_updates=not quiet)
        self._order = sorted(workload.jobs, key=lambda j: j.submit_time)  # stable: file order breaks ties
        self._t0 = self._order[0].submit_time if self._order else 0.0
        self._next_arrival = 0
        self._wakeups: dict[str, float] = {}
        self._wakeups_pending = 0
        self.stopped = ""
        """Why the run stopped before its work was done (:attr:`RunRecord.stopped`)."""

    # -- arrivals ---------------------------------------------------------------------------------------------
    def _arrive(self, job: WorkloadJob) -> None:
        kueue = self.kueue
        if kueue is not None and job.queue_name:
            kueue.arrive(job, job.submit_time - self._t0)  # held until Kueue admits it
        else:
            self.cluster.submit(job, job.submit_time - self._t0)
        self._next_arrival += 1
        if self._next_arrival < len(self._order):
            nxt = self._order[self._next_arrival]
            self.loop.schedule(nxt.submit_time - self._t0, Priority.ARRIVAL, self._arrive, nxt)

    def _time_budgets(self) -> list[DisruptionBudget]:
        """The workload's PodDisruptionBudgets there from the start (its first submission, or before); the others
        are created and deleted at their times (the workload's :class:`~kubeflux.sim.workloads.model.Lifetime`),
        before the arrivals and pod stages of the same time, as cluster objects."""
        first: list[DisruptionBudget] = []
        for budget in self.workload.budgets:
            lifetime = self.workload.lifetime(budget).shifted(self._t0)
            if lifetime.deleted is not None and lifetime.deleted <= 0.0:
                continue  # gone before the run begins
            if lifetime.created <= 0.0:
                first.append(budget)
                self._sink.budgets.add(budget)
            else:
                self.loop.schedule(lifetime.created, Priority.NODE, self._budget_created, budget)
            if lifetime.deleted is not None:
                self.loop.schedule(lifetime.deleted, Priority.NODE, self._budget_deleted, budget)
        return first

    def _budget_created(self, budget: DisruptionBudget) -> None:
        self._sink.budgets.add(budget)
        self.cluster.announce([budget])

    def _budget_deleted(self, budget: DisruptionBudget) -> None:
        self._sink.budgets.remove(budget)
        self.cluster.announce([budget], EventKind.DELETED)

    def _wake(self, name: str) -> None:
        self._wakeups_pending -= 1
        if self._wakeups.get(name) == self.loop.now:
            del self._wakeups[name]

    # -- the run -------------------------------------------------------------------------------------------------
    @property
    def storage(self) -> dict[str, StorageObject]:
        """The workload's storage objects by kind and name (``PersistentVolumeClaim default/data``), as the run's
        Binds left them (a claim's selected node, a volume's ``claimRef``)."""
        return self._sink.storage

    def run(self, progress: Progress | None = None) -> RunRecord:
        """Simulate to the end and return the run's records."""
        with few_collections():
            return self._run(progress)

    def _run(self, progress: Progress | None) -> RunRecord:
        started = time.perf_counter()
        loop, cluster = self.loop, self.cluster
        for outage in self.options.outages:
            cluster.schedule_outage(outage)
        cluster.announce([*cluster.nodes, *self._time_budgets(), *self._sink.hold(self.workload.storage)])
        if self.workload.devices:  # in the cluster from the start, and kept as the resourceclaim controller keeps them
            claims = ClaimController(self.workload.devices, lambda kind, obj: cluster.announce([obj], kind))
            cluster.claims = cluster.book.claims = claims
            claims.announce()
        if self._order:
            first = self._order[0]
            loop.schedule(first.submit_time - self._t0, Priority.ARRIVAL, self._arrive, first)
        until = self.options.until
        schedulers = [(name, s, self._unreserving.get(name)) for name, s in self.schedulers.items()]
        sink = self._sink
        points = idle = 0
        self.stopped = ""
        while len(loop):
            if until is not None and loop.peek() > until:
                loop.now = until
                break
            now = loop.run_time_point()
            bound = 0
            for name, scheduler, unreserve in schedulers:
                while True:
                    decisions = scheduler.schedule(now)
                    made = apply_decisions(name, decisions, sink, unreserve, now) if decisions else 0
                    bound += made
                    wake = scheduler.next_wakeup(now)
                    # Again at once while it binds and asks (a pass that stopped at its queue depth): the binds'
                    # own events came in this time point, so no later event would bring that pass; a shell on a
                    # real cluster runs it after the binds' watch events, as kube-scheduler takes its next pod.
                    if not made or wake != now:
                        break
                if wake is not None and wake > now and self._wakeups.get(name) != wake:
                    self._wakeups[name] = wake
                    self._wakeups_pending += 1
                    loop.schedule(wake, Priority.WAKEUP, self._wake, name)
            frozen = len(loop) == self._wakeups_pending  # only the schedulers' own timers can change anything
            if frozen and (bound or not idle) and self._deadlocked(now):
                break
            if not frozen or bound:
                idle = 0  # the cluster will change (or just did): not idle
            else:
                idle += 1
                if idle >= IDLE_WAKEUP_LIMIT:
                    self._report_livelock(now, idle)
                    break
            points += 1
            if progress is not None and not points & 255:
                progress(now, self._next_arrival)
        if progress is not None:
            progress(loop.now, self._next_arrival)
        self._report_orphans()
        record = RunRecord(
            scheduler=self.label,
            workload_name=self.workload.name,
            jobs=cluster.job_records(),
            total_cores=cluster.total_cores,
            wall_seconds=time.perf_counter() - started,
            pods_bound=cluster.pods_bound,
            events=cluster.events_emitted,
            utilization_series=cluster.utilization_series,
            queue_series=cluster.queue_series,
            problems=self.problems + cluster.problems,
            pods=cluster.pod_records(),
            resources=cluster.ids.layout(),
            idle_series=cluster.usage.idle_series,
            usage_series=cluster.usage.series,
            stopped=self.stopped,
            spans={} if self.options.fabric is None else span_columns(self.options.fabric, cluster.jobs, cluster.nodes),
        )
        if self.kueue is not None:
            self.kueue.finish_record(record)
        return record

    def _report_livelock(self, now: float, idle: int) -> None:
        waiting = sum(1 for sp in self.cluster.pods.values() if sp.bound_at is None and not sp.pod.deleted)
        self.stopped = livelock_problem(now, idle, waiting)
        self.problems.append(self.stopped)

    def _deadlocked(self, now: float) -> bool:
        """At a frozen time point: stop the run, saying why, when coupled jobs hold resources idle for pods that
        no longer fit anywhere (:meth:`Cluster.stalled_jobs`)."""
        jobs = self.cluster.stalled_jobs(self.schedulers.__contains__)
        if not jobs:
            return False
        self.stopped = deadlock_problem(now, jobs)
        self.problems.append(self.stopped)
        return True

    def _report_orphans(self) -> None:
        missing: dict[str, int] = {}
        for sp in self.cluster.pods.values():
            if (
                sp.pod.phase is PodPhase.PENDING
                and sp.bound_at is None
                and sp.pod.scheduler_name not in self.schedulers
            ):
                missing[sp.pod.scheduler_name] = missing.get(sp.pod.scheduler_name, 0) + 1
        for name, count in sorted(missing.items()):
            self.problems.append(f"{count} pod(s) name schedulerName {name!r}, which no scheduler in this run owns")


class ClusterSink:
    """Where the simulator writes decisions (:func:`~kubeflux.scheduler.decisions.apply_decisions`): the simulated
    cluster, at once, in virtual time; a decision not applied goes to the run's ``problems``."""

    def __init__(self, cluster: Cluster, problems: list[str], budgets: DisruptionBudgets | None = None) -> None:
        self.cluster = cluster
        self.pods = cluster.pods
        self.problems = problems
        self.budgets = budgets or DisruptionBudgets()
        self.storage: dict[str, StorageObject] = {}
        """The workload's storage objects by kind and name, as the Binds' claim bindings left them."""

    def pod(self, key: str, uid: str) -> SimPod | None:
        return self.pods.get(key)  # a pod of another uid is the cluster's to refuse (bind_pod)

    def not_found(self, key: str) -> str:
        return f"pods {key!r} not found"

    def owner(self, pod: SimPod) -> str:
        return pod.pod.scheduler_name

    def hold(self, objects: list[StorageObject]) -> list[StorageObject]:
        """Keep the workload's storage objects (what a Bind's claim bindings write to); ``objects``."""
        for obj in objects:
            self.storage[_storage_key(obj)] = obj
        return objects

    def _write_volume_claims(self, claims: tuple[ClaimBinding, ...]) -> None:
        """What a Bind writes for its pod's claims before the Binding, as kube-scheduler's volume binder: the claim's
        selected node, or the chosen volume's ``claimRef`` (announced as changes)."""
        for binding in claims:
            claim = self.storage.get(f"PersistentVolumeClaim {binding.claim}")
            if not isinstance(claim, PersistentVolumeClaim):
                continue
            changed: StorageObject = replace(claim, selected_node=binding.node)
            if binding.volume:
                volume = self.storage.get(f"PersistentVolume {binding.volume}")
                if not isinstance(volume, PersistentVolume):
                    continue
                changed = replace(volume, claim=ClaimRef(claim.namespace, claim.name, claim.uid))
            self.storage[_storage_key(changed)] = changed
            self.cluster.announce([changed], EventKind.MODIFIED)

    def bind(self, pod: SimPod, decision: Bind) -> str:
        if decision.volume_claims:  # what the volume binder writes first (PreBind)
            self._write_volume_claims(decision.volume_claims)
        claims, made = self.cluster.claims, decision.resource_claims
        if made:  # then the ResourceClaims' allocation, as DynamicResources' PreBind writes it
            error = claims.bind(pod.pod, made) if claims is not None else "the cluster has no ResourceClaims"
            if error:
                self.cluster.record_event("Warning", "FailedScheduling", decision.pod, error)
                return error
        error = self.cluster.bind_pod(pod, decision.uid, decision.node, decision.annotations)
        if error:
            if made and claims is not None:
                claims.unbind(pod.pod, made)
            self.cluster.record_event("Warning", "FailedBinding", decision.pod, error)
        else:
            pod.nominated_node = ""  # the binding clears it (ClearingNominatedNodeNameAfterBinding)
        return error

    def unschedulable(self, pod: SimPod, decision: Unschedulable) -> None:
        pod.nominated_node = decision.nominated_node
        self.cluster.mark_pod_unschedulable(pod, decision.uid, decision.message, decision.expected_start)

    def deallocate(self, pod: SimPod, decision: Deallocate) -> str:
        claims = self.cluster.claims
        return claims.deallocate(decision) if claims is not None else "the cluster has no ResourceClaims"

    def reject(self, pod: SimPod, decision: Reject) -> None:
        self.cluster.reject(decision.pod, decision.uid, decision.message)

    def warn(self, pod: SimPod, decision: PodWarning) -> None:
        if not decision.uid or pod.pod.uid == decision.uid:
            self.cluster.record_event("Warning", decision.reason, decision.pod, decision.message)

    def evict(self, pod: SimPod, decision: Evict) -> str:
        """The pod ends at once, ``Failed`` with reason ``Preempted`` and the ``DisruptionTarget`` condition, and is
        deleted (the simulated kubelet's graceful termination takes no time); its Job replaces it as for any
        failure. Through the Eviction API (``decision.budgets``), the workload's PodDisruptionBudgets may refuse it
        (:class:`~kubeflux.sim.budgets.DisruptionBudgets`: the real 429's words, the pod left running)."""
        if decision.uid and pod.pod.uid != decision.uid:
            return self.not_found(decision.pod)
        if decision.budgets and len(self.budgets):
            refused = self.budgets.refusal(pod.pod, (sp.pod for sp in self.pods.values()))
            if refused:
                return refused
        self.cluster.record_event("Normal", PREEMPTED_REASON, decision.pod, decision.message)
        self.cluster.delete_pod(decision.pod, PREEMPTED_REASON)
        return ""

    def problem(self, message: str) -> None:
        self.problems.append(message)


def livelock_problem(now: float, idle: int, waiting: int) -> str:
    """What a run stopped by the livelock rule (see the module docstring) says in its problems."""
    return (
        f"the run stopped at {now:g} s: nothing but scheduler wake-ups was left for {idle} time points in a row "
        f"and none bound a pod ({waiting} pod(s) still pending); a scheduler keeps retrying pods that cannot run"
    )


DEADLOCK_JOBS_NAMED = 20
"""Jobs named in a deadlock's message at most (the count says how many in all)."""


def deadlock_problem(now: float, jobs: Sequence[SimJob]) -> str:
    """What a run stopped by a deadlock says in its problems: the jobs that hold resources idle, each with how many
    of its required pods run."""
    named = ", ".join(
        f"{job.wjob.id} ({len(job.waiting)} of {job.start_quorum} pods running)" for job in jobs[:DEADLOCK_JOBS_NAMED]
    )
    more = f" and {len(jobs) - DEADLOCK_JOBS_NAMED} more" if len(jobs) > DEADLOCK_JOBS_NAMED else ""
    return (
        f"deadlock: the run stopped at {now:g} s: {len(jobs)} coupled job(s) hold resources idle waiting for the "
        f"rest of their pods, which fit on no node (or do not exist): {named}{more}"
    )


def simulate(
    workload: Workload,
    nodes: Sequence[Node],
    schedulers: Mapping[str, Scheduler],
    *,
    primary: str | None = None,
    label: str | None = None,
    options: SimulationOptions | None = None,
    progress: Progress | None = None,
) -> RunRecord:
    """Build a :class:`Simulation` and run it."""
    sim = Simulation(workload, nodes, schedulers, primary=primary, label=label, options=options)
    return sim.run(progress)


__all__ = [
    "IDLE_WAKEUP_LIMIT",
    "ClusterSink",
    "Progress",
    "Simulation",
    "SimulationOptions",
    "deadlock_problem",
    "livelock_problem",
    "simulate",
]


def _storage_key(obj: StorageObject) -> str:
    name = obj.key if isinstance(obj, PersistentVolumeClaim) else obj.name
    return f"{type(obj).__name__} {name}"
