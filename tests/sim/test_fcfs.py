"""Strict FCFS on whole jobs: schedules that can be worked out by hand."""

from __future__ import annotations

from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

from ._helpers import one_core_nodes, run, starts, trace


def test_jobs_start_in_submission_order_and_a_blocked_job_blocks_later_ones() -> None:
    # 4 one-core nodes. j2 (4 procs) waits for j1; j3 (1 proc) would fit at t=2 but must wait behind j2.
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 1, 10, 10), (3, 2, 50, 50))
    record = run(workload, one_core_nodes(4), FCFSScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 200.0, "4": 200.0}
    assert [j.finish_time for j in record.jobs] == [100.0, 200.0, 210.0, 250.0]


def test_on_one_core_nodes_a_job_of_p_processors_fits_exactly_when_p_nodes_are_free() -> None:
    # 3 nodes busy with j1 (ends 50) and j2 (ends 80) leave 2 free: j3 of 3 procs starts when j1 ends.
    workload = trace((0, 1, 50, 50), (0, 2, 80, 80), (1, 3, 10, 10))
    record = run(workload, one_core_nodes(5), FCFSScheduler())
    assert starts(record)["3"] == 50.0
    record = run(trace((0, 1, 50, 50), (0, 2, 80, 80), (1, 2, 10, 10)), one_core_nodes(5), FCFSScheduler())
    assert starts(record)["3"] == 1.0


def test_equal_submission_times_start_in_job_number_order() -> None:
    workload = trace(*[(0, 1, 10, 10)] * 6)
    record = run(workload, one_core_nodes(2), FCFSScheduler())
    assert list(starts(record).values()) == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0]


def test_a_gang_starts_all_its_pods_at_once_on_distinct_nodes() -> None:
    record = run(trace((0, 3, 10, 10)), one_core_nodes(4), FCFSScheduler())
    job = record.jobs[0]
    assert job.pods == 3 and job.first_bind_time == job.last_bind_time == 0.0
    assert job.allocated_resources == [0, 1, 2]


def test_a_job_larger_than_the_cluster_is_rejected_without_blocking_the_queue() -> None:
    template = PodTemplate(name="huge", requests={CPU: 64_000}, run_time=10.0)
    big = WorkloadJob(id="big", submit_time=0, kind=JobKind.POD, name="huge", pods=[template])
    small = WorkloadJob(
        id="small", submit_time=1, kind=JobKind.POD, name="small", pods=[PodTemplate("small", {CPU: 1000}, 5.0)]
    )
    nodes = one_core_nodes(2)
    sched = FCFSScheduler()
    record = simulate(Workload("w", [big, small]), nodes, {sched.name: sched})
    assert [j.final_state for j in record.jobs] == ["REJECTED", "COMPLETED_SUCCESSFULLY"]


def test_a_pod_group_waits_for_min_member_pods() -> None:
    labels = {POD_GROUP_LABEL: "g"}
    pods = [PodTemplate(f"g-{i}", {CPU: 1000}, 10.0, labels=labels) for i in range(2)]
    job = WorkloadJob(id="g", submit_time=0, kind=JobKind.POD_GROUP, name="g", pods=pods, min_member=2)
    nodes = one_core_nodes(2)
    sched = FCFSScheduler()
    record = simulate(Workload("w", [job]), nodes, {sched.name: sched})
    assert record.jobs[0].starting_time == 0.0 and record.jobs[0].finish_time == 10.0
    # the same gang on one node can never place both pods at once: it waits, bound to nothing
    sched = FCFSScheduler()
    record = simulate(Workload("w", [job]), nodes[:1], {sched.name: sched}, options=SimulationOptions())
    assert record.jobs[0].final_state in ("NOT_FINISHED", "REJECTED")
    assert record.pods_bound == 0


def test_fcfs_accounts_for_pods_placed_by_another_scheduler() -> None:
    # "other" (a second FCFS instance) takes both nodes at t=0 for 30 s; fcfs's job must wait for them.
    svc = [
        WorkloadJob(
            id=f"s{i}",
            submit_time=0,
            kind=JobKind.POD,
            name=f"svc{i}",
            pods=[PodTemplate(f"svc{i}", {CPU: 1000}, 30.0, scheduler_name="other")],
        )
        for i in range(2)
    ]
    mine = WorkloadJob(id="m", submit_time=1, kind=JobKind.POD, name="mine", pods=[PodTemplate("m", {CPU: 1000}, 5.0)])
    fcfs, second = FCFSScheduler(), FCFSScheduler("other")
    record = simulate(Workload("w", [*svc, mine]), one_core_nodes(2), {"fcfs": fcfs, "other": second})
    assert starts(record) == {"s0": 0.0, "s1": 0.0, "m": 30.0}
