"""**Preemption** (issue 31): a real trace with a tenth of its jobs urgent, under kube-default (kube-scheduler's
DefaultPreemption, pod by pod, once the baseline has it), kubeflux without preemption and kubeflux (whole jobs):
how long the urgent jobs wait, what that costs everyone else (their wait, the work thrown away, the jobs
preempted), and whether the rules held (no job evicted by one of equal or lower priority; under kubeflux no gang
partly evicted), read from the runs' job and pod records.

The trace is HPC2N (the first 3,170 jobs, as ``benchmarks/simulate.py``'s ``hpc2n`` cases run it) on its machine,
120 nodes of 2 cores; trace jobs are coupled gangs, and a preempted one is requeued whole (Slurm's
``PreemptMode=REQUEUE``, :meth:`kubeflux.sim.jobbook.JobBook.requeue`). The urgent jobs are chosen as ``kubeflux
simulate --urgent 0.1 --seed 0`` chooses them (:func:`kubeflux.sim.urgent.mark_urgent`). The runs go on a process
pool, one per scheduler.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from experiments.pages import markdown_table, stamp, write_page
from experiments.traces import Trace, default_traces_folder, prefix
from kubeflux.scheduler.messages import PREEMPTED_REASON
from kubeflux.sim.baselines import available
from kubeflux.sim.command import schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.jobs import PEER_FAILED
from kubeflux.sim.metrics import summarize
from kubeflux.sim.records import RunRecord
from kubeflux.sim.urgent import Urgent, mark_urgent
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster

__all__ = [
    "HPC2N",
    "SCHEDULERS",
    "URGENT",
    "PreemptionRow",
    "kube_default_preempts",
    "preemption_rows",
    "preemption_table",
    "write_preemption",
]

NAME = "preemption"
SCHEDULERS = ("kube-default", "kubeflux-no-preemption", "kubeflux")
HPC2N = Trace("HPC2N-2002-2.2.first3170.swf", "HPC2N", 120, 2, machine="Seth: 120 nodes of 2 processors (240)")
URGENT = Urgent(0.1, 1000)
SEED = 0


@dataclass(frozen=True, slots=True)
class PreemptionRow:
    scheduler: str
    jobs: int
    finished: int
    not_finished: int
    urgent: int
    """Urgent jobs that started."""
    urgent_mean_wait: float
    """Seconds from submission to compute start, over the urgent jobs that started."""
    urgent_p95_wait: float
    others_mean_wait: float
    mean_wait: float
    """Everyone's mean wait (s)."""
    work_lost_core_hours: float
    """Core-hours computed by pods then evicted (and by the ranks that died with them), thrown away."""
    preempted_jobs: int
    preempted_pods: int
    requeues: int
    """Times a trace job was resubmitted whole after losing a pod to preemption."""
    makespan_days: float
    evicted_not_lower: int
    """Jobs that lost a pod to preemption without being of lower priority than the urgent ones (must be 0)."""
    partly_evicted: int
    """Preemptions (a job, an instant) that evicted part of a gang: the other ranks died ``PeerFailed``."""

    def cells(self) -> list[str]:
        return [
            self.scheduler,
            f"{self.finished:,}/{self.jobs:,}",
            f"{self.urgent_mean_wait:,.0f}",
            f"{self.urgent_p95_wait:,.0f}",
            f"{self.others_mean_wait:,.0f}",
            f"{self.mean_wait:,.0f}",
            f"{self.work_lost_core_hours:,.0f}",
            f"{self.preempted_jobs:,} / {self.preempted_pods:,}",
            f"{self.requeues:,}",
            f"{self.partly_evicted:,}",
            f"{self.makespan_days:.2f}",
        ]


_HEADER = (
    "scheduler",
    "finished",
    "urgent: mean wait (s)",
    "urgent: p95 wait (s)",
    "others: mean wait (s)",
    "everyone: mean wait (s)",
    "work lost (core-h)",
    "jobs / pods preempted",
    "requeues",
    "gangs partly evicted",
    "makespan (days)",
)


def preemption_table(rows: Sequence[PreemptionRow]) -> str:
    return markdown_table(_HEADER, [row.cells() for row in rows])


def kube_default_preempts() -> bool:
    """Whether this version's kube-default baseline preempts (kube-scheduler's DefaultPreemption): it then has a
    ``kube-default-no-preemption`` variant beside it in the registry."""
    return "kube-default-no-preemption" in available()


def _row(run: RunRecord, urgent_priority: int) -> PreemptionRow:
    summary = summarize(run)
    urgent = [
        job.starting_time - job.submission_time
        for job in run.jobs
        if job.starting_time is not None and job.final_state.value != "REJECTED" and job.priority >= urgent_priority
    ]
    priority = {job.job_id: job.priority for job in run.jobs}
    evicted = [pod for pod in run.pods if pod.reason == PREEMPTED_REASON]
    instants = {(pod.job_id, pod.end_time) for pod in evicted}
    partly = {(pod.job_id, pod.end_time) for pod in run.pods if pod.reason == PEER_FAILED} & instants
    return PreemptionRow(
        run.scheduler,
        len(run.jobs),
        int(summary["finished_jobs"]),
        int(summary["not_finished"]),
        len(urgent),
        float(np.mean(urgent)) if urgent else 0.0,
        float(np.percentile(urgent, 95)) if urgent else 0.0,
        float(summary["mean_waiting_time_others"]),
        float(summary["mean_waiting_time"]),
        float(summary["work_lost_core_seconds"]) / 3600,
        int(summary["preempted_jobs"]),
        int(summary["preempted_pods"]),
        sum(job.attempts - 1 for job in run.jobs),
        float(summary["makespan"]) / 86400,
        len({job_id for job_id, _ in instants if priority[job_id] >= urgent_priority}),
        len(partly),
    )


def _run(args: tuple[str, str, Trace, Urgent, int]) -> PreemptionRow:
    """One scheduler's run of the trace (in a worker process): the row, computed there from the records."""
    scheduler, traces_folder, trace, urgent, seed = args
    nodes = uniform_cluster(trace.nodes, trace.cores, "64Gi")
    with tempfile.TemporaryDirectory(prefix="kubeflux-preemption-") as scratch:
        loaded = load_workload(prefix(Path(traces_folder) / trace.file, trace.first, Path(scratch)))
    workload = mark_urgent(map_to_cluster(loaded, nodes), urgent, seed)
    schedulers, primary = schedulers_for(scheduler, workload)
    return _row(simulate(workload, nodes, schedulers, primary=primary, label=scheduler), urgent.priority)


def preemption_rows(
    traces_folder: Path,
    trace: Trace = HPC2N,
    schedulers: Sequence[str] = SCHEDULERS,
    urgent: Urgent = URGENT,
    workers: int = 2,
) -> list[PreemptionRow]:
    """The trace under every scheduler (one process each, ``workers`` at a time), in the order given."""
    unknown = [name for name in schedulers if name not in available()]
    if unknown:
        raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(available())}")
    tasks = [(name, str(traces_folder), trace, urgent, SEED) for name in schedulers]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        return list(pool.map(_run, tasks))


def plot(rows: Sequence[PreemptionRow], path: Path) -> Path:
    """Four panels, one bar per scheduler: the urgent jobs' mean and 95th-percentile wait, the others' mean wait,
    and the work lost."""
    panels = (
        ("urgent jobs: mean wait (s)", [r.urgent_mean_wait for r in rows]),
        ("urgent jobs: 95th percentile wait (s)", [r.urgent_p95_wait for r in rows]),
        ("other jobs: mean wait (s)", [r.others_mean_wait for r in rows]),
        ("work lost to preemption (core-hours)", [r.work_lost_core_hours for r in rows]),
    )
    figure, axes = plt.subplots(1, 4, figsize=(14, 3.8))
    names = [r.scheduler for r in rows]
    colors = [f"C{i}" for i in range(len(rows))]
    for axis, (title, values) in zip(axes, panels, strict=True):
        axis.bar(range(len(rows)), values, color=colors)
        axis.set_xticks(range(len(rows)), names, rotation=20, fontsize=8)
        axis.set_title(title, fontsize=9)
        for i, value in enumerate(values):
            axis.annotate(f"{value:,.0f}", (i, value), ha="center", va="bottom", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


_PAGE = """# Preemption: urgent jobs on a busy machine

{stamp}

**The question.** A tenth of a real trace's jobs are urgent. How long do they wait when the scheduler may preempt
(kube-scheduler pod by pod, kubeflux whole jobs) and when it may not, and what does preempting cost the others:
their wait, the work thrown away, the jobs evicted?

**The setup.** {trace}, every trace job a gang of one-core pods that compute together (a pod that runs before the
others holds its core idle). {urgent_words} `kubeflux simulate --urgent {fraction:g} --seed {seed}` chooses them
the same way; the others keep priority 0. A trace job that loses a pod to preemption is requeued whole once all its
pods have ended, as Slurm's `PreemptMode=REQUEUE` does (new pods; its wait still counts from its first submission);
a rank evicted alone takes the others down at once (`PeerFailed`), and their work is lost too. The schedulers:
{schedulers}

{table}

*Wait*: submission to compute start, over the jobs that started; the p95 is the urgent jobs' 95th percentile.
*Work lost*: core-hours that evicted pods (and the ranks that died with them) had computed. *Gangs partly
evicted*: preemptions after which some ranks of the job died `PeerFailed` instead of being evicted with the rest.
{not_lower}

![Urgent jobs' wait, the others' wait and the work lost, per scheduler]({png})

**What it shows.** {shows}
"""


def _scheduler_words(rows: Sequence[PreemptionRow]) -> str:
    words = {
        "kube-default": (
            "**kube-default**, kube-scheduler v1.36's behaviour: pods one at a time, "
            + (
                "and DefaultPreemption: a pod that does not fit evicts lower-priority pods from one node, pod by "
                "pod, whatever gang they belong to;"
                if kube_default_preempts()
                else "without pod preemption in this version of the baseline (its DefaultPreemption is not merged "
                "yet), so its urgent jobs only go first in the queue;"
            )
        ),
        "kubeflux-no-preemption": "**kubeflux-no-preemption**: kubeflux's EASY backfilling, urgent jobs first in its "
        "queue, nothing evicted;",
        "kubeflux": "**kubeflux**: the same, and a blocked urgent job evicts lower-priority *whole* jobs when the "
        "exact books prove that lets it start now (fewest priority tiers, least work lost, fewest jobs).",
    }
    return "\n".join(f"- {words.get(row.scheduler, f'**{row.scheduler}**')}" for row in rows)


def _shows(rows: Sequence[PreemptionRow]) -> str:
    """What the table says, from its numbers (so that it stays true when the page is regenerated)."""
    by = {row.scheduler: row for row in rows}
    parts: list[str] = []
    off, on = by.get("kubeflux-no-preemption"), by.get("kubeflux")
    if off is not None and on is not None:
        parts.append(
            f"Preempting cuts the urgent jobs' mean wait under kubeflux from {off.urgent_mean_wait:,.0f} s to "
            f"{on.urgent_mean_wait:,.0f} s (95th percentile {off.urgent_p95_wait:,.0f} s → "
            f"{on.urgent_p95_wait:,.0f} s). The price is paid by the others: their mean wait goes from "
            f"{off.others_mean_wait:,.0f} s to {on.others_mean_wait:,.0f} s, {on.preempted_jobs:,} jobs are "
            f"evicted and requeued ({on.requeues:,} requeues), and {on.work_lost_core_hours:,.0f} core-hours of "
            f"their work are thrown away. Every kubeflux eviction takes a gang whole: "
            f"{on.partly_evicted:,} gangs partly evicted."
        )
    kube = by.get("kube-default")
    if kube is not None:
        if kube.preempted_pods:
            parts.append(
                f"kube-default evicts {kube.preempted_pods:,} pods of {kube.preempted_jobs:,} jobs, one rank at a "
                f"time: {kube.partly_evicted:,} preemptions take part of a gang, whose other ranks die with it, and "
                f"{kube.work_lost_core_hours:,.0f} core-hours are lost; its urgent jobs wait "
                f"{kube.urgent_mean_wait:,.0f} s on average."
            )
        else:
            parts.append(
                f"kube-default, without pod preemption here, evicts nothing: its urgent jobs only go first in its "
                f"queue and wait {kube.urgent_mean_wait:,.0f} s on average (95th percentile "
                f"{kube.urgent_p95_wait:,.0f} s), placing pods one at a time."
            )
    unfinished = [row for row in rows if row.not_finished]
    for row in unfinished:
        parts.append(f"{row.scheduler} left {row.not_finished:,} of {row.jobs:,} jobs unfinished.")
    return "\n\n".join(parts)


def write_preemption(
    folder: Path,
    rows: Sequence[PreemptionRow] | None = None,
    *,
    traces_folder: Path | None = None,
    trace: Trace = HPC2N,
    urgent: Urgent = URGENT,
) -> Path:
    """Run (unless ``rows`` are given), write ``preemption.md`` and ``preemption.png`` into ``folder``; the trace is
    read from ``traces_folder`` (default: ``../shared/traces`` beside the repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is None:
        rows = preemption_rows(traces_folder or default_traces_folder(), trace, urgent=urgent)
    png = plot(rows, folder / f"{NAME}.png")
    cut = f"its first {trace.first:,} jobs" if trace.first is not None else "its 3,170 jobs"
    trace_words = (
        f"**{trace.label}** (`{trace.file}`, {cut}) on {trace.nodes:,} nodes of {trace.cores} cores "
        f"({trace.nodes * trace.cores:,} cores, as its machine had)"
    )
    urgent_words = (
        f"{urgent.fraction * 100:g} % of the jobs that can run ({rows[0].urgent if rows else 0:,} of them started) are "
        f"urgent: priority {urgent.priority:,} on all their pods, chosen with seed {SEED};"
    )
    wrong = [f"{row.scheduler}: {row.evicted_not_lower:,}" for row in rows if row.evicted_not_lower]
    not_lower = (
        f"Jobs evicted for one of equal or lower priority (the rules forbid it): {', '.join(wrong)}."
        if wrong
        else "No job was evicted for one of equal or lower priority in any run (checked in the pod records)."
    )
    page = _PAGE.format(
        stamp=stamp(NAME, "a test runs a small cut of the trace and checks the claims this page makes"),
        trace=trace_words,
        urgent_words=urgent_words,
        fraction=urgent.fraction,
        seed=SEED,
        schedulers=_scheduler_words(rows),
        table=preemption_table(rows),
        not_lower=not_lower,
        png=png.name,
        shows=_shows(rows),
    )
    return write_page(folder, NAME, page)


def small(trace: Trace = HPC2N, first: int = 400) -> Trace:
    """The trace cut to its ``first`` jobs (the tests' run)."""
    return replace(trace, first=first)
