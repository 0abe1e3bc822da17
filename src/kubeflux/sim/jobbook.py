"""The simulated cluster's job book: the jobs submitted to it, their pods and pod groups, and the queue figures.

:class:`JobBook` is the part of :class:`kubeflux.sim.cluster.Cluster` that holds what the API server's store
holds: every job in submission order (a :class:`~kubeflux.sim.jobs.SimJob`, its index its place in
:attr:`JobBook.jobs`), the pods not deleted by key, the pod groups by key, and how many jobs wait (no pod bound
yet, not rejected) over time (:attr:`JobBook.queue_series`). A job arrives one way, :meth:`JobBook.arrive`
(rejected, or queued with its templates' timings and its coupling), for ``simulate`` and the served cluster's
workload replay alike; :meth:`JobBook.submit` then creates its objects (:meth:`JobBook.create_pod`: a pod made by
:meth:`JobBook.new_pod`, with its draws, and added by :meth:`JobBook.add_pod`), where the replay creates them through
the API. The book also takes jobs and pods made by the served cluster's clients (:meth:`JobBook.add_job`,
:meth:`JobBook.adopt_pod`), follows a job out of the queue (its first bind, its rejection, its end) and writes the
records (``jobs.csv``, ``pods.csv``).

A job without a controller of its own (a trace job, a PodGroup's bare pods, a lone pod) ends once all its pods have
ended (:meth:`JobBook.pods_ended`), except a trace job that lost a pod to preemption: as Slurm's
``PreemptMode=REQUEUE`` does, it is resubmitted whole (:meth:`JobBook.requeue`), with new pods, its submit time
kept. Bare pods are not: nothing would recreate them on a real cluster, so a PodGroup or a lone pod preempted ends
``COMPLETED_KILLED`` (a ``batch/v1`` Job's controller replaces its pods itself).

It runs no pod: the cluster binds, starts and ends them. It tells the observers of each object it creates
through the ``emit`` it is given (the cluster's), and reads the time from the cluster's loop.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kubeflux.scheduler.interface import EventKind
from kubeflux.scheduler.messages import PREEMPTED_REASON
from kubeflux.scheduler.objects import Node, Pod, PodGroup, PodPhase
from kubeflux.sim.claims import ClaimController
from kubeflux.sim.clock import EventLoop, Priority
from kubeflux.sim.fabric import Slowdown
from kubeflux.sim.jobcontroller import COMPLETION_INDEX, JobController
from kubeflux.sim.jobfields import check_job
from kubeflux.sim.jobs import SimJob, coupled_quorum, job_records, job_timings, pod_records
from kubeflux.sim.pods import Lifecycle, SimPod, TemplateTiming
from kubeflux.sim.records import JobRecord, PodRecord
from kubeflux.sim.resourceids import ResourceIds
from kubeflux.sim.workloads.model import JobKind, WorkloadJob

__all__ = ["JobBook"]

Emit = Callable[[EventKind, Pod | Node | PodGroup], None]
"""How the book tells the cluster's observers of an object it created: ``emit(kind, obj)``."""


class JobBook:
    """Jobs, pods and pod groups of one cluster, and its queue figures (see the module docstring).

    ``lifecycle`` draws each created pod's times (from one generator seeded by it, in creation order);
    ``primary_scheduler`` names the scheduler of a pod whose template names none; ``couple``: jobs of several
    pods compute together (:func:`~kubeflux.sim.jobs.coupled_quorum`)."""

    def __init__(
        self,
        loop: EventLoop,
        emit: Emit,
        ids: ResourceIds,
        lifecycle: Lifecycle,
        *,
        primary_scheduler: str,
        workload_name: str,
        couple: bool,
    ) -> None:
        self.loop, self._emit, self._ids, self.lifecycle = loop, emit, ids, lifecycle
        self.primary_scheduler, self.workload_name, self.couple = primary_scheduler, workload_name, couple
        self.jobs: list[SimJob] = []
        """Every job submitted or added, in that order (a job's index is its place here)."""
        self.pods: dict[str, SimPod] = {}
        """The pods not deleted, by ``namespace/name``."""
        self.groups: dict[str, PodGroup] = {}
        self.problems: list[str] = []
        """What was wrong with a job submitted (it is rejected, named here)."""
        self.claims: ClaimController | None = None
        """The cluster's ResourceClaims (:meth:`Cluster.use_claims`): a pod's template claims are made as it is
        added."""
        self.job_controller: JobController | None = None
        """Who makes a ``batch/v1`` Job's pods (the cluster sets it); None: a Job cannot be submitted."""
        self.slowdown: Slowdown | None = None
        """What notes the topology domains a coupled job spans when it begins computing, and stretches its run by
        them under a ``--topology-penalty`` (a simulation with topology levels sets it; :mod:`kubeflux.sim.fabric`);
        None: nothing does."""
        self.pending_jobs = 0
        """Jobs waiting: none of their pods bound yet, not rejected, not ended."""
        self.queue_series: list[tuple[float, int]] = []
        """(time, :attr:`pending_jobs`) at each change, one point per time."""
        self._rng = random.Random(lifecycle.seed)
        self.on_finish: Callable[[SimJob], None] | None = None
        """Told of every job that ends (an admission layer releases its quota)."""

    # -- submission --------------------------------------------------------------------------------------------
    def submit(self, wjob: WorkloadJob, submit_time: float | None = None) -> SimJob:
        """The job arrives (:meth:`arrive`), then its objects are created now: its PodGroup (when a gang), then its
        pods (a Job: the first wave).

        Raises ValueError naming the field when a field of the job is not of its type (:func:`check_job`)."""
        job = self.arrive(wjob, submit_time)
        if not job.rejected_reason:
            self.start(job)
        return job

    def start(self, job: SimJob) -> None:
        """Create the objects of ``job``, which arrived (:meth:`arrive`), now: its PodGroup (when a gang), then its
        pods (a Job: its controller's first wave). A job that was held and requeued (:meth:`requeue_held`) runs
        again: it leaves the hold and its new attempt's objects are made (:meth:`_resubmit`; a Job's controller
        starts it again).

        Raises ValueError for a Job in a cluster without the simulator's Job controller."""
        wjob = job.wjob
        job.held = False
        if wjob.kind is JobKind.JOB:
            if self.job_controller is None:
                raise ValueError(f"job {wjob.id}: a Job is submitted to a cluster without its Job controller")
            if wjob.min_member > 0 and not job.group_key:  # a Job started again keeps its PodGroup
                self._create_group(job, f"pg-{job.index}")
            self.job_controller.start(job)
            return
        if job.retries:
            self._resubmit(job)
            return
        if wjob.min_member > 0:
            self._create_group(job, f"pg-{job.index}")
        held = job.attempt()
        if held:
            self._release(held, job.timings)
            return
        for i, timing in enumerate(job.timings):
            self.create_pod(job, timing, wjob.pods[i].name)

    def create_held(self, job: SimJob, gate: str) -> None:
        """Create the pods of ``job`` (a lone pod's, a PodGroup's bare pods: not a Job's, whose controller makes
        them) now, each held by the scheduling gate ``gate``, as Kueue's webhook holds them from their creation:
        every scheduler sees them (their creation time is their place in its queue), their claims are made now
        (the resourceclaim controller makes a gated pod's), and their draws are made in creation order; no scheduler
        places them until :meth:`start` releases them. Its PodGroup is made by :meth:`start`."""
        for i, timing in enumerate(job.timings):
            self.create_pod(job, timing, job.wjob.pods[i].name, gates=(gate,))

    def _release(self, held: list[SimPod], timings: list[TemplateTiming]) -> None:
        """The pods :meth:`create_held` made lose their gate, with their templates' ``nodeSelector`` and tolerations
        as they are now (an admission layer's flavors put on them): MODIFIED, one update each, as Kueue ungates."""
        for sp, timing in zip(held, timings, strict=True):
            pod, template = sp.pod, timing.template
            if pod.deleted:
                continue
            pod.node_selector = dict(template.node_selector)
            pod.tolerations = template.tolerations
            pod.scheduling_gates = ()
            self._emit(EventKind.MODIFIED, pod)

    def requeue_held(self, job: SimJob) -> None:
        """``job`` is held (an admission layer suspended it; its pods deleted by the caller) and waits to be started
        again (:meth:`start`): a new attempt (:meth:`_new_attempt`; a Job keeps the completions it made, as a
        suspended Job does)."""
        self._new_attempt(job, keep_completions=job.wjob.kind is JobKind.JOB)

    def _create_group(self, job: SimJob, uid: str) -> None:
        """Create ``job``'s PodGroup now, of uid ``uid`` (ADDED)."""
        wjob = job.wjob
        group = PodGroup(wjob.namespace, wjob.name, wjob.min_member, wjob.schedule_timeout_seconds, self.loop.now, uid)
        job.group_key = group.key
        self.groups[group.key] = group
        self._emit(EventKind.ADDED, group)

    def arrive(self, wjob: WorkloadJob, submit_time: float | None = None) -> SimJob:
        """The job arrives now (its submit time ``submit_time``, by default now): it joins :attr:`jobs` and, unless
        it is rejected, waits in the queue with its templates' timings read (coupled, when the book couples, if its
        quorum is over 1: :func:`~kubeflux.sim.jobs.coupled_quorum`). Rejected (its ``rejected_reason`` says why)
        when the workload rejected it, when a field of its templates cannot be read (named in :attr:`problems`) or
        when it has no pods. Its objects are the caller's to create (:meth:`submit`; the served cluster's replay
        creates them through the API).

        Raises ValueError naming the field when a field of the job is not of its type (:func:`check_job`)."""
        check_job(wjob)
        now = self.loop.now
        job = SimJob(wjob, len(self.jobs), now if submit_time is None else submit_time)
        self.jobs.append(job)
        if wjob.rejected:
            job.reject(wjob.rejected, now)
            return job
        try:
            job.timings = job_timings(wjob, self.lifecycle, self.primary_scheduler)
            quorum = coupled_quorum(wjob)
        except ValueError as exc:
            self.problems.append(str(exc))
            job.reject(str(exc), now)
            return job
        if not wjob.pods:
            job.reject(f"job {wjob.id}: no pods", now)
            return job
        self._enqueue(job, quorum)
        return job

    def _enqueue(self, job: SimJob, quorum: int) -> None:
        """``job`` waits in the queue; coupled, when the book couples, if ``quorum`` > 1."""
        if self.couple and quorum > 1:
            job.coupled, job.start_quorum = True, quorum
        self.pending_jobs += 1
        self._sample_queue()

    def create_pod(
        self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None, gates: tuple[str, ...] = ()
    ) -> None:
        """Create one of ``job``'s pods from ``timing`` (its template's), named ``name``, Pending (an Indexed Job's
        with its completion ``index``; held by the scheduling ``gates`` named): :meth:`new_pod`, then
        :meth:`add_pod`. A name already taken rejects the
        job (:meth:`refuse`)."""
        wjob = job.wjob
        key = f"{wjob.namespace}/{name}"
        if key in self.pods:
            self.refuse(job, f"job {wjob.id}: pod {key} already exists")
            return
        self.add_pod(job, self.new_pod(job, timing, name, index, gates))

    def new_pod(
        self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None, gates: tuple[str, ...] = ()
    ) -> SimPod:
        """One of ``job``'s pods, made from ``timing`` and named ``name`` (an Indexed Job's with its completion
        ``index``; held by the scheduling ``gates`` named), Pending, with its random draws made (the book's
        generator, in creation order); not in the book until :meth:`add_pod`."""
        wjob = job.wjob
        now = self.loop.now
        t = timing.template
        labels, annotations = timing.labels, timing.annotations
        if index is not None:
            labels = {**labels, COMPLETION_INDEX: str(index)}
            annotations = {**annotations, COMPLETION_INDEX: str(index)}
        pod = Pod(
            namespace=wjob.namespace,
            name=name,
            uid=f"{job.index}-{job.created}",
            scheduler_name=timing.scheduler_name,
            priority=t.priority,
            preemption_policy=t.preemption_policy,
            creation_time=now,
            requests=t.requests,
            labels=labels,
            annotations=annotations,
            node_selector=t.node_selector,
            tolerations=t.tolerations,
            required_node_affinity=t.required_node_affinity,
            terms=t.terms,
            volume_claims=t.volume_claims,
            resource_claims=t.resource_claims,
            scheduling_gates=gates,
            phase=PodPhase.PENDING,
            active_deadline_seconds=t.active_deadline_seconds,
            owner=timing.owner,
            manifest=t.manifest,
        )
        sp = SimPod(pod=pod, job_index=job.index, timing=timing, now=now)
        sp.completion_index = index
        sp.draw(self.lifecycle, self._rng)
        return sp

    def add_pod(self, job: SimJob, sp: SimPod) -> None:
        """``sp`` (from :meth:`new_pod`, or :meth:`adopt_pod`'s) is one of ``job``'s pods now: counted in the job, in
        :attr:`pods` by its key, and ADDED for the observers."""
        job.created += 1
        job.active += 1
        job.pods.append(sp)
        self.pods[sp.pod.key] = sp
        if sp.pod.resource_claims and self.claims is not None:
            self.claims.pod_created(sp.pod)
        self._emit(EventKind.ADDED, sp.pod)

    def refuse(self, job: SimJob, message: str) -> None:
        """An object of ``job`` could not be created (a pod's name is taken; in the served cluster, the API
        refused it): named in :attr:`problems`, the job is REJECTED with ``message`` (it leaves the queue if it
        waited)."""
        self.problems.append(message)
        if not job.rejected_reason and job.first_bind is None:
            self._dequeue()
        job.reject(message, self.loop.now)

    # -- jobs and pods made elsewhere (the served cluster's API objects) ---------------------------------------
    def add_job(self, wjob: WorkloadJob, quorum: int = 0) -> SimJob:
        """A job whose pods are made elsewhere and join through :meth:`adopt_pod` (the served cluster's: a
        PodGroup's, a Job's or a lone pod's, read from the API); coupled, when the book couples, if ``quorum``
        > 1 (see :func:`~kubeflux.sim.jobs.coupled_quorum`). It is in :attr:`jobs` as a submitted job is."""
        job = SimJob(wjob, len(self.jobs), self.loop.now)
        self.jobs.append(job)
        self._enqueue(job, quorum)
        return job

    def adopt_pod(self, job: SimJob, pod: Pod, timing: TemplateTiming) -> SimPod:
        """``pod``, made elsewhere (its uid and fields read from the API), joins ``job`` Pending and unbound, with
        ``timing``'s stage times: the cluster's ``bind_pod`` then runs it as every pod runs. Its random draws are
        the caller's. Raises ValueError when a pod of its name is already here."""
        if pod.key in self.pods:
            raise ValueError(f"pod {pod.key} already exists")
        sp = SimPod(pod=pod, job_index=job.index, timing=timing, now=self.loop.now)
        self.add_pod(job, sp)
        return sp

    def begin(self, job: SimJob, now: float) -> list[SimPod]:
        """A coupled ``job`` begins computing at ``now``: the pods that waited for it, which compute from now (their
        run stretched by :attr:`slowdown` when the job spans several topology domains)."""
        job.start = now
        members, job.waiting = job.waiting, []
        if self.slowdown is not None:
            self.slowdown.begin(job, members)
        return members

    # -- a job leaves the queue --------------------------------------------------------------------------------
    def first_bind(self, job: SimJob, now: float) -> None:
        """``job``'s first pod was bound at ``now``: it leaves the queue (unless it was rejected, then
        reconsidered when the cluster grew: it runs after all)."""
        job.first_bind = now
        if job.rejected_reason:
            job.rejected_reason = ""
        else:
            self._dequeue()

    def reject(self, job: SimJob, message: str) -> None:
        """The scheduler says ``job`` can never run: it leaves the queue (once), REJECTED with ``message``."""
        if not job.rejected_reason:
            job.rejected_reason = message
            self._dequeue()

    def pods_ended(self, job: SimJob) -> None:
        """Every pod of ``job`` (one of no controller: a trace job, a PodGroup's pods, a lone pod) has ended: it ends
        (:meth:`finish_job`), unless it is a trace job of which a pod was preempted in a cluster whose book makes
        the pods (``simulate``'s; the served cluster's pods are the API's): it is then requeued (:meth:`requeue`).
        Told twice at one instant (a coupled job's peers end within its preempted pod's end), it acts once; a held
        job (suspended by an admission layer) waits to be started again."""
        if job.held or (job.retries and job.attempt_from == len(job.pods)):
            return  # requeued already: its new attempt's pods are on their way
        if (
            job.wjob.kind is JobKind.TRACE
            and self.job_controller is not None
            and any(sp.reason == PREEMPTED_REASON for sp in job.attempt())
        ):
            self.requeue(job)
        else:
            self.finish_job(job)

    def requeue(self, job: SimJob) -> None:
        """Resubmit a trace job whose pods all ended after one was preempted, whole, as Slurm's
        ``PreemptMode=REQUEUE`` does: a new attempt (:meth:`SimJob.requeued`: one more retry, its record's
        ``attempts``) waits in the queue again; its submit time stays, so its wait and turnaround count from its
        first submission. Its objects are new, made once this instant's ends are in (:meth:`_resubmit`)."""
        self._new_attempt(job)
        self.loop.schedule(self.loop.now, Priority.ARRIVAL, self._resubmit, job)

    def _new_attempt(self, job: SimJob, keep_completions: bool = False) -> None:
        """``job`` begins a new attempt (:meth:`SimJob.requeued`), in the queue again if a pod of its attempt was
        bound (it had left it); with ``keep_completions``, its count of succeeded pods stays."""
        succeeded = job.succeeded
        if job.first_bind is not None:
            self.pending_jobs += 1
            self._sample_queue()
        job.requeued()
        if keep_completions:
            job.succeeded = succeeded

    def _resubmit(self, job: SimJob) -> None:
        """A requeued job's new objects, created now: its PodGroup made again (DELETED, then ADDED: a new gang to
        every scheduler), then its pods, named ``<pod>-r<n>`` for its ``n``-th requeue."""
        wjob, suffix = job.wjob, f"-r{job.retries}"
        group = self.groups.pop(job.group_key, None) if job.group_key else None
        if group is not None:
            self._emit(EventKind.DELETED, group)
            self._create_group(job, f"pg-{job.index}{suffix}")
        for i, timing in enumerate(job.timings):
            self.create_pod(job, timing, wjob.pods[i].name + suffix)

    def finish_job(self, job: SimJob) -> None:
        """``job`` ended (all its pods, or its Job controller says so): it leaves the queue figures; its pod group,
        if any, is MODIFIED."""
        job.finish = self.loop.now
        if job.first_bind is None and not job.rejected_reason:
            self._dequeue()
        group = self.groups.get(job.group_key) if job.group_key else None
        if group is not None:
            self._emit(EventKind.MODIFIED, group)
        if self.on_finish is not None:
            self.on_finish(job)

    def _dequeue(self) -> None:
        self.pending_jobs -= 1
        self._sample_queue()

    def _sample_queue(self) -> None:
        series = self.queue_series
        now = self.loop.now
        if series and series[-1][0] == now:
            series[-1] = (now, self.pending_jobs)
        else:
            series.append((now, self.pending_jobs))

    # -- reading -----------------------------------------------------------------------------------------------
    def pod(self, key: str) -> SimPod:
        """The pod ``namespace/name``, including finished pods that were not deleted. Raises KeyError."""
        sp = self.pods.get(key)
        if sp is None:
            for job in self.jobs:
                for candidate in job.pods:
                    if candidate.pod.key == key:
                        return candidate
            raise KeyError(f"pods {key!r} not found")
        return sp

    def job_records(self) -> list[JobRecord]:
        """One :class:`JobRecord` per submitted job, in submission order."""
        return job_records(self.jobs, self.workload_name, self._ids.layout())

    def pod_records(self) -> list[PodRecord]:
        """One :class:`PodRecord` per pod created (``pods.csv``), per job in submission order."""
        return pod_records(self.jobs, self._ids.layout())
