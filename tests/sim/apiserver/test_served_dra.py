"""Dynamic Resource Allocation on the served cluster (``cluster serve``), as a user meets it with kubectl: the
resource.k8s.io/v1 objects are served and validated, a pod whose claim comes from a ResourceClaimTemplate gets its
claim made by the resourceclaim controller, kubeflux's in-process scheduler places it where two GPUs can be had and
writes the claim's allocation before the Binding, and the claim goes when the pod ends."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from kubeflux.sim.apiserver.server import ApiServer
from tests.dra import DRIVER, claim, claim_template, claiming_pod, gpu_class, gpu_slice
from tests.sim.apiserver._served import PODS, call, eventually, now
from tests.sim.apiserver._served import served as served_cluster

RESOURCE = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RESOURCE}/namespaces/default/resourceclaims"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    served = served_cluster(3, 8, "64Gi", scheduler="kubeflux")
    try:
        yield served
    finally:
        served.stop()


def device_objects(node: str) -> list[tuple[str, dict[str, Any]]]:
    """The class, ``node``'s slice of four GPUs, and the template asking two of model h100."""
    return [
        (f"{RESOURCE}/deviceclasses", gpu_class()),
        (f"{RESOURCE}/resourceslices", gpu_slice(node, 4)),
        (
            f"{RESOURCE}/namespaces/default/resourceclaimtemplates",
            claim_template("two-gpus", 2, f'device.attributes["{DRIVER}"].model == "h100"'),
        ),
    ]


def trainer(name: str = "trainer") -> dict[str, Any]:
    return claiming_pod(name, "kubeflux", template="two-gpus", cpu="2")


def test_a_pod_asking_two_gpus_through_a_claim_template_gets_two_gpus_of_one_node_and_the_claims_allocation(
    server: ApiServer,
) -> None:
    for path, body in device_objects("node-0001"):
        call(server, "POST", path, body)
    call(server, "POST", PODS, trainer())
    eventually(lambda: call(server, "GET", f"{PODS}/trainer")["spec"].get("nodeName") == "node-0001", "bound")
    pod = call(server, "GET", f"{PODS}/trainer")
    (made,) = pod["status"]["resourceClaimStatuses"]
    assert made["name"] == "gpus" and made["resourceClaimName"].startswith("trainer-gpus-")
    claim = call(server, "GET", f"{CLAIMS}/{made['resourceClaimName']}")
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpus"
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "gpus", "driver": DRIVER, "pool": "node-0001", "device": "gpu-0"},
        {"request": "gpus", "driver": DRIVER, "pool": "node-0001", "device": "gpu-1"},
    ]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"] == [
        {"key": "metadata.name", "operator": "In", "values": ["node-0001"]}
    ]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}]
    call(server, "POST", PODS, trainer("second"))  # the other two GPUs
    eventually(lambda: call(server, "GET", f"{PODS}/second")["spec"].get("nodeName") == "node-0001", "bound")
    call(server, "POST", PODS, trainer("third"))
    eventually(lambda: "cannot allocate" in str(call(server, "GET", f"{PODS}/third")["status"]), "third waits")
    message = call(server, "GET", f"{PODS}/third")["status"]["conditions"][0]["message"]
    assert message == "0/3 nodes are available: 3 cannot allocate all claims."
    call(server, "DELETE", f"{PODS}/trainer")
    eventually(lambda: len(call(server, "GET", CLAIMS)["items"]) == 2, "its claim deleted with it")
    eventually(lambda: call(server, "GET", f"{PODS}/third")["spec"].get("nodeName") == "node-0001", "third bound")


@pytest.mark.parametrize(
    ("expression", "said", "reason"),
    [
        ("1 +", "compilation failed", "FieldValueInvalid"),
        ('devise.driver == "x"', "undeclared reference to 'devise' (in container '')", "FieldValueInvalid"),
        ("device.driver", "must evaluate to bool or the unknown type, not string", "FieldValueInvalid"),
        ('device.driver == "' + "x" * 10240 + '"', "Too long: may not be more than 10240 bytes", "FieldValueTooLong"),
    ],
    ids=["does-not-compile", "undeclared", "not-bool", "too-long"],
)
def test_a_claim_whose_selector_the_api_server_refuses_is_refused_naming_the_field(
    server: ApiServer, expression: str, said: str, reason: str
) -> None:
    """As the real kube-apiserver answers (its messages: tests/scheduler/test_device_selectors.py)."""
    bad = claim("bad", 1, expression)
    with pytest.raises(urllib.error.HTTPError) as refused:
        call(server, "POST", CLAIMS, bad)
    assert refused.value.code == 422
    status = orjson.loads(refused.value.read())
    (cause,) = status["details"]["causes"]
    assert cause["field"] == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert said in cause["message"] and cause["reason"] == reason, cause


def test_a_claim_deleted_while_its_pod_runs_keeps_its_gpu_until_the_pod_goes_and_a_claim_is_freed_by_its_last_pod(
    server: ApiServer,
) -> None:
    """As on the real control plane (tests/realkube/test_serve_dra_release.py): the allocation's
    ``delete-protection`` finalizer keeps a deleted claim Terminating while its pod runs, and the resourceclaim
    controller deallocates a claim named directly when its last pod goes."""
    call(server, "POST", f"{RESOURCE}/deviceclasses", gpu_class())
    call(server, "POST", f"{RESOURCE}/resourceslices", gpu_slice("node-0001", 1))
    for name in ("first", "second", "third"):
        call(server, "POST", CLAIMS, claim(name, 1))

    def node_of(name: str) -> str:
        return str(call(server, "GET", f"{PODS}/{name}")["spec"].get("nodeName") or "")

    call(server, "POST", PODS, claiming_pod("first", "kubeflux", claim_name="first"))
    eventually(lambda: node_of("first") == "node-0001", "first bound")
    assert call(server, "GET", f"{CLAIMS}/first")["metadata"]["finalizers"] == [
        "resource.kubernetes.io/delete-protection"
    ]
    call(server, "DELETE", f"{CLAIMS}/first")
    terminating = call(server, "GET", f"{CLAIMS}/first")
    assert terminating["metadata"]["deletionTimestamp"] and terminating["status"]["allocation"]
    call(server, "POST", PODS, claiming_pod("second", "kubeflux", claim_name="second"))
    eventually(lambda: "cannot allocate" in str(call(server, "GET", f"{PODS}/second")["status"]), "second waits")
    call(server, "DELETE", f"{PODS}/first")
    eventually(lambda: "first" not in {c["metadata"]["name"] for c in call(server, "GET", CLAIMS)["items"]}, "gone")
    eventually(lambda: node_of("second") == "node-0001", "second bound")
    call(server, "POST", PODS, claiming_pod("third", "kubeflux", claim_name="third"))
    call(server, "DELETE", f"{PODS}/second")
    eventually(lambda: node_of("third") == "node-0001", "third bound once second's claim is deallocated")
    freed = call(server, "GET", f"{CLAIMS}/second")
    assert not freed.get("status", {}).get("allocation") and "finalizers" not in freed["metadata"]


def test_a_claims_status_is_checked_as_the_real_api_server_checks_it(server: ApiServer) -> None:
    """No reservation without an allocation, no pod reserved twice, and an allocation once set is never changed (it
    may only be removed): another writer cannot overwrite a scheduler's allocation (the real server's words;
    tests/realkube's apiserver differential runs the same writes on both)."""
    call(server, "POST", CLAIMS, claim("c", 1))
    pod_a = {"resource": "pods", "name": "a", "uid": "uid-a"}

    def allocation(device: str) -> dict[str, Any]:
        result = {"request": "gpus", "driver": DRIVER, "pool": "node-0000", "device": device}
        return {"devices": {"results": [result]}}

    def refused(status: dict[str, Any]) -> tuple[str, str]:
        with pytest.raises(urllib.error.HTTPError) as caught:
            call(server, "PATCH", f"{CLAIMS}/c/status", {"status": status}, "application/merge-patch+json")
        assert caught.value.code == 422
        (cause,) = orjson.loads(caught.value.read())["details"]["causes"]
        return cause["field"], cause["message"]

    assert refused({"reservedFor": [pod_a]}) == (
        "status.reservedFor",
        "Forbidden: may not be specified when `allocated` is not set",
    )
    merge = "application/merge-patch+json"
    call(server, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": allocation("gpu-0")}}, merge)
    assert refused({"reservedFor": [pod_a, pod_a]})[0] == "status.reservedFor[1]"
    assert refused({"allocation": allocation("gpu-1")}) == ("status.allocation", "Invalid value: field is immutable")
    call(server, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": None}}, merge)  # deallocated
    assert not call(server, "GET", f"{CLAIMS}/c")["status"]


def test_gang_members_sharing_one_claim_are_bound_together_to_its_node(server: ApiServer) -> None:
    """The in-process scheduler's writes: the first member allocates the claim, the others join its ``reservedFor``
    upon the claim as it is then (its resourceVersion changed by the first write)."""
    call(server, "POST", f"{RESOURCE}/deviceclasses", gpu_class())
    call(server, "POST", f"{RESOURCE}/resourceslices", gpu_slice("node-0002", 1))
    call(server, "POST", CLAIMS, claim("shared", 1))
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"}}
    call(
        server,
        "POST",
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
        {**group, "spec": {"minMember": 3}},
    )
    for i in range(3):
        member = claiming_pod(f"m{i}", "kubeflux", claim_name="shared", cpu="2")
        member["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "g"}
        call(server, "POST", PODS, member)

    def nodes() -> list[str]:
        return [call(server, "GET", f"{PODS}/m{i}")["spec"].get("nodeName") or "" for i in range(3)]

    eventually(lambda: all(nodes()), "all bound")
    assert nodes() == ["node-0002"] * 3
    reserved = call(server, "GET", f"{CLAIMS}/shared")["status"]["reservedFor"]
    assert sorted(entry["name"] for entry in reserved) == ["m0", "m1", "m2"]


def test_a_claim_left_allocated_on_a_cordoned_node_is_freed_and_allocated_anew_at_the_served_clusters_time(
    server: ApiServer,
) -> None:
    """A claim left allocated on node-0001 (a serve stopped before the Binding), node-0001 cordoned since: the pod
    naming it is not left waiting for ever; kubeflux frees the claim (kube-scheduler's DynamicResources PostFilter)
    and allocates it on node-0002, the allocation stamped with the served cluster's time."""
    call(server, "POST", f"{RESOURCE}/deviceclasses", gpu_class())
    for node in ("node-0001", "node-0002"):
        call(server, "POST", f"{RESOURCE}/resourceslices", gpu_slice(node, 4))
    merge = "application/merge-patch+json"
    call(server, "PATCH", "/api/v1/nodes/node-0001", {"spec": {"unschedulable": True}}, merge)
    call(server, "POST", CLAIMS, claim("c", 1))
    result = {"request": "gpus", "driver": DRIVER, "pool": "node-0001", "device": "gpu-0"}
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0001"]}]}
    left = {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}}
    call(server, "PATCH", f"{CLAIMS}/c/status", {"status": {"allocation": left}}, merge)
    before = now(server)
    call(server, "POST", PODS, claiming_pod("p", "kubeflux", claim_name="c"))
    eventually(lambda: call(server, "GET", f"{PODS}/p")["spec"].get("nodeName") == "node-0002", "bound elsewhere")
    allocation = call(server, "GET", f"{CLAIMS}/c")["status"]["allocation"]
    assert allocation["devices"]["results"][0]["pool"] == "node-0002"
    stamp = datetime.strptime(allocation["allocationTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert int(before) <= stamp.timestamp() <= now(server)  # the served cluster's time, not the wall clock's
