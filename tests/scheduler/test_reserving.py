"""The reserver on its own (:class:`~kubeflux.scheduler.reserving.Reserver`): a job that cannot start now is held at
the earliest time it fits, in the engine and in the books in time; and, through the scheduler, EASY backfilling
that never passes the head's reservation in any resource, and expected starts told and withdrawn with it."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Unschedulable
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, PodGroup
from kubeflux.scheduler.testing import ADDED, Cluster, bound, node, parts, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION


def test_a_lone_pod_is_reserved_when_the_pod_ahead_of_it_ends() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    for name, seconds in (("a", 100), ("b", 50)):
        running = pod(name, 4000, annotations={DURATION_ANNOTATION: str(seconds)})
        p.placer.start_at(p.queue.add(running.uid, running), 0)
    waiting = pod("c", 2000, t=1, annotations={DURATION_ANNOTATION: "30"})
    job = p.queue.add(waiting.uid, waiting)
    assert p.reserver.reserve(job, 1.0) == 50.0 and job.expected_start == 50.0
    assert len(job.reservations) == 1 and [(h.node, h.start, h.end) for h in job.holds] == [("w2", 50, 80)]
    assert p.books.plans.holds == {"w2": job.holds}


def test_a_group_is_reserved_at_once_for_its_members_and_told_one_start() -> None:
    p = parts([node("w1", cores=4), node("w2", cores=4)])
    running = pod("a", 4000, annotations={DURATION_ANNOTATION: "100"})
    p.placer.start_at(p.queue.add(running.uid, running), 0)
    p.queue.groups["default/g"] = PodGroup("default", "g", min_member=2)
    for i in range(2):
        member = pod(f"g-{i}", 4000, labels={POD_GROUP_LABEL: "g"}, annotations={DURATION_ANNOTATION: "20"})
        job = p.queue.add(member.uid, member)
    assert p.reserver.reserve(job, 0.0) == 100.0
    assert sorted(hold.node for hold in job.holds) == ["w1", "w2"]


def test_a_pod_no_node_can_ever_hold_gets_no_reservation() -> None:
    p = parts([node("w1", cores=2)])
    job = p.queue.add("uid-big", pod("big", 4000))
    assert p.reserver.reserve(job, 0.0) is None and not job.reservations and not job.holds


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
