"""The simulated kubelet of the served cluster: bound pods go Pending → Running → Succeeded/Failed.

It reuses the simulator's pieces rather than its own copy of them: a pod's stage timing is read by the manifest
reader and :func:`kubeflux.sim.jobs.timing_of` (KWOK's ``pod-ready`` and ``pod-complete`` stage annotations, the
``sim.kubeflux.io/exit-code`` annotation, ``activeDeadlineSeconds``), the pod is a :class:`~kubeflux.sim.pods.SimPod`,
and its status (conditions, container state, ``startTime``) is :func:`kubeflux.sim.podstatus.pod_status`, written
through the ``pods/status`` subresource as a kubelet writes it. Stages, as in :mod:`kubeflux.sim.cluster`:

* bound → ``Running`` after the start delay (``pod-ready`` delay, uniform up to its ``jitter-delay``);
* ``Running`` → ``Succeeded`` (exit code 0) or ``Failed`` (non-zero) after the run time (``pod-complete`` delay,
  with its jitter); without one, a Job's pod completes as soon as it runs (KWOK's ``pod-complete`` stage for Job
  pods, which waits 1 s plus up to 5 s of jitter on a real KWOK; the simulator's Job pods, which take no time) and
  any other pod runs until deleted;
* ``activeDeadlineSeconds`` after the bind: ``Failed``, reason ``DeadlineExceeded``, exit code 137;
* times are the served clock's (:mod:`kubeflux.sim.apiserver.clock`: wall, accelerated or virtual), and so are the
  stage timers, in the simulator's tie order (endings and deadlines before stages); a pod without a start delay
  is Running at once, as in the simulator;
* a Terminating pod (graceful delete) is confirmed at once: its containers stop and the kubelet deletes it with
  grace 0, as KWOK's ``pod-delete`` stage does;
* with ``couple`` (a workload replay), the pods of a coupled job compute together as in the simulator
  (:func:`kubeflux.sim.jobs.coupled_quorum`): a pod of a PodGroup of ``minMember`` > 1 (at most its Job's
  ``parallelism`` when a Job owns it), or of a Job whose template says ``sim.kubeflux.io/coupled: "true"``
  (``parallelism``), that runs before the last required one holds its node idle, and all run their run time from
  the last one's Running. Unlike the simulator, a failed pod does not end the others, and a walltime is the pod's
  ``activeDeadlineSeconds`` (from its bind).

Only pods bound to a node the store knows are taken; a pod whose annotations cannot be read stays Pending and
gets a Warning event naming the field. Each node's kubelet also renews its Lease in ``kube-node-lease`` every
``heartbeat_seconds`` (simulated; 40 s lease, as the kubelet's defaults), creating it first, and every
:data:`NODE_STATUS_SECONDS` writes its node status heartbeat (the ``Ready`` condition's ``lastHeartbeatTime``), as
a kubelet reports an unchanged node status. In virtual time a heartbeat never makes time jump: both are written at
the time points the clock lands on, once their period has passed, leases at most once a wall second and node
status at most once every 10 wall seconds (a run of thousands of time points would otherwise spend much of its
time on heartbeats); after a long jump a lease may
look older than its 40 s until the next renewal (nothing in the served cluster reads node leases). Node conditions
other than a ready node's heartbeat, and failure injection, are not here yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubeflux.apiobjects.manifests import ManifestError, format_timestamp, parse_timestamp, pod_from_manifest
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Pod, PodPhase
from kubeflux.sim.apiserver.clock import Clock, ServedClock, Timer, VirtualClock
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import Watcher
from kubeflux.sim.clock import Priority
from kubeflux.sim.jobs import COUPLED_ANNOTATION, timing_of
from kubeflux.sim.pods import Lifecycle, SimPod
from kubeflux.sim.podstatus import pod_status
from kubeflux.sim.workloads.manifests import _template
from kubeflux.sim.workloads.model import JobKind, WorkloadJob

__all__ = ["SimulatedKubelet", "record_event"]

Object = dict[str, Any]
_NODE_LEASES = "kube-node-lease"
NODE_STATUS_SECONDS = 300.0
"""How often a node's status heartbeat is written when nothing changed (the kubelet's
``nodeStatusReportFrequency``)."""


@functools.lru_cache(maxsize=4096)
def _stamp(seconds: int) -> str:
    return format_timestamp(float(seconds))


def _rfc3339(status: Object) -> Object:
    """``pod_status`` gives times as float seconds in a status it built afresh: the API writes RFC 3339, so its
    time fields (``startTime``, the conditions' ``lastTransitionTime``, the container state's ``startedAt`` and
    ``finishedAt``) are rewritten in place."""
    if "startTime" in status:
        status["startTime"] = _stamp(int(status["startTime"]))
    for condition in status.get("conditions", ()):
        if isinstance(condition.get("lastTransitionTime"), float | int):
            condition["lastTransitionTime"] = _stamp(int(condition["lastTransitionTime"]))
    for container in status.get("containerStatuses", ()):
        for state in container["state"].values():
            for key in ("startedAt", "finishedAt"):
                if isinstance(state.get(key), float | int):
                    state[key] = _stamp(int(state[key]))
    return status


def record_event(
    store: Store, namespace: str, involved: Object, type_: str, reason: str, message: str, component: str
) -> None:
    """A core/v1 Event about ``involved`` (a pod), as kube-scheduler or a kubelet records one."""
    events = store.registry.find("", "v1", "events")
    if events is None:
        return
    meta = involved.get("metadata", {})
    now = store.now()
    body = {
        "metadata": {"generateName": f"{meta.get('name', 'object')}."},
        "involvedObject": {
            "kind": involved.get("kind", "Pod"),
            "apiVersion": involved.get("apiVersion", "v1"),
            "namespace": namespace,
            "name": meta.get("name", ""),
            "uid": meta.get("uid", ""),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        store.create(events, namespace, body, trusted=True)
    except ApiError:
        return


@dataclass(slots=True, eq=False)
class _Life:
    """One bound pod the kubelet runs."""

    sim: SimPod
    namespace: str
    name: str
    timers: list[Timer] = field(default_factory=list)
    group: _Group | None = None
    """Its coupled job's pods, when it must compute with them."""

    def cancel(self) -> None:
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()


@dataclass(slots=True, eq=False)
class _Group:
    """The pods of one coupled job on the kubelets: those that wait, until ``quorum`` run; then it computes."""

    quorum: int
    waiting: list[_Life] = field(default_factory=list)
    computing: bool = False


class SimulatedKubelet:
    """Every node's kubelet: follows the pods collection of ``store`` on ``loop`` (the server's loop)."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        lifecycle: Lifecycle | None = None,
        clock: Clock | None = None,
        heartbeat_seconds: float = 10.0,
        couple: bool = False,
    ) -> None:
        pods = store.registry.find("", "v1", "pods")
        nodes = store.registry.find("", "v1", "nodes")
        assert pods is not None and nodes is not None
        self.store, self.loop, self.pods, self.nodes = store, loop, pods, nodes
        self.lifecycle = lifecycle or Lifecycle()
        self.clock: Clock = clock or ServedClock()
        """Sets the stage timers (simulated seconds); the store's clock gives the time."""
        self._random = random.Random(self.lifecycle.seed)
        self.couple = couple
        self._groups: dict[str, _Group] = {}
        self.lives: dict[str, _Life] = {}
        """uid → the life of a bound pod being run."""
        self.known_pod: Callable[[Object, Object | None], Pod | None] | None = None
        """Asked for a reading of a pod (its version, the previous one) before its manifest is read: the in-process
        schedulers' (:meth:`InProcessSchedulers.known_pod`) when they run."""
        self._watcher = Watcher(pods, "", LabelSelector(), FieldSelector(), backlog=10**9)
        self._watcher.wake = self._wake
        self._draining = False
        store.collections[pods.collection].watchers.add(self._watcher)
        for obj in list(store.objects(pods)):
            self._handle("ADDED", obj)
        self.leases = store.registry.find("coordination.k8s.io", "v1", "leases")
        self.heartbeat_seconds = heartbeat_seconds
        self._heartbeat: Timer | None = None
        self._last_beat = self._last_wall_beat = -math.inf
        self._last_node_status = self.store.clock()  # registered just now, with a fresh heartbeat
        self._last_wall_node_status = time.monotonic()
        if self.leases is not None and heartbeat_seconds > 0:
            if isinstance(self.clock, VirtualClock):  # heartbeats ride on the clock's jumps, never cause one
                self.clock.jumped.append(self._beat_if_due)
            self._beat()

    @property
    def busy(self) -> bool:
        """Watch events are waiting to be handled (the virtual clock must not jump)."""
        return self._draining or bool(self._watcher.pending)

    def stop(self) -> None:
        if isinstance(self.clock, VirtualClock) and self._beat_if_due in self.clock.jumped:
            self.clock.jumped.remove(self._beat_if_due)
        self.store.stop_watch(self.pods, self._watcher)
        for life in self.lives.values():
            life.cancel()
        if self._heartbeat is not None:
            self._heartbeat.cancel()

    def _beat(self) -> None:
        """Renew every node's Lease (create it the first time), then again in ``heartbeat_seconds``."""
        assert self.leases is not None
        self._last_beat = self.store.clock()
        renewed = _micro_time(self._last_beat)
        for node in list(self.store.objects(self.nodes)):
            meta = node["metadata"]
            spec = {"holderIdentity": meta["name"], "leaseDurationSeconds": 40, "renewTime": renewed}
            try:
                lease = self.store.get(self.leases, _NODE_LEASES, meta["name"])
            except ApiError:
                owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
                body = {"metadata": {"name": meta["name"], "ownerReferences": [owner]}, "spec": spec}
                with contextlib.suppress(ApiError):
                    self.store.create(self.leases, _NODE_LEASES, body, trusted=True)
                continue
            updated = {**lease, "spec": {**lease.get("spec", {}), **spec}}
            with contextlib.suppress(ApiError):
                self.store.update(self.leases, _NODE_LEASES, meta["name"], updated, trusted=True)
        wall = time.monotonic()
        virtual = isinstance(self.clock, VirtualClock)
        if self._last_beat - self._last_node_status >= NODE_STATUS_SECONDS and (
            not virtual or wall - self._last_wall_node_status >= 10.0
        ):
            self._last_wall_node_status = wall
            self._report_nodes()
        if not isinstance(self.clock, VirtualClock):
            self._heartbeat = self.clock.call_later(self.loop, self.heartbeat_seconds, Priority.NODE, self._beat)

    def _report_nodes(self) -> None:
        """Each node's status heartbeat: its ``Ready`` condition's ``lastHeartbeatTime`` (the kubelet reports node
        status every 5 minutes when nothing changed, and renews its Lease in between)."""
        self._last_node_status = self._last_beat
        stamp = _stamp(int(self._last_beat))
        for node in list(self.store.objects(self.nodes)):
            status = node.get("status") or {}
            conditions = [
                {**c, "lastHeartbeatTime": stamp} if isinstance(c, dict) and c.get("type") == "Ready" else c
                for c in status.get("conditions") or ()
            ]
            updated = {**node, "status": {**status, "conditions": conditions}}
            with contextlib.suppress(ApiError):
                self.store.update(self.nodes, "", node["metadata"]["name"], updated, "status", trusted=True)

    def _beat_if_due(self, now: float) -> None:
        wall = time.monotonic()
        if now - self._last_beat >= self.heartbeat_seconds and wall - self._last_wall_beat >= 1.0:
            self._last_wall_beat = wall
            self._beat()

    def _wake(self) -> None:
        if not self._draining:
            self._draining = True
            self.loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._draining = False
        pending = self._watcher.pending
        while pending:
            type_, event = pending.popleft()
            self._handle(type_, event.obj, event.prev)

    def _handle(self, type_: str, obj: Object, prev: Object | None = None) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        life = self.lives.get(uid)
        if type_ == "DELETED":
            if life is not None:
                life.cancel()
                self._leave(life)
                del self.lives[uid]
            return
        node = obj.get("spec", {}).get("nodeName")
        if not node:
            return
        if meta.get("deletionTimestamp"):
            self._confirm_deletion(obj)
            return
        if life is None and obj.get("status", {}).get("phase") == "Pending":
            try:
                self.store.get(self.nodes, "", node)
            except ApiError:
                return  # no such node: no kubelet will ever run it
            self._admit(obj, prev)

    def _admit(self, obj: Object, prev: Object | None) -> None:
        meta, namespace = obj["metadata"], obj["metadata"]["namespace"]
        try:
            known = self.known_pod(obj, prev) if self.known_pod is not None else None
            # a copy: the kubelet moves its pod's phase on, the schedulers' reading must not move with it
            pod = copy.copy(known) if known is not None else pod_from_manifest(obj)
            # a Job's pod without a run time completes once it runs, as KWOK's pod-complete stage for Job pods and
            # the simulator (kubeflux.sim.workloads.manifests) have it; any other pod runs until it is deleted
            owned = any(ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or () if isinstance(ref, dict))
            template = _template(pod, obj, f"Pod {namespace}/{meta['name']}", "metadata", 0.0 if owned else None)
            job = WorkloadJob(
                id=pod.key, submit_time=0.0, kind=JobKind.POD, name=pod.name, namespace=namespace, pods=[template]
            )
            timing = timing_of(template, job, self.lifecycle, dict(pod.labels), pod.scheduler_name)
        except (ManifestError, ValueError) as exc:
            record_event(self.store, namespace, obj, "Warning", "FailedCreatePodSandBox", str(exc), "kubelet")
            return
        now = self.store.clock()
        sim = SimPod(pod, 0, timing, now)  # a lone pod: no job of the simulator's own
        sim.bound_at = _bound_at(obj, now)
        if timing.start_jitter > timing.start_delay:
            sim.start_delay = self._random.uniform(timing.start_delay, timing.start_jitter)
        if timing.run_jitter is not None and sim.run_time is not None and timing.run_jitter > sim.run_time:
            sim.run_time = self._random.uniform(sim.run_time, timing.run_jitter)
        life = _Life(sim, namespace, meta["name"])
        if self.couple:
            life.group = self._group_of(obj)
        self.lives[meta["uid"]] = life
        if sim.start_delay > 0:
            self._write_status(life)  # Initialized, ContainerCreating (with no start delay: Running at once)
        if pod.active_deadline_seconds is not None:
            deadline = sim.bound_at + pod.active_deadline_seconds - now
            life.timers.append(self.clock.call_later(self.loop, deadline, Priority.RELEASE, self._deadline, life))
        if sim.start_delay > 0:
            life.timers.append(self.clock.call_later(self.loop, sim.start_delay, Priority.STAGE, self._start, life))
        else:
            self._start(life)  # KWOK's fast pod-ready stage: Running at once, as in the simulator

    def _start(self, life: _Life) -> None:
        sim = life.sim
        if sim.finished_at is not None:
            return
        sim.running_at = self.store.clock()
        sim.pod.phase = PodPhase.RUNNING
        self._write_status(life)
        group = life.group
        if group is not None and not group.computing:
            group.waiting.append(life)
            if len(group.waiting) < group.quorum:
                return  # holds its node idle until the job's last required pod runs
            group.computing = True
            members, group.waiting = group.waiting, []
            for member in members:
                self._compute(member)
            return
        self._compute(life)

    def _compute(self, life: _Life) -> None:
        run_time = life.sim.run_time
        if run_time is not None:
            life.timers.append(self.clock.call_later(self.loop, run_time, Priority.RELEASE, self._complete, life))

    def _group_of(self, obj: Object) -> _Group | None:
        """The coupled job a pod belongs to (see the module docstring), read from its PodGroup or Job; None when
        it computes on its own."""
        meta = obj["metadata"]
        namespace, labels = meta["namespace"], meta.get("labels") or {}
        owner = next((ref.get("name") for ref in meta.get("ownerReferences") or () if ref.get("kind") == "Job"), None)
        parallelism: int | None = None
        if owner:
            parallelism = int(self._spec("batch", "v1", "jobs", namespace, owner).get("parallelism") or 1)
        group, quorum, key = labels.get(POD_GROUP_LABEL), 0, ""
        if group:
            found = self._spec("scheduling.x-k8s.io", "v1alpha1", "podgroups", namespace, group)
            quorum = int(found.get("minMember") or 0)
            if parallelism is not None:
                quorum = min(quorum, parallelism)
            key = f"{namespace}/podgroup/{group}"
        elif owner and str((meta.get("annotations") or {}).get(COUPLED_ANNOTATION, "")).strip().lower() == "true":
            quorum, key = parallelism or 1, f"{namespace}/job/{owner}"
        if quorum <= 1:
            return None
        coupled = self._groups.get(key)
        if coupled is None:
            coupled = self._groups[key] = _Group(quorum)
        return coupled

    def _spec(self, group: str, version: str, plural: str, namespace: str, name: str) -> Object:
        """The ``spec`` of an object in the store; empty when it is not there."""
        resource = self.store.registry.find(group, version, plural)
        try:
            found = self.store.get(resource, namespace, name) if resource is not None else {}
        except ApiError:
            return {}
        spec = found.get("spec")
        return spec if isinstance(spec, dict) else {}

    def _leave(self, life: _Life) -> None:
        """An ended pod no longer waits with its coupled job."""
        group = life.group
        if group is not None and life in group.waiting:
            group.waiting.remove(life)

    def _complete(self, life: _Life) -> None:
        code = life.sim.exit_code
        self._end(
            life,
            PodPhase.SUCCEEDED if code == 0 else PodPhase.FAILED,
            code,
            "Completed" if code == 0 else "Error",
            "",
            "",
        )

    def _deadline(self, life: _Life) -> None:
        message = "Pod was active on the node longer than the specified deadline"
        self._end(life, PodPhase.FAILED, 137, "DeadlineExceeded", "DeadlineExceeded", message)

    def _end(self, life: _Life, phase: PodPhase, code: int, container_reason: str, reason: str, message: str) -> None:
        sim = life.sim
        if sim.finished_at is not None:
            return
        sim.finished_at = self.store.clock()
        sim.exit_code, sim.container_reason, sim.reason, sim.status_message = code, container_reason, reason, message
        sim.pod.phase = phase
        life.cancel()
        self._leave(life)
        self._write_status(life)

    def _write_status(self, life: _Life) -> None:
        try:
            current = self.store.get(self.pods, life.namespace, life.name)
        except ApiError:
            return
        status = _rfc3339(pod_status(life.sim))
        previous = current.get("status", {})
        images = {c.get("name"): c.get("image", "") for c in current.get("spec", {}).get("containers") or ()}
        for container in status.get("containerStatuses", ()):
            container["image"] = images.get(container["name"], "")
            container["imageID"] = ""  # required by typed clients; there is no image
            container["containerID"] = f"kubeflux://{current['metadata']['uid']}/{container['name']}"
        for kept in ("qosClass", "nominatedNodeName"):
            if kept in previous:
                status[kept] = previous[kept]
        updated = {**current, "status": status}  # a status write reads only the status
        try:
            self.store.update(self.pods, life.namespace, life.name, updated, "status", trusted=True)
        except ApiError:
            return

    def _confirm_deletion(self, obj: Object) -> None:
        meta = obj["metadata"]
        life = self.lives.pop(meta["uid"], None)
        if life is not None:
            life.cancel()
            self._leave(life)
        try:
            self.store.delete(self.pods, meta["namespace"], meta["name"], grace=0, uid=meta["uid"])
        except ApiError:
            return


def _micro_time(seconds: float) -> str:
    """``metav1.MicroTime``: RFC 3339 with microseconds, as Lease renew times are written."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _bound_at(obj: Object, default: float) -> float:
    for condition in obj.get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            try:
                return parse_timestamp(condition["lastTransitionTime"])
            except (KeyError, TypeError, ValueError):
                return default
    return default
