"""A Kueue Workload as the admission core holds it: what it asks, where it queues, and what happened to it."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeflux.scheduler.objects import NodeSelectorTerm, Toleration
from kubeflux.sim.kueue.flavors import Assignment, PodConstraints


@dataclass(slots=True, eq=False)
class QueuedWorkload:
    """One Kueue Workload: a Job, a pod group, a pod or an AppWrapper labelled with a LocalQueue."""

    key: str
    """``namespace/name`` of its object."""
    ref: int
    """The shell's handle (the simulator's job index)."""
    namespace: str
    queue: str
    """The LocalQueue it names."""
    priority: int
    created: float
    requests: dict[str, int]
    """What all its pods ask, by resource (``pods``: how many)."""
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    other_pods: tuple[PodConstraints, ...] = ()
    """The node selectors, tolerations and node affinities of its other pod templates (an AppWrapper's other
    components)."""
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    """Its (first) pod template's required node affinity terms."""
    cluster_queue: str = ""
    timestamp: float = 0.0
    seq: int = 0
    admitted_at: float | None = None
    first_admitted: float | None = None
    assignment: Assignment | None = None
    evictions: int = 0
    """Preemptions for quota."""
    timeouts: int = 0
    """Evictions for its pods not ready in time (``waitForPodsReady``)."""
    deactivated: bool = False
    """Evicted for its pods not ready once more than ``backoffLimitCount`` allows: it is never admitted again."""
    why: str = ""
    """Why it waits (inactive, or not fitting at its last try)."""
    requeued: float | None = None
    """When it was last queued again after an eviction (Kueue's ``Requeued`` condition); None: never evicted."""
    waits: list[float] = field(default_factory=list)
    """Each admission's wait, as Kueue's ``admission_wait_time`` observes it: from its creation or its last
    requeuing."""

    def constraints(self) -> tuple[PodConstraints, ...]:
        """Its pod templates' node selectors, tolerations and node affinities (a flavor must suit each)."""
        return ((self.node_selector, self.tolerations, self.node_affinity), *self.other_pods)

    def order(self) -> tuple[int, float, int]:
        return (-self.priority, self.timestamp, self.seq)


__all__ = ["QueuedWorkload"]
