"""Gangs whose members require pod affinity among themselves on a node label that is not a topology level of the
cluster (``example.com/pool``): kept in one of its values as a whole, found by the exact search over each value's
nodes, instead of member by member (the first member went to the roomiest pool, the rest followed it and did not
fit, and the gang waited forever)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.apiobjects.resourceclaims import claim_from_manifest, device_class_from_manifest, slice_from_manifest
from kubeflux.scheduler.core import Backfill, KubefluxScheduler
from kubeflux.scheduler.interface import Reject
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, node, pod
from tests.dra import claim, gpu_class
from tests.dra import gpu_slice as gpus
from tests.scheduler._racks import HOST
from tests.scheduler._relations import affinity

POOL = "example.com/pool"


def pools(*nodes: tuple[str, str, int, int]) -> Cluster:
    """The nodes (name, pool or "" for none, cores, GPUs), with EASY backfill."""
    made = []
    for name, value, cores, _ in nodes:
        labels = {HOST: name, **({POOL: value} if value else {})}
        made.append(node(name, cores, labels=labels))
    cluster = Cluster(KubefluxScheduler(backfill=Backfill.EASY), made)
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    for name, _, _, count in nodes:
        if count:
            cluster.tell(ADDED, slice_from_manifest(gpus(name, count)))
    return cluster


def member(name: str, group: str, claim_name: str = "", duration: str = "") -> Pod:
    """A member of ``group`` of 1 core requiring pod affinity to the group's pods on :data:`POOL`."""
    spec: dict[str, Any] = {
        "schedulerName": "kubeflux",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        **affinity(group, POOL),
    }
    if claim_name:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
    labels = {"app": group, POD_GROUP_LABEL: group}
    annotations = {"kubeflux.io/duration": duration} if duration else {}
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels, "annotations": annotations}
    return pod_from_manifest({"metadata": meta, "spec": spec})


def gang(cluster: Cluster, size: int, *, gpus_each: bool = False, name: str = "mpi") -> None:
    cluster.tell(ADDED, PodGroup("default", name, min_member=size))
    for i in range(size):
        if gpus_each:
            cluster.tell(ADDED, claim_from_manifest(claim(f"{name}-{i}", 1)))
    cluster.add(*(member(f"{name}-{i}", name, f"{name}-{i}" if gpus_each else "") for i in range(size)))


@pytest.mark.parametrize("gpus_each", [False, True], ids=["cores", "gpus"])
def test_a_gang_affine_on_a_pool_label_starts_in_the_pool_that_holds_it_not_the_first_or_roomiest(
    gpus_each: bool,
) -> None:
    # pool p1: n0 (3 cores, or 32 cores and 2 GPUs); pool p2: n1 and n2 (4 cores and 2 GPUs each); n3 has no pool
    # label (room for all, but affinity on a key the node lacks never holds there). 4 members of 1 core (and 1 GPU)
    first = ("n0", "p1", 32, 2) if gpus_each else ("n0", "p1", 3, 0)
    cluster = pools(first, ("n1", "p2", 4, 2), ("n2", "p2", 4, 2), ("n3", "", 64, 8))
    gang(cluster, 4, gpus_each=gpus_each)
    placed = sorted(bound(cluster.run(1.0)).values())
    assert placed == (["n1", "n1", "n2", "n2"] if gpus_each else ["n1", "n1", "n1", "n1"])
    assert any(f"kept in the label {POOL} of n1" in line for line in cluster.scheduler.log)


def test_a_waiting_pool_gang_is_reserved_in_the_pool_that_holds_it_and_no_filler_takes_its_nodes() -> None:
    # p2's nodes are full until 100; p1's one node never holds the 4 members: the gang waits for p2, and a filler
    # asking p2 for 500 s does not start there before it
    cluster = pools(("n0", "p1", 3, 0), ("n1", "p2", 4, 0), ("n2", "p2", 4, 0))
    for name in ("n1", "n2"):
        cluster.add(pod(f"busy-{name}", 4000, node_selector={HOST: name}, annotations={"kubeflux.io/duration": "100"}))
    assert len(bound(cluster.run(0.0))) == 2
    gang(cluster, 4)
    assert bound(cluster.run(1.0)) == {}
    job = cluster.scheduler.queue.jobs["default/mpi"]
    assert job.expected_start == 100
    assert {hold.node for hold in job.holds} <= {"n1", "n2"}
    cluster.add(pod("filler", 3000, t=2, node_selector={POOL: "p2"}, annotations={"kubeflux.io/duration": "500"}))
    assert bound(cluster.run(2.0)) == {}
    cluster.end("busy-n1")
    cluster.end("busy-n2")
    started = bound(cluster.run(100.0))
    assert {started[f"default/mpi-{i}"] for i in range(4)} <= {"n1", "n2"}


def test_a_pool_gang_no_pool_can_ever_hold_is_rejected_naming_the_label() -> None:
    # two pools of one 2-core node: 3 members of 1 core fit the cluster, never one pool (they waited forever)
    cluster = pools(("n0", "p1", 2, 0), ("n1", "p2", 2, 0))
    gang(cluster, 3)
    decisions = cluster.run(1.0)
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert len(rejected) == 3
    assert rejected[0].message == (
        f"the pod group requires one {POOL} value ({POOL}) but no {POOL} value can ever hold its 3 pods of 1 cores "
        "and 0 gpus (the most one holds: 2)"
    )
