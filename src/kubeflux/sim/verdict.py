"""What one scheduler gains over each other, in one line each: the end of a ``kubeflux simulate`` comparison.

:func:`verdict_lines` compares summary rows (:func:`kubeflux.sim.metrics.summarize`) of runs of the same workload:
the first row (the first ``--scheduler``) against every other, e.g.

    kubeflux vs kube-default: mean wait −41 %, makespan −12 %, useful utilization +9 points (both finished all
    203 jobs)

* mean wait and makespan as a relative change of the baseline's figure (negative: the first scheduler is
  faster); a baseline figure of 0 gives the difference in seconds instead;
* useful utilization (the share of the cores computing, not held idle: :mod:`kubeflux.sim.metrics`) as a
  difference in percentage points;
* in brackets, the jobs behind the figures: when both runs finished the same jobs the comparison is like for
  like; otherwise the line says how many each finished and that the means cover only those (a run that left jobs
  waiting looks faster than it is); and how many of them failed in each run, when any did (a finished job is not
  a succeeded one).

A run compared with nothing (``cluster serve --out``, one ``--scheduler``) gets :func:`summary_line` instead:
``kubeflux: 203 of 203 jobs finished; mean wait 42 min, makespan 10.2 h, useful utilization 79.4 %``.

:func:`verdicts` is what a report's page shows: first :func:`rejection_line` when a run rejected every job (``Nothing
ran: all 10 jobs were rejected under every scheduler …``: figures of 0 s would otherwise read as a perfect run),
then the comparison lines (none when nothing ran anywhere: there is nothing to compare), or the one run's line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Row = Mapping[str, object]

FIGURES: tuple[tuple[str, str], ...] = (("mean_waiting_time", "mean wait"), ("makespan", "makespan"))
"""(summary key, words) of the figures compared as a relative change (lower is better)."""
UTILIZATION = ("useful_utilization", "useful utilization")
"""(summary key, words) of the figure compared in percentage points (higher is better)."""


def _number(row: Row, key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _signed(value: float) -> str:
    """``−41``, ``+9``, ``+0.4``, ``±0``: whole numbers from 1 up, one decimal below, a true minus sign."""
    shown = round(value) if abs(value) >= 1 else round(value, 1)
    if shown == 0:
        return "±0"
    text = f"{abs(shown):g}"
    return ("−" if shown < 0 else "+") + text


def _relative(words: str, ours: float, theirs: float) -> str:
    if theirs > 0:
        return f"{words} {_signed((ours - theirs) / theirs * 100)} %"
    if ours == theirs:
        return f"{words} 0 s for both"
    return f"{words} {_signed(ours - theirs)} s (from 0 s)"


def _jobs(ours: Row, theirs: Row) -> str:
    """What the figures stand on: the same finished jobs, or how many each run finished."""
    total = int(_number(ours, "jobs"))
    done = int(_number(ours, "finished_jobs")), int(_number(theirs, "finished_jobs"))
    complete = not _number(ours, "not_finished") and not _number(theirs, "not_finished")
    same_rejects = _number(ours, "rejected") == _number(theirs, "rejected")
    if complete and same_rejects and done[0] == done[1]:
        text = f"both finished all {done[0]:,} jobs" if done[0] == total else f"both finished the same {done[0]:,} jobs"
    else:
        text = (
            f"not like for like: {ours.get('scheduler')} finished {done[0]:,} of {total:,} jobs, "
            f"{theirs.get('scheduler')} {done[1]:,}; the means cover only the jobs each ran"
        )
    failed = int(_number(ours, "failed")), int(_number(theirs, "failed"))
    if any(failed):  # a finished job is not a succeeded one: a run of failures must not read as a success
        text += f"; failed: {ours.get('scheduler')} {failed[0]:,}, {theirs.get('scheduler')} {failed[1]:,}"
    return text


def verdict_line(ours: Row, theirs: Row) -> str:
    """One line: what the run ``ours`` gains over ``theirs`` (rules in the module docstring)."""
    parts = [_relative(words, _number(ours, key), _number(theirs, key)) for key, words in FIGURES]
    key, words = UTILIZATION
    parts.append(f"{words} {_signed((_number(ours, key) - _number(theirs, key)) * 100)} points")
    return f"{ours.get('scheduler')} vs {theirs.get('scheduler')}: {', '.join(parts)} ({_jobs(ours, theirs)})"


def summary_line(row: Row) -> str:
    """One run's outcome in one line, in readable units (:mod:`kubeflux.sim.output.numbers`)."""
    from kubeflux.sim.output.numbers import count, duration, percent

    done, total = count(_number(row, "finished_jobs")), count(_number(row, "jobs"))
    failed = f" ({count(_number(row, 'failed'))} failed)" if _number(row, "failed") else ""
    wait, makespan = duration(_number(row, "mean_waiting_time")), duration(_number(row, "makespan"))
    useful = f"{UTILIZATION[1]} {percent(_number(row, UTILIZATION[0]))}"
    return (
        f"{row.get('scheduler')}: {done} of {total} jobs finished{failed}; mean wait {wait}, makespan {makespan}, "
        f"{useful}"
    )


def verdict_lines(rows: Sequence[Row]) -> list[str]:
    """The first row against each other row, one line each; none for fewer than two rows."""
    return [verdict_line(rows[0], other) for other in rows[1:]]


def _all_rejected(row: Row) -> bool:
    return _number(row, "jobs") > 0 and _number(row, "rejected") == _number(row, "jobs")


def rejection_line(rows: Sequence[Row]) -> str | None:
    """The line that says when runs rejected every job (they ran nothing: their figures are not results), else
    None."""
    refused = [row for row in rows if _all_rejected(row)]
    if not refused:
        return None
    why = "the metadata column of jobs.csv says why"
    if len(refused) == len(rows):
        jobs = f"all {int(_number(rows[0], 'jobs')):,} jobs were" if _number(rows[0], "jobs") > 1 else "the job was"
        under = "under every scheduler" if len(rows) > 1 else f"by {rows[0].get('scheduler')}"
        return f"Nothing ran: {jobs} rejected {under} ({why})."
    names = ", ".join(str(row.get("scheduler")) for row in refused)
    return f"{names} rejected every job and ran nothing ({why}); the other runs are compared below."


def verdicts(rows: Sequence[Row]) -> list[str]:
    """A report's verdict, line by line (see the module docstring)."""
    note = rejection_line(rows)
    if note is not None and all(_all_rejected(row) for row in rows):
        return [note]
    ran = [row for row in rows if not _all_rejected(row)]
    lines = verdict_lines(ran) if len(ran) > 1 else [summary_line(row) for row in ran]
    return ([note] if note else []) + lines


__all__ = ["rejection_line", "summary_line", "verdict_line", "verdict_lines", "verdicts"]
