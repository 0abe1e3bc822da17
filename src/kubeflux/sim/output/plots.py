"""The report's figures (PNG, matplotlib's Agg backend). Every scheduler keeps one colour in every figure
(:func:`colour`, in the order of the runs).

* :func:`headline_bars` — the headline metrics (mean wait, mean bounded slowdown, makespan, useful utilization),
  one horizontal bar per scheduler, named across, the best of each marked, no label over another;
* :func:`gantt` — one panel per run: each job a rectangle on the resource ids it held (cores, then GPUs and other
  kinds with ids, each labelled on the right), from its compute start to its end, drawn as one collection per kind
  of mark; the legend names every mark (jobs, jobs that never finished, pods holding resources idle before their
  job computed, the lines between kinds). A run of more than ``max_jobs`` jobs shows the first ``max_jobs`` to
  start (its title says so);
* :func:`utilization` — small multiples, one panel per run: the share of cores (and of each other kind with ids)
  allocated (solid) and computing (dashed);
* :func:`queue` — pending jobs over time, one line per run;
* :func:`waiting_cdf` — the cumulative distribution of waiting times, one line per run.

Long series are thinned to ``most`` points (:func:`kubeflux.sim.output.series.thin`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from kubeflux.sim.output import numbers, series
from kubeflux.sim.output.arrays import columns
from kubeflux.sim.records import RunRecord

DPI = 100
WIDTH = 11.0
"""Inches: figures are 1,100 px wide (the page shows them at most at its text width)."""
IDLE_STYLE: dict[str, Any] = {"facecolor": "0.85", "edgecolor": "0.45", "hatch": "//", "linewidth": 0.3}
UNFINISHED_ALPHA = 0.35
OUTLINED_BOXES = 2_000
"""Gantt rectangles drawn with a black outline at most per panel; more are drawn filled only."""


def colour(index: int) -> Any:
    """The colour of the ``index``-th run, the same in every figure."""
    return plt.get_cmap("tab10")(index % 10)


def _label(run: RunRecord) -> str:
    return run.scheduler or "run"


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _intervals(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Runs of consecutive ids, (first, last) each."""
    if len(ids) == 1:
        return [(ids[0], ids[0])]
    ordered = np.unique(np.asarray(ids, dtype=np.int64))
    breaks = np.flatnonzero(np.diff(ordered) != 1)
    firsts = np.concatenate([ordered[:1], ordered[breaks + 1]])
    lasts = np.concatenate([ordered[breaks], ordered[-1:]])
    return list(zip(firsts.tolist(), lasts.tolist(), strict=True))


def _boxes(spans: Sequence[tuple[float, float, Sequence[int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Rectangles (n, 4, 2) of (start, end, ids) spans, one per run of consecutive ids, and the span of each."""
    rows: list[tuple[float, ...]] = []
    owner: list[int] = []
    for number, (start, end, ids) in enumerate(spans):
        for low, high in _intervals(ids):
            rows.append((start, end, low, high + 1))
            owner.append(number)
    x0, x1, y0, y1 = columns(rows, 4)
    boxes = np.stack([np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y1], 1), np.stack([x0, y1], 1)], 1)
    return boxes, np.array(owner, dtype=np.int64)


def _polygons(boxes: np.ndarray) -> Sequence[Any]:
    """The (n, 4, 2) array of :func:`_boxes` as PolyCollection's vertices: given whole (its stubs say a sequence),
    it takes matplotlib's fast path, one template path for all (the gantt of 10,000 jobs: 0.3 s less than a list
    of n arrays)."""
    return cast("Sequence[Any]", boxes)


def _idle_spans(run: RunRecord, start: float, until: float) -> list[tuple[float, float, Sequence[int]]]:
    """(start, end, ids) of the pods that held resources idle (Running before their coupled job computed), up to
    ``until`` (seconds from ``start``)."""
    spans: list[tuple[float, float, Sequence[int]]] = []
    for pod in run.pods:
        running = pod.running_time
        stop = pod.compute_time if pod.compute_time is not None else pod.end_time
        if running is None or not pod.resources or running - start > until:
            continue
        end = (stop if stop is not None else start + until) - start
        if end > running - start:
            spans.append((running - start, end, pod.resources))
    return spans


def _label_kinds(ax: Axes, run: RunRecord) -> bool:
    """A line and a label on the right between each kind of the id layout (cores, GPUs …); True if drawn."""
    kinds = [kind for kind in run.resources if kind.count]
    if not kinds:
        return False
    ax.set_ylim(0, sum(kind.count for kind in kinds))
    if len(kinds) < 2:
        return False
    for kind in kinds:
        if kind.first:
            ax.axhline(kind.first, color="black", linewidth=0.8)
        name = "cores" if kind.name == "cpu" else kind.name.rsplit("/", 1)[-1] + "s"
        ax.text(1.005, (kind.first + kind.count / 2), name, transform=ax.get_yaxis_transform(), fontsize=8)
    return True


def gantt(runs: Sequence[RunRecord], path: Path, max_jobs: int) -> None:
    """One panel per run (module docstring)."""
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(WIDTH, 2.9 * len(runs) + 0.7), squeeze=False, sharex=True, layout="constrained"
    )
    cmap = plt.get_cmap("tab20")
    marks = {"unfinished": False, "idle": False, "kinds": False}
    for ax, run in zip(axes[:, 0], runs, strict=True):
        start = series.origin(run)
        jobs = sorted(series.placed(run), key=attrgetter("starting_time"))  # placed: all started
        shown = jobs[:max_jobs]
        last = max((j.finish_time or 0.0 for j in shown), default=start)
        spans = [
            (
                (j.starting_time or 0.0) - start,
                (j.finish_time if j.finish_time is not None else last) - start,
                j.allocated_resources,
            )
            for j in shown
        ]
        idle = _idle_spans(run, start, last - start) if len(jobs) == len(shown) else []
        if idle:
            boxes, _ = _boxes(idle)
            ax.add_collection(PolyCollection(_polygons(boxes), **IDLE_STYLE))
            marks["idle"] = True
        if spans:
            boxes, owner = _boxes(spans)
            colours = cmap(owner % 20)
            unfinished = np.array([j.finish_time is None for j in shown], dtype=bool)[owner]
            colours[unfinished, 3] = UNFINISHED_ALPHA
            marks["unfinished"] = marks["unfinished"] or bool(unfinished.any())
            edges = 0.2 if len(boxes) <= OUTLINED_BOXES else 0.0  # thousands of outlines would paint the panel black
            polygons = PolyCollection(_polygons(boxes), facecolors=colours, edgecolors="black", linewidths=edges)
            ax.add_collection(polygons)
        if spans or idle:
            ax.autoscale_view()
        marks["kinds"] = _label_kinds(ax, run) or marks["kinds"]
        title = _label(run)
        if len(jobs) > len(shown):
            title += f" (the first {len(shown):,} of {len(jobs):,} jobs to start)"
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel("resource id")
    axes[-1, 0].set_xlabel("time since the first submission (s)")
    fig.legend(handles=_gantt_legend(cmap, marks), loc="outside upper center", ncol=2, fontsize=8, frameon=False)
    _save(fig, path)


def _gantt_legend(cmap: Any, marks: dict[str, bool]) -> list[Any]:
    handles: list[Any] = [
        Patch(facecolor=cmap(0), edgecolor="black", linewidth=0.3, label="a job, from compute start to end "
              "(colours cycle in order of start)"),
    ]  # fmt: skip
    if marks["unfinished"]:
        handles.append(
            Patch(facecolor=cmap(0), alpha=UNFINISHED_ALPHA, edgecolor="black", label="a job that never finished")
        )
    if marks["idle"]:
        handles.append(Patch(**IDLE_STYLE, label="a pod holding its resources idle until its whole job could run"))
    if marks["kinds"]:
        handles.append(Line2D([], [], color="black", linewidth=0.8, label="boundary between kinds of resources"))
    return handles


def _kinds(runs: Sequence[RunRecord]) -> list[str]:
    kinds = ["cpu"]
    for run in runs:
        kinds.extend(k.name for k in run.resources if k.count and k.name in run.usage_series and k.name not in kinds)
    return kinds


def _kind_name(kind: str) -> str:
    return "cores" if kind == "cpu" else kind.rsplit("/", 1)[-1] + "s"


def utilization(runs: Sequence[RunRecord], path: Path, most: int) -> None:
    """Small multiples, one panel per run (module docstring)."""
    columns = 1 if len(runs) < 2 else 2
    lines = max(1, math.ceil(len(runs) / columns))
    fig, axes = plt.subplots(
        lines, columns, figsize=(WIDTH, 2.4 * lines + 0.8), squeeze=False, sharex=True, sharey=True,
        layout="constrained",
    )  # fmt: skip
    kinds = _kinds(runs)
    for ax in axes.flat[len(runs) :]:
        ax.set_visible(False)
    for ax, run in zip(axes.flat, runs, strict=False):
        for number, kind in enumerate(kinds):
            allocated, useful = series.kind_usage(run, kind)
            if kind == "cpu" and not allocated[0].size:  # no series: the cores the jobs held
                allocated = series.utilization(run)
            tint = plt.get_cmap("Dark2")(number % 8)
            for steps, style in ((allocated, "-"), (useful, "--")):
                xs, ys = series.thin(steps, most)
                if xs.size:
                    ax.step(xs, ys, where="post", color=tint, linestyle=style, linewidth=1.0)
        ax.set_title(_label(run), fontsize=10, loc="left")
        ax.set_ylim(0, 1.05)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    for ax in axes[:, 0]:
        ax.set_ylabel("share in use")
    for ax in axes[-1, :]:
        ax.set_xlabel("time since the first submission (s)")
    handles = []
    for number, kind in enumerate(kinds):
        tint = plt.get_cmap("Dark2")(number % 8)
        handles.append(Line2D([], [], color=tint, label=f"{_kind_name(kind)} allocated"))
        handles.append(Line2D([], [], color=tint, linestyle="--", label=f"{_kind_name(kind)} computing"))
    fig.legend(handles=handles, loc="outside upper center", ncol=len(handles), fontsize=8, frameon=False)
    _save(fig, path)


def _lines(
    runs: Sequence[RunRecord], steps: Callable[[RunRecord], series.Steps], labels: tuple[str, str, str]
) -> tuple[Figure, Axes]:
    """One line per run, in its colour (queue and waiting time)."""
    fig, ax = plt.subplots(figsize=(WIDTH, 3.6), layout="constrained")
    for index, run in enumerate(runs):
        xs, ys = steps(run)
        if xs.size:
            ax.step(xs, ys, where="post", color=colour(index), label=_label(run), linewidth=1.2)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(labels[2], fontsize=10, loc="left")
    if ax.get_legend_handles_labels()[0]:  # none when no run has a point
        ax.legend(fontsize=8)
    return fig, ax


def queue(runs: Sequence[RunRecord], path: Path, most: int) -> None:
    """Pending jobs over time."""
    labels = ("time since the first submission (s)", "pending jobs", "Queue length")
    fig, ax = _lines(runs, lambda run: series.thin(series.queue(run), most), labels)
    ax.set_ylim(bottom=0, top=None if ax.get_ylim()[1] >= 1 else 1)
    _save(fig, path)


def waiting_cdf(runs: Sequence[RunRecord], path: Path, most: int) -> None:
    """The cumulative distribution of waiting times."""

    def cdf(run: RunRecord) -> series.Steps:
        waits = series.waits(run)
        return series.thin((waits, np.arange(1, waits.size + 1) / max(waits.size, 1)), most)

    labels = ("waiting time (s)", "share of the jobs that started", "Waiting time: cumulative distribution")
    fig, ax = _lines(runs, cdf, labels)
    ax.set_ylim(0, 1.02)
    right = ax.get_xlim()[1] if ax.get_xlim()[1] > 0 else 1.0
    ax.set_xlim(-0.01 * right, right)  # a little left of 0, so a rise at 0 (no wait) shows
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    _save(fig, path)


HEADLINE: tuple[tuple[str, str, bool], ...] = (
    ("mean_waiting_time", "Mean wait", False),
    ("mean_bounded_slowdown", "Mean bounded slowdown", False),
    ("makespan", "Makespan", False),
    ("useful_utilization", "Useful utilization", True),
)
"""(summary key, title, higher is better) of the bar charts' metrics."""


def _headline_values(rows: Sequence[dict[str, Any]], key: str) -> tuple[list[float], list[str], str]:
    """(bar lengths, their labels, the unit the panel's title names) of one headline metric: durations in the unit
    of the largest, utilization in percent; the labels without the unit, which the title says once."""
    values = [float(row.get(key) or 0.0) for row in rows]
    if key == "useful_utilization":
        return [v * 100 for v in values], [numbers.percent(v).removesuffix(" %") for v in values], "%"
    if key == "mean_bounded_slowdown":
        return values, [numbers.ratio(v) for v in values], ""
    size, unit = numbers.unit_of(max((abs(v) for v in values), default=0.0))
    return [v / size for v in values], [text.removesuffix(f" {unit}") for text in numbers.durations(values)], unit


def headline_figure(rows: Sequence[dict[str, Any]], best: dict[str, set[int]]) -> Figure:
    """The headline metrics in a 2 × 2 grid of horizontal bars, one bar per row (scheduler) in its colour, the
    scheduler named once per line of panels (names read across, however long or many), each bar labelled with its
    value at its end (the unit in the panel's title), the best starred and bold (``best``: the indices of the rows
    best at each key). The value axis is widened until every label ends inside its panel
    (:func:`_fit_labels`), so no text overlaps another."""
    count = max(len(rows), 1)
    fig, axes = plt.subplots(2, 2, figsize=(6.6, 1.3 + 0.5 * count), layout="constrained", sharey=True)
    names = [str(row.get("scheduler", "")) for row in rows]
    places = list(range(len(rows)))
    labels: dict[Axes, list[Any]] = {}
    for ax, (key, title, _) in zip(axes.flat, HEADLINE, strict=True):
        lengths, shown, unit = _headline_values(rows, key)
        bars = ax.barh(places, lengths, height=0.7, color=[colour(i) for i in places])
        labels[ax] = [
            ax.annotate(
                ("★ " if index in best.get(key, set()) else "") + text,
                (bar.get_width(), bar.get_y() + bar.get_height() / 2), xytext=(3, 0), textcoords="offset points",
                ha="left", va="center", fontsize=8,
                fontweight="bold" if index in best.get(key, set()) else "normal",
            )
            for index, (bar, text) in enumerate(zip(bars, shown, strict=True))
        ]  # fmt: skip
        ax.set_title(title + (f" ({unit})" if unit else ""), fontsize=9, loc="left")
        ax.set_yticks(places, names, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlim(0, max(max(lengths, default=0.0), 0.0) or 1.0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0, 0].invert_yaxis()  # the first scheduler on top (the axes share it)
    _fit_labels(fig, labels)
    return fig


def _fit_labels(fig: Figure, labels: dict[Axes, list[Any]]) -> None:
    """Widen each panel's value axis until its bar labels end inside the panel (measured: their drawn extents)."""
    for _ in range(4):
        fig.canvas.draw()
        fitted = True
        for ax, texts in labels.items():
            right = max((text.get_window_extent().x1 for text in texts), default=0.0)
            box = ax.get_window_extent()
            if right > box.x1 - 2:
                fitted = False
                low, high = ax.get_xlim()
                # the data width a label needs, as the share of the panel it takes now
                needed = (right - box.x1 + 6) / max(box.width, 1.0)
                ax.set_xlim(low, high * (1 + needed * 1.1))
        if fitted:
            return


def headline_bars(rows: Sequence[dict[str, Any]], best: dict[str, set[int]], path: Path) -> None:
    """:func:`headline_figure`, saved as ``path``."""
    _save(headline_figure(rows, best), path)


def empty(path: Path, text: str = "no runs") -> None:
    """A small image saying ``text``."""
    fig, ax = plt.subplots(figsize=(6, 1))
    ax.text(0.5, 0.5, text, ha="center", va="center")
    ax.set_axis_off()
    fig.savefig(path, dpi=60)
    plt.close(fig)


__all__ = [
    "HEADLINE",
    "colour",
    "empty",
    "gantt",
    "headline_bars",
    "headline_figure",
    "queue",
    "utilization",
    "waiting_cdf",
]
