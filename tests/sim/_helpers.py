"""Small workloads whose schedules are known, run through the real simulator."""

from __future__ import annotations

from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob


def one_core_nodes(count: int) -> list[Node]:
    return [Node(f"n{i}", allocatable={CPU: 1000, MEMORY: 2**30}) for i in range(count)]


def trace(*jobs: tuple[float, int, float, float]) -> Workload:
    """Trace jobs from (submit, processors, run time, requested time), numbered 1, 2, …"""
    return Workload(
        "test",
        [
            WorkloadJob(
                id=str(n),
                submit_time=submit,
                kind=JobKind.TRACE,
                name=f"j{n}",
                requested_processors=procs,
                run_time=run,
                requested_time=walltime,
            )
            for n, (submit, procs, run, walltime) in enumerate(jobs, start=1)
        ],
    )


def run(workload: Workload, nodes: list[Node], scheduler: Scheduler, **options: object) -> RunRecord:
    opts = SimulationOptions(**options)  # type: ignore[arg-type]
    return simulate(map_to_cluster(workload, nodes), nodes, {scheduler.name: scheduler}, options=opts)


def starts(record: RunRecord) -> dict[str, float | None]:
    return {j.job_id: j.starting_time for j in record.jobs}
