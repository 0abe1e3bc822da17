"""Restarting kubeflux in the middle of a simulated run: it rebuilds its graph and queue from the cluster's pods
(the allocation annotation on each pod it bound) and places everything exactly as an uninterrupted run does."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.driver import Simulation
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate
from tests.sim._restarting import Restarting


def nodes() -> list[Node]:
    return [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 32 * 2**30}) for i in range(6)]


def workload() -> Workload:
    spec = SyntheticSpec(
        jobs=60,
        mean_interarrival=30,
        max_size=16,
        runtime="log_uniform",
        min_runtime=30,
        max_runtime=900,
        name="restart",
    )
    trace = map_to_cluster(generate(spec, seed=3), nodes())
    other = PodTemplate("web", {CPU: 2500}, 2000.0, scheduler_name="default-scheduler")
    trace.jobs.append(WorkloadJob("web", 100.0, JobKind.POD, "web", pods=[other]))
    return trace


def placements(sim: Simulation) -> dict[str, tuple[str, float | None]]:
    return {sp.pod.key: (sp.pod.node_name, sp.bound_at) for job in sim.cluster.jobs for sp in job.pods}


def run(scheduler: object) -> Simulation:
    sim = Simulation(workload(), nodes(), {"kubeflux": scheduler, "default-scheduler": KubeDefaultScheduler()})  # type: ignore[dict-item]
    if isinstance(scheduler, Restarting):
        scheduler.cluster = sim.cluster
    sim.run()
    return sim


def test_a_restart_in_the_middle_of_a_run_gives_the_same_placements() -> None:
    straight = run(KubefluxScheduler())
    restarted = Restarting(at=600.0)
    again = run(restarted)
    assert restarted.restarted
    assert any("recovered" in line for line in restarted.inner.log)
    assert placements(again) == placements(straight)
    assert not [reason for reason in again.cluster.event_counts if reason.startswith("OutOf")]
