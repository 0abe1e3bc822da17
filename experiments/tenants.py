"""**Tenants behind Kueue** (issue 33): a real trace's users split between two teams, each with a Kueue LocalQueue
whose ClusterQueue has half the machine as its nominal quota and may borrow the other's idle half (one cohort,
``examples/workloads/kueue-tenants.yaml``), under kube-default and kubeflux, each with and without Kueue in front:
each tenant's wait, its quota use and borrowed share, and Kueue's admission wait, read from the runs' records.

The trace is HPC2N (the first 3,170 jobs, as ``benchmarks/simulate.py``'s ``hpc2n`` cases run it) on its machine,
120 nodes of 2 cores; trace jobs are coupled gangs. Users go to tenants as ``kubeflux simulate --user-queues
tenant-a,tenant-b`` sends them (:mod:`kubeflux.sim.workloads.tenants`: user id mod 2); the runs without Kueue
count their jobs by the same rule. The runs go on a process pool, one per configuration.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from experiments.pages import markdown_table, stamp, write_page
from experiments.traces import Trace, default_traces_folder, prefix
from kubeflux.sim.command import merge_workloads, schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.metrics import summarize
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.tenants import queue_of_user, queues_by_user

__all__ = ["CONFIGURATIONS", "HPC2N", "TENANTS", "TenantRow", "small", "tenant_rows", "tenants_table", "write_tenants"]

NAME = "tenants"
TENANTS = ("tenant-a", "tenant-b")
CONFIGURATIONS = (("kube-default", False), ("kube-default", True), ("kubeflux", False), ("kubeflux", True))
"""(scheduler, behind Kueue) of each run, in the page's order."""
HPC2N = Trace("HPC2N-2002-2.2.first3170.swf", "HPC2N", 120, 2, machine="Seth: 120 nodes of 2 processors (240)")
KUEUE_OBJECTS = Path(__file__).resolve().parent.parent / "examples" / "workloads" / "kueue-tenants.yaml"


@dataclass(frozen=True, slots=True)
class TenantRow:
    configuration: str
    """``kubeflux`` or ``Kueue + kubeflux`` (likewise kube-default)."""
    tenant: str
    jobs: int
    """The tenant's jobs that can run (not rejected)."""
    finished: int
    mean_wait: float
    """Seconds from submission to compute start, over the tenant's jobs that started."""
    p95_wait: float
    mean_admission_wait: float | None
    """Kueue's admission wait (creation → admission), None without Kueue."""
    quota_use: float | None
    """Mean cpu usage over the run / the tenant's nominal quota (can pass 1 by borrowing), None without Kueue."""
    borrowed_share: float | None
    """The part of the tenant's cpu usage above its nominal quota, None without Kueue."""
    makespan_days: float
    """The whole run's (both tenants)."""

    def cells(self) -> list[str]:
        def share(value: float | None) -> str:
            return "—" if value is None else f"{value * 100:.0f} %"

        return [
            self.configuration,
            self.tenant,
            f"{self.finished:,}/{self.jobs:,}",
            f"{self.mean_wait:,.0f}",
            f"{self.p95_wait:,.0f}",
            "—" if self.mean_admission_wait is None else f"{self.mean_admission_wait:,.0f}",
            share(self.quota_use),
            share(self.borrowed_share),
            f"{self.makespan_days:.2f}",
        ]


_HEADER = (
    "configuration",
    "tenant",
    "finished",
    "mean wait (s)",
    "p95 wait (s)",
    "mean admission wait (s)",
    "quota use (cpu)",
    "borrowed share",
    "makespan (days)",
)


def tenants_table(rows: Sequence[TenantRow]) -> str:
    return markdown_table(_HEADER, [row.cells() for row in rows])


def _run(args: tuple[str, bool, str, Trace]) -> list[TenantRow]:
    """One configuration's run of the trace (in a worker process): a row per tenant, computed from the records."""
    scheduler, kueue, traces_folder, trace = args
    nodes = uniform_cluster(trace.nodes, trace.cores, "64Gi")
    with tempfile.TemporaryDirectory(prefix="kubeflux-tenants-") as scratch:
        loaded = load_workload(prefix(Path(traces_folder) / trace.file, trace.first, Path(scratch)))
    if kueue:
        loaded = queues_by_user(merge_workloads([loaded, load_workload(KUEUE_OBJECTS)]), TENANTS)
    workload = map_to_cluster(loaded, nodes)
    tenant_of = {job.id: queue_of_user(job.user, TENANTS) for job in workload.jobs}
    schedulers, primary = schedulers_for(scheduler, workload)
    run = simulate(workload, nodes, schedulers, primary=primary, label=scheduler)
    summary = summarize(run)
    label = f"Kueue + {scheduler}" if kueue else scheduler
    rows = []
    for tenant in TENANTS:
        mine = [job for job in run.jobs if tenant_of[job.job_id] == tenant and job.final_state.value != "REJECTED"]
        waits = [job.starting_time - job.submission_time for job in mine if job.starting_time is not None]
        queue = f"{tenant}-cq"
        rows.append(
            TenantRow(
                label,
                tenant,
                len(mine),
                sum(1 for job in mine if job.finish_time is not None),
                float(np.mean(waits)) if waits else 0.0,
                float(np.percentile(waits, 95)) if waits else 0.0,
                float(summary[f"mean_admission_wait[{queue}]"]) if kueue else None,
                float(summary[f"quota_use[{queue}:cpu]"]) if kueue else None,
                float(summary[f"borrowed_share[{queue}:cpu]"]) if kueue else None,
                float(summary["makespan"]) / 86400,
            )
        )
    return rows


def tenant_rows(traces_folder: Path, trace: Trace = HPC2N, workers: int = 2) -> list[TenantRow]:
    """The trace under every configuration (one process each, ``workers`` at a time), two rows each."""
    tasks = [(scheduler, kueue, str(traces_folder), trace) for scheduler, kueue in CONFIGURATIONS]
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        return [row for rows in pool.map(_run, tasks) for row in rows]


_PAGE = """# Tenants behind Kueue: a real trace's users as two teams

{stamp}

**The question.** Two teams share one machine through Kueue: each team's ClusterQueue holds half the cores as its
nominal quota and may borrow the other's idle half (one cohort, Kueue's default preemption: none). What does Kueue
in front change for each team — its wait, its use of its quota, what it borrows — under kube-default and under
kubeflux, against the same schedulers without Kueue?

**The setup.** {trace}, every trace job a gang of pods that compute together. The trace's users are the teams:
`kubeflux simulate -w <trace> -w examples/workloads/kueue-tenants.yaml --user-queues tenant-a,tenant-b --nodes 120
--cores-per-node 2 --memory-per-node 64Gi` puts the jobs of user *u* in LocalQueue `tenant-a` or `tenant-b` by *u*
mod 2; the runs without Kueue count the same jobs per team.

{table}

*Wait*: submission to compute start (so behind Kueue it includes the admission wait), over the team's jobs that
started. *Admission wait*: creation to Kueue's admission. *Quota use*: the team's mean cpu usage over the run
divided by its nominal quota (above 100 % by borrowing). *Borrowed share*: the part of its usage above its nominal
quota.

**What it shows.** {shows}
"""


def _shows(rows: Sequence[TenantRow]) -> str:
    """What the table says, from its numbers (so that it stays true when the page is regenerated)."""
    by = {(row.configuration, row.tenant): row for row in rows}
    parts: list[str] = []
    for scheduler in ("kube-default", "kubeflux"):
        plain = [by.get((scheduler, tenant)) for tenant in TENANTS]
        held = [by.get((f"Kueue + {scheduler}", tenant)) for tenant in TENANTS]
        if None in plain or None in held:
            continue
        words = ", ".join(
            f"{row.tenant} {alone.mean_wait:,.0f} s → {row.mean_wait:,.0f} s"
            for alone, row in zip(plain, held, strict=True)
            if alone is not None and row is not None
        )
        parts.append(f"Under {scheduler}, Kueue in front changes each team's mean wait: {words}.")
    kueue_rows = [row for row in rows if row.borrowed_share is not None]
    if kueue_rows:
        most = max(kueue_rows, key=lambda row: row.borrowed_share or 0.0)
        parts.append(
            f"Borrowing carries the load: {most.tenant} under {most.configuration} ran "
            f"{(most.borrowed_share or 0.0) * 100:.0f} % of its cpu usage on the other team's quota, and used its "
            f"quota at {(most.quota_use or 0.0) * 100:.0f} % on average."
        )
    behind = [(by.get(("Kueue + kube-default", t)), by.get(("Kueue + kubeflux", t))) for t in TENANTS]
    same = all(a is not None and b is not None and abs(a.mean_wait - b.mean_wait) < 1.0 for a, b in behind)
    if same:
        parts.append(
            "Behind Kueue both schedulers give the same waits: the quotas add up to the machine, so whatever Kueue "
            "admits fits at once, and the order of admission (Kueue's BestEffortFIFO, which lets a later job in "
            "when the head does not fit, with no reservation for the head) decides every start: the scheduler's "
            "backfilling no longer matters."
        )
    return "\n\n".join(parts)


def write_tenants(
    folder: Path, rows: Sequence[TenantRow] | None = None, *, traces_folder: Path | None = None, trace: Trace = HPC2N
) -> Path:
    """Run (unless ``rows`` are given) and write ``tenants.md`` into ``folder``; the trace is read from
    ``traces_folder`` (default: ``../shared/traces`` beside the repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is None:
        rows = tenant_rows(traces_folder or default_traces_folder(), trace)
    cut = f"its first {trace.first:,} jobs" if trace.first is not None else "its 3,170 jobs"
    trace_words = (
        f"**{trace.label}** (`{trace.file}`, {cut}) on {trace.nodes:,} nodes of {trace.cores} cores "
        f"({trace.nodes * trace.cores:,} cores, as its machine had)"
    )
    page = _PAGE.format(
        stamp=stamp(NAME, "a test runs a small cut of the trace and checks the claims this page makes"),
        trace=trace_words,
        table=tenants_table(rows),
        shows=_shows(rows),
    )
    return write_page(folder, NAME, page)


def small(trace: Trace = HPC2N, first: int = 400) -> Trace:
    """The trace cut to its ``first`` jobs (the tests' run)."""
    return replace(trace, first=first)
