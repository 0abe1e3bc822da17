"""Kueue's ``kueue.x-k8s.io/v1beta1`` objects as the simulator's admission layer reads them.

* :class:`ResourceFlavor`: a kind of node (``nodeLabels``), the taints those nodes carry (``nodeTaints``: an
  admitted workload's pods must tolerate them) and the tolerations Kueue adds to the pods it admits on it.
* :class:`ClusterQueue`: quota per resource group and flavor (``nominalQuota``, ``borrowingLimit``,
  ``lendingLimit``), a ``cohort`` whose members lend each other their unused quota, a ``queueingStrategy``
  (``StrictFIFO``, ``BestEffortFIFO``), a ``namespaceSelector``, a ``preemption`` policy and a fair-sharing
  ``weight``.
* :class:`LocalQueue`: a namespaced queue that points at one ClusterQueue; a workload names it with the label
  :data:`QUEUE_NAME_LABEL`.

Amounts are in kubeflux's canonical units (:mod:`kubeflux.scheduler.objects`): millicores for ``cpu``, bytes for
``memory``, units for the rest (the ``pods`` resource counts pods).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from kubeflux.scheduler.objects import LabelSelector, Taint, Toleration
from kubeflux.scheduler.podterms import NAMESPACE_NAME_LABEL

API_VERSION: Final = "kueue.x-k8s.io/v1beta1"
QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"
"""The label (on a Job, a Pod or a PodGroup's pods) naming the LocalQueue of the workload's namespace."""
ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
"""The scheduling gate Kueue's webhook puts on a pod it holds (a lone pod's, a pod group's), removed on admission."""
PODS: Final = "pods"
"""The resource a ClusterQueue may cover to count pods."""


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    """The head of the queue blocks the others while it does not fit."""
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    """A head that does not fit is set aside (until quota is released in its cohort) and the next one tried."""


class WithinClusterQueue(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource of one flavor of a ClusterQueue."""

    nominal: int
    borrowing_limit: int | None = None
    """At most this much above :attr:`nominal` borrowed from the cohort; None: no limit."""
    lending_limit: int | None = None
    """At most this much of :attr:`nominal` lent to the cohort; None: all of it."""

    @property
    def guaranteed(self) -> int:
        """The part of the nominal quota never lent (nominal − lending limit; 0 without a lending limit)."""
        return 0 if self.lending_limit is None else max(0, self.nominal - self.lending_limit)


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[tuple[str, dict[str, ResourceQuota]], ...]
    """Each flavor in order (the order flavors are tried), with a quota for every covered resource."""


def namespace_labels(namespace: str, given: dict[str, str] | None = None) -> dict[str, str]:
    """The labels of ``namespace`` as a ClusterQueue's ``namespaceSelector`` sees them: those a Namespace object of
    the workload gives it (``given``), and the one the API server gives every namespace
    (``kubernetes.io/metadata.name``)."""
    return {**(given or {}), NAMESPACE_NAME_LABEL: namespace}


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str = ""
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    """Matched against a workload's namespace's labels (:func:`namespace_labels`); None (the field absent)
    selects no namespace, an empty one every namespace."""
    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    fair_weight: float = 1.0
    """``spec.fairSharing.weight`` (default 1): its share of what the cohort lends is divided by it (0: an infinite
    share whenever it borrows). Read only when the Configuration enables fair sharing."""

    def quotas(self) -> dict[tuple[str, str], ResourceQuota]:
        """``(flavor, resource)`` → its quota, over every resource group."""
        return {
            (flavor, resource): quota
            for group in self.resource_groups
            for flavor, resources in group.flavors
            for resource, quota in resources.items()
        }


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class RequeuingTimestamp(StrEnum):
    EVICTION = "Eviction"
    """A workload evicted for its pods not ready in time queues again from its eviction."""
    CREATION = "Creation"
    """... from its creation (its place kept)."""


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady`` (its ``Configuration``, ``config.kueue.x-k8s.io/v1beta1``): a workload whose
    pods are not all ready within :attr:`timeout` of its admission is evicted and queued again after a back-off, or
    deactivated once it was requeued :attr:`backoff_limit_count` times."""

    timeout: float = 300.0
    timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
    backoff_limit_count: int | None = None
    """Requeuings at most (None: no limit); one more timeout deactivates the workload."""
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600

    def backoff(self, count: int) -> float:
        """Seconds a workload evicted for the ``count``-th time waits before it is queued again: base × 2^(count−1),
        at most the max (Kueue's jitter, 0.01 %, left out)."""
        return float(min(self.backoff_base_seconds * 2 ** (count - 1), self.backoff_max_seconds))


class FairSharingStrategy(StrEnum):
    """Kueue's fair-sharing preemption strategies (``fairSharing.preemptionStrategies``): the preemptor's ClusterQueue's
    share with it admitted, compared with the target ClusterQueue's share ..."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    """... without the workload to preempt: at most that (Kueue's rule S2-a)."""
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
    """... with the workload to preempt: strictly below it (rule S2-b)."""


FAIR_SHARING_STRATEGY_LISTS: Final = (
    (FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (FairSharingStrategy.LESS_THAN_INITIAL_SHARE,),
    (FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairSharingStrategy.LESS_THAN_INITIAL_SHARE),
)
"""The ``preemptionStrategies`` lists Kueue accepts (the last its default)."""


@dataclass(frozen=True, slots=True)
class FairSharing:
    """Kueue's ``fairSharing`` (its ``Configuration``) when ``enable`` is true: ClusterQueues of a cohort are admitted
    in the order of their dominant resource share and preempt each other by :attr:`strategies`
    (:mod:`kubeflux.sim.kueue.fairsharing`)."""

    strategies: tuple[FairSharingStrategy, ...] = FAIR_SHARING_STRATEGY_LISTS[-1]


@dataclass(slots=True)
class KueueObjects:
    """The Kueue objects of a workload (file order kept; names are unique, the reader refuses a second one)."""

    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    """By ``namespace/name``."""
    wait_for_pods_ready: WaitForPodsReady | None = None
    """Kueue's ``waitForPodsReady`` when its Configuration enables it."""
    fair_sharing: FairSharing | None = None
    """Kueue's ``fairSharing`` when its Configuration enables it."""
    manifests: list[dict[str, Any]] = field(default_factory=list)
    """The ResourceFlavors, ClusterQueues and LocalQueues as the file gives them (what ``cluster serve`` creates
    through its API), in file order."""
    given: bool = False
    """The workload gave Kueue objects, even if each was refused: Kueue runs, and holds the Jobs labelled for it."""
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    """The labels of the namespaces the workload's ``v1`` Namespace objects define (a ``namespaceSelector`` reads
    them), by name."""

    def __bool__(self) -> bool:
        return bool(
            self.given
            or self.flavors
            or self.cluster_queues
            or self.local_queues
            or self.wait_for_pods_ready
            or self.fair_sharing
        )

    def merged(self, other: KueueObjects) -> KueueObjects:
        """These objects and ``other``'s (a name defined in both keeps this one's)."""
        mine = {_identity(m) for m in self.manifests}
        return KueueObjects(
            flavors={**other.flavors, **self.flavors},
            cluster_queues={**other.cluster_queues, **self.cluster_queues},
            local_queues={**other.local_queues, **self.local_queues},
            wait_for_pods_ready=self.wait_for_pods_ready or other.wait_for_pods_ready,
            fair_sharing=self.fair_sharing or other.fair_sharing,
            manifests=[*self.manifests, *(m for m in other.manifests if _identity(m) not in mine)],
            given=self.given or other.given,
            namespaces={**other.namespaces, **self.namespaces},
        )

    def conflicts(self, other: KueueObjects) -> list[str]:
        """The objects ``other`` defines otherwise than these (``ClusterQueue cq``), as :meth:`merged` would drop
        them."""
        found = [
            f"{kind} {name}"
            for kind, mine, theirs in (
                ("ResourceFlavor", self.flavors, other.flavors),
                ("ClusterQueue", self.cluster_queues, other.cluster_queues),
                ("LocalQueue", self.local_queues, other.local_queues),
                ("Namespace", self.namespaces, other.namespaces),
            )
            for name, obj in theirs.items()
            if name in mine and mine[name] != obj
        ]
        pairs = ((self.wait_for_pods_ready, other.wait_for_pods_ready), (self.fair_sharing, other.fair_sharing))
        if any(a is not None and b is not None and a != b for a, b in pairs):
            found.append("Configuration")
        return found


def _identity(manifest: dict[str, Any]) -> tuple[str, str, str]:
    metadata = manifest.get("metadata") or {}
    return str(manifest.get("kind")), str(metadata.get("namespace", "")), str(metadata.get("name", ""))


__all__ = [
    "ADMISSION_GATE",
    "API_VERSION",
    "FAIR_SHARING_STRATEGY_LISTS",
    "PODS",
    "QUEUE_NAME_LABEL",
    "ClusterQueue",
    "FairSharing",
    "FairSharingStrategy",
    "KueueObjects",
    "LocalQueue",
    "QueueingStrategy",
    "ReclaimWithinCohort",
    "RequeuingTimestamp",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "WaitForPodsReady",
    "WithinClusterQueue",
    "namespace_labels",
]
