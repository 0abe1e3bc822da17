"""Fair sharing, as Kueue (``fairSharing.enable`` in its Configuration) orders admissions and chooses victims.

Each ClusterQueue of a cohort has a *share*: its weighted dominant resource share
(:meth:`~kubeflux.sim.kueue.quota.QuotaBook.share`: what it borrows of the resource it borrows most of, over what the
cohort lends of it, divided by its ``fairSharing.weight``).

* **Admission order** (:func:`admission_key`): the heads of the queues are taken lowest share first, each share
  counted with the head admitted (Kueue's tournament, ``fair_sharing_iterator.go``, in a flat cohort), then higher
  priority, then the earlier queue-order timestamp. Those that need not borrow have a share of 0, so they still come
  first; a ClusterQueue of weight 0 that would borrow comes last.
* **Preemption** (:func:`fair_victims`): the candidates are the classic ones
  (:func:`~kubeflux.sim.kueue.preemption.preemption_candidates`: ``withinClusterQueue`` in the preemptor's queue,
  ``reclaimWithinCohort`` in the borrowing queues of its cohort), but the preemptor may borrow to fit. With the
  preemptor counted as admitted, the ClusterQueue with candidates of the highest share is taken (one that no longer
  borrows is dropped, except the preemptor's own): in the preemptor's own, its next candidate is a victim; in
  another, its candidates are tried in order, and the first one that the first strategy allows is a victim
  (``LessThanOrEqualToFinalShare``: the preemptor's share with it admitted ≤ the target's share without that
  workload; ``LessThanInitialShare``: < the target's share with it), the others kept for the second strategy. Then
  the queue is chosen again. Once the preemptor fits, the victims it does not need are given back (in reverse). With
  a second strategy (``LessThanInitialShare``), the candidates the first one refused are tried the same way, one per
  ClusterQueue. Victims from other queues are ``Preempted ... due to Fair Sharing within the cohort``.

Not modelled: hierarchical cohorts (the ``Cohort`` object and its weight), Admission Fair Sharing (ordering within a
ClusterQueue by its LocalQueues' past usage), and Kueue's rounding of shares (compared here as exact fractions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kubeflux.sim.kueue.objects import ClusterQueue, FairSharingStrategy
from kubeflux.sim.kueue.preemption import Preemptor, minimize, preemption_candidates, usage_of
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook
from kubeflux.sim.kueue.workload import QueuedWorkload

FAIR_SHARING_WHY = "Fair Sharing within the cohort"
"""Kueue's words for a victim of fair sharing from another ClusterQueue (``InCohortFairSharing``)."""

Strategy = Callable[[float, float, float], bool]
"""(the preemptor's share with it admitted, the target's share now, the target's share without the candidate) → may
the candidate be preempted."""

STRATEGIES: dict[FairSharingStrategy, Strategy] = {
    FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: lambda preemptor, _old, new: preemptor <= new,
    FairSharingStrategy.LESS_THAN_INITIAL_SHARE: lambda preemptor, old, _new: preemptor < old,
}


def admission_key(
    book: QuotaBook, cq: ClusterQueue, wl: QueuedWorkload, usage: Mapping[FlavorResource, int]
) -> tuple[float, int, float, int]:
    """Where the head ``wl`` of ``cq``, which would use ``usage``, comes in a cycle with fair sharing (module
    docstring): its queue's share with it admitted, then priority, then timestamp."""
    return (book.share(cq.name, cq.fair_weight, usage), -wl.priority, wl.timestamp, wl.seq)


class _Search:
    """One search for the victims of a preemptor (:func:`fair_victims`); its removals stay in ``book`` until
    :meth:`restore`."""

    def __init__(self, book: QuotaBook, weights: Mapping[str, float], cq: str, usage: dict[FlavorResource, int]):
        self.book, self.weights, self.cq, self.usage = book, weights, cq, usage
        self.removed: list[QueuedWorkload] = []

    def share(self, name: str) -> float:
        return self.book.share(name, self.weights[name])

    def fits(self) -> bool:
        """Whether the preemptor fits now (counted as admitted while the search runs: taken out for the check)."""
        self.book.add(self.cq, self.usage, -1)
        try:
            return self.book.fits(self.cq, self.usage)
        finally:
            self.book.add(self.cq, self.usage)

    def remove(self, victim: QueuedWorkload) -> bool:
        """``victim`` is preempted (its usage out of the book); True when the preemptor fits now."""
        self.book.add(victim.cluster_queue, usage_of(victim), -1)
        self.removed.append(victim)
        return self.fits()

    def next_queue(self, pools: dict[str, list[QueuedWorkload]], dropped: set[str]) -> str | None:
        """The ClusterQueue of candidates with the highest share (the first of equals); one without candidates, or
        another than the preemptor's that borrows nothing, is dropped. None when none is left."""
        best, best_share = None, -1.0
        for name, pool in pools.items():
            if name in dropped:
                continue
            share = self.share(name)
            if not pool or (share == 0 and name != self.cq):
                dropped.add(name)
            elif share > best_share:
                best, best_share = name, share
        return best

    def first(self, strategy: Strategy, pools: dict[str, list[QueuedWorkload]]) -> tuple[bool, list[QueuedWorkload]]:
        """Victims by the first strategy; (whether the preemptor fits, the candidates the strategy refused)."""
        refused: list[QueuedWorkload] = []
        dropped: set[str] = set()
        while (target := self.next_queue(pools, dropped)) is not None:
            pool = pools[target]
            if target == self.cq:
                if self.remove(pool.pop(0)):
                    return True, refused
                continue
            preemptor, old = self.share(self.cq), self.share(target)
            while pool:
                candidate = pool.pop(0)
                self.book.add(target, usage_of(candidate), -1)
                new = self.share(target)
                self.book.add(target, usage_of(candidate))
                if strategy(preemptor, old, new):
                    if self.remove(candidate):
                        return True, refused
                    break  # the shares moved: choose the queue again
                refused.append(candidate)
        return False, refused

    def second(self, refused: list[QueuedWorkload]) -> bool:
        """Victims among the candidates the first strategy refused, by ``LessThanInitialShare``: at most one per
        ClusterQueue, highest share first; whether the preemptor fits."""
        pools = _by_queue(refused)
        dropped: set[str] = set()
        while (target := self.next_queue(pools, dropped)) is not None:
            candidate = pools[target].pop(0)
            if self.share(self.cq) < self.share(target) and self.remove(candidate):
                return True
            dropped.add(target)
        return False

    def restore(self) -> None:
        for victim in self.removed:
            self.book.add(victim.cluster_queue, usage_of(victim))


def _by_queue(workloads: Iterable[QueuedWorkload]) -> dict[str, list[QueuedWorkload]]:
    pools: dict[str, list[QueuedWorkload]] = {}
    for wl in workloads:
        pools.setdefault(wl.cluster_queue, []).append(wl)
    return pools


def fair_victims(
    preemptor: Preemptor, weights: Mapping[str, float], strategies: tuple[FairSharingStrategy, ...]
) -> list[QueuedWorkload]:
    """The admitted workloads to evict so that the preemptor fits under fair sharing (module docstring;
    ``weights``: each ClusterQueue's ``fairSharing.weight``); empty when no set makes room."""
    book, cq, usage = preemptor.book, preemptor.cq, preemptor.usage
    found = preemption_candidates(preemptor)
    if not found:
        return []
    search = _Search(book, weights, cq.name, usage)
    book.add(cq.name, usage)
    try:
        fits, refused = search.first(STRATEGIES[strategies[0]], _by_queue(found))
        if not fits and len(strategies) > 1:
            fits = search.second(refused)
    finally:
        book.add(cq.name, usage, -1)
    removed = search.removed
    if fits:
        minimize(book, cq.name, usage, removed)
    search.restore()
    return removed if fits else []


__all__ = ["FAIR_SHARING_WHY", "STRATEGIES", "admission_key", "fair_victims"]
