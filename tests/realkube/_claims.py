"""What the tests of claims named directly (``resourceClaimName``) through ``kubeflux serve`` share: two KWOK nodes,
the second with GPUs, their DeviceClass, and claims of one GPU each, made by the real API server."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kubeflux.apiobjects.resourceclaims import claim_from_manifest
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.devices import AllocatedDevice, ClaimAllocation
from tests.dra import DRIVER, claim, gpu_class, gpu_slice
from tests.realkube._serving import nodes

from .conftest import Api

GROUP, VERSION = "resource.k8s.io", "v1"


def one_gpu_claims(plane: ControlPlane, api: Api, cpu: int, gpus: int, *names: str) -> str:
    """Two nodes of ``cpu`` cores, the second publishing ``gpus`` GPUs (its name is returned), the DeviceClass, and
    a claim ``default/<name>`` of one GPU for each of ``names``."""
    gpu_node = sorted(nodes(plane, api, 2, cpu))[1]
    custom = client.CustomObjectsApi(api.client)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(gpu_node, gpus))
    for name in names:
        body = claim(name, 1)
        del body["metadata"]["uid"]  # the server gives it
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", body)
    return gpu_node


def create_claim(api: Api, name: str) -> dict[str, Any]:
    body = claim(name, 1)
    body["metadata"].pop("uid")
    made: dict[str, Any] = client.CustomObjectsApi(api.client).create_namespaced_custom_object(
        GROUP, VERSION, "default", "resourceclaims", body
    )
    return made


def get_claim(api: Api, name: str) -> dict[str, Any]:
    got: dict[str, Any] = client.CustomObjectsApi(api.client).get_namespaced_custom_object(
        GROUP, VERSION, "default", "resourceclaims", name
    )
    return got


def allocation(made: dict[str, Any], node: str, device: str) -> ClaimAllocation:
    """kubeflux's decision for the claim ``made`` as it was read: ``device`` of ``node``."""
    read = claim_from_manifest(made)
    result = AllocatedDevice("gpus", DRIVER, node, device)
    return ClaimAllocation("default", read.name, read.uid, node, (result,), True, False, read.resource_version)
