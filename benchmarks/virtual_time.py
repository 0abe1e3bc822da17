"""The served cluster in virtual time against ``kubeflux simulate`` on the same workload (issue 13's target: the
HPC2N trace through the API within 3x the simulator's wall time).

Each case runs the workload in the simulator's driver, then through the API (``cluster serve --clock virtual
--workload … --until-done`` in this process: objects created through the store at their submit times, the
in-process kubeflux scheduler binding through ``pods/binding``, the simulated kubelet writing pod status, no HTTP
client), and prints both wall times, their ratio, the time points the virtual clock visited and whether every
job's record (state, first bind, start, end, cores) is the same.

* ``demo`` — the demo workload (``src/kubeflux/data/demo/``: 200 trace jobs plus three services) on 16 nodes of 16
  cores, with kube-default for the services;
* ``hpc2n`` — the first 3,170 jobs of HPC2N (``../shared/traces/``) on its 120 nodes of 2 cores.

Usage: ``python benchmarks/virtual_time.py [--case hpc2n] [--jobs N]`` (``--jobs``: only the first N jobs).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.command import merge_workloads, schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import Workload
from shared import TRACES, at_least

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "src" / "kubeflux" / "data" / "demo"
HPC2N = TRACES / "HPC2N-2002-2.2.first3170.swf"


def case(name: str, jobs: int | None) -> tuple[Workload, list[Node]]:
    if name == "demo":
        nodes = uniform_cluster(16, 16, "64Gi")
        loaded = merge_workloads([load_workload(DEMO / "hpc-mix.swf"), load_workload(DEMO / "services.yaml")])
    else:
        nodes = uniform_cluster(120, 2, "64Gi")
        loaded = load_workload(HPC2N)
    workload = map_to_cluster(loaded, nodes)
    if jobs is not None:
        workload.jobs = workload.jobs[:jobs]
    return workload, nodes


def served(workload: Workload, nodes: list[Node]) -> tuple[RunRecord, float, int]:
    schedulers, primary = schedulers_for("kubeflux", workload)
    clock = VirtualClock()
    server = ApiServer(
        nodes,
        kubelet=True,
        controllers=True,
        schedulers=list(schedulers.values()),
        clock=clock,
        settle=0.0,
        workload=workload,
        primary=primary,
        until_done=True,
    )
    began = time.perf_counter()
    server.start()
    server.join()
    wall = time.perf_counter() - began
    assert server.replay is not None
    run = server.replay.run_record("kubeflux", wall)
    server.stop()
    return run, wall, clock.jumps


def schedule(run: RunRecord) -> list[tuple[object, ...]]:
    return [
        (j.job_id, j.final_state, j.first_bind_time, j.starting_time, j.finish_time, tuple(j.allocated_resources))
        for j in run.jobs
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=("demo", "hpc2n"), action="append")
    parser.add_argument("--jobs", type=at_least(1), default=None, help="only the first N jobs of each workload")
    args = parser.parse_args()
    names = args.case or ["demo", "hpc2n"]
    if "hpc2n" in names and not HPC2N.is_file():
        sys.exit(f"{HPC2N}: not found (the traces are in ../shared/traces on the project's machines)")
    header = "| case | jobs | pods | simulate (s) | API, virtual time (s) | ratio | time points | same schedule |"
    print(header)
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        workload, nodes = case(name, args.jobs)
        schedulers, primary = schedulers_for("kubeflux", workload)
        began = time.perf_counter()
        simulated = simulate(workload, nodes, schedulers, primary=primary, label="kubeflux")
        sim_wall = time.perf_counter() - began
        run, api_wall, points = served(workload, nodes)
        same = "yes" if schedule(run) == schedule(simulated) else "NO"
        print(
            f"| {name} | {len(workload.jobs):,} | {run.pods_bound:,} | {sim_wall:.1f} | {api_wall:.1f} | "
            f"{api_wall / sim_wall:.2f}x | {points:,} | {same} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
