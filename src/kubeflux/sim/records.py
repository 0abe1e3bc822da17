"""The outcome of a simulated run, as the metrics and reports consume it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeflux.sim.kinds import FinalState as FinalState  # defined in a compiled module: see there
from kubeflux.sim.resourceids import ResourceKind, Series


@dataclass(slots=True)
class JobRecord:
    """One job's life. Times are seconds of virtual time; None where the event never happened."""

    job_id: str
    workload_name: str
    submission_time: float
    requested_number_of_resources: int
    """Resource ids the job asks for: its pods' whole cores, GPUs and units of other extended resources (at least
    one per pod), times ``parallelism`` for a ``batch/v1`` Job; a trace job's processors as the trace gives them."""
    requested_time: float
    final_state: FinalState
    starting_time: float | None = None
    """When the job began computing: a coupled job's last required pod Running (its pods that ran before held
    their resources idle), any other job's first pod Running. A coupled job that never computed (a pod failed
    before the others ran) has its first pod's Running here."""
    finish_time: float | None = None
    first_bind_time: float | None = None
    """When the scheduler bound the first pod (scheduling latency = this − submission)."""
    last_bind_time: float | None = None
    allocated_resources: list[int] = field(default_factory=list)
    """Resource ids the job's pods held, for Batsim's interval set: cores, then GPUs, then other extended resources
    (:attr:`RunRecord.resources` gives the layout; :mod:`kubeflux.sim.resourceids`)."""
    pods: int = 0
    attempts: int = 1
    """Attempts including retries: a Kubernetes Job's pods replaced after a failure (back-off), a trace job's
    requeues after a preemption (each resubmits it whole)."""
    reason: str = ""
    """Why it was rejected, did not succeed or did not finish (``jobs.csv``'s ``metadata``); empty otherwise."""
    profile: str = ""
    """Batsim's profile name, ``jobs.csv``'s ``profile`` (rules: ``WorkloadJob.profile_name`` in
    :mod:`kubeflux.sim.workloads.model`)."""
    workload_submission_time: float | None = None
    """The submission time as the workload gives it (an SWF's field 2, a Batsim workload's ``subtime``, a manifest's
    ``sim.kubeflux.io/submit-time``, a synthetic job's arrival). The simulator's virtual time starts at the first
    submission (:attr:`submission_time` counts from there); ``jobs.csv`` and ``pods.csv`` put every time back on the
    workload's clock, as Batsim does. None: the same as :attr:`submission_time`."""
    priority: int = 0
    """Its pods' priority (``spec.priority``; the highest when they differ): ``jobs.csv``'s ``priority``."""
    priority_class: str = ""
    """The PriorityClass that gave it (its highest pod's ``spec.priorityClassName``; empty when none did):
    ``jobs.csv``'s ``priority_class``."""
    cluster_queue: str = ""
    """The Kueue ClusterQueue that admits it (``(<LocalQueue>)`` when it names one that leads to none); empty for
    a job Kueue does not hold: ``jobs.csv``'s ``cluster_queue``."""
    admission_time: float | None = None
    """When Kueue first admitted it (``admission_wait`` = this − submission)."""
    quota_evictions: int = 0
    """How many times Kueue evicted it to reclaim quota."""


@dataclass(slots=True)
class PodRecord:
    """One pod's life, for ``pods.csv``. Times are seconds of virtual time; None where the event never happened."""

    job_id: str
    pod: str
    """``namespace/name``."""
    node: str
    created_time: float
    bind_time: float | None
    running_time: float | None
    compute_time: float | None
    """When it began computing: its Running, or its coupled job's compute start if it ran before (idle holding
    from running to compute)."""
    end_time: float | None
    phase: str
    reason: str
    """Why it ended: ``Completed``, ``Error`` (its exit code), ``DeadlineExceeded``, ``NodeLost``, ``Deleted``,
    ``PeerFailed`` (a coupled job's other pod failed), ``OutOf<resource>`` …; empty while it runs or waits."""
    exit_code: int | None
    resources: list[int] = field(default_factory=list)
    """Resource ids it held, in the run's layout (as ``allocated_resources``)."""
    message: str = ""
    """What its status says: how it ended (``Node n1 was deleted``, the failed peer), or, never bound, the
    scheduler's last ``Unschedulable`` message."""


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
    pods: list[PodRecord] = field(default_factory=list)
    """Every pod the run created, per job in submission order (``pods.csv``); empty when not recorded."""
    resources: list[ResourceKind] = field(default_factory=list)
    """The resource kinds and their id layout (cores, GPUs, extended kinds; amounts such as memory have no ids).
    Empty: cores only, ``total_cores`` of them."""
    idle_series: list[tuple[float, int]] = field(default_factory=list)
    """(time, cores held idle) at each change: allocated (in :attr:`utilization_series`) but not computing, i.e.
    between a pod's bind and its Running, or while a coupled job waits for its last pod. Useful = allocated − idle."""
    usage_series: dict[str, Series] = field(default_factory=dict)
    """Per resource kind other than cores, (time, allocated, useful) at each change, in the kind's units."""
    stopped: str = ""
    """Why the run stopped before its work was done (a deadlock, the idle wake-up guard); empty otherwise."""
    spans: dict[str, list[int | None]] = field(default_factory=dict)
    """Per topology level some node carries (by its type, ``rack``), the domains each job (in :attr:`jobs`' order)
    spanned, None for a job never bound (``jobs.csv``'s ``domains[<level>]``; :mod:`kubeflux.sim.fabric`)."""
    admission: dict[str, int | float] = field(default_factory=dict)
    """The admission layer's summary figures (:func:`kubeflux.sim.kueue.figures.kueue_figures`); empty in a run
    without Kueue objects."""
