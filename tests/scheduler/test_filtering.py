"""The node filter on its own (:class:`~kubeflux.scheduler.filtering.NodeFilter`): which nodes may take a pod now
and in time, by the books, its quick tests for a group, and whether a group can never fit; and, through the
scheduler, the reasons kube-scheduler's message counts, and what is remembered of groups found able to fit."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.filtering import alike_run, copies, static_order, whole_node_policy
from kubeflux.scheduler.interface import Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL, PodGroup
from kubeflux.scheduler.sharing import CappedSharing, ExclusiveSharing
from kubeflux.scheduler.testing import ADDED, DELETED, MODIFIED, Cluster, bound, messages, node, parts, pod
from kubeflux.scheduler.translate import POLICY_ANNOTATION


def test_a_pod_fits_the_nodes_whose_books_take_it_and_the_others_count_their_reasons() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=2), node("w3", cores=4, labels={"zone": "b"})])
    picky = pod("picky", 3000, node_selector={"zone": "b"})
    fit = p.filter.fit(picky)
    assert fit.fits("w3") and not fit.fits("w1") and not fit.fits("w2")
    assert p.filter.reasons(picky) == {"node(s) didn't match Pod's node affinity/selector": 2}
    assert p.filter.reasons(pod("big", 3000)) == {"Insufficient cpu": 1}


def test_a_node_whose_reservation_needs_its_cores_is_short_for_a_pod_planned_past_the_holds_start() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    job = p.queue.add("uid-r", pod("r", 4000))
    job.holds.append(p.books.plans.hold("w1", 100, 200, {CPU: 4000}))
    short, long = pod("short", 1000), pod("long", 1000)
    fit = p.filter.fit(long)
    assert p.filter.fits_during("w1", short, 0, 100) and not p.filter.fits_during("w1", long, 0, 101)
    assert p.filter.held_short(long, fit, 0, 150) == ["w1"] and p.filter.held_short(short, fit, 0, 100) == []
    assert p.filter.room_during("w1", 0, 100)[CPU] == 4000 and p.filter.room_during("w1", 0, 150)[CPU] == 0
    assert p.filter.fits_many("w2", long, 4, 0, 150) and not p.filter.fits_many("w2", long, 5, 0, 150)


def test_under_a_capped_sharing_policy_kubeflux_has_room_up_to_its_share() -> None:
    p = parts([node("w1", cores=4)], sharing=CappedSharing(0.5))
    assert p.filter.room("w1")[CPU] == 2000
    assert p.filter.reasons(pod("big", 3000)) == {"Insufficient cpu": 1}
    assert copies(p.filter.room("w1"), {CPU: 1000}) == 2 and copies({}, {}) is None


def test_a_group_too_wide_for_the_free_nodes_is_known_short_before_any_match() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=3)
    members = [pod(f"g-{i}", 3000, labels={POD_GROUP_LABEL: "g"}) for i in range(3)]
    for member in members:
        job = p.queue.add(member.uid, member)
    assert alike_run(job) == 3 and p.filter.first_short_member(job, 3) is members[2]
    assert p.filter.too_few_slots(job, 0, 3) and not p.filter.too_few_slots(job, 0, 2)
    assert not p.filter.may_fit(job, 0)  # 9 cores asked, 8 free
    assert "pod group default/g can never fit: its 3 pods need 9 cpu in all" in (p.filter.gang_never_fits(job) or "")
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=2)
    assert p.filter.may_fit(job, 0)  # 6 cores for two: the quick necessary test cannot tell
    assert p.filter.gang_never_fits(job) is None


def test_a_pods_policy_tells_whether_it_holds_a_node_whole_and_orders_nodes_statically() -> None:
    whole = pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"})
    assert whole_node_policy(whole, "lonode") and not whole_node_policy(pod("p", 1000), "lonode")
    assert static_order(pod("p", 1000), "lonode") and not static_order(pod("p", 1000), "first")
    assert not static_order(whole, "lonode")


def test_nodes_outside_an_exclusive_sharing_policy_are_counted_with_their_reason() -> None:
    ours = {"kubeflux.io/owner": "kubeflux"}
    cluster = Cluster(
        KubefluxScheduler(sharing=ExclusiveSharing()), [node("a", labels=ours), node("b", labels=ours), node("c")]
    )
    cluster.add(pod("fill-a", 4000), pod("fill-b", 4000, t=1))
    assert len(bound(cluster.run())) == 2
    cluster.nodes["b"] = node("b")  # no longer kubeflux's: its pod still runs, the node leaves kubeflux's share
    cluster.tell(MODIFIED, cluster.nodes["b"])
    cluster.add(pod("more", 1000, t=2))
    message = messages(cluster.run(2.0))["default/more"]
    assert message == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) are not available to kubeflux under its sharing policy."
    )


def test_before_any_node_is_kubefluxs_every_node_is_counted_as_outside_its_sharing_policy() -> None:
    cluster = Cluster(KubefluxScheduler(sharing=ExclusiveSharing()), [node("a"), node("b")])
    cluster.add(pod("p", 1000))
    assert messages(cluster.run())["default/p"] == (
        "0/2 nodes are available: 2 node(s) are not available to kubeflux under its sharing policy."
    )


def test_a_gang_alike_to_one_that_could_fit_is_rejected_once_a_node_is_gone() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2), node("w2", cores=2)])
    cluster.add(pod("hog", 2000))
    (busy,) = bound(cluster.run()).values()
    other = "w2" if busy == "w1" else "w1"
    cluster.tell(ADDED, PodGroup("default", "a", min_member=2))
    cluster.add(*(pod(f"a-{i}", 2000, labels={POD_GROUP_LABEL: "a"}) for i in range(2)))
    waiting = cluster.run(1.0)
    assert [type(d) for d in waiting] == [Unschedulable, Unschedulable]  # two whole nodes: it fits once hog ends
    gone = cluster.nodes.pop(other)
    cluster.tell(DELETED, gone)
    cluster.tell(ADDED, PodGroup("default", "b", min_member=2))
    cluster.add(*(pod(f"b-{i}", 2000, labels={POD_GROUP_LABEL: "b"}) for i in range(2)))
    decisions = cluster.run(2.0)
    # b has a's shape, which was found to fit the two empty nodes: that is forgotten with the node, and a, found
    # able to fit then, is asked again
    rejected = {d.pod for d in decisions if isinstance(d, Reject)}
    assert rejected == {"default/a-0", "default/a-1", "default/b-0", "default/b-1"}, decisions
    assert all("can never fit" in d.message for d in decisions if isinstance(d, Reject))
