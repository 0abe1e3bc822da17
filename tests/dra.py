"""Dynamic Resource Allocation objects (``resource.k8s.io/v1``) as the tests post or read them: a DeviceClass of one
driver's devices, a node's ResourceSlice of GPUs, a ResourceClaim and a ResourceClaimTemplate asking GPUs, and a pod
naming its claims. Shared by the scheduler's, the simulator's, the served cluster's and the real cluster's tests."""

from __future__ import annotations

from typing import Any

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"


def gpu_class(name: str = "gpu", *selectors: str) -> dict[str, Any]:
    """A DeviceClass selecting :data:`DRIVER`'s devices (or by ``selectors``)."""
    exprs = selectors or (f'device.driver == "{DRIVER}"',)
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
    }


def gpu_slice(node: str, count: int, memory: str = "80Gi", model: str = "h100") -> dict[str, Any]:
    """A ResourceSlice of ``count`` GPUs on ``node`` (its own pool), each with a model, an index, a driver version
    and its memory."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "index": {"int": i}, "driverVersion": {"version": "1.4.0"}},
            "capacity": {"memory": {"value": memory}},
        }
        for i in range(count)
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claim_spec(count: int = 2, *selectors: str, mode: str = "ExactCount", device_class: str = "gpu") -> dict[str, Any]:
    """A claim's ``spec``: one request ``gpus`` of ``count`` devices (or ``All``) of ``device_class``."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}


def claim(name: str, count: int = 2, *selectors: str, mode: str = "ExactCount") -> dict[str, Any]:
    """A ResourceClaim ``default/<name>`` (uid ``uid-claim-<name>``) of :func:`claim_spec`."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-claim-{name}"},
        "spec": claim_spec(count, *selectors, mode=mode),
    }


def claim_template(name: str, count: int = 2, *selectors: str) -> dict[str, Any]:
    """A ResourceClaimTemplate of :func:`claim_spec`."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(count, *selectors)},
    }


def claiming_pod(
    name: str, scheduler: str, *, template: str = "", claim_name: str = "", cpu: str = "1"
) -> dict[str, Any]:
    """A pod of ``scheduler`` whose one claim entry ``gpus`` is made from ``template`` or is ``claim_name``; it runs
    until deleted (KWOK's bare pod)."""
    entry = {"name": "gpus", **({"resourceClaimTemplateName": template} if template else {})}
    if claim_name:
        entry["resourceClaimName"] = claim_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "resourceClaims": [entry],
            "containers": [
                {
                    "name": "main",
                    "image": "trainer",
                    "resources": {"requests": {"cpu": cpu}, "claims": [{"name": "gpus"}]},
                }
            ],
        },
    }
