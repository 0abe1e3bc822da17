"""**Seed 004's MCAD rows**: the talk's cases with a queue in front of the scheduler that holds each job back until
the cluster's quota has room for all of it, as MCAD dispatched AppWrappers. MCAD is archived; Kueue replaced it, so
the queue is Kueue's (:mod:`kubeflux.sim.kueue`): one ClusterQueue holding the whole cluster
(``examples/workloads/kueue-seed004.yaml``), its LocalQueue named ``default``, so every Job goes to it (Kueue's
LocalQueueDefaulting). A PodGroup is no Kueue integration: its pods are put in the queue as one workload, as an
AppWrapper wrapping the group would be (MCAD's way, which Kueue runs through its AppWrapper integration). The talk's
dispatch time is Kueue's admission wait (a job's creation to its admission, when its pods are created); its job
completion time and scheduling latency are counted from the dispatch, as the talk counted them from the pods'
creation (its MCAD rows' JCT is below the pods' run time, 71.9 s for a 72 s pod), so the page gives both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from experiments.pages import markdown_table
from kubeflux.sim.baselines import available
from kubeflux.sim.command import schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.metrics import summarize
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.model import JobKind
from kubeflux.sim.workloads.synthetic import preset, seed004_cluster

__all__ = ["KUEUE_SEED004", "QUEUED_SCHEDULERS", "QueuedRow", "queued_rows", "queued_table"]

QUEUED_SCHEDULERS = ("kube-default", "coscheduling", "kubeflux")
"""The talk put MCAD in front of kube-scheduler and of the coscheduling plugin; kubeflux beside them."""
KUEUE_SEED004 = Path(__file__).resolve().parent.parent / "examples" / "workloads" / "kueue-seed004.yaml"


@dataclass(frozen=True, slots=True)
class QueuedRow:
    case: str
    scheduler: str
    jobs: int
    finished: int
    jct: float
    """Mean job completion time (s): finish − submission (the queue's hold included)."""
    jct_from_dispatch: float
    """Mean finish − admission (s): the talk's JCT behind MCAD."""
    dispatch: float
    """Mean dispatch time (s): Kueue's admission wait, the time the queue held the job back."""
    latency: float
    """Mean scheduling latency from dispatch (s): first bind − admission."""
    max_wait: float
    """The longest wait (s) from submission to compute start."""

    def cells(self) -> list[str]:
        return [
            self.case,
            f"Kueue + {self.scheduler}",
            f"{self.finished}/{self.jobs}",
            f"{self.jct:.2f}",
            f"{self.jct_from_dispatch:.2f}",
            f"{self.dispatch:.2f}",
            f"{self.latency:.2f}",
            f"{self.max_wait:.2f}",
        ]


_HEADER = (
    "case",
    "scheduler",
    "finished",
    "mean JCT (s)",
    "mean JCT from dispatch (s)",
    "mean dispatch time (s)",
    "mean scheduling latency from dispatch (s)",
    "longest wait (s)",
)


def queued_table(rows: Sequence[QueuedRow]) -> str:
    return markdown_table(_HEADER, [row.cells() for row in rows])


def _queued(case: str, name: str, every: float, scheduler: str) -> QueuedRow:
    queue = load_workload(KUEUE_SEED004).kueue
    jobs = preset(name, mean_interarrival=every)
    wrapped = [replace(job, queue_name="default") if job.kind is JobKind.POD_GROUP else job for job in jobs.jobs]
    workload = replace(jobs, jobs=wrapped, kueue=queue)
    nodes = seed004_cluster()
    schedulers, primary = schedulers_for(scheduler, workload)
    run = simulate(workload, nodes, schedulers, primary=primary, label=scheduler)
    summary = summarize(run)
    dispatch = float(summary["mean_admission_wait"])
    from_dispatch = [
        job.finish_time - job.admission_time
        for job in run.jobs
        if job.finish_time is not None and job.admission_time is not None
    ]
    return QueuedRow(
        case,
        scheduler,
        len(run.jobs),
        sum(1 for job in run.jobs if job.finish_time is not None),
        float(summary["mean_job_completion_time"]),
        sum(from_dispatch) / len(from_dispatch) if from_dispatch else 0.0,
        dispatch,
        float(summary["mean_scheduling_latency"]) - dispatch,
        float(summary["max_waiting_time"]),
    )


def queued_rows(
    cases: Sequence[tuple[str, str, float]], schedulers: Sequence[str] = QUEUED_SCHEDULERS
) -> list[QueuedRow]:
    """Every case under every scheduler behind the queue, in order, in virtual time."""
    unknown = [name for name in schedulers if name not in available()]
    if unknown:
        raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(available())}")
    return [_queued(case, name, every, scheduler) for case, name, every in cases for scheduler in schedulers]
