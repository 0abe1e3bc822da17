"""The served cluster's resource quota controller: every ResourceQuota's ``status``, as kube-controller-manager's
(``pkg/controller/resourcequota``) keeps it.

A quota is synced when it is created, when its ``spec.hard`` differs from its ``status.hard`` (an edit) or it has no
``status.used``, and, for every quota of a namespace, when an object counted there is deleted or one of its pods
ends (``Succeeded``/``Failed``: it stops using compute resources), as the real controller's replenishment does. A
sync writes ``status.hard`` (the spec's) and ``status.used``: for each resource the quota names that an evaluator
counts (:mod:`.quota`), the use of the namespace's objects that match the quota's scopes (0 when none do, or for
what ``cluster serve`` holds none of: Services, PersistentVolumeClaims); a use it cannot count keeps its last
value. An unchanged status is not written. Creates are counted at admission (:mod:`.quota_admission`), not here.

Not done as the real controller does: its full recount every 5 minutes (``--resource-quota-sync-period``), and
a pod stuck Terminating past its grace period stops counting on a real cluster.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler
from kubeflux.sim.apiserver.quota import QUIET_NAMES, CountEvaluator, PodEvaluator, evaluator_for, scope_selectors
from kubeflux.sim.apiserver.registry import Registry, ResourceType
from kubeflux.sim.apiserver.resourcelists import Amount, ResourceList, add, as_json, mask, parse_list
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["CONTROLLER_MANAGER", "QuotaController", "always_zero", "quota_status"]

Object = dict[str, Any]
CONTROLLER_MANAGER = "kube-controller-manager"
"""Who the controller's status writes are recorded as (``managedFields``), as on the real server."""


def _ended(pod: Object) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _in_namespace(store: Store, resource: ResourceType, namespace: str) -> list[Object]:
    prefix = f"{namespace}/"
    return [obj for key, obj in store.collection_of(resource).objects.items() if key.startswith(prefix)]


def always_zero(registry: Registry) -> frozenset[str]:
    """The resource names whose use is always 0 on the served cluster: what counts Services and claims, and the
    ``count/...`` of the kinds it serves as empty collections (the real controller counts them: 0)."""
    names = set(QUIET_NAMES)
    for resource in registry.resources:
        evaluator = evaluator_for(resource)
        if resource.read_only_empty and isinstance(evaluator, CountEvaluator):
            names.update(evaluator.names)
    return frozenset(names)


def quota_status(store: Store, quota: Object, zero: frozenset[str]) -> Object:
    """The status the controller writes for ``quota`` (see the module docstring); ``zero``: :func:`always_zero`."""
    spec = quota.get("spec") or {}
    hard = parse_list(spec.get("hard"))
    names = sorted(hard)
    selectors = scope_selectors(quota)
    namespace = quota["metadata"]["namespace"]
    counted: ResourceList = {}
    for resource in store.registry.resources:
        evaluator = evaluator_for(resource)
        if evaluator is None or resource.read_only_empty:
            continue
        matched = evaluator.matching(names)
        if not matched:
            continue
        usage: ResourceList = {name: Amount(Fraction(0)) for name in matched}
        if isinstance(evaluator, PodEvaluator) or not selectors:
            for obj in _in_namespace(store, resource, namespace):
                if all(evaluator.matches_scope(s, obj) for s in selectors):
                    usage = add(usage, evaluator.usage(obj))
        counted.update(mask(usage, matched))
    counted.update({name: Amount(Fraction(0)) for name in names if name in zero})
    used = {**parse_list((quota.get("status") or {}).get("used")), **counted}
    return {"hard": {name: str(hard[name]) for name in names}, "used": as_json(mask(used, names))}


def _needs_sync(quota: Object) -> bool:
    status = quota.get("status") or {}
    hard = parse_list((quota.get("spec") or {}).get("hard"))
    return "used" not in status or "hard" not in status or as_json(hard) != as_json(parse_list(status.get("hard")))


class QuotaController:
    """Keeps every ResourceQuota's status, on the server's loop."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        quotas = store.registry.find("", "v1", "resourcequotas")
        assert quotas is not None and not quotas.read_only_empty
        self.store, self.quotas = store, quotas
        self._zero = always_zero(store.registry)
        self._by_namespace: dict[str, set[str]] = {}
        """namespace → the names of its quotas."""
        follow = [(quotas, self._quota_event)]
        seen = {quotas.collection}
        for resource in store.registry.resources:
            if resource.read_only_empty or resource.collection in seen or evaluator_for(resource) is None:
                continue
            seen.add(resource.collection)
            follow.append((resource, self._object_event))
        self.reconciler: Reconciler[tuple[str, str]] = Reconciler(store, loop, follow, self._sync)
        """Syncs each (namespace, name) of a quota the events touched, once per batch."""
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()

    def _quota_event(self, type_: str, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if type_ == "DELETED":
            self._by_namespace.get(namespace, set()).discard(name)
            self.reconciler.discard((namespace, name))
            return
        self._by_namespace.setdefault(namespace, set()).add(name)
        if type_ == "ADDED" or _needs_sync(event.obj):
            self.reconciler.add((namespace, name))

    def _object_event(self, type_: str, event: WatchEvent) -> None:
        namespace = event.obj["metadata"].get("namespace", "")
        names = self._by_namespace.get(namespace)
        if not names:
            return
        replenish = type_ == "DELETED" or (
            type_ == "MODIFIED" and event.prev is not None and _ended(event.obj) and not _ended(event.prev)
        )
        if replenish:
            for name in names:
                self.reconciler.add((namespace, name))

    def _sync(self, key: tuple[str, str]) -> None:
        namespace, name = key
        quota = self.store.find(self.quotas, namespace, name)
        if quota is None:
            return
        status = quota_status(self.store, quota, self._zero)
        if status == quota.get("status"):
            return
        with self.store.request(CONTROLLER_MANAGER):
            try:
                self.store.update(self.quotas, namespace, name, {**quota, "status": status}, "status", trusted=True)
            except ApiError:
                return
