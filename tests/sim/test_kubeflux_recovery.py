"""Restarting kubeflux in the middle of a simulated run: it rebuilds its graph and queue from the cluster's pods
(the allocation annotation on each pod it bound) and places everything exactly as an uninterrupted run does."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.driver import Simulation
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate


class Restarting:
    """kubeflux that crashes at ``at`` and comes back empty, re-fed the cluster's current objects (as a fresh
    informer lists them)."""

    def __init__(self, at: float) -> None:
        self.name = "kubeflux"
        self.at = at
        self.inner = KubefluxScheduler()
        self.cluster: Cluster | None = None
        self.restarted = False

    def observe(self, event: ClusterEvent, now: float) -> None:
        self.inner.observe(event, now)

    def schedule(self, now: float) -> list[Decision]:
        if not self.restarted and now >= self.at:
            assert self.cluster is not None
            self.restarted = True
            self.inner = KubefluxScheduler()
            for node in self.cluster.nodes:
                self.inner.observe(ClusterEvent(EventKind.ADDED, node), now)
            for group in self.cluster.groups.values():
                self.inner.observe(ClusterEvent(EventKind.ADDED, group), now)
            for pod in self.relisted_pods():
                self.inner.observe(ClusterEvent(EventKind.ADDED, pod), now)
        return self.inner.schedule(now)

    def relisted_pods(self) -> list[Pod]:
        """The pods as the fresh informer's list gives them (the cluster's order here)."""
        assert self.cluster is not None
        return [sp.pod for sp in self.cluster.pods.values()]

    def next_wakeup(self, now: float) -> float | None:
        return self.inner.next_wakeup(now)


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
