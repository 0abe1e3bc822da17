"""A blocked gang's reservation is put back as it was when the engine would make it again, and searched again when
a pod's early end lets the gang start sooner (kubeflux.scheduler.kept); a gang that cannot start now is known so
without matching its members."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.filtering import NodeFilter
from kubeflux.scheduler.interface import Unschedulable
from kubeflux.scheduler.objects import POD_GROUP_LABEL, PodGroup
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.testing import ADDED, Cluster, bound, node, pod
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate


def timed(name: str, cpu: int, seconds: int, **kwargs: object) -> object:
    return pod(name, cpu, annotations={DURATION_ANNOTATION: str(seconds)}, **kwargs)


def expected_starts(decisions: list[object]) -> dict[str, float | None]:
    return {d.pod: d.expected_start for d in decisions if isinstance(d, Unschedulable)}


def play(keep: bool) -> tuple[list[list[object]], list[str]]:
    """Three nodes of two cores, busy until 100 (w1), 200 (w2), 50 and 300 (w3); a gang of four one-core pods waits.
    At 10 the pod planned to 50 on w3 ends (after the gang's nodes: its reservation stays as it was); at 20 the
    one planned to 200 on w2 ends (the gang can start at 100 now)."""
    scheduler = KubefluxScheduler(log_limit=100_000)
    scheduler.profile.keep_reservations = keep
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2), node("w3", cores=2)])
    cluster.add(timed("a", 2000, 100), timed("b", 2000, 200), timed("c", 1000, 50), timed("d", 1000, 300))
    steps = [cluster.run()]
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=4))
    cluster.add(*(timed(f"mpi-{i}", 1000, 60, labels={POD_GROUP_LABEL: "mpi"}) for i in range(4)))
    steps.append(cluster.run(1.0))
    cluster.end("c")
    steps.append(cluster.run(10.0))
    cluster.end("b")
    steps.append(cluster.run(20.0))
    return steps, [line for line in scheduler.log if "reserved at" in line]


def test_a_reservation_is_kept_until_an_early_end_lets_the_gang_start_sooner() -> None:
    steps, reserved = play(keep=True)
    assert bound(steps[0]) == {"default/a": "w1", "default/b": "w2", "default/c": "w3", "default/d": "w3"}
    assert set(expected_starts(steps[1]).values()) == {200.0}
    assert set(expected_starts(steps[2]).values()) == {200.0}
    assert set(expected_starts(steps[3]).values()) == {100.0}
    assert [line.endswith("(kept)") for line in reserved] == [False, True, False]


def test_keeping_a_reservation_decides_exactly_as_searching_again() -> None:
    kept_steps, kept = play(keep=True)
    searched_steps, searched = play(keep=False)
    assert kept_steps == searched_steps
    starts = [[line.split(" reserved at ")[1].split(" ")[0] for line in lines] for lines in (kept, searched)]
    assert starts == [["200", "200", "100"]] * 2  # (kept in place, it keeps its engine job id)


def test_a_simulated_workload_runs_the_same_whether_reservations_are_kept_or_searched_again() -> None:
    nodes = uniform_cluster(12, 4)
    spec = SyntheticSpec(jobs=300, mean_interarrival=30.0, max_size=32, mean_runtime=1200.0)
    workload = map_to_cluster(generate(spec, seed=3), nodes)
    records = []
    kept = []
    for keep in (True, False):
        scheduler = KubefluxScheduler(log_limit=1_000_000)
        scheduler.profile.keep_reservations = keep
        record = Simulation(workload, nodes, {scheduler.name: scheduler}).run()
        records.append((record.jobs, record.pods))
        kept.append(sum(line.endswith("(kept)") for line in scheduler.log))
    assert records[0] == records[1]
    assert kept[0] > 0 and kept[1] == 0


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize("policy", ["lonode", "first"])
def test_a_gang_known_not_to_fit_now_is_told_what_trying_it_would_have_told(
    monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    """The quick test that a gang cannot start now (too few slots on the nodes that may take its members) skips
    matching it member by member, and changes nothing a user sees: the same schedule, messages and events. Under
    ``first`` (whose walk follows free amounts, which matches made and undone change) it never skips."""
    nodes = uniform_cluster(12, 4)
    spec = SyntheticSpec(jobs=300, mean_interarrival=30.0, max_size=32, mean_runtime=1200.0)
    workload = map_to_cluster(generate(spec, seed=5), nodes)
    skipped = 0
    quick = NodeFilter.too_few_slots

    def counted(self: NodeFilter, job: PendingJob, start: int, minimum: int) -> bool:
        nonlocal skipped
        found = quick(self, job, start, minimum)
        skipped += found
        return found

    def run() -> tuple[object, ...]:
        scheduler = KubefluxScheduler(policy=policy)
        sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=SimulationOptions(keep_events=True))
        record = sim.run()
        return record.jobs, record.pods, sim.cluster.kube_events, sim.cluster.event_counts

    monkeypatch.setattr(NodeFilter, "too_few_slots", counted)
    with_quick_test = run()
    monkeypatch.setattr(NodeFilter, "too_few_slots", lambda *_: False)
    assert run() == with_quick_test
    assert (skipped > 0) is (policy == "lonode")
