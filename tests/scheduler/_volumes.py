"""What the volume tests share (test_volumes.py, test_volume_gangs.py): storage objects and pods with claims read
from manifests, as the shells read them."""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.apiobjects.storage import (
    pv_from_manifest,
    pvc_from_manifest,
    storage_class_from_manifest,
)
from kubeflux.scheduler.objects import Node, Pod
from kubeflux.scheduler.testing import ADDED, Cluster, node

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def nodes(count: int = 3) -> list[Node]:
    return [node(f"n{i}", labels={HOST: f"n{i}", ZONE: f"z{i}"}) for i in range(count)]


def wanting(name: str, *claims: str, ephemeral: str = "", uid: str = "") -> Pod:
    volumes: list[dict[str, Any]] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if ephemeral:
        template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": template}})
    return pod_from_manifest(
        {
            "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
            "spec": {
                "schedulerName": "kubeflux",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "volumes": volumes,
            },
        }
    )


def sc(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "csi.example.com", zones: Any = None) -> Any:
    doc: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}
    if zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return storage_class_from_manifest(doc)


def pvc(
    name: str, cls: str = "wffc", size: str = "1Gi", modes: tuple[str, ...] = ("ReadWriteOnce",), **extra: Any
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls:
        spec["storageClassName"] = cls
    if "volume" in extra:
        spec["volumeName"] = extra["volume"]
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if "owner" in extra:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": extra["owner"], "controller": True}
        ]
    return pvc_from_manifest(
        {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if "volume" in extra else "Pending"}}
    )


def pv(
    name: str, cls: str = "wffc", size: str = "1Gi", on: str = "", zone: str = "", claim: str = "", driver: str = ""
) -> Any:
    meta: dict[str, Any] = {"name": name, "labels": {ZONE: zone} if zone else {}}
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls}
    if on:
        term = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [on]}]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim, "uid": f"uid-{claim}"}
    if driver:
        spec["csi"] = {"driver": driver, "volumeHandle": name}
    return pv_from_manifest({"metadata": meta, "spec": spec, "status": {"phase": "Bound" if claim else "Available"}})


def told(cluster: Cluster, *objects: Any) -> Cluster:
    for obj in objects:
        cluster.tell(ADDED, obj)
    return cluster
