"""The report's HTML page, written for someone who has to decide, not for the simulator's authors.

The first screen (it fits 1366 × 768) says what ran (:class:`About`: cluster, workload, schedulers, kubeflux's
version), the verdict (:mod:`kubeflux.sim.verdict`: what the first scheduler gains over each other, or one line for a
single run), a compact comparison (:data:`COMPACT`: one row per figure, one column per scheduler, units in the
numbers, the best of each row marked among the runs that finished all their jobs without a failure: :func:`best_of`;
the jobs rejected, never finished or failed in rows of their own) and the headline bar charts. A verdict line saying
that runs rejected every job is shown as a warning. Then the detailed plots, the full summary (every column of
``summary.csv``) and the files. The page is self-contained (images linked relatively), narrow enough for a laptop,
and prints (print CSS).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeflux import __version__
from kubeflux.sim.output import numbers
from kubeflux.sim.resourceids import has_ids

Row = Mapping[str, Any]


@dataclass(frozen=True)
class About:
    """What ran, in words (empty fields are left out or derived from the summary rows)."""

    cluster: str = ""
    """e.g. ``16 nodes × 16 cores, 64Gi memory (256 cores)``."""
    workload: str = ""
    """e.g. ``hpc-mix.swf + services.yaml``."""


@dataclass(frozen=True)
class Metric:
    """One row of the compact comparison."""

    key: str
    label: str
    shown: Callable[[Sequence[float | None]], list[str]]
    """Formats the row's values together (durations share the unit of the largest)."""
    better: str = ""
    """``lower``, ``higher`` or ``""`` (not a matter of better: the simulator's own time)."""
    note: str = ""


_PERCENT = numbers.each(numbers.percent)
COMPACT: tuple[Metric, ...] = (
    Metric("mean_waiting_time", "mean wait", numbers.durations, "lower", "submission to compute start"),
    Metric("max_waiting_time", "longest wait", numbers.durations, "lower"),
    Metric("mean_turnaround_time", "mean turnaround", numbers.durations, "lower", "submission to end"),
    Metric(
        "mean_bounded_slowdown", "mean bounded slowdown", numbers.each(numbers.ratio), "lower",
        "turnaround / max(run time, 10 s)",
    ),
    Metric("makespan", "makespan", numbers.durations, "lower", "first submission to last end"),
    Metric("utilization", "utilization", _PERCENT, "higher", "cores allocated"),
    Metric("useful_utilization", "useful utilization", _PERCENT, "higher", "cores computing"),
    Metric("mean_scheduling_latency", "mean scheduling latency", numbers.durations, "lower", "submission to bind"),
    Metric("wall_seconds", "simulation time", numbers.each(numbers.duration), "", "wall clock, not virtual"),
)  # fmt: skip
"""The compact table's rows after ``jobs finished`` (utilization of GPUs and other kinds with ids are added)."""


def _number(row: Row, key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _metrics(rows: Sequence[Row]) -> list[Metric]:
    """:data:`COMPACT` with the allocated utilization of each kind with ids a row has (GPUs …)."""
    metrics = list(COMPACT)
    at = next(i for i, metric in enumerate(metrics) if metric.key == "useful_utilization") + 1
    kinds: list[str] = []
    for row in rows:
        kinds.extend(k for k in row if k.startswith("utilization[") and has_ids(k[12:-1]) and k not in kinds)
    for key in reversed(kinds):
        name = key[len("utilization[") : -1].rsplit("/", 1)[-1]
        metrics.insert(at, Metric(key, f"{name} utilization", _PERCENT, "higher", f"{name}s allocated"))
    return metrics


def in_race(row: Row) -> bool:
    """Whether a run may be best at anything: it finished every job of the workload, none failed. A run that
    rejected or left jobs waiting has means that leave out what it never ran; a run of failures ended jobs without
    doing their work."""
    return not any(_number(row, key) for key in ("rejected", "not_finished", "failed"))


def best_of(rows: Sequence[Row], keys: Sequence[tuple[str, str]]) -> dict[str, set[int]]:
    """For each (key, ``lower``/``higher``), the indices of the rows best at it, among the rows :func:`in_race`;
    nothing when fewer than two rows were run, none is in the race, or all are equal."""
    best: dict[str, set[int]] = {}
    if len(rows) < 2:
        return best
    for key, better in keys:
        values = {i: value for i, row in enumerate(rows) if in_race(row) and (value := _number(row, key)) is not None}
        everyone = {value for row in rows if (value := _number(row, key)) is not None}
        if not better or not values or len(everyone) == 1:
            continue  # nothing to choose: all equal
        top = min(values.values()) if better == "lower" else max(values.values())
        best[key] = {i for i, value in values.items() if value == top}
    return best


def _e(text: object) -> str:
    return html.escape(str(text))


_WARN = ' class="warn"'
OUTCOMES: tuple[tuple[str, str, str], ...] = (
    ("rejected", "rejected", "refused: never ran"),
    ("not_finished", "never finished", "waiting or running at the end"),
    ("failed", "failed", "finished without success"),
)
"""(summary key, label, note) of the rows under ``jobs finished`` that say what became of the other jobs, each shown
when a run has any: one row each, so that a cell never widens with words."""


def _outcome_rows(rows: Sequence[Row]) -> list[str]:
    """``jobs finished`` (``3 of 10``), then a row of each of :data:`OUTCOMES` some run has, its counts in red."""
    lines = ['<tr><th scope="row">jobs finished</th>']
    for row in rows:
        done, total = _number(row, "finished_jobs") or 0, _number(row, "jobs") or 0
        warn = _WARN if done < total else ""
        lines.append(f"<td{warn}>{_e(numbers.count(done))} of {_e(numbers.count(total))}</td>")
    lines.append("</tr>")
    for key, label, note in OUTCOMES:
        counts = [_number(row, key) or 0 for row in rows]
        if not any(counts):
            continue
        lines.append(f'<tr><th scope="row">{_e(label)}<br><span class="note">{_e(note)}</span></th>')
        lines.extend(f"<td{_WARN if n else ''}>{_e(numbers.count(n))}</td>" for n in counts)
        lines.append("</tr>")
    return lines


def star_legend(rows: Sequence[Row]) -> str:
    """What ★ means on this page, or why no value has one."""
    if len(rows) < 2:
        return ""
    if not any(in_race(row) for row in rows):
        return (
            "No ★: no run finished all its jobs without a failure, so none is best at anything (each mean leaves "
            "out the jobs its run never finished)."
        )
    return "★ best of the row among the runs that finished all their jobs without a failure."


def verdict_paragraph(line: str, alert: str | None = None) -> str:
    """One line of the verdict; the ``alert`` line (nothing ran …) in the warning colour."""
    return f'<p class="alert">{_e(line)}</p>' if line == alert else f"<p>{_e(line)}</p>"


def compact_table(rows: Sequence[Row]) -> str:
    """The first screen's table: figures down, schedulers across, the best of each row marked ★ (:func:`best_of`);
    what became of the jobs that did not finish in rows of their own (:data:`OUTCOMES`)."""
    metrics = _metrics(rows)
    best = best_of(rows, [(m.key, m.better) for m in metrics])
    head = "".join(f'<th scope="col">{_e(row.get("scheduler", ""))}</th>' for row in rows)
    body = _outcome_rows(rows)
    for metric in metrics:
        if all(_number(row, metric.key) is None for row in rows):
            continue
        note = f'<br><span class="note">{_e(metric.note)}</span>' if metric.note else ""
        body.append(f'<tr><th scope="row">{_e(metric.label)}{note}</th>')
        values = [_number(row, metric.key) for row in rows]
        for index, (value, shown) in enumerate(zip(values, metric.shown(values), strict=True)):
            exact = "" if value is None else f' title="{_e(numbers.plain(value))}"'
            if index in best.get(metric.key, set()):
                body.append(f'<td class="best"{exact}>★ {_e(shown)}</td>')
            else:
                body.append(f"<td{exact}>{_e(shown)}</td>")
        body.append("</tr>")
    return f'<table class="compact"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def full_table(rows: Sequence[Row], mean_over: Mapping[str, str]) -> str:
    """Every column of ``summary.csv``, one row each, exact values; each mean names the count of its jobs."""
    keys: list[str] = []
    for row in rows:
        keys.extend(key for key in row if key not in keys and key != "scheduler")
    head = "".join(f'<th scope="col">{_e(row.get("scheduler", ""))}</th>' for row in rows)
    lines = []
    for key in keys:
        over = f' <span class="note">over {_e(mean_over[key])}</span>' if key in mean_over else ""
        cells = "".join(f"<td>{_e(numbers.plain(row.get(key)))}</td>" for row in rows)
        lines.append(f'<tr><th scope="row"><code>{_e(key)}</code>{over}</th>{cells}</tr>')
    return f'<table class="full"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'


def about_list(rows: Sequence[Row], about: About, total_cores: int) -> str:
    """The "what ran" line: cluster, workload, schedulers, version."""
    workloads = sorted({str(row.get("workload", "")) for row in rows if row.get("workload")})
    jobs = max((_number(row, "jobs") or 0 for row in rows), default=0)
    workload = about.workload or ", ".join(workloads) or "-"
    cluster = about.cluster or (f"{numbers.count(total_cores)} cores" if total_cores else "-")
    items = (
        ("Cluster", cluster),
        ("Workload", f"{workload} ({numbers.count(jobs)} jobs)"),
        ("Schedulers", ", ".join(str(row.get("scheduler", "")) for row in rows) or "-"),
        ("kubeflux", __version__),
    )
    return '<dl class="about">' + "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in items) + "</dl>"


STYLE = """
*{box-sizing:border-box}
body{font:15px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1d1d1f;margin:0 auto;
 max-width:1320px;padding:14px 22px 40px}
h1{font-size:1.4em;margin:0 0 6px}
h2{font-size:1.15em;margin:26px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.about{display:flex;flex-wrap:wrap;gap:2px 22px;margin:0 0 10px;color:#444}
.about dt{display:inline;font-weight:600}.about dd{display:inline;margin:0 0 0 6px}
.verdict{border-left:4px solid #1b7f4b;background:#f2f8f4;padding:7px 12px;margin:0 0 12px}
.verdict p{margin:2px 0}
.first{display:grid;grid-template-columns:minmax(0,max-content) minmax(0,1fr);gap:18px;align-items:start}
.first.stacked{grid-template-columns:minmax(0,1fr)}
.first.stacked img{max-width:720px}
@media (max-width:1000px){.first{grid-template-columns:minmax(0,1fr)}}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.9em}
th,td{padding:2px 9px;border-bottom:1px solid #e3e3e3;text-align:right;white-space:nowrap;vertical-align:top}
thead th{border-bottom:2px solid #bbb;white-space:normal;overflow-wrap:anywhere;min-width:5.5em;max-width:11em;
 vertical-align:bottom}
tbody th{text-align:left;font-weight:600}
.note{font-weight:normal;color:#777;font-size:.82em}
td.best{background:#dff1e5;font-weight:700}
td.warn{color:#a4361c;font-weight:600}
.verdict p.alert{color:#a4361c;font-weight:600}
.legend{color:#555;font-size:.85em;margin:6px 0 0;max-width:620px;white-space:normal}
img{max-width:100%;height:auto;display:block}
figure{margin:10px 0 18px}
figcaption{color:#555;font-size:.88em;margin-top:4px;max-width:900px}
.files li{margin:2px 0}
code{font-size:.92em}
@media print{
 body{max-width:none;padding:0;font-size:10pt}
 .first{grid-template-columns:minmax(0,max-content) minmax(0,1fr)}
 .first.stacked{grid-template-columns:minmax(0,1fr)}
 .scroll{overflow:visible}
 figure,table,.verdict{break-inside:avoid}
 h2{break-after:avoid}
 a{color:inherit;text-decoration:none}
 @page{margin:12mm}
}
"""


STACK_FROM = 4
"""More schedulers than this: the bar charts go under the compact table instead of beside it."""


def render(
    rows: Sequence[Row],
    *,
    title: str,
    about: About,
    verdicts: Sequence[str],
    total_cores: int,
    figures: Sequence[tuple[str, str, str]],
    files: Sequence[tuple[str, str]],
    mean_over: Mapping[str, str],
    alert: str | None = None,
) -> str:
    """The page. ``figures``: (section title, image file, caption) after the first screen; ``files``: (link,
    words); ``alert``: the verdict line to show as a warning (:func:`kubeflux.sim.verdict.rejection_line`)."""
    verdict = "".join(verdict_paragraph(line, alert) for line in verdicts) or "<p>No run to compare.</p>"
    bars = '<img src="headline.png" alt="Bar charts of the headline metrics, one bar per scheduler">' if rows else ""
    legend = (
        f'<p class="legend">{_e(star_legend(rows))} Times are of the simulated cluster (virtual time) except the '
        "simulation time; hover a value for its exact figure.</p>"
    )
    sections = "".join(
        f'<section><h2>{_e(head)}</h2><figure><img src="{_e(name)}" alt="{_e(head)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure></section>"
        for head, name, caption in figures
    )
    layout = "first stacked" if len(rows) > STACK_FROM else "first"  # many columns: the bars go below the table
    links = "".join(f'<li><a href="{_e(href)}">{_e(href)}</a> — {_e(words)}</li>' for href, words in files)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>{_e(title)}</h1>{about_list(rows, about, total_cores)}</header>"
        f'<section class="verdict" id="verdict" aria-label="Verdict">{verdict}</section>'
        f'<section class="{layout}" id="comparison"><div class="scroll">{compact_table(rows)}{legend}</div>'
        f"<div>{bars}</div></section>"
        f"{sections}"
        f'<section id="all-figures"><h2>All figures (summary.csv)</h2><div class="scroll">'
        f"{full_table(rows, mean_over)}</div></section>"
        f'<section id="files"><h2>Files</h2><ul class="files">{links}</ul></section>'
        "</body></html>\n"
    )


def present_files(out_dir: Path, schedulers: Sequence[str]) -> list[tuple[str, str]]:
    """The report's data files that exist in ``out_dir``, with a few words each."""
    candidates = [
        ("summary.csv", "one row per scheduler, every figure of the tables above"),
        ("summary.json", "the same as JSON"),
        ("problems.txt", "input lines skipped and decisions refused"),
    ]
    for name in schedulers:
        candidates.append((f"{name}/jobs.csv", f"{name}: one row per job (Batsim's columns, evalys reads it)"))
        candidates.append((f"{name}/pods.csv", f"{name}: one row per pod"))
    return [(href, words) for href, words in candidates if (out_dir / href).is_file()]


__all__ = [
    "COMPACT",
    "OUTCOMES",
    "About",
    "best_of",
    "compact_table",
    "full_table",
    "in_race",
    "present_files",
    "render",
    "star_legend",
    "verdict_paragraph",
]
