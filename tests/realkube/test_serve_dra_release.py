"""Claims named directly (``resourceClaimName``) through ``kubeflux serve`` on the real control plane, one node of
one GPU: kubeflux's allocation carries the ``delete-protection`` finalizer, as kube-scheduler's does, so that a claim
its user deletes while its pod runs stays Terminating with its GPU taken (another pod waits), and the real
resourceclaim controller deallocates a claim when its last pod goes, so the GPU is given again (rev34x finding 2)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER
from kubeflux.controlplane import ControlPlane
from tests.dra import claiming_pod
from tests.realkube._claims import GROUP, VERSION, one_gpu_claims
from tests.realkube._serving import serve

from .conftest import Api, eventually


def test_a_claim_deleted_while_its_pod_runs_keeps_its_gpu_until_the_pod_goes_and_a_claim_is_freed_by_its_last_pod(
    plane: ControlPlane, api: Api
) -> None:
    gpu_node = one_gpu_claims(plane, api, 8, 1, "first", "second", "third")
    custom = client.CustomObjectsApi(api.client)
    core = client.CoreV1Api(api.client)

    def get(name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "resourceclaims", name
            )
        except client.ApiException as exc:
            assert exc.status == 404
            return None
        return found

    def node_of(name: str) -> str:
        return str(api.pods("default").get(name, {}).get("spec", {}).get("nodeName") or "")

    def waiting(name: str) -> str:
        conditions = api.pods("default")[name].get("status", {}).get("conditions") or []
        return next((c.get("message", "") for c in conditions if c.get("type") == "PodScheduled"), "")

    with serve(plane):
        api.create_pod("default", claiming_pod("first", "kubeflux", claim_name="first"))
        assert eventually(lambda: node_of("first")) == gpu_node
        assert (get("first") or {})["metadata"]["finalizers"] == [FINALIZER]
        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "resourceclaims", "first")
        terminating = get("first")
        assert terminating is not None and terminating["metadata"].get("deletionTimestamp")
        assert terminating["status"]["allocation"]  # its GPU is still first's

        api.create_pod("default", claiming_pod("second", "kubeflux", claim_name="second"))
        message = eventually(lambda: waiting("second"))
        assert message == "0/2 nodes are available: 2 cannot allocate all claims."
        core.delete_namespaced_pod("first", "default", grace_period_seconds=0)
        eventually(lambda: get("first") is None)  # deallocated, its finalizer removed, gone
        assert eventually(lambda: node_of("second")) == gpu_node

        api.create_pod("default", claiming_pod("third", "kubeflux", claim_name="third"))
        core.delete_namespaced_pod("second", "default", grace_period_seconds=0)
        assert eventually(lambda: node_of("third")) == gpu_node  # second's claim was deallocated
        freed = get("second")
        assert freed is not None and not freed.get("status", {}).get("allocation")
        assert "finalizers" not in freed["metadata"]
