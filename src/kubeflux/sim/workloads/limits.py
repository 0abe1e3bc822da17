"""The bounds every simulator input is held to, and the memory a run would need, estimated before it allocates.

Times: every time or duration a workload states (SWF submit, run and requested times; Batsim ``subtime``,
``walltime`` and profile delays; manifest submit-time and run-time annotations) must be a finite number of at most
:data:`MAX_SECONDS` (100 years: the Parallel Workloads Archive's longest log spans 11 years; the core's
:data:`kubeflux.scheduler.validation.MAX_SECONDS`, which holds pods' run-time annotations to it too). Beyond it a
float no longer tells a second from the next one at the scale of the run (``1e23 + 10 == 1e23``), so a job
submitted then would never be seen to end.

Counts: a ``batch/v1`` Job's are held to what the API server accepts (:mod:`kubeflux.apiobjects.batchjob`, the
one validation ``simulate`` and ``cluster serve`` share); what a valid Job may still cost is the memory budget's.

Memory: :func:`estimate_bytes` is what the runs of a workload on a cluster (one per scheduler) will hold at their
peak, from figures measured on this simulator (:data:`PROCESS_BYTES`, :data:`BYTES_PER_POD`, :data:`BYTES_PER_JOB`,
:data:`BYTES_PER_NODE`, :data:`BYTES_PER_CORE`, and for each run before the last :data:`KEPT_BYTES_PER_POD` and
:data:`KEPT_BYTES_PER_JOB`); :func:`budget_problem` refuses a run whose estimate exceeds the budget
(``simulate --memory-budget``, :data:`DEFAULT_MEMORY_BUDGET` by default) before anything is allocated, so that
``completions: 1000000000`` or ``--nodes 1000000000`` is a message with the estimate, not 10 GB of swap.

A bad value is repeated in a message as :func:`~kubeflux.scheduler.units.echo` cuts it (re-exported here).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from kubeflux.scheduler.units import ECHO_LIMIT, echo
from kubeflux.scheduler.validation import MAX_SECONDS
from kubeflux.sim.workloads.model import JobKind, Workload

BYTES_PER_POD = 2_048
"""A pod as the run holds it, its records included (measured: 1.15 KB per pod of a 50,000-completion Job)."""
BYTES_PER_JOB = 4_608
"""A job's own records beside its pods (its workload entry, its state, its jobs.csv row): with its pod, a trace job
of LCG took 6.4 KB under fcfs (peak RSS 717 MiB for its first 100,000 jobs, 1,252 MiB for all 188,041, compiled;
5.9 KB in pure Python)."""
BYTES_PER_NODE = 4_096
"""A node beside kubeflux's graph of it (measured: 1.1 KB per node under fcfs)."""
BYTES_PER_CORE = 1_536
"""A core of kubeflux's graph: a vertex with its planner (measured: 1.25 KB per core on 20,000 nodes x 32)."""
PROCESS_BYTES = 96 * 2**20
"""The command itself before any run: the interpreter with kubeflux, NumPy and matplotlib loaded (measured 76 MiB
resident), and the plots' canvases."""
KEPT_BYTES_PER_POD = 1_536
"""A pod's records once its run is over, kept until the outputs are written: measured 1.28 KB per pod (peak RSS of
``simulate --scheduler all`` minus ``--scheduler fcfs``, over 7 more runs, on a Job of 100,000 completions)."""
KEPT_BYTES_PER_JOB = 4_608
"""A job's records once its run is over (measured 4.3 KB per job beside its pods' on ``--synthetic jobs=20000``:
1,106 MiB under all 8 schedulers, 254 MiB under fcfs)."""
SERVED_NODE_BYTES = 8_192
"""A node of ``cluster serve`` beside any scheduler's graph: its Node object in the store, its simulated kubelet's
and cluster's state (measured 5.6 KB per node: peak RSS of ``cluster serve --nodes 8000`` minus ``--nodes 2000``,
32 cores each, 114 and 81 MiB, pure Python)."""
GRAPH_NODE_BYTES = 8_192
"""A node's own vertices in kubeflux's graph, beside its cores' :data:`BYTES_PER_CORE` (measured 6.6 KB per node
and 1.1 KB per core under ``cluster serve -s kubeflux``: 8,000 nodes of 1 and of 32 cores, 175 and 437 MiB peak,
against 2,000 nodes, 97 and 162 MiB; a second ``-s kubeflux-fcfs`` adds 40.6 KB per node of 32 cores; and 7.5 KB
per one-core node under ``simulate -s kubeflux`` on LCG's 24,515: 388 MiB against 208 MiB under fcfs). Each
kubeflux run's graph counts at the peak of ``simulate --scheduler all``: its three kubeflux runs on LCG's nodes
took 1,251 MiB for 12,500 jobs, 1,674 MiB for 25,000, some 600 MiB beyond the kept records."""
STORED_OBJECT_BYTES = 8_192
"""An object the API server of ``cluster serve`` stores, with the Event beside it: a Job's pod and its
``SuccessfulCreate`` Event took 7.9 KB (80,000 of each created in a store: 625 MiB peak RSS, pure Python); what
the store may hold (``--max-objects``) is counted at this much each."""
DEFAULT_MEMORY_BUDGET = 8 * 2**30
"""8 GiB: what ``simulate`` lets a run take unless ``--memory-budget`` says otherwise."""


_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.I).fullmatch


def parse_number(text: str) -> float:
    """A number written in ASCII, as C's ``strtod`` (SWF tools) and Go's ``ParseFloat`` read it; ValueError for
    anything else. Python's ``float`` would also take ``1_000``, other scripts' digits (``١٢``) and surrounding
    blanks. ``nan`` and ``inf`` are read, for the caller to refuse by name."""
    if _NUMBER(text) is None:
        raise ValueError(f"not a number: {echo(text)}")
    return float(text)


def seconds_problem(value: float, *, unknown: float | None = None) -> str | None:
    """Why ``value`` is no usable time or duration (not finite, negative, beyond :data:`MAX_SECONDS`), or None.

    ``unknown``: a value that means "not known" and is allowed (SWF's ``-1``)."""
    if unknown is not None and value == unknown:
        return None
    if not math.isfinite(value):
        return f"must be a finite number of seconds, got {value!r}"
    if value < 0:
        return f"must not be negative, got {value:g}"
    if value > MAX_SECONDS:
        return f"must be at most {MAX_SECONDS:,} s (100 years), got {value:g}"
    return None


MAX_START_DELAY = 365 * 86_400
"""The longest start delay and jitter (``--start-delay``/``--start-jitter`` of ``simulate`` and ``cluster serve``, a
sweep grid's ``startDelay``/``startJitter``): a year of seconds. A pod that takes longer to start is no experiment
anyone runs, and a delay far beyond it pushes a pod's start and end past the scheduler's horizon (100 years:
:data:`~kubeflux.match.engine.DEFAULT_HORIZON`), where the planner's integer times are refused."""


def start_delay_problem(seconds: float) -> str | None:
    """Why ``seconds`` is no start delay or jitter (not finite, negative, beyond :data:`MAX_START_DELAY`), or None;
    said after the option's name (``--start-delay must be …``)."""
    if math.isfinite(seconds) and seconds > MAX_START_DELAY:
        return f"must be at most {MAX_START_DELAY:,} s (a year), got {seconds:g}"
    return seconds_problem(seconds)


def start_delays_problem(start_delay: float, start_jitter: float) -> str | None:
    """The first of ``--start-delay`` and ``--start-jitter`` that is no start delay, named with its problem
    (:func:`start_delay_problem`), or None."""
    for flag, seconds in (("--start-delay", start_delay), ("--start-jitter", start_jitter)):
        if (problem := start_delay_problem(seconds)) is not None:
            return f"{flag} {problem}"
    return None


def pod_count(workload: Workload, cores_per_node: int, total_cores: int) -> int:
    """How many pods the workload creates in a run, at least: a trace job of P processors makes ``ceil(P / C)``
    pods on nodes of C cores (none when it is larger than the cluster); a Job makes ``completions``; the other
    kinds their pods."""
    count = 0
    for job in workload.jobs:
        if job.kind is JobKind.TRACE:
            processors = job.requested_processors
            if not job.rejected and 0 < processors <= total_cores and cores_per_node > 0:
                count += -(-processors // cores_per_node)
        elif job.kind is JobKind.JOB:
            count += job.completions
        else:
            count += len(job.pods)
    return count


def cluster_bytes(nodes: int, cores_per_node: int) -> int:
    """The memory ``nodes`` nodes of ``cores_per_node`` cores take (their graph included)."""
    return nodes * (BYTES_PER_NODE + cores_per_node * BYTES_PER_CORE)


def serve_bytes(nodes: int, total_cores: int, schedulers: int, objects: int = 0) -> int:
    """The memory ``cluster serve`` may take serving ``nodes`` nodes of ``total_cores`` cores in all with
    ``schedulers`` schedulers in its process, each counted with a graph of its own (an upper bound: only kubeflux's
    have one), and a store of at most ``objects`` objects (:data:`STORED_OBJECT_BYTES` each): the nodes alone
    measured 437 MiB on 8,000 nodes of 32 cores under ``-s kubeflux``, estimated 625 MiB."""
    graph = nodes * GRAPH_NODE_BYTES + total_cores * BYTES_PER_CORE
    return PROCESS_BYTES + nodes * SERVED_NODE_BYTES + schedulers * graph + objects * STORED_OBJECT_BYTES


def estimate_bytes(
    workload: Workload, nodes: int, cores_per_node: int, total_cores: int, runs: int = 1, graphs: int = 1
) -> int:
    """The memory ``runs`` runs of ``workload`` (one per scheduler, one after the other) on ``nodes`` nodes (the
    largest with ``cores_per_node`` cores, ``total_cores`` in all) may hold at their peak, ``graphs`` of them
    with kubeflux's graph of the nodes: the last run while the records of the ones before it are kept for the
    outputs, and the graphs of every kubeflux run.

    An upper bound of what was measured (peak RSS, ``/usr/bin/time -v``, LCG on its 24,515 one-core nodes):
    fcfs 1,252 MiB for 188,041 jobs (estimated 1,385), kubeflux 388 MiB for 12,500 (estimated 499), all 8
    schedulers 1,251 MiB for 12,500 and 1,674 MiB for 25,000 (estimated 1,466 and 2,058)."""
    pods = pod_count(workload, cores_per_node, total_cores)
    jobs = len(workload.jobs)
    one_run = PROCESS_BYTES + jobs * BYTES_PER_JOB + pods * BYTES_PER_POD + nodes * BYTES_PER_NODE
    graph = nodes * GRAPH_NODE_BYTES + total_cores * BYTES_PER_CORE
    kept = jobs * KEPT_BYTES_PER_JOB + pods * KEPT_BYTES_PER_POD
    return one_run + graphs * graph + (runs - 1) * kept


def size_words(amount: float) -> str:
    """``12.3 GiB``, ``512 MiB``."""
    return f"{amount / 2**30:,.1f} GiB" if amount >= 2**30 else f"{amount / 2**20:,.0f} MiB"


def jobs_within(budget: int, runs: int) -> int:
    """The most jobs a workload may have for ``runs`` runs of it to fit in ``budget`` bytes, by the jobs alone
    (:data:`PROCESS_BYTES` and each job's records in the last run and the ones kept of the runs before it; pods and
    nodes not counted): a lower bound of :func:`estimate_bytes`, so that a reader may stop at this count, before
    the file is all read, without refusing a workload that would fit."""
    return max(0, (budget - PROCESS_BYTES) // job_bytes(runs))


def job_bytes(runs: int) -> int:
    """What one job costs ``runs`` runs at least (its pods not counted): see :func:`jobs_within`."""
    return BYTES_PER_JOB + (runs - 1) * KEPT_BYTES_PER_JOB


@dataclass(frozen=True, slots=True)
class ReadBudget:
    """The memory budget a workload reader holds its file to while it streams it: ``budget`` bytes for ``runs``
    runs (one per scheduler), ``read`` jobs already read from the files before this one. The reader stops at the
    first job beyond :attr:`max_jobs` and raises its :meth:`refusal`: the jobs read so far alone would need more
    than the budget (:func:`jobs_within`), so the rest of the file is never read."""

    budget: int
    runs: int = 1
    read: int = 0

    @property
    def max_jobs(self) -> int:
        """The most jobs this file may add."""
        return max(0, jobs_within(self.budget, self.runs) - self.read)

    def after(self, jobs: int) -> ReadBudget:
        """The budget of the next file, once this one gave ``jobs`` jobs."""
        return ReadBudget(self.budget, self.runs, self.read + jobs)

    def refusal(self, path: Path, jobs: int, where: str) -> str:
        """The message when ``path`` had more than :attr:`max_jobs` jobs: reading stopped at ``where`` (a line)."""
        before = f" (beside {self.read:,} in the files before it)" if self.read else ""
        return (
            f"{path}: reading stopped at {where}, after {jobs:,} jobs{before}: under {self.runs} scheduler(s), more "
            f"than {self.read + self.max_jobs:,} jobs need more than the memory budget of {size_words(self.budget)} "
            f"(at least {job_bytes(self.runs):,} bytes a job, beside {size_words(PROCESS_BYTES)} for the command); "
            "make the workload smaller, or raise --memory-budget"
        )


def budget_problem(what: str, estimate: int, budget: int, *, at_least: bool = False) -> str | None:
    """The refusal when ``estimate`` bytes exceed ``budget``, naming ``what`` needs them, or None; ``at_least``:
    the estimate is a lower bound (a reader stopped before the end of its file)."""
    if estimate <= budget:
        return None
    need, have = size_words(estimate), size_words(budget)
    if need == have:  # close: in MiB, or bytes, so that the two read apart
        need, have = f"{estimate / 2**20:,.0f} MiB", f"{budget / 2**20:,.0f} MiB"
        if need == have:
            need, have = f"{estimate:,} bytes", f"{budget:,} bytes"
    return (
        f"{what} would need {'at least' if at_least else 'about'} {need} of memory, more than the budget of {have}; "
        "make it smaller, or raise --memory-budget"
    )


__all__ = [
    "BYTES_PER_CORE",
    "BYTES_PER_JOB",
    "BYTES_PER_NODE",
    "BYTES_PER_POD",
    "DEFAULT_MEMORY_BUDGET",
    "ECHO_LIMIT",
    "GRAPH_NODE_BYTES",
    "KEPT_BYTES_PER_JOB",
    "KEPT_BYTES_PER_POD",
    "MAX_SECONDS",
    "MAX_START_DELAY",
    "PROCESS_BYTES",
    "SERVED_NODE_BYTES",
    "STORED_OBJECT_BYTES",
    "ReadBudget",
    "budget_problem",
    "cluster_bytes",
    "echo",
    "estimate_bytes",
    "job_bytes",
    "jobs_within",
    "parse_number",
    "pod_count",
    "seconds_problem",
    "serve_bytes",
    "size_words",
    "start_delay_problem",
    "start_delays_problem",
]
