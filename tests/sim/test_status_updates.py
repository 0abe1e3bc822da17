"""A scheduler that reads nothing of the status written for its own decisions is not sent it (issue 15: the events a
busy kubeflux run sends its scheduler), and its run is the same as one that is sent everything."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.scheduler.objects import Pod, PodPhase
from kubeflux.sim.driver import Simulation
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate


class CountingKubeflux(KubefluxScheduler):
    """kubeflux, counting what it is sent; ``quiet`` says whether it declines status updates."""

    def __init__(self, quiet: bool) -> None:
        super().__init__()
        self.ignores_status_updates = quiet
        self.seen = 0

    def observe(self, event: ClusterEvent, now: float) -> None:
        self.seen += 1
        super().observe(event, now)


def _busy_run(quiet: bool) -> tuple[Simulation, CountingKubeflux, list[tuple[EventKind, bool]]]:
    """60 jobs of 1 … 8 cores on 4 nodes of 4 cores, arriving faster than they run: a queue with reservations."""
    nodes = uniform_cluster(4, 4)
    spec = SyntheticSpec(jobs=60, mean_interarrival=30.0, max_size=8, mean_runtime=600.0)
    workload = map_to_cluster(generate(spec, seed=7), nodes)
    scheduler = CountingKubeflux(quiet)
    sim = Simulation(workload, nodes, {scheduler.name: scheduler})
    watched: list[tuple[EventKind, bool]] = []  # (kind, whether the object was a pending pod then)

    def watch(event: ClusterEvent, now: float) -> None:  # a watcher that wants everything
        obj = event.obj
        watched.append((event.kind, isinstance(obj, Pod) and not obj.node_name and obj.phase is PodPhase.PENDING))

    sim.cluster.subscribe(watch)
    return sim, scheduler, watched


def told(sim: Simulation) -> list[tuple[object, ...]]:
    """Each pod's last ``PodScheduled`` message, when it was first unschedulable, and its annotations."""
    return [
        (sp.pod.key, sp.unschedulable_at, sp.unschedulable_message, dict(sp.pod.annotations))
        for job in sim.cluster.jobs
        for sp in job.pods
    ]


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_a_busy_run_sends_kubeflux_no_status_updates_of_its_waiting_pods_and_schedules_the_same() -> None:
    quiet_sim, quiet, quiet_watched = _busy_run(True)
    loud_sim, loud, loud_watched = _busy_run(False)
    quiet_record, loud_record = quiet_sim.run(), loud_sim.run()

    def outcome(sim: Simulation) -> list[tuple[object, ...]]:
        return [(j.starting_time, j.finish_time, j.allocated_resources) for j in sim.cluster.job_records()]

    assert outcome(quiet_sim) == outcome(loud_sim)
    assert any(j.starting_time != j.submission_time for j in quiet_record.jobs)  # jobs did queue
    # what a user sees on the pods is the same: the condition's message and the expected start written on them
    quiet_pods = [
        (p.pod.key, p.unschedulable_message, dict(p.pod.annotations)) for p in quiet_sim.cluster.pods.values()
    ]
    loud_pods = [(p.pod.key, p.unschedulable_message, dict(p.pod.annotations)) for p in loud_sim.cluster.pods.values()]
    assert quiet_pods == loud_pods
    # the cluster emitted every event both times, and a watcher that wants them all got them all
    assert quiet_record.events == loud_record.events == len(quiet_watched) == len(loud_watched) == loud.seen
    # only the pending pods' status updates were left out for the quiet scheduler
    pending_updates = sum(1 for kind, pending in quiet_watched if kind is EventKind.MODIFIED and pending)
    assert pending_updates > 0
    assert quiet.seen == loud.seen - pending_updates
