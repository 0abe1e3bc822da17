"""The Kubernetes objects the scheduler core reasons about, reduced to what scheduling needs.

Both shells build these: the simulator directly, the Kubernetes driver from API JSON
(:func:`kubeflux.apiobjects.manifests.pod_from_manifest` and friends). Everything is keyed by
``namespace/name`` (:attr:`Pod.key`) and carries the UID, so a pod deleted and re-created under the same name is
a different pod.

Resource amounts are integers in canonical units: ``cpu`` in millicores, ``memory`` and ``ephemeral-storage`` in
bytes, everything else (``nvidia.com/gpu``, ``pods`` …) in units. Times are float seconds (virtual time in the
simulator, Unix time on a real cluster).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
PODS = "pods"

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
NATIVE_GROUP_SUFFIX = " (scheduling.k8s.io)"
"""Ends the key of a Kubernetes-own PodGroup (``scheduling.k8s.io``), so that it and a coscheduling PodGroup of
the same name are two gangs."""
"""The label that makes a pod a member of a PodGroup (the coscheduling plugin's convention)."""

WALLTIME_ANNOTATION = "kubeflux.io/walltime"
"""A pod's walltime estimate (seconds, or a Go duration such as ``1h``): backfilling schedulers take a job's
expected end as its start plus this. The simulator writes it from the workload's requested time (or, when
unknown, the run time)."""

ResourceList = dict[str, int]


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"
    """``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``."""


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    """Empty with operator ``Exists`` tolerates every taint."""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    """Empty matches every effect."""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``."""
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements that must all hold; a pod's required node affinity is an OR of terms."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(slots=True)
class Node:
    name: str
    uid: str = ""
    allocatable: ResourceList = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    """Cordoned (``spec.unschedulable``)."""
    ready: bool = True


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    scheduler_name: str = "default-scheduler"
    priority: int = 0
    creation_time: float = 0.0
    """Arrival order for the queue; ties are broken by :attr:`key`."""
    requests: ResourceList = field(default_factory=dict)
    """The pod's effective request: containers summed, init containers as their maximum (Kubernetes' rule)."""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    required_node_affinity: tuple[NodeSelectorTerm, ...] = ()
    """OR of terms from ``requiredDuringSchedulingIgnoredDuringExecution``; empty means no constraint."""
    node_name: str = ""
    """The node the pod is bound to, empty while unbound."""
    phase: PodPhase = PodPhase.PENDING
    deleted: bool = False
    """``metadata.deletionTimestamp`` is set (or the pod is gone)."""
    active_deadline_seconds: float | None = None
    owner: str = ""
    """``Kind/name`` of the controlling owner, e.g. ``Job/lammps``; empty for a bare pod."""
    manifest: dict[str, Any] | None = None
    """The full Kubernetes object when the pod came from the API or a YAML file."""
    resize: str = ""
    """An in-place resize under way (Kubernetes 1.33+): ``Proposed``, ``InProgress``, ``Deferred`` or
    ``Infeasible``; empty when none. :attr:`requests` already counts it as kube-scheduler does."""
    scheduling_group: str = ""
    """``spec.schedulingGroup.podGroupName`` (Kubernetes' own gang API, ``scheduling.k8s.io``): the PodGroup of a
    pod that no coscheduling label (:data:`POD_GROUP_LABEL`) puts in one."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group(self) -> str | None:
        """The ``namespace/name`` of the pod's PodGroup, or None for a pod outside any group."""
        name = self.labels.get(POD_GROUP_LABEL)
        if name is None:
            if not self.scheduling_group:
                return None
            return f"{self.namespace}/{self.scheduling_group}{NATIVE_GROUP_SUFFIX}"
        return f"{self.namespace}/{name}"


@dataclass(slots=True)
class PodGroup:
    """A gang of at least ``min_member`` pods placed together: a ``scheduling.x-k8s.io/v1alpha1`` PodGroup
    (coscheduling), or a ``scheduling.k8s.io/v1alpha2`` one (Kubernetes' own; its ``basic`` policy is
    ``min_member`` 1)."""

    namespace: str
    name: str
    min_member: int
    schedule_timeout_seconds: float | None = None
    creation_time: float = 0.0
    uid: str = ""
    native: bool = False
    """Kubernetes' own PodGroup (``scheduling.k8s.io``): its pods name it in ``spec.schedulingGroup``."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}{NATIVE_GROUP_SUFFIX if self.native else ''}"
