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
the bind, which is the start when pods start at once).

There is one cluster model: the replay's jobs and pods are the served kubelet's
:class:`~kubeflux.sim.cluster.Cluster`'s (:attr:`SimulatedKubelet.cluster
<kubeflux.sim.apiserver.kubelet.SimulatedKubelet.cluster>`). A job arrives through the cluster's job book
(:meth:`JobBook.arrive <kubeflux.sim.jobbook.JobBook.arrive>`: rejected, or queued with its timings and coupling, as
``simulate``'s), each pod is made by the book (:meth:`JobBook.new_pod <kubeflux.sim.jobbook.JobBook.new_pod>`:
its draws), created through the API and handed to the kubelet (:meth:`SimulatedKubelet.add_pod
<kubeflux.sim.apiserver.kubelet.SimulatedKubelet.add_pod>`); the cluster binds, runs and ends it as the API's
Bindings and its own stages say, so a coupled job behaves as in ``simulate`` by construction, and the records
(jobs, pods, the utilisation and queue series) are the cluster's, as ``simulate``'s are, with times counted from
the replay's start. A pod the Job controller kills reaches the cluster with its reason before the API
(:meth:`SimulatedKubelet.delete_pod <kubeflux.sim.apiserver.kubelet.SimulatedKubelet.delete_pod>`), and the
controller hears of each pod's end from the cluster (:attr:`Cluster.after_pod_end
<kubeflux.sim.cluster.Cluster.after_pod_end>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.disruption import budget_to_manifest
from kubeflux.apiobjects.manifests import pod_to_manifest
from kubeflux.apiobjects.priority import PriorityClass
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, DisruptionBudget, Pod
from kubeflux.sim.apiserver.clock import Clock, VirtualClock, WallEvents
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Follower
from kubeflux.sim.apiserver.kubelet import SimulatedKubelet, record_event
from kubeflux.sim.apiserver.kueue import KueueReplay, served_objects
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
    exact_seconds,
    job_records,
    pod_records,
)
from kubeflux.sim.kueue.layer import held_from_creation
from kubeflux.sim.pods import SimPod, TemplateTiming
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.manifests import EXIT_CODE_ANNOTATION
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob
from kubeflux.sim.workloads.tenants import default_local_queues

__all__ = ["WorkloadReplay"]

Object = dict[str, Any]


CLUSTER_KIND_ORDER = (
    "StorageClass",
    "CSINode",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
)
"""The order :attr:`~kubeflux.sim.workloads.model.Workload.cluster_objects` are posted in (classes first)."""
NAMESPACED_CLUSTER_KINDS = frozenset({"PersistentVolumeClaim", "ResourceClaimTemplate", "ResourceClaim"})


class _Timeline:
    """The cluster's event loop as its Job controller sees it (``now``, ``schedule``): an entry set on it also
    sets the served clock's timer (:meth:`VirtualClock.arm`, :meth:`WallEvents.arm`)."""

    def __init__(self, time: VirtualClock | WallEvents) -> None:
        self.time, self.events = time, time.events

    @property
    def now(self) -> float:
        return self.events.now

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        self.events.schedule(at, priority, callback, payload)
        self.time.arm()


class WorkloadReplay:
    """Replays ``workload`` through ``store``, its pods run by ``kubelet``'s cluster; see the module docstring.

    ``primary`` is the ``schedulerName`` of pods whose template names none (the scheduler under test; the
    cluster's job book reads the templates with it); ``on_done`` is called once, when every job has ended or been
    rejected, or when :meth:`idle` says nothing is left to happen.
    """

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        workload: Workload,
        kubelet: SimulatedKubelet,
        *,
        primary: str = DEFAULT_SCHEDULER,
        on_done: Callable[[], None] | None = None,
    ) -> None:
        registry = store.registry
        pods, jobs = registry.find("", "v1", "pods"), registry.find("batch", "v1", "jobs")
        groups = registry.find("scheduling.x-k8s.io", "v1alpha1", "podgroups")
        classes = registry.find("scheduling.k8s.io", "v1", "priorityclasses")
        assert pods is not None and jobs is not None and groups is not None and classes is not None
        self.classes_resource = classes
        workload = default_local_queues(workload)  # Kueue's default LocalQueue takes a namespace's Jobs, as simulate's
        self.store, self.workload = store, workload
        self.pods_resource, self.jobs_resource, self.groups_resource = pods, jobs, groups
        self.kubelet = kubelet
        self.cluster = kubelet.cluster
        """The one cluster model: the replay's jobs and pods live in its job book."""
        self.cluster.book.primary_scheduler = primary
        self.on_done = on_done
        self.done = False
        kubelet.time.catch_up()
        self.origin = self.cluster.loop.now
        """The cluster's time at the replay's start (its first submission): the records count their times from it."""
        self.loop = _Timeline(kubelet.time)
        """The cluster's event loop, for the Job controller (its ``JobHost.loop``)."""
        self.jobs: list[SimJob] = []
        """The replay's jobs (in the cluster's book, among those of pods other clients create), in arrival order."""
        self._own: dict[int, SimJob] = {}
        """The replay's jobs by their index in the cluster's book."""
        self.problems: list[str] = list(workload.problems)
        self.stopped = ""
        """Why the run stopped before its work was done (a deadlock, the idle wake-up guard), as the simulator's."""
        self.job_controller = JobController.for_lifecycle(self, kubelet.lifecycle)
        self.cluster.after_pod_end = self._pod_ended
        self._job_uids: dict[int, str] = {}
        """Job index → uid of its ``batch/v1`` Job object."""
        self._by_uid: dict[str, SimJob] = {}
        """uid of a ``batch/v1`` Job object the replay created → its record."""
        self._jobs_follower = Follower(store, loop, [(jobs, self._job_event)])
        order = sorted(workload.jobs, key=lambda j: j.submit_time)  # stable: file order breaks ties
        self._first = order[0].submit_time if order else 0.0
        self._create_namespaces()
        self._create_cluster_objects()
        self._create_policies(clock, loop)
        self.kueue: KueueReplay | None = None
        """Kueue, when the workload has its objects (:mod:`kubeflux.sim.apiserver.kueue`)."""
        if workload.kueue:
            objects = served_objects(store, workload.kueue, self.problems)
            self.kueue = KueueReplay(self, objects, self.loop, self.origin)
        self._arrivals = len(order)
        for wjob in order:
            clock.call_later(loop, wjob.submit_time - self._first, Priority.ARRIVAL, self._arrive, wjob)
        if not order:
            loop.call_soon(self._check_done)

    def _create_namespaces(self) -> None:
        """The namespaces the workload's jobs and LocalQueues name, created before anything else when the served
        cluster has none of that name (``simulate`` needs none; a real cluster refuses objects in a namespace that
        does not exist, so a user creates them first)."""
        resource = self.store.registry.find("", "v1", "namespaces")
        assert resource is not None
        names = {wjob.namespace for wjob in self.workload.jobs}
        names.update(
            (obj.get("metadata") or {}).get("namespace") or "default"
            for obj in self.workload.cluster_objects
            if obj.get("kind") in NAMESPACED_CLUSTER_KINDS
        )
        if self.workload.kueue:
            names.update(local.namespace for local in self.workload.kueue.local_queues.values())
        for name in sorted(names):
            if self.store.get_object(resource.collection, "", name) is None:
                self._create_policy(resource, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def _create_cluster_objects(self) -> None:
        """The workload's storage and Dynamic Resource Allocation objects, posted before its first job (they are in
        the simulated cluster from the start): the classes before what names them (a claim naming no class gets the
        default one, as the simulator gives it); a refusal is a problem."""
        objects = sorted(self.workload.cluster_objects, key=lambda obj: CLUSTER_KIND_ORDER.index(obj["kind"]))
        for obj in objects:
            resource = self.store.registry.by_kind(obj["apiVersion"], obj["kind"])
            meta = obj.get("metadata") or {}
            namespace = (meta.get("namespace") or "default") if obj["kind"] in NAMESPACED_CLUSTER_KINDS else ""
            if resource is None:
                self.problems.append(f"{obj['kind']} {meta.get('name')}: not served by this cluster")
                continue
            self._create_policy(resource, namespace, obj)

    def _create_policies(self, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        """The workload's PriorityClasses and PodDisruptionBudgets, created before its first job (they are in the
        simulated cluster from the start), or at their times when the workload gives them (created, then deleted,
        before the arrivals of the same time, as ``simulate`` does): a class that exists already is kept, another
        refusal is a problem."""
        budgets = self.store.registry.find("policy", "v1", "poddisruptionbudgets")
        made: list[tuple[Any, str, PriorityClass | DisruptionBudget, Object]] = [
            (self.classes_resource, "", pc, pc.to_object()) for pc in self.workload.priority_classes
        ]
        if budgets is not None:
            made += [(budgets, b.namespace, b, budget_to_manifest(b)) for b in self.workload.budgets]
        for resource, namespace, obj, body in made:
            lifetime = self.workload.lifetime(obj).shifted(self._first)
            if lifetime.deleted is not None and lifetime.deleted <= 0.0:
                continue  # gone before the first job
            if lifetime.created <= 0.0:
                self._create_policy(resource, namespace, body)
            else:
                clock.call_later(loop, lifetime.created, Priority.NODE, self._create_policy, resource, namespace, body)
            if lifetime.deleted is not None:
                delay = lifetime.deleted
                clock.call_later(loop, delay, Priority.NODE, self._delete_policy, resource, namespace, body)

    def _create_policy(self, resource: Any, namespace: str, body: Object) -> None:
        try:
            self.store.create(resource, namespace, clone(body))
        except ApiError as exc:
            if exc.code != 409:
                self.problems.append(f"{body['kind']} {body['metadata']['name']}: {exc.message}")

    def _delete_policy(self, resource: Any, namespace: str, body: Object) -> None:
        try:
            self.store.delete(resource, namespace, body["metadata"]["name"])
        except ApiError as exc:
            if exc.code != 404:
                self.problems.append(f"{body['kind']} {body['metadata']['name']}: {exc.message}")

    @property
    def busy(self) -> bool:
        """Watch events of Jobs wait to be read (the virtual clock must not jump)."""
        return self._jobs_follower.busy

    def stop(self) -> None:
        self._jobs_follower.stop()
        if self.cluster.after_pod_end == self._pod_ended:
            self.cluster.after_pod_end = None

    # -- the JobHost interface (the simulator's Job controller acts through it) ---------------------------------
    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        """Create one of ``job``'s pods, named ``name`` (an Indexed Job's with its completion ``index``): made by the
        cluster's book (its draws), posted through the store, then in the cluster (a refusal rejects the job)."""
        wjob = job.wjob
        book = self.cluster.book
        sp = book.new_pod(job, timing, name, index)
        try:
            manifest = self._pod_manifest(job, sp, name)
            self._priority_class(manifest["spec"])
            created = self.store.create(self.pods_resource, wjob.namespace, manifest)
        except ApiError as exc:
            book.refuse(job, f"job {wjob.id}: pod {wjob.namespace}/{name}: {exc.message}")
            return
        sp.pod.uid = created["metadata"]["uid"]
        self.kubelet.add_pod(job, sp)

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        """Delete the pod ``key`` now: the cluster kills it with ``reason`` if it has not ended, then the API
        deletes it (:meth:`SimulatedKubelet.delete_pod`)."""
        self.kubelet.delete_pod(key, reason)

    def resume_job(self, job: SimJob) -> None:
        """Kueue unsuspended the held Job ``job``: its controller makes its pods."""
        self.job_controller.start(job)
        self._job_status(job)

    def suspended(self, job: SimJob) -> None:
        """Kueue suspended the Job ``job`` again: its status says so."""
        self._job_status(job)

    def job_uid(self, job: SimJob) -> str:
        return self._job_uids.get(job.index, "")

    def finish_job(self, job: SimJob) -> None:
        """``job`` ended: it leaves the queue figures; a ``batch/v1`` Job gets its final status."""
        self.cluster.book.finish_job(job)
        if job.wjob.kind is JobKind.JOB:
            self._job_status(job)
        self._check_done()

    def _pod_ended(self, job: SimJob) -> None:
        """A pod of the cluster ended (:attr:`Cluster.after_pod_end`): for one of the replay's ``batch/v1`` Jobs,
        the Job controller acts and the Job's status follows; the replay may be done once a job ended."""
        if self._own.get(job.index) is not job:
            return
        if job.finish is not None:
            if job.wjob.kind is not JobKind.JOB:
                self._check_done()
        elif job.wjob.kind is JobKind.JOB:
            self.job_controller.pod_ended(job)
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
        self._arrivals -= 1
        job = self.cluster.book.arrive(wjob, wjob.submit_time - self._first)
        self.jobs.append(job)
        self._own[job.index] = job
        if job.rejected_reason:
            self._check_done()
            return
        kueue = self.kueue if wjob.queue_name else None  # held: a suspended Job, gated pods (KueueReplay.dress)
        if wjob.min_member > 0 and kueue is None and not self.create_group(job):
            return  # (a held job's PodGroup is made on admission, as simulate makes it: KueueReplay.admitted)
        if wjob.kind is JobKind.JOB:
            if self._create_job(job):
                if kueue is not None:
                    kueue.hold(job)
                else:
                    self.resume_job(job)
        else:
            if kueue is None or held_from_creation(job):  # else made on admission (a trace job's, an AppWrapper's)
                for template, timing in zip(wjob.pods, job.timings, strict=True):
                    self.create_pod(job, timing, template.name)
            if kueue is not None and not job.rejected_reason:
                kueue.hold(job)
        if job.created == 0 and job.finish is None:
            self._check_done()

    def create_group(self, job: SimJob) -> bool:
        """Create ``job``'s PodGroup now; False when refused (the job is rejected)."""
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
        metadata: Object = {"name": wjob.name}
        if self.kueue is not None and wjob.queue_name:  # as Kueue's webhook leaves it: labelled, suspended
            metadata["labels"] = self.kueue.job_labels(job)
            spec["suspend"] = True
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}
        try:
            self._priority_class(pod_spec)
        except ApiError as exc:
            self.cluster.book.refuse(
                job, f"job {wjob.id}: PriorityClass of priority {pod_spec['priority']}: {exc.message}"
            )
            self._check_done()
            return False
        return self._create(job, self.jobs_resource, body)

    def _priority_class(self, spec: Object) -> None:
        """A pod spec that gives a ``priority`` and no class (a trace job's, a workload file's) names a class of
        that value instead, created on first use: the API server's Priority admission forbids a priority given
        without its class, as a real cluster's does. Raises ApiError when the class cannot be made (a value
        beyond 1,000,000,000, which only system classes have)."""
        priority = spec.get("priority")
        if not isinstance(priority, int) or spec.get("priorityClassName"):
            return
        name = f"kubeflux-priority-{priority}" if priority >= 0 else f"kubeflux-priority-minus-{-priority}"
        if self.store.get_object("scheduling.k8s.io/priorityclasses", "", name) is None:
            description = "Made by kubeflux's workload replay for the jobs of this priority."
            body = {"metadata": {"name": name}, "value": priority, "description": description}
            self.store.create(self.classes_resource, "", body)
        spec["priorityClassName"] = name
        del spec["priority"]

    def _create(self, job: SimJob, resource: Any, body: Object) -> bool:
        """Create a job's PodGroup or Job object; a refusal rejects the job (as a user's ``kubectl`` would fail)."""
        wjob = job.wjob
        try:
            created = self.store.create(resource, wjob.namespace, body)
        except ApiError as exc:
            self.cluster.book.refuse(job, f"job {wjob.id}: {body['kind']} {wjob.namespace}/{wjob.name}: {exc.message}")
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
        if self.kueue is not None:
            self.kueue.dress(job, spec)
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
        if job.held and job.finish is None:  # suspended by Kueue: its start time is reset, as the controller does
            status.pop("startTime", None)
        else:
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
            self.kubelet.time.catch_up()
            job.failed_reason = job.failed_reason or "Deleted"
            self.finish_job(job)

    def rejected(self, uid: str, message: str) -> None:
        """A scheduler in the process rejected the pod ``uid`` (it can never run): its job is REJECTED, as
        :meth:`kubeflux.sim.cluster.Cluster.reject` marks it."""
        sp = self.kubelet.pod_of(uid)
        if sp is not None and sp.bound_at is None:
            self.kubelet.time.catch_up()
            self.cluster.book.reject(self.cluster.jobs[sp.job_index], message)

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
                self.stopped = deadlock_problem(self.loop.now - self.origin, stuck)
                self.problems.append(self.stopped)
            self._finish()

    def stalled(self, points: int) -> None:
        """Virtual time stopped: ``points`` time points in a row held only scheduler wake-ups and bound no pod.
        The run ends there, as the simulator's does, and its problems say so."""
        waiting = sum(1 for sp in self.cluster.pods.values() if sp.bound_at is None and not sp.pod.deleted)
        self.stopped = livelock_problem(self.loop.now - self.origin, points, waiting)
        self.problems.append(self.stopped)
        self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            if self.on_done is not None:
                self.on_done()

    def run_record(self, label: str, wall_seconds: float) -> RunRecord:
        """The run as ``kubeflux simulate`` reports it: the cluster's records of the replay's jobs, times in seconds
        from the replay's start (the first submission)."""
        cluster, origin = self.cluster, self.origin
        layout = cluster.ids.layout()
        jobs = job_records(self.jobs, self.workload.name, layout)
        for job in jobs:
            job.starting_time = _since(job.starting_time, origin)
            job.finish_time = _since(job.finish_time, origin)
            job.first_bind_time = _since(job.first_bind_time, origin)
            job.last_bind_time = _since(job.last_bind_time, origin)
        pods = pod_records(self.jobs, layout)
        for pod in pods:
            pod.created_time -= origin
            pod.bind_time = _since(pod.bind_time, origin)
            pod.running_time = _since(pod.running_time, origin)
            pod.compute_time = _since(pod.compute_time, origin)
            pod.end_time = _since(pod.end_time, origin)
        usage = cluster.usage
        record = RunRecord(
            scheduler=label,
            workload_name=self.workload.name,
            jobs=jobs,
            total_cores=cluster.total_cores,
            wall_seconds=wall_seconds,
            pods_bound=cluster.pods_bound,
            events=cluster.events_emitted,
            utilization_series=[(at - origin, value) for at, value in usage.cores_series],
            queue_series=[(at - origin, value) for at, value in cluster.queue_series],
            problems=self.problems + cluster.problems + (self.kueue.problems if self.kueue is not None else []),
            pods=pods,
            resources=layout,
            idle_series=[(at - origin, value) for at, value in usage.idle_series],
            usage_series={
                kind: [(at - origin, allocated, useful) for at, allocated, useful in series]
                for kind, series in usage.series.items()
            },
            stopped=self.stopped,
        )
        if self.kueue is not None:  # the admission figures, each Kueue job's row found by its index in the book
            rows = {job.index: row for job, row in zip(self.jobs, record.jobs, strict=True)}
            self.kueue.layer.finish_record(record, rows)
        return record


def _since(at: float | None, origin: float) -> float | None:
    return None if at is None else at - origin


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
        terms=template.terms,
    )
    spec: Object = pod_to_manifest(pod)["spec"]
    return spec
