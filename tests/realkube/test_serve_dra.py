"""Dynamic Resource Allocation through ``kubeflux serve`` on the real control plane (v1.36, where
``resource.k8s.io/v1`` is served by default): KWOK nodes, one publishing four GPUs in a ResourceSlice, and a pod
whose claim the real resourceclaim controller makes from a ResourceClaimTemplate; kubeflux binds it to that node and
writes the claim's allocation as kube-scheduler's DynamicResources plugin writes it; a second pod that finds too few
GPUs waits in kube-scheduler's words, and is bound once the first pod is deleted and its claim with it."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kubeflux.controlplane import ControlPlane
from tests.dra import DRIVER, claim_template, claiming_pod, gpu_class, gpu_slice
from tests.realkube._serving import nodes, serve

from .conftest import Api, eventually

GROUP, VERSION = "resource.k8s.io", "v1"


def claims(api: Api) -> list[dict[str, Any]]:
    found = client.CustomObjectsApi(api.client).list_namespaced_custom_object(
        GROUP, VERSION, "default", "resourceclaims"
    )
    return list(found["items"])


def test_a_pod_asking_two_gpus_through_a_claim_gets_two_gpus_of_one_node_and_the_claims_allocation(
    plane: ControlPlane, api: Api
) -> None:
    names = sorted(nodes(plane, api, 3, 8))
    gpu_node = names[1]
    custom = client.CustomObjectsApi(api.client)
    custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(gpu_node, 3))
    template = claim_template("two-gpus", 2, f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0')
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaimtemplates", template)
    with serve(plane):
        api.create_pod("default", claiming_pod("trainer", "kubeflux", template="two-gpus"))
        eventually(lambda: api.pods("default")["trainer"]["spec"].get("nodeName"))
        trainer = api.pods("default")["trainer"]
        assert trainer["spec"]["nodeName"] == gpu_node
        (claim,) = claims(api)
        assert claim["metadata"]["name"].startswith("trainer-gpus-")
        allocation = claim["status"]["allocation"]
        assert allocation["devices"]["results"] == [
            {"request": "gpus", "driver": DRIVER, "pool": gpu_node, "device": f"gpu-{i}"} for i in range(2)
        ]
        assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [gpu_node]
        uid = trainer["metadata"]["uid"]
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": uid}]

        api.create_pod("default", claiming_pod("second", "kubeflux", template="two-gpus"))

        def waiting() -> str:
            conditions = api.pods("default")["second"].get("status", {}).get("conditions") or []
            return next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")

        message = eventually(waiting)
        assert message == "0/3 nodes are available: 3 cannot allocate all claims."
        client.CoreV1Api(api.client).delete_namespaced_pod("trainer", "default", grace_period_seconds=0)
        eventually(lambda: api.pods("default").get("second", {}).get("spec", {}).get("nodeName") == gpu_node)
