"""The coscheduling baseline: gangs held at Permit, bound together, rejected on timeout or PostFilter."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, POD_GROUP_LABEL, Node, Pod, PodGroup, PodPhase
from kubeflux.sim.baselines import create
from kubeflux.sim.baselines.coscheduling import CoschedulingScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.mapping import map_to_cluster

from ._helpers import one_core_nodes, trace

GI = 1024**3
NO_VICTIMS_1 = "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."


def make_node(name: str, cpu: int) -> Node:
    return Node(name, allocatable={"cpu": cpu, "memory": 64 * GI, "pods": 110})


def member(group: str, index: int, cpu: int = 1000, t: float = 0.0, **kwargs: object) -> Pod:
    return Pod(
        "default",
        f"{group}-{index}",
        uid=f"{group}-{index}",
        creation_time=t,
        requests={"cpu": cpu},
        labels={POD_GROUP_LABEL: group},
        **kwargs,  # type: ignore[arg-type]
    )


def add(s: CoschedulingScheduler, *objects: Node | Pod | PodGroup, now: float = 0.0) -> None:
    for obj in objects:
        s.observe(ClusterEvent(EventKind.ADDED, obj), now)


def binds(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod.split("/")[1]: d.node for d in decisions if isinstance(d, Bind)}


def messages(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod.split("/")[1]: d.message for d in decisions if isinstance(d, Unschedulable)}


def test_gang_is_bound_together_once_min_member_are_assigned() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n0", 2000), make_node("n1", 2000), PodGroup("default", "g", min_member=3))
    add(s, *(member("g", i) for i in range(3)))
    decisions = s.schedule(0.0)
    assert all(isinstance(d, Bind) for d in decisions)
    assert sorted(binds(decisions)) == ["g-0", "g-1", "g-2"]
    assert s.next_wakeup(0.0) is None


def test_waiting_pods_time_out_and_release_their_nodes() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 2000), PodGroup("default", "g", min_member=3, schedule_timeout_seconds=30))
    # the third member belongs to another scheduler and never gets a node
    add(s, member("g", 0), member("g", 1), member("g", 2, scheduler_name="elsewhere"))
    assert s.schedule(0.0) == []  # both held at Permit
    assert s.next_wakeup(0.0) == 30.0
    add(s, Pod("default", "solo", uid="solo", creation_time=5.0, requests={"cpu": 2000}), now=5.0)
    assert messages(s.schedule(5.0)) == {
        "solo": f"0/1 nodes are available: 1 Insufficient cpu. {NO_VICTIMS_1}, can not find pod group"
    }  # the reservations hold the node
    decisions = s.schedule(30.0)
    assert messages(decisions) == {
        "g-0": "rejected due to timeout after waiting 30s at plugin Coscheduling",
        "g-1": "rejection in Unreserve",
    }
    assert binds(decisions) == {"solo": "n"}  # released in the same cycle; the group backs off 1 s
    assert s.next_wakeup(30.0) == 31.0


def test_pre_filter_needs_min_member_pods() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 8000), PodGroup("default", "g", min_member=3), member("g", 0), member("g", 1))
    assert messages(s.schedule(0.0)) == {
        f"g-{i}": f"0/1 nodes are available: pre-filter pod g-{i} cannot find enough sibling pods, "
        f"current pods number: 2, minMember of group: 3. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling., "
        f"PodGroup default/g gets rejected due to Pod g-{i} is unschedulable even after PostFilter"
        for i in range(2)
    }
    add(s, member("g", 2), now=4.0)  # a new sibling is an event the plugin requeues on
    assert sorted(binds(s.schedule(4.0))) == ["g-0", "g-1", "g-2"]


def test_post_filter_rejects_the_waiting_siblings_and_frees_the_node() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 2000), PodGroup("default", "g", min_member=3))
    add(
        s,
        *(member("g", i) for i in range(3)),
        Pod("default", "solo", uid="solo", creation_time=9.0, requests={"cpu": 2000}),
    )
    decisions = s.schedule(0.0)
    assert messages(decisions) == {
        "g-0": "optimistic rejection in PostFilter",
        "g-1": "optimistic rejection in PostFilter",
        "g-2": f"0/1 nodes are available: 1 Insufficient cpu. {NO_VICTIMS_1}, "
        "PodGroup default/g gets rejected due to Pod g-2 is unschedulable even after PostFilter",
    }
    assert binds(decisions) == {"solo": "n"}


def test_small_gap_keeps_the_siblings_waiting() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 9000), PodGroup("default", "g", min_member=10))
    add(s, *(member("g", i) for i in range(10)))
    decisions = s.schedule(0.0)
    assert messages(decisions) == {"g-9": f"0/1 nodes are available: 1 Insufficient cpu. {NO_VICTIMS_1}"}  # 1 missing
    assert s.next_wakeup(0.0) == 60.0  # g-9 waits for an event; the others for the Permit timeout


def test_group_back_off_after_post_filter() -> None:
    # g-0 waits at Permit, g-1 finds no room: the group is rejected and backed off as a whole, so g-2 (next in
    # the queue) fails PreFilter without being placed, and no member is retried before the back-off ends.
    s = CoschedulingScheduler(pod_group_backoff_seconds=30)
    add(s, make_node("n", 1000), PodGroup("default", "g", min_member=3), *(member("g", i) for i in range(3)))
    first = messages(s.schedule(0.0))
    assert first["g-2"].startswith("0/1 nodes are available: podGroup default/g failed recently.")
    assert first["g-0"] == "optimistic rejection in PostFilter"
    add(s, make_node("m", 1000), now=2.0)  # an event that would wake pods waiting for room
    assert s.schedule(2.0) == []
    assert s.next_wakeup(2.0) == 30.0
    assert messages(s.schedule(30.0))  # the back-off is over: the group is tried again


def test_queue_sorts_by_group_creation_time() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 2000))
    add(s, PodGroup("default", "late", min_member=2, creation_time=10.0))
    add(s, PodGroup("default", "early", min_member=2, creation_time=0.0))
    add(s, member("late", 0, t=1.0), member("late", 1, t=1.0), member("early", 0, t=20.0), member("early", 1, t=20.0))
    decisions = s.schedule(30.0)
    assert sorted(binds(decisions)) == ["early-0", "early-1"]


def test_missing_pod_group_is_refused_at_permit() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 2000), member("nogroup", 0))
    assert messages(s.schedule(0.0)) == {"nogroup-0": "PodGroup not found"}
    add(s, PodGroup("default", "nogroup", min_member=1), now=3.0)
    assert binds(s.schedule(3.0)) == {"nogroup-0": "n"}


def test_deleting_a_waiting_pod_releases_it() -> None:
    s = CoschedulingScheduler()
    add(s, make_node("n", 1000), PodGroup("default", "g", min_member=3))
    add(s, member("g", 0), member("g", 1, scheduler_name="x"), member("g", 2, scheduler_name="x"))
    assert s.schedule(0.0) == []
    s.observe(ClusterEvent(EventKind.DELETED, member("g", 0)), 1.0)
    assert s.next_wakeup(1.0) is None
    add(s, Pod("default", "solo", uid="solo", requests={"cpu": 1000}), now=1.0)
    assert binds(s.schedule(1.0)) == {"solo": "n"}


def _gang_workload() -> tuple[list[Node], object]:
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

    def gang(i: int, t: float) -> WorkloadJob:
        pods = [PodTemplate(name=f"g{i}-{k}", requests={"cpu": 1000}, run_time=10.0) for k in range(3)]
        return WorkloadJob(id=f"g{i}", submit_time=t, kind=JobKind.POD_GROUP, name=f"g{i}", min_member=3, pods=pods)

    return [make_node(f"n{i}", 2000) for i in range(2)], Workload("w", [gang(0, 0.0), gang(1, 1.0)])


def test_end_to_end_first_gang_runs_whole() -> None:
    driver = pytest.importorskip("kubeflux.sim.driver")
    nodes, workload = _gang_workload()
    scheduler = CoschedulingScheduler()
    record = driver.simulate(workload, nodes, {scheduler.name: scheduler})
    first = next(job for job in record.jobs if job.job_id == "g0")
    assert (first.first_bind_time, first.last_bind_time, first.finish_time) == (0.0, 0.0, 10.0)


def test_end_to_end_second_gang_waits_for_the_first() -> None:
    # g1 arrives while g0 holds 3 of the 4 cores: one g1 pod waits at Permit, the others fail and back off. When
    # g0 ends at 10 s only wake-ups are left; the run must go on until g1's retry binds it.
    driver = pytest.importorskip("kubeflux.sim.driver")
    nodes, workload = _gang_workload()
    scheduler = CoschedulingScheduler()
    record = driver.simulate(workload, nodes, {scheduler.name: scheduler})
    second = next(job for job in record.jobs if job.job_id == "g1")
    assert second.final_state == "COMPLETED_SUCCESSFULLY"
    assert second.starting_time is not None and second.starting_time >= 10.0
    assert second.finish_time == second.starting_time + 10.0
    assert record.problems == []


def test_end_to_end_a_gang_that_can_never_fit_stops_the_run_with_a_report() -> None:
    # 3 one-core pods, minMember 3, on one 2-core node: coscheduling cycles wait → reject → retry for ever.
    from kubeflux.sim.driver import IDLE_WAKEUP_LIMIT, simulate
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

    pods = [PodTemplate(name=f"big-{k}", requests={"cpu": 1000}, run_time=10.0) for k in range(3)]
    big = WorkloadJob(id="big", submit_time=0.0, kind=JobKind.POD_GROUP, name="big", min_member=3, pods=pods)
    solo = WorkloadJob(
        id="solo",
        submit_time=5.0,
        kind=JobKind.POD,
        name="solo",
        pods=[PodTemplate(name="solo", requests={"cpu": 1000}, run_time=100.0)],
    )
    scheduler = CoschedulingScheduler()
    record = simulate(Workload("w", [big, solo]), [make_node("n", 2000)], {scheduler.name: scheduler})
    states = {job.job_id: job.final_state for job in record.jobs}
    assert states == {"big": "NOT_FINISHED", "solo": "COMPLETED_SUCCESSFULLY"}
    assert len(record.problems) == 1
    assert record.problems[0].startswith("the run stopped at ")
    assert f"for {IDLE_WAKEUP_LIMIT} time points in a row" in record.problems[0]
    assert "(3 pod(s) still pending)" in record.problems[0]


def test_min_resources_refuses_a_gang_before_placing_any_pod_and_waits_for_room() -> None:
    # One node of 2 cores, 1 taken by another pod: a gang of 2 one-core pods lacks one core in all. With
    # minResources it fails PreFilter without holding the free core, and is not retried until room is released.
    s = CoschedulingScheduler(min_resources=True)
    other = Pod("default", "other", uid="other", requests={"cpu": 1000}, node_name="n")
    add(s, make_node("n", 2000), other, PodGroup("default", "g", min_member=2), member("g", 0), member("g", 1))
    first = messages(s.schedule(0.0))
    assert first["g-0"].startswith("0/1 nodes are available: resource gap: cpu: 1.")
    assert not binds(s.schedule(20.0))  # another pod's arrival or a timer does not make it fit: not tried
    add(s, member("x", 0, t=21.0), now=21.0)
    assert s.schedule(21.0) == [] or "g-0" not in messages(s.schedule(21.0))
    done = Pod("default", "other", uid="other", requests={"cpu": 1000}, node_name="n", phase=PodPhase.SUCCEEDED)
    s.observe(ClusterEvent(EventKind.MODIFIED, done), 30.0)
    assert binds(s.schedule(30.0)) == {"g-0": "n", "g-1": "n"}


def test_the_registry_coscheduling_checks_min_resources() -> None:
    scheduler = create("coscheduling")
    assert isinstance(scheduler, CoschedulingScheduler) and scheduler.min_resources


def test_a_congested_trace_costs_few_attempts_per_gang() -> None:
    # Four one-core nodes: a 3-core job runs for 1,000 s while one-core jobs come and go every 10 s and a 4-core
    # gang waits. Without minResources the gang is placed and rejected at every release (hundreds of attempts);
    # with it, each release costs one check and no FailedScheduling event.
    jobs = [(0.0, 3, 1000.0, 1000.0), (1.0, 4, 10.0, 10.0)] + [(2.0 + 10 * i, 1, 10.0, 10.0) for i in range(90)]
    nodes = one_core_nodes(4)
    counts: dict[bool, int] = {}
    starts: set[float | None] = set()
    for checked in (False, True):
        sim = Simulation(
            map_to_cluster(trace(*jobs), nodes),
            nodes,
            {DEFAULT_SCHEDULER: CoschedulingScheduler(min_resources=checked)},
            options=SimulationOptions(keep_events=True),
        )
        record = sim.run()
        starts.add(record.jobs[1].starting_time)
        counts[checked] = sum(1 for e in sim.cluster.kube_events if e.reason == "FailedScheduling")
    assert all(
        start is not None and 1000.0 <= start <= 1010.0 for start in starts
    )  # after the big job, within a pod back-off
    assert counts[True] < 20 < 200 < counts[False]
