"""The admission layer in the simulated cluster: Kueue in front of whatever schedulers the run has.

A job of the workload that names a LocalQueue (:attr:`~kubeflux.sim.workloads.model.WorkloadJob.queue_name`, from
the label ``kueue.x-k8s.io/queue-name``) arrives in the cluster's job book as any job (``jobs.csv`` keeps it in
submission order, the queue figures count it) but its objects are not created: Kueue holds it (a suspended Job; a
pod group's or a pod's pods are not made until then, where Kueue would create them gated — no scheduler could
place them either way). At the end of each time point where something changed (an arrival, a job's end, an
eviction), an admission cycle runs (:meth:`Admitter.cycle <kubeflux.sim.kueue.admission.Admitter.cycle>`, an entry
of the loop at that time after every other); each workload it admits has its pods created then, with the chosen
flavors' ``nodeLabels`` added to their ``nodeSelector`` and the flavors' ``tolerations`` to theirs; each one it
preempts has its pods deleted (``Preempted``: the losses count them), is held (:meth:`JobBook.requeue_held
<kubeflux.sim.jobbook.JobBook.requeue_held>`) and waits again. A job's end releases its quota.

With Kueue's ``waitForPodsReady``, each admission is checked ``timeout`` later: a workload of which fewer pods
started (Running, or done) than it needs at once (a Job: ``parallelism``, at most the completions it lacks; a pod
group: all its pods) is evicted as a preempted one is, its pods deleted (``PodsReadyTimeout``), and queued again
after its back-off (:meth:`Admitter.time_out <kubeflux.sim.kueue.admission.Admitter.time_out>`), or deactivated.

Jobs without the label go to the schedulers as without Kueue. A workload that can never be admitted (its
LocalQueue missing, …) waits, never dropped: the run's problems say which and why.

What the layer decides lands on a sink (:mod:`kubeflux.sim.kueue.sink`): the simulated cluster's own book in
``simulate``, the served cluster's API in ``cluster serve`` (:mod:`kubeflux.sim.apiserver.kueue`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kubeflux.scheduler.messages import PREEMPTED_REASON
from kubeflux.sim.clock import Priority
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.jobs import SimJob, job_timings
from kubeflux.sim.kueue.admission import Admitted, Admitter
from kubeflux.sim.kueue.figures import UsageSeries, kueue_figures
from kubeflux.sim.kueue.objects import PODS, KueueObjects, ResourceFlavor
from kubeflux.sim.kueue.sink import ClusterSink, KueueSink, Timeline
from kubeflux.sim.kueue.workload import QueuedWorkload
from kubeflux.sim.records import JobRecord, RunRecord
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

PODS_READY_TIMEOUT = "PodsReadyTimeout"
"""Kueue's eviction reason for a workload whose pods were not ready in time (its event's reason, and its deleted
pods')."""
WAITING_NAMED = 5
"""Workloads named in the problem that says which were never admitted (the count says how many in all)."""


def requests_of(wjob: WorkloadJob) -> dict[str, int]:
    """What all the pods of ``wjob`` ask at once (a Job: ``parallelism`` pods), by resource; ``pods`` counts them."""
    if wjob.kind is JobKind.JOB:
        counted = [(wjob.pods[0], wjob.parallelism)] if wjob.pods else []
    else:
        counted = [(pod, 1) for pod in wjob.pods]
    total: dict[str, int] = {}
    for pod, count in counted:
        for resource, amount in pod.requests.items():
            if resource != PODS:
                total[resource] = total.get(resource, 0) + amount * count
        total[PODS] = total.get(PODS, 0) + count
    return total


class KueueLayer:
    """Kueue in front of the schedulers of one simulated cluster (see the module docstring). ``sink`` and
    ``loop``: where its decisions land and its clock (by default the cluster's book and event loop)."""

    def __init__(
        self,
        objects: KueueObjects,
        cluster: Cluster,
        sink: KueueSink | None = None,
        loop: Timeline | None = None,
    ) -> None:
        self.admitter = Admitter(objects)
        self.cluster = cluster
        self.sink: KueueSink = sink if sink is not None else ClusterSink(cluster)
        self.loop: Timeline = loop if loop is not None else cluster.loop
        self.jobs: dict[int, SimJob] = {}
        self.asked: dict[int, WorkloadJob] = {}
        """Job index → the job as it arrived, before any flavor's node labels and tolerations: each admission
        dresses it anew for the flavors it is given (a job evicted and admitted on another flavor keeps none of the
        first one's)."""
        self.series = UsageSeries(objects)
        self._cycle_at: float | None = None
        cluster.book.on_finish = self._finished

    def arrive(self, wjob: WorkloadJob, submit_time: float) -> None:
        """``wjob`` (one that names a LocalQueue) arrives now: held as a Kueue workload (module docstring)."""
        job = self.cluster.book.arrive(wjob, submit_time)
        if not job.rejected_reason:
            self.hold(job)

    def hold(self, job: SimJob) -> None:
        """``job``, arrived in the cluster's book and not rejected, is held as a Kueue workload."""
        wjob = job.wjob
        self.jobs[job.index] = job
        self.asked[job.index] = wjob
        first = wjob.pods[0] if wjob.pods else None
        workload = QueuedWorkload(
            key=wjob.id,
            ref=job.index,
            namespace=wjob.namespace,
            queue=wjob.queue_name,
            priority=max((pod.priority for pod in wjob.pods), default=0),
            created=self.loop.now,
            requests=requests_of(wjob),
            node_selector=dict(first.node_selector) if first is not None else {},
            tolerations=first.tolerations if first is not None else (),
        )
        queued = self.admitter.add(workload, self.loop.now)
        self.sink.queued(job, workload)
        if queued:
            self._soon()

    def _soon(self) -> None:
        """Run an admission cycle at the end of this time point (once)."""
        now = self.loop.now
        if self._cycle_at != now:
            self._cycle_at = now
            self.loop.schedule(now, Priority.WAKEUP, self._cycle)

    def _cycle(self, _payload: object = None) -> None:
        self._cycle_at = None
        now = self.loop.now
        for decision in self.admitter.cycle(now):
            workload = decision.workload
            job = self.jobs[workload.ref]
            if isinstance(decision, Admitted):
                self._start(job, workload)
            else:
                self._evict(job, workload, decision.message)
        self.series.sample(now, self.admitter)
        self.sink.cycled(self.admitter)

    def _start(self, job: SimJob, workload: QueuedWorkload) -> None:
        """Create the admitted job's objects now, its pods with the flavors' node labels and tolerations."""
        assignment = workload.assignment
        flavors = self.admitter.objects.flavors
        chosen = [flavors[name] for name in dict.fromkeys(assignment.flavors.values())] if assignment else []
        asked = self.asked[job.index]
        wjob = dataclasses.replace(asked, pods=[_on_flavors(pod, chosen) for pod in asked.pods]) if chosen else asked
        if wjob is not job.wjob:
            job.wjob = wjob
            book = self.cluster.book
            job.timings = job_timings(wjob, book.lifecycle, book.primary_scheduler)
        needed = len(wjob.pods)
        if wjob.kind is JobKind.JOB:
            needed = min(wjob.parallelism, wjob.completions - job.succeeded)
        self.sink.admitted(job, workload)
        wait = self.admitter.objects.wait_for_pods_ready
        if wait is not None and needed > 0:
            loop = self.loop
            check = (job, workload, loop.now, needed)
            loop.schedule(loop.now + wait.timeout, Priority.WAKEUP, self._pods_ready_check, check)

    def _pods_ready_check(self, check: tuple[SimJob, QueuedWorkload, float, int]) -> None:
        """``waitForPodsReady.timeout`` after an admission: unless the workload ended, was evicted since, or has
        ``needed`` pods started in this admission, it is evicted, and queued again after its back-off."""
        job, workload, admitted, needed = check
        if job.finish is not None or workload.admitted_at != admitted or workload.ref not in self.admitter.admitted:
            return
        if sum(1 for sp in job.attempt() if sp.running_at is not None) >= needed:
            return
        now = self.loop.now
        again = self.admitter.time_out(workload.ref, now)
        self._evict(job, workload, f"Exceeded the PodsReady timeout {workload.key}", PODS_READY_TIMEOUT)
        if again is not None:
            self.loop.schedule(again, Priority.WAKEUP, self._requeue, workload.ref)
        self.series.sample(now, self.admitter)
        self.sink.cycled(self.admitter)
        self._soon()

    def _requeue(self, ref: int) -> None:
        if self.admitter.requeue(ref):
            self._soon()

    def _evict(self, job: SimJob, workload: QueuedWorkload, message: str, reason: str = PREEMPTED_REASON) -> None:
        """Suspend the evicted job: its unfinished pods deleted (``reason``: ``Preempted``, or ``PodsReadyTimeout``),
        held until admitted again."""
        job.held = True
        self.sink.evicted(job, workload, reason, message)
        self.cluster.book.requeue_held(job)

    def _finished(self, job: SimJob) -> None:
        """``job`` ended (its pods done, or failed, even while held): it leaves the admitter; its quota, if it held
        any, is released and a cycle runs."""
        if job.index not in self.jobs:
            return
        admitted = job.index in self.admitter.admitted
        self.admitter.forget(job.index)
        workload = self.admitter.workloads.get(job.index)
        if workload is not None:
            self.sink.ended(job, workload)
        if admitted:
            self.series.sample(self.loop.now, self.admitter)
            self._soon()

    # -- the run's records -------------------------------------------------------------------------------------
    def finish_record(self, record: RunRecord, rows: Mapping[int, JobRecord] | None = None) -> None:
        """Write the admission figures into ``record``: each Kueue job's ClusterQueue, first admission and
        evictions, the summary figures (:func:`~kubeflux.sim.kueue.figures.kueue_figures`), and a problem naming
        the workloads never admitted. ``rows``: each job's row by its index in the cluster's book (by default its
        place in ``record.jobs``)."""
        for ref, workload in self.admitter.workloads.items():
            row = record.jobs[ref] if rows is None else rows[ref]
            row.cluster_queue = workload.cluster_queue or f"({workload.queue})"
            row.admission_time = workload.first_admitted
            row.quota_evictions = workload.evictions
            if workload.deactivated:
                row.reason = f"{workload.why} (Kueue)"
            elif workload.admitted_at is None and row.finish_time is None:
                row.reason = f"not admitted by Kueue: {workload.why or 'waiting for quota'}"
        end = max((job.finish_time for job in record.jobs if job.finish_time is not None), default=0.0)
        record.admission = kueue_figures(self.admitter, self.series, end)
        if self.admitter.stopped:
            record.problems.append(f"kueue: {self.admitter.stopped}")
        waiting = [wl for wl in self.admitter.waiting() if not wl.deactivated]
        deactivated = [wl.key for wl in self.admitter.inactive if wl.deactivated]
        if deactivated:
            named = ", ".join(deactivated[:WAITING_NAMED]) + (" …" if len(deactivated) > WAITING_NAMED else "")
            record.problems.append(
                f"kueue: {len(deactivated)} workload(s) deactivated, their pods not ready in time too often: {named}"
            )
        if waiting:
            named = "; ".join(f"{wl.key}: {wl.why or 'waiting'}" for wl in waiting[:WAITING_NAMED])
            more = f" and {len(waiting) - WAITING_NAMED} more" if len(waiting) > WAITING_NAMED else ""
            record.problems.append(f"kueue: {len(waiting)} workload(s) never admitted: {named}{more}")


def _on_flavors(pod: PodTemplate, flavors: list[ResourceFlavor]) -> PodTemplate:
    """``pod`` with the flavors' node labels in its ``nodeSelector`` and their tolerations added."""
    selector = dict(pod.node_selector)
    tolerations = list(pod.tolerations)
    for flavor in flavors:
        for key, value in flavor.node_labels.items():
            selector.setdefault(key, value)
        tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
    return dataclasses.replace(pod, node_selector=selector, tolerations=tuple(tolerations))


__all__ = ["KueueLayer", "requests_of"]
