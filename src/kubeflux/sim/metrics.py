"""Job metrics of a run: Batsim's ``jobs.csv`` (plus Kubernetes columns) and a per-run summary.

``jobs.csv`` is what Batsim's ``JobsTracer`` writes: exactly Batsim's columns, in Batsim's order
(:data:`BATSIM_COLUMNS`), formatted as Batsim formats them (times with six decimals, ``-1.000000``, ``metadata``
always in double quotes), then three Kubernetes columns (:data:`KUBERNETES_COLUMNS`), so evalys
(``evalys.jobset.JobSet.from_csv``) and Batsim tooling read it:

* times are on the **workload's own clock**, as Batsim keeps them: ``submission_time`` is an SWF's submit field as
  written, a Batsim workload's ``subtime``, a manifest's ``sim.kubeflux.io/submit-time`` (seconds from when the
  file is applied; 0 without it), a synthetic job's arrival; the other times are on the same clock
  (:func:`time_offset`). Several ``--workload`` files merged into one run are each shifted to start at 0 first;
* ``profile`` is the job's Batsim profile name: a Batsim workload's ``profile``, what Batsim's SWF converters name
  an SWF or synthetic job's (its run time in whole seconds + 1), a manifest job's container images
  (:meth:`~kubeflux.sim.workloads.model.WorkloadJob.profile_name`);
* ``execution_time`` = finish − start, ``waiting_time`` = start − submission, ``turnaround_time`` = finish −
  submission, ``stretch`` = turnaround / execution (empty when execution is 0, where Batsim would print ``inf``),
  ``success`` is 1 only for ``COMPLETED_SUCCESSFULLY``; ``consumed_energy`` is −1 (no energy model);
  ``allocated_resources`` is Batsim's interval set of resource ids, e.g. ``0-3 5`` (cores, then GPUs, then other
  extended resources: :mod:`kubeflux.sim.resourceids`); ``metadata`` says why a job was rejected, did not succeed
  or did not finish (``rejected: …``, ``failed: …``, ``not finished: …``; ``""`` for a job that succeeded);
* ``starting_time`` is when the job began computing: a coupled job's last required pod Running
  (:func:`kubeflux.sim.jobs.coupled_quorum`), any other job's first pod Running;
* a ``REJECTED`` job has, as Batsim writes it, empty starting_time, execution_time, finish_time, waiting_time,
  turnaround_time, stretch and consumed_energy; a job still pending or running when the run ended
  (``NOT_FINISHED``) has empty columns for what never happened;
* ``scheduling_latency`` = first bind − submission: how long until the scheduler placed the first pod (the talk of
  seed 004 measures it per pod, from the pod's creation, which is the job's submission here);
* ``bind_span`` = last bind − first bind: how long placing the whole job took (0 for a one-pod job and for a gang
  placed at once). It is *not* MCAD's "dispatch time" (an AppWrapper's creation to its ``Dispatched`` condition,
  the time MCAD's queue held the job back before creating its objects): no dispatcher holds jobs back here, their
  pods exist from their submission, so that figure would be 0 for every job (the talk writes N/A without MCAD);
* ``job_completion_time`` = finish − submission (seed 004's "job completion time"; equals turnaround_time);
* ``priority``: the job's pods' priority (``spec.priority``, the highest when they differ; 0 when no PriorityClass
  says otherwise, ``--urgent`` gives one);
* ``priority_class``, only when a job of the run has one (a workload's pods naming a PriorityClass, or admitted
  with a ``globalDefault`` one; so that a run without classes writes the file it always wrote): the PriorityClass
  that gave the job its priority (its highest pod's ``spec.priorityClassName``), empty for a job without one.
* ``domains[<level>]`` (``domains[zone]``, ``domains[rack]``), only for the topology levels some node of the run
  carries (a cluster without such labels writes the file it always wrote): how many domains of the level the job's
  pods were in (:mod:`kubeflux.sim.fabric`), empty for a job none of whose pods was bound.
* ``cluster_queue``, ``admission_wait``, ``quota_evictions``, only in a run with Kueue objects (so that a run
  without writes the file it always wrote): the ClusterQueue that admits the job (empty for a job Kueue does not
  hold), first admission − submission (empty when never admitted), how many times Kueue evicted it for quota
  (:mod:`kubeflux.sim.kueue.figures`).

:func:`summarize` gives one row per run (see its docstring for each figure; every mean has a count of the jobs it
averages, :data:`MEAN_OVER`); :func:`write_pods_csv` writes ``pods.csv``, one row per pod (see :func:`pod_cells`).
``docs/simulator-outputs.md`` describes every output.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import numpy as np
from numpy.typing import NDArray

from kubeflux.sim.kueue.figures import ADMISSION_COLUMNS, admission_columns
from kubeflux.sim.losses import preemption_losses
from kubeflux.sim.output.arrays import floats, step_area
from kubeflux.sim.records import FinalState, JobRecord, PodRecord, RunRecord

BATSIM_COLUMNS: tuple[str, ...] = (
    "job_id",
    "workload_name",
    "profile",
    "submission_time",
    "requested_number_of_resources",
    "requested_time",
    "success",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
    "stretch",
    "allocated_resources",
    "consumed_energy",
    "metadata",
)
"""Batsim's ``jobs.csv`` columns in the order its ``export.cpp`` writes them (``…,stretch,allocated_resources,
consumed_energy,metadata``)."""
KUBERNETES_COLUMNS: tuple[str, ...] = ("scheduling_latency", "bind_span", "job_completion_time", "priority")
"""After Batsim's: first bind − submission, last bind − first bind, finish − submission, the job's priority (module
docstring)."""
JOBS_COLUMNS: tuple[str, ...] = BATSIM_COLUMNS + KUBERNETES_COLUMNS
PRIORITY_CLASS_COLUMN: Final = "priority_class"
"""The last column of ``jobs.csv`` when a job of the run has a PriorityClass (module docstring)."""
_SECONDS_COLUMNS = frozenset(JOBS_COLUMNS) - {
    "job_id",
    "workload_name",
    "profile",
    "requested_number_of_resources",
    "success",
    "final_state",
    "allocated_resources",
    "metadata",
    "priority",
}
"""Columns Batsim prints as C++ ``std::to_string(double)`` does: six decimals (``13257.000000``, ``-1.000000``)."""

MEAN_OVER: dict[str, str] = {
    "mean_waiting_time": "started_jobs",
    "max_waiting_time": "started_jobs",
    "mean_turnaround_time": "finished_jobs",
    "mean_slowdown": "slowdown_jobs",
    "mean_bounded_slowdown": "finished_jobs",
    "mean_scheduling_latency": "bound_jobs",
    "mean_bind_span": "bound_jobs",
    "mean_job_completion_time": "finished_jobs",
    "mean_waiting_time_urgent": "urgent_started_jobs",
    "mean_waiting_time_others": "other_started_jobs",
}
"""For each average (and maximum) of :func:`summarize`, the summary key that counts the jobs it covers."""

BOUNDED_SLOWDOWN_TAU: Final = 10.0
"""Seconds: bounded slowdown = max(1, turnaround / max(execution, tau)); short jobs do not dominate the mean."""

Cell = str | int | float | None
"""A jobs.csv value; None is written as an empty cell."""


def interval_set(ids: Sequence[int]) -> str:
    """Batsim's interval-set string of resource ids: ``[0, 1, 2, 3, 5]`` → ``"0-3 5"``; ``[]`` → ``""``.

    Jobs hold whole nodes' cores, i.e. long runs of consecutive ids: a slice whose ends are as far apart as it is
    long is one run, so the ids are halved until each slice is a run (a few slices per job, not one step per id).
    """
    if len(ids) == 1:
        return str(ids[0])
    ordered = sorted(set(ids))
    runs: list[list[int]] = []
    pending = [(0, len(ordered))] if ordered else []
    while pending:
        lo, hi = pending.pop()
        first, last = ordered[lo], ordered[hi - 1]
        if last - first == hi - 1 - lo:
            if runs and runs[-1][1] + 1 == first:
                runs[-1][1] = last
            else:
                runs.append([first, last])
        else:
            mid = (lo + hi) // 2
            pending.append((mid, hi))
            pending.append((lo, mid))
    return " ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def time_offset(run: RunRecord) -> float:
    """Seconds to add to the run's virtual times (0 is its first submission) to put them on the workload's own
    clock, as ``jobs.csv`` and ``pods.csv`` write them (:attr:`JobRecord.workload_submission_time`); 0 when the
    records do not say."""
    for job in run.jobs:
        if job.workload_submission_time is not None:
            return job.workload_submission_time - job.submission_time
    return 0.0


def job_cells(job: JobRecord, offset: float = 0.0, workload_name: str = "") -> tuple[Cell, ...]:
    """One ``jobs.csv`` row as values in :data:`JOBS_COLUMNS` order (rules in the module docstring); ``offset`` is
    :func:`time_offset` of the run. Times are rounded to the microsecond, as Batsim prints them."""
    rejected = job.final_state is FinalState.REJECTED
    submitted = job.submission_time
    start = None if rejected else job.starting_time
    finish = None if start is None else job.finish_time
    execution = turnaround = stretch = None
    if finish is not None and start is not None:
        execution = round(finish - start, 6)
        turnaround = round(finish - submitted, 6)
        stretch = round(turnaround / execution, 6) if execution else None
    first_bind, last_bind = job.first_bind_time, job.last_bind_time
    allocated = job.allocated_resources
    own = job.workload_submission_time
    return (
        job.job_id,
        job.workload_name or workload_name,
        job.profile,
        round(submitted + offset if own is None else own, 6),
        job.requested_number_of_resources,
        job.requested_time,
        1 if job.final_state is FinalState.COMPLETED_SUCCESSFULLY else 0,
        job.final_state.value,
        None if start is None else round(start + offset, 6),
        execution,
        None if finish is None else round(finish + offset, 6),
        None if start is None else round(start - submitted, 6),
        turnaround,
        stretch,
        (str(allocated[0]) if len(allocated) == 1 else interval_set(allocated)) if allocated else "",
        None if rejected else -1,
        job.reason,
        None if first_bind is None else round(first_bind - submitted, 6),
        None if first_bind is None or last_bind is None else round(last_bind - first_bind, 6),
        turnaround,
        job.priority,
    )


def job_row(job: JobRecord, offset: float = 0.0, workload_name: str = "") -> dict[str, Cell]:
    """One ``jobs.csv`` row keyed by column name (see :func:`job_cells`)."""
    return dict(zip(JOBS_COLUMNS, job_cells(job, offset, workload_name), strict=True))


def jobs_rows(run: RunRecord) -> list[dict[str, Cell]]:
    """``jobs.csv`` rows of a run, in the run's job order, keyed by :data:`JOBS_COLUMNS`."""
    offset = time_offset(run)
    return [job_row(job, offset, run.workload_name) for job in run.jobs]


def _cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return str(value)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


_NEEDS_QUOTES = re.compile('[,"\n\r]')


def _text(value: Cell) -> str:
    if value is None:
        return ""
    text = str(value)
    return _quoted(text) if _NEEDS_QUOTES.search(text) else text


def _seconds(value: Cell) -> str:
    return "" if value is None else f"{value:.6f}"


def _always_quoted(value: Cell) -> str:
    return _quoted("" if value is None else str(value))


_JOB_FORMATS = tuple(
    _seconds if column in _SECONDS_COLUMNS else _always_quoted if column == "metadata" else _text
    for column in JOBS_COLUMNS
)


def batsim_line(cells: Sequence[Cell]) -> str:
    """One ``jobs.csv`` line (no newline) of :func:`job_cells`, formatted as Batsim's ``JobsTracer`` writes it:
    times (:data:`_SECONDS_COLUMNS`) with six decimals, ``metadata`` always in double quotes (``""`` when empty; a
    quote inside is doubled, as CSV wants, where Batsim leaves it single), an empty cell for a missing value, other
    text as it is (quoted only if it holds a comma, quote or newline)."""
    return ",".join([form(value) for form, value in zip(_JOB_FORMATS, cells, strict=True)])


def write_jobs_csv(run: RunRecord, path: Path | str) -> Path:
    """Write ``jobs.csv`` for ``run`` (header + one line per job, each the :func:`batsim_line` of its
    :func:`job_cells`, built a column at a time: :mod:`kubeflux.sim.output.csvcolumns`); returns the path."""
    from kubeflux.sim.output.csvcolumns import jobs_columns, text_column, write_lines

    columns = jobs_columns(run, time_offset(run), interval_set)
    header = JOBS_COLUMNS
    if any(job.priority_class for job in run.jobs):
        header = (*header, PRIORITY_CLASS_COLUMN)
        columns.append(text_column([job.priority_class for job in run.jobs]))
    for level, spans in run.spans.items():
        header = (*header, f"domains[{level}]")
        columns.append(["" if count is None else str(count) for count in spans])
    if run.admission:
        header = (*header, *ADMISSION_COLUMNS)
        columns.extend(admission_columns(run.jobs))
    return write_lines(path, header, columns)


POD_COLUMNS: tuple[str, ...] = (
    "job_id",
    "pod",
    "node",
    "creation_time",
    "bind_time",
    "running_time",
    "compute_time",
    "end_time",
    "idle_time",
    "phase",
    "reason",
    "exit_code",
    "resources",
    "message",
)
"""``pods.csv``'s columns (see :func:`pod_cells`)."""


def _at(value: float | None, offset: float) -> float | None:
    return None if value is None else round(value + offset, 6)


def pod_cells(pod: PodRecord, offset: float = 0.0) -> tuple[Cell, ...]:
    """One ``pods.csv`` row in :data:`POD_COLUMNS` order. Times are on the workload's clock, as in ``jobs.csv``
    (``offset`` is :func:`time_offset` of the run):
    ``running_time`` when the container ran, ``compute_time`` when the pod began computing (a coupled job's compute
    start: the pod held its resources idle from running to compute, ``idle_time`` seconds; a pod that ended before
    its job computed was idle from running to its end); ``reason`` says why it ended; ``resources`` is the ids it
    held (Batsim's interval set, as ``allocated_resources``); ``message`` what its status says (how it ended, or,
    never bound, the scheduler's last ``Unschedulable`` message)."""
    running, compute, end = pod.running_time, pod.compute_time, pod.end_time
    idle: float | None = None
    if running is not None:
        until = compute if compute is not None else end
        idle = None if until is None else round(until - running, 6)
    ids = pod.resources
    return (
        pod.job_id,
        pod.pod,
        pod.node,
        _at(pod.created_time, offset),
        _at(pod.bind_time, offset),
        _at(running, offset),
        _at(compute, offset),
        _at(end, offset),
        idle,
        pod.phase,
        pod.reason,
        pod.exit_code,
        (str(ids[0]) if len(ids) == 1 else interval_set(ids)) if ids else "",
        pod.message,
    )


def write_pods_csv(run: RunRecord, path: Path | str) -> Path:
    """Write ``pods.csv`` for ``run`` (header + one line per pod, the cells of :func:`pod_cells`, built a column at
    a time: :mod:`kubeflux.sim.output.csvcolumns`); returns the path."""
    from kubeflux.sim.output.csvcolumns import pods_columns, write_csv_columns

    return write_csv_columns(path, POD_COLUMNS, pods_columns(run.pods, time_offset(run), interval_set))


def _mean(values: NDArray[np.float64]) -> float:
    """The mean as ``sum(list) / len`` gives it (left to right, to the last bit of earlier releases)."""
    return sum(values.tolist()) / len(values) if len(values) else 0.0


class JobTimes:
    """A run's job times as arrays (NaN where an event never happened) and its final states, for the summary."""

    def __init__(self, jobs: Sequence[JobRecord]) -> None:
        self.states = [job.final_state for job in jobs]
        self.rejected = np.array([state is FinalState.REJECTED for state in self.states], dtype=bool)
        self.unfinished = np.array([state is FinalState.NOT_FINISHED for state in self.states], dtype=bool)
        self.submitted = floats([job.submission_time for job in jobs])
        self.start = floats([job.starting_time for job in jobs])
        self.finish = floats([job.finish_time for job in jobs])
        self.first_bind = floats([job.first_bind_time for job in jobs])
        self.last_bind = floats([job.last_bind_time for job in jobs])
        self.urgent = np.array([job.priority > 0 for job in jobs], dtype=bool)
        """Jobs of a priority above the default's 0 (:func:`summarize`'s urgent jobs)."""


def _used_core_seconds(run: RunRecord, begin: float, end: float) -> float:
    """Core-seconds in use over [begin, end]: the run's utilization series when it has one, else the jobs'
    allocations (cores × (finish − start))."""
    if run.utilization_series:
        return step_area(run.utilization_series, begin, end)
    total = 0.0
    for job in run.jobs:
        if job.final_state is FinalState.REJECTED or job.starting_time is None or job.finish_time is None:
            continue
        cores = len(set(job.allocated_resources)) or job.requested_number_of_resources
        total += cores * max(0.0, job.finish_time - job.starting_time)
    return total


def summarize(run: RunRecord) -> dict[str, str | int | float]:
    """One summary row of a run.

    * ``jobs``, ``rejected``, ``succeeded``, ``failed`` (any other ``COMPLETED_*``), ``not_finished``;
    * ``makespan`` = last finish − first submission (Batsim v5's definition; 0 when nothing finished);
    * how many jobs each mean averages (:data:`MEAN_OVER` names the count of each): ``started_jobs`` (began
      computing), ``finished_jobs`` (ended ``COMPLETED_*``: succeeded + failed), ``slowdown_jobs`` (finished with a
      non-zero execution time), ``bound_jobs`` (had a pod bound);
    * ``mean_waiting_time`` / ``max_waiting_time`` over the started jobs; ``mean_turnaround_time``,
      ``mean_bounded_slowdown`` (max(1, turnaround / max(execution, 10 s))) and ``mean_job_completion_time`` (as
      in ``jobs.csv``) over the finished jobs; ``mean_slowdown`` (Batsim's, unbounded: turnaround / execution)
      over the slowdown jobs; ``mean_scheduling_latency`` and ``mean_bind_span`` (as in ``jobs.csv``) over the
      bound jobs. A mean over no job is 0, with its count 0;
    * ``mean_waiting_time_urgent`` over the ``urgent_started_jobs`` (started jobs of a priority above 0, the
      default: what ``--urgent`` or a PriorityClass gives) and ``mean_waiting_time_others`` over the
      ``other_started_jobs`` (the rest of the started jobs);
    * per PriorityClass name, when a job of the run has one (``jobs.csv``'s ``priority_class``), by name:
      ``mean_waiting_time[<class>]`` over ``started_jobs[<class>]`` (its started jobs), and
      ``mean_waiting_time[]`` over ``started_jobs[]`` for the started jobs no class gave a priority;
    * ``utilization`` = core-seconds allocated (held by bound pods) / (total cores × makespan), over [first
      submission, last finish]; ``useful_utilization`` the same for core-seconds computing (a coupled job's pods
      from its compute start: the idle holding before it is allocated, not useful); for every other resource kind
      of the cluster (GPUs, extended resources, memory) ``utilization[<kind>]`` and ``useful_utilization[<kind>]``,
      e.g. ``utilization[nvidia.com/gpu]``, in the kind's units over its capacity;
    * with topology levels (``jobs.csv``'s ``domains[<level>]`` columns): ``mean_execution_time`` (finish − start)
      over the finished jobs, ``multi_pod_jobs`` (jobs of more than one pod with a pod bound) and, per level,
      ``split[<level>]``: the share of those whose pods were in more than one of its domains;
    * ``preempted_pods``, ``preempted_jobs``, ``work_lost_core_seconds``, ``work_lost_gpu_seconds``
      (:mod:`kubeflux.sim.losses`);
    * ``pods_per_virtual_second`` = pods bound / makespan; ``pods_per_wall_second`` = pods bound / wall seconds
      (the simulator's own speed); ``wall_seconds`` as measured by the driver.
    """
    times = JobTimes(run.jobs)
    origin = float(times.submitted.min()) if times.submitted.size else 0.0  # the first submission
    states = times.states
    with np.errstate(invalid="ignore"):
        started = ~times.rejected & ~np.isnan(times.start)
        finished = started & ~times.unfinished & ~np.isnan(times.finish)
        end, begin, submitted = times.finish[finished], times.start[finished], times.submitted[finished]
        last_finish = float(end.max()) if end.size else origin
        makespan = max(0.0, last_finish - origin)
        waits = (times.start - times.submitted)[started]
        urgent_waits = (times.start - times.submitted)[started & times.urgent]
        other_waits = (times.start - times.submitted)[started & ~times.urgent]
        turnarounds = end - submitted
        executions = end - begin
        slowdowns = turnarounds[executions > 0] / executions[executions > 0]
        bounded = np.maximum(1.0, turnarounds / np.maximum(executions, BOUNDED_SLOWDOWN_TAU))
        latencies = (times.first_bind - times.submitted)[~np.isnan(times.first_bind)]
        spans = (times.last_bind - times.first_bind)[~np.isnan(times.first_bind) & ~np.isnan(times.last_bind)]
    used = _used_core_seconds(run, origin, last_finish)
    capacity = run.total_cores * makespan
    kinds = kind_utilization(run, origin, last_finish)
    useful = kinds.pop("useful_utilization", 0.0)
    return {
        "scheduler": run.scheduler,
        "workload": run.workload_name,
        "jobs": len(run.jobs),
        "rejected": states.count(FinalState.REJECTED),
        "succeeded": states.count(FinalState.COMPLETED_SUCCESSFULLY),
        "failed": len(turnarounds) - states.count(FinalState.COMPLETED_SUCCESSFULLY),
        "not_finished": states.count(FinalState.NOT_FINISHED),
        "started_jobs": len(waits),
        "finished_jobs": len(turnarounds),
        "slowdown_jobs": len(slowdowns),
        "bound_jobs": len(latencies),
        "urgent_started_jobs": len(urgent_waits),
        "other_started_jobs": len(other_waits),
        "makespan": round(makespan, 6),
        "mean_waiting_time": round(_mean(waits), 6),
        "max_waiting_time": round(float(waits.max()) if waits.size else 0.0, 6),
        "mean_waiting_time_urgent": round(_mean(urgent_waits), 6),
        "mean_waiting_time_others": round(_mean(other_waits), 6),
        **_waits_by_class(run.jobs, times.start - times.submitted, started),
        "mean_turnaround_time": round(_mean(turnarounds), 6),
        "mean_slowdown": round(_mean(slowdowns), 6),
        "mean_bounded_slowdown": round(_mean(bounded), 6),
        "mean_scheduling_latency": round(_mean(latencies), 6),
        "mean_bind_span": round(_mean(spans), 6),
        "mean_job_completion_time": round(_mean(turnarounds), 6),
        "utilization": round(used / capacity, 6) if capacity > 0 else 0.0,
        "useful_utilization": useful,
        **kinds,
        **preemption_losses(run),
        **(_topology_figures(run, executions) if run.spans else {}),
        "pods_bound": run.pods_bound,
        "pods_per_virtual_second": round(run.pods_bound / makespan, 6) if makespan > 0 else 0.0,
        "pods_per_wall_second": round(run.pods_bound / run.wall_seconds, 3) if run.wall_seconds > 0 else 0.0,
        "wall_seconds": round(run.wall_seconds, 6),
        **run.admission,
    }


def _topology_figures(run: RunRecord, executions: NDArray[np.float64]) -> dict[str, int | float]:
    """``mean_execution_time`` over the finished jobs, ``multi_pod_jobs`` (bound jobs of more than one pod) and, per
    topology level, ``split[<level>]``: the share of those whose pods were in more than one domain of it (see
    :func:`summarize`)."""
    figures: dict[str, int | float] = {"mean_execution_time": round(_mean(executions), 6)}
    multi = [i for i, job in enumerate(run.jobs) if job.pods > 1]
    for level, spans in run.spans.items():
        counted = [spans[i] for i in multi if spans[i] is not None]
        figures.setdefault("multi_pod_jobs", len(counted))
        split = sum(1 for count in counted if count is not None and count > 1)
        figures[f"split[{level}]"] = round(split / len(counted), 6) if counted else 0.0
    return figures


def _waits_by_class(
    jobs: Sequence[JobRecord], waits: NDArray[np.float64], started: NDArray[np.bool_]
) -> dict[str, int | float]:
    """``started_jobs[<class>]`` and ``mean_waiting_time[<class>]`` per PriorityClass name (``[]``: the jobs of
    none), in name order; empty when no job has a class (see :func:`summarize`)."""
    names = [job.priority_class for job in jobs]
    if not any(names):
        return {}
    figures: dict[str, int | float] = {}
    for name in sorted(set(names)):
        mine = waits[started & np.array([n == name for n in names], dtype=bool)]
        figures[f"started_jobs[{name}]"] = len(mine)
        figures[f"mean_waiting_time[{name}]"] = round(_mean(mine), 6)
    return figures


def kind_utilization(run: RunRecord, begin: float, end: float) -> dict[str, float]:
    """``useful_utilization`` (cores: allocated minus held idle) and, per other kind with ids or asked for by a pod,
    ``utilization[<kind>]`` and ``useful_utilization[<kind>]`` over [begin, end] (empty when ``end`` is not after
    ``begin``)."""
    figures: dict[str, float] = {}
    span = end - begin
    if span <= 0:
        return figures
    cores = run.total_cores * span
    if cores > 0:
        useful = _used_core_seconds(run, begin, end) - step_area(run.idle_series, begin, end)
        figures["useful_utilization"] = round(useful / cores, 6)
    for kind in run.resources:
        name, capacity = kind.name, kind.capacity
        series = run.usage_series.get(name)
        if name == "cpu" or capacity <= 0 or (series is None and not kind.count):  # memory no pod asked for
            continue
        points = series or []
        allocated = step_area([(t, a) for t, a, _ in points], begin, end) / (capacity * span)
        busy = step_area([(t, u) for t, _, u in points], begin, end) / (capacity * span)
        figures[f"utilization[{name}]"] = round(allocated, 6)
        figures[f"useful_utilization[{name}]"] = round(busy, 6)
    return figures


def write_summary_csv(rows: Sequence[dict[str, str | int | float]], path: Path | str) -> Path:
    """Write summary rows (from :func:`summarize`) as CSV; columns are the union of the rows' keys, in order."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: _cell(value) for key, value in row.items()})
    return path


def write_summary_json(rows: Sequence[dict[str, str | int | float]], path: Path | str) -> Path:
    """Write summary rows as a JSON list (non-finite numbers as null); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()} for row in rows
    ]
    path.write_text(json.dumps(clean, indent=2) + "\n", encoding="utf-8")
    return path


__all__ = [
    "BATSIM_COLUMNS",
    "BOUNDED_SLOWDOWN_TAU",
    "JOBS_COLUMNS",
    "KUBERNETES_COLUMNS",
    "MEAN_OVER",
    "POD_COLUMNS",
    "PRIORITY_CLASS_COLUMN",
    "batsim_line",
    "interval_set",
    "job_cells",
    "job_row",
    "jobs_rows",
    "kind_utilization",
    "pod_cells",
    "summarize",
    "time_offset",
    "write_jobs_csv",
    "write_pods_csv",
    "write_summary_csv",
    "write_summary_json",
]
