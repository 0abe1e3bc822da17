"""The exact per-node books: what every bound, unfinished pod (of any scheduler) requests on each node.

The engine's graph holds whole cores and gpus; the ledger holds everything exactly (cpu in millicores, memory
and ephemeral storage in bytes, extended resources, the pod count) and answers kube-scheduler's NodeResourcesFit
question for a pod (:func:`kubeflux.scheduler.constraints.insufficient_resources`). Keyed by pod UID (or
``namespace/name`` when a pod has none), so a pod is never counted twice and a release is idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeflux.scheduler.constraints import insufficient_resources
from kubeflux.scheduler.objects import PODS, ResourceList


@dataclass(slots=True, init=False)
class Booking:
    """Where a pod is counted (its own ``__init__``: compiled, the generated one stays interpreted)."""

    node: str
    requests: ResourceList

    def __init__(self, node: str, requests: ResourceList) -> None:
        self.node = node
        self.requests = requests


@dataclass(slots=True)
class Ledger:
    used: dict[str, ResourceList] = field(default_factory=dict)
    """Node name → the summed requests of its pods, with their number under ``pods``."""
    bookings: dict[str, Booking] = field(default_factory=dict)
    """Pod uid → where it is counted."""
    by_node: dict[str, set[str]] = field(default_factory=dict)
    """Node name → the uids counted on it."""

    def take(self, uid: str, node: str, requests: ResourceList) -> bool:
        """Count the pod on ``node``; False (and nothing changed) when it is already counted."""
        if uid in self.bookings:
            return False
        self.bookings[uid] = Booking(node, dict(requests))
        uids = self.by_node.get(node)
        if uids is None:
            uids = self.by_node[node] = set()
        uids.add(uid)
        used = self.used.get(node)
        if used is None:
            used = self.used[node] = {}
        for name, amount in requests.items():
            used[name] = used.get(name, 0) + amount
        used[PODS] = used.get(PODS, 0) + 1
        return True

    def give(self, uid: str) -> Booking | None:
        """Stop counting the pod; its booking, or None when it was not counted."""
        booking = self.bookings.pop(uid, None)
        if booking is None:
            return None
        uids = self.by_node.get(booking.node)
        if uids is not None:
            uids.discard(uid)
        used = self.used.get(booking.node)
        if used is None:
            used = {}
        for name, amount in booking.requests.items():
            used[name] = used.get(name, 0) - amount
        used[PODS] = used.get(PODS, 0) - 1
        return booking

    def on(self, node: str) -> ResourceList:
        return self.used.get(node, {})

    def shortfall(self, requests: ResourceList, node: str, allocatable: ResourceList) -> list[str]:
        """kube-scheduler's reasons ``requests`` does not fit on ``node`` now (``Insufficient cpu`` …)."""
        return insufficient_resources(requests, allocatable, self.on(node))


__all__ = ["Booking", "Ledger"]
