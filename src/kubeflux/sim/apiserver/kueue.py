"""Kueue in the served cluster (``cluster serve --workload`` of a file with Kueue objects): the simulator's own
admission layer (:class:`~kubeflux.sim.kueue.layer.KueueLayer`, one model for ``simulate`` and ``cluster serve``)
whose decisions land on the API as the real Kueue v0.17 writes them (this module is the layer's
:class:`~kubeflux.sim.kueue.sink.KueueSink`).

* The ResourceFlavors, ClusterQueues and LocalQueues of the workload are created through the store before its first
  job (refused ones are the run's problems), and the layer is built from what the store then holds, so that the
  served objects are the ones admitting (:func:`served_objects`).
* A Job of a LocalQueue is created ``suspend: true`` (what Kueue's webhook makes of it), labelled with its queue; the
  pods of a pod group or a lone pod are created with Kueue's scheduling gate ``kueue.x-k8s.io/admission``, so that
  no scheduler places them (a trace job's, which stands for a batch Job, are made on admission, as a Job's are); a
  gang's PodGroup is made on admission, as ``simulate`` makes it (its creation time orders the gang in kubeflux's
  queue). Its ``kueue.x-k8s.io/v1beta1`` Workload is created beside it, owned by the Job (a pod group's or a lone
  pod's by nothing: the real Kueue keeps the pods it evicts with a finalizer, so that the Workload does not go with
  them), ``QuotaReserved=False`` with why it waits (``Pending``, or ``Inactive`` when its LocalQueue is missing).
* Admitted: the Workload gets ``status.admission`` (the ClusterQueue, each resource's flavor and usage) and
  ``QuotaReserved``/``Admitted`` true, with an Event; the Job's template gets the flavors' ``nodeLabels`` in its
  ``nodeSelector`` and their ``tolerations``, and is unsuspended (its pods are then made by the Job controller); a
  gated pod is dressed the same way and ungated; the pods of a pod group admitted again after an eviction are made
  anew (``<pod>-r<n>``), dressed and not gated.
* Evicted (preempted for quota, or ``waitForPodsReady``'s timeout): ``Evicted=True`` (reason ``Preempted`` or
  ``PodsReadyTimeout``), ``QuotaReserved``/``Admitted`` false, no ``status.admission``; its unfinished pods are
  deleted with that reason, a Job is suspended again with its own template back.
* Ended: ``Finished=True`` (``Succeeded`` or ``Failed``).
* Each cycle the ClusterQueues' and LocalQueues' ``pendingWorkloads`` and ``admittedWorkloads`` are written when they
  changed.

Jobs and pods that clients create through the API are not held (the served cluster runs no Kueue webhook): only the
replayed workload's go through Kueue.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from kubeflux.apiobjects.manifests import toleration_to_manifest
from kubeflux.scheduler.units import format_quantity
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.kubelet import SimulatedKubelet, record_event
from kubeflux.sim.apiserver.kueue_resources import KUEUE_GROUP, KUEUE_VERSION
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.store import Store, clone
from kubeflux.sim.clock import Callback
from kubeflux.sim.jobs import SimJob
from kubeflux.sim.kueue.admission import Admitter
from kubeflux.sim.kueue.layer import KueueLayer
from kubeflux.sim.kueue.objects import ADMISSION_GATE, API_VERSION, QUEUE_NAME_LABEL, KueueObjects, ResourceFlavor
from kubeflux.sim.kueue.reader import KueueReader
from kubeflux.sim.kueue.sink import Timeline, admitted_message
from kubeflux.sim.kueue.workload import QueuedWorkload
from kubeflux.sim.pods import TemplateTiming
from kubeflux.sim.workloads.model import JobKind

__all__ = ["ADMISSION_GATE", "KueueReplay", "ReplayHost", "kueue_resource", "served_objects"]

Object = dict[str, Any]
_COMPONENT = "kueue-admission"
_KINDS = (("resourceflavors", "ResourceFlavor"), ("clusterqueues", "ClusterQueue"), ("localqueues", "LocalQueue"))


class ReplayHost(Protocol):
    """What the served Kueue asks of the workload replay that runs it (:class:`~kubeflux.sim.apiserver.replay.
    WorkloadReplay`)."""

    store: Store
    kubelet: SimulatedKubelet
    jobs_resource: ResourceType
    pods_resource: ResourceType
    groups_resource: ResourceType

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None: ...

    def resume_job(self, job: SimJob) -> None:
        """A held Job was unsuspended: its controller makes its pods."""

    def suspended(self, job: SimJob) -> None:
        """A Job was suspended again: its status follows (its start time reset)."""

    def create_group(self, job: SimJob) -> bool:
        """Create the job's PodGroup now; False when refused."""

    def job_uid(self, job: SimJob) -> str: ...


class _Shifted:
    """The served cluster's event loop counted from the replay's start (the layer's times are the run's)."""

    def __init__(self, loop: Timeline, origin: float) -> None:
        self.loop, self.origin = loop, origin

    @property
    def now(self) -> float:
        return self.loop.now - self.origin

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        """At ``at`` (the run's time): counted from the loop's now, so that an entry for now is at its very time
        (``at + origin`` may round to another float than now when the origin is a wall time)."""
        now = self.loop.now
        delay = at - (now - self.origin)
        self.loop.schedule(now + delay if delay else now, priority, callback, payload)


def kueue_resource(store: Store, plural: str) -> ResourceType:
    """The served Kueue resource ``plural`` (:mod:`kubeflux.sim.apiserver.kueue_resources`)."""
    resource = store.registry.find(KUEUE_GROUP, KUEUE_VERSION, plural)
    assert resource is not None, plural
    return resource


def served_objects(store: Store, objects: KueueObjects, problems: list[str]) -> KueueObjects:
    """Create the workload's Kueue objects through ``store`` (a refusal is one of ``problems``; one that exists
    already is kept), then read every ResourceFlavor, ClusterQueue and LocalQueue the store holds: the objects the
    served Kueue admits with (the workload's ``waitForPodsReady``, fair sharing and namespaces' labels kept)."""
    for manifest in objects.manifests:
        resource = kueue_resource(store, next(p for p, kind in _KINDS if kind == manifest.get("kind")))
        namespace = (manifest.get("metadata") or {}).get("namespace") or "default" if resource.namespaced else ""
        try:
            store.create(resource, namespace, clone(manifest))
        except ApiError as exc:
            if exc.code != 409:
                problems.append(f"{manifest.get('kind')} {manifest['metadata'].get('name')}: {exc.message}")
    reader = KueueReader()
    for plural, kind in _KINDS:
        for obj in store.every_object(kueue_resource(store, plural).collection):
            reader.add("the served cluster", {"apiVersion": API_VERSION, "kind": kind, **obj})
    served = reader.objects
    served.wait_for_pods_ready, served.fair_sharing = objects.wait_for_pods_ready, objects.fair_sharing
    served.namespaces = objects.namespaces
    return served


class KueueReplay:
    """The served cluster's Kueue: a :class:`KueueLayer` over the replay's cluster, and its sink (module
    docstring)."""

    def __init__(self, host: ReplayHost, objects: KueueObjects, loop: Timeline, origin: float) -> None:
        self.host, self.store = host, host.store
        self.workloads_resource = kueue_resource(self.store, "workloads")
        self.cq_resource = kueue_resource(self.store, "clusterqueues")
        self.lq_resource = kueue_resource(self.store, "localqueues")
        self.layer = KueueLayer(objects, host.kubelet.cluster, self, _Shifted(loop, origin))
        self.names: dict[int, str] = {}
        """Job index → its Workload's name."""
        self.templates: dict[int, Object] = {}
        """Job index → its Job's pod template as created (what an eviction restores)."""
        self.admitted_refs: set[int] = set()
        self.grouped: set[int] = set()
        """Job indexes whose PodGroup was made (on their first admission)."""
        self.problems: list[str] = []
        """What the server refused of Kueue's writes (the run's problems)."""
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        """(kind, name) of each queue → (pending, admitted) last written."""
        self._write_queue_conditions(objects)

    # -- the replay's side ---------------------------------------------------------------------------------------
    def hold(self, job: SimJob) -> None:
        """``job``'s objects were created held (a suspended Job, gated pods): Kueue takes it (a Job's pod template
        as the server stored it is kept, for its evictions to restore)."""
        wjob = job.wjob
        if wjob.kind is JobKind.JOB:
            created = self.store.find(self.host.jobs_resource, wjob.namespace, wjob.name)
            if created is not None:
                self.templates[job.index] = clone(created["spec"]["template"])
        self.layer.hold(job)

    def dress(self, job: SimJob, spec: Object) -> None:
        """The spec of a pod about to be created for ``job``: gated while Kueue holds it, with the admitted flavors'
        node labels and tolerations once admitted."""
        if not job.wjob.queue_name:
            return
        if job.index not in self.admitted_refs:
            gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
            spec["schedulingGates"] = [*gates, {"name": ADMISSION_GATE}]
            return
        _put_on_flavors(spec, self._flavors(job))

    def _flavors(self, job: SimJob) -> list[ResourceFlavor]:
        """The flavors of ``job``'s admission, in their order (as the layer dresses its templates)."""
        workload = self.layer.admitter.workloads.get(job.index)
        assignment = workload.assignment if workload is not None else None
        flavors = self.layer.admitter.objects.flavors
        return [flavors[name] for name in dict.fromkeys(assignment.flavors.values())] if assignment else []

    def job_labels(self, job: SimJob) -> dict[str, str]:
        """The labels of a held Job's object (its queue, as Kueue's webhook defaults it when a LocalQueue
        ``default`` takes it)."""
        return {QUEUE_NAME_LABEL: job.wjob.queue_name} if job.wjob.queue_name else {}

    # -- the layer's sink ----------------------------------------------------------------------------------------
    def queued(self, job: SimJob, workload: QueuedWorkload) -> None:
        wjob = job.wjob
        kind = "job" if wjob.kind is JobKind.JOB else "pod" if len(wjob.pods) == 1 else "podgroup"
        uid = self.host.job_uid(job)
        digest = hashlib.sha1(f"{wjob.namespace}/{wjob.name}/{uid}".encode()).hexdigest()[:5]
        name = f"{kind}-{wjob.name}"[:247] + f"-{digest}"
        self.names[job.index] = name
        owners = []
        if wjob.kind is JobKind.JOB:
            owners = [{"apiVersion": "batch/v1", "kind": "Job", "name": wjob.name, "uid": uid, "controller": True}]
        first = wjob.pods[0]
        count = wjob.parallelism if wjob.kind is JobKind.JOB else len(wjob.pods)
        template = {"metadata": {"labels": dict(first.labels)}, "spec": clone((first.manifest or {}).get("spec") or {})}
        spec: Object = {
            "queueName": workload.queue,
            "podSets": [{"name": "main", "count": count, "template": template}],
            "priority": workload.priority,
            "active": True,
        }
        body = {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: workload.queue}, "ownerReferences": owners},
            "spec": spec,
        }
        try:
            self.store.create(self.workloads_resource, wjob.namespace, body, trusted=True)
        except ApiError:
            return
        pending = "Inactive" if not workload.cluster_queue else "Pending"
        self._status(job, workload, [_condition("QuotaReserved", False, pending, workload.why)])

    def admitted(self, job: SimJob, workload: QueuedWorkload) -> None:
        self.admitted_refs.add(job.index)
        message = f"Quota reserved in ClusterQueue {workload.cluster_queue}"
        conditions = [
            _condition("QuotaReserved", True, "QuotaReserved", message),
            _condition("Admitted", True, "Admitted", "The workload is admitted"),
        ]
        self._status(job, workload, conditions, admission=self._admission(workload), previously=True)
        self._event(job, "QuotaReserved", message)
        self._event(job, "Admitted", admitted_message(workload))
        job.held = False
        wjob = job.wjob
        if wjob.min_member > 0 and not self._group(job):
            return
        if wjob.kind is JobKind.JOB:
            self._resume(job)
            self.host.resume_job(job)
            return
        attempt = job.attempt()
        if attempt:
            for sp in attempt:
                self._ungate(sp.pod.namespace, sp.pod.name, self._flavors(job))
            return
        suffix = f"-r{job.retries}" if job.retries else ""
        for template, timing in zip(wjob.pods, job.timings, strict=True):
            self.host.create_pod(job, timing, template.name + suffix)

    def _group(self, job: SimJob) -> bool:
        """The admitted gang's PodGroup, made now as ``simulate`` makes it (its creation time orders the gang in a
        scheduler's queue): on its first admission, and made again on a pod group's next ones (new pods, a new
        group), kept by a Job's. False when the server refused it (the job is rejected)."""
        wjob = job.wjob
        if job.index in self.grouped and (wjob.kind is JobKind.JOB or not job.retries):
            return True
        if job.index in self.grouped:
            with contextlib.suppress(ApiError):
                self.store.delete(self.host.groups_resource, wjob.namespace, wjob.name)
        self.grouped.add(job.index)
        return self.host.create_group(job)

    def evicted(self, job: SimJob, workload: QueuedWorkload, reason: str, message: str) -> None:
        self.admitted_refs.discard(job.index)
        conditions = [
            _condition("Evicted", True, reason, message),
            _condition("QuotaReserved", False, "Pending", message),
            _condition("Admitted", False, "NoReservation", "The workload has no reservation"),
        ]
        if reason != "PodsReadyTimeout":  # Kueue's preemption reasons, told apart by the layer's message
            why = "InCohortReclamation" if message.endswith("reclamation within the cohort") else "InClusterQueue"
            conditions.append(_condition("Preempted", True, why, message))
        self._status(job, workload, conditions, admission=None)
        self._event(job, reason, message)
        for sp in list(job.attempt()):
            if not sp.pod.deleted:
                self.host.kubelet.delete_pod(sp.pod.key, reason)
        if job.wjob.kind is JobKind.JOB:
            self._suspend(job)

    def ended(self, job: SimJob, workload: QueuedWorkload) -> None:
        self.admitted_refs.discard(job.index)
        failed = bool(job.failed_reason or job.rejected_reason)
        reason, message = ("Failed", job.failed_reason or "failed") if failed else ("Succeeded", "finished")
        self._status(job, workload, [_condition("Finished", True, reason, message)])

    def cycled(self, admitter: Admitter) -> None:
        """Write each queue's counts that changed (pending: waiting in its ClusterQueue; admitted: holding quota)."""
        pending: dict[tuple[str, str], int] = {}
        admitted: dict[tuple[str, str], int] = {}
        for name, queue in admitter.pending.items():
            pending[("ClusterQueue", name)] = len(queue)
            for _, wl in queue:
                key = ("LocalQueue", f"{wl.namespace}/{wl.queue}")
                pending[key] = pending.get(key, 0) + 1
        for wl in admitter.admitted.values():
            for key in (("ClusterQueue", wl.cluster_queue), ("LocalQueue", f"{wl.namespace}/{wl.queue}")):
                admitted[key] = admitted.get(key, 0) + 1
        for key in {*pending, *admitted, *self._counts}:
            counts = (pending.get(key, 0), admitted.get(key, 0))
            if self._counts.get(key, (0, 0)) != counts or key not in self._counts:
                self._counts[key] = counts
                self._queue_status(key, {"pendingWorkloads": counts[0], "admittedWorkloads": counts[1]})

    # -- writing -------------------------------------------------------------------------------------------------
    def _admission(self, workload: QueuedWorkload) -> Object | None:
        assignment = workload.assignment
        if assignment is None:
            return None
        usage = {resource: format_quantity(resource, amount) for (_f, resource), amount in assignment.usage.items()}
        count = workload.requests.get("pods", 0)
        return {
            "clusterQueue": workload.cluster_queue,
            "podSetAssignments": [
                {"name": "main", "flavors": dict(assignment.flavors), "resourceUsage": usage, "count": count}
            ],
        }

    def _status(
        self,
        job: SimJob,
        workload: QueuedWorkload,
        conditions: list[Object],
        admission: Object | bool | None = False,
        previously: bool = False,
    ) -> None:
        """Set ``conditions`` (by type) on the job's Workload, and its ``status.admission`` (None: removed; False:
        kept). With ``previously`` (quota reserved again), a true ``Evicted`` or ``Preempted`` condition turns false,
        ``QuotaReserved``, its message ``Previously: …``, as Kueue's ``SetQuotaReservation`` writes it."""

        def change(status: Object) -> None:
            now = self.store.now()
            kept = [c for c in status.get("conditions") or () if c["type"] not in {c["type"] for c in conditions}]
            if previously:
                kept = [
                    _condition(c["type"], False, "QuotaReserved", f"Previously: {c.get('message', '')}")
                    | {"lastTransitionTime": now}
                    if c["type"] in ("Evicted", "Preempted") and c.get("status") == "True"
                    else c
                    for c in kept
                ]
            status["conditions"] = [*kept, *({**c, "lastTransitionTime": now} for c in conditions)]
            if admission is None:
                status.pop("admission", None)
            elif admission is not False:
                status["admission"] = admission

        self._write_status(self.workloads_resource, job.wjob.namespace, self.names.get(job.index, ""), change)

    def _queue_status(self, key: tuple[str, str], counts: Object) -> None:
        kind, name = key
        resource, namespace = (self.cq_resource, "") if kind == "ClusterQueue" else (self.lq_resource, "")
        if kind == "LocalQueue":
            namespace, name = name.split("/", 1)
        self._write_status(resource, namespace, name, lambda status: status.update(counts))

    def _write_queue_conditions(self, objects: KueueObjects) -> None:
        """Each queue's ``Active`` condition, as Kueue writes it once it has seen the queue."""
        inactive = self.layer.admitter.inactive_cqs
        for name in objects.cluster_queues:
            why = inactive.get(name)
            reason, message = ("Ready", "Can admit new workloads") if why is None else ("FlavorNotFound", why)
            self._active(self.cq_resource, "", name, _condition("Active", why is None, reason, message))
        for local in objects.local_queues.values():
            found = local.cluster_queue in objects.cluster_queues
            reason, message = (
                ("Ready", "Can submit new workloads to localQueue")
                if found
                else ("ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
            )
            self._active(self.lq_resource, local.namespace, local.name, _condition("Active", found, reason, message))

    def _active(self, resource: ResourceType, namespace: str, name: str, condition: Object) -> None:
        stamped = {**condition, "lastTransitionTime": self.store.now()}
        self._write_status(resource, namespace, name, lambda status: status.update(conditions=[stamped]))

    def _write_status(
        self, resource: ResourceType, namespace: str, name: str, change: Callable[[Object], None]
    ) -> None:
        try:
            current = self.store.get(resource, namespace, name)
        except ApiError:
            return
        status = clone(current.get("status") or {})
        change(status)
        if status == current.get("status"):
            return
        try:
            self.store.update(resource, namespace, name, {**current, "status": status}, "status", trusted=True)
        except ApiError:
            return

    def _event(self, job: SimJob, reason: str, message: str) -> None:
        name = self.names.get(job.index, "")
        found = self.store.find(self.workloads_resource, job.wjob.namespace, name)
        metadata = {"name": name, "uid": found["metadata"]["uid"] if found is not None else ""}
        involved = {"apiVersion": API_VERSION, "kind": "Workload", "metadata": metadata}
        record_event(self.store, job.wjob.namespace, involved, "Normal", reason, message, _COMPONENT)

    def _resume(self, job: SimJob) -> None:
        """Unsuspend ``job``'s Job with the flavors' node labels and tolerations on its template (one update, as
        Kueue's job reconciler makes it, which the server allows of a suspended Job not started)."""
        template = clone(self.templates[job.index])
        _put_on_flavors(template.setdefault("spec", {}), self._flavors(job))
        self._update_job(job, {"suspend": False, "template": template})

    def _suspend(self, job: SimJob) -> None:
        """Suspend ``job``'s Job; once its controller has reset its start time, give it its own template back."""
        self._update_job(job, {"suspend": True})
        self.host.suspended(job)
        self._update_job(job, {"template": clone(self.templates[job.index])})

    def _update_job(self, job: SimJob, changes: Object) -> None:
        wjob = job.wjob
        try:
            current = self.store.get(self.host.jobs_resource, wjob.namespace, wjob.name)
            spec = {**current["spec"], **changes}
            self.store.update(
                self.host.jobs_resource, wjob.namespace, wjob.name, {**current, "spec": spec}, trusted=True
            )
        except ApiError as exc:  # the Job deleted meanwhile (its end follows), or a change the server refuses
            if exc.code != 404:
                self.problems.append(f"kueue: Job {wjob.id}: {exc.message}")

    def _ungate(self, namespace: str, name: str, flavors: list[ResourceFlavor]) -> None:
        """Put the admitted flavors on the gated pod ``name``, then remove Kueue's gate (one update, as Kueue's pod
        reconciler does)."""
        try:
            current = self.store.get(self.host.pods_resource, namespace, name)
        except ApiError:
            return
        spec = clone(current["spec"])
        _put_on_flavors(spec, flavors)
        gates = [g for g in spec.get("schedulingGates") or () if g.get("name") != ADMISSION_GATE]
        if gates:
            spec["schedulingGates"] = gates
        else:
            spec.pop("schedulingGates", None)
        try:
            self.store.update(self.host.pods_resource, namespace, name, {**current, "spec": spec}, trusted=True)
        except ApiError:
            return


def _put_on_flavors(spec: Object, flavors: list[ResourceFlavor]) -> None:
    """``spec`` with the ``flavors``' node labels in its ``nodeSelector`` (a key it names already keeps its value)
    and their tolerations added, as Kueue injects them (and the layer dresses its templates)."""
    selector = dict(spec.get("nodeSelector") or {})
    tolerations = list(spec.get("tolerations") or ())
    for flavor in flavors:
        for key, value in flavor.node_labels.items():
            selector.setdefault(key, value)
        tolerations.extend(t for t in map(toleration_to_manifest, flavor.tolerations) if t not in tolerations)
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations


def _condition(kind: str, status: bool, reason: str, message: str) -> Object:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message}
