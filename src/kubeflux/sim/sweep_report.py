"""The merged report of a sweep (:mod:`kubeflux.sim.sweep`), from what its runs wrote under ``runs/``.

:func:`write_sweep_report` writes into the sweep's folder:

* ``sweep.csv`` / ``sweep.json`` — one row per planned run: its grid point (workload, cluster, scheduler, policy,
  seed), ``status`` (``ok``, ``failed`` with the last line of its error, or ``not run``), and its summary
  (:func:`kubeflux.sim.metrics.summarize`'s columns, ``problems``, the run's wall ``seconds``);
* ``sweep-summary.csv`` — one row per (workload, cluster, scheduler, policy): runs, failed runs, and for each of
  :data:`METRICS` the mean over its seeds with the minimum and maximum;
* ``sweep-<metric>.png`` — for each of :data:`METRICS`, one panel per workload and cluster, one bar per scheduler
  and policy (the mean over seeds, the whisker from minimum to maximum);
* ``index.html`` — the page for a decision maker (:func:`sweep_page`): what ran, then per workload and cluster the
  verdict lines (the first scheduler and policy of the grid against each other, on the means over seeds:
  :mod:`kubeflux.sim.verdict`) and the compact comparison with the best of each row marked
  (:mod:`kubeflux.sim.output.page`), then the bar charts and the files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from rich.table import Table

from kubeflux.sim.metrics import write_summary_csv
from kubeflux.sim.sweep import Task, read_summary

__all__ = ["METRICS", "aggregate", "collect", "group_means", "summary_table", "sweep_page", "write_sweep_report"]

METRICS: tuple[str, ...] = (
    "mean_waiting_time",
    "mean_bounded_slowdown",
    "utilization",
    "makespan",
    "not_finished",
)
"""The summary columns the aggregated table and the plots compare."""

_GROUP = ("workload", "cluster", "scheduler", "policy")


def collect(tasks: Sequence[Task], out: Path) -> list[dict[str, Any]]:
    """One row per task, read back from ``out/runs/<key>/``."""
    rows: list[dict[str, Any]] = []
    for task in tasks:
        folder = out / "runs" / task.key
        row: dict[str, Any] = task.point()  # its columns first, then status and error (sweep.csv's order)
        error = folder / "error.txt"
        written = read_summary(folder / "summary.json")
        if written is not None:
            metrics = {k: v for k, v in written["row"].items() if k not in ("scheduler", "workload")}
            row.update(status="ok", error="", key=task.key, seconds=written.get("seconds", 0.0), **metrics)
        elif error.is_file():
            lines = [line for line in error.read_text(encoding="utf-8").splitlines() if line.strip()]
            row.update(status="failed", error=lines[-1] if lines else "failed", key=task.key)
        else:
            row.update(status="not run", error="", key=task.key)
        rows.append(row)
    return rows


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows grouped by (workload, cluster, scheduler, policy): counts, and each metric's mean, min and max over
    the runs that finished."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in _GROUP), []).append(row)
    merged: list[dict[str, Any]] = []
    for point, members in groups.items():
        ok = [m for m in members if m["status"] == "ok"]
        entry: dict[str, Any] = dict(zip(_GROUP, point, strict=True))
        entry["runs"] = len(members)
        entry["ok"] = len(ok)
        entry["failed"] = sum(1 for m in members if m["status"] == "failed")
        for metric in METRICS:
            values = [float(m[metric]) for m in ok if metric in m]
            entry[metric] = round(sum(values) / len(values), 6) if values else None
            entry[f"{metric}_min"] = min(values) if values else None
            entry[f"{metric}_max"] = max(values) if values else None
        merged.append(entry)
    return merged


def _plot(merged: Sequence[dict[str, Any]], metric: str, path: Path) -> None:
    panels: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in merged:
        panels.setdefault((entry["workload"], entry["cluster"]), []).append(entry)
    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    figure, axes = plt.subplots(lines, columns, figsize=(4.5 * columns, 4.0 * lines), squeeze=False)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, ((workload, cluster), entries) in zip(axes.flat, sorted(panels.items()), strict=False):
        labels = [e["scheduler"] if e["policy"] == "-" else f"{e['scheduler']}\n{e['policy']}" for e in entries]
        means = [e[metric] if e[metric] is not None else 0.0 for e in entries]
        low = [
            m - (e[f"{metric}_min"] if e[f"{metric}_min"] is not None else m)
            for m, e in zip(means, entries, strict=True)
        ]
        high = [
            (e[f"{metric}_max"] if e[f"{metric}_max"] is not None else m) - m
            for m, e in zip(means, entries, strict=True)
        ]
        axis.bar(range(len(entries)), means, yerr=[low, high], capsize=3, color="#4c72b0")
        axis.set_xticks(range(len(entries)), labels, rotation=45, ha="right", fontsize=8)
        axis.set_title(f"{workload}\n{cluster}", fontsize=9)
        axis.set_ylabel(metric.replace("_", " "))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_sweep_report(tasks: Sequence[Task], out: Path, name: str = "") -> list[dict[str, Any]]:
    """Write the merged report of ``tasks`` into ``out`` (``name``: the grid's, for the page's title; the folder's
    by default); returns the aggregated rows."""
    rows = collect(tasks, out)
    write_summary_csv(rows, out / "sweep.csv")
    (out / "sweep.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    merged = aggregate(rows)
    write_summary_csv(merged, out / "sweep-summary.csv")
    plotted = any(entry["ok"] for entry in merged)
    if plotted:
        for metric in METRICS:
            _plot(merged, metric, out / f"sweep-{metric}.png")
    (out / "index.html").write_text(sweep_page(rows, name or out.name, plotted), encoding="utf-8")
    return merged


def _label(row: dict[str, Any]) -> str:
    return str(row["scheduler"]) if row.get("policy", "-") == "-" else f"{row['scheduler']} ({row['policy']})"


def group_means(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per (workload, cluster), one summary-like row per scheduler and policy: the mean over its seeds' finished
    runs of every numeric column (``scheduler`` is ``name (policy)``), in the grid's order."""
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        if row.get("status") == "ok":
            groups.setdefault((str(row["workload"]), str(row["cluster"])), {}).setdefault(_label(row), []).append(row)
    means: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for point, runs in groups.items():
        for label, members in runs.items():
            mean: dict[str, Any] = {"scheduler": label}
            for key in members[0]:
                values = [
                    m[key] for m in members if isinstance(m.get(key), int | float) and not isinstance(m[key], bool)
                ]
                if len(values) == len(members) and key not in ("seed", "seconds"):
                    mean[key] = sum(values) / len(values)
            means.setdefault(point, []).append(mean)
    return means


def sweep_page(rows: Sequence[dict[str, Any]], name: str, plotted: bool) -> str:
    """The sweep's ``index.html`` (module docstring)."""
    import html

    from kubeflux import __version__
    from kubeflux.sim.output.page import STYLE, compact_table, star_legend, verdict_paragraph
    from kubeflux.sim.verdict import rejection_line, verdicts

    def e(text: object) -> str:
        return html.escape(str(text))

    failed = sum(1 for row in rows if row.get("status") == "failed")
    missing = sum(1 for row in rows if row.get("status") == "not run")
    about = (
        f'<dl class="about"><div><dt>Grid</dt><dd>{e(name)}: {len(rows)} runs ({failed} failed, {missing} not run)'
        f"</dd></div><div><dt>Schedulers</dt><dd>{e(', '.join(dict.fromkeys(_label(r) for r in rows)))}</dd></div>"
        f"<div><dt>kubeflux</dt><dd>{e(__version__)}</dd></div></dl>"
    )
    sections: list[str] = []
    for (workload, cluster), means in group_means(rows).items():
        alert = rejection_line(means)
        verdict = "".join(verdict_paragraph(line, alert) for line in verdicts(means))
        mark = "" if sections else ' id="verdict"'  # the first verdict: where a reader looks first
        sections.append(
            f'<section><h2>{e(workload)} on {e(cluster)}</h2><div class="verdict"{mark}>{verdict}</div>'
            f'<div class="scroll">{compact_table(means)}</div>'
            f'<p class="legend">Means over the seeds of each scheduler and policy. {e(star_legend(means))}</p>'
            "</section>"
        )
    images = "".join(
        f'<figure><img src="sweep-{metric}.png" alt="{e(metric)}"><figcaption>{e(metric.replace("_", " "))}: the '
        "mean over seeds, the whisker from the lowest to the highest</figcaption></figure>"
        for metric in (METRICS if plotted else ())
    )
    files = "".join(
        f'<li><a href="{href}">{href}</a> — {e(words)}</li>'
        for href, words in (
            ("sweep-summary.csv", "per scheduler and policy: the mean, lowest and highest over seeds"),
            ("sweep.csv", "one row per run, every summary column"),
            ("sweep.json", "the same as JSON"),
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>kubeflux sweep: {e(name)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>kubeflux sweep: {e(name)}</h1>{about}</header>"
        f"{''.join(sections) or '<p>No run finished.</p>'}"
        f"<section><h2>Every point</h2>{images}</section>"
        f'<section><h2>Files</h2><ul class="files">{files}</ul></section></body></html>\n'
    )


def _cell(value: Any, metric: str = "") -> str:
    """A terminal cell: durations in readable units, utilization in percent, ``-`` when missing."""
    from kubeflux.sim.output import numbers

    if value is None:
        return "-"
    if isinstance(value, float):
        if metric in ("mean_waiting_time", "makespan"):
            return numbers.duration(value)
        if metric == "utilization":
            return numbers.percent(value)
        return numbers.ratio(value) if metric == "mean_bounded_slowdown" else numbers.plain(round(value, 3))
    return str(value)


def summary_table(merged: Sequence[dict[str, Any]], title: str = "Sweep") -> Table:
    """The aggregated rows as a terminal table (means over seeds)."""
    table = Table(title=title)
    for column in (*_GROUP, "runs", "failed", *METRICS):
        table.add_column(column.replace("_", " "), justify="left" if column in _GROUP else "right")
    for entry in merged:
        table.add_row(*(_cell(entry[c], c) for c in (*_GROUP, "runs", "failed", *METRICS)))
    return table
