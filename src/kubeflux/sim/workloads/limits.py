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

from kubeflux.scheduler.units import ECHO_LIMIT, echo
from kubeflux.scheduler.validation import MAX_SECONDS
from kubeflux.sim.workloads.model import JobKind, Workload

BYTES_PER_POD = 2_048
"""A pod as the run holds it, its records included (measured: 1.15 KB per pod of a 50,000-completion Job)."""
BYTES_PER_JOB = 3_072
"""A job's own records beside its pods (its workload entry, its state, its jobs.csv row)."""
BYTES_PER_NODE = 4_096
"""A node beside its cores (measured: 1.1 KB per node under fcfs)."""
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


def estimate_bytes(workload: Workload, nodes: int, cores_per_node: int, total_cores: int, runs: int = 1) -> int:
    """The memory ``runs`` runs of ``workload`` (one per scheduler, one after the other) on ``nodes`` nodes (the
    largest with ``cores_per_node`` cores, ``total_cores`` in all) are expected to hold at their peak: the last run
    while the records of the ones before it are kept for the outputs."""
    pods = pod_count(workload, cores_per_node, total_cores)
    jobs = len(workload.jobs)
    one_run = (
        PROCESS_BYTES
        + jobs * BYTES_PER_JOB
        + pods * BYTES_PER_POD
        + nodes * BYTES_PER_NODE
        + total_cores * BYTES_PER_CORE
    )
    return one_run + (runs - 1) * (jobs * KEPT_BYTES_PER_JOB + pods * KEPT_BYTES_PER_POD)


def size_words(amount: float) -> str:
    """``12.3 GiB``, ``512 MiB``."""
    return f"{amount / 2**30:,.1f} GiB" if amount >= 2**30 else f"{amount / 2**20:,.0f} MiB"


def budget_problem(what: str, estimate: int, budget: int) -> str | None:
    """The refusal when ``estimate`` bytes exceed ``budget``, naming ``what`` needs them, or None."""
    if estimate <= budget:
        return None
    need, have = size_words(estimate), size_words(budget)
    if need == have:  # close: in MiB, or bytes, so that the two read apart
        need, have = f"{estimate / 2**20:,.0f} MiB", f"{budget / 2**20:,.0f} MiB"
        if need == have:
            need, have = f"{estimate:,} bytes", f"{budget:,} bytes"
    return (
        f"{what} would need about {need} of memory, more than the budget of {have}; "
        "make it smaller, or raise --memory-budget"
    )


__all__ = [
    "BYTES_PER_CORE",
    "BYTES_PER_JOB",
    "BYTES_PER_NODE",
    "BYTES_PER_POD",
    "DEFAULT_MEMORY_BUDGET",
    "ECHO_LIMIT",
    "KEPT_BYTES_PER_JOB",
    "KEPT_BYTES_PER_POD",
    "MAX_SECONDS",
    "PROCESS_BYTES",
    "budget_problem",
    "cluster_bytes",
    "echo",
    "estimate_bytes",
    "parse_number",
    "pod_count",
    "seconds_problem",
    "size_words",
]
