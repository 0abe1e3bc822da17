"""Controllers of the served cluster: the PodGroup status, as scheduler-plugins' coscheduling writes it.

The PodGroup controller of scheduler-plugins (``pkg/controllers/podgroup_controller.go``) keeps, for each group,
the counts of its pods (label ``scheduling.x-k8s.io/pod-group``) that are Running, Succeeded and Failed, and its
phase: ``Pending`` until ``minMember`` pods exist, then ``PreScheduling``; ``Scheduled`` once ``minMember`` are
scheduled, ``Running`` once that many run or succeeded, ``Finished`` when that many succeeded, ``Failed`` when one
failed and the rest cannot make up ``minMember``. What coscheduling's plugin adds on a real cluster — ``scheduled``
(bound pods) and the ``Scheduling`` phase once the first is bound, with ``scheduleStartTime`` — is written here
too, since kubeflux's schedulers do not write PodGroup status. Status goes through ``podgroups/status``; an
unchanged status is not written.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.scheduler.objects import POD_GROUP_LABEL
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["PodGroupController", "podgroup_status"]

Object = dict[str, Any]


def podgroup_status(group: Object, pods: list[Object], now: str) -> Object:
    """The next status of ``group`` given its pods (the controller's rule, plus the plugin's ``scheduled``)."""
    status = dict(group.get("status") or {})
    min_member = int(group.get("spec", {}).get("minMember", 1))
    phase = status.get("phase", "")
    phases = [p.get("status", {}).get("phase") for p in pods]
    status["scheduled"] = sum(1 for p in pods if p.get("spec", {}).get("nodeName"))
    if status["scheduled"] and phase == "PreScheduling":  # coscheduling's plugin, at the first bind
        phase = "Scheduling"
        status.setdefault("scheduleStartTime", now)
    if phase == "":
        phase = "Pending"
    elif phase == "Pending":
        if len(pods) >= min_member:
            phase = "PreScheduling"
    else:
        status["running"] = phases.count("Running")
        status["succeeded"] = phases.count("Succeeded")
        status["failed"] = phases.count("Failed")
        if not pods:
            phase = "Pending"
        else:
            if status["scheduled"] >= min_member and phase == "Scheduling":
                phase = "Scheduled"
            if status["succeeded"] + status["running"] >= min_member and phase == "Scheduled":
                phase = "Running"
            if status["failed"] and status["failed"] + status["running"] + status["succeeded"] >= min_member:
                phase = "Failed"
            if status["succeeded"] >= min_member:
                phase = "Finished"
    status["phase"] = phase
    return status


class PodGroupController:
    """Keeps every PodGroup's status in step with its pods, on the server's loop."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        pods, groups = served(store, ("", "v1", "pods"), ("scheduling.x-k8s.io", "v1alpha1", "podgroups"))
        self.store, self.loop, self.pods, self.groups = store, loop, pods, groups
        self._members: dict[tuple[str, str], dict[str, Object]] = {}
        """(namespace, group) → uid → the latest version of each pod labelled with the group."""
        self._group_of: dict[str, tuple[str, str]] = {}
        self.reconciler: Reconciler[tuple[str, str]] = Reconciler(
            store, loop, [(pods, self._pod_event), (groups, self._group_event)], self._update
        )
        """Follows pods and groups; syncs each group (namespace, name) their events touched."""
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()

    def _pod_event(self, type_: str, event: WatchEvent) -> None:
        self._member(type_, event.obj)

    def _group_event(self, type_: str, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        self.reconciler.add((meta["namespace"], meta["name"]))

    def _member(self, type_: str, pod: Object) -> None:
        """Keep the index of each group's pods (a pod may gain, lose or change its group label)."""
        meta = pod["metadata"]
        uid = meta["uid"]
        before = self._group_of.pop(uid, None)
        if before is not None:
            self._members.get(before, {}).pop(uid, None)
            self.reconciler.add(before)
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if type_ != "DELETED" and group is not None:
            key = (meta["namespace"], group)
            self._group_of[uid] = key
            self._members.setdefault(key, {})[uid] = pod
            self.reconciler.add(key)

    def _update(self, key: tuple[str, str]) -> None:
        namespace, name = key
        group = self.store.find(self.groups, namespace, name)
        if group is None:
            return
        pods = list(self._members.get((namespace, name), {}).values())
        status = podgroup_status(group, pods, self.store.now())
        if status == group.get("status"):
            return
        updated = {**group, "status": status}  # a status write reads only the status
        try:
            self.store.update(self.groups, namespace, name, updated, "status", trusted=True)
        except ApiError:
            return
