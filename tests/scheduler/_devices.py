"""What the scheduler core's device tests share (test_devices.py, test_device_claims.py,
test_confining_devices.py): a cluster of 8-core nodes told the GPU class and the slices given, and a gang member kept
in one zone with its claim."""

from __future__ import annotations

import dataclasses
from typing import Any

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.apiobjects.resourceclaims import device_class_from_manifest, slice_from_manifest
from kubeflux.scheduler.confining import REQUIRED_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Pod
from kubeflux.scheduler.testing import ADDED, Cluster, node
from kubeflux.scheduler.topology import ZONE_LEVEL
from tests.dra import gpu_class

POOL = "example.com/pool"
"""A node label that is not a topology level."""


def cluster_with(*slices: dict[str, Any], nodes: tuple[str, ...] = ("w1", "w2")) -> Cluster:
    cluster = Cluster(KubefluxScheduler(), [node(name, cores=8) for name in nodes])
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    for item in slices:
        cluster.tell(ADDED, slice_from_manifest(item))
    return cluster


def ranked(name: str, claim_name: str, asks: str, group: str = "mpi", t: float = 0.0) -> Pod:
    """A member of ``group`` (labelled app=``group``) of 1 core with the claim ``claim_name``, kept in one zone by
    required pod affinity among the members or by kubeflux's required-topology annotation (``pool affinity``: pod
    affinity on :data:`POOL`, a label that is not a topology level)."""
    spec: dict[str, Any] = {
        "schedulerName": "kubeflux",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        "resourceClaims": [{"name": "gpus", "resourceClaimName": claim_name}],
    }
    annotations = {}
    if asks in ("pod affinity", "pool affinity"):
        key = ZONE_LEVEL if asks == "pod affinity" else POOL
        term = {"labelSelector": {"matchLabels": {"app": group}}, "topologyKey": key}
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    else:
        annotations[REQUIRED_ANNOTATION] = ZONE_LEVEL
    labels = {"app": group, POD_GROUP_LABEL: group}
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels, "annotations": annotations}
    made = pod_from_manifest({"metadata": meta, "spec": spec})
    return dataclasses.replace(made, creation_time=t)
