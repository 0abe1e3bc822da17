"""What the tests of claims named directly (``resourceClaimName``) through ``kubeflux serve`` share: two KWOK nodes,
the second with GPUs, their DeviceClass, and claims of one GPU each, made by the real API server."""

from __future__ import annotations

from kubernetes import client

from kubeflux.controlplane import ControlPlane
from tests.dra import claim, gpu_class, gpu_slice
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
