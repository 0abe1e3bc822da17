"""The run loop: determinism, several schedulers in one run, decisions applied as Kubernetes would."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim import baselines
from kubeflux.sim.baselines import available, create, register
from kubeflux.sim.baselines.easy import EasyScheduler
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.cluster import Lifecycle, NodeOutage
from kubeflux.sim.driver import Simulation, SimulationOptions, simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate

from ._helpers import one_core_nodes, trace


def busy_run(seed: int) -> RunRecord:
    nodes = [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 2**34}) for i in range(8)]
    workload = map_to_cluster(generate(SyntheticSpec(jobs=300, mean_interarrival=5.0, max_size=16), seed=3), nodes)
    lifecycle = Lifecycle(start_delay=1.0, start_jitter=4.0, pod_failure_fraction=0.1, seed=seed)
    options = SimulationOptions(lifecycle=lifecycle, outages=[NodeOutage("n3", 500.0, 900.0)])
    scheduler = EasyScheduler()
    return simulate(workload, nodes, {scheduler.name: scheduler}, options=options)


def test_the_same_input_and_seed_give_identical_records() -> None:
    first, second = busy_run(seed=11), busy_run(seed=11)
    assert first.jobs == second.jobs
    assert first.utilization_series == second.utilization_series
    assert first.queue_series == second.queue_series
    assert (first.events, first.pods_bound) == (second.events, second.pods_bound)


def test_another_seed_changes_the_run() -> None:
    assert busy_run(seed=11).jobs != busy_run(seed=12).jobs


def test_no_finish_precedes_its_start_and_times_count_from_the_first_submission() -> None:
    workload = trace((1000, 1, 10, 10), (1005, 2, 10, 10))
    nodes = one_core_nodes(2)
    scheduler = FCFSScheduler()
    record = simulate(map_to_cluster(workload, nodes), nodes, {scheduler.name: scheduler})
    assert [j.submission_time for j in record.jobs] == [0.0, 5.0]
    assert [(j.starting_time, j.finish_time) for j in record.jobs] == [(0.0, 10.0), (10.0, 20.0)]
    record = busy_run(seed=1)
    assert all(j.finish_time >= j.starting_time for j in record.jobs if j.finish_time and j.starting_time)


def test_pods_naming_another_scheduler_are_placed_by_it_in_the_same_run() -> None:
    svc = WorkloadJob(
        id="svc",
        submit_time=0,
        kind=JobKind.POD,
        name="svc",
        pods=[PodTemplate("svc", {CPU: 1000}, 50.0, scheduler_name="easy")],
    )
    batch = WorkloadJob(id="b", submit_time=1, kind=JobKind.POD, name="b", pods=[PodTemplate("b", {CPU: 2000}, 10.0)])
    nodes = [Node("big", allocatable={CPU: 2000, MEMORY: 2**30})]
    fcfs, easy = FCFSScheduler(), EasyScheduler()
    sim = Simulation(Workload("w", [svc, batch]), nodes, {"fcfs": fcfs, "easy": easy}, primary="fcfs")
    record = sim.run()
    assert sim.cluster.pod("default/svc").pod.scheduler_name == "easy"
    assert sim.cluster.pod("default/b").pod.scheduler_name == "fcfs"
    # b needs the node's 2 cores; fcfs must count easy's pod and wait for it
    assert [(j.job_id, j.starting_time) for j in record.jobs] == [("svc", 0.0), ("b", 50.0)]


def test_pods_of_a_scheduler_not_in_the_run_are_reported() -> None:
    orphan = WorkloadJob(
        id="o",
        submit_time=0,
        kind=JobKind.POD,
        name="o",
        pods=[PodTemplate("o", {CPU: 1000}, 5.0, scheduler_name="gone")],
    )
    scheduler = FCFSScheduler()
    record = simulate(Workload("w", [orphan]), one_core_nodes(1), {scheduler.name: scheduler})
    assert record.jobs[0].final_state == "NOT_FINISHED"
    assert any("'gone'" in p for p in record.problems)


def test_a_node_outage_kills_running_jobs_and_the_node_is_used_again_later() -> None:
    nodes = one_core_nodes(1)
    workload = map_to_cluster(trace((0, 1, 100, 100), (10, 1, 5, 5)), nodes)
    scheduler = FCFSScheduler()
    options = SimulationOptions(outages=[NodeOutage("n0", 50.0, 60.0)])
    record = simulate(workload, nodes, {scheduler.name: scheduler}, options=options)
    assert record.jobs[0].final_state == "COMPLETED_KILLED" and record.jobs[0].finish_time == 50.0
    assert record.jobs[1].starting_time == 60.0


def test_the_registry_lists_the_baselines_and_builds_fresh_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    """(The registration is undone after the test: ``--scheduler all`` in a later test on this worker would
    otherwise run it too.)"""
    monkeypatch.setattr(baselines, "_REGISTRY", dict(baselines._REGISTRY))
    names = available()
    assert {"fcfs", "easy"} <= set(names)
    assert create("fcfs") is not create("fcfs")
    with pytest.raises(ValueError, match="unknown scheduler 'nope'"):
        create("nope")
    register("fcfs-copy", FCFSScheduler, "a test registration")
    assert isinstance(create("fcfs-copy"), FCFSScheduler)


def test_schedulers_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Simulation(Workload("w", []), one_core_nodes(1), {})
    with pytest.raises(ValueError, match="primary"):
        Simulation(Workload("w", []), one_core_nodes(1), {"fcfs": FCFSScheduler()}, primary="easy")


def test_a_run_leaves_the_garbage_collector_as_it_found_it() -> None:
    import gc

    thresholds = gc.get_threshold()
    record = busy_run(seed=3)
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    assert record.jobs
