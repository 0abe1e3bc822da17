"""The outcome of a simulated run, as the metrics and reports consume it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class FinalState(StrEnum):
    """Batsim's final states, as written in ``jobs.csv``."""

    COMPLETED_SUCCESSFULLY = "COMPLETED_SUCCESSFULLY"
    COMPLETED_FAILED = "COMPLETED_FAILED"
    COMPLETED_WALLTIME_REACHED = "COMPLETED_WALLTIME_REACHED"
    COMPLETED_KILLED = "COMPLETED_KILLED"
    REJECTED = "REJECTED"
    NOT_FINISHED = "NOT_FINISHED"
    """Still pending or running when the run ended (e.g. a pod that can never be placed)."""


@dataclass(slots=True)
class JobRecord:
    """One job's life. Times are seconds of virtual time; None where the event never happened."""

    job_id: str
    workload_name: str
    submission_time: float
    requested_number_of_resources: int
    requested_time: float
    final_state: FinalState
    starting_time: float | None = None
    """When the job started running: its last gang member (or first pod otherwise) Running."""
    finish_time: float | None = None
    first_bind_time: float | None = None
    """When the scheduler bound the first pod (scheduling latency = this − submission)."""
    last_bind_time: float | None = None
    allocated_resources: list[int] = field(default_factory=list)
    """Resource ids (core indices across the cluster) the job ran on, for Batsim's interval set."""
    pods: int = 0
    attempts: int = 1
    """Pod attempts including retries (Kubernetes Job back-off)."""


@dataclass(slots=True)
class RunRecord:
    """A whole run of one scheduler over one workload."""

    scheduler: str
    workload_name: str
    jobs: list[JobRecord]
    total_cores: int
    """The cluster's total cores (utilization's denominator)."""
    wall_seconds: float
    pods_bound: int
    events: int
    utilization_series: list[tuple[float, int]] = field(default_factory=list)
    """(time, cores in use) at each change."""
    queue_series: list[tuple[float, int]] = field(default_factory=list)
    """(time, pending jobs) at each change."""
    problems: list[str] = field(default_factory=list)
    """What went wrong without stopping the run (bad workload lines, refused decisions, orphaned pods)."""
