"""**Real traces** under every scheduler: HPC2N (SWF), KTH-SP2 (the Batsim workload JSON) and LCG (SWF, gzipped)
from ``../shared/traces`` (the Parallel Workloads Archive), each on its own machine's shape, under fcfs, easy,
kube-default, coscheduling, kubeflux and kubeflux-fcfs, with coupled jobs (a trace job of several pods computes
once all its pods run; a pod that runs before the others holds its cores idle).

The runs are a sweep (:mod:`kubeflux.sim.sweep`: one :class:`~kubeflux.sim.sweep.Task` per trace and scheduler,
on a local process pool), so ``kubeflux sweep`` with the same grid gives the same rows. A trace too long to run
under every scheduler within minutes on 2 cores is cut to its first jobs (:attr:`Trace.first`); the page says so.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from experiments.pages import markdown_table, stamp, write_page
from kubeflux.sim.sweep import SweepGrid, Task, execute, plan
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.model import Workload

__all__ = ["SCHEDULERS", "TRACES", "Trace", "TraceRow", "prefix", "trace_rows", "traces_table", "write_traces"]

SCHEDULERS = ("fcfs", "easy", "kube-default", "coscheduling", "kubeflux", "kubeflux-fcfs")


@dataclass(frozen=True, slots=True)
class Trace:
    file: str
    """The file's name in the traces folder."""
    label: str
    nodes: int
    cores: int
    first: int | None = None
    """Run only the first this many jobs (None: all)."""
    machine: str = ""


TRACES = (
    Trace("HPC2N-2002-2.2.first3170.swf", "HPC2N", 120, 2, machine="Seth: 120 nodes of 2 processors (240)"),
    Trace(
        "KTH-SP2-1996-2.1-cln.first1000.batsim.json",
        "KTH-SP2 (Batsim JSON)",
        96,
        1,
        machine="IBM SP2: its 96 resources (nb_res), one core each",
    ),
    Trace(
        "LCG-2005-1.swf.gz",
        "LCG",
        192,
        1,
        first=5_000,
        machine=(
            "scaled down from the grid's 24,515 processors, of which these jobs, all of one processor, never use "
            "more than a few hundred at once: on the whole grid no job would wait"
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class TraceRow:
    trace: str
    scheduler: str
    jobs: int
    mean_wait: float
    """Seconds from submission to compute start, over jobs that started."""
    bounded_slowdown: float
    utilization: float
    """Core-seconds allocated over capacity, from the first submission to the last finish."""
    useful: float
    """The same for core-seconds computing (a coupled job's cores held idle before all its pods run are not)."""
    not_finished: int
    status: str = "ok"

    def cells(self) -> list[str]:
        if self.status != "ok":
            return [self.trace, self.scheduler, f"{self.jobs:,}", "—", "—", "—", "—", "—"]
        return [
            self.trace,
            self.scheduler,
            f"{self.jobs:,}",
            f"{self.mean_wait:,.0f}",
            f"{self.bounded_slowdown:,.2f}",
            f"{self.utilization:.3f}",
            f"{self.useful:.3f}",
            f"{self.not_finished:,}",
        ]


def prefix(source: Path, first: int | None, folder: Path) -> Path:
    """``source`` cut to its first ``first`` jobs, written into ``folder`` (``source`` itself when ``first`` is
    None): an SWF keeps its ``;`` header, a Batsim workload its other keys."""
    if first is None:
        return source
    name = source.name.removesuffix(".gz")
    stem, _, ext = name.rpartition(".")
    target = folder / f"{stem}.first{first}.{ext}"
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as stream:
        head = stream.read(1).lstrip()
        if head == "{":
            data = json.loads(head + stream.read())
            data["jobs"] = data["jobs"][:first]
            target.write_text(json.dumps(data), encoding="utf-8")
            return target
        lines: list[str] = []
        jobs = 0
        for line in itertools.chain([head + stream.readline()], stream):
            if line.strip() and not line.lstrip().startswith(";"):
                if jobs == first:
                    break
                jobs += 1
            lines.append(line)
    target.write_text("".join(lines), encoding="utf-8")
    return target


def _tasks(traces: Sequence[Trace], folder: Path, schedulers: Sequence[str], scratch: Path) -> list[tuple[str, Task]]:
    """Each trace's runs (one per scheduler), with the trace's label."""
    tasks: list[tuple[str, Task]] = []
    for trace in traces:
        workload = prefix(folder / trace.file, trace.first, scratch)
        cluster = {"nodes": trace.nodes, "coresPerNode": trace.cores, "memoryPerNode": "64Gi"}
        grid = SweepGrid.model_validate(
            {"name": trace.label, "workloads": [str(workload)], "schedulers": list(schedulers), "clusters": [cluster]}
        )
        tasks += [(trace.label, task) for task in plan(grid, workload.parent)]
    return tasks


def trace_rows(
    folder: Path,
    traces: Sequence[Trace] = TRACES,
    schedulers: Sequence[str] = SCHEDULERS,
    workers: int = 2,
) -> list[TraceRow]:
    """Every trace (in ``folder``) under every scheduler, run as a sweep on ``workers`` processes; a run that
    failed is a row with its status, not an exception."""
    with tempfile.TemporaryDirectory(prefix="kubeflux-traces-") as scratch:
        tasks = _tasks(traces, folder, schedulers, Path(scratch))
        outcomes = {outcome.key: outcome for outcome in execute([task for _, task in tasks], workers=workers)}
    rows: list[TraceRow] = []
    for label, task in tasks:
        outcome = outcomes[task.key]
        row: dict[str, Any] = outcome.row or {}
        rows.append(
            TraceRow(
                label,
                task.scheduler,
                int(row.get("jobs", 0)),
                float(row.get("mean_waiting_time", 0.0)),
                float(row.get("mean_bounded_slowdown", 0.0)),
                float(row.get("utilization", 0.0)),
                float(row.get("useful_utilization", 0.0)),
                int(row.get("not_finished", 0)),
                "ok" if outcome.row is not None else f"failed: {outcome.error.strip().splitlines()[-1]}",
            )
        )
    return rows


_HEADER = (
    "trace",
    "scheduler",
    "jobs",
    "mean wait (s)",
    "mean bounded slowdown",
    "utilization (allocated)",
    "utilization (useful)",
    "not finished",
)


def traces_table(rows: Sequence[TraceRow]) -> str:
    return markdown_table(_HEADER, [row.cells() for row in rows])


def plot(rows: Sequence[TraceRow], path: Path) -> Path:
    """One panel per figure (wait, bounded slowdown, utilization allocated and useful), one group of bars per
    trace, one bar per scheduler."""
    traces = list(dict.fromkeys(row.trace for row in rows))
    schedulers = list(dict.fromkeys(row.scheduler for row in rows))
    by = {(row.trace, row.scheduler): row for row in rows if row.status == "ok"}
    panels: tuple[tuple[str, Callable[[TraceRow], float]], ...] = (
        ("mean wait (s)", lambda r: r.mean_wait),
        ("mean bounded slowdown", lambda r: r.bounded_slowdown),
        ("utilization, allocated", lambda r: r.utilization),
        ("utilization, useful", lambda r: r.useful),
    )
    figure, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    width = 0.8 / max(1, len(schedulers))
    for axis, (title, value) in zip(axes.flat, panels, strict=True):
        for k, scheduler in enumerate(schedulers):
            heights = [value(by[t, scheduler]) if (t, scheduler) in by else 0.0 for t in traces]
            axis.bar([i + k * width for i in range(len(traces))], heights, width, label=scheduler)
        axis.set_xticks([i + width * (len(schedulers) - 1) / 2 for i in range(len(traces))], traces, fontsize=8)
        axis.set_title(title, fontsize=10)
        if title.startswith("mean"):
            axis.set_yscale("symlog", linthresh=1.0)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncols=len(schedulers), fontsize=9)
    figure.tight_layout(rect=(0.0, 0.0, 1.0, 0.95))
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def offered_cores(workload: Workload) -> tuple[float, float]:
    """(hours over which the jobs arrive, cores their run times ask on average over those hours)."""
    jobs = [j for j in workload.jobs if j.run_time is not None and j.run_time > 0]
    if len(jobs) < 2:
        return 0.0, 0.0
    span = max(j.submit_time for j in jobs) - min(j.submit_time for j in jobs)
    work = sum((j.run_time or 0.0) * j.requested_processors for j in jobs)
    return span / 3600, work / span if span > 0 else 0.0


def _traces_list(traces: Sequence[Trace], folder: Path) -> str:
    lines = []
    with tempfile.TemporaryDirectory(prefix="kubeflux-traces-") as scratch:
        for trace in traces:
            cut = f"its first {trace.first:,} jobs" if trace.first is not None else "all its jobs"
            hours, cores = offered_cores(load_workload(prefix(folder / trace.file, trace.first, Path(scratch))))
            plural = "s" if trace.cores > 1 else ""
            lines.append(
                f"- **{trace.label}** (`{trace.file}`): {cut}, arriving over {hours:,.1f} h and asking "
                f"{cores:,.1f} cores on average over that time, on {trace.nodes:,} nodes of {trace.cores} core{plural} "
                f"({trace.nodes * trace.cores:,} cores; {trace.machine})."
            )
    return "\n".join(lines)


_PAGE = """# Real traces under every scheduler

{stamp}

**The question.** How do kubeflux's schedulers compare with the HPC baselines (FCFS, EASY backfilling) and with
Kubernetes' own (kube-default, the coscheduling plugin) on real workloads, once parallel jobs are coupled (a job of
several pods computes only when all its pods run)?

**The setup.** The traces of `../shared/traces` (the Parallel Workloads Archive; see its README), each on its own
machine's shape, every trace job a gang of one-core pods (one per processor it asked):

{traces}

Each trace runs under {schedulers} as one sweep (`kubeflux sweep`'s machinery: one run per trace and scheduler, on
a local process pool); no start delay, no injected failures, one seed (nothing is random). Figures as
`kubeflux simulate` reports them: mean wait (submission to compute start), mean bounded slowdown (τ = 10 s),
utilization of the cores allocated (held by bound pods) and useful (computing: a coupled job's pods that run
before its last one hold their cores idle), over the first submission to the last finish, and the jobs that never
finished.{cuts}

{table}

![Wait, bounded slowdown and utilization per trace and scheduler]({png})

**What it shows.** {shows}
"""


def _same(rows: Sequence[TraceRow], one: str, other: str) -> bool:
    """Whether schedulers ``one`` and ``other`` gave the same figures on every trace."""
    by = {(r.trace, r.scheduler): r for r in rows if r.status == "ok"}
    traces = {r.trace for r in rows}
    pairs = [(by.get((t, one)), by.get((t, other))) for t in traces]
    return all(a is not None and b is not None and a.cells()[2:] == b.cells()[2:] for a, b in pairs)


def _shows(rows: Sequence[TraceRow]) -> str:
    """What the table says, from its numbers (so that it stays true when the page is regenerated)."""
    parts: list[str] = []
    for trace in dict.fromkeys(row.trace for row in rows):
        mine = [row for row in rows if row.trace == trace and row.status == "ok"]
        if not mine:
            continue
        least = min(r.mean_wait for r in mine if not r.not_finished) if any(not r.not_finished for r in mine) else 0
        best = [r.scheduler for r in mine if not r.not_finished and r.mean_wait == least]
        text = f"On {trace}, {' and '.join(best)} wait{'s' if len(best) == 1 else ''} least ({least:,.0f} s on average)"
        for r in mine:
            if r.not_finished:
                text += (
                    f"; {r.scheduler} left {r.not_finished:,} of {r.jobs:,} jobs unfinished, its cores allocated "
                    f"{r.utilization:.3f} of the time but computing only {r.useful:.3f}"
                )
        parts.append(text + ".")
    same = [
        f"{one} gives {other}'s figures on every trace"
        for one, other in (("kubeflux", "easy"), ("kubeflux-fcfs", "fcfs"))
        if _same(rows, one, other)
    ]
    if same:
        parts.append(
            f"{' and '.join(same)}: kubeflux's schedulers, with the matcher placing, reserving and releasing every "
            "pod, reach the exact schedules of the baselines they implement."
        )
    parts.append(
        "Where jobs are parallel (HPC2N, KTH), backfilling (easy, kubeflux) cuts the mean wait, and the bounded "
        "slowdown more, against first come, first served; coscheduling, which tries every group in turn and places "
        "whichever fits, with no reservation for the first in line, can wait even less on average, at the price of "
        "no bound on how long a large job waits. kube-default places pods one at a time: a gang partly placed "
        "holds its cores idle (allocated above useful utilization) and, when gangs hold each other's cores, never "
        "runs. With jobs of one processor (LCG) "
        "there is nothing to backfill: first come, first served, EASY and kubeflux agree, while kube-default and "
        "coscheduling take waiting pods in another order (a pod that did not fit waits out its back-off while "
        "later ones go first)."
    )
    return "\n\n".join(parts)


NAME = "traces"


def write_traces(
    folder: Path,
    rows: Sequence[TraceRow] | None = None,
    *,
    traces_folder: Path | None = None,
    traces: Sequence[Trace] = TRACES,
) -> Path:
    """Run (unless ``rows`` are given), write ``traces.md`` and ``traces.png`` into ``folder``; the traces are read
    from ``traces_folder`` (default: ``../shared/traces`` beside the repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is None:
        rows = trace_rows(traces_folder or default_traces_folder(), traces)
    png = plot(rows, folder / f"{NAME}.png")
    cut = [t for t in traces if t.first is not None]
    cuts = (
        " "
        + " ".join(
            f"{t.label} is cut to its first {t.first:,} jobs so that `make experiments` runs within minutes on 2 cores."
            for t in cut
        )
        if cut
        else ""
    )
    page = _PAGE.format(
        stamp=stamp(NAME, "a test runs a small cut of each trace and checks this page's structure"),
        traces=_traces_list(traces, traces_folder or default_traces_folder()),
        schedulers=", ".join(dict.fromkeys(row.scheduler for row in rows)),
        cuts=cuts,
        table=traces_table(rows),
        png=png.name,
        shows=_shows(rows),
    )
    return write_page(folder, NAME, page)


def default_traces_folder() -> Path:
    """``shared/traces`` beside the checkout or a folder above it (``KUBEFLUX_SHARED`` names ``shared``)."""
    named = os.environ.get("KUBEFLUX_SHARED")
    if named:
        return Path(named) / "traces"
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "shared" / "traces").is_dir():
            return candidate / "shared" / "traces"
    raise FileNotFoundError("no shared/traces folder beside the checkout (set KUBEFLUX_SHARED)")
