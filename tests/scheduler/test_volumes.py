"""kube-scheduler's volume filters (:mod:`kubeflux.scheduler.volumes`) in the scheduler core and in the simulator's
kube-default baseline alike: a claim waiting for its first consumer gets the node the scheduler chose
(``volume.kubernetes.io/selected-node``) or a matching PersistentVolume bound to it, a bound claim's volume keeps its
pod on the nodes of its node affinity and zone, an unbound ``Immediate`` claim or a missing one keeps its pod
waiting with kube-scheduler's PreFilter message, ``ReadWriteOncePod`` claims are used by one pod, and a CSINode's
attach limit counts the volumes on its node. Objects are read from manifests, as the shells read them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubeflux.apiobjects.manifests import pod_from_manifest, pod_to_manifest
from kubeflux.apiobjects.storage import (
    csinode_from_manifest,
    pvc_from_manifest,
)
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.messages import Bind, ClusterEvent
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.storage import (
    ANN_SELECTED_NODE,
    ClaimBinding,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeBook,
)
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, messages
from kubeflux.scheduler.volumes import REASON_READ_WRITE_ONCE_POD
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

from ._volumes import HOST, nodes, pv, pvc, sc, told, wanting


@pytest.fixture(params=["kubeflux", "kube-default"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    scheduler: Any = (
        KubefluxScheduler() if request.param == "kubeflux" else KubeDefaultScheduler("kubeflux", preemption="never")
    )
    return Cluster(scheduler, nodes())


def test_a_wait_for_first_consumer_claim_gets_the_node_its_pod_is_bound_to(cluster: Cluster) -> None:
    told(cluster, sc("wffc", zones=["z1", "z2"]), pvc("data"))
    cluster.add(wanting("p", "data"))
    where = bound(cluster.run(1.0))["default/p"]
    assert where in ("n1", "n2")  # the class provisions only there
    claim = cluster.storage["PersistentVolumeClaim default/data"]
    assert isinstance(claim, PersistentVolumeClaim) and claim.selected_node == where


def test_a_second_pod_of_a_claim_given_a_node_follows_it(cluster: Cluster) -> None:
    told(cluster, sc("wffc"), pvc("data"))
    cluster.add(wanting("a", "data"))
    first = bound(cluster.run(1.0))["default/a"]
    cluster.add(wanting("b", "data"))
    assert bound(cluster.run(2.0)) == {"default/b": first}


def test_a_static_volume_is_chosen_where_it_is_and_bound_to_the_claim(cluster: Cluster) -> None:
    told(cluster, sc("wffc", provisioner="kubernetes.io/no-provisioner"), pvc("data"), pv("small", size="1Gi", on="n2"))
    told(cluster, pv("big", size="5Gi", on="n2"), pv("too-small", size="500Mi", on="n0"))
    cluster.add(wanting("p", "data"))
    assert bound(cluster.run(1.0)) == {"default/p": "n2"}  # where a volume fits; the smallest of them
    volume = cluster.storage["PersistentVolume small"]
    assert isinstance(volume, PersistentVolume) and volume.claim is not None and volume.claim.key == "default/data"


def test_no_volume_and_no_provisioner_there_says_so_on_each_node(cluster: Cluster) -> None:
    told(cluster, sc("wffc", provisioner="kubernetes.io/no-provisioner"), pvc("data", size="2Gi"), pv("small", on="n0"))
    cluster.add(wanting("p", "data"))
    assert messages(cluster.run(1.0))["default/p"] == (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


def test_a_bound_claim_keeps_its_pod_on_its_volume_s_node_and_zone(cluster: Cluster) -> None:
    local = pv("local", cls="", on="n1", claim="data")
    told(cluster, local, pvc("data", cls="", volume="local"))
    cluster.add(wanting("p", "data"))
    assert bound(cluster.run(1.0)) == {"default/p": "n1"}
    zoned = pv("zoned", cls="", zone="z2__z0", claim="disk")
    told(cluster, zoned, pvc("disk", cls="", volume="zoned"))
    cluster.add(wanting("q", "disk"), wanting("r", "data", "disk"))
    decisions = cluster.run(2.0)
    assert bound(decisions)["default/q"] in ("n0", "n2")
    assert messages(decisions)["default/r"] == (
        "0/3 nodes are available: 1 node(s) had no available volume zone, "
        "2 node(s) didn't match PersistentVolume's node affinity."
    )


@pytest.mark.parametrize(
    ("objects", "pod", "why"),
    [
        ([], wanting("p", "data"), 'persistentvolumeclaim "data" not found'),
        (
            [sc("fast", mode="Immediate"), pvc("data", cls="fast")],
            wanting("p", "data"),
            "pod has unbound immediate PersistentVolumeClaims",
        ),
        ([pvc("data", cls="missing")], wanting("p", "data"), "pod has unbound immediate PersistentVolumeClaims"),
        (
            [],
            wanting("p", ephemeral="scratch"),
            'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',
        ),
        (
            [pvc("p-scratch", owner="someone")],
            wanting("p", ephemeral="scratch"),
            "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
        ),
        ([pvc("data", cls="", volume="gone")], wanting("p", "data"), 'persistentvolume "gone" not found'),
    ],
    ids=[
        "claim missing",
        "unbound immediate",
        "unbound of a missing class",
        "ephemeral claim not made yet",
        "ephemeral claim of another",
        "volume missing",
    ],
)
def test_a_pod_waits_with_kube_scheduler_s_pre_filter_message(
    cluster: Cluster, objects: list[Any], pod: Pod, why: str
) -> None:
    told(cluster, *objects)
    cluster.add(pod)
    assert messages(cluster.run(1.0))["default/p"] == f"0/3 nodes are available: {why}."


def test_an_ephemeral_claim_of_its_pod_is_provisioned_where_the_pod_goes(cluster: Cluster) -> None:
    told(cluster, sc("wffc", zones=["z0"]), pvc("p-scratch", owner="uid-p"))
    cluster.add(wanting("p", ephemeral="scratch"))
    assert bound(cluster.run(1.0)) == {"default/p": "n0"}


def test_a_read_write_once_pod_claim_in_use_keeps_a_second_pod_off_every_node(cluster: Cluster) -> None:
    told(cluster, pv("one", cls="", claim="solo"), pvc("solo", cls="", volume="one", modes=("ReadWriteOncePod",)))
    cluster.add(wanting("a", "solo"))
    assert "default/a" in bound(cluster.run(1.0))
    cluster.add(wanting("b", "solo"))
    assert messages(cluster.run(2.0))["default/b"] == f"0/3 nodes are available: 3 {REASON_READ_WRITE_ONCE_POD}."
    assert "already in-use by another pod" in REASON_READ_WRITE_ONCE_POD


def test_a_csinode_attach_limit_counts_the_volumes_on_its_node(cluster: Cluster) -> None:
    driver = "ebs.csi.example.com"
    for name in ("v0", "v1", "v2"):
        told(cluster, pv(name, cls="", claim=f"c-{name}", driver=driver), pvc(f"c-{name}", cls="", volume=name))
    limits = [{"name": driver, "nodeID": "x", "allocatable": {"count": 1}}]
    for i in range(3):
        told(cluster, csinode_from_manifest({"metadata": {"name": f"n{i}"}, "spec": {"drivers": limits}}))
    cluster.add(wanting("a", "c-v0"), wanting("b", "c-v1"), wanting("c", "c-v2"))
    placed = bound(cluster.run(1.0))
    assert sorted(placed.values()) == ["n0", "n1", "n2"]  # one volume each
    told(cluster, pv("v3", cls="", claim="c-v3", driver=driver), pvc("c-v3", cls="", volume="v3"))
    cluster.add(wanting("d", "c-v3"), wanting("e", "c-v0"))  # e shares a's volume: not one more on a's node
    decisions = cluster.run(2.0)
    assert messages(decisions)["default/d"] == "0/3 nodes are available: 3 node(s) exceed max volume count."
    assert bound(decisions) == {"default/e": placed["default/a"]}


def test_a_pod_s_claims_survive_its_manifest_round_trip() -> None:
    pod = wanting("p", "data", ephemeral="scratch")
    assert [(c.name, c.ephemeral) for c in pod.volume_claims] == [("data", False), ("p-scratch", True)]
    assert pod_from_manifest(pod_to_manifest(pod)).volume_claims == pod.volume_claims


def test_a_claim_annotated_for_a_node_is_read_so() -> None:
    claim = pvc_from_manifest(
        {"metadata": {"name": "c", "namespace": "ns", "annotations": {ANN_SELECTED_NODE: "n1"}}, "spec": {}}
    )
    assert claim.selected_node == "n1" and not claim.bound


def test_a_claim_assumed_for_a_pod_unreserved_before_its_bind_is_as_the_cluster_said() -> None:
    book = VolumeBook()
    claim = pvc("data")
    book.observe(False, claim)
    binding = ClaimBinding(claim.key, claim.uid, "n1")
    book.assume((binding,))
    assert book.claims[claim.key].selected_node == "n1"
    book.revert((binding,))  # a Permit's rejection: nothing was written
    assert book.claims[claim.key] is claim
    book.assume((binding,))
    written = replace(claim, selected_node="n1", volume_name="v")  # the cluster's own word came meanwhile
    book.observe(False, written)
    book.revert((binding,))
    assert book.claims[claim.key] is written


def test_a_volume_chosen_for_a_bind_the_cluster_refused_is_free_again() -> None:
    """kube-scheduler's ``RevertAssumedPodVolumes`` at Unreserve: the claim bindings of a Bind the API server
    refused (409: another writer changed the volume or claim first) were never written, so no event will replace
    what kubeflux assumed of them; they are undone at once, and the volume is there for the next claim."""
    scheduler = KubefluxScheduler()
    cluster = told(
        Cluster(scheduler, nodes()),
        sc("local", provisioner="kubernetes.io/no-provisioner"),
        pvc("a", cls="local"),
        pvc("b", cls="local"),
        pv("pv-n0", cls="local", on="n0"),
    )
    cluster.pods["default/pa"] = wanting("pa", "a")
    cluster.tell(ADDED, cluster.pods["default/pa"])
    first = scheduler.schedule(1.0)  # not applied: the cluster refuses it
    assert [d.volume_claims for d in first if isinstance(d, Bind)] == [
        (ClaimBinding("default/a", "uid-a", "n0", "pv-n0"),)
    ]
    scheduler.unreserve("default/pa", "uid-pa", "n0", "409: the object has been modified", 1.0)
    cluster.delete("pa")
    cluster.add(wanting("pb", "b"))
    decisions = cluster.run(2.0)
    assert bound(decisions) == {"default/pb": "n0"}
    assert [d.volume_claims for d in decisions if isinstance(d, Bind)] == [
        (ClaimBinding("default/b", "uid-b", "n0", "pv-n0"),)
    ]


def test_a_stale_event_of_a_volume_does_not_free_the_volume_assumed_for_a_claim() -> None:
    """A late event (a relist, a slow watch) carrying the volume as it was before kubeflux's ``claimRef`` write is
    no newer than what the assumption was made upon: kube-scheduler's assume cache keeps the assumption, and the
    volume is not handed to a second claim."""
    scheduler = KubefluxScheduler()
    free = replace(pv("pv-n0", cls="local", on="n0"), resource_version="7")
    cluster = told(
        Cluster(scheduler, nodes()),
        sc("local", provisioner="kubernetes.io/no-provisioner"),
        pvc("a", cls="local"),
        pvc("b", cls="local"),
        free,
    )
    cluster.pods["default/pa"] = wanting("pa", "a")
    cluster.tell(ADDED, cluster.pods["default/pa"])
    assert bound(scheduler.schedule(1.0)) == {"default/pa": "n0"}  # its writes' events not come yet
    scheduler.observe(ClusterEvent(MODIFIED, free), 1.0)  # the stale event
    cluster.pods["default/pb"] = wanting("pb", "b")
    cluster.tell(ADDED, cluster.pods["default/pb"])
    assert not bound(scheduler.schedule(2.0))
    taken = replace(free, claim=ClaimRef("default", "a", "uid-a"), resource_version="8")
    scheduler.observe(ClusterEvent(MODIFIED, taken), 3.0)  # the write's own event replaces the assumption
    assert scheduler.books.volumes.volumes["pv-n0"] is taken


def test_a_claim_s_filter_looks_only_at_the_volumes_that_may_match_it_there() -> None:
    """Thousands of nodes each with local volumes, or thousands of volumes bound to other claims: a claim's filter
    on one node reads the volumes of its class pinned to that node (or to none) and those pre-bound to it, kept so
    through the scheduler's own assumptions and the cluster's events."""
    book = VolumeBook()
    claim = pvc("a", cls="local")
    book.observe(False, claim)
    for i in range(4):
        book.observe(False, pv(f"pv{i}", cls="local", on=f"n{i % 2}"))
    book.observe(False, pv("anywhere", cls="local"))
    book.observe(False, pv("taken", cls="local", claim="other"))
    book.observe(False, pv("mine", cls="local", claim="a"))
    claimed, free = book.candidates("local", "default/a", {HOST: "n1"})
    assert (claimed, sorted(free)) == (["mine"], ["anywhere", "pv1", "pv3"])
    binding = ClaimBinding(claim.key, claim.uid, "n1", "pv1")
    book.assume((binding,))
    claimed, free = book.candidates("local", "default/a", {HOST: "n1"})
    assert (claimed, sorted(free)) == (["mine", "pv1"], ["anywhere", "pv3"])
    book.revert((binding,))
    book.observe(True, book.volumes["pv3"])
    assert sorted(book.candidates("local", "default/a", {HOST: "n1"})[1]) == ["anywhere", "pv1"]
    assert book.candidates("local", "default/a", {}) == (["mine"], ["anywhere"])  # a node without the label


def test_an_ephemeral_claim_bound_to_a_missing_volume_keeps_its_pod_waiting(cluster: Cluster) -> None:
    """VolumeZone's PreFilter skips ephemeral volumes; VolumeBinding's ``checkBoundClaims`` finds no volume."""
    told(cluster, sc("wffc"), pvc("p-scratch", volume="gone", owner="uid-p"))
    cluster.add(wanting("p", ephemeral="scratch"))
    decisions = cluster.run(1.0)
    assert not bound(decisions)
    assert (
        "3 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
        in messages(decisions)["default/p"]
    )
