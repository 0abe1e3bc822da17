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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kubeflux.scheduler.phase import PodPhase as PodPhase  # defined in a compiled module: see there

DEFAULT_SCHEDULER: Final = "default-scheduler"
"""The ``schedulerName`` of a pod that names none (kube-scheduler's)."""

PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
PREEMPT_NEVER: Final = "Never"

CPU: Final = "cpu"
MEMORY: Final = "memory"
GPU: Final = "nvidia.com/gpu"
PODS: Final = "pods"

POD_GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
"""The label that makes a pod a member of a PodGroup (the coscheduling plugin's convention)."""
NATIVE_GROUP_SUFFIX: Final = " (scheduling.k8s.io)"
"""Ends the key of a Kubernetes-own PodGroup (``scheduling.k8s.io``), so that it and a coscheduling PodGroup of
the same name are two gangs."""

WALLTIME_ANNOTATION: Final = "kubeflux.io/walltime"
"""A pod's walltime estimate (seconds, or a Go duration such as ``1h``): backfilling schedulers take a job's
expected end as its start plus this. The simulator writes it from the workload's requested time (or, when
unknown, the run time)."""

ResourceList = dict[str, int]


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


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    """A pod volume backed by a PersistentVolumeClaim: ``persistentVolumeClaim.claimName``, or the claim an
    ``ephemeral`` volume makes (``<pod>-<volume>``, which must be owned by the pod)."""

    name: str
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class ResourceClaimRef:
    """One ``spec.resourceClaims[]`` entry: its ``name`` in the pod, and the ResourceClaim it stands for (its
    ``resourceClaimName``, or for a ``resourceClaimTemplateName`` the claim the resourceclaim controller made, from
    ``status.resourceClaimStatuses``; empty while none is made)."""

    name: str
    claim: str
    template: str = ""
    """Its ``resourceClaimTemplateName``, when the claim is made from a template."""


@dataclass(slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    scheduler_name: str = DEFAULT_SCHEDULER
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
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    """``spec.preemptionPolicy`` as admission resolved it from the pod's PriorityClass: ``PreemptLowerPriority``,
    or ``Never`` (the pod waits rather than evict anything)."""
    scheduling_gates: tuple[str, ...] = ()
    """The names in ``spec.schedulingGates``: while any is left, no scheduler may place the pod (kube-scheduler's
    SchedulingGates plugin; a controller such as Kueue removes its gate when it admits the pod). The API allows gates
    only at creation, and only their removal after it."""
    resource_claims: tuple[ResourceClaimRef, ...] = ()
    """``spec.resourceClaims``: the ResourceClaims the pod's devices come from (Dynamic Resource Allocation,
    :mod:`kubeflux.scheduler.devices`); empty for most pods."""
    terms: PodTerms | None = None
    """What the pod asks of the pods around it (host ports, required inter-pod affinity and anti-affinity, topology
    spread that must hold); None when it asks none of it (most pods: the filters of
    :mod:`kubeflux.scheduler.podterms` then cost nothing)."""
    volume_claims: tuple[VolumeClaim, ...] = ()
    """The PersistentVolumeClaims of its volumes, in ``spec.volumes`` order (none for most pods: the volume filters
    of :mod:`kubeflux.scheduler.volumes` then cost nothing)."""

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


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``."""
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        raise ValueError(f"label selector operator {self.operator!r}: not In, NotIn, Exists or DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: every ``matchLabels`` pair and every expression must hold."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels) and all(
            requirement.matches(labels) for requirement in self.match_expressions
        )


@dataclass(frozen=True, slots=True)
class HostPort:
    """A container's ``hostPort`` (with its ``protocol`` and ``hostIP``, empty meaning every address)."""

    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """One required ``podAffinity``/``podAntiAffinity`` term, as kube-scheduler reads it: the pods of
    ``namespaces`` (or of a namespace ``namespace_selector`` selects) whose labels ``selector`` matches, in the
    domain of ``topology_key``. ``None`` selectors select nothing (an absent ``labelSelector``); ``matchLabelKeys``
    and ``mismatchLabelKeys`` are merged into ``selector`` already, as the API server does."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str

    def matches(self, pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether ``pod`` (with ``namespace_labels``, its namespace's labels) is one of the term's pods."""
        return self.selects(pod.namespace, pod.labels, namespace_labels)

    def selects(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None) -> bool:
        """Whether a pod of ``namespace`` (labelled ``namespace_labels``) with ``labels`` is one of the term's pods."""
        if namespace not in self.namespaces:
            ns = self.namespace_selector
            if ns is None or not (ns.empty or (namespace_labels is not None and ns.matches(namespace_labels))):
                return False
        return self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``topologySpreadConstraint`` with ``whenUnsatisfiable: DoNotSchedule`` (those with ``ScheduleAnyway`` only
    score, and are not kept), defaults applied: ``minDomains`` 1, ``nodeAffinityPolicy: Honor``,
    ``nodeTaintsPolicy: Ignore``; ``matchLabelKeys`` merged into ``selector`` (None: an absent ``labelSelector``)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False


@dataclass(frozen=True, slots=True)
class PodTerms:
    """What a pod asks of the pods around it (see :attr:`Pod.terms`)."""

    host_ports: tuple[HostPort, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.host_ports or self.affinity or self.anti_affinity or self.spread)


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace's labels, which inter-pod affinity's ``namespaceSelector`` selects on (the API server gives every
    namespace ``kubernetes.io/metadata.name: <name>``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget: at most one of ``min_available`` and ``max_unavailable``, each a count
    or a percentage (``"50%"``)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disrupted: frozenset[str] = frozenset()
    """``status.disruptedPods``: names of pods whose eviction the API server has granted and that are not yet
    gone; they take no more of the budget."""

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether kube-scheduler's preemption counts the budget for a pod of ``namespace`` with ``labels``: an empty
        or absent selector selects none there (``filterPodsWithPDBViolation``)."""
        selector = self.selector
        return namespace == self.namespace and selector is not None and not selector.empty and selector.matches(labels)

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the budget guards a pod of ``namespace`` with ``labels`` as the Eviction API and the disruption
        controller read ``policy/v1``: an empty selector selects every pod of the namespace, an absent one none."""
        selector = self.selector
        return namespace == self.namespace and selector is not None and selector.matches(labels)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
