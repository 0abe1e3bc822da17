"""Workload replay on the served cluster (``cluster serve --workload FILE``): the simulator's workloads, created
through the store at their submit times, and the simulator's job records kept from what the API shows.

The workload is read, merged and fitted to the nodes by the simulator's own readers (``kubeflux simulate``'s
``--workload`` files, every format). Its first submission happens when the replay starts; a job submitted ``s``
seconds later is created ``s`` simulated seconds later (a timer of the served clock, in the simulator's tie order:
after the pod endings and stages of the same time). What a job creates, as in :class:`kubeflux.sim.cluster.Cluster`:
a ``scheduling.x-k8s.io`` PodGroup for a gang, then its pods; a ``batch/v1`` Job object whose pods the simulator's
Job controller (:class:`kubeflux.sim.jobcontroller.JobController`, through its :class:`JobHost` interface) creates,
replaces after back-off and deletes; every pod is a ``v1`` Pod posted through the store, as a client would.

A pod's random draws (KWOK's jitter) are the simulator's, made from the same seeded generator in the same order
(:meth:`SimPod.draw`), and written into the pod as plain KWOK annotations (``pod-ready``/``pod-complete`` delays,
``sim.kubeflux.io/exit-code``), so the simulated kubelet runs each pod exactly as the simulator would. A trace job
that outruns its requested time is killed at it, as Batsim does, through ``activeDeadlineSeconds`` (counted from
the bind, which is the start when pods start at once). The bookkeeping of what happened (binds, starts, endings,
the cores each pod took, the utilisation and queue series) is :class:`~kubeflux.sim.apiserver.replay_record.ReplayBook`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.manifests import pod_to_manifest
from kubeflux.scheduler.objects import Node, Pod
from kubeflux.sim.apiserver.clock import Clock
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Follower
from kubeflux.sim.apiserver.kubelet import record_event
from kubeflux.sim.apiserver.replay_record import ReplayBook
from kubeflux.sim.apiserver.store import Store, clone
from kubeflux.sim.apiserver.watch import WatchEvent
from kubeflux.sim.clock import Callback, Priority
from kubeflux.sim.driver import deadlock_problem, livelock_problem
from kubeflux.sim.jobcontroller import COMPLETION_INDEX, JobController, completed_indexes
from kubeflux.sim.jobs import (
    COMPLETE_DELAY,
    COMPLETE_JITTER,
    READY_DELAY,
    READY_JITTER,
    SimJob,
    coupled_quorum,
    exact_seconds,
    job_timings,
)
from kubeflux.sim.pods import Lifecycle, SimPod, TemplateTiming
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.manifests import EXIT_CODE_ANNOTATION
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob

__all__ = ["WorkloadReplay"]

Object = dict[str, Any]


class _Timeline:
    """The served clock as the simulator's Job controller sees an :class:`~kubeflux.sim.clock.EventLoop`: ``now``
    in seconds from the replay's start, and ``schedule``."""

    def __init__(self, clock: Clock, loop: asyncio.AbstractEventLoop, origin: float) -> None:
        self.clock, self.loop, self.origin = clock, loop, origin

    @property
    def now(self) -> float:
        return self.clock() - self.origin

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        self.clock.call_later(self.loop, at - self.now, Priority(priority), callback, payload)


class WorkloadReplay:
    """Replays ``workload`` (already fitted to ``nodes``) through ``store``; see the module docstring.

    ``primary`` is the ``schedulerName`` of pods whose template names none (the scheduler under test);
    ``on_done`` is called once, when every job has ended or been rejected, or when :meth:`idle` says nothing is
    left to happen.
    """

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        workload: Workload,
        nodes: list[Node],
        *,
        lifecycle: Lifecycle | None = None,
        primary: str = "default-scheduler",
        on_done: Callable[[], None] | None = None,
    ) -> None:
        registry = store.registry
        pods, jobs = registry.find("", "v1", "pods"), registry.find("batch", "v1", "jobs")
        groups = registry.find("scheduling.x-k8s.io", "v1alpha1", "podgroups")
        assert pods is not None and jobs is not None and groups is not None
        self.store, self.aio, self.clock, self.workload = store, loop, clock, workload
        self.pods_resource, self.jobs_resource, self.groups_resource = pods, jobs, groups
        self.lifecycle = lifecycle or Lifecycle()
        self.primary = primary
        self.on_done = on_done
        self.done = False
        self.origin = clock()
        self.loop = _Timeline(clock, loop, self.origin)
        """Simulated seconds from the replay's start, for the Job controller (its ``JobHost.loop``)."""
        self._rng = random.Random(self.lifecycle.seed)
        self.jobs: list[SimJob] = []
        self.problems: list[str] = list(workload.problems)
        self.stopped = ""
        """Why the run stopped before its work was done (a deadlock, the idle wake-up guard), as the simulator's."""
        self.job_controller = JobController(self)
        self._job_uids: dict[int, str] = {}
        """Job index → uid of its ``batch/v1`` Job object."""
        self.book = ReplayBook(store, loop, clock, nodes, self)
        self._by_uid: dict[str, SimJob] = {}
        """uid of a ``batch/v1`` Job object the replay created → its record."""
        self._jobs_follower = Follower(store, loop, [(jobs, self._job_event)])
        order = sorted(workload.jobs, key=lambda j: j.submit_time)  # stable: file order breaks ties
        self._first = order[0].submit_time if order else 0.0
        self._arrivals = len(order)
        for wjob in order:
            clock.call_later(loop, wjob.submit_time - self._first, Priority.ARRIVAL, self._arrive, wjob)
        if not order:
            loop.call_soon(self._check_done)

    @property
    def busy(self) -> bool:
        """Watch events of pods or Jobs wait to be read (the virtual clock must not jump)."""
        return self.book.busy or self._jobs_follower.busy

    def stop(self) -> None:
        self.book.stop()
        self._jobs_follower.stop()

    # -- the JobHost interface (the simulator's Job controller acts through it) ---------------------------------
    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        """Create one of ``job``'s pods, named ``name`` (an Indexed Job's with its completion ``index``), through
        the store."""
        wjob = job.wjob
        now = self.loop.now
        placeholder = Pod(wjob.namespace, name, "", timing.scheduler_name, creation_time=now)
        sp = SimPod(placeholder, job.index, timing, now)
        sp.completion_index = index
        sp.draw(self.lifecycle, self._rng)
        try:
            created = self.store.create(self.pods_resource, wjob.namespace, self._pod_manifest(job, sp, name))
        except ApiError as exc:
            message = f"job {wjob.id}: pod {wjob.namespace}/{name}: {exc.message}"
            self.problems.append(message)
            if not job.rejected_reason and job.first_bind is None:
                self.book.left_queue(job)
            job.reject(message, now)
            return
        job.created += 1
        job.active += 1
        job.pods.append(sp)
        self.book.track(created["metadata"]["uid"], sp)

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        """Delete the pod ``key`` at once; the book counts an unfinished one as killed with ``reason``."""
        namespace, name = key.split("/", 1)
        self.book.killing[key] = reason
        with contextlib.suppress(ApiError):
            self.store.delete(self.pods_resource, namespace, name, grace=0)

    def finish_job(self, job: SimJob) -> None:
        """``job`` ended: it leaves the queue figures; a ``batch/v1`` Job gets its final status."""
        job.finish = self.loop.now
        if job.first_bind is None and not job.rejected_reason:
            self.book.left_queue(job)
        if job.wjob.kind is JobKind.JOB:
            self._job_status(job)
        self._check_done()

    def job_pod_ended(self, job: SimJob) -> None:
        """One of a ``batch/v1`` Job's pods ended (its counters are updated): the Job controller acts, and the
        Job's status follows."""
        self.job_controller.pod_ended(job)
        if job.finish is None:
            self._job_status(job)

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        namespace, name = obj.split("/", 1) if "/" in obj else ("default", obj)
        involved = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "uid": self._uid_of(namespace, name)},
        }
        record_event(self.store, namespace, involved, type_, reason, message, "job-controller")

    # -- arrivals ------------------------------------------------------------------------------------------------
    def _arrive(self, wjob: WorkloadJob) -> None:
        now = self.loop.now
        job = SimJob(wjob, len(self.jobs), wjob.submit_time - self._first)
        self.jobs.append(job)
        self._arrivals -= 1
        if wjob.rejected or not wjob.pods:
            job.reject(wjob.rejected or f"job {wjob.id}: no pods", now)
            self._check_done()
            return
        try:
            job.timings = job_timings(wjob, self.lifecycle, self.primary)
            quorum = coupled_quorum(wjob)
        except ValueError as exc:
            self.problems.append(str(exc))
            job.reject(str(exc), now)
            self._check_done()
            return
        if quorum > 1:  # the served kubelet couples its pods (see kubeflux.sim.apiserver.kubelet)
            job.coupled, job.start_quorum = True, quorum
        self.book.entered_queue()
        if wjob.min_member > 0 and not self._create_group(job):
            return
        if wjob.kind is JobKind.JOB:
            if self._create_job(job):
                self.job_controller.start(job)
                self._job_status(job)
        else:
            for template, timing in zip(wjob.pods, job.timings, strict=True):
                self.create_pod(job, timing, template.name)
        if job.created == 0 and job.finish is None:
            self._check_done()

    def _create_group(self, job: SimJob) -> bool:
        wjob = job.wjob
        spec: Object = {"minMember": wjob.min_member}
        if wjob.schedule_timeout_seconds is not None:
            spec["scheduleTimeoutSeconds"] = math.ceil(wjob.schedule_timeout_seconds)
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup"}
        return self._create(job, self.groups_resource, {**body, "metadata": {"name": wjob.name}, "spec": spec})

    def _create_job(self, job: SimJob) -> bool:
        wjob = job.wjob
        template = wjob.pods[0]
        if template.manifest:
            pod_spec = clone(template.manifest["spec"])
        else:  # a synthetic Job (the seeds' presets): its failed pods are replaced, as restartPolicy Never says
            pod_spec = {**_spec_of(template.name, job.timings[0]), "restartPolicy": "Never"}
        spec: Object = {
            "parallelism": wjob.parallelism,
            "completions": wjob.completions,
            "backoffLimit": wjob.backoff_limit,
            "template": {"metadata": {"labels": dict(template.labels)}, "spec": pod_spec},
        }
        if wjob.active_deadline_seconds is not None:
            spec["activeDeadlineSeconds"] = math.ceil(wjob.active_deadline_seconds)
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": wjob.name}, "spec": spec}
        return self._create(job, self.jobs_resource, body)

    def _create(self, job: SimJob, resource: Any, body: Object) -> bool:
        """Create a job's PodGroup or Job object; a refusal rejects the job (as a user's ``kubectl`` would fail)."""
        wjob = job.wjob
        try:
            created = self.store.create(resource, wjob.namespace, body)
        except ApiError as exc:
            message = f"job {wjob.id}: {body['kind']} {wjob.namespace}/{wjob.name}: {exc.message}"
            self.problems.append(message)
            self.book.left_queue(job)
            job.reject(message, self.loop.now)
            self._check_done()
            return False
        if body["kind"] == "Job":
            self._job_uids[job.index] = created["metadata"]["uid"]
            self._by_uid[created["metadata"]["uid"]] = job
        return True

    def _pod_manifest(self, job: SimJob, sp: SimPod, name: str) -> Object:
        """The Pod as the simulator would create it, with its drawn times written as KWOK annotations."""
        timing, wjob = sp.timing, job.wjob
        template = timing.template
        annotations = {
            k: v
            for k, v in timing.annotations.items()
            if k not in (READY_DELAY, READY_JITTER, COMPLETE_DELAY, COMPLETE_JITTER, EXIT_CODE_ANNOTATION)
        }
        if sp.start_delay > 0:
            annotations[READY_DELAY] = _duration(sp.start_delay)
        if sp.run_time is not None:
            annotations[COMPLETE_DELAY] = _duration(sp.run_time)
        if sp.exit_code:
            annotations[EXIT_CODE_ANNOTATION] = str(sp.exit_code)
        spec = clone(template.manifest["spec"]) if template.manifest else _spec_of(name, timing)
        spec["schedulerName"] = timing.scheduler_name
        spec.pop("nodeName", None)
        walltime = timing.walltime_kill
        if walltime is not None and (sp.run_time is None or sp.run_time > walltime):
            spec["activeDeadlineSeconds"] = max(1, math.ceil(walltime))
        labels = dict(timing.labels)
        if sp.completion_index is not None:  # as the Job controller writes it; the pod's hostname is job-index
            labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(sp.completion_index)
            spec["hostname"] = f"{wjob.name}-{sp.completion_index}"
        metadata: Object = {"name": name, "labels": labels, "annotations": annotations}
        job_uid = self._job_uids.get(job.index)
        if job_uid is not None:
            labels.update({"batch.kubernetes.io/controller-uid": job_uid, "controller-uid": job_uid})
            labels["job-name"] = wjob.name
            owner = {"apiVersion": "batch/v1", "kind": "Job", "name": wjob.name, "uid": job_uid}
            metadata["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}

    def _job_status(self, job: SimJob) -> None:
        """The Job's status as kube-controller-manager writes it: counts, ``startTime``, and once it has ended the
        ``SuccessCriteriaMet`` + ``Complete`` or ``FailureTarget`` + ``Failed`` conditions (with the reason)."""
        wjob = job.wjob
        try:
            current = self.store.get(self.jobs_resource, wjob.namespace, wjob.name)
        except ApiError:
            return
        now = self.store.now()
        status: Object = {**(current.get("status") or {}), "active": job.active}
        status.setdefault("startTime", now)
        status.update(succeeded=job.succeeded, failed=job.failed, terminating=0)
        if wjob.indexed:
            status["completedIndexes"] = completed_indexes(job.indexes_done)
        status["ready"] = sum(1 for sp in job.pods if sp.running_at is not None and sp.finished_at is None)
        if job.finish is not None:
            complete = job.succeeded >= wjob.completions and not job.failed_reason
            reason = "CompletionsReached" if complete else (job.failed_reason or "BackoffLimitExceeded")
            first, last = ("SuccessCriteriaMet", "Complete") if complete else ("FailureTarget", "Failed")
            status["conditions"] = [
                {"type": kind, "status": "True", "reason": reason, "lastProbeTime": now, "lastTransitionTime": now}
                for kind in (first, last)
            ]
            status["active"] = 0
            if complete:
                status["completionTime"] = now
        if status == current.get("status"):
            return
        with contextlib.suppress(ApiError):
            self.store.update(
                self.jobs_resource, wjob.namespace, wjob.name, {**current, "status": status}, "status", trusted=True
            )

    # -- the replay's Job objects -------------------------------------------------------------------------------
    def owns_job(self, uid: str) -> bool:
        """The Job ``uid`` is one the replay created (its Job controller runs it; the served cluster's runs the
        Jobs clients create)."""
        return uid in self._by_uid

    def _job_event(self, type_: str, event: WatchEvent) -> None:
        job = self._by_uid.get(event.obj["metadata"]["uid"])
        if type_ == "DELETED" and job is not None and job.finish is None:
            job.failed_reason = job.failed_reason or "Deleted"
            self.finish_job(job)

    def _uid_of(self, namespace: str, name: str) -> str:
        try:
            return str(self.store.get(self.jobs_resource, namespace, name)["metadata"]["uid"])
        except ApiError:
            return ""

    # -- the end -------------------------------------------------------------------------------------------------
    def _check_done(self) -> None:
        if self.done or self._arrivals:
            return
        if all(job.finish is not None or job.rejected_reason for job in self.jobs):
            self._finish()

    def idle(self) -> None:
        """Nothing is left to happen (the virtual clock has no timer left and the cluster is quiescent). Coupled
        jobs that still hold resources idle then wait for ever: a deadlock, said as the simulator says it."""
        if not self._arrivals:
            stuck = [job for job in self.jobs if job.waiting]
            if stuck and not self.done:
                self.stopped = deadlock_problem(self.loop.now, stuck)
                self.problems.append(self.stopped)
            self._finish()

    def stalled(self, points: int) -> None:
        """Virtual time stopped: ``points`` time points in a row held only scheduler wake-ups and bound no pod.
        The run ends there, as the simulator's does, and its problems say so."""
        waiting = sum(1 for sp in self.book.pods.values() if sp.bound_at is None and not sp.pod.deleted)
        self.stopped = livelock_problem(self.loop.now, points, waiting)
        self.problems.append(self.stopped)
        self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            if self.on_done is not None:
                self.on_done()

    def run_record(self, label: str, wall_seconds: float) -> RunRecord:
        """The run as ``kubeflux simulate`` reports it (times in seconds from the first submission)."""
        return self.book.run_record(label, self.workload.name, wall_seconds, self.problems, self.stopped)


def _duration(seconds: float) -> str:
    """Seconds as a Go duration that reads back to the same float (``"90s"``, ``"734.2837462934s"``)."""
    text = exact_seconds(seconds)
    return f"{text}s" if "e" not in text else f"{seconds:.9f}s"


def _spec_of(name: str, timing: TemplateTiming) -> Object:
    """The spec of a pod made from a template without a manifest (a trace job's): one container with its
    requests and constraints, as :func:`pod_to_manifest` writes it."""
    template = timing.template
    pod = Pod(
        "default",
        name,
        "",
        timing.scheduler_name,
        template.priority,
        requests=dict(template.requests),
        node_selector=dict(template.node_selector),
        tolerations=template.tolerations,
        required_node_affinity=template.required_node_affinity,
        active_deadline_seconds=template.active_deadline_seconds,
    )
    spec: Object = pod_to_manifest(pod)["spec"]
    return spec
