"""A run's report: the HTML page for a decision maker, its plots and summaries (one line or panel per scheduler).

:func:`write_report` writes into ``out_dir``:

* ``index.html`` — first what ran, the verdict, a compact comparison with the best of each row marked and the
  headline bar charts (``headline.png``); then the detailed plots, every summary figure, the files
  (:mod:`kubeflux.sim.output.page`; images linked relatively: the folder is self-contained);
* ``gantt.png`` — one panel per run: jobs as rectangles on resource ids (cores, then GPUs and other extended
  resources, each kind labelled on the right) over time, from each job's compute start to its end; in grey,
  hatched, the idle holding of coupled jobs' pods that ran before their job could compute; a legend names every
  mark. A run of more than :data:`GANTT_MAX_JOBS` jobs shows its first :data:`GANTT_MAX_JOBS` jobs to start (the
  panel title says so);
* ``utilization.png`` — one small panel per run: the share of cores (and of GPUs …) allocated (solid) and computing
  (dashed) over time;
* ``queue.png`` — pending jobs over time; ``waiting_cdf.png`` — cumulative distribution of waiting times;
* ``summary.csv`` and ``summary.json`` — :func:`kubeflux.sim.metrics.summarize` of each run.

Times on the axes are seconds from each run's first submission. :func:`summary_table` renders summary rows as a
rich table for the terminal. The figures are drawn by :mod:`kubeflux.sim.output.plots` (one collection per kind of
mark, NumPy series), so a 188k-job run's report takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.table import Table

from kubeflux.sim.metrics import MEAN_OVER, summarize, write_summary_csv, write_summary_json
from kubeflux.sim.output import numbers, plots, series
from kubeflux.sim.output.page import About, best_of, present_files, render
from kubeflux.sim.output.timing import PhaseTimer
from kubeflux.sim.records import RunRecord
from kubeflux.sim.resourceids import has_ids
from kubeflux.sim.verdict import rejection_line, verdicts

GANTT_MAX_JOBS = 20_000
"""Jobs drawn per Gantt panel at most (the earliest to start)."""
SERIES_MAX_POINTS = 20_000
"""Points per utilization/queue line at most; longer series are thinned to evenly spaced steps."""

SummaryRow = dict[str, str | int | float]

_COUNT_NAMES = {"started_jobs": "started", "finished_jobs": "finished", "bound_jobs": "bound"}
"""The table's words for the counts of :data:`~kubeflux.sim.metrics.MEAN_OVER`."""

_Shown = Callable[[Sequence[float | None]], list[str]]
_COUNT = numbers.each(numbers.count)
_PERCENT = numbers.each(numbers.percent)

_TABLE_COLUMNS: tuple[tuple[str, str, _Shown | None], ...] = (
    ("scheduler", "scheduler", None),
    ("jobs", "jobs", _COUNT),
    ("rejected", "rejected", _COUNT),
    ("not_finished", "not finished", _COUNT),
    ("started_jobs", "started", _COUNT),
    ("finished_jobs", "finished", _COUNT),
    ("bound_jobs", "bound", _COUNT),
    ("makespan", "makespan", numbers.durations),
    ("mean_waiting_time", "mean wait", numbers.durations),
    ("max_waiting_time", "max wait", numbers.durations),
    ("mean_turnaround_time", "mean turnaround", numbers.durations),
    ("mean_bounded_slowdown", "mean bounded slowdown", numbers.each(numbers.ratio)),
    ("utilization", "utilization", _PERCENT),
    ("useful_utilization", "useful util.", _PERCENT),
    ("mean_scheduling_latency", "mean sched. latency", numbers.durations),
    ("pods_per_wall_second", "pods / wall s", _COUNT),
    ("wall_seconds", "wall", numbers.each(numbers.duration)),
)
"""(summary key, header, format of the column); an average's header ends naming the jobs it covers (``mean wait of
started``), whose number is in that count's column. A column of durations is in the unit that suits its largest
(``0.71 h``, ``4.0 h``), shares in percent, counts with thousands separators; summary.csv keeps the exact figures."""


def _column(rows: Sequence[SummaryRow], key: str, shown: _Shown | None) -> list[str]:
    values = [row.get(key) for row in rows]
    numeric = [float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None for v in values]
    if shown is None or any(v is not None and n is None for v, n in zip(values, numeric, strict=True)):
        return ["" if v is None else str(v) for v in values]
    return shown(numeric)


def _table_columns(rows: Sequence[SummaryRow]) -> list[tuple[str, str, _Shown | None]]:
    """The table's columns: :data:`_TABLE_COLUMNS`, plus the mean wait of each PriorityClass a row has
    (``mean_waiting_time[urgent]`` → ``mean wait of started urgent``) and the allocated utilization of each other
    kind with ids (``utilization[nvidia.com/gpu]`` → ``gpu util.``; amounts such as memory stay in summary.csv)."""
    columns = list(_TABLE_COLUMNS)
    classes: list[str] = []
    for row in rows:
        classes.extend(key for key in row if key.startswith("mean_waiting_time[") and key not in classes)
    at = next(i for i, (key, _, _) in enumerate(columns) if key == "max_waiting_time") + 1
    columns[at:at] = [(key, f"mean wait {key[18:-1] or 'no class'}", numbers.durations) for key in classes]
    kinds: list[str] = []
    for row in rows:
        kinds.extend(key for key in row if key.startswith("utilization[") and has_ids(key[12:-1]) and key not in kinds)
    at = next(i for i, (key, _, _) in enumerate(columns) if key == "useful_utilization") + 1
    columns[at:at] = [(key, f"{key[len('utilization[') : -1].rsplit('/', 1)[-1]} util.", _PERCENT) for key in kinds]
    return columns


def summary_table(rows: Sequence[SummaryRow], title: str = "Scheduler comparison") -> Table:
    """A rich table of summary rows (one per run), the main figures only; the best wait, slowdown and makespan in
    green, among the runs that finished all their jobs without a failure, as the page marks them
    (:func:`~kubeflux.sim.output.page.best_of`). Each average says which jobs it covers (``mean wait of started``)
    and the ``started``, ``finished`` and ``bound`` columns say how many."""
    table = Table(title=title)
    columns = _table_columns(rows)
    for key, header, _ in columns:
        if key == "scheduler":
            table.add_column(header, justify="left", no_wrap=True)
        else:
            over = MEAN_OVER.get(key)
            if key.startswith("mean_waiting_time["):  # mean wait <class> of its started jobs
                header = header.replace("mean wait ", "mean wait of started ", 1)
            table.add_column(f"{header} of {_COUNT_NAMES[over]}" if over else header, justify="right")
    best = best_of(rows, [(key, "lower") for key in ("mean_waiting_time", "mean_bounded_slowdown", "makespan")])
    texts = {key: _column(rows, key, shown) for key, _, shown in columns}
    for index, _row in enumerate(rows):
        cells = []
        for key, _, _ in columns:
            text = texts[key][index]
            cells.append(f"[green]{text}[/green]" if index in best.get(key, ()) else text)
        table.add_row(*cells)
    return table


def utilization_points(run: RunRecord) -> list[tuple[float, float]]:
    """(time from first submission, fraction of cores in use): the run's series, else derived from its jobs."""
    return series.as_points(series.utilization(run))


def kind_points(run: RunRecord, kind: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(time from first submission, fraction allocated) and (…, fraction useful) of one resource kind (``cpu``:
    cores, useful = allocated − held idle); empty when the run has no series of it."""
    allocated, useful = series.kind_usage(run, kind)
    return series.as_points(allocated), series.as_points(useful)


def queue_points(run: RunRecord) -> list[tuple[float, float]]:
    """(time from first submission, pending jobs): the run's series, else submissions minus starts."""
    return series.as_points(series.queue(run))


FIGURES = (
    (
        "Schedules",
        "gantt.png",
        "One panel per scheduler: each job a rectangle on the resource ids it held, from compute start to end. "
        "The legend above the panels names every mark.",
    ),
    (
        "Waiting time",
        "waiting_cdf.png",
        "Share of the jobs that started within a given wait (further left is better).",
    ),
    ("Queue length", "queue.png", "Jobs submitted and not yet started, over time."),
    (
        "Utilization",
        "utilization.png",
        "One panel per scheduler: the share of the cluster allocated (solid) and computing (dashed); the gap is "
        "resources held idle, e.g. by the pods of a gang waiting for the rest of it.",
    ),
)
"""(section, image, caption) of the page's detailed plots, in order."""


def write_report(
    runs: list[RunRecord],
    out_dir: Path,
    *,
    title: str = "kubeflux simulation report",
    rows: Sequence[SummaryRow] | None = None,
    about: About | None = None,
    timer: PhaseTimer | None = None,
) -> Path:
    """Write the plots, summaries and ``index.html`` for ``runs`` into ``out_dir``; returns the index path.

    ``rows``: the runs' summaries when the caller has them already (else :func:`summarize` of each); ``about``: what
    ran, in words (else derived from the runs); ``timer``: times each output (``simulate -v``)."""
    timer = timer or PhaseTimer()
    if rows is None:
        with timer.phase("summaries"):
            rows = [summarize(run) for run in runs]
    write_figures(runs, rows, out_dir, timer)
    return write_page(runs, rows, out_dir, title=title, about=about, timer=timer)


def write_figures(runs: list[RunRecord], rows: Sequence[SummaryRow], out_dir: Path, timer: PhaseTimer) -> None:
    """``summary.csv``, ``summary.json`` and the plots of :func:`write_report`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_summary_csv(rows, out_dir / "summary.csv")
    write_summary_json(rows, out_dir / "summary.json")
    best = best_of(rows, [(key, "higher" if higher else "lower") for key, _, higher in plots.HEADLINE])
    with timer.phase("plot headline.png"):
        if rows:
            plots.headline_bars(rows, best, out_dir / "headline.png")
        else:
            plots.empty(out_dir / "headline.png")
    with timer.phase("plot gantt.png"):
        if runs:
            plots.gantt(runs, out_dir / "gantt.png", GANTT_MAX_JOBS)
        else:
            plots.empty(out_dir / "gantt.png")
    with timer.phase("plot utilization.png"):
        plots.utilization(runs, out_dir / "utilization.png", SERIES_MAX_POINTS)
    with timer.phase("plot queue.png"):
        plots.queue(runs, out_dir / "queue.png", SERIES_MAX_POINTS)
    with timer.phase("plot waiting_cdf.png"):
        plots.waiting_cdf(runs, out_dir / "waiting_cdf.png", SERIES_MAX_POINTS)


def write_page(
    runs: list[RunRecord],
    rows: Sequence[SummaryRow],
    out_dir: Path,
    *,
    title: str = "kubeflux simulation report",
    about: About | None = None,
    timer: PhaseTimer | None = None,
) -> Path:
    """``index.html`` of :func:`write_report` (its file list names the data files present in ``out_dir``)."""
    with (timer or PhaseTimer()).phase("index.html"):
        index = Path(out_dir) / "index.html"
        page = render(
            rows,
            title=title,
            about=about or About(),
            verdicts=verdicts(rows),
            alert=rejection_line(rows),
            total_cores=max((run.total_cores for run in runs), default=0),
            figures=FIGURES,
            files=present_files(Path(out_dir), [run.scheduler for run in runs]),
            mean_over=MEAN_OVER,
        )
        index.write_text(page, encoding="utf-8")
    return index


__all__ = [
    "GANTT_MAX_JOBS",
    "About",
    "kind_points",
    "queue_points",
    "summary_table",
    "utilization_points",
    "write_figures",
    "write_page",
    "write_report",
]
