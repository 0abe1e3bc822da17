"""The placer on its own (:class:`~kubeflux.scheduler.placing.Placer`): a job placed now, where its policy prefers,
all of a group's minimum or nothing, counted in the books; and, through the scheduler, a gang the one-by-one match
cannot pack placed by the assignment search, and a node held whole reported as such."""

from __future__ import annotations

from collections import Counter

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL, PodGroup
from kubeflux.scheduler.placing import REASON_HELD_WHOLE, REASON_RESERVED
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node, parts, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION, POLICY_ANNOTATION, Placement


def test_a_lone_pod_goes_where_its_policy_prefers_on_its_lowest_free_cores() -> None:
    for policy, where in (("lonode", "w1"), ("hinode", "w2")):
        p = parts([node("w1", cores=4), node("w2", cores=4)], policy=policy)
        a = pod("a", 2000, annotations={DURATION_ANNOTATION: "30"})
        made = p.placer.start_at(p.queue.add(a.uid, a), 5)
        assert isinstance(made, list)
        [(placed, alloc)] = made
        assert placed is a and alloc.node == where and (alloc.start, alloc.duration) == (5, 30)
        assert alloc.placement is not None and alloc.placement.node == where and len(alloc.placement.cores) == 2
        assert p.books.allocations[a.uid] is alloc and p.books.ledger.on(where)[CPU] == 2000


def test_a_pod_that_fits_nowhere_now_gets_kube_schedulers_reasons_and_nothing_is_counted() -> None:
    p = parts([node("w1", cores=2)])
    made = p.placer.start_at(p.queue.add("uid-big", pod("big", 4000)), 0)
    assert made == Counter({"Insufficient cpu": 1}) and not p.books.allocations


def test_a_group_places_its_minimum_or_nothing() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=3)
    members = [pod(f"g-{i}", 3000, labels={POD_GROUP_LABEL: "g"}) for i in range(3)]
    for member in members:
        job = p.queue.add(member.uid, member)
    assert isinstance(p.placer.start_at(job, 0), Counter) and not p.books.allocations
    assert p.books.graph is not None and p.books.graph.free_counts("w1", 0, 10)[0] == 4
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=2)  # two of three: the third waits
    made = p.placer.start_at(job, 0)
    assert isinstance(made, list) and sorted(alloc.node for _, alloc in made) == ["w1", "w2"]


def test_alike_members_matched_at_once_share_one_engine_job_released_member_by_member() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=4)
    members = [pod(f"g-{i}", 2000, labels={POD_GROUP_LABEL: "g"}) for i in range(4)]
    for member in members:
        job = p.queue.add(member.uid, member)
    made = p.placer.start_at(job, 0)
    assert isinstance(made, list) and len({alloc.jobid for _, alloc in made}) == 1
    assert [alloc.placement for _, alloc in made] == [
        Placement("w1", ("core0", "core1"), ()),
        Placement("w1", ("core2", "core3"), ()),
        Placement("w2", ("core0", "core1"), ()),
        Placement("w2", ("core2", "core3"), ()),
    ]
    jobid = made[0][1].jobid
    assert p.books.shared[jobid] == {m.uid for m in members}
    p.books.release(members[0].uid, "ended")
    assert p.books.graph is not None and p.books.graph.free_counts("w1", 0, 10)[0] == 2
    assert p.books.shared[jobid] == {m.uid for m in members[1:]}


def test_a_pod_short_because_of_a_reservation_is_told_so() -> None:
    p = parts([node("w1", cores=4)])
    job = p.queue.add("uid-r", pod("r", 4000))
    job.holds.append(p.books.plans.hold("w1", 10, 100, {CPU: 4000}))
    assert p.placer.start_at(p.queue.add("uid-long", pod("long", 1000)), 0) == Counter({REASON_RESERVED: 1})
    short = pod("short", 1000, annotations={DURATION_ANNOTATION: "10"})
    assert isinstance(p.placer.start_at(p.queue.add(short.uid, short), 0), list)


def test_a_node_exclusive_pod_holds_its_node_whole() -> None:
    p = parts([node("w1", cores=4)])
    whole = pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"})
    assert isinstance(p.placer.start_at(p.queue.add(whole.uid, whole), 0), list)
    assert p.placer.start_at(p.queue.add("uid-b", pod("b", 1000)), 0) == Counter({REASON_HELD_WHOLE: 1})


def test_a_gang_that_first_fit_decreasing_cannot_pack_is_placed_by_the_search() -> None:
    # Two 7-core nodes, members of 3, 3, 2, 2, 2, 2 cores: one by one (and largest first) leaves a 2 with nowhere to
    # go; 3 + 2 + 2 on each node fits exactly.
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=7), node("w2", cores=7)])
    cluster.tell(ADDED, PodGroup("default", "pack", min_member=6))
    sizes = [3, 3, 2, 2, 2, 2]
    cluster.add(*(pod(f"pack-{i}", size * 1000, labels={POD_GROUP_LABEL: "pack"}) for i, size in enumerate(sizes)))
    placed = bound(cluster.run())
    assert len(placed) == 6
    for name in ("w1", "w2"):
        assert sum(sizes[int(key.rsplit("-", 1)[1])] for key, where in placed.items() if where == name) == 7


def test_a_node_held_whole_by_a_node_exclusive_job_is_reported_as_such() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4)])
    cluster.add(pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"}), pod("later", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/whole": "w1"}
    assert messages(decisions)["default/later"] == (
        "0/1 nodes are available: 1 node(s) were held whole by a node-exclusive job."
    )
