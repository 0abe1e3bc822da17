"""The exact books in time: what each node's pods and reservations will use at a later time.

The engine plans cores and gpus in time (its planners); the :class:`~kubeflux.scheduler.ledger.Ledger` holds
everything else exactly (millicores, memory, ephemeral storage, extended resources, the pod count), but only *now*.
Backfilling needs those too in time: a 500m pod placed now on the node where the head job is reserved at t=100
takes millicores the head needs then, and a memory-heavy pod can hold the memory the head is waiting for. Fluxion
would plan memory as pool vertices of its graph; kubeflux plans every ledger resource here, from what it already
knows:

* a booked pod (any scheduler's) uses its requests until its *planned end* (:attr:`TimeBooks.end_of`: kubeflux's
  own pods end at their allocation's start plus duration; other schedulers' pods, pods without a duration and pods
  running past their planned end hold on for ever);
* a reservation (:class:`Hold`) uses its requests, plus one pod, during ``[start, end)``.

So the use of a node at a time ``t`` at or after now is the requests of the booked pods still planned to run at
``t`` plus the holds covering ``t``; over a window it is largest at its start or at a hold's start inside it.
Everything is computed on demand from the ledger's bookings of the node (a few pods), so placing and releasing
pods costs nothing more; only reservations and the nodes they hold are kept here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import PODS, ResourceList

__all__ = ["Hold", "TimeBooks"]


@dataclass(slots=True, eq=False, init=False)
class Hold:
    """A reservation of ``requests`` (and one pod) on ``node`` during ``[start, end)`` (its own ``__init__``:
    compiled, the generated one stays interpreted)."""

    node: str
    start: int
    end: int
    requests: ResourceList

    def __init__(self, node: str, start: int, end: int, requests: ResourceList) -> None:
        self.node = node
        self.start = start
        self.end = end
        self.requests = requests


class TimeBooks:
    """The ledger's bookings, planned in time, and the reservations held against them (see the module docstring).

    ``end_of(uid)`` is a booked pod's planned end in seconds (``math.inf`` when it holds on for ever)."""

    def __init__(
        self, ledger: Ledger, end_of: Callable[[str], float], holds: dict[str, list[Hold]] | None = None
    ) -> None:
        self.ledger = ledger
        self.end_of = end_of
        self.holds: dict[str, list[Hold]] = {} if holds is None else holds
        """Node name → its reservations (may be shared with other books of the same cluster)."""

    def hold(self, node: str, start: int, end: int, requests: ResourceList) -> Hold:
        hold = Hold(node, start, end, dict(requests))
        self.holds.setdefault(node, []).append(hold)
        return hold

    def drop(self, hold: Hold) -> None:
        holds = self.holds.get(hold.node)
        if holds is None:
            return
        kept = [other for other in holds if other is not hold]
        if kept:
            self.holds[hold.node] = kept
        else:
            del self.holds[hold.node]

    def held_nodes(self) -> Iterable[str]:
        return self.holds.keys()

    def peak(self, node: str, start: int, end: int) -> ResourceList:
        """The most of each resource the node's pods and holds use at any time in ``[start, end)``, with their
        number under ``pods``."""
        holds = self.holds.get(node, ())
        points = [start, *(hold.start for hold in holds if start < hold.start < end)]
        ledger = self.ledger
        uids = ledger.by_node.get(node, ())
        peak: ResourceList = {}
        for at in points:
            use: ResourceList = {}
            for uid in uids:
                if self.end_of(uid) > at:
                    _add(use, ledger.bookings[uid].requests)
            for hold in holds:
                if hold.start <= at < hold.end:
                    _add(use, hold.requests)
            for name, amount in use.items():
                if amount > peak.get(name, 0):
                    peak[name] = amount
        return peak

    def free_during(self, node: str, allocatable: ResourceList, start: int, end: int) -> ResourceList:
        """What stays free of each of ``allocatable``'s resources throughout ``[start, end)`` (may be negative)."""
        peak = self.peak(node, start, end)
        return {name: amount - peak.get(name, 0) for name, amount in allocatable.items()}

    def fits_during(self, node: str, requests: ResourceList, allocatable: ResourceList, start: int, end: int) -> bool:
        """Whether a pod asking ``requests`` fits beside the node's pods and holds throughout ``[start, end)`` (as
        kube-scheduler's NodeResourcesFit: every requested resource, and the pod count when the node states one)."""
        peak = self.peak(node, start, end)
        for name, amount in requests.items():
            if amount > 0 and peak.get(name, 0) + amount > allocatable.get(name, 0):
                return False
        return PODS not in allocatable or peak.get(PODS, 0) + 1 <= allocatable[PODS]

    def release_times(self, after: int) -> list[int]:
        """Every time later than ``after`` at which a booked pod is planned to end or a hold ends, in order: the
        only times at which more can become free."""
        times: set[int] = set()
        for uid in self.ledger.bookings:
            end = self.end_of(uid)
            if end != math.inf and end > after:
                times.add(math.ceil(end))
        for holds in self.holds.values():
            times.update(hold.end for hold in holds if hold.end > after)
        return sorted(times)


def _add(into: ResourceList, requests: ResourceList) -> None:
    for name, amount in requests.items():
        into[name] = into.get(name, 0) + amount
    into[PODS] = into.get(PODS, 0) + 1
