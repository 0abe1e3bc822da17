"""The step series the plots draw, as NumPy arrays: utilization, queue length and waiting times of a run.

Times are seconds from the run's first submission. A run's own series (``utilization_series``, ``queue_series``,
``idle_series``, ``usage_series``) are used when it has them, else they are derived from its jobs. A series is
given as the value at each change, sorted by (time, value); where several changes share a time, the value after
them is the last in that order (what the earlier loops over sorted tuples did).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from kubeflux.sim.output.arrays import columns, floats
from kubeflux.sim.records import FinalState, JobRecord, RunRecord

Floats = NDArray[np.float64]
Steps = tuple[Floats, Floats]
"""(times, values) of a step function, each value holding from its time to the next."""


def origin(run: RunRecord) -> float:
    """The run's first submission (0 without jobs)."""
    return min((job.submission_time for job in run.jobs), default=0.0)


def _sorted(points: Sequence[tuple[float, int]] | Sequence[tuple[float, float]]) -> Steps:
    if not points:
        return np.empty(0), np.empty(0)
    times, values = columns(points, 2)
    order = np.lexsort((values, times))
    return times[order], values[order]


def _levels(times: Floats, deltas: Floats) -> Steps:
    """The running total of ``deltas`` at each distinct time (changes at one time summed)."""
    if not times.size:
        return np.empty(0), np.empty(0)
    distinct, where = np.unique(times, return_inverse=True)
    return distinct, np.cumsum(np.bincount(where, weights=deltas, minlength=distinct.size))


def placed(run: RunRecord) -> list[JobRecord]:
    """The jobs that held resource ids: not rejected, started, with an allocation."""
    return [
        job
        for job in run.jobs
        if job.final_state is not FinalState.REJECTED and job.starting_time is not None and job.allocated_resources
    ]


def utilization(run: RunRecord) -> Steps:
    """(time, fraction of the cluster's cores allocated): the run's series, else its jobs' allocations."""
    start = origin(run)
    times, cores = _sorted(run.utilization_series)
    if not times.size:
        jobs = placed(run)
        width = np.array([len(set(job.allocated_resources)) for job in jobs], dtype=np.float64)
        begins = floats([job.starting_time or 0.0 for job in jobs])
        ends = floats([job.finish_time for job in jobs])
        done = ~np.isnan(ends)
        times, cores = _levels(np.concatenate([begins, ends[done]]), np.concatenate([width, -width[done]]))
    return times - start, cores / max(run.total_cores, 1)


def step_minus(a: Steps, b: Steps) -> Steps:
    """The step function ``a − b`` at every change of either (each is 0 before its first change)."""
    times = np.union1d(a[0], b[0])

    def at(steps: Steps) -> Floats:
        index = np.searchsorted(steps[0], times, side="right") - 1
        return np.where(index >= 0, steps[1][np.maximum(index, 0)] if steps[1].size else 0.0, 0.0)

    return times, at(a) - at(b)


def kind_usage(run: RunRecord, kind: str) -> tuple[Steps, Steps]:
    """(time, fraction allocated) and (time, fraction computing) of one resource kind (``cpu``: cores, computing =
    allocated − held idle); empty arrays when the run has no series of it."""
    start = origin(run)
    if kind == "cpu":
        allocated = _sorted(run.utilization_series)
        useful = step_minus(allocated, _sorted(run.idle_series))
        total = max(run.total_cores, 1)
        return (allocated[0] - start, allocated[1] / total), (useful[0] - start, useful[1] / total)
    capacity = max(next((k.capacity for k in run.resources if k.name == kind), 0), 1)
    series = run.usage_series.get(kind) or []
    times, held, busy = columns(series, 3)
    return (times - start, held / capacity), (times - start, busy / capacity)


def queue(run: RunRecord) -> Steps:
    """(time, pending jobs): the run's series, else submissions minus starts (rejected jobs never queue)."""
    start = origin(run)
    times, pending = _sorted(run.queue_series)
    if not times.size:
        jobs = [job for job in run.jobs if job.final_state is not FinalState.REJECTED]
        arrivals = floats([job.submission_time for job in jobs])
        starts = floats([job.starting_time for job in jobs])
        starts = starts[~np.isnan(starts)]
        times, pending = _levels(
            np.concatenate([arrivals, starts]), np.concatenate([np.ones(arrivals.size), -np.ones(starts.size)])
        )
    return times - start, pending


def waits(run: RunRecord) -> Floats:
    """Waiting times (start − submission) of the jobs that started, sorted."""
    started = [job for job in run.jobs if job.final_state is not FinalState.REJECTED and job.starting_time is not None]
    values = floats([job.starting_time for job in started]) - floats([job.submission_time for job in started])
    return np.sort(values)


def thin(steps: Steps, most: int) -> Steps:
    """At most ``most`` + 1 evenly spaced points of a long series (its last point kept)."""
    times, values = steps
    if times.size <= most:
        return steps
    index = np.append((np.arange(most) * (times.size / most)).astype(np.int64), times.size - 1)
    return times[index], values[index]


def as_points(steps: Steps) -> list[tuple[float, float]]:
    """A series as a list of (time, value) pairs."""
    return list(zip(steps[0].tolist(), steps[1].tolist(), strict=True))


__all__ = [
    "as_points",
    "kind_usage",
    "origin",
    "placed",
    "queue",
    "step_minus",
    "thin",
    "utilization",
    "waits",
]
