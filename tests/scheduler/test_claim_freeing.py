"""A pending pod whose ResourceClaim is allocated on a node it can no longer use (the node filled up or was cordoned
after the claim's write: a serve stopped before the Binding) is not left waiting for ever: its claim is freed, as
kube-scheduler's DynamicResources PostFilter frees it, and allocated anew where the pod fits."""

from __future__ import annotations

import dataclasses

from kubeflux.apiobjects.resourceclaims import claim_from_manifest
from kubeflux.scheduler.devices import AllocatedDevice, ResourceClaim
from kubeflux.scheduler.messages import Deallocate
from kubeflux.scheduler.objects import ResourceClaimRef
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, messages, pod
from tests.dra import DRIVER, claim
from tests.dra import gpu_slice as gpus
from tests.scheduler._devices import cluster_with

STUCK = "0/2 nodes are available: 1 Insufficient cpu, 1 resourceclaim not available on the node."


def _allocated_on_w1(cluster: Cluster, *reserved_for: str) -> ResourceClaim:
    """The claim ``default/c`` as a Bind written before a restart left it: allocated gpu-0 of w1."""
    made = dataclasses.replace(
        claim_from_manifest(claim("c")),
        allocation=(AllocatedDevice("gpus", DRIVER, "w1", "gpu-0"),),
        node="w1",
        reserved_for=reserved_for,
    )
    cluster.tell(ADDED, made)
    return made


def _stuck_cluster(*reserved_for: str) -> Cluster:
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    _allocated_on_w1(cluster, *reserved_for)
    cluster.add(pod("blocker", 8000, node_name="w1"))  # w1 full since the claim's write
    cluster.add(pod("p", 1000, resource_claims=(ResourceClaimRef("c", "c"),)))
    return cluster


def test_a_claim_reserved_for_the_pod_on_a_full_node_is_freed_and_allocated_where_the_pod_fits() -> None:
    cluster = _stuck_cluster("uid-p")
    decisions = cluster.run()
    assert messages(decisions) == {"default/p": STUCK}
    freeing = [d for d in decisions if isinstance(d, Deallocate)]
    assert [(d.pod, d.claim.key, d.claim.node) for d in freeing] == [("default/p", "default/c", "w1")]
    freed = cluster.claims["default/c"]
    assert freed.allocation is None and freed.reserved_for == ()
    assert bound(cluster.run(1.0)) == {"default/p": "w2"}
    again = cluster.claims["default/c"]
    assert again.node == "w2" and again.reserved_for == ("uid-p",)


def test_a_claim_reserved_for_no_pod_on_a_cordoned_node_is_freed() -> None:
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    _allocated_on_w1(cluster)
    w1 = cluster.scheduler.books.nodes["w1"]  # type: ignore[attr-defined]
    cluster.tell(MODIFIED, dataclasses.replace(w1, unschedulable=True))
    cluster.add(pod("p", 1000, resource_claims=(ResourceClaimRef("c", "c"),)))
    cluster.run()
    assert cluster.claims["default/c"].allocation is None
    assert bound(cluster.run(1.0)) == {"default/p": "w2"}


def test_a_claim_another_pod_holds_is_never_freed() -> None:
    cluster = _stuck_cluster("uid-other")  # reserved for another pod (running, or being bound by another scheduler)
    for t in (0.0, 1.0, 30.0):
        decisions = cluster.run(t)
        assert not [d for d in decisions if isinstance(d, Deallocate)]
    assert cluster.claims["default/c"].node == "w1"
    assert bound(decisions) == {}


def test_a_claim_changed_since_it_was_read_is_not_freed() -> None:
    cluster = _stuck_cluster("uid-p")
    written = cluster.claims["default/c"]
    cluster.claims["default/c"] = dataclasses.replace(written, reserved_for=("uid-p", "uid-q"))  # not told yet
    cluster.problem = lambda message: None  # type: ignore[method-assign]  # the refusal is said, not raised
    cluster.run()
    assert cluster.claims["default/c"].node == "w1"


def test_a_shared_claim_another_pod_is_bound_to_in_the_same_pass_is_not_freed() -> None:
    """rev35b: pod a joins the shared claim on w1 and is bound; b, after it in the same pass, fits nowhere (w1 lacks
    its cores) and the claim, reserved for no pod yet as the scheduler read it, looked free: its free was decided
    and only the write order and the resourceVersion kept it from a's claim (a 409 and a warning)."""
    cluster = cluster_with(gpus("w1", 2), gpus("w2", 2))
    _allocated_on_w1(cluster)
    cluster.add(pod("blocker", 6000, node_name="w1"))  # 2 of w1's 8 cores left
    claimed = (ResourceClaimRef("c", "c"),)
    cluster.add(pod("a", 1000, t=1.0, resource_claims=claimed), pod("b", 4000, t=2.0, resource_claims=claimed))
    decisions = cluster.run(3.0)
    assert bound(decisions) == {"default/a": "w1"}
    assert not [d for d in decisions if isinstance(d, Deallocate)]
    assert cluster.claims["default/c"].reserved_for == ("uid-a",) and cluster.claims["default/c"].node == "w1"
    for t in (4.0, 30.0):  # the claim shows a now: a pod uses it, never freed
        assert not [d for d in cluster.run(t) if isinstance(d, Deallocate)]
