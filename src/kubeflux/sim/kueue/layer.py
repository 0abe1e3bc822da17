"""The admission layer in the simulated cluster: Kueue in front of whatever schedulers the run has.

A job of the workload that names a LocalQueue (:attr:`~kubeflux.sim.workloads.model.WorkloadJob.queue_name`, from
the label ``kueue.x-k8s.io/queue-name``) arrives in the cluster's job book as any job (``jobs.csv`` keeps it in
submission order, the queue figures count it) and Kueue holds it: a Job is not started (a suspended Job makes no
pods; nor does a trace job, which stands for one, nor an AppWrapper); a pod group's or a lone pod's pods are
created now, held by Kueue's scheduling gate ``kueue.x-k8s.io/admission``
(:data:`~kubeflux.sim.kueue.objects.ADMISSION_GATE`, :func:`held_from_creation`), as Kueue's webhook holds them from
their creation: their creation time orders them in the schedulers' queues once released, and their ResourceClaims
are made from their templates now, as kube-controller-manager makes a gated pod's. At the end of each time point
where something changed (an arrival, a job's end, an eviction), an admission cycle runs (:meth:`Admitter.cycle
<kubeflux.sim.kueue.admission.Admitter.cycle>`, an entry of the loop at that time after every other); each workload
it admits has its pods created then (a Job's; a pod group's PodGroup) or released from the gate, with the chosen
flavors' ``nodeLabels`` added to their ``nodeSelector`` and the flavors' ``tolerations`` to theirs; each one it
preempts has its pods deleted (``Preempted``: the losses count them), is held (:meth:`JobBook.requeue_held
<kubeflux.sim.jobbook.JobBook.requeue_held>`) and waits again (admitted again, it gets new pods, not gated). A job's
end releases its quota.

With Kueue's ``waitForPodsReady``, each admission is checked ``timeout`` later: a workload of which fewer pods
started (Running, or done) than it needs at once (a Job: ``parallelism``, at most the completions it lacks; a pod
group: all its pods) is evicted as a preempted one is, its pods deleted (``PodsReadyTimeout``), and queued again
after its back-off (:meth:`Admitter.time_out <kubeflux.sim.kueue.admission.Admitter.time_out>`), or deactivated.

An AppWrapper's components (:mod:`kubeflux.sim.workloads.appwrappers`) are one workload: held until all have
arrived, asking what all their pods ask, admitted, evicted and checked together, done (its quota released) once each
component has ended.

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
from kubeflux.sim.kueue.objects import ADMISSION_GATE, PODS, KueueObjects, ResourceFlavor
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
        """Workload ref (its first job's index) → that job."""
        self.members: dict[int, list[SimJob]] = {}
        """Workload ref → its jobs (one, or an AppWrapper's components)."""
        self.ref_of: dict[int, int] = {}
        """Job index → the ref of the workload it is part of."""
        self._wrapping: dict[str, list[SimJob]] = {}
        """AppWrapper → its components arrived so far (until they all have)."""
        self.asked: dict[int, WorkloadJob] = {}
        """Job index → the job as it arrived, before any flavor's node labels and tolerations: each admission
        dresses it anew for the flavors it is given (a job evicted and admitted on another flavor keeps none of the
        first one's)."""
        self.series = UsageSeries(objects)
        self._cycle_at: float | None = None
        cluster.book.on_finish = self._finished

    def arrive(self, wjob: WorkloadJob, submit_time: float) -> None:
        """``wjob`` (one that names a LocalQueue) arrives now: held as a Kueue workload, a lone pod's or a pod
        group's pods created gated (module docstring)."""
        book = self.cluster.book
        job = book.arrive(wjob, submit_time)
        if held_from_creation(job):
            book.create_held(job, ADMISSION_GATE)
        self.hold(job)

    def hold(self, job: SimJob) -> None:
        """``job``, arrived in the cluster's book, is held as a Kueue workload (unless rejected); an AppWrapper's
        component waits for the others (they arrive at the same time), then all are one workload."""
        wrapper = job.wjob.app_wrapper
        if wrapper is None:
            if not job.rejected_reason:
                self._hold([job], job.wjob.id)
            return
        parts = self._wrapping.setdefault(wrapper.key, [])
        parts.append(job)
        if len(parts) == wrapper.size:
            del self._wrapping[wrapper.key]
            self._hold(parts, wrapper.key)

    def _hold(self, members: list[SimJob], key: str) -> None:
        """``members`` (one job, or an AppWrapper's components) are one Kueue workload, named ``key``, held until
        admitted; a component rejected at its arrival rejects the others (the AppWrapper could never run whole)."""
        book = self.cluster.book
        bad = next((job for job in members if job.rejected_reason), None)
        if bad is not None:
            for job in members:
                if not job.rejected_reason:
                    book.refuse(job, f"job {job.wjob.id}: its AppWrapper {key}'s component {bad.wjob.id} is rejected")
            return
        first = members[0]
        ref = first.index
        self.jobs[ref] = first
        self.members[ref] = members
        for job in members:
            self.ref_of[job.index] = ref
            self.asked[job.index] = job.wjob
        templates = [job.wjob.pods[0] for job in members if job.wjob.pods]
        requests: dict[str, int] = {}
        for job in members:
            for resource, amount in requests_of(job.wjob).items():
                requests[resource] = requests.get(resource, 0) + amount
        head = templates[0] if templates else None
        workload = QueuedWorkload(
            key=key,
            ref=ref,
            namespace=first.wjob.namespace,
            queue=first.wjob.queue_name,
            priority=max((pod.priority for job in members for pod in job.wjob.pods), default=0),
            created=self.loop.now,
            requests=requests,
            node_selector=dict(head.node_selector) if head is not None else {},
            tolerations=head.tolerations if head is not None else (),
            node_affinity=head.required_node_affinity if head is not None else (),
            other_pods=tuple(
                (dict(pod.node_selector), pod.tolerations, pod.required_node_affinity) for pod in templates[1:]
            ),
        )
        queued = self.admitter.add(workload, self.loop.now)
        for job in members:
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
        evicted = False
        for decision in self.admitter.cycle(now):
            if isinstance(decision, Admitted):
                self._start(decision.workload)
                continue
            self._evict(decision.workload, decision.message)
            again = self.admitter.evicted(decision.workload.ref, now)  # its pods are gone
            if again is not None:
                self.loop.schedule(again, Priority.WAKEUP, self._requeue, decision.workload.ref)
                evicted = True
        self.series.sample(now, self.admitter)
        self.sink.cycled(self.admitter)
        if evicted:
            self._soon()  # the next cycle: the preemptors take the room their victims left

    def _start(self, workload: QueuedWorkload) -> None:
        """Create the admitted workload's objects now, its pods with the flavors' node labels and tolerations (an
        AppWrapper's components not done yet, each)."""
        assignment = workload.assignment
        flavors = self.admitter.objects.flavors
        chosen = [flavors[name] for name in dict.fromkeys(assignment.flavors.values())] if assignment else []
        book = self.cluster.book
        started: list[SimJob] = []
        needed = 0
        for job in self.members[workload.ref]:
            if job.finish is not None:
                continue  # an AppWrapper's component done before an eviction (not made again)
            asked = self.asked[job.index]
            wjob = dataclasses.replace(asked, pods=[_on_flavors(p, chosen) for p in asked.pods]) if chosen else asked
            if wjob is not job.wjob:
                job.wjob = wjob
                job.timings = job_timings(wjob, book.lifecycle, book.primary_scheduler)
            needed += (
                min(wjob.parallelism, wjob.completions - job.succeeded) if wjob.kind is JobKind.JOB else len(wjob.pods)
            )
            self.sink.admitted(job, workload)
            started.append(job)
        wait = self.admitter.objects.wait_for_pods_ready
        if wait is not None and needed > 0:
            loop = self.loop
            check = (workload, started, loop.now, needed)
            loop.schedule(loop.now + wait.timeout, Priority.WAKEUP, self._pods_ready_check, check)

    def _pods_ready_check(self, check: tuple[QueuedWorkload, list[SimJob], float, int]) -> None:
        """``waitForPodsReady.timeout`` after an admission: unless the workload ended, was evicted since, or has
        ``needed`` pods started in this admission, it is evicted, and queued again after its back-off."""
        workload, started, admitted, needed = check
        if all(job.finish is not None for job in started) or workload.admitted_at != admitted:
            return
        if workload.ref not in self.admitter.admitted:
            return
        if sum(1 for job in started for sp in job.attempt() if sp.running_at is not None) >= needed:
            return
        now = self.loop.now
        again = self.admitter.time_out(workload.ref, now)
        self._evict(workload, f"Exceeded the PodsReady timeout {workload.key}", PODS_READY_TIMEOUT)
        if again is not None:
            self.loop.schedule(again, Priority.WAKEUP, self._requeue, workload.ref)
        self.series.sample(now, self.admitter)
        self.sink.cycled(self.admitter)
        self._soon()

    def _requeue(self, ref: int) -> None:
        if self.admitter.requeue(ref):
            self._soon()

    def _evict(self, workload: QueuedWorkload, message: str, reason: str = PREEMPTED_REASON) -> None:
        """Suspend the evicted workload's jobs not done: their unfinished pods deleted (``reason``: ``Preempted``, or
        ``PodsReadyTimeout``), held until admitted again."""
        for job in self.members[workload.ref]:
            if job.finish is not None:
                continue
            job.held = True
            self.sink.evicted(job, workload, reason, message)
            self.cluster.book.requeue_held(job)

    def _finished(self, job: SimJob) -> None:
        """``job`` ended (its pods done, or failed, even while held): once every job of its workload has (an
        AppWrapper is done when all its components are), the workload leaves the admitter; its quota, if it held
        any, is released and a cycle runs."""
        ref = self.ref_of.get(job.index)
        if ref is None or any(member.finish is None for member in self.members[ref]):
            return
        admitted = ref in self.admitter.admitted
        self.admitter.forget(ref)
        workload = self.admitter.workloads.get(ref)
        if workload is not None:
            for member in self.members[ref]:
                self.sink.ended(member, workload)
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
            for job in self.members[ref]:
                row = record.jobs[job.index] if rows is None else rows[job.index]
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


def held_from_creation(job: SimJob) -> bool:
    """Whether Kueue holds ``job``'s pods by its scheduling gate from their creation: a lone pod's and a pod group's
    (the user creates them, Kueue's webhook gates them), unless rejected; not a Job's nor a trace job's (made when
    the Job is unsuspended) nor an AppWrapper's components' (made when the AppWrapper is admitted)."""
    wjob = job.wjob
    return not job.rejected_reason and wjob.kind in (JobKind.POD, JobKind.POD_GROUP) and wjob.app_wrapper is None


def _on_flavors(pod: PodTemplate, flavors: list[ResourceFlavor]) -> PodTemplate:
    """``pod`` with the flavors' node labels in its ``nodeSelector`` and their tolerations added."""
    selector = dict(pod.node_selector)
    tolerations = list(pod.tolerations)
    for flavor in flavors:
        for key, value in flavor.node_labels.items():
            selector.setdefault(key, value)
        tolerations.extend(t for t in flavor.tolerations if t not in tolerations)
    return dataclasses.replace(pod, node_selector=selector, tolerations=tuple(tolerations))


__all__ = ["KueueLayer", "held_from_creation", "requests_of"]
