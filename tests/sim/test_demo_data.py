"""The workload ``make demo`` runs is bundled, loads without problems and mixes kubeflux and kube-scheduler pods."""

from __future__ import annotations

from importlib import resources

from kubeflux.sim.workloads import load_workload


def test_the_bundled_demo_workload_loads_cleanly() -> None:
    data = resources.files("kubeflux") / "data" / "demo"
    with resources.as_file(data) as folder:
        trace = load_workload(folder / "hpc-mix.swf")
        services = load_workload(folder / "services.yaml")
    assert len(trace.jobs) == 200 and not trace.problems
    assert max(job.requested_processors for job in trace.jobs) <= 256  # fits the demo's 16 x 16 cores
    assert [job.pods[0].scheduler_name for job in services.jobs] == ["default-scheduler"] * 3
    assert not services.problems
