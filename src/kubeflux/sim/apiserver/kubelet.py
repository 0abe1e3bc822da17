"""The served cluster's simulated kubelet: the API's side of the simulator's :class:`~kubeflux.sim.cluster.Cluster`.

There is one cluster model, the simulator's: every pod is run by a :class:`~kubeflux.sim.cluster.Cluster`
(:attr:`SimulatedKubelet.cluster`) on the served clock's event loop (the :class:`~kubeflux.sim.clock.EventLoop` of
a :class:`~kubeflux.sim.apiserver.clock.VirtualClock`, or one a wall clock drives:
:class:`~kubeflux.sim.apiserver.clock.WallEvents`), with cancellable entries so that virtual time never jumps to a
stage of a pod that is gone. The cluster has every node of the store from the start, in the store's order (so
its core ids are those ``simulate`` gives the same nodes). This module only translates between the API and the
cluster:

* a pod created through the API is read (the manifest reader and :func:`kubeflux.sim.jobs.timing_of`: KWOK's
  ``pod-ready`` and ``pod-complete`` stage annotations, ``sim.kubeflux.io/exit-code``, ``activeDeadlineSeconds``;
  KWOK's jitter drawn here, from the lifecycle's seed) and joins the cluster's job book, Pending
  (:meth:`kubeflux.sim.jobbook.JobBook.adopt_pod`, with its API uid, in a job of its own or its coupled job's);
  a workload replay's pods are made in the book by the replay itself and handed over (:meth:`SimulatedKubelet.add_pod`);
* once the API gives it a node (a Binding, or ``nodeName`` at its creation) it is bound in the cluster
  (:meth:`Cluster.bind_pod`), on the cluster's copy of its node (read from the store: ready and schedulable, as a
  node's kubelet runs whatever is bound to it; the kubelet's admission refuses a pod that does not fit,
  ``OutOf<resource>``);
* a pod deleted through the API (or Terminating: confirmed at once with grace 0, as KWOK's ``pod-delete`` stage
  does) is deleted in the cluster (:meth:`Cluster.delete_pod`); a pod the cluster deletes (a coupled job's peer
  never bound, a pod an in-process controller kills: :meth:`SimulatedKubelet.delete_pod`) is deleted through the
  API;
* every change the cluster makes to a bound pod (Running, Succeeded/Failed, ``DeadlineExceeded``, ``PeerFailed``)
  is written through the ``pods/status`` subresource, once per change, as :func:`kubeflux.sim.podstatus.pod_status`
  derives it (conditions, container state, ``startTime``), as a kubelet writes it.

So the stages are the simulator's: bound → ``Running`` after the start delay; ``Running`` → ``Succeeded`` (exit
code 0) or ``Failed`` (non-zero) after the run time (without one, a Job's pod completes as soon as it runs, as
KWOK's ``pod-complete`` stage for Job pods and the simulator's Job pods have it, and any other pod runs until
deleted); ``activeDeadlineSeconds`` after the bind: ``Failed``, ``DeadlineExceeded``. With ``couple`` (a workload
replay) the pods of a coupled job compute together (:func:`kubeflux.sim.jobs.coupled_quorum`: a PodGroup of
``minMember`` > 1, at most its Job's ``parallelism`` when a Job owns it, or a Job whose template says
``sim.kubeflux.io/coupled: "true"``), and a pod of a coupled PodGroup that fails ends the others (``PeerFailed``),
as in ``kubeflux simulate``. The Jobs are the served Job controller's: the cluster's own is off.

Only pods bound to a node the store knows run; a pod whose annotations cannot be read stays out of the cluster
(Pending in the API) and, once bound (by a scheduler that does not read them: kube-default, a real kube-scheduler),
is failed as a kubelet fails a pod its admission rejects: phase ``Failed``, reason ``InvalidRunTime``, a message and
a Warning event naming the annotation and its value. Each node's kubelet also renews its Lease in
``kube-node-lease`` every ``heartbeat_seconds`` (simulated; 40 s lease, as the kubelet's defaults), creating it
first, and every :data:`NODE_STATUS_SECONDS` writes its node status heartbeat (the ``Ready`` condition's
``lastHeartbeatTime``), as a kubelet reports an unchanged node status. In virtual time a heartbeat never makes time
jump: both are written at the time points the clock lands on, once their period has passed, leases at most once a
wall second and node status at most once every 10 wall seconds (a run of thousands of time points would otherwise
spend much of its time on heartbeats); after a long jump a lease may look older than its 40 s until the next renewal
(nothing in the served cluster reads node leases). Node conditions other than a ready node's heartbeat, and failure
injection, are not here yet.
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
from datetime import UTC, datetime
from typing import Any

from kubeflux.apiobjects.manifests import ManifestError, format_timestamp, node_from_manifest, pod_from_manifest
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Pod, PodPhase
from kubeflux.scheduler.units import echo
from kubeflux.scheduler.validation import InvalidRunTime
from kubeflux.sim.apiserver.clock import Clock, Timer, VirtualClock, WallEvents
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Follower
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent
from kubeflux.sim.clock import Priority
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.jobs import COUPLED_ANNOTATION, SimJob, timing_of
from kubeflux.sim.pods import Lifecycle, SimPod
from kubeflux.sim.podstatus import pod_status
from kubeflux.sim.workloads.manifests import pod_template
from kubeflux.sim.workloads.model import JobKind, WorkloadJob
from kubeflux.wallclock import WallClock

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


class SimulatedKubelet:
    """Every node's kubelet: follows the pods collection of ``store`` on ``loop`` (the server's loop) and runs the
    bound pods in :attr:`cluster`, the simulator's :class:`~kubeflux.sim.cluster.Cluster` on the served clock's
    event loop, writing each pod's status from the cluster's events."""

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
        self.clock: Clock = clock or WallClock()
        """Sets the heartbeat timers (simulated seconds); the store's clock gives the time."""
        self.time: VirtualClock | WallEvents = (
            self.clock if isinstance(self.clock, VirtualClock | WallEvents) else WallEvents(self.clock, loop)
        )
        """The event loop the cluster runs on: the virtual clock's own, or one the wall clock drives."""
        self.cluster = Cluster(
            self.time.events, (), self.lifecycle, couple=couple, job_controller=False, cancellable=True
        )
        """The pods' lifecycles: bound pods are adopted and bound here (the served Job controller keeps the Jobs)."""
        self.cluster.subscribe(self._observe)
        self._random = random.Random(self.lifecycle.seed)
        self.couple = couple
        self._jobs: dict[str, SimJob] = {}
        """A coupled job's key (see :meth:`_coupled`) → its job in :attr:`cluster`."""
        self._node_versions: dict[str, str] = {}
        """Node name → the ``resourceVersion`` of the node :attr:`cluster` holds."""
        self.lives: dict[str, SimPod] = {}
        """uid → the cluster's pod (Pending, bound, running or ended) of each pod the API has."""
        self._held: dict[SimPod, None] | None = None
        """While a change read from the API is told to the cluster: the pods whose status to write after it (one
        write per pod and change)."""
        self.known_pod: Callable[[Object, Object | None], Pod | None] | None = None
        """Asked for a reading of a pod (its version, the previous one) before its manifest is read: the in-process
        schedulers' (:meth:`InProcessSchedulers.known_pod`) when they run."""
        self._made: dict[str, SimPod] = {}
        """uid → a pod an in-process client made in the cluster (:meth:`add_pod`) whose creation the kubelet has not
        read yet (it stays while the cluster has deleted it and the API's deletion is not read yet)."""
        for node in list(store.objects(nodes)):  # every node now, in the store's order: the simulator's core ids
            with contextlib.suppress(ApiError, ManifestError, ValueError):
                self._node_index(node["metadata"]["name"])
        self._follower = Follower(store, loop, [(pods, self._event)])
        self._follower.list_existing()
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
        return self._follower.busy

    def stop(self) -> None:
        if isinstance(self.clock, VirtualClock) and self._beat_if_due in self.clock.jumped:
            self.clock.jumped.remove(self._beat_if_due)
        self._follower.stop()
        if isinstance(self.time, WallEvents) and self.time is not self.clock:
            self.time.stop()
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

    def _event(self, type_: str, event: WatchEvent) -> None:
        self._handle(type_, event.obj, event.prev)

    def _handle(self, type_: str, obj: Object, prev: Object | None = None) -> None:
        """Tell the cluster a change of a pod read from the API (see :meth:`_telling`): a pod joins the cluster
        when it is created (:meth:`_join`), is bound there when it has a node, leaves it when deleted."""
        meta = obj["metadata"]
        uid = meta["uid"]
        if type_ == "DELETED":
            self._made.pop(uid, None)
            sp = self.lives.pop(uid, None)
            if sp is not None:
                self._telling(self._forget, sp)
            return
        node = obj.get("spec", {}).get("nodeName")
        if meta.get("deletionTimestamp"):  # Terminating: nothing joins, a bound pod's deletion is confirmed
            if node:
                self._confirm_deletion(obj)
            return
        phase = obj.get("status", {}).get("phase")
        sp = self.lives.get(uid)
        if sp is None and phase == "Pending" and (node or type_ == "ADDED"):
            sp = self._join(obj, prev, uid, node)
        if not node or sp is None:
            return
        if sp.finished_at is not None:
            return
        if sp.bound_at is None:
            if phase == "Pending":
                self._telling(self._bind, sp, obj, node)
        elif phase in ("Succeeded", "Failed"):
            del self.lives[uid]  # another writer ended it (a test, a KWOK stage): its resources come back
            self._telling(self._forget, sp)

    def _join(self, obj: Object, prev: Object | None, uid: str, node: str | None) -> SimPod | None:
        """The pod ``obj`` (uid ``uid``), seen for the first time, joins :attr:`lives`: the one an in-process
        client made in the cluster (:meth:`add_pod`), or one read from the API (:meth:`_learn`). None when it
        cannot join: the cluster deleted it before its creation was seen, or it cannot be read (bound to
        ``node``: a Warning event says why; not bound yet: read again when it is)."""
        made = self._made.get(uid)
        if made is not None:
            if made.pod.deleted:
                return None  # the cluster deleted it already; its deletion through the API follows
            del self._made[uid]
            self.lives[uid] = made
            return made
        self._telling(self._learn, obj, prev, uid, bool(node))
        return self.lives.get(uid)

    def add_pod(self, job: SimJob, sp: SimPod) -> None:
        """A pod an in-process client made in :attr:`cluster`'s book (``sp``, from
        :meth:`JobBook.new_pod <kubeflux.sim.jobbook.JobBook.new_pod>`, for ``job``) has just been created through
        the API with the uid ``sp.pod.uid``: it joins the cluster now, so that its watch events find it there (a
        pod of its name the cluster still holds, ended and not yet seen deleted, is let go first)."""
        self._hold(self._make_room, sp.pod.key)
        self.cluster.book.add_pod(job, sp)
        self._made[sp.pod.uid] = sp

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        """An in-process controller deletes the pod ``key``: the cluster first (a pod not ended is killed with
        ``reason``, see :meth:`Cluster.delete_pod <kubeflux.sim.cluster.Cluster.delete_pod>`), then the API
        (:meth:`_observe`). Nothing when the cluster holds no such pod."""
        if key in self.cluster.pods:
            self._hold(self.cluster.delete_pod, key, reason)
            self.time.arm()

    def pod_of(self, uid: str) -> SimPod | None:
        """The cluster's pod of API uid ``uid``, if it holds one."""
        return self.lives.get(uid) or self._made.get(uid)

    def _telling(self, change: Callable[..., None], *args: Any) -> None:
        """Run ``change`` on the cluster at the clock's time (:meth:`_hold`), then set the timer of the cluster's
        next entry."""
        self.time.catch_up()
        self._hold(change, *args)
        self.time.arm()

    def _hold(self, change: Callable[..., None], *args: Any) -> None:
        """Run ``change`` on the cluster, then write the status of every pod it changed once (within a change
        already held: with that one's)."""
        if self._held is not None:
            change(*args)
            return
        self._held = {}
        try:
            change(*args)
        finally:
            held, self._held = self._held, None
            for sp in held:
                self._write_status(sp)

    def _observe(self, event: ClusterEvent, now: float) -> None:
        """The cluster changed a bound pod: its status is written (after the change being held, if any). The
        cluster deleted a pod the API still has (a coupled job's unbound peer, a controller's kill): the API
        deletes it too."""
        pod = event.obj
        if not isinstance(pod, Pod):
            return
        if event.kind is EventKind.DELETED:
            self._deleted(pod)
            return
        if event.kind is not EventKind.MODIFIED or not pod.node_name:
            return
        sp = self.cluster.pods.get(pod.key)
        if sp is None or sp.pod is not pod:
            return
        if self._held is not None:
            self._held[sp] = None
        else:
            self._write_status(sp)

    def _deleted(self, pod: Pod) -> None:
        sp = self.lives.pop(pod.uid, None)
        if sp is None and pod.uid not in self._made:
            return  # the API deleted it first
        if sp is not None and self._held is not None:
            self._held.pop(sp, None)
        with contextlib.suppress(ApiError):
            self.store.delete(self.pods, pod.namespace, pod.name, grace=0, uid=pod.uid)

    def _node_index(self, name: str) -> None:
        """Bring the cluster's copy of node ``name`` up to the store's (a node's kubelet runs whatever is bound to
        it: the copy is ready and schedulable whatever the API says). Raises ApiError when the store has no such
        node, ManifestError or ValueError when it cannot be read."""
        found = self.store.get(self.nodes, "", name)
        version = found["metadata"].get("resourceVersion", "")
        if self._node_versions.get(name) == version:
            return
        node = node_from_manifest(found)
        node.ready, node.unschedulable = True, False
        if name in self.cluster.node_index:
            self.cluster.update_node(name, allocatable=node.allocatable, labels=node.labels, taints=node.taints)
        else:
            self.cluster.add_node(node)
        self._node_versions[name] = version

    def _learn(self, obj: Object, prev: Object | None, uid: str, bound: bool) -> None:
        """Read the pod ``obj`` (the manifest reader, its stage annotations) and add it to the cluster's book,
        Pending and unbound, in a job of its own or its coupled job's; KWOK's jitter is drawn here. A pod that
        cannot be read is left out (``bound``: with a Warning event naming the field)."""
        meta, namespace = obj["metadata"], obj["metadata"]["namespace"]
        try:
            known = self.known_pod(obj, prev) if self.known_pod is not None else None
            # a copy: the kubelet moves its pod's phase on, the schedulers' reading must not move with it
            pod = copy.copy(known) if known is not None else pod_from_manifest(obj)
            # a Job's pod without a run time completes once it runs, as KWOK's pod-complete stage for Job pods and
            # the simulator (kubeflux.sim.workloads.manifests) have it; any other pod runs until it is deleted
            owned = any(ref.get("kind") == "Job" for ref in meta.get("ownerReferences") or () if isinstance(ref, dict))
            template = pod_template(pod, obj, f"Pod {namespace}/{meta['name']}", "metadata", 0.0 if owned else None)
            wjob = WorkloadJob(
                id=pod.key, submit_time=0.0, kind=JobKind.POD, name=pod.name, namespace=namespace, pods=[template]
            )
            timing = timing_of(template, wjob, self.lifecycle, dict(pod.labels), pod.scheduler_name)
        except (ManifestError, ValueError) as exc:
            if bound:
                self._reject(obj, exc)
            return
        job = self._coupled(obj, wjob) if self.couple else None
        if job is None:
            job = self.cluster.book.add_job(wjob)
        self._make_room(pod.key)
        pod.node_name, pod.phase = "", PodPhase.PENDING  # the cluster binds it, as the API did
        sp = self.cluster.book.adopt_pod(job, pod, timing)
        if timing.start_jitter > timing.start_delay:
            sp.start_delay = self._random.uniform(timing.start_delay, timing.start_jitter)
        if timing.run_jitter is not None and sp.run_time is not None and timing.run_jitter > sp.run_time:
            sp.run_time = self._random.uniform(sp.run_time, timing.run_jitter)
        self.lives[uid] = sp

    def _reject(self, obj: Object, exc: ValueError) -> None:
        """The bound pod ``obj`` cannot be run (``exc``: most often its run-time annotations are unreadable, which
        kubeflux's schedulers refuse before binding but kube-default or a real kube-scheduler do not read): it is
        failed as a kubelet fails a pod its admission rejects, with a Warning event and phase ``Failed``, reason
        ``InvalidRunTime`` (``UnexpectedAdmissionError`` for anything else), message ``Pod was rejected: …`` naming
        the annotation and its value."""
        meta, namespace = obj["metadata"], obj["metadata"]["namespace"]
        reason, message = "UnexpectedAdmissionError", str(exc)
        if isinstance(exc, InvalidRunTime):
            reason = "InvalidRunTime"
            value = (meta.get("annotations") or {}).get(exc.path.removeprefix("metadata.annotations."))
            if isinstance(value, str) and echo(value) not in message:
                message += f" (the annotation is {echo(value)})"
        record_event(self.store, namespace, obj, "Warning", reason, message, "kubelet")
        try:
            current = self.store.get(self.pods, namespace, meta["name"])
        except ApiError:
            return
        if current["metadata"]["uid"] != meta["uid"] or current.get("status", {}).get("phase") != "Pending":
            return
        status = {**current.get("status", {}), "phase": "Failed", "reason": reason}
        status["message"] = f"Pod was rejected: {message}"
        status.setdefault("startTime", _stamp(int(self.store.clock())))
        with contextlib.suppress(ApiError):
            self.store.update(self.pods, namespace, meta["name"], {**current, "status": status}, "status", trusted=True)

    def _make_room(self, key: str) -> None:
        """An earlier pod of the name ``key``, ended and not yet seen deleted, leaves the cluster."""
        stale = self.cluster.pods.get(key)
        if stale is not None:
            self.lives.pop(stale.pod.uid, None)
            self._forget(stale)

    def _bind(self, sp: SimPod, obj: Object, node: str) -> None:
        """The pod ``sp`` is bound to ``node`` in the cluster, as it was through the API (the cluster's copy of the
        node brought up to the store's first: a node the store does not have runs nothing)."""
        try:
            self._node_index(node)
        except ApiError:
            return  # no such node: no kubelet will ever run it
        except (ManifestError, ValueError) as exc:
            namespace = obj["metadata"]["namespace"]
            record_event(self.store, namespace, obj, "Warning", "FailedCreatePodSandBox", str(exc), "kubelet")
            return
        self.cluster.bind_pod(sp, "", node)

    def _coupled(self, obj: Object, wjob: WorkloadJob) -> SimJob | None:
        """The coupled job a pod belongs to (see the module docstring), read from its PodGroup or Job; None when
        it computes on its own."""
        meta = obj["metadata"]
        namespace, labels = meta["namespace"], meta.get("labels") or {}
        owner = next((ref.get("name") for ref in meta.get("ownerReferences") or () if ref.get("kind") == "Job"), None)
        parallelism: int | None = None
        if owner:
            parallelism = int(self._spec("batch", "v1", "jobs", namespace, owner).get("parallelism") or 1)
        group, quorum, key, kind = labels.get(POD_GROUP_LABEL), 0, "", JobKind.POD_GROUP
        if group:
            found = self._spec("scheduling.x-k8s.io", "v1alpha1", "podgroups", namespace, group)
            quorum = int(found.get("minMember") or 0)
            if parallelism is not None:
                quorum = min(quorum, parallelism)
            key = f"{namespace}/podgroup/{group}"
        elif owner and str((meta.get("annotations") or {}).get(COUPLED_ANNOTATION, "")).strip().lower() == "true":
            quorum, key, kind = parallelism or 1, f"{namespace}/job/{owner}", JobKind.JOB
        if quorum <= 1:
            return None
        job = self._jobs.get(key)
        if job is None:
            wjob.id, wjob.kind, wjob.name = key, kind, key.rsplit("/", 1)[1]
            job = self._jobs[key] = self.cluster.book.add_job(wjob, quorum)
        return job

    def _spec(self, group: str, version: str, plural: str, namespace: str, name: str) -> Object:
        """The ``spec`` of an object in the store; empty when it is not there."""
        resource = self.store.registry.find(group, version, plural)
        try:
            found = self.store.get(resource, namespace, name) if resource is not None else {}
        except ApiError:
            return {}
        spec = found.get("spec")
        return spec if isinstance(spec, dict) else {}

    def _forget(self, sp: SimPod) -> None:
        """The pod left the API: the cluster deletes it (a pod not ended is killed; a coupled job's peers end, as
        in the simulator); its own status is not written (there is no pod to write it on)."""
        if self.cluster.pods.get(sp.pod.key) is sp:
            self.cluster.delete_pod(sp.pod.key)
        if self._held is not None:
            self._held.pop(sp, None)

    def _terminate(self, sp: SimPod) -> None:
        """A deleted pod that a finalizer keeps in the API (a Job's): the cluster kills it and its last status is
        written (``Failed``, exit 137, ``DisruptionTarget``), as a kubelet ends a deleted pod before it confirms the
        deletion; a Job controller reads that status (its ``podFailurePolicy``) before it lets the pod go."""
        if self.cluster.pods.get(sp.pod.key) is sp:
            self.cluster.delete_pod(sp.pod.key)

    def _write_status(self, sp: SimPod) -> None:
        pod = sp.pod
        try:
            current = self.store.get(self.pods, pod.namespace, pod.name)
        except ApiError:
            return
        if current["metadata"]["uid"] != pod.uid:
            return  # another pod of the same name
        status = _rfc3339(pod_status(sp))
        previous = current.get("status", {})
        images = {c.get("name"): c.get("image", "") for c in current.get("spec", {}).get("containers") or ()}
        for container in status.get("containerStatuses", ()):
            container["image"] = images.get(container["name"], "")
            container["imageID"] = ""  # required by typed clients; there is no image
            container["containerID"] = f"kubeflux://{current['metadata']['uid']}/{container['name']}"
        for kept in ("qosClass", "nominatedNodeName", "resourceClaimStatuses"):  # (the last: the claim controller's)
            if kept in previous:
                status[kept] = previous[kept]
        updated = {**current, "status": status}  # a status write reads only the status
        try:
            self.store.update(self.pods, pod.namespace, pod.name, updated, "status", trusted=True)
        except ApiError:
            return

    def _confirm_deletion(self, obj: Object) -> None:
        meta = obj["metadata"]
        sp = self.lives.pop(meta["uid"], None)
        if sp is not None:
            self._telling(self._terminate if meta.get("finalizers") else self._forget, sp)
        try:
            self.store.delete(self.pods, meta["namespace"], meta["name"], grace=0, uid=meta["uid"])
        except ApiError:
            return


def _micro_time(seconds: float) -> str:
    """``metav1.MicroTime``: RFC 3339 with microseconds, as Lease renew times are written."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
