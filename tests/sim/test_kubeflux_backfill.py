"""kubeflux's queue: FCFS, EASY and conservative backfilling on the engine's reservations, hand-checked."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.sim.baselines import available, create
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.mapping import map_to_cluster
from tests.shared import SHARED

from ._helpers import one_core_nodes, run, starts, trace


def test_kubeflux_and_its_variants_are_registered_in_the_simulator() -> None:
    names = available()
    for name in ("kubeflux", "kubeflux-fcfs", "kubeflux-conservative"):
        assert name in names
        assert create(name).name == name


def test_a_short_job_backfills_before_the_heads_reservation() -> None:
    # j1 holds 2 of 4 nodes until 100; j2 (4 procs) reserves t=100; j3 (2 procs, 50 s) ends by 100: starts now.
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 2, 50, 50))
    record = run(workload, one_core_nodes(4), KubefluxScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 2.0}


def test_without_backfilling_the_short_job_waits_behind_the_head() -> None:
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 2, 50, 50))
    record = run(workload, one_core_nodes(4), KubefluxScheduler("kubeflux-fcfs", backfill="fcfs"))
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 200.0}


def test_a_long_job_that_would_delay_the_head_waits() -> None:
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 2, 200, 200), (3, 1, 300, 300))
    record = run(workload, one_core_nodes(4), KubefluxScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 200.0, "4": 200.0}


def test_a_long_job_may_use_the_nodes_the_head_does_not_need() -> None:
    workload = trace((0, 2, 100, 100), (1, 4, 100, 100), (2, 1, 500, 500))
    record = run(workload, one_core_nodes(5), KubefluxScheduler())
    assert starts(record) == {"1": 0.0, "2": 100.0, "3": 2.0}


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_conservative_backfilling_never_delays_any_reserved_job(backfill: str) -> None:
    # j2 and j3 both wait; under conservative backfilling j4 (long) must not delay j3's reservation either.
    workload = trace((0, 3, 100, 100), (1, 4, 100, 100), (2, 2, 100, 100), (3, 2, 400, 400))
    record = run(workload, one_core_nodes(4), KubefluxScheduler(f"kubeflux-{backfill}", backfill=backfill))
    assert starts(record)["2"] == 100.0
    if backfill == "conservative":
        assert starts(record)["3"] == 200.0


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_every_waiting_pod_carries_its_expected_start() -> None:
    nodes = one_core_nodes(4)
    workload = map_to_cluster(trace((0, 2, 100, 100), (1, 4, 100, 100)), nodes)
    scheduler = KubefluxScheduler()
    sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=SimulationOptions(keep_events=True))
    decisions: list[object] = []
    original = scheduler.schedule

    def spy(now: float) -> list[object]:
        out = original(now)
        decisions.extend(out)
        return out  # type: ignore[return-value]

    scheduler.schedule = spy  # type: ignore[method-assign,assignment]
    sim.run()
    waiting = [d for d in decisions if type(d).__name__ == "Unschedulable"]
    assert len(waiting) == 4
    assert {d.expected_start for d in waiting} == {100.0}  # type: ignore[attr-defined]
    message = "0/4 nodes are available: 2 Insufficient cpu. pod group default/j2 needs its 4 pods placed at once."
    assert all(d.message == message for d in waiting)  # type: ignore[attr-defined]


def test_a_waiting_pod_shows_its_expected_start_in_the_simulated_cluster_until_it_is_bound() -> None:
    from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION

    nodes = one_core_nodes(4)
    workload = map_to_cluster(trace((0, 2, 100, 100), (1, 4, 100, 100)), nodes)

    def simulate(until: float | None) -> Simulation:
        scheduler = KubefluxScheduler()
        sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=SimulationOptions(until=until))
        sim.run()
        return sim

    waiting = [sp.pod for sp in simulate(50.0).cluster.pods.values() if sp.pod.name.startswith("j2")]
    assert len(waiting) == 4
    assert all(pod.annotations[EXPECTED_START_ANNOTATION] == "100" and not pod.node_name for pod in waiting)

    ran = [sp for sp in simulate(None).cluster.pods.values() if sp.pod.name.startswith("j2")]
    assert {sp.running_at for sp in ran} == {100.0}
    assert all(EXPECTED_START_ANNOTATION not in sp.pod.annotations for sp in ran)


def test_kubeflux_easy_gives_the_easy_baselines_schedule_on_the_start_of_hpc2n() -> None:
    # The first 400 jobs of HPC2N (gangs of up to 100 pods on 120 nodes of 2 cores): kubeflux's reservations, made
    # for each member and held in every resource, give every job the start the plain EASY baseline gives it.

    from kubeflux.sim.baselines.easy import EasyScheduler
    from kubeflux.sim.workloads import load_workload
    from kubeflux.sim.workloads.cluster_file import uniform_cluster

    trace_file = SHARED / "traces" / "HPC2N-2002-2.2.first3170.swf"
    nodes = uniform_cluster(120, 2)
    workload = map_to_cluster(load_workload(trace_file), nodes)
    workload.jobs = workload.jobs[:400]
    ours = run(workload, nodes, KubefluxScheduler())
    theirs = run(workload, nodes, EasyScheduler())
    assert starts(ours) == starts(theirs)
