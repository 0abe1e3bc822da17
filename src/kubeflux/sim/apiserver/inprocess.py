"""Schedulers of kubeflux running inside the served cluster (``kubeflux cluster serve --scheduler kubeflux``).

A thin shell, like the simulator's driver, over the same core contract (:mod:`kubeflux.scheduler.interface`): the
store's watch events of nodes, pod groups and pods become :class:`ClusterEvent` objects (read by the same manifest
readers as everywhere else) given to ``observe`` in resourceVersion order; ``schedule(now)`` runs after each batch
and at the scheduler's ``next_wakeup``, in the store's time (Unix seconds; accelerated with ``--speed``).
Decisions go through the API's own paths, as a scheduler outside the process would send them: a :class:`Bind` is
a ``pods/binding`` (refused ones are told back with ``unreserve``) and a ``Scheduled`` event; an
:class:`Unschedulable` or :class:`Reject` sets ``PodScheduled=False/Unschedulable`` through ``pods/status`` with a
``FailedScheduling`` event, and the expected start annotation. Unchanged conditions and annotations are not
written again (no event storms, no loops).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubeflux.scheduler.interface import (
    EXPECTED_START_ANNOTATION,
    Bind,
    ClusterEvent,
    Decision,
    EventKind,
    PodWarning,
    Scheduler,
    Unreserve,
    Unschedulable,
    expected_start_text,
)
from kubeflux.scheduler.kube_objects import ManifestError, node_from_manifest, pod_from_manifest, podgroup_from_manifest
from kubeflux.scheduler.objects import Node, Pod, PodGroup
from kubeflux.sim.apiserver.clock import ServedClock
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.kubelet import record_event
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.store import Store, clone
from kubeflux.sim.apiserver.watch import Watcher, WatchEvent

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
        clock: ServedClock | None = None,
    ) -> None:
        self.store, self.loop, self.schedulers = store, loop, list(schedulers)
        self.clock = clock or ServedClock()
        registry = store.registry
        kinds = [("", "v1", "nodes"), ("scheduling.x-k8s.io", "v1alpha1", "podgroups"), ("", "v1", "pods")]
        self.resources: list[ResourceType] = [r for r in (registry.find(*k) for k in kinds) if r is not None]
        self.pods = self.resources[-1]
        self._watchers: list[Watcher] = []
        self._scheduled = False
        self._wakeup: asyncio.TimerHandle | None = None
        self.bound = 0
        now = store.clock()
        for resource in self.resources:
            watcher = Watcher(resource, "", LabelSelector(), FieldSelector(), backlog=10**9)
            watcher.wake = self._wake
            store.collections[resource.collection].watchers.add(watcher)
            self._watchers.append(watcher)
            for obj in list(store.objects(resource)):
                self._observe("ADDED", resource, obj, now)
        self._wake()

    def stop(self) -> None:
        for resource, watcher in zip(self.resources, self._watchers, strict=True):
            self.store.stop_watch(resource, watcher)
        if self._wakeup is not None:
            self._wakeup.cancel()

    def _wake(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._cycle)

    def _observe(self, type_: str, resource: ResourceType, obj: Object, now: float) -> None:
        try:
            converted: Pod | Node | PodGroup
            if resource.kind == "Node":
                converted = node_from_manifest(obj)
            elif resource.kind == "PodGroup":
                converted = podgroup_from_manifest(obj)
            else:
                converted = pod_from_manifest(obj)
        except ManifestError as exc:  # the store validated it: only a reader stricter than the validation
            log.warning("in-process scheduler: %s", exc)
            return
        event = ClusterEvent(EventKind(type_), converted)
        for scheduler in self.schedulers:
            scheduler.observe(event, now)

    def _cycle(self) -> None:
        self._scheduled = False
        now = self.store.clock()
        batch: list[tuple[int, ResourceType, str, WatchEvent]] = []
        for resource, watcher in zip(self.resources, self._watchers, strict=True):
            while watcher.pending:
                type_, event = watcher.pending.popleft()
                batch.append((event.rv, resource, type_, event))
        batch.sort(key=lambda item: item[0])
        for _, resource, type_, event in batch:
            self._observe(type_, resource, event.obj, now)
        earliest: float | None = None
        for scheduler in self.schedulers:
            decisions = scheduler.schedule(now)
            for decision in decisions:
                self._apply(scheduler, decision, now)
            wake = scheduler.next_wakeup(now)
            if wake is not None and wake > now and (earliest is None or wake < earliest):
                earliest = wake
        if earliest is not None:
            if self._wakeup is not None:
                self._wakeup.cancel()
            self._wakeup = self.loop.call_later(self.clock.wall(earliest - now), self._wake)

    def _apply(self, scheduler: Scheduler, decision: Decision, now: float) -> None:
        namespace, name = decision.pod.split("/", 1)
        try:
            pod = self.store.get(self.pods, namespace, name)
        except ApiError:
            if isinstance(decision, Bind) and isinstance(scheduler, Unreserve):
                scheduler.unreserve(decision.pod, decision.uid, decision.node, f'pods "{name}" not found', now)
            return
        if isinstance(decision, PodWarning):  # about any scheduler's pod: a Warning event on it
            record_event(self.store, namespace, pod, "Warning", decision.reason, decision.message, scheduler.name)
            return
        if pod.get("spec", {}).get("schedulerName") != scheduler.name:
            log.warning("scheduler %s decided for pod %s owned by another scheduler", scheduler.name, decision.pod)
            return
        if isinstance(decision, Bind):
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "uid": decision.uid, "annotations": dict(decision.annotations)},
                "target": {"kind": "Node", "name": decision.node},
            }
            try:
                self.store.bind(self.pods, namespace, name, binding)
            except ApiError as exc:
                if isinstance(scheduler, Unreserve):
                    scheduler.unreserve(decision.pod, decision.uid, decision.node, exc.message, now)
                return
            self.bound += 1
            message = f"Successfully assigned {decision.pod} to {decision.node}"
            record_event(self.store, namespace, pod, "Normal", "Scheduled", message, scheduler.name)
            return
        expected = decision.expected_start if isinstance(decision, Unschedulable) else None
        self._unschedulable(pod, decision.message, expected, scheduler.name)

    def _unschedulable(self, pod: Object, message: str, expected: float | None, component: str) -> None:
        meta = pod["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        annotations = dict(meta.get("annotations") or {})
        wanted = None if expected is None else expected_start_text(expected)
        if annotations.get(EXPECTED_START_ANNOTATION) != wanted:
            if wanted is None:
                annotations.pop(EXPECTED_START_ANNOTATION, None)
            else:
                annotations[EXPECTED_START_ANNOTATION] = wanted
            updated = clone(pod)
            updated["metadata"]["annotations"] = annotations
            try:
                pod = self.store.update(self.pods, namespace, name, updated)
            except ApiError:
                return
        conditions = pod.get("status", {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if current is not None and current.get("reason") == "Unschedulable" and current.get("message") == message:
            return
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": self.store.now(),
        }
        updated = clone(pod)
        status = updated.setdefault("status", {})
        status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
        try:
            self.store.update(self.pods, namespace, name, updated, "status")
        except ApiError:
            return
        record_event(self.store, namespace, pod, "Warning", "FailedScheduling", message, component)
