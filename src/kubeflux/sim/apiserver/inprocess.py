"""Schedulers of kubeflux running inside the served cluster (``kubeflux cluster serve --scheduler kubeflux``).

A thin shell, like the simulator's driver, over the same core contract (:mod:`kubeflux.scheduler.interface`): the
store's watch events of nodes, namespaces, pod groups, PodDisruptionBudgets, storage objects, Dynamic Resource
Allocation objects and pods become :class:`ClusterEvent` objects (read by the same manifest readers as everywhere
else) given to ``observe`` in resourceVersion order; ``schedule(now)`` runs after each batch and at the scheduler's
``next_wakeup``, in the served clock's time (Unix seconds; wall, accelerated or virtual).
Decisions go through the API's own paths, as a scheduler outside the process would send them: a :class:`Bind` is
its claim bindings (a JSON merge patch each: a claim's selected node, a volume's ``claimRef``), then a
``pods/binding`` (refused ones are told back with ``unreserve``) and a ``Scheduled`` event; an
:class:`Unschedulable` or :class:`Reject` sets ``PodScheduled=False/Unschedulable`` through ``pods/status`` with a
``FailedScheduling`` event, the expected start annotation and ``status.nominatedNodeName``; an :class:`Evict` goes
through the Eviction API (which PodDisruptionBudgets may refuse) or, as kube-scheduler preempts, a delete after the
``DisruptionTarget`` condition, with a ``Preempted`` event on the pod. Unchanged conditions and annotations are not
written again (no event storms, no loops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.decisions import (
    POD_SCHEDULED,
    UNSCHEDULABLE,
    binding,
    claim_patch,
    scheduled_message,
    unschedulable_condition,
)
from kubeflux.apiobjects.disruption import budget_from_manifest
from kubeflux.apiobjects.eventbudget import EventBudget
from kubeflux.apiobjects.manifests import ManifestError
from kubeflux.apiobjects.podreadings import PodReadings
from kubeflux.apiobjects.watched import cluster_event
from kubeflux.scheduler.decisions import apply_decisions
from kubeflux.scheduler.interface import (
    EXPECTED_START_ANNOTATION,
    PREEMPTED_REASON,
    PREEMPTION_CONDITION_REASON,
    Bind,
    Deallocate,
    Evict,
    PodWarning,
    Reject,
    Scheduler,
    Unreserve,
    Unschedulable,
    expected_start_annotations,
    expected_start_text,
    rfc3339,
)
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.storage import ClaimBinding
from kubeflux.sim.apiserver.claim_controller import free_claim, unwrite_claims, write_claims
from kubeflux.sim.apiserver.clock import Clock, Timer
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.eviction import evict, mark_disrupted
from kubeflux.sim.apiserver.follow import served
from kubeflux.sim.apiserver.gates import gates_of
from kubeflux.sim.apiserver.kubelet import record_event
from kubeflux.sim.apiserver.patch import merge_patch
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import Watcher, WatchEvent
from kubeflux.sim.clock import Priority
from kubeflux.wallclock import WallClock

__all__ = ["InProcessSchedulers"]

log = logging.getLogger("kubeflux.apiserver")
Object = dict[str, Any]


class InProcessSchedulers:
    """Runs ``schedulers`` (each owning the pods naming its ``name``) against ``store`` on ``loop``."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        schedulers: list[Scheduler],
        clock: Clock | None = None,
        *,
        paced: bool = False,
    ) -> None:
        self.store, self.loop, self.schedulers = store, loop, list(schedulers)
        self.paced = paced
        """In virtual time the pacer runs the cycles (:meth:`run_cycle`): once per time point, as the simulator
        asks its schedulers, and again only for events that may let a pod run (see :func:`_enabling`)."""
        self._due = False
        self.readings = PodReadings()
        """The last version of each pod read, and its reading."""
        self.clock: Clock = clock or WallClock()
        registry = store.registry
        kinds = [
            ("", "v1", "nodes"),
            ("", "v1", "namespaces"),  # their labels, which a namespaceSelector selects on (as serve watches them)
            ("scheduling.x-k8s.io", "v1alpha1", "podgroups"),
            ("scheduling.k8s.io", "v1alpha2", "podgroups"),  # served with the GenericWorkload gate only
            ("policy", "v1", "poddisruptionbudgets"),  # served with the controllers' objects
            ("storage.k8s.io", "v1", "storageclasses"),
            ("", "v1", "persistentvolumes"),
            ("", "v1", "persistentvolumeclaims"),
            ("storage.k8s.io", "v1", "csinodes"),
            ("resource.k8s.io", "v1", "deviceclasses"),
            ("resource.k8s.io", "v1", "resourceslices"),
            ("resource.k8s.io", "v1", "resourceclaims"),
            ("", "v1", "pods"),  # last: self.pods
        ]
        self.resources: list[ResourceType] = [r for r in (registry.find(*k) for k in kinds) if r is not None]
        self.pods = self.resources[-1]
        self._volumes, self._claims = served(
            store, ("", "v1", "persistentvolumes"), ("", "v1", "persistentvolumeclaims")
        )
        self._watchers: list[Watcher] = []
        self._scheduled = False
        self.event_budget = EventBudget()
        """Each pod's FailedScheduling events, in simulated seconds (client-go's spam filter, as ``serve``)."""
        self.rejected: list[Callable[[str, str], None]] = []
        """Told ``(uid, message)`` of every pod a scheduler rejects (it can never run): on the API such a pod is
        only ``Unschedulable``, but the workload replay's records say REJECTED, as the simulator's do."""
        self._sinks = [_StoreSink(self, scheduler.name) for scheduler in self.schedulers]
        self._unreserving = [s if isinstance(s, Unreserve) else None for s in self.schedulers]
        """Each scheduler that takes refused Binds back, found once (a runtime Protocol check costs ~50 µs)."""
        self._wakeups: dict[int, float] = {}
        self._timers: dict[float, Timer] = {}
        self.bound = 0
        now = store.clock()
        for resource in self.resources:
            watcher = Watcher(resource, "", LabelSelector(), FieldSelector(), backlog=10**9)
            store.collections[resource.collection].watchers.add(watcher)
            self._watchers.append(watcher)
            for obj in list(store.objects(resource)):
                self._observe("ADDED", resource, obj, now)
            watcher.wake = self._wake_on_event
        self._wake()

    @property
    def busy(self) -> bool:
        """A scheduling cycle is due (the virtual clock must not jump); paced cycles are the pacer's to run."""
        return not self.paced and (self._scheduled or any(watcher.pending for watcher in self._watchers))

    def time_point(self, now: float) -> None:
        """The virtual clock jumped: a cycle is due once the time point's events are in."""
        self._due = True

    def run_cycle(self) -> bool:
        """Run a cycle if one is due (paced mode); True when it ran."""
        if not (self._due or any(_enabling(t, e) for w in self._watchers for t, e in w.pending)):
            return False
        self._due = False
        self._cycle()
        return True

    def stop(self) -> None:
        for resource, watcher in zip(self.resources, self._watchers, strict=True):
            self.store.stop_watch(resource, watcher)
        for timer in self._timers.values():
            timer.cancel()

    def _wake(self) -> None:
        if self.paced:
            self._due = True
            return
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._cycle)

    def _observe(self, type_: str, resource: ResourceType, obj: Object, now: float, prev: Object | None = None) -> None:
        kind = resource.kind
        if type_ == "MODIFIED" and prev is not None:
            if kind == "Node" and _heartbeat_only(obj, prev):
                return  # a kubelet's status heartbeat: nothing changed that a scheduler reads
            if kind == "PodGroup" and _status_only(obj, prev):
                return  # the PodGroup controller's status: nothing a scheduler reads (the simulator has none)
        try:
            event = cluster_event(type_, kind, obj, lambda pod: self._pod(type_, pod, prev))
            budget_only = type_ == "MODIFIED" and kind == "PodDisruptionBudget"
            if budget_only and prev is not None and event.obj == budget_from_manifest(prev):
                return  # the disruption controller's counts: nothing a scheduler reads changed
        except ManifestError as exc:  # the store validated it: only a reader stricter than the validation
            log.warning("in-process scheduler: %s", exc)
            return
        for scheduler in self.schedulers:
            scheduler.observe(event, now)

    def _cycle(self) -> None:
        self._scheduled = False
        now = self.store.clock()
        for index, scheduler in enumerate(self.schedulers):
            # every scheduler sees what the ones before it just did, as the simulator's driver delivers events
            self._observe_pending(now)
            decisions = scheduler.schedule(now)
            if decisions:
                apply_decisions(scheduler.name, decisions, self._sinks[index], self._unreserving[index], now)
            wake = scheduler.next_wakeup(now)
            # as the simulator's driver: every new wake-up time a scheduler asks for is kept (an earlier one is
            # not cancelled), so the schedulers are asked at the same time points as in `kubeflux simulate`
            if wake is not None and wake > now and self._wakeups.get(index) != wake:
                self._wakeups[index] = wake
                if wake not in self._timers:
                    timer = self.clock.call_later(self.loop, wake - now, Priority.WAKEUP, self._woken, wake)
                    self._timers[wake] = timer

    def _observe_pending(self, now: float) -> None:
        """Give every scheduler the events queued since the last call, in resourceVersion order."""
        batch: list[tuple[int, ResourceType, str, WatchEvent]] = []
        for resource, watcher in zip(self.resources, self._watchers, strict=True):
            while watcher.pending:
                type_, event = watcher.pending.popleft()
                batch.append((event.rv, resource, type_, event))
        batch.sort(key=lambda item: item[0])
        for _, resource, type_, event in batch:
            self._observe(type_, resource, event.obj, now, event.prev)

    def _pod(self, type_: str, obj: Object, prev: Object | None) -> Pod:
        """The pod ``obj`` as the schedulers see it: read once (:class:`~kubeflux.apiobjects.podreadings.PodReadings`),
        then brought up to date by what its writers change."""
        try:
            return self.readings.read(type_, obj, prev)
        finally:
            if type_ == "DELETED":  # (even when its last version cannot be read: the budget would stay for ever)
                self.event_budget.forget(obj["metadata"]["uid"])  # (the store gives every pod one)

    def known_pod(self, obj: Object, prev: Object | None) -> Pod | None:
        """The reading of pod ``obj`` (changed from ``prev``, its previous version) if it follows from the last one
        (:meth:`PodReadings.known`); None when the manifest must be read. The simulated kubelet asks here before
        reading a pod it admits: the schedulers have nearly always read it already."""
        return self.readings.known(obj, prev)

    def _wake_on_event(self) -> None:
        if not self.paced:  # paced: the pacer looks at the queued events itself
            self._wake()

    def _woken(self, wake: float) -> None:
        self._timers.pop(wake, None)
        self._wake()

    def write_claim(self, claim: ClaimBinding) -> None:
        """What a Bind writes for one of its pod's claims (:func:`~kubeflux.apiobjects.decisions.claim_patch`), as a
        JSON merge patch through the store; raises ApiError when it is refused."""
        patch = claim_patch(claim)
        if claim.volume:
            resource, namespace, name = self._volumes, "", claim.volume
        else:
            resource = self._claims
            namespace, _, name = claim.claim.partition("/")
        self.store.patch(resource, namespace, name, lambda obj: merge_patch(obj, patch))

    def unschedulable(
        self, pod: Object, message: str, expected: float | None, component: str, nominated: str = ""
    ) -> None:
        """``PodScheduled=False/Unschedulable`` with ``message`` on ``pod``, ``status.nominatedNodeName`` (removed
        when empty) and the expected start annotation, each written only when it changes, and a
        ``FailedScheduling`` event from ``component`` within the event budget when the condition changed."""
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        annotations = dict(meta.get("annotations") or {})
        wanted = None if expected is None else expected_start_text(expected)
        if annotations.get(EXPECTED_START_ANNOTATION) != wanted:
            for key, value in expected_start_annotations(wanted).items():  # seconds and RFC 3339, one update
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
            # stored versions are never changed in place: a new top level and metadata share the rest
            updated = {**pod, "metadata": {**pod["metadata"], "annotations": annotations}}
            try:
                pod = self.store.update(self.pods, namespace, name, updated, trusted=True)
            except ApiError:
                return
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        current = next((c for c in conditions if c.get("type") == POD_SCHEDULED), None)
        same = current is not None and current.get("reason") == UNSCHEDULABLE and current.get("message") == message
        if same and (status.get("nominatedNodeName") or "") == nominated:
            return
        kept = [c for c in conditions if c.get("type") != POD_SCHEDULED]
        new_status = {
            **status,
            "conditions": [*kept, current if same else unschedulable_condition(message, self.store.now())],
        }
        if nominated:  # as kube-scheduler writes it with the condition after preempting for the pod
            new_status["nominatedNodeName"] = nominated
        else:
            new_status.pop("nominatedNodeName", None)
        try:
            self.store.update(self.pods, namespace, name, {**pod, "status": new_status}, "status", trusted=True)
        except ApiError:
            return
        if not same and self.event_budget.take(meta["uid"], self.store.clock()):  # the condition is written regardless
            record_event(self.store, namespace, pod, "Warning", "FailedScheduling", message, component)


class _StoreSink:
    """Where one in-process scheduler writes its decisions (:func:`~kubeflux.scheduler.decisions.apply_decisions`):
    the store, through the API's own paths (see the module docstring)."""

    def __init__(self, shell: InProcessSchedulers, scheduler: str) -> None:
        self.shell, self.store, self.scheduler = shell, shell.store, scheduler

    def pod(self, key: str, uid: str) -> Object | None:
        namespace, name = key.split("/", 1)
        try:
            return self.store.get(self.shell.pods, namespace, name)
        except ApiError:
            return None

    def not_found(self, key: str) -> str:
        return f'pods "{key.split("/", 1)[1]}" not found'

    def owner(self, pod: Object) -> str:
        return str(pod.get("spec", {}).get("schedulerName"))

    def bind(self, pod: Object, decision: Bind) -> str:
        namespace, name = decision.pod.split("/", 1)
        written: list[Object] = []
        try:
            for claim in decision.volume_claims:  # PreBind: what the volume binder writes, before the Binding
                self.shell.write_claim(claim)
            if decision.resource_claims:  # kube-scheduler's PreBind: the claims' allocation and reservation first
                stamp = rfc3339(self.store.clock())  # the allocationTimestamp, in the served cluster's time
                write_claims(self.store, decision.resource_claims, name, decision.uid, written, stamp)
            self.store.bind(
                self.shell.pods, namespace, name, binding(name, decision.uid, decision.node, decision.annotations)
            )
        except ApiError as exc:
            with contextlib.suppress(ApiError):  # kube-scheduler's Unreserve
                unwrite_claims(self.store, written, decision.uid)
            return exc.message or f"{exc.code} {exc.reason}"  # never empty: empty says bound
        self.shell.bound += 1
        message = scheduled_message(decision.pod, decision.node)
        record_event(self.store, namespace, pod, "Normal", "Scheduled", message, self.scheduler)
        return ""

    def unschedulable(self, pod: Object, decision: Unschedulable) -> None:
        self.shell.unschedulable(
            pod, decision.message, decision.expected_start, self.scheduler, decision.nominated_node
        )

    def deallocate(self, pod: Object, decision: Deallocate) -> str:
        try:
            free_claim(self.store, decision.claim)
        except ApiError as exc:
            return exc.message or f"{exc.code} {exc.reason}"
        return ""

    def reject(self, pod: Object, decision: Reject) -> None:
        self.shell.unschedulable(pod, decision.message, None, self.scheduler)
        for listener in self.shell.rejected:
            listener(pod["metadata"]["uid"], decision.message)

    def warn(self, pod: Object, decision: PodWarning) -> None:  # about any scheduler's pod: a Warning event on it
        namespace = decision.pod.split("/", 1)[0]
        record_event(self.store, namespace, pod, "Warning", decision.reason, decision.message, self.scheduler)

    def evict(self, pod: Object, decision: Evict) -> str:
        """Through the Eviction API when the decision keeps budgets, else as kube-scheduler's preemption: the
        ``DisruptionTarget`` condition written, then a delete (with the pod's grace period); a ``Preempted``
        event on the pod either way. Only the pod of the decision's uid is evicted (a delete precondition)."""
        namespace, name = decision.pod.split("/", 1)
        try:
            if decision.budgets:
                options = {"preconditions": {"uid": decision.uid}} if decision.uid else {}
                evict(self.store, self.shell.pods, namespace, name, {"deleteOptions": options})
            else:
                if decision.uid and pod["metadata"].get("uid") != decision.uid:
                    return self.not_found(decision.pod)
                message = f"{self.scheduler}: preempting to accommodate a higher priority pod"
                mark_disrupted(self.store, self.shell.pods, pod, PREEMPTION_CONDITION_REASON, message)
                self.store.delete(self.shell.pods, namespace, name, uid=decision.uid)
        except ApiError as exc:
            causes = "".join(f" ({cause.message})" for cause in exc.causes if cause.message)
            return f"{exc.message or f'{exc.code} {exc.reason}'}{causes}"
        record_event(self.store, namespace, pod, "Normal", PREEMPTED_REASON, decision.message, self.scheduler)
        return ""

    def problem(self, message: str) -> None:
        log.warning("%s", message)


def _enabling(type_: str, event: WatchEvent) -> bool:
    """An event that may let a pending pod run, or that a scheduler must hear before time moves on: an object
    added or deleted, a node changed, a pod group's spec changed, a namespace labelled anew, a pod that ended or
    started terminating, a pod whose last scheduling gate was removed. A
    scheduler's own writes (binds, ``Unschedulable`` conditions, expected starts) and the kubelet's progress of a
    bound pod are not: the simulator does not ask its schedulers again for them either."""
    if type_ != "MODIFIED" or event.prev is None:
        return True
    kind = event.obj.get("kind")
    if kind == "Node":
        return not _heartbeat_only(event.obj, event.prev)
    if kind in ("PodGroup", "PodDisruptionBudget"):
        return bool(event.obj.get("spec") != event.prev.get("spec"))
    if kind in ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode"):
        return True  # a claim bound, a volume made available, a limit changed: a pod may fit now
    if kind in ("ResourceClaim", "ResourceSlice", "DeviceClass"):
        return True  # devices given back, published or selected anew
    if kind == "Namespace":  # labelled anew: a namespaceSelector may select it now, or no more
        return bool(event.obj["metadata"].get("labels") != event.prev["metadata"].get("labels"))
    status, before = event.obj.get("status") or {}, event.prev.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed") and before.get("phase") not in ("Succeeded", "Failed"):
        return True
    spec, was = event.obj.get("spec"), event.prev.get("spec")
    if spec is not was and gates_of(was) and not gates_of(spec):
        return True  # its last scheduling gate removed: the pod may be placed now
    if status.get("resourceClaimStatuses") != before.get("resourceClaimStatuses"):
        return True  # a claim made for it from its template: it may be placed now
    return bool(event.obj["metadata"].get("deletionTimestamp") and not event.prev["metadata"].get("deletionTimestamp"))


def _status_only(obj: Object, prev: Object) -> bool:
    """Whether only the status (and the resourceVersion) of ``prev`` changed."""
    meta, old = obj["metadata"], prev["metadata"]
    return obj.get("spec") == prev.get("spec") and {**meta, "resourceVersion": ""} == {**old, "resourceVersion": ""}


def _heartbeat_only(obj: Object, prev: Object) -> bool:
    """Whether a node changed only in its conditions' ``lastHeartbeatTime`` (and its resourceVersion)."""

    def beatless(node: Object) -> Object:
        status = node.get("status") or {}
        conditions = [
            {k: v for k, v in c.items() if k != "lastHeartbeatTime"} if isinstance(c, dict) else c
            for c in status.get("conditions") or ()
        ]
        return {**status, "conditions": conditions}

    return _status_only(obj, prev) and beatless(obj) == beatless(prev)
