"""The scheduling queue's entries of the kube-default baselines (:mod:`~kubeflux.sim.baselines.kube_default`): the
two queue orders, a queued pod's place in the retry state machine, and its sort keys."""

from __future__ import annotations

from dataclasses import dataclass

from kubeflux.scheduler.objects import Pod

__all__ = ["BACKOFF_WINDOW", "QUEUES", "QUEUE_CLASSIC", "QUEUE_V136", "QueueKey", "QueuedPod", "SortKey"]

QUEUE_CLASSIC = "classic"
"""The queue order of the first baselines: priority, then creation; a failed pod retried once it saw an event and
its back-off ended (a wake-up at its end)."""
QUEUE_V136 = "v1.36"
"""kube-scheduler v1.36's active and backoff queues (the module docstring)."""
QUEUES = (QUEUE_CLASSIC, QUEUE_V136)
BACKOFF_WINDOW = 1.0
"""kube-scheduler's ``backoffQOrderingWindowDuration``: back-off expiries are truncated to whole seconds."""

SortKey = tuple[int, float, str | int]
"""(-priority, timestamp, tie-break): the pod's key under the classic queue, its queue-entry count under v1.36."""
QueueKey = tuple[int, float, SortKey]
"""(band: 0 active, 1 backoff; the expiry in the backoff band; PrioritySort's key)."""


@dataclass(slots=True)
class QueuedPod:
    """A pending pod this scheduler owns, with its place in the retry state machine.

    ``attempts`` counts failed cycles; after a failure the pod is retried once ``generation`` (the cluster-event
    counter it last saw) is behind the scheduler's and ``backoff_until`` has passed.
    """

    pod: Pod
    attempts: int = 0
    backoff_until: float = 0.0
    generation: int = -1
    """-1: never attempted (eligible at once)."""
    timestamp: float = 0.0
    """kube-scheduler's ``QueuedPodInfo.Timestamp``: when it was added, then when it last failed."""
    expiry: float = 0.0
    """Its back-off expiry, truncated to the window (``v1.36`` queue)."""
    order: int = 0
    """When it entered the queue or last failed, as a count: pods with one ``timestamp`` (failed while one event was
    handled, created at one instant) keep the order they were tried or created in, as kube-scheduler's serial
    cycles stamp them, not their names' order (PrioritySort has no name tie-break)."""
