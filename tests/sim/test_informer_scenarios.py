"""Informer edge cases a user meets in the first week, run through the real simulator: a started MPI gang whose
member is replaced while kubeflux restarts, a corrupt allocation annotation found at a restart, and a web pod bound
beside a node-exclusive HPC pod."""

from __future__ import annotations

from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod
from kubeflux.scheduler.translate import POLICY_ANNOTATION
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.clock import Priority
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from tests.sim._restarting import Restarting

HOSTNAME = "kubernetes.io/hostname"


def nodes(count: int = 2, cores: int = 4) -> list[Node]:
    return [
        Node(f"n{i}", allocatable={CPU: cores * 1000, MEMORY: 16 * 2**30}, labels={HOSTNAME: f"n{i}"})
        for i in range(count)
    ]


class RestartingPendingFirst(Restarting):
    """A restart whose fresh informer lists the pending pods before the bound ones (a relist gives no order)."""

    def relisted_pods(self) -> list[Pod]:
        return sorted(super().relisted_pods(), key=lambda pod: bool(pod.node_name))


def mpi_job() -> Workload:
    """An MPI Job of 4 workers of 2 cores as one gang (minMember 4), on 2 nodes of 4 cores: it fills the cluster."""
    worker = PodTemplate("worker", {CPU: 2000}, 1000.0)
    job = WorkloadJob("mpi", 0.0, JobKind.JOB, "mpi", pods=[worker], min_member=4, completions=4, parallelism=4)
    return Workload("restart-gang", [job])


def run_gang(scheduler: object) -> Simulation:
    """Worker mpi-1 is deleted at 100 s; the Job controller replaces it (as mpi-4) after its 10 s back-off."""
    sim = Simulation(mpi_job(), nodes(), {"kubeflux": scheduler})  # type: ignore[dict-item]
    if isinstance(scheduler, Restarting):
        scheduler.cluster = sim.cluster
    sim.loop.schedule(100.0, Priority.STAGE, sim.cluster.delete_pod, "default/mpi-1")
    sim.run()
    return sim


def placements(sim: Simulation) -> dict[str, tuple[str, float | None]]:
    return {sp.pod.key: (sp.pod.node_name, sp.bound_at) for job in sim.cluster.jobs for sp in job.pods}


def test_a_started_gangs_replacement_is_placed_alone_after_a_restart_as_without_one() -> None:
    """kubeflux restarts between the deletion of a running MPI worker and its replacement (105 s), or just as the
    replacement appears (110 s, the replacement listed first): the restarted kubeflux sees 3 workers of the gang
    bound, knows the gang started, and places the replacement at once on the freed cores, exactly as an
    uninterrupted kubeflux does (not waiting for 4 pending members that will never come)."""
    straight = placements(run_gang(KubefluxScheduler()))
    assert straight["default/mpi-4"] == (straight["default/mpi-1"][0], 110.0)
    for restarted in (Restarting(at=105.0), RestartingPendingFirst(at=110.0)):
        sim = run_gang(restarted)
        assert restarted.restarted
        assert placements(sim) == straight
        assert [job.finish for job in sim.cluster.jobs] == [1110.0]


def test_a_corrupt_allocation_annotation_found_at_a_restart_is_a_warning_event_and_the_run_goes_on() -> None:
    """Someone edits kubeflux's allocation annotation on a running pod to ``{"start": Infinity}``; kubeflux restarts
    at 50 s. It records one Warning event on that pod, counts the pod by its requests, and every other pod is
    placed as without the corruption: nothing is over-committed, every job ends."""
    pods = [PodTemplate(f"p{i}", {CPU: 2000}, 200.0) for i in range(3)]
    jobs = [WorkloadJob(f"j{i}", 10.0 * i, JobKind.POD, f"p{i}", pods=[pods[i]]) for i in range(3)]
    late = WorkloadJob("late", 60.0, JobKind.POD, "late", pods=[PodTemplate("late", {CPU: 4000}, 100.0)])

    class Corrupting(Restarting):
        def schedule(self, now: float) -> list:  # type: ignore[type-arg]
            if not self.restarted and now >= self.at:
                assert self.cluster is not None
                victim = self.cluster.pods["default/p0"].pod
                victim.annotations = {**victim.annotations, ALLOCATION_ANNOTATION: '{"start": Infinity}'}
            return super().schedule(now)

    def run(scheduler: object) -> Simulation:
        options = SimulationOptions(keep_events=True)
        sim = Simulation(Workload("corrupt", [*jobs, late]), nodes(), {"kubeflux": scheduler}, options=options)  # type: ignore[dict-item]
        if isinstance(scheduler, Restarting):
            scheduler.cluster = sim.cluster
        sim.run()
        return sim

    straight = run(KubefluxScheduler())
    restarted = Corrupting(at=50.0)
    sim = run(restarted)
    warnings = [e for e in sim.cluster.kube_events if e.type == "Warning" and e.reason == "InvalidAllocation"]
    assert [e.object for e in warnings] == ["default/p0"]
    assert "start" in warnings[0].message
    assert any("default/p0" in line and ALLOCATION_ANNOTATION in line for line in restarted.inner.log)
    assert placements(sim) == placements(straight)
    assert not [reason for reason in sim.cluster.event_counts if reason.startswith("OutOf")]
    assert all(job.finish is not None for job in sim.cluster.jobs)


def test_a_node_exclusive_pod_never_lands_beside_a_web_pod_the_graph_could_not_take_at_first() -> None:
    """An HPC pod (``lonodex``: a node of its own) runs on n0 until 100 s; a web pod of the default scheduler is
    pinned to n0 at 10 s (its books have room, but n0 is held whole in kubeflux's graph, so it cannot be put in
    when kubeflux next looks, at 50 s for a short pod that goes to n1). When the HPC pod ends, the web pod is put in
    the graph at once, and the next ``lonodex`` pod, arriving then, goes to the empty n1 rather than beside the web
    pod."""
    exclusive = {POLICY_ANNOTATION: "lonodex"}
    hpc = PodTemplate("hpc", {CPU: 1000}, 100.0, annotations=exclusive)
    web = PodTemplate("web", {CPU: 1000}, 1000.0, scheduler_name="default-scheduler", node_selector={HOSTNAME: "n0"})
    probe = PodTemplate("probe", {CPU: 1000}, 20.0)
    after = PodTemplate("after", {CPU: 1000}, 100.0, annotations=exclusive)
    workload = Workload(
        "beside",
        [
            WorkloadJob("hpc", 0.0, JobKind.POD, "hpc", pods=[hpc]),
            WorkloadJob("web", 10.0, JobKind.POD, "web", pods=[web]),
            WorkloadJob("probe", 50.0, JobKind.POD, "probe", pods=[probe]),
            WorkloadJob("after", 100.0, JobKind.POD, "after", pods=[after]),
        ],
    )
    kubeflux = KubefluxScheduler()
    sim = Simulation(workload, nodes(), {"kubeflux": kubeflux, "default-scheduler": KubeDefaultScheduler()})
    sim.run()
    where = {key: node for key, (node, _) in placements(sim).items()}
    assert where == {"default/hpc": "n0", "default/web": "n0", "default/probe": "n1", "default/after": "n1"}
    assert any("Could not put pod default/web on node n0" in line for line in kubeflux.log)
