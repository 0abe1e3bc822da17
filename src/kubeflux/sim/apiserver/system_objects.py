"""The objects a real cluster holds from its start, made by the API server itself or by kube-controller-manager a
moment after what they belong to: the four system namespaces, the two ``system-`` PriorityClasses, the ConfigMap
dating the tracking of legacy ServiceAccount tokens, and each namespace's ``default`` ServiceAccount."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from kubeflux.sim.apiserver.registry import Registry, ResourceType

__all__ = ["DEFAULT_NAMESPACES", "LEGACY_TOKEN_TRACKING", "SYSTEM_PRIORITY_CLASSES", "default_account", "make"]


class Store(Protocol):
    """What of :class:`kubeflux.sim.apiserver.store.Store` these objects are made through."""

    registry: Registry
    namespaces: ResourceType | None

    def create(self, resource: ResourceType, namespace: str, body: Any, *, trusted: bool = False) -> Any: ...
    def request(self, manager: str = "") -> AbstractContextManager[None]: ...
    def now(self) -> str: ...


DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SYSTEM_PRIORITY_CLASSES = (
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
)
"""The PriorityClasses the real server creates at start (as ``kube-apiserver``, its own field manager)."""
LEGACY_TOKEN_TRACKING = "kube-apiserver-legacy-service-account-token-tracking"
"""The ConfigMap in ``kube-system`` the real server creates at start (``data.since``: its first day), which
kube-controller-manager's cleaner of legacy token Secrets reads (it logs an error on every run without it)."""


def make(store: Store) -> None:
    """What a new store holds (of the resources its registry serves), as a real server's after its start."""
    registry = store.registry
    if store.namespaces is not None:
        for name in DEFAULT_NAMESPACES:
            store.create(store.namespaces, "", {"metadata": {"name": name}})
    priority_classes = registry.find("scheduling.k8s.io", "v1", "priorityclasses")
    if priority_classes is not None:
        with store.request("kube-apiserver"):
            for name, value, description in SYSTEM_PRIORITY_CLASSES:
                pc = {"metadata": {"name": name}, "value": value, "description": description}
                store.create(priority_classes, "", pc)
    configmaps = registry.find("", "v1", "configmaps")
    if configmaps is not None and store.namespaces is not None:
        since = {"since": store.now()[:10]}
        with store.request("kube-apiserver"):
            store.create(configmaps, "kube-system", {"metadata": {"name": LEGACY_TOKEN_TRACKING}, "data": since})


def default_account(store: Store, namespace: str) -> None:
    """A new namespace's ``default`` ServiceAccount, as kube-controller-manager's ServiceAccount controller makes it a
    moment later (a real one run against the store finds it made). It has no field to own: no ``managedFields``."""
    accounts = store.registry.find("", "v1", "serviceaccounts")
    if accounts is not None:
        store.create(accounts, namespace, {"metadata": {"name": "default"}}, trusted=True)
