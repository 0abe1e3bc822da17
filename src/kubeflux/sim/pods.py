"""What the simulated cluster is made of besides nodes: kubelet behaviour (:class:`Lifecycle`), node outages, the
Kubernetes Events it records, and one pod's simulated life (:class:`SimPod`) with the timing of the template it
was made from (:class:`TemplateTiming`). See :mod:`kubeflux.sim.cluster` for the lifecycle these objects go through.

A pod record names its job by index (:attr:`SimPod.job_index`), as a pod's ``ownerReferences`` name its owner: the
job records (:mod:`kubeflux.sim.jobs`) import this module, never the other way round."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kubeflux.scheduler.interface import ClusterEvent
from kubeflux.scheduler.objects import Pod
from kubeflux.sim.clientrate import ClientRate
from kubeflux.sim.workloads.model import PodTemplate


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """How simulated kubelets behave. Delays in seconds; KWOK's jitter is an upper bound: the delay drawn is
    uniform in ``[delay, max(delay, jitter)]``."""

    start_delay: float = 0.0
    start_jitter: float = 0.0
    pod_failure_fraction: float = 0.0
    """Fraction of pods that crash (the seed's segfault pods) at a uniform point of their run time."""
    failure_exit_code: int = 139
    seed: int = 0
    end_jitter: float = 0.0
    """Each pod with a run time ends up to this much later, uniformly (seeded): on a real cluster two pods that
    started together end a few milliseconds apart (KWOK's stages, the kubelets' status writes), so a scheduler
    sees two events where virtual time has one instant (the fidelity page measures 5–10 ms)."""
    end_delay: float = 0.0
    """Each pod with a run time ends this much later (before its ``end_jitter``): KWOK marks a pod ``Succeeded``
    a few hundredths of a second after its run time (its stage's queue and status write; the fidelity page
    measures it), and along a queue of jobs each waiting for the one before to end these delays add up."""
    job_sync_delay: float = 0.0
    """Seconds from a ``batch/v1`` Job's pod ending to the Job controller acting on it (marking the Job complete,
    replacing a failed pod): kube-controller-manager batches pod events for 1 s (``syncJobBatchPeriod``)."""
    job_client_qps: float = 0.0
    """Pods a second the Job controller creates after a burst of :attr:`job_client_burst`, at most 500 a sync
    (kube-controller-manager: 20, its ``--kube-api-qps``; :mod:`kubeflux.sim.clientrate`). 0: no limit, every pod
    a Job lacks is created at once."""
    job_client_burst: int = 30
    """The Job controller's client's burst (kube-controller-manager's ``--kube-api-burst``), with
    :attr:`job_client_qps`."""

    def __post_init__(self) -> None:
        delays = (self.start_delay, self.start_jitter, self.end_jitter, self.end_delay, self.job_sync_delay)
        if min(delays) < 0:
            raise ValueError("lifecycle: delays and jitters must be >= 0 seconds")
        if not 0.0 <= self.pod_failure_fraction <= 1.0:
            raise ValueError(f"lifecycle: pod_failure_fraction must be in [0, 1], got {self.pod_failure_fraction}")
        if self.job_client_qps < 0 or self.job_client_burst < 1:
            raise ValueError("lifecycle: job_client_qps must be >= 0 and job_client_burst >= 1")

    def job_client_rate(self) -> ClientRate | None:
        """The Job controller's client rate (None: no limit)."""
        return ClientRate(self.job_client_qps, self.job_client_burst) if self.job_client_qps > 0 else None


@dataclass(frozen=True, slots=True)
class NodeOutage:
    """``node`` goes down at ``down_at`` (its pods fail and are deleted) and comes back at ``up_at`` (None:
    never). Times are seconds of virtual time."""

    node: str
    down_at: float
    up_at: float | None = None


@dataclass(slots=True)
class KubeEvent:
    """A Kubernetes Event as kube-scheduler or the kubelet would write it."""

    time: float
    type: str
    reason: str
    object: str
    message: str


class TemplateTiming:
    """What the cluster needs of a pod template, read once per template: requests in canonical units, delays
    and run time in seconds, labels with the group/Job labels added.

    A plain class, not a dataclass: compiled, a dataclass keeps its generated ``__init__`` interpreted, and one of
    these is built for every pod template (every pod of a trace job)."""

    __slots__ = (
        "annotations",
        "container_name",
        "cpu",
        "exit_code",
        "ext",
        "gpu",
        "labels",
        "mem",
        "others",
        "owner",
        "run_jitter",
        "run_time",
        "scheduler_name",
        "start_delay",
        "start_jitter",
        "template",
        "walltime_kill",
    )

    def __init__(
        self,
        template: PodTemplate,
        cpu: int,
        mem: int,
        gpu: int,
        ext: dict[str, int] | None,
        run_time: float | None,
        run_jitter: float | None,
        start_delay: float,
        start_jitter: float,
        exit_code: int,
        walltime_kill: float | None,
        labels: dict[str, str],
        annotations: dict[str, str],
        scheduler_name: str,
        owner: str,
        container_name: str,
        others: dict[str, int] | None = None,
    ) -> None:
        self.template = template
        self.cpu = cpu
        self.mem = mem
        self.gpu = gpu
        self.ext = ext
        self.run_time = run_time
        self.run_jitter = run_jitter
        self.start_delay = start_delay
        self.start_jitter = start_jitter
        self.exit_code = exit_code
        self.walltime_kill = walltime_kill
        """Trace jobs: seconds after Running at which the pod is killed (the requested time), as Batsim does."""
        self.labels = labels
        self.annotations = annotations
        self.scheduler_name = scheduler_name
        self.owner = owner
        self.container_name = container_name
        self.others = others
        """Requests other than ``cpu`` (memory, GPUs, extended resources), for the usage per kind; None when none."""


class SimPod:
    """One pod's simulated life: the :class:`Pod` the schedulers see, plus stage times (seconds)."""

    __slots__ = (
        "bound_at",
        "completion_index",
        "computing_at",
        "container_name",
        "container_reason",
        "cores",
        "cpu",
        "created_at",
        "exit_code",
        "ext",
        "fail_after",
        "finished_at",
        "gpu",
        "ids",
        "job_index",
        "mem",
        "modified",
        "node_index",
        "nominated_node",
        "pod",
        "reason",
        "run_time",
        "running_at",
        "start_delay",
        "status_message",
        "timing",
        "unschedulable_at",
        "unschedulable_message",
    )

    def __init__(self, pod: Pod, job_index: int, timing: TemplateTiming, now: float) -> None:
        self.pod = pod
        self.job_index = job_index
        """The position of the pod's job in its cluster's ``jobs``."""
        self.timing = timing
        self.cpu, self.mem, self.gpu, self.ext = timing.cpu, timing.mem, timing.gpu, timing.ext
        self.created_at = now
        self.bound_at: float | None = None
        self.running_at: float | None = None
        self.finished_at: float | None = None
        self.unschedulable_at: float | None = None
        self.unschedulable_message = ""
        self.node_index = -1
        self.nominated_node = ""
        """``status.nominatedNodeName``: where its scheduler evicted pods to make room for it, while it waits."""
        self.cores: list[int] = []
        """Core ids held (see :mod:`kubeflux.sim.resourceids`)."""
        self.ids: dict[str, list[int]] | None = None
        """Ids held of the other kinds that have ids (GPUs, extended resources), numbered within each kind."""
        self.computing_at: float | None = None
        """When it began to compute: Running, or a coupled job's compute start if it ran before that (it held its
        resources idle in between)."""
        self.run_time = timing.run_time
        self.start_delay = timing.start_delay
        self.fail_after: float | None = None
        self.exit_code = timing.exit_code
        self.reason = ""
        self.status_message = ""
        self.container_reason = ""
        self.container_name = timing.container_name
        self.modified: ClusterEvent | None = None
        self.completion_index: int | None = None
        """An Indexed Job's pod: its completion index."""

    def draw(self, lifecycle: Lifecycle, rng: random.Random) -> None:
        """Draw this pod's random start delay, run time and injected failure from ``rng`` (KWOK's jitter: uniform
        from the delay up to the jitter bound). One draw order for every cluster that replays a workload, so the
        simulator and the served cluster give a seed the same pods the same times."""
        timing = self.timing
        if timing.start_jitter > timing.start_delay:
            self.start_delay = rng.uniform(timing.start_delay, timing.start_jitter)
        if timing.run_jitter is not None and self.run_time is not None and timing.run_jitter > self.run_time:
            self.run_time = rng.uniform(self.run_time, timing.run_jitter)
        if self.run_time is not None:
            if lifecycle.end_delay > 0.0:
                self.run_time += lifecycle.end_delay
            if lifecycle.end_jitter > 0.0:
                self.run_time += rng.uniform(0.0, lifecycle.end_jitter)
        if lifecycle.pod_failure_fraction > 0.0 and rng.random() < lifecycle.pod_failure_fraction:
            self.fail_after = (self.run_time or 0.0) * rng.random()
            self.exit_code = lifecycle.failure_exit_code


__all__ = ["KubeEvent", "Lifecycle", "NodeOutage", "SimPod", "TemplateTiming"]
