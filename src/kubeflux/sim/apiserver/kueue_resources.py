"""Kueue's objects served as the real Kueue v0.17's CRDs serve them (``kueue.x-k8s.io``): ResourceFlavor,
ClusterQueue and LocalQueue, checked as the simulator's reader checks them (:mod:`kubeflux.sim.kueue.reader`, which
holds them to Kueue's webhooks), and Workload, stored as the served cluster's Kueue writes it
(:mod:`kubeflux.sim.apiserver.kueue`). Names, scope, short names and status subresources are the CRDs'
(``build/kube/kueue-crds``); their printer columns are in :mod:`kubeflux.sim.apiserver.tables`.

Kueue v0.17 serves ``v1beta1`` and ``v1beta2`` (its storage version); only ``v1beta1`` is served here, the version
the simulator's workload files are written in (``v1beta2`` renames fields, e.g. ``spec.cohort`` → ``cohortName``,
and would need a conversion).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubeflux.sim.apiserver.core_strategies import unreadable_causes
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType, Strategy
from kubeflux.sim.kueue.objects import API_VERSION
from kubeflux.sim.kueue.reader import read_cluster_queue, read_flavor, read_local_queue

__all__ = ["KUEUE_GROUP", "KUEUE_VERSION", "KueueStrategy", "kueue_resources"]

Object = dict[str, Any]
KUEUE_GROUP, _, KUEUE_VERSION = API_VERSION.partition("/")
WORKLOADS: Final = "kueue.x-k8s.io/workloads"
"""The collection of Workloads, as the store names it."""


class KueueStrategy(Strategy):
    """A Kueue object: checked by the simulator's reader of its kind (Kueue's webhooks' checks), as a CRD stores it
    (its generation tracked)."""

    tracks_generation = True

    def __init__(self, read: Callable[[Mapping[str, Any]], object] | None, *, status: bool) -> None:
        self.read = read
        self.has_status = status

    def validate(self, obj: Object) -> list[Cause]:
        if self.read is None:
            return []
        return unreadable_causes(self.read, {"apiVersion": API_VERSION, **obj})


def kueue_resources() -> list[ResourceType]:
    """The served Kueue resources (group ``kueue.x-k8s.io``, version ``v1beta1``)."""
    status = ("status",)
    return [
        ResourceType(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "resourceflavors",
            "ResourceFlavor",
            False,
            KueueStrategy(read_flavor, status=False),
            ("flavor", "flavors", "rf"),
        ),
        ResourceType(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "clusterqueues",
            "ClusterQueue",
            False,
            KueueStrategy(read_cluster_queue, status=True),
            ("cq",),
            (),
            status,
        ),
        ResourceType(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "localqueues",
            "LocalQueue",
            True,
            KueueStrategy(read_local_queue, status=True),
            ("queue", "queues", "lq"),
            (),
            status,
        ),
        ResourceType(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "workloads",
            "Workload",
            True,
            KueueStrategy(None, status=True),
            ("kwl", "kueueworkload", "kueueworkloads"),
            (),
            status,
        ),
    ]
