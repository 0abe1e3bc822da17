"""A gang's members and their claims (issue 34), in the scheduler core and the kube-default baseline alike: members
placed in one pass cannot see each other's volumes in their filters, so the placement is checked against what the
members before each assumed: members sharing a claim that waits for its first consumer land on one node or wait, a
``ReadWriteOncePod`` claim goes to one member only, and one local volume is not given to two members' claims."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

from ._volumes import HOST, ZONE, pv, pvc, sc, told

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def member(name: str, claim: str, cpu: str) -> Any:
    return pod_from_manifest(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {GROUP_LABEL: "g"}},
            "spec": {
                "schedulerName": "kubeflux",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
    )


@pytest.fixture(params=["kubeflux", "kube-default"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """Three 4-core nodes (two 3-cpu members cannot share one) and a gang ``g`` of two."""
    scheduler: Any = (
        KubefluxScheduler() if request.param == "kubeflux" else KubeDefaultScheduler("kubeflux", preemption="never")
    )
    made = Cluster(scheduler, [node(f"n{i}", cores=4, labels={HOST: f"n{i}", ZONE: f"z{i}"}) for i in range(3)])
    made.tell(ADDED, PodGroup("default", "g", min_member=2))
    return made


def test_members_sharing_a_claim_waiting_for_its_first_consumer_land_on_one_node_or_wait(cluster: Cluster) -> None:
    told(cluster, sc("wffc"), pvc("shared"))
    cluster.add(member("g-0", "shared", "3"), member("g-1", "shared", "3"))
    decisions = cluster.run(1.0)
    assert len(bound(decisions)) <= 1  # the claim's one node cannot hold both (kube-default binds one, a gang none)
    assert "default/g-1" in messages(decisions)  # it waits


def test_a_read_write_once_pod_claim_shared_by_members_is_never_given_to_both(cluster: Cluster) -> None:
    told(cluster, sc("wffc"), pvc("solo", modes=("ReadWriteOncePod",)))
    cluster.add(member("g-0", "solo", "1"), member("g-1", "solo", "1"))
    assert len(bound(cluster.run(1.0))) <= 1


def test_one_local_volume_is_not_given_to_two_members_claims(cluster: Cluster) -> None:
    local = sc("local", provisioner="kubernetes.io/no-provisioner")
    told(cluster, local, pvc("d0", cls="local"), pvc("d1", cls="local"), pv("pv-n0", cls="local", on="n0"))
    cluster.add(member("g-0", "d0", "1"), member("g-1", "d1", "1"))
    first = bound(cluster.run(1.0))
    assert len(first) <= 1
    told(cluster, pv("pv-n1", cls="local", on="n1"))  # a second one: both go, each to its volume's node
    assert sorted({**first, **bound(cluster.run(2.0))}.values()) == ["n0", "n1"]
