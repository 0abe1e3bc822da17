"""What a workload is, once read: jobs that arrive at given times and the pods they submit.

Every reader (SWF, Batsim JSON, Kubernetes manifests, the synthetic generator) produces a :class:`Workload`;
:func:`kubeflux.sim.workloads.mapping.map_to_cluster` then fits trace jobs to a concrete cluster (how many pods
of how many cores) and marks the jobs that can never run. The simulator only ever sees this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from kubeflux.apiobjects.podfailure import PodFailurePolicy
from kubeflux.apiobjects.priority import PriorityClass
from kubeflux.scheduler.objects import (
    PREEMPT_LOWER_PRIORITY,
    DisruptionBudget,
    NodeSelectorTerm,
    PodTerms,
    ResourceClaimRef,
    ResourceList,
    Toleration,
    VolumeClaim,
)
from kubeflux.scheduler.storage import StorageObject
from kubeflux.sim.claims import DeviceObjects
from kubeflux.sim.kinds import JobKind as JobKind  # defined in a compiled module: see there
from kubeflux.sim.kueue.objects import KueueObjects

SUBMIT_TIME_ANNOTATION: Final = "sim.kubeflux.io/submit-time"
"""When a manifest's object arrives, in seconds from when its file is applied (:mod:`.manifests`)."""


@dataclass(slots=True)
class PodTemplate:
    """One pod as submitted, and how it behaves once it runs (the simulator's stand-in for a kubelet)."""

    name: str
    requests: ResourceList
    run_time: float | None
    """Seconds from Running to completion; None runs until deleted or killed by a deadline."""
    exit_code: int = 0
    """Non-zero: the pod ends Failed (the seed's segfault pods use 139)."""
    scheduler_name: str = ""
    """Empty means the scheduler under test; anything else (``default-scheduler``) is another scheduler."""
    priority: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()
    active_deadline_seconds: float | None = None
    manifest: dict[str, Any] | None = None
    """The Kubernetes Pod (or Job pod template) it came from, when it came from YAML."""
    run_time_jitter: float | None = None
    """KWOK's ``jitter-delay``: when set (and above :attr:`run_time`), the run time is drawn uniformly from
    ``[run_time, run_time_jitter]`` by the simulator (KWOK: delay + random(jitter − delay))."""
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    """``spec.preemptionPolicy`` as the Priority admission set it from the pod's PriorityClass (``Never``: the pod
    waits rather than evict anything)."""
    priority_class: str = ""
    """``spec.priorityClassName`` as the Priority admission left it (the class named, or the ``globalDefault``
    one); empty when none is (a trace's pods, ``--urgent``'s)."""
    terms: PodTerms | None = None
    """What the pod asks of the pods around it (host ports, inter-pod affinity, topology spread), read from its
    manifest."""
    volume_claims: tuple[VolumeClaim, ...] = ()
    """The PersistentVolumeClaims of its volumes, read from its manifest."""
    resource_claims: tuple[ResourceClaimRef, ...] = ()
    """Its ``spec.resourceClaims`` (Dynamic Resource Allocation): the claims each of its pods uses, those made from a
    template made anew for each pod (:mod:`kubeflux.sim.claims`)."""


@dataclass(frozen=True, slots=True)
class WrapperRef:
    """The AppWrapper (``workload.codeflare.dev/v1beta2``) a job is a component of: Kueue admits its components as one
    workload (:mod:`kubeflux.sim.workloads.appwrappers`)."""

    key: str
    """``namespace/name`` of the AppWrapper."""
    index: int
    """The component's place in ``spec.components``."""
    size: int
    """How many components it has."""


@dataclass(slots=True)
class WorkloadJob:
    """A unit of work as the metrics count it: one row of ``jobs.csv``."""

    id: str
    submit_time: float
    """Seconds from the workload's start (the first submission is not shifted to 0 by readers)."""
    kind: JobKind
    name: str
    namespace: str = "default"
    pods: list[PodTemplate] = field(default_factory=list)
    """The pods it submits. For a Kubernetes Job, the one pod template (``completions`` say how many run)."""
    min_member: int = 0
    """A gang: at least this many pods must be placed together (0: no gang)."""
    schedule_timeout_seconds: float | None = None
    completions: int = 1
    parallelism: int = 1
    indexed: bool = False
    """``completionMode: Indexed``: each of ``completions`` indexes must succeed once; its pods carry their index."""
    backoff_limit: int = 6
    requested_processors: int = 0
    """Batsim's ``requested_number_of_resources``: processors (trace) or cores asked in all."""
    requested_time: float = -1.0
    """The user's walltime estimate in seconds, -1 when unknown (backfilling then uses the run time)."""
    run_time: float | None = None
    """The trace's run time (seconds) for trace jobs; pod run times are in :attr:`pods`."""
    rejected: str = ""
    """Why the job can never run (unknown run time, larger than the cluster …); empty when it can."""
    source: str = ""
    """Where it came from, e.g. ``HPC2N.swf:42``, for messages."""
    exit_code: int = 0
    """Trace jobs: the exit code every pod of the job ends with once its run time is over (non-zero: the job
    ends ``COMPLETED_FAILED``). Kubernetes kinds carry theirs per pod (:attr:`PodTemplate.exit_code`)."""
    active_deadline_seconds: float | None = None
    """A ``batch/v1`` Job's ``spec.activeDeadlineSeconds``: seconds from the Job's start after which its running
    pods are killed and the Job fails (reason ``DeadlineExceeded``)."""
    pod_failure_policy: PodFailurePolicy | None = None
    """A ``batch/v1`` Job's ``spec.podFailurePolicy`` (what its controller makes of a failed pod), None without."""
    queue_name: str = ""
    """The Kueue LocalQueue it names (label ``kueue.x-k8s.io/queue-name``): held until Kueue admits it
    (:mod:`kubeflux.sim.kueue`); empty: it goes to the schedulers at once."""
    app_wrapper: WrapperRef | None = None
    """The AppWrapper it is a component of, if any: it arrives, is admitted, evicted and done with the others."""
    user: str = ""
    """The trace's user (SWF field 12, the user id; empty when the trace does not say): what
    :func:`~kubeflux.sim.workloads.tenants.queues_by_user` maps to a Kueue LocalQueue."""
    profile: str = ""
    """Batsim's profile name (``jobs.csv``'s ``profile``): a Batsim workload's ``profile``, a manifest's container
    images; empty: named after its run time, as Batsim's SWF converters name it (:meth:`profile_name`)."""

    def profile_name(self) -> str:
        """``jobs.csv``'s ``profile``: :attr:`profile` when the workload named one, else what Batsim's SWF-to-JSON
        converters (``swf_to_batsim_workload_delay.py``, ``…_compute_only.py``) name the job's profile: its run
        time in whole seconds plus one (``int((run_time // grain + 1) * grain)`` with their default grain of 1 s),
        so a 100 s job has profile ``"101"``; empty when the run time is unknown."""
        if self.profile:
            return self.profile
        run_time = self.run_time if self.kind is JobKind.TRACE else self.pods[0].run_time if self.pods else None
        if run_time is None or run_time < 0:
            return ""
        name = _PROFILE_NAMES.get(run_time)
        if name is None:
            if len(_PROFILE_NAMES) >= _PROFILE_NAMES_KEPT:
                _PROFILE_NAMES.clear()
            name = _PROFILE_NAMES[run_time] = str(int(run_time // 1 + 1))
        return name


_PROFILE_NAMES: dict[float, str] = {}
"""Run time -> its profile name (:meth:`WorkloadJob.profile_name`): traces repeat run times (LCG's 188,041 jobs
have 26,387), so most jobs find theirs here instead of formatting it."""
_PROFILE_NAMES_KEPT = 1 << 16


@dataclass(frozen=True, slots=True)
class Lifetime:
    """When a cluster-wide object of a workload (a PriorityClass, a PodDisruptionBudget) exists, in seconds on the
    workload's clock: from ``created`` (its ``sim.kubeflux.io/submit-time``) until ``deleted`` (its
    ``sim.kubeflux.io/delete-time``; None: to the end of the run)."""

    created: float = 0.0
    deleted: float | None = None

    def alive(self, at: float) -> bool:
        """Whether the object exists at ``at`` (created then or before, not yet deleted)."""
        return self.created <= at and (self.deleted is None or at < self.deleted)

    def shifted(self, by: float) -> Lifetime:
        """The same lifetime on a clock that starts ``by`` seconds later."""
        return Lifetime(self.created - by, None if self.deleted is None else self.deleted - by)


ALWAYS: Final = Lifetime()
"""The lifetime of an object without times: from the start, never deleted."""


@dataclass(slots=True)
class Workload:
    name: str
    jobs: list[WorkloadJob]
    resources: int | None = None
    """The machine size the trace states (SWF ``MaxProcs``, Batsim ``nb_res``), if any."""
    problems: list[str] = field(default_factory=list)
    """Bad lines, each ``file:line: what is wrong``. Reported to the user, never silently dropped."""
    skipped: int = 0
    """How many of :attr:`problems` are lines, entries or documents left out of the run altogether (the others
    name jobs that are kept, rejected or changed)."""
    priority_classes: list[PriorityClass] = field(default_factory=list)
    """The ``scheduling.k8s.io/v1`` PriorityClasses the workload defines (its pods were admitted with them)."""
    budgets: list[DisruptionBudget] = field(default_factory=list)
    """The ``policy/v1`` PodDisruptionBudgets the workload defines: in the cluster from its start, unless
    :attr:`lifetimes` times them."""
    storage: list[StorageObject] = field(default_factory=list)
    """The StorageClasses, PersistentVolumes, claims and CSINodes the workload defines, in the cluster from its start
    (:mod:`kubeflux.sim.workloads.storage`)."""
    lifetimes: dict[str, Lifetime] = field(default_factory=dict)
    """``PriorityClass <name>`` or ``PodDisruptionBudget <namespace>/<name>`` → when it exists, for the objects
    that give times (the others are there from the start to the end: :data:`ALWAYS`)."""

    def lifetime(self, obj: PriorityClass | DisruptionBudget) -> Lifetime:
        """When ``obj``, one of :attr:`priority_classes` or :attr:`budgets`, exists."""
        return self.lifetimes.get(policy_key(obj), ALWAYS)

    devices: DeviceObjects = field(default_factory=DeviceObjects)
    """The DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates the workload defines: in the
    cluster from its start (:mod:`kubeflux.sim.claims`)."""
    cluster_objects: list[dict[str, Any]] = field(default_factory=list)
    """The manifests of :attr:`storage` and :attr:`devices` as the file gives them (read without a problem), in
    file order: what ``cluster serve`` posts before the first job, so that its cluster starts as the simulator's."""

    kueue: KueueObjects | None = None
    """The Kueue objects the workload defines (ResourceFlavors, ClusterQueues, LocalQueues); None without any: the
    run has no admission layer."""

    header: dict[str, str] = field(default_factory=dict)
    """What the file says about itself: SWF ``;`` header keys (``MaxProcs``, ``UnixStartTime`` …; a key given
    on several lines, such as ``Partition``, has its values joined by newlines), Batsim ``description``."""


def policy_key(obj: PriorityClass | DisruptionBudget) -> str:
    """``PriorityClass <name>`` or ``PodDisruptionBudget <namespace>/<name>``: an object's key in
    :attr:`Workload.lifetimes`, as messages name it."""
    if isinstance(obj, PriorityClass):
        return f"PriorityClass {obj.name}"
    return f"PodDisruptionBudget {obj.key}"
