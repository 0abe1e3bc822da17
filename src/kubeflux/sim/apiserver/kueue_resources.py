"""Kueue's objects served as the real Kueue v0.17's CRDs serve them (``kueue.x-k8s.io``): ResourceFlavor,
ClusterQueue and LocalQueue, checked as the simulator's reader checks them (:mod:`kubeflux.sim.kueue.reader`, which
holds them to Kueue's webhooks), and Workload, stored as the served cluster's Kueue writes it
(:mod:`kubeflux.sim.apiserver.kueue`). Names, scope, short names and status subresources are the CRDs'
(``build/kube/kueue-crds``); their printer columns are in :mod:`kubeflux.sim.apiserver.tables`.

Kueue v0.17 serves ``v1beta1`` (deprecated) and ``v1beta2`` (its storage version, preferred: what ``kubectl get``
shows). Both are served here, over one collection of each resource stored as ``v1beta1`` (the version the
simulator's reader reads): ``v1beta2`` is a view, converted as Kueue's conversion webhook converts the fields that
differ (:func:`to_v1beta2`, :func:`from_v1beta2`): a ClusterQueue's ``spec.cohort`` is ``spec.cohortName`` and its
``admissionChecks`` names are ``admissionChecksStrategy.admissionChecks``; a Workload's ``priorityClassName`` and
``priorityClassSource`` are its ``priorityClassRef``; a LocalQueue's ``status.flavorUsage`` is ``flavorsUsage``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubeflux.sim.apiserver.core_strategies import unreadable_causes
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType, Strategy
from kubeflux.sim.kueue.objects import API_VERSION
from kubeflux.sim.kueue.reader import read_cluster_queue, read_flavor, read_local_queue

__all__ = ["KUEUE_GROUP", "KUEUE_VERSION", "V1BETA2", "KueueStrategy", "from_v1beta2", "kueue_resources", "to_v1beta2"]

Object = dict[str, Any]
KUEUE_GROUP, _, KUEUE_VERSION = API_VERSION.partition("/")
WORKLOADS: Final = "kueue.x-k8s.io/workloads"
"""The collection of Workloads, as the store names it."""


_CLUSTER_QUEUE_DEFAULTS: Final[Object] = {
    "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    "preemption": {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    },
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
}
"""The defaults of a ClusterQueue's spec in Kueue v0.17's CRD (both versions)."""
_LOCAL_QUEUE_DEFAULTS: Final[Object] = {"stopPolicy": "None"}
_FAIR_SHARING_DEFAULTS: Final[Object] = {"weight": 1}


def _fill(obj: Object, defaults: Object) -> None:
    """The fields of ``defaults`` missing from ``obj``, filled in (nested objects field by field), as the API server
    defaults a CRD's fields from its schema."""
    for key, value in defaults.items():
        if key not in obj or obj[key] is None:
            obj[key] = _copy(value)
        elif isinstance(value, dict) and isinstance(obj[key], dict):
            _fill(obj[key], value)


def _copy(value: Any) -> Any:
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, dict) else value


class KueueStrategy(Strategy):
    """A Kueue object: checked by the simulator's reader of its kind (Kueue's webhooks' checks), defaulted and stored
    as its CRD is (its generation tracked)."""

    tracks_generation = True

    def __init__(
        self, read: Callable[[Mapping[str, Any]], object] | None, *, status: bool, defaults: Object | None = None
    ) -> None:
        self.read = read
        self.has_status = status
        self.defaults = defaults or {}

    def canonicalize(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and self.defaults:
            _fill(spec, self.defaults)
            if isinstance(spec.get("fairSharing"), dict):
                _fill(spec["fairSharing"], _FAIR_SHARING_DEFAULTS)

    def validate(self, obj: Object) -> list[Cause]:
        if self.read is None:
            return []
        return unreadable_causes(self.read, {"apiVersion": API_VERSION, **obj})


V1BETA2: Final = "v1beta2"
_PRIORITY_SOURCES = {"kueue.x-k8s.io/workloadpriorityclass": "WorkloadPriorityClass"}


def to_v1beta2(obj: Object) -> Object:
    """A stored (``v1beta1``) Kueue object as ``v1beta2`` shows it."""
    view = {**obj, "apiVersion": f"{KUEUE_GROUP}/{V1BETA2}"}
    spec, status = obj.get("spec"), obj.get("status")
    if isinstance(spec, dict):
        spec = view["spec"] = dict(spec)
        if "cohort" in spec:
            spec["cohortName"] = spec.pop("cohort")
        checks = spec.pop("admissionChecks", None)
        if isinstance(checks, list) and checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
        if "priorityClassName" in spec:
            source = spec.pop("priorityClassSource", "")
            kind = _PRIORITY_SOURCES.get(source, "PriorityClass")
            group = KUEUE_GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
            spec["priorityClassRef"] = {"group": group, "kind": kind, "name": spec.pop("priorityClassName")}
    if isinstance(status, dict) and obj.get("kind") == "LocalQueue" and "flavorUsage" in status:
        status = view["status"] = dict(status)
        status["flavorsUsage"] = status.pop("flavorUsage")
        status.pop("flavors", None)
    return view


def from_v1beta2(obj: Object) -> Object:
    """A ``v1beta2`` Kueue object as it is stored (``v1beta1``)."""
    stored = {**obj, "apiVersion": API_VERSION}
    spec, status = obj.get("spec"), obj.get("status")
    if isinstance(spec, dict):
        spec = stored["spec"] = dict(spec)
        if "cohortName" in spec:
            spec["cohort"] = spec.pop("cohortName")
        strategy = spec.get("admissionChecksStrategy")
        if isinstance(strategy, dict) and strategy.keys() == {"admissionChecks"}:
            checks = strategy["admissionChecks"]
            if isinstance(checks, list) and all(isinstance(c, dict) and c.keys() == {"name"} for c in checks):
                spec.pop("admissionChecksStrategy")
                spec["admissionChecks"] = [c["name"] for c in checks]
        ref = spec.get("priorityClassRef")
        if isinstance(ref, dict):
            spec.pop("priorityClassRef")
            spec["priorityClassName"] = ref.get("name", "")
            by_kind = {kind: source for source, kind in _PRIORITY_SOURCES.items()}
            spec["priorityClassSource"] = by_kind.get(ref.get("kind", ""), "scheduling.k8s.io/priorityclass")
    if isinstance(status, dict) and "flavorsUsage" in status:
        status = stored["status"] = dict(status)
        status["flavorUsage"] = status.pop("flavorsUsage")
    return stored


def kueue_resources() -> list[ResourceType]:
    """The served Kueue resources (group ``kueue.x-k8s.io``): ``v1beta2`` (preferred, as Kueue v0.17 serves it),
    a view of the stored ``v1beta1``."""
    served = _kueue_resources()
    views = [
        dataclasses.replace(r, version=V1BETA2, to_view=to_v1beta2, from_view=from_v1beta2, storage=r.collection)
        for r in served
    ]
    return [*views, *served]


def _kueue_resources() -> list[ResourceType]:
    def kueue(
        plural: str, kind: str, namespaced: bool, strategy: KueueStrategy, short: tuple[str, ...]
    ) -> ResourceType:
        status = ("status",) if strategy.has_status else ()
        return ResourceType(KUEUE_GROUP, KUEUE_VERSION, plural, kind, namespaced, strategy, short, (), status)

    return [
        kueue(
            "resourceflavors",
            "ResourceFlavor",
            False,
            KueueStrategy(read_flavor, status=False),
            ("flavor", "flavors", "rf"),
        ),
        kueue(
            "clusterqueues",
            "ClusterQueue",
            False,
            KueueStrategy(read_cluster_queue, status=True, defaults=_CLUSTER_QUEUE_DEFAULTS),
            ("cq",),
        ),
        kueue(
            "localqueues",
            "LocalQueue",
            True,
            KueueStrategy(read_local_queue, status=True, defaults=_LOCAL_QUEUE_DEFAULTS),
            ("queue", "queues", "lq"),
        ),
        kueue(
            "workloads", "Workload", True, KueueStrategy(None, status=True), ("kwl", "kueueworkload", "kueueworkloads")
        ),
    ]
