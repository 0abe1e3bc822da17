"""``jobs.csv`` and ``pods.csv`` built a column at a time: the same bytes as :func:`kubeflux.sim.metrics.batsim_line`
and :func:`~kubeflux.sim.metrics.pod_cells` give row by row, at a fraction of the cost.

A run's times come out of its records once per column as a NumPy array (``None`` → NaN); differences are array
operations (IEEE doubles, so the same values as the row code's Python floats); each column is then formatted by one
list comprehension, and the lines are joined at the end. On LCG (188,041 jobs) writing ``jobs.csv`` went from
3.9 s to about 0.5 s of CPU (benchmarks/simulate.py).

Exactness: the row code rounds each time to the microsecond (``round(x, 6)``) and prints it with six decimals.
For ``|x| < 2**32`` printing ``x`` itself with six decimals gives the same text (the rounded double is within half
an ulp < 0.5e-6 of the decimal it stands for, so it prints back to it); larger values take the row code's path.
Where a rounded value feeds another (``stretch`` = rounded turnaround / rounded execution; every time of
``pods.csv``, printed with ``repr``) it is rounded by Python's ``round``, as the row code does.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from kubeflux.sim.output.arrays import floats
from kubeflux.sim.records import FinalState, PodRecord, RunRecord

Floats = NDArray[np.float64]
Column = list[str]

_EXACT_BELOW = 2.0**32
"""Seconds under which ``f"{x:.6f}"`` equals ``f"{round(x, 6):.6f}"`` (module docstring)."""
_SPECIAL = (",", '"', "\n", "\r")
_STATE_TEXT = {state: state.value for state in FinalState}
"""Each final state's text. ``.value`` is a property written in Python, and a ``StrEnum`` hashes as its str: the
three columns of the state took 0.20-0.28 s over LCG's 188,041 jobs with ``.value`` and ``is``, 0.06 s so."""


def seconds_column(values: Floats) -> Column:
    """Six decimals per value (Batsim's ``std::to_string(double)``), ``""`` for NaN, each as ``round(x, 6)``
    would print."""
    present = ~np.isnan(values)
    given = values[present]
    if given.size and float(np.abs(given).max()) >= _EXACT_BELOW:
        cells = [f"{round(v, 6):.6f}" for v in given.tolist()]
    elif _whole(given):  # whole seconds (traces): integers print in half the time of floats
        cells = [text + ".000000" for text in map(str, given.astype(np.int64).tolist())]
    else:
        cells = [f"{v:.6f}" for v in given.tolist()]
    return cells if bool(present.all()) else _spread(present, cells)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def text_column(values: Sequence[str]) -> Column:
    """Text as it is, in double quotes only where it holds a comma, quote or line break (one scan of the whole
    column decides whether any value needs a look)."""
    joined = "\x00".join(values)
    if not any(mark in joined for mark in _SPECIAL):
        return list(values)
    return [_quote(v) if any(mark in v for mark in _SPECIAL) else v for v in values]


def quoted_column(values: Sequence[str]) -> Column:
    """Every value in double quotes (Batsim's ``metadata``), a quote inside doubled."""
    if '"' not in "".join(values):
        return ['"' + v + '"' for v in values]
    return [_quote(v) for v in values]


IntervalSet = Callable[[Sequence[int]], str]
"""Batsim's interval set of a job's ids (:func:`kubeflux.sim.metrics.interval_set`)."""


def interval_sets(allocations: Sequence[Sequence[int]], interval_set: IntervalSet) -> list[str]:
    """Batsim's interval set of each job's ids (one id: the id itself, the common case of one-core jobs)."""
    return [(str(ids[0]) if len(ids) == 1 else interval_set(ids)) if ids else "" for ids in allocations]


def jobs_columns(run: RunRecord, offset: float, interval_set: IntervalSet) -> list[Column]:
    """``jobs.csv``'s columns (:data:`~kubeflux.sim.metrics.JOBS_COLUMNS`), each a list of formatted cells;
    ``interval_set`` is :func:`kubeflux.sim.metrics.interval_set`."""
    jobs = run.jobs
    states = [_STATE_TEXT[job.final_state] for job in jobs]  # a plain str each: compared and written at C speed
    rejected = np.array([state == "REJECTED" for state in states], dtype=bool)
    submitted = floats([job.submission_time for job in jobs])
    start = floats([job.starting_time for job in jobs])
    start[rejected] = np.nan
    finish = floats([job.finish_time for job in jobs])
    finish[np.isnan(start)] = np.nan
    own = floats([job.workload_submission_time for job in jobs])
    first_bind = floats([job.first_bind_time for job in jobs])
    last_bind = floats([job.last_bind_time for job in jobs])
    with np.errstate(invalid="ignore"):
        submission = np.where(np.isnan(own), submitted + offset, own)
        execution = finish - start
        turnaround = finish - submitted
    turnarounds = seconds_column(turnaround)
    return [
        text_column([job.job_id for job in jobs]),
        text_column([job.workload_name or run.workload_name for job in jobs]),
        text_column([job.profile for job in jobs]),
        seconds_column(submission),
        [str(job.requested_number_of_resources) for job in jobs],
        seconds_column(floats([job.requested_time for job in jobs])),
        ["1" if state == "COMPLETED_SUCCESSFULLY" else "0" for state in states],
        text_column(states),
        seconds_column(start + offset),
        seconds_column(execution),
        seconds_column(finish + offset),
        seconds_column(start - submitted),
        turnarounds,
        _stretch(turnaround, execution),
        text_column(interval_sets([job.allocated_resources for job in jobs], interval_set)),
        ["" if skip else "-1.000000" for skip in rejected.tolist()],
        quoted_column([job.reason for job in jobs]),
        seconds_column(first_bind - submitted),
        seconds_column(last_bind - first_bind),
        turnarounds,  # job_completion_time = turnaround_time
        [str(job.priority) for job in jobs],
    ]


def _whole(values: Floats) -> bool:
    """Whether every value is a whole number of seconds that ``round(x, 6)`` leaves as it is and ``repr`` prints
    as ``<int>.0`` (no -0.0, under 1e15)."""
    return bool(np.all((values == np.floor(values)) & (np.abs(values) < 1e15) & ~((values == 0) & np.signbit(values))))


def _spread(present: NDArray[np.bool_], cells: list[str]) -> Column:
    """``cells`` at the ``present`` positions, ``""`` elsewhere."""
    given = iter(cells)
    return [next(given) if here else "" for here in present.tolist()]


def _stretch(turnaround: Floats, execution: Floats) -> Column:
    """``round(round(turnaround, 6) / round(execution, 6), 6)`` where execution rounds to non-zero, else empty.
    Whole seconds (traces') round to themselves, so their quotient is divided as arrays."""
    present = ~np.isnan(execution)
    t, e = turnaround[present], execution[present]
    if _whole(t) and _whole(e):
        with np.errstate(divide="ignore", invalid="ignore"):
            return _spread(present, seconds_column(np.where(e != 0, t / np.where(e != 0, e, 1.0), np.nan)))
    cells: Column = []
    for t_, e_ in zip(turnaround.tolist(), execution.tolist(), strict=True):
        rounded = round(e_, 6) if e_ == e_ else 0.0
        cells.append(f"{round(round(t_, 6) / rounded, 6):.6f}" if rounded else "")
    return cells


def write_lines(path: Path | str, header: Sequence[str], columns: Sequence[Column]) -> Path:
    """Write a header and the rows the columns make, joined with commas (the cells are formatted already)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as stream:
        stream.write(",".join(header) + "\n")
        if columns and columns[0]:
            stream.write("\n".join(map(",".join, zip(*columns, strict=True))))
            stream.write("\n")
    return path


def rounded_reprs(values: Floats) -> Column:
    """``repr(round(x, 6))`` of each value (what :mod:`csv` prints of :func:`~kubeflux.sim.metrics.pod_cells`'
    times), ``""`` for NaN; whole seconds as ``<int>.0`` straight from the array."""
    present = ~np.isnan(values)
    given = values[present]
    if _whole(given):
        cells = [f"{whole}.0" for whole in given.astype(np.int64).tolist()]
    else:
        cells = [repr(round(value, 6)) for value in given.tolist()]
    return cells if bool(present.all()) else _spread(present, cells)


def pods_columns(pods: Sequence[PodRecord], offset: float, interval_set: IntervalSet) -> list[Column]:
    """``pods.csv``'s columns (:data:`~kubeflux.sim.metrics.POD_COLUMNS`), each a list of unquoted cells."""
    running = floats([pod.running_time for pod in pods])
    compute = floats([pod.compute_time for pod in pods])
    end = floats([pod.end_time for pod in pods])
    with np.errstate(invalid="ignore"):
        idle = np.where(np.isnan(compute), end, compute) - running
    return [
        [pod.job_id for pod in pods],
        [pod.pod for pod in pods],
        [pod.node for pod in pods],
        rounded_reprs(floats([pod.created_time for pod in pods]) + offset),
        rounded_reprs(floats([pod.bind_time for pod in pods]) + offset),
        rounded_reprs(running + offset),
        rounded_reprs(compute + offset),
        rounded_reprs(end + offset),
        rounded_reprs(idle),
        [pod.phase for pod in pods],
        [pod.reason for pod in pods],
        ["" if pod.exit_code is None else str(pod.exit_code) for pod in pods],
        interval_sets([pod.resources for pod in pods], interval_set),
        [pod.message for pod in pods],
    ]


def write_csv_columns(path: Path | str, header: Sequence[str], columns: Sequence[Column]) -> Path:
    """Write a header and the rows of ``columns`` with :mod:`csv` (quoting as it does: only where needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(zip(*columns, strict=True))
    return path


__all__ = [
    "jobs_columns",
    "pods_columns",
    "quoted_column",
    "seconds_column",
    "text_column",
    "write_csv_columns",
    "write_lines",
]
