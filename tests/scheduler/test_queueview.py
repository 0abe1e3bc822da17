"""The read-only snapshot of a scheduler's queue (:mod:`kubeflux.scheduler.queueview`): order, reason, expected
start, what a reservation holds, and that taking it changes nothing."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import EventKind, Unschedulable
from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL, Pod, PodGroup
from kubeflux.scheduler.queueview import QueuedJob, rfc3339
from kubeflux.scheduler.testing import Cluster, node, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION

T0 = 1_795_917_000.0


def _cluster(backfill: str = "easy") -> Cluster:
    # the queue's order alone: an urgent pod waits rather than preempt (preemption: tests/scheduler/test_preempting)
    scheduler = KubefluxScheduler(backfill=backfill, preemption="never")
    return Cluster(scheduler, [node("n0", cores=4), node("n1", cores=4)])


def _timed(name: str, cpu: int, seconds: int, t: float, **kwargs: object) -> Pod:
    return pod(name, cpu, t=t, annotations={DURATION_ANNOTATION: str(seconds)}, **kwargs)


def test_an_empty_queue_is_an_empty_list() -> None:
    assert _cluster().scheduler.queued(T0) == []


def test_the_jobs_come_in_the_order_they_are_tried_with_why_they_wait_and_when_they_start() -> None:
    cluster = _cluster()
    cluster.now = T0
    cluster.add(_timed("running", 8000, 600, T0))  # fits neither node: rejected; the next ones run
    cluster.add(_timed("a", 4000, 600, T0), _timed("b", 4000, 600, T0))
    cluster.run(T0)
    cluster.add(_timed("late", 4000, 60, T0 + 5), _timed("urgent", 2000, 60, T0 + 10, priority=100))
    decisions = cluster.run(T0 + 20)
    told = {d.pod: d for d in decisions if isinstance(d, Unschedulable)}

    queued = cluster.scheduler.queued(T0 + 30)

    assert [(j.position, j.job, j.priority) for j in queued] == [(1, "default/urgent", 100), (2, "default/late", 0)]
    urgent, late = queued
    assert urgent.state == "reserved" and urgent.expected_start == T0 + 600
    assert urgent.expected_start == told["default/urgent"].expected_start  # the start written on the pod
    assert urgent.reason == told["default/urgent"].message and "Insufficient cpu" in urgent.reason
    assert urgent.reserved == {CPU: 2000} and urgent.pods == ("default/urgent",) and not urgent.group
    assert urgent.waited == 20.0 and urgent.arrival == T0 + 10
    assert late.state == "waiting" and late.expected_start is None and late.reserved == {}
    assert late.reason == told["default/late"].message


def test_a_group_short_of_its_members_is_incomplete_and_its_json_is_plain() -> None:
    cluster = _cluster()
    cluster.tell(EventKind.ADDED, PodGroup("default", "g", 3, creation_time=T0))
    labels = {POD_GROUP_LABEL: "g"}
    cluster.add(pod("g-0", 1000, t=T0, labels=labels), pod("g-1", 1000, t=T0, labels=labels))
    cluster.run(T0 + 1)

    (job,) = cluster.scheduler.queued(T0 + 61)

    assert (job.job, job.group, job.state) == ("default/g", True, "incomplete")
    assert job.pods == ("default/g-0", "default/g-1")
    assert "has 2 of its minMember 3 pods" in job.reason
    assert job.to_json() == {
        "position": 1,
        "job": "default/g",
        "group": True,
        "pods": ["default/g-0", "default/g-1"],
        "priority": 0,
        "arrival": T0,
        "waitedSeconds": 61.0,
        "state": "incomplete",
        "expectedStart": None,
        "expectedStartTime": None,
        "reason": job.reason,
        "reserved": {},
        "nodes": [],
    }


def test_taking_a_snapshot_changes_nothing_the_next_pass_decides() -> None:
    def scenario(look: bool) -> list[object]:
        cluster = _cluster("conservative")
        cluster.add(*(_timed(f"p{i}", 3000, 100 * (i + 1), T0) for i in range(5)))
        out: list[object] = []
        for t in (T0, T0 + 1, T0 + 150, T0 + 400):
            if look:
                cluster.scheduler.queued(t)
            out.extend(cluster.run(t))
        return out

    assert scenario(True) == scenario(False)


def test_a_reserved_json_names_its_start_in_rfc3339_and_its_requests_as_quantities() -> None:
    job = QueuedJob(1, "default/p", False, ("default/p",), 0, T0, 5.0, "reserved", T0 + 55, "why", {CPU: 2500}, ("n1",))
    assert job.to_json()["expectedStartTime"] == rfc3339(T0 + 55) == "2026-11-29T01:50:55Z"
    assert job.to_json()["reserved"] == {"cpu": "2500m"} and job.to_json()["nodes"] == ["n1"]
