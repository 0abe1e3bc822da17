"""The queue on its own: jobs in order, a group's members together, its minimum and readiness, the change epoch
that wakes gangs backing off; and, through the scheduler, a pass that stops at the queue depth."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION
from kubeflux.scheduler.objects import POD_GROUP_LABEL, Pod, PodGroup, PodPhase
from kubeflux.scheduler.queue import INHERITED, PendingQueue, placement_view
from kubeflux.scheduler.testing import Cluster, bound, node, pod


def test_jobs_are_ordered_by_priority_then_arrival_then_first_sight() -> None:
    queue = PendingQueue()
    for p in (pod("late", 1000, t=5), pod("early-b", 1000, t=1), pod("early-a", 1000, t=1), pod("vip", 1000, t=9)):
        if p.name == "vip":
            p.priority = 10
        queue.add(p.uid, p)
    assert [job.key for job in queue.ordered()] == ["default/vip", "default/early-b", "default/early-a", "default/late"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("aprahH"), st.integers(0, 7), st.integers(0, 3), st.integers(-2, 2)), max_size=60
    )
)
def test_the_order_kept_between_passes_is_the_order_sorted_anew(steps: list[tuple[str, int, int, int]]) -> None:
    """:meth:`PendingQueue.ordered` mends the order it found last (jobs gone, new, re-prioritised, moved to another
    job's place; the head of the queue bound, as a burst does pass after pass) instead of sorting again: after every
    step it is what sorting every job now gives."""
    queue = PendingQueue()
    made: dict[int, Pod] = {}
    for op, which, when, priority in steps:
        if op == "a":  # a pod arrives, or its object is replaced with another priority (a watch event)
            known = made.get(which)
            group = {POD_GROUP_LABEL: f"g{which % 2}"} if which >= 5 else {}  # pods 5-7: two groups' members
            fresh = (
                pod(f"p{which}", 1000, t=float(when), labels=group)
                if known is None
                else replace(known, priority=priority)
            )
            made[which] = fresh
            queue.add(fresh.uid, fresh)
        elif op == "r" and which in made:  # it goes (bound, deleted); a group's job may stay, with a new priority
            queue.remove_pod(made.pop(which).uid)
        elif op == "p" and which in made:  # it takes the place of another job that goes (a started group's member)
            job = queue.by_pod[made[which].uid]
            started = next((j for j in queue.ordered() if j is not job), None)  # the head, mostly
            if started is not None:
                queue.remove_job(started)
                made = {k: v for k, v in made.items() if v.uid not in started.pods}
                queue.take_place(job, started)
        elif op in "hH" and queue.jobs:  # the first `which` jobs in the order placed (h) or their pods bound (H)
            for head in queue.ordered()[: which % 3 + 1]:
                uids = list(head.pods)
                if op == "h":
                    queue.remove_job(head)
                else:
                    for uid in uids:
                        queue.remove_pod(uid)
                made = {k: v for k, v in made.items() if v.uid not in uids}
        expected = sorted(queue.jobs.values(), key=lambda j: (-j.priority, j.arrival, j.seq))
        assert [job.key for job in queue.ordered()] == [job.key for job in expected]


def test_a_group_that_loses_its_highest_priority_member_moves_back_in_the_kept_order() -> None:
    """Between passes only a pod leaves, but its group's job stays with a lower priority: the order kept from the
    last pass is mended, not reused as it was."""
    queue = PendingQueue()
    solo = pod("solo", 1000, t=1.0)
    low, high = (pod(f"g-{i}", 1000, t=2.0, labels={POD_GROUP_LABEL: "g"}) for i in range(2))
    high.priority = 5
    for p in (solo, low, high):
        queue.add(p.uid, p)
    assert [job.key for job in queue.ordered()] == ["default/g", "default/solo"]
    queue.remove_pod(high.uid)
    assert [job.key for job in queue.ordered()] == ["default/solo", "default/g"]


def test_a_groups_members_wait_as_one_job_ready_at_its_min_member_and_arriving_with_the_group() -> None:
    queue = PendingQueue()
    queue.groups["default/mpi"] = PodGroup("default", "mpi", min_member=3, creation_time=2.0)
    members = [pod(f"mpi-{i}", 1000, t=7, labels={POD_GROUP_LABEL: "mpi"}) for i in range(2)]
    jobs = {queue.add(m.uid, m).key for m in members}
    assert jobs == {"default/mpi"} and len(queue) == 1
    job = queue.jobs["default/mpi"]
    assert job.arrival == 2.0 and queue.missing_members(job) == 1 and queue.minimum(job) == 2
    third = pod("mpi-2", 1000, labels={POD_GROUP_LABEL: "mpi"})
    queue.add(third.uid, third)
    assert queue.missing_members(job) == 0 and queue.minimum(job) == 3
    assert queue.timeout(job) is None  # no scheduleTimeoutSeconds


def test_a_member_of_a_started_group_waits_on_its_own() -> None:
    queue = PendingQueue()
    first = pod("g-0", 1000, labels={POD_GROUP_LABEL: "g"})
    job = queue.add(first.uid, first)
    queue.remove_job(job)  # placed: the group has started
    late = pod("g-1", 1000, labels={POD_GROUP_LABEL: "g"})
    assert queue.add(late.uid, late).key == "default/g-1" and queue.minimum(queue.jobs["default/g-1"]) == 1


def test_removing_a_jobs_last_pod_removes_the_job() -> None:
    queue = PendingQueue()
    a = pod("a", 1000)
    queue.add(a.uid, a)
    assert queue.remove_pod(a.uid) is not None and len(queue) == 0 and queue.remove_pod(a.uid) is None


def test_a_change_bumps_the_epoch_and_wakes_the_gangs_backing_off() -> None:
    queue = PendingQueue()
    queue.dirty = False
    a = pod("a", 1000)
    job = queue.add(a.uid, a)
    job.retry_at = 100.0
    queue.backing_off.add(job)
    queue.changed()
    assert queue.dirty and queue.epoch == 1 and job.retry_at == 0.0 and not queue.backing_off


def test_a_pod_queued_with_an_expected_start_on_it_counts_as_told_it() -> None:
    queue = PendingQueue()
    a = pod("a", 1000, annotations={EXPECTED_START_ANNOTATION: "2026-01-01T00:00:00Z"})
    assert queue.add(a.uid, a).told == {a.uid: INHERITED}


def test_what_placing_reads_of_a_pod_leaves_out_its_status_and_its_expected_start() -> None:
    a = pod("a", 1000)
    told = pod("a", 1000, annotations={EXPECTED_START_ANNOTATION: "2026-01-01T00:00:00Z"})
    told.phase = PodPhase.PENDING
    assert placement_view(a) == placement_view(told)
    assert placement_view(a) != placement_view(pod("a", 2000))


def test_pods_beyond_the_queue_depth_are_placed_in_the_next_pass_without_a_new_event() -> None:
    # 100 one-core pods on 50 nodes of 4 cores, a queue depth of 64: the first pass binds 64, and the binds it made
    # are the only events; the next pass must place the other 36 (found by kubeflux serve on a quiet cluster).
    cluster = Cluster(KubefluxScheduler(queue_depth=64), [node(f"w{i}", cores=4) for i in range(50)])
    cluster.add(*(pod(f"p{i}", 1000) for i in range(100)))
    assert len(bound(cluster.run())) == 64
    assert len(bound(cluster.run())) == 36
