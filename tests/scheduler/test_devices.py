"""Dynamic Resource Allocation in the scheduler core: pods whose ResourceClaims ask devices that nodes publish in
ResourceSlices, selected by CEL (the real library), allocated on bind as kube-scheduler's DynamicResources plugin
allocates them, never twice."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from kubeflux.apiobjects.reader import ManifestError
from kubeflux.apiobjects.resourceclaims import (
    allocation_status,
    claim_from_manifest,
    device_class_from_manifest,
    slice_from_manifest,
)
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.devices import ResourceClaim
from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import ResourceClaimRef
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, messages, node, pod
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from tests.dra import DRIVER, claim, gpu_class
from tests.dra import gpu_slice as gpus
from tests.scheduler._devices import cluster_with


def claimed(name: str, *claims: str, cpu: int = 1000) -> Any:
    return pod(name, cpu, resource_claims=tuple(ResourceClaimRef(c, c) for c in claims))


def devices_of(cluster: Cluster, name: str) -> list[tuple[str, str, str]]:
    found = cluster.claims[f"default/{name}"]
    assert found.allocation is not None
    return [(d.pool, d.device, d.request) for d in found.allocation]


def test_a_pod_asking_two_gpus_through_a_claim_gets_two_gpus_of_one_node_and_the_claims_allocation() -> None:
    cluster = cluster_with(gpus("w2", 4), nodes=("w1", "w2", "w3"))
    cluster.tell(ADDED, claim_from_manifest(claim("train")))
    cluster.add(claimed("trainer", "train"))
    decisions = cluster.run()
    assert bound(decisions) == {"default/trainer": "w2"}  # w1 and w3 publish no GPU
    assert devices_of(cluster, "train") == [("w2", "gpu-0", "gpus"), ("w2", "gpu-1", "gpus")]
    written = cluster.claims["default/train"]
    assert written.node == "w2" and written.reserved_for == ("uid-trainer",)
    (bind,) = [d for d in decisions if d.pod == "default/trainer"]
    status = allocation_status(bind.resource_claims[0], "trainer", "uid-trainer")  # type: ignore[attr-defined]
    assert status == {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpus", "driver": DRIVER, "pool": "w2", "device": "gpu-0"},
                    {"request": "gpus", "driver": DRIVER, "pool": "w2", "device": "gpu-1"},
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w2"]}]}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "uid-trainer"}],
    }


def test_devices_are_never_given_twice_and_come_back_when_the_claim_is_deallocated() -> None:
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    for name in ("a", "b", "c"):
        cluster.tell(ADDED, claim_from_manifest(claim(f"claim-{name}")))
    cluster.add(claimed("a", "claim-a"), claimed("b", "claim-b"))
    assert bound(cluster.run()) == {"default/a": "w1", "default/b": "w2"}
    cluster.add(claimed("c", "claim-c"))
    decisions = cluster.run(1.0)
    assert bound(decisions) == {}
    assert messages(decisions) == {"default/c": "0/2 nodes are available: 2 cannot allocate all claims."}
    # a ends; the resourceclaim controller takes its claim's reservation and allocation back
    cluster.end("a")
    done = cluster.claims["default/claim-a"]
    cluster.tell(MODIFIED, dataclasses.replace(done, allocation=None, node="", reserved_for=()))
    assert bound(cluster.run(2.0)) == {"default/c": "w1"}
    assert devices_of(cluster, "claim-c") == [("w1", "gpu-0", "gpus"), ("w1", "gpu-1", "gpus")]


def test_cel_selectors_of_the_request_pick_the_devices_by_attribute_capacity_and_version() -> None:
    cluster = cluster_with(gpus("w1", 4, memory="16Gi", model="t4"), gpus("w2", 4, memory="80Gi"))
    wanted = (
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
        f'device.attributes["{DRIVER}"].index >= 2',
        f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.3.9"))',
    )
    cluster.tell(ADDED, claim_from_manifest(claim("big", 2, *wanted)))
    cluster.add(claimed("p", "big"))
    assert bound(cluster.run()) == {"default/p": "w2"}
    assert devices_of(cluster, "big") == [("w2", "gpu-2", "gpus"), ("w2", "gpu-3", "gpus")]


def test_a_class_selector_that_matches_no_device_leaves_the_pod_waiting_in_kube_schedulers_words() -> None:
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    cluster.tell(MODIFIED, device_class_from_manifest(gpu_class("gpu", 'device.driver == "other.example.com"')))
    cluster.tell(ADDED, claim_from_manifest(claim("x", 1)))
    cluster.add(claimed("p", "x"))
    decisions = cluster.run()
    assert messages(decisions) == {"default/p": "0/2 nodes are available: 2 cannot allocate all claims."}


def test_allocation_mode_all_takes_every_matching_device_of_a_node_none_of_them_taken() -> None:
    cluster = cluster_with(gpus("w1", 3), gpus("w2", 2))
    cluster.tell(ADDED, claim_from_manifest(claim("one", 1, f'device.attributes["{DRIVER}"].index == 0')))
    cluster.tell(ADDED, claim_from_manifest(claim("all", mode="All")))
    cluster.add(claimed("first", "one"))
    assert bound(cluster.run()) == {"default/first": "w1"}
    cluster.add(claimed("whole", "all"))
    assert bound(cluster.run(1.0)) == {"default/whole": "w2"}  # w1's gpu-0 is taken: All cannot be had there
    assert [device for _, device, _ in devices_of(cluster, "all")] == ["gpu-0", "gpu-1"]


def test_a_pod_waits_for_its_claim_to_be_created_then_is_placed() -> None:
    cluster = cluster_with(gpus("w1", 2))
    cluster.add(claimed("p", "later"))
    decisions = cluster.run()
    assert messages(decisions) == {"default/p": '0/2 nodes are available: resourceclaim "later" not found.'}
    cluster.tell(ADDED, claim_from_manifest(claim("later", 1)))
    assert bound(cluster.run(1.0)) == {"default/p": "w1"}


def test_a_pod_whose_claim_comes_from_a_template_waits_until_the_claim_is_made() -> None:
    cluster = cluster_with(gpus("w1", 2))
    waiting = pod("p", 1000, resource_claims=(ResourceClaimRef("gpu", ""),))
    cluster.add(waiting)
    (message,) = messages(cluster.run()).values()
    assert 'waiting for resource claim "gpu" of pod default/p to be created' in message
    cluster.tell(ADDED, claim_from_manifest(claim("p-gpu-x7k2q", 1)))
    made = dataclasses.replace(waiting, resource_claims=(ResourceClaimRef("gpu", "p-gpu-x7k2q"),))
    cluster.pods[made.key] = made
    cluster.tell(MODIFIED, made)
    assert bound(cluster.run(1.0)) == {"default/p": "w1"}


def test_an_allocated_claim_holds_its_pods_to_its_node() -> None:
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    cluster.tell(ADDED, claim_from_manifest(claim("shared", 1)))
    cluster.add(claimed("first", "shared"))
    assert bound(cluster.run()) == {"default/first": "w1"}
    cluster.add(claimed("second", "shared", cpu=8000))  # w1 has 7 cores left: the claim keeps it off w2
    decisions = cluster.run(1.0)
    assert messages(decisions) == {
        "default/second": "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node."
    }


def test_a_selector_failing_on_a_device_rejects_the_pod_naming_the_claim_and_the_selector() -> None:
    cluster = cluster_with(gpus("w1", 2))
    cluster.tell(ADDED, claim_from_manifest(claim("bad", 1, f'device.attributes["{DRIVER}"].vendor == "acme"')))
    cluster.add(claimed("p", "bad"))
    (message,) = messages(cluster.run()).values()
    assert message.startswith("pod default/p: claim default/bad, request gpus: selector #0")
    assert "CEL runtime error on device gpu.example.com/w1/gpu-0: no such key: vendor" in message


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        pytest.param(
            {"selectors": [{"cel": {"expression": "device.attributes["}}]},
            "spec.devices.requests[0].exactly.selectors[0].cel.expression",
            "compilation failed",
            id="cel-does-not-compile",
        ),
        pytest.param({"count": 0}, "spec.devices.requests[0].exactly.count", "must be greater than zero", id="count"),
        pytest.param(
            {"allocationMode": "Some"}, "spec.devices.requests[0].exactly.allocationMode", "Unsupported", id="mode"
        ),
        pytest.param(
            {"adminAccess": True}, "spec.devices.requests[0].exactly.adminAccess", "not supported", id="admin-access"
        ),
        pytest.param(
            {"deviceClassName": ""}, "spec.devices.requests[0].exactly.deviceClassName", "Required", id="class"
        ),
        pytest.param(
            {"count": 10**20}, "spec.devices.requests[0].exactly.count", "cannot unmarshal number", id="count-int64"
        ),
    ],
)
def test_a_bad_claim_is_refused_naming_the_field(change: dict[str, Any], field: str, problem: str) -> None:
    bad = claim("c", 1)
    bad["spec"]["devices"]["requests"][0]["exactly"].update(change)
    with pytest.raises(ManifestError) as caught:
        claim_from_manifest(bad)
    assert f"ResourceClaim default/c: {field}" in str(caught.value)
    assert problem in str(caught.value)


def test_a_claim_read_back_from_its_written_status_holds_its_devices() -> None:
    raw = claim("c", 1)
    cluster = cluster_with(gpus("w1", 1))
    cluster.tell(ADDED, claim_from_manifest(raw))
    cluster.add(claimed("p", "c"))
    (bind,) = [d for d in cluster.run() if d.pod == "default/p"]
    raw["status"] = allocation_status(bind.resource_claims[0], "p", "uid-p")  # type: ignore[attr-defined]
    read: ResourceClaim = claim_from_manifest(raw)
    assert read.node == "w1" and read.reserved_for == ("uid-p",)
    assert [(d.driver, d.pool, d.device) for d in read.allocation or ()] == [(DRIVER, "w1", "gpu-0")]


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        pytest.param(f'10 / device.attributes["{DRIVER}"].index > 1', "division by zero", id="division-by-zero"),
        pytest.param(f'10 % device.attributes["{DRIVER}"].index == 1', "modulo by zero", id="modulo-by-zero"),
        pytest.param(f'[1][device.attributes["{DRIVER}"].index + 5] == 1', "index out of bounds", id="index"),
        pytest.param(f'device.attributes["{DRIVER}"].index + 9223372036854775807 > 0', "overflow", id="int64-overflow"),
        pytest.param(f'uint(device.attributes["{DRIVER}"].index - 1) > 0u', "overflow", id="uint-overflow"),
    ],
)
def test_a_selector_raising_any_error_of_the_library_rejects_only_its_pod_and_the_next_pod_is_bound(
    expression: str, error: str
) -> None:
    """Division by zero, an index out of range, an overflow (the library's ZeroDivisionError, IndexError,
    OverflowError, past the errors it raises as ValueError) are the claim's CEL runtime error: that pod is rejected
    naming it, and the pass goes on (they once escaped and stopped every pass)."""
    cluster = cluster_with(gpus("w1", 2))
    cluster.tell(ADDED, claim_from_manifest(claim("bad", 1, expression)))
    cluster.add(claimed("evil", "bad"))
    cluster.add(pod("plain", 1000))
    decisions = cluster.run()
    assert bound(decisions) == {"default/plain": "w1"}
    message = messages(decisions)["default/evil"]
    assert message.startswith("pod default/evil: claim default/bad, request gpus: selector #0")
    assert "CEL runtime error on device gpu.example.com/w1/gpu-" in message and error in message.lower()


@pytest.mark.parametrize(
    "scheduler", [KubefluxScheduler, lambda: KubeDefaultScheduler("kubeflux")], ids=["kubeflux", "kube-default"]
)
def test_a_selector_failing_only_on_a_node_the_pod_could_never_use_does_not_reject_it(
    scheduler: Callable[[], Scheduler],
) -> None:
    """w1's GPUs lack the attribute the selector reads, w2's have it; the pod's node selector picks w2. As
    kube-scheduler runs DynamicResources' Filter only on the nodes the other filters pass, w1's devices are never
    evaluated and the pod is bound on w2 (it was once rejected for w1's error, by kubeflux and the simulator's
    kube-default alike)."""
    big = gpus("w2", 2)
    for device in big["spec"]["devices"]:
        device["attributes"]["memgb"] = {"int": 80}
    cluster = Cluster(
        scheduler(), [node("w1", cores=8, labels={"zone": "a"}), node("w2", cores=8, labels={"zone": "b"})]
    )
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    cluster.tell(ADDED, slice_from_manifest(gpus("w1", 2)))
    cluster.tell(ADDED, slice_from_manifest(big))
    cluster.tell(ADDED, claim_from_manifest(claim("c", 1, f'device.attributes["{DRIVER}"].memgb >= 40')))
    made = claimed("p", "c")
    cluster.add(dataclasses.replace(made, node_selector={"zone": "b"}))
    assert bound(cluster.run()) == {"default/p": "w2"}
    # without the node selector, w1 passes the other filters: its devices are evaluated, and the error is the pod's
    cluster.tell(ADDED, claim_from_manifest(claim("d", 1, f'device.attributes["{DRIVER}"].memgb >= 40')))
    cluster.add(claimed("q", "d"))
    (message,) = messages(cluster.run(1.0)).values()
    assert "claim default/d, request gpus: selector #0" in message
    assert "CEL runtime error on device gpu.example.com/w1/gpu-0: no such key: memgb" in message


def _without_node(item: dict[str, Any]) -> dict[str, Any]:
    del item["spec"]["nodeName"]
    return item


def _all_nodes_too(item: dict[str, Any]) -> dict[str, Any]:
    item["spec"]["allNodes"] = True
    return item


def _class_config(item: dict[str, Any]) -> dict[str, Any]:
    item["spec"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": {}}}]
    return item


def _class_extended(item: dict[str, Any]) -> dict[str, Any]:
    item["spec"]["extendedResourceName"] = "example.com/gpu"
    return item


def _reserved_unallocated(item: dict[str, Any]) -> dict[str, Any]:
    item["status"] = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    return item


@pytest.mark.parametrize(
    ("read", "made", "change", "said"),
    [
        pytest.param(
            slice_from_manifest,
            lambda: gpus("w1", 1),
            _without_node,
            "ResourceSlice w1-gpu.example.com: spec: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required",
            id="slice-without-node",
        ),
        pytest.param(
            slice_from_manifest,
            lambda: gpus("w1", 1),
            _all_nodes_too,
            "(given: nodeName, allNodes)",
            id="slice-node-and-all-nodes",
        ),
        pytest.param(
            device_class_from_manifest,
            gpu_class,
            _class_config,
            "DeviceClass gpu: spec.config: not supported by kubeflux yet",
            id="class-config",
        ),
        pytest.param(
            device_class_from_manifest,
            gpu_class,
            _class_extended,
            "DeviceClass gpu: spec.extendedResourceName: not supported by kubeflux yet",
            id="class-extended-resource-name",
        ),
        pytest.param(
            claim_from_manifest,
            lambda: claim("c", 1),
            _reserved_unallocated,
            "ResourceClaim default/c: status.reservedFor: Forbidden: may not be specified when `allocated` is not set",
            id="reserved-without-allocation",
        ),
    ],
)
def test_a_bad_slice_class_or_claim_status_is_refused_naming_the_field(
    read: Any, made: Any, change: Any, said: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        read(change(made()))
    assert said in str(caught.value)
