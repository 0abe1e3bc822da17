"""Plots and an HTML page comparing runs (one figure per kind, one line or panel per scheduler).

:func:`write_report` writes into ``out_dir``:

* ``gantt.png`` — jobs as rectangles on resource ids (cores, then GPUs and other extended resources, each kind
  labelled on the right) over time, one panel per run, from each job's compute start to its end; in grey, hatched,
  the idle holding of coupled jobs' pods that ran before their job could compute. A run of more than
  :data:`GANTT_MAX_JOBS` jobs shows its first :data:`GANTT_MAX_JOBS` jobs to start (the panel title says so), so a
  188k-job run still plots in seconds; contiguous id ranges are drawn as one rectangle each;
* ``utilization.png`` — fraction of the cluster's cores allocated (solid) and computing (dashed) over time, and
  one more panel per other resource kind with ids (GPUs …);
* ``queue.png`` — pending jobs over time;
* ``waiting_cdf.png`` — cumulative distribution of waiting times;
* ``summary.csv`` and ``summary.json`` — :func:`kubeflux.sim.metrics.summarize` of each run;
* ``index.html`` — the summary table and the four images (linked relatively: the directory is self-contained).

Times on the axes are seconds from each run's first submission. :func:`summary_table` renders summary rows as a
rich table for the terminal.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from rich.table import Table

from kubeflux.sim.metrics import MEAN_OVER, summarize, write_summary_csv, write_summary_json
from kubeflux.sim.records import FinalState, JobRecord, RunRecord
from kubeflux.sim.resourceids import has_ids

GANTT_MAX_JOBS = 20_000
"""Jobs drawn per Gantt panel at most (the earliest to start)."""
SERIES_MAX_POINTS = 20_000
"""Points per utilization/queue line at most; longer series are thinned to evenly spaced steps."""

SummaryRow = dict[str, str | int | float]

_COUNT_NAMES = {"started_jobs": "started", "finished_jobs": "finished", "bound_jobs": "bound"}
"""The table's words for the counts of :data:`~kubeflux.sim.metrics.MEAN_OVER`."""

_TABLE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("scheduler", "scheduler"),
    ("jobs", "jobs"),
    ("rejected", "rejected"),
    ("not_finished", "not finished"),
    ("started_jobs", "started"),
    ("finished_jobs", "finished"),
    ("bound_jobs", "bound"),
    ("makespan", "makespan (s)"),
    ("mean_waiting_time", "mean wait (s)"),
    ("max_waiting_time", "max wait (s)"),
    ("mean_turnaround_time", "mean turnaround (s)"),
    ("mean_bounded_slowdown", "mean bounded slowdown"),
    ("utilization", "utilization"),
    ("useful_utilization", "useful util."),
    ("mean_scheduling_latency", "mean sched. latency (s)"),
    ("pods_per_wall_second", "pods / wall s"),
    ("wall_seconds", "wall (s)"),
)
"""(summary key, header); an average's header ends naming the jobs it covers (``mean wait (s) of started``), whose
number is in that count's column."""


def _format(value: str | int | float | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def _table_columns(rows: Sequence[SummaryRow]) -> list[tuple[str, str]]:
    """The table's columns: :data:`_TABLE_COLUMNS`, plus the allocated utilization of each other kind with ids a
    row has (``utilization[nvidia.com/gpu]`` → ``gpu util.``; amounts such as memory stay in summary.csv)."""
    columns = list(_TABLE_COLUMNS)
    kinds: list[str] = []
    for row in rows:
        kinds.extend(key for key in row if key.startswith("utilization[") and has_ids(key[12:-1]) and key not in kinds)
    at = next(i for i, (key, _) in enumerate(columns) if key == "useful_utilization") + 1
    columns[at:at] = [(key, f"{key[len('utilization[') : -1].rsplit('/', 1)[-1]} util.") for key in kinds]
    return columns


def summary_table(rows: Sequence[SummaryRow], title: str = "Scheduler comparison") -> Table:
    """A rich table of summary rows (one per run), the main figures only; the best wait, slowdown and makespan in
    green, among the runs that finished every job they did not reject (a run that left jobs waiting has nothing
    to be best at: its averages leave out what it never ran). Each average says which jobs it covers (``mean wait
    (s) of started``) and the ``started``, ``finished`` and ``bound`` columns say how many."""
    table = Table(title=title)
    columns = _table_columns(rows)
    for key, header in columns:
        if key == "scheduler":
            table.add_column(header, justify="left", no_wrap=True)
        else:
            over = MEAN_OVER.get(key)
            table.add_column(f"{header} of {_COUNT_NAMES[over]}" if over else header, justify="right")
    best: dict[str, float] = {}
    complete = [row for row in rows if not row.get("not_finished")]
    for key in ("mean_waiting_time", "mean_bounded_slowdown", "makespan"):
        values = [float(row[key]) for row in complete if isinstance(row.get(key), int | float)]
        if len(values) > 1 or (values and len(rows) > 1):
            best[key] = min(values)
    for row in rows:
        cells = []
        for key, _ in columns:
            text = _format(row.get(key))
            value = row.get(key)
            in_race = not row.get("not_finished")
            if in_race and key in best and isinstance(value, int | float) and float(value) == best[key]:
                text = f"[green]{text}[/green]"
            cells.append(text)
        table.add_row(*cells)
    return table


def _origin(run: RunRecord) -> float:
    return min((job.submission_time for job in run.jobs), default=0.0)


def _runs_label(run: RunRecord) -> str:
    return run.scheduler or "run"


def _intervals(ids: Sequence[int]) -> list[tuple[int, int]]:
    ordered = sorted(set(ids))
    result: list[tuple[int, int]] = []
    for value in ordered:
        if result and result[-1][1] == value - 1:
            result[-1] = (result[-1][0], value)
        else:
            result.append((value, value))
    return result


def _placed(run: RunRecord) -> list[JobRecord]:
    return [
        job
        for job in run.jobs
        if job.final_state is not FinalState.REJECTED and job.starting_time is not None and job.allocated_resources
    ]


def _idle_holding(run: RunRecord, origin: float, until: float) -> list[list[tuple[float, float]]]:
    """Rectangles of the pods that held resources idle (Running before their coupled job computed), up to
    ``until`` (seconds from ``origin``)."""
    polygons: list[list[tuple[float, float]]] = []
    for pod in run.pods:
        running = pod.running_time
        stop = pod.compute_time if pod.compute_time is not None else pod.end_time
        if running is None or not pod.resources or running - origin > until:
            continue
        end = (stop if stop is not None else origin + until) - origin
        start = running - origin
        if end > start:
            for low, high in _intervals(pod.resources):
                polygons.append([(start, low), (end, low), (end, high + 1), (start, high + 1)])
    return polygons


def _label_kinds(ax: Axes, run: RunRecord) -> None:
    """A line and a label on the right between each kind of the id layout (cores, GPUs …)."""
    kinds = [kind for kind in run.resources if kind.count]
    if not kinds:
        return
    ax.set_ylim(0, sum(kind.count for kind in kinds))
    if len(kinds) < 2:
        return
    for kind in kinds:
        if kind.first:
            ax.axhline(kind.first, color="black", linewidth=0.8)
        name = "cores" if kind.name == "cpu" else kind.name.rsplit("/", 1)[-1] + "s"
        ax.text(1.005, (kind.first + kind.count / 2), name, transform=ax.get_yaxis_transform(), fontsize=8)


def _gantt(runs: Sequence[RunRecord], path: Path) -> None:
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 3.2 * len(runs)), squeeze=False, sharex=True)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        origin = _origin(run)
        jobs = sorted(_placed(run), key=lambda j: j.starting_time or 0.0)
        shown = jobs[:GANTT_MAX_JOBS]
        end_default = max((j.finish_time or 0.0 for j in shown), default=origin)
        polygons = []
        colors = []
        cmap = plt.get_cmap("tab20")
        for index, job in enumerate(shown):
            start = (job.starting_time or 0.0) - origin
            end = (job.finish_time if job.finish_time is not None else end_default) - origin
            for low, high in _intervals(job.allocated_resources):
                polygons.append([(start, low), (end, low), (end, high + 1), (start, high + 1)])
                colors.append(cmap(index % 20))
        idle = _idle_holding(run, origin, end_default - origin) if len(jobs) == len(shown) else []
        if idle:
            ax.add_collection(PolyCollection(idle, facecolors="0.85", edgecolors="0.5", hatch="//", linewidths=0.2))
        if polygons:
            ax.add_collection(PolyCollection(polygons, facecolors=colors, edgecolors="black", linewidths=0.2))
        if polygons or idle:
            ax.autoscale_view()
        _label_kinds(ax, run)
        title = _runs_label(run)
        if len(jobs) > len(shown):
            title += f" (first {len(shown):,} of {len(jobs):,} jobs to start)"
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("resource id")
    axes[-1, 0].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= SERIES_MAX_POINTS:
        return points
    step = len(points) / SERIES_MAX_POINTS
    return [points[int(i * step)] for i in range(SERIES_MAX_POINTS)] + [points[-1]]


def utilization_points(run: RunRecord) -> list[tuple[float, float]]:
    """(time from first submission, fraction of cores in use): the run's series, else derived from its jobs."""
    origin = _origin(run)
    series = sorted(run.utilization_series)
    if not series:
        changes: dict[float, int] = {}
        for job in _placed(run):
            cores = len(set(job.allocated_resources))
            changes[job.starting_time or 0.0] = changes.get(job.starting_time or 0.0, 0) + cores
            if job.finish_time is not None:
                changes[job.finish_time] = changes.get(job.finish_time, 0) - cores
        level = 0
        for time in sorted(changes):
            level += changes[time]
            series.append((time, level))
    total = max(run.total_cores, 1)
    return [(time - origin, cores / total) for time, cores in series]


def _minus(a: list[tuple[float, int]], b: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The step function ``a − b`` (both given as (time, value) at each change, 0 before their first point)."""
    changes = sorted({t for t, _ in a} | {t for t, _ in b})
    result: list[tuple[float, int]] = []
    i = j = va = vb = 0
    for t in changes:
        while i < len(a) and a[i][0] <= t:
            va = a[i][1]
            i += 1
        while j < len(b) and b[j][0] <= t:
            vb = b[j][1]
            j += 1
        result.append((t, va - vb))
    return result


def kind_points(run: RunRecord, kind: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(time from first submission, fraction allocated) and (…, fraction useful) of one resource kind (``cpu``:
    cores, useful = allocated − held idle); empty when the run has no series of it."""
    origin = _origin(run)
    if kind == "cpu":
        allocated = sorted(run.utilization_series)
        total = max(run.total_cores, 1)
        useful = _minus(allocated, sorted(run.idle_series))
        return (
            [(time - origin, used / total) for time, used in allocated],
            [(time - origin, busy / total) for time, busy in useful],
        )
    capacity = next((k.capacity for k in run.resources if k.name == kind), 0)
    series = run.usage_series.get(kind) or []
    total = max(capacity, 1)
    return (
        [(time - origin, used / total) for time, used, _ in series],
        [(time - origin, busy / total) for time, _, busy in series],
    )


def _utilization(runs: Sequence[RunRecord], path: Path) -> None:
    """One panel for cores, one per other kind with ids that some run used: allocated solid, useful dashed."""
    kinds = ["cpu"]
    for run in runs:
        kinds.extend(k.name for k in run.resources if k.count and k.name in run.usage_series and k.name not in kinds)
    fig, axes = plt.subplots(len(kinds), 1, figsize=(11, 4 * len(kinds)), squeeze=False, sharex=True)
    colors = plt.get_cmap("tab10")
    for ax, kind in zip(axes[:, 0], kinds, strict=True):
        for index, run in enumerate(runs):
            color = colors(index % 10)
            allocated, useful = kind_points(run, kind)
            if kind == "cpu":
                allocated = utilization_points(run)
            allocated, useful = _thin(allocated), _thin(useful)
            if allocated:
                xs, ys = [p[0] for p in allocated], [p[1] for p in allocated]
                ax.step(xs, ys, where="post", color=color, label=f"{_runs_label(run)} allocated")
            if useful:
                xs, ys = [p[0] for p in useful], [p[1] for p in useful]
                ax.step(xs, ys, where="post", color=color, linestyle="--", label=f"{_runs_label(run)} useful")
        name = "cores" if kind == "cpu" else kind
        ax.set_ylabel(f"fraction of {name}")
        ax.set_title(f"Utilization of {name} (solid: allocated, dashed: computing)")
        ax.set_ylim(0, 1.05)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=7)
    axes[-1, 0].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def queue_points(run: RunRecord) -> list[tuple[float, float]]:
    """(time from first submission, pending jobs): the run's series, else submissions minus starts."""
    origin = _origin(run)
    series = sorted(run.queue_series)
    if not series:
        changes: dict[float, int] = {}
        for job in run.jobs:
            if job.final_state is FinalState.REJECTED:
                continue
            changes[job.submission_time] = changes.get(job.submission_time, 0) + 1
            if job.starting_time is not None:
                changes[job.starting_time] = changes.get(job.starting_time, 0) - 1
        level = 0
        for time in sorted(changes):
            level += changes[time]
            series.append((time, level))
    return [(time - origin, float(count)) for time, count in series]


def _queue(runs: Sequence[RunRecord], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 4))
    for run in runs:
        points = _thin(queue_points(run))
        if points:
            ax.step([p[0] for p in points], [p[1] for p in points], where="post", label=_runs_label(run))
    ax.set_xlabel("time (s)")
    ax.set_ylabel("pending jobs")
    ax.set_title("Queue length")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _waiting_cdf(runs: Sequence[RunRecord], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        waits = sorted(
            job.starting_time - job.submission_time
            for job in run.jobs
            if job.final_state is not FinalState.REJECTED and job.starting_time is not None
        )
        if waits:
            n = len(waits)
            ax.step(waits, [(i + 1) / n for i in range(n)], where="post", label=_runs_label(run))
    ax.set_xlabel("waiting time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title("CDF of waiting time")
    if ax.get_legend_handles_labels()[0]:  # none when no job of any run started
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


_IMAGES = (
    ("gantt.png", "Gantt chart"),
    ("utilization.png", "Utilization over time"),
    ("queue.png", "Queue length over time"),
    ("waiting_cdf.png", "CDF of waiting time"),
)


def _html(rows: Sequence[SummaryRow], title: str) -> str:
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    head = "".join(
        f"<th>{html.escape(c)}" + (f"<br>over {html.escape(MEAN_OVER[c])}" if c in MEAN_OVER else "") + "</th>"
        for c in columns
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_format(row.get(c)))}</td>" for c in columns) + "</tr>" for row in rows
    )
    figures = "".join(
        f'<figure><img src="{name}" alt="{html.escape(caption)}"><figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for name, caption in _IMAGES
    )
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:90%}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#eee}"
        "img{max-width:100%}figure{margin:1.5em 0}"
    )
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>Times in seconds of virtual time; bounded slowdown with tau = 10 s; each average covers the jobs its "
        f"count column (under its name) counts. Per-job data: jobs.csv files; "
        f'summary: <a href="summary.csv">summary.csv</a>, <a href="summary.json">summary.json</a>.</p>'
        f"<table><tr>{head}</tr>{body}</table>{figures}</body></html>\n"
    )


def write_report(runs: list[RunRecord], out_dir: Path, *, title: str = "kubeflux simulation report") -> Path:
    """Write the plots, summaries and ``index.html`` for ``runs`` into ``out_dir``; returns the index path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [summarize(run) for run in runs]
    write_summary_csv(rows, out_dir / "summary.csv")
    write_summary_json(rows, out_dir / "summary.json")
    if runs:
        _gantt(runs, out_dir / "gantt.png")
    else:
        _empty(out_dir / "gantt.png")
    _utilization(runs, out_dir / "utilization.png")
    _queue(runs, out_dir / "queue.png")
    _waiting_cdf(runs, out_dir / "waiting_cdf.png")
    index = out_dir / "index.html"
    index.write_text(_html(rows, title), encoding="utf-8")
    return index


def _empty(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, "no runs", ha="center", va="center")
    ax.set_axis_off()
    fig.savefig(path, dpi=60)
    plt.close(fig)


__all__ = ["GANTT_MAX_JOBS", "kind_points", "queue_points", "summary_table", "utilization_points", "write_report"]
