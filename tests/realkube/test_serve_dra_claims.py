"""kubeflux's writes of a ResourceClaim on the real API server, as kube-scheduler's DynamicResources plugin makes
them: a claim already reserved for the pod (serve restarted between the claim's write and the Binding) is not
written again; a write carries the resourceVersion read, so another scheduler's reservation made since is never
overwritten (409); an allocation written gets the ``delete-protection`` finalizer; and what was written for a pod
whose Binding is refused is taken back (rev34x findings 3 and 7)."""

from __future__ import annotations

import pytest
from kubernetes import client

from kubeflux.apiobjects.resourceclaims import FINALIZER, claim_from_manifest, claim_status_patch
from kubeflux.controlplane import ControlPlane
from kubeflux.kube.claimwrites import Written, reserve_claims, unreserve_claims
from kubeflux.kube.rest import RawApi
from kubeflux.scheduler.devices import ClaimAllocation
from tests.dra import claiming_pod, gpu_class, gpu_slice
from tests.realkube._claims import allocation, create_claim, get_claim
from tests.realkube._serving import nodes, serve

from .conftest import Api, eventually

GROUP, VERSION = "resource.k8s.io", "v1"


@pytest.fixture(scope="module")
def gpu_node(plane: ControlPlane) -> str:
    api = Api(plane.kubeconfig)
    try:
        names = sorted(nodes(plane, api, 2, 8))
        custom = client.CustomObjectsApi(api.client)
        custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", gpu_class())
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", gpu_slice(names[1], 4))
        return names[1]
    finally:
        api.close()


def waiting_pod(api: Api, name: str, claim_name: str) -> str:
    """The uid of a pod naming the claim ``claim_name``, left to a scheduler that never runs (the resourceclaim
    controller keeps its reservations: it exists and is not done)."""
    made = api.create_pod("default", claiming_pod(name, "nobody", claim_name=claim_name))
    return str(made["metadata"]["uid"])


def test_a_fresh_serve_binds_a_pod_its_claim_is_already_reserved_for_without_writing_the_claim_again(
    gpu_node: str, plane: ControlPlane, api: Api
) -> None:
    made = create_claim(api, "restarted")
    uid = api.create_pod("default", claiming_pod("restarted", "kubeflux", claim_name="restarted"))["metadata"]["uid"]
    # what a serve killed between the claim's write and the Binding wrote
    written: list[Written] = []
    reserve_claims(RawApi(api.client), [allocation(made, gpu_node, "gpu-3")], "restarted", uid, written)
    with serve(plane):
        eventually(lambda: api.pods("default")["restarted"]["spec"].get("nodeName"))
    assert api.pods("default")["restarted"]["spec"]["nodeName"] == gpu_node
    status = get_claim(api, "restarted")["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "restarted", "uid": uid}]
    assert status["allocation"]["devices"]["results"][0]["device"] == "gpu-3"


def test_a_claim_write_after_another_schedulers_is_refused_and_keeps_its_reservation(gpu_node: str, api: Api) -> None:
    made = create_claim(api, "raced")
    a, b, c = (waiting_pod(api, name, "raced") for name in ("a", "b", "c"))
    mine = allocation(made, gpu_node, "gpu-0")  # decided before kube-scheduler's write was seen
    custom = client.CustomObjectsApi(api.client)
    theirs, _ = claim_status_patch(allocation(made, gpu_node, "gpu-0"), "a", a)  # the same first fit
    custom.patch_namespaced_custom_object_status(GROUP, VERSION, "default", "resourceclaims", "raced", theirs)
    written: list[Written] = []
    with pytest.raises(client.ApiException) as refused:
        reserve_claims(RawApi(api.client), [mine], "b", b, written)
    assert refused.value.status == 409
    assert [entry["uid"] for entry in get_claim(api, "raced")["status"]["reservedFor"]] == [a]
    # a pod joining the allocation, from the claim as read before it: refused (409), read again, and added to the
    # reservations the claim has now (kube-scheduler's RetryOnConflict), a's kept
    shared = claim_from_manifest(made)
    joining = ClaimAllocation(
        "default", "raced", shared.uid, gpu_node, mine.results, False, False, shared.resource_version
    )
    reserve_claims(RawApi(api.client), [joining], "c", c, written)
    assert [entry["uid"] for entry in get_claim(api, "raced")["status"]["reservedFor"]] == [a, c]


def test_an_allocation_written_gets_the_delete_protection_finalizer_and_is_taken_back_when_the_binding_fails(
    gpu_node: str, api: Api
) -> None:
    made = create_claim(api, "taken-back")
    d = waiting_pod(api, "d", "taken-back")
    written: list[Written] = []
    reserve_claims(RawApi(api.client), [allocation(made, gpu_node, "gpu-1")], "d", d, written)
    claim = get_claim(api, "taken-back")
    assert claim["metadata"]["finalizers"] == [FINALIZER]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "d", "uid": d}]
    unreserve_claims(RawApi(api.client), written, d)  # the Binding was refused: kube-scheduler's Unreserve
    claim = get_claim(api, "taken-back")
    assert "finalizers" not in claim["metadata"]
    assert not (claim.get("status") or {}).get("allocation")
    assert not (claim.get("status") or {}).get("reservedFor")
