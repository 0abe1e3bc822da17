"""Gang, rejection, expected-start and message semantics of the scheduler core, through observe/schedule with a
tiny API-server stand-in (the simulator scenarios are in tests/sim/test_kubeflux_gangs.py)."""

from __future__ import annotations

import dataclasses

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, PodGroup
from kubeflux.scheduler.sharing import ExclusiveSharing
from kubeflux.scheduler.translate import DURATION_ANNOTATION, POLICY_ANNOTATION

from .test_core import ADDED, MODIFIED, Cluster, bound, messages, node, pod


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


def test_a_rejected_gang_is_queued_again_and_placed_when_a_node_is_added() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=3))
    cluster.add(*(pod(f"mpi-{i}", 2000, labels={POD_GROUP_LABEL: "mpi"}) for i in range(3)))
    assert all(isinstance(d, Reject) for d in cluster.run())
    cluster.nodes["w3"] = node("w3", cores=2)
    cluster.tell(ADDED, cluster.nodes["w3"])
    assert bound(cluster.run(1.0)) == {"default/mpi-0": "w1", "default/mpi-1": "w2", "default/mpi-2": "w3"}


def test_a_rejected_pod_is_queued_again_when_a_nodes_capacity_is_raised() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("big", 4000))
    decisions = cluster.run()
    assert [type(d) for d in decisions] == [Reject]
    cluster.nodes["w1"] = node("w1", cores=4)
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert bound(cluster.run(1.0)) == {"default/big": "w1"}


def test_a_rejected_pod_that_still_never_fits_after_a_node_change_is_rejected_again_not_bound() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("big", 4000))
    cluster.run()
    cluster.nodes["w1"] = node("w1", cores=2, labels={"zone": "a"})
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert [type(d) for d in cluster.run(1.0)] == [Reject]


def test_a_node_held_whole_by_a_node_exclusive_job_is_reported_as_such() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=4)])
    cluster.add(pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"}), pod("later", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/whole": "w1"}
    assert messages(decisions)["default/later"] == (
        "0/1 nodes are available: 1 node(s) were held whole by a node-exclusive job."
    )


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


def test_the_expected_start_is_withdrawn_when_the_reservation_goes_and_kept_while_it_stays() -> None:
    # Under EASY only the head holds a reservation. A higher-priority job arrives and becomes the head: the old head
    # loses its reservation, and its pod is told so (no expected start) in the same pass.
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2)])
    cluster.add(pod("running", 2000, annotations={DURATION_ANNOTATION: "100"}))
    cluster.run()
    cluster.add(pod("head", 2000, t=1, annotations={DURATION_ANNOTATION: "100"}))
    said = {d.pod: d.expected_start for d in cluster.run(1.0) if isinstance(d, Unschedulable)}
    assert said == {"default/head": 100.0}
    assert all(d.pod != "default/head" for d in cluster.run(1.5))  # nothing changed: nothing said again
    cluster.add(pod("urgent", 2000, t=2, priority=10, annotations={DURATION_ANNOTATION: "50"}))
    said = {d.pod: d.expected_start for d in cluster.run(2.0) if isinstance(d, Unschedulable)}
    assert said == {"default/urgent": 100.0, "default/head": None}


def test_a_memory_heavy_pod_is_not_placed_where_a_reservation_needs_the_memory() -> None:
    big = {CPU: 1000, MEMORY: 12 * 2**30}
    cluster = Cluster(KubefluxScheduler(), [Node("w1", uid="w1", allocatable={CPU: 8000, MEMORY: 16 * 2**30})])
    first = pod("first", 1000, annotations={DURATION_ANNOTATION: "100"})
    first.requests = {CPU: 1000, MEMORY: 8 * 2**30}
    head = pod("head", 1000, t=1, annotations={DURATION_ANNOTATION: "100"})
    head.requests = dict(big)
    greedy = pod("greedy", 1000, t=2, annotations={DURATION_ANNOTATION: "1000"})
    greedy.requests = {CPU: 1000, MEMORY: 6 * 2**30}
    cluster.add(first)
    cluster.run()
    cluster.add(head, greedy)
    decisions = cluster.run(2.0)
    assert bound(decisions) == {}
    assert {d.pod: d.expected_start for d in decisions if isinstance(d, Unschedulable)}["default/head"] == 100.0


def _books_node(**extra: int) -> Node:
    return Node("w1", uid="w1", allocatable={CPU: 8000, MEMORY: 16 * 2**30, **extra})


@pytest.mark.parametrize(
    ("resource", "capacity", "first", "head", "greedy"),
    [
        pytest.param("ephemeral-storage", 100, 60, 80, 30, id="ephemeral-storage"),
        pytest.param("example.com/fpga", 4, 2, 4, 1, id="extended-resource"),
        pytest.param(MEMORY, 16 * 2**30, 8 * 2**30, 12 * 2**30, 6 * 2**30, id="memory"),
    ],
)
def test_easy_never_backfills_over_the_heads_reservation_in_any_resource(
    resource: str, capacity: int, first: int, head: int, greedy: int
) -> None:
    # `first` holds part of the resource until 100; the head needs more than the rest, so it waits for 100; a
    # long pod that fits in the rest now would leave the head short then.
    cluster = Cluster(KubefluxScheduler(), [_books_node(**{resource: capacity})])
    pods = {}
    for name, amount, t, duration in (("first", first, 0, 100), ("head", head, 1, 100), ("greedy", greedy, 2, 1000)):
        pods[name] = pod(name, 1000, t=t, annotations={DURATION_ANNOTATION: str(duration)})
        pods[name].requests = {CPU: 1000, resource: amount}
    cluster.add(pods["first"])
    assert bound(cluster.run()) == {"default/first": "w1"}
    cluster.add(pods["head"], pods["greedy"])
    decisions = cluster.run(2.0)
    assert bound(decisions) == {}
    assert {d.pod: d.expected_start for d in decisions if isinstance(d, Unschedulable)}["default/head"] == 100.0
    cluster.end("first")
    assert bound(cluster.run(100.0)) == {"default/head": "w1"}


def test_easy_never_backfills_over_the_heads_reservation_in_the_pod_count() -> None:
    # Three pods fit the node. A gang of two waits for `first` to end at 100 (cores); `forever` keeps one pod.
    # A small long pod fits now (first, forever and it: three pods) but would leave the gang one pod short at 100.
    cluster = Cluster(KubefluxScheduler(), [_books_node(pods=3)])
    cluster.add(pod("first", 4000, annotations={DURATION_ANNOTATION: "100"}), pod("forever", 1000))
    assert len(bound(cluster.run())) == 2
    cluster.tell(ADDED, PodGroup("default", "pair", min_member=2))
    pair = [pod(f"pair-{i}", 3000, t=1, labels={POD_GROUP_LABEL: "pair"}) for i in range(2)]
    small = pod("small", 100, t=2, annotations={DURATION_ANNOTATION: "1000"})
    cluster.add(*pair, small)
    decisions = cluster.run(2.0)
    assert bound(decisions) == {}
    assert {d.expected_start for d in decisions if isinstance(d, Unschedulable) and "pair" in d.pod} == {100.0}


def test_a_pod_no_node_admits_is_rejected_blocks_no_fcfs_queue_and_runs_once_a_node_is_labelled() -> None:
    cluster = Cluster(KubefluxScheduler(backfill="fcfs"), [node("w1"), node("w2")])
    cluster.add(pod("picky", 1000, node_selector={"zone": "b"}), pod("after", 1000, t=1))
    decisions = cluster.run()
    assert bound(decisions) == {"default/after": "w1"}
    rejected = [d for d in decisions if isinstance(d, Reject)]
    assert [d.pod for d in rejected] == ["default/picky"]
    assert rejected[0].message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. No node admits the pod as "
        "the nodes are now; it is reconsidered when a node is added or changes."
    )
    cluster.nodes["w2"] = node("w2", labels={"zone": "b"})
    cluster.tell(MODIFIED, cluster.nodes["w2"])
    assert bound(cluster.run(2.0)) == {"default/picky": "w2"}


def test_a_gang_whose_members_only_fit_nodes_that_do_not_admit_them_is_rejected() -> None:
    # Two 4-core members that must run in zone b: only w2 is in zone b, and it holds one of them.
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2", labels={"zone": "b"})])
    cluster.tell(ADDED, PodGroup("default", "pair", min_member=2))
    cluster.add(
        *(pod(f"pair-{i}", 4000, node_selector={"zone": "b"}, labels={POD_GROUP_LABEL: "pair"}) for i in range(2))
    )
    decisions = cluster.run()
    assert {d.pod for d in decisions if isinstance(d, Reject)} == {"default/pair-0", "default/pair-1"}
    cluster.nodes["w1"] = node("w1", labels={"zone": "b"})
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert len(bound(cluster.run(1.0))) == 2


def test_pods_beyond_the_queue_depth_are_placed_in_the_next_pass_without_a_new_event() -> None:
    # 100 one-core pods on 50 nodes of 4 cores, a queue depth of 64: the first pass binds 64, and the binds it made
    # are the only events; the next pass must place the other 36 (found by kubeflux serve on a quiet cluster).
    cluster = Cluster(KubefluxScheduler(queue_depth=64), [node(f"w{i}", cores=4) for i in range(50)])
    cluster.add(*(pod(f"p{i}", 1000) for i in range(100)))
    assert len(bound(cluster.run())) == 64
    assert len(bound(cluster.run())) == 36


def test_a_rejected_gang_stays_rejected_whole_when_the_shell_writes_a_members_status() -> None:
    # Three 16-core members on one 16-core node: rejected as never fitting. kubeflux serve then writes
    # PodScheduled=False on a member (a status-only update): the member must not be queued alone, splitting the
    # gang into one rejected member and others waiting for a minMember they cannot reach.
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=16)])
    cluster.tell(ADDED, PodGroup("default", "wide", min_member=3))
    cluster.add(*(pod(f"wide-{i}", 16_000, labels={POD_GROUP_LABEL: "wide"}) for i in range(3)))
    assert [type(d) for d in cluster.run()] == [Reject, Reject, Reject]
    status_only = dataclasses.replace(cluster.pods["default/wide-0"])
    cluster.tell(MODIFIED, status_only)
    assert cluster.run(1.0) == []
    relabelled = dataclasses.replace(status_only, labels={**status_only.labels, "tier": "hpc"})
    cluster.tell(MODIFIED, relabelled)  # a change placing reads: the whole gang is reconsidered (and still too big)
    assert [type(d) for d in cluster.run(2.0)] == [Reject, Reject, Reject]
