"""What the scheduler core's device tests share (test_devices.py, test_device_claims.py): a cluster of 8-core nodes
told the GPU class and the slices given."""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.resourceclaims import device_class_from_manifest, slice_from_manifest
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.testing import ADDED, Cluster, node
from tests.dra import gpu_class


def cluster_with(*slices: dict[str, Any], nodes: tuple[str, ...] = ("w1", "w2")) -> Cluster:
    cluster = Cluster(KubefluxScheduler(), [node(name, cores=8) for name in nodes])
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    for item in slices:
        cluster.tell(ADDED, slice_from_manifest(item))
    return cluster
