"""The seeds' experiments, reproduced in virtual time: ``python -m kubeflux.sim.experiments`` (``make experiments``)
regenerates each page of ``docs/experiments/`` — its table, its plot and the command — so what the docs quote is
what the code gives (a test regenerates the tables and compares them with the pages).

**Seed 004** (KubeCon NA 2023, "Improving Batch Scheduling Performance at Scale Using MCAD and KWOK"): 4 KWOK
nodes of 8 GPUs; 50 ``batch/v1`` Jobs of one pod asking 8 GPUs that computes 72 s, one every 20 s (the talk: no
queueing above 18 s, JCT 72 s, scheduling latency 0) and every 17 s (high load: queueing); and the coscheduling
case, 50 PodGroups of 2 such pods (``minMember: 2``, ``scheduleTimeoutSeconds: 10``), one every 34 s (the same GPU
demand as a Job every 17 s; queueing below 36 s), under kube-default, coscheduling, kubeflux (EASY) and
kubeflux-fcfs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubeflux import __version__
from kubeflux.sim.baselines import available
from kubeflux.sim.command import _schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.metrics import summarize
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.synthetic import preset, seed004_cluster

__all__ = ["SEED004_SCHEDULERS", "Seed004Row", "seed004_rows", "seed004_table", "write_seed004"]

SEED004_SCHEDULERS = ("kube-default", "coscheduling", "kubeflux", "kubeflux-fcfs")
SEED004_CASES: tuple[tuple[str, str, float], ...] = (
    ("Jobs, one every 20 s", "seed004-jobs", 20.0),
    ("Jobs, one every 17 s (high load)", "seed004-jobs", 17.0),
    ("PodGroups of 2, one every 34 s (high load)", "seed004-podgroups", 34.0),
)
COMMAND = "python -m kubeflux.sim.experiments seed004"


@dataclass(frozen=True, slots=True)
class Seed004Row:
    case: str
    scheduler: str
    jobs: int
    finished: int
    jct: float
    """Mean job completion time (s): finish − submission."""
    latency: float
    """Mean scheduling latency (s): first bind − submission."""
    bind_span: float
    """Mean bind span (s): last bind − first bind (a job's pods bound over that span). Not MCAD's dispatch time
    (an AppWrapper's creation to its dispatch), which has no counterpart here: no dispatcher holds jobs back."""
    max_wait: float
    """The longest wait (s) from submission to compute start: 0 means no queueing."""

    def cells(self) -> list[str]:
        return [
            self.case,
            self.scheduler,
            f"{self.finished}/{self.jobs}",
            f"{self.jct:.2f}",
            f"{self.latency:.2f}",
            f"{self.bind_span:.2f}",
            f"{self.max_wait:.2f}",
        ]


def _run(name: str, every: float, scheduler: str) -> RunRecord:
    workload = preset(name, mean_interarrival=every)
    nodes = seed004_cluster()
    schedulers, primary = _schedulers_for(scheduler, workload)
    return simulate(workload, nodes, schedulers, primary=primary, label=scheduler)


def seed004_rows(schedulers: Sequence[str] = SEED004_SCHEDULERS) -> list[Seed004Row]:
    """Every case under every scheduler, in order."""
    unknown = [name for name in schedulers if name not in available()]
    if unknown:  # before any run
        raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(available())}")
    rows: list[Seed004Row] = []
    for case, name, every in SEED004_CASES:
        for scheduler in schedulers:
            run = _run(name, every, scheduler)
            summary = summarize(run)
            finished = [j for j in run.jobs if j.finish_time is not None]
            rows.append(
                Seed004Row(
                    case,
                    scheduler,
                    len(run.jobs),
                    len(finished),
                    float(summary["mean_job_completion_time"]),
                    float(summary["mean_scheduling_latency"]),
                    float(summary["mean_bind_span"]),
                    float(summary["max_waiting_time"]),
                )
            )
    return rows


_HEADER = ("case", "scheduler", "finished", "mean JCT (s)", "mean scheduling latency (s)", "mean bind span (s)")


def seed004_table(rows: Sequence[Seed004Row]) -> str:
    """The rows as the Markdown table the page quotes."""
    header = [*_HEADER, "longest wait (s)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)


_PAGE = """# Seed 004: MCAD and KWOK's batch experiment, in virtual time

*kubeflux {version}; regenerate with `{command}` (or `make experiments`); a test checks this page's table against
the code.*

**The question.** The talk (KubeCon NA 2023, "Improving Batch Scheduling Performance at Scale Using MCAD and KWOK")
ran 50 Jobs of one 8-GPU pod that computes 72 s on 4 KWOK nodes of 8 GPUs, one Job every 20 s and every 17 s, and
a coscheduling case of PodGroups, and reported job completion time (JCT), scheduling latency and dispatch time. Do
the same arrivals give the same figures in kubeflux's simulator, and how do kubeflux's schedulers compare?

**The setup.** `kubeflux simulate --preset seed004-jobs` (and `seed004-podgroups`): the seed's cluster (4 nodes,
5 cores, 256Gi and 8 `nvidia.com/gpu` each, tainted `kwok.x-k8s.io/node=fake:NoSchedule` as KWOK's nodes are;
the pods tolerate it), arrivals every 20 s, 17 s, and PodGroups of 2 pods (`minMember: 2`,
`scheduleTimeoutSeconds: 10`) every 34 s, which asks the GPUs of a Job every 17 s. Pods start the moment they are
bound (KWOK's default stages, no start delay); coupled jobs compute once all their pods run.

{table}

**What it shows.** At one Job every 20 s nothing queues: every scheduler gives JCT 72 s and scheduling latency 0,
as the talk measured (it saw no queueing above 18 s). At every 17 s the cluster is over-subscribed (8 GPUs x 72 s
per 17 s is 33.9 GPUs for 32): jobs queue, and the wait grows along the run under every scheduler — one pod per job
leaves nothing for a scheduler to reorder, so they agree. The PodGroups ask the same GPUs in pairs; a gang
scheduler (coscheduling, kubeflux) places both pods of a group at once, while kube-default places pods one by one
and can hold half a group (the coupled job then holds its GPUs idle until its second pod runs).

**Beside the talk.** The talk's high-load coscheduling figures (kube-scheduler with the coscheduler plugin: JCT
332.26 s, scheduling latency 188.40 s) came from a real control plane with KWOK; they include the API server's and
the controllers' delays and a longer run, which a virtual-time simulator does not have, so the absolute numbers
differ; the shape (no queueing above the critical arrival rate, a growing queue below it) is the same. The talk's
dispatch time (MCAD's: an AppWrapper's creation to its dispatch, the time MCAD's queue held the job back before
creating its Job) has no counterpart here: no dispatcher holds jobs back, their pods exist from their submission.
The table gives the bind span instead: last bind − first bind, how long placing all of a job's pods took.
"""


def write_seed004(folder: Path, rows: Sequence[Seed004Row] | None = None) -> Path:
    """Write ``seed004.md`` into ``folder``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    page = _PAGE.format(version=__version__, command=COMMAND, table=seed004_table(rows or seed004_rows()))
    path = folder / "seed004.md"
    path.write_text(page, encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Regenerate the experiment pages of docs/experiments/.")
    parser.add_argument("experiment", nargs="*", help="seed004 (default: every experiment)")
    parser.add_argument("--out", type=Path, default=Path("docs/experiments"))
    args = parser.parse_args(argv)
    unknown = [name for name in args.experiment if name != "seed004"]
    if unknown:
        parser.error(f"unknown experiment(s) {', '.join(unknown)}; known: seed004")
    for name in args.experiment or ["seed004"]:
        if name == "seed004":
            print(f"wrote {write_seed004(args.out)}")


if __name__ == "__main__":
    main()
