"""EASY backfilling: hand-checked schedules, the head's reservation, and the classic result on real traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.sim.baselines.easy import EasyScheduler
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.podstatus import pod_conditions
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster

from ._helpers import one_core_nodes, run, starts, trace

TRACES = Path("/work/shared/traces")


def test_a_short_job_backfills_before_the_heads_shadow_time() -> None:
    # j1 holds 2 of 4 nodes until 100; j2 (4 procs) reserves t=100; j3 (2 procs, 50 s) ends by 100: starts now.
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 2, 50, 50))
    record = run(workload, one_core_nodes(4), EasyScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 2.0}


def test_a_long_job_that_would_delay_the_head_waits() -> None:
    # j3 (2 procs, 200 s) would end after the shadow time on the head's nodes: it must not start before j2.
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 2, 200, 200), (3, 1, 300, 300))
    record = run(workload, one_core_nodes(4), EasyScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 200.0, "4": 200.0}


def test_a_long_job_may_use_the_extra_nodes_the_head_does_not_need() -> None:
    # 5 nodes: j1 holds 2 until 100; the head j2 needs 4, so at t=100 one node is extra; j3 (1 proc, 500 s) runs
    # on it now without delaying j2.
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 1, 500, 500))
    record = run(workload, one_core_nodes(5), EasyScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 2.0}


def test_backfilling_never_delays_the_head_compared_with_fcfs() -> None:
    workload = trace((0, 3, 100, 120), (1, 4, 60, 60), (2, 1, 30, 40), (3, 2, 500, 500), (4, 1, 10, 10), (5, 4, 20, 20))
    fcfs = run(workload, one_core_nodes(4), FCFSScheduler())
    easy = run(workload, one_core_nodes(4), EasyScheduler())
    easy_head, fcfs_head = starts(easy)["2"], starts(fcfs)["2"]
    assert easy_head is not None and fcfs_head is not None
    assert easy_head <= fcfs_head  # the first blocked job
    assert starts(easy)["3"] == 2.0  # backfilled


def test_the_waiting_head_is_reported_unschedulable_once() -> None:
    nodes = one_core_nodes(4)
    workload = map_to_cluster(trace((0, 2, 100, 100), (1, 4, 100, 100)), nodes)
    scheduler = EasyScheduler()
    sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=SimulationOptions(keep_events=True))
    record = sim.run()
    assert starts(record)["2"] == 100.0
    head = sim.cluster.pod("default/j2-0")
    assert pod_conditions(head)[0]["lastTransitionTime"] == 100.0  # PodScheduled=True replaced the False
    failed = [e for e in sim.cluster.kube_events if e.reason == "FailedScheduling"]
    assert len(failed) == 4 and all(e.time == 1.0 and "reservation" in e.message for e in failed)


def mean_wait(record: RunRecord) -> float:
    waits = [j.starting_time - j.submission_time for j in record.jobs if j.starting_time is not None]
    return sum(waits) / len(waits)


@pytest.mark.parametrize(
    ("trace_file", "nodes", "cores"),
    [("HPC2N-2002-2.2.first3170.swf", 120, 2), ("KTH-SP2-1996-2.1-cln.first1000.batsim.json", 96, 1)],
    ids=["HPC2N", "KTH"],
)
def test_easy_waits_less_than_fcfs_on_real_traces(trace_file: str, nodes: int, cores: int) -> None:
    cluster = uniform_cluster(nodes, cores)
    workload = load_workload(TRACES / trace_file)
    fcfs = run(workload, cluster, FCFSScheduler())
    easy = run(workload, cluster, EasyScheduler())
    assert mean_wait(easy) < mean_wait(fcfs)
    for record in (fcfs, easy):
        assert all(
            j.finish_time >= j.starting_time
            for j in record.jobs
            if j.finish_time is not None and j.starting_time is not None
        )


def test_walltimes_of_more_than_six_digits_are_planned_exactly() -> None:
    # j2's shadow time is 1,000,004 s; j3 (1,000,001 s from t=2) ends by it: backfilled. (Both walltimes print as
    # 1e+06 with 6 significant digits; the plan must not round them.)
    workload = trace((0, 1, 1_000_004, 1_000_004), (1, 2, 10, 10), (2, 1, 1_000_001, 1_000_001))
    record = run(workload, one_core_nodes(2), EasyScheduler())
    assert starts(record) == {"1": 0.0, "2": 1_000_004.0, "3": 2.0}
