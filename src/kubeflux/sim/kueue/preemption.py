"""Preemption for quota, as Kueue's ``preemption`` package chooses victims for a workload that does not fit
(its classical algorithm, ``preemption.go`` and ``classical/``, in a flat cohort).

Candidates, among the admitted workloads that use a flavor-resource the preemptor needs preempted:

* ``withinClusterQueue``: in its own ClusterQueue, those of lower priority (``LowerPriority``), or also those of
  equal priority queued later (``LowerOrNewerEqualPriority``; Kueue compares the queue-order timestamps, its
  creation or, for a workload evicted since, its eviction);
* ``reclaimWithinCohort``: in the other ClusterQueues of its cohort that use more than their nominal quota of such a
  flavor-resource, those of lower priority (``LowerPriority``) or any (``Any``). When the preemptor fits its own
  queue's nominal quota (Kueue's hierarchical advantage) they may be preempted even if it then borrows; else only
  when it ends within its nominal quota (``borrowWithinCohort`` is not modelled: refused when read).

They are tried in Kueue's order (``CandidatesOrdering``): those already being evicted first, then other
ClusterQueues' before its own, then lower priority first, then the most recently admitted first. Each is removed
(an other ClusterQueue's only while that queue still uses more than its nominal quota) until the preemptor fits,
then those not needed are put back (in reverse, the last removed kept): a minimal set. Kueue makes up to two
attempts (``classicalPreemptions``): letting the preemptor borrow or not. Without borrowing first when its queue
uses less than its nominal quota and no candidate has the hierarchical advantage (the other queues' candidates are
allowed then); with borrowing first when some have it; only with borrowing when no other queue has candidates or its
queue is at or above its nominal quota. None: it waits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kubeflux.sim.kueue.objects import ClusterQueue, ReclaimWithinCohort, WithinClusterQueue
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook
from kubeflux.sim.kueue.workload import QueuedWorkload


@dataclass(frozen=True, slots=True)
class Preemptor:
    """A workload ``wl`` that does not fit its ClusterQueue ``cq`` as it is, and what choosing its victims starts
    from (both algorithms, classical and fair sharing): the quota ``book`` (left as it was), the ``admitted``
    workloads, ``wl``'s ``usage`` of flavor-resources once admitted, those of them it ``needed`` preempted, and the
    refs of the workloads ``evicting`` already."""

    book: QuotaBook
    admitted: Iterable[QueuedWorkload]
    cq: ClusterQueue
    wl: QueuedWorkload
    usage: dict[FlavorResource, int]
    needed: Collection[FlavorResource]
    evicting: Collection[int] = ()


def preemption_candidates(preemptor: Preemptor) -> list[QueuedWorkload]:
    """The admitted workloads the preemptor may preempt in its ClusterQueue (module docstring), in Kueue's order."""
    book, cq, wl, needed, evicting = preemptor.book, preemptor.cq, preemptor.wl, preemptor.needed, preemptor.evicting
    within, reclaim = cq.within_cluster_queue, cq.reclaim_within_cohort
    cohort = book.cohort_of.get(cq.name, "")
    lenders: set[str] = set()
    if cohort and reclaim is not ReclaimWithinCohort.NEVER:
        lenders = {
            other
            for other in book.members[cohort]
            if other != cq.name and any(book.borrowing(other, fr) for fr in needed)
        }
    if within is WithinClusterQueue.NEVER and not lenders:
        return []
    found = []
    for other in preemptor.admitted:
        queue = other.cluster_queue
        if queue == cq.name:
            if within is WithinClusterQueue.NEVER:
                continue
            lower = other.priority < wl.priority
            newer = within is WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY and (
                other.priority == wl.priority and other.timestamp > wl.timestamp
            )
            if not (lower or newer):
                continue
        elif queue not in lenders or not (reclaim is ReclaimWithinCohort.ANY or other.priority < wl.priority):
            continue
        if any(fr in needed for fr in usage_of(other)):
            found.append(other)
    found.sort(
        key=lambda o: (o.ref not in evicting, o.cluster_queue == cq.name, o.priority, -(o.admitted_at or 0.0), -o.seq)
    )
    return found


def victims(preemptor: Preemptor) -> list[QueuedWorkload]:
    """The admitted workloads to evict so that the preemptor fits (module docstring); empty when no set of
    candidates makes room."""
    book, cq, usage, needed = preemptor.book, preemptor.cq, preemptor.usage, preemptor.needed
    candidates = preemption_candidates(preemptor)
    if not candidates:
        return []
    used = book.usage[cq.name]
    advantage = all(used.get(fr, 0) + amount <= book.nominal(cq.name, fr) for fr, amount in usage.items())
    others = any(c.cluster_queue != cq.name for c in candidates)
    under = all(used.get(fr, 0) < book.nominal(cq.name, fr) for fr in needed)
    if not others or (not advantage and not under):
        attempts: tuple[bool, ...] = (True,)
    elif not advantage:
        attempts = (False, True)
    else:
        attempts = (True, False)
    for borrow in attempts:
        removed: list[QueuedWorkload] = []
        fits = False
        for candidate in candidates:
            if candidate.cluster_queue != cq.name:
                if borrow and not advantage:
                    continue  # reclaiming only while the preemptor ends within its nominal quota
                if not any(book.borrowing(candidate.cluster_queue, fr) for fr in needed):
                    continue
            book.add(candidate.cluster_queue, usage_of(candidate), -1)
            removed.append(candidate)
            if _fits(book, cq.name, usage, borrow):
                fits = True
                break
        if fits:
            minimize(book, cq.name, usage, removed, borrow)
        for candidate in removed:
            book.add(candidate.cluster_queue, usage_of(candidate))
        if fits:
            return removed
    return []


def _fits(book: QuotaBook, cq: str, usage: dict[FlavorResource, int], borrow: bool) -> bool:
    """Kueue's ``workloadFits``: ``usage`` fits what ``cq`` may use, and (without ``borrow``) its nominal quota."""
    return book.fits(cq, usage) and (borrow or not book.would_borrow(cq, usage))


def minimize(
    book: QuotaBook, cq: str, usage: dict[FlavorResource, int], removed: list[QueuedWorkload], borrow: bool = True
) -> None:
    """Put back into ``book`` the workloads of ``removed`` (their usage taken out of it, the last one's needed) that
    the preemptor of ``usage`` in ``cq`` does not need to fit (``borrow``: borrowing if need be): in reverse, each one
    that it still fits beside leaves ``removed``. Kueue's last step of both preemption algorithms."""
    for candidate in reversed(removed[:-1]):
        book.add(candidate.cluster_queue, usage_of(candidate))
        if _fits(book, cq, usage, borrow):
            removed.remove(candidate)
        else:
            book.add(candidate.cluster_queue, usage_of(candidate), -1)


def usage_of(wl: QueuedWorkload) -> dict[tuple[str, str], int]:
    return wl.assignment.usage if wl.assignment is not None else {}


def message(victim: QueuedWorkload, preemptor: QueuedWorkload, cq: ClusterQueue, cohort_why: str = "") -> str:
    """Kueue's eviction message (``Preempted to accommodate a workload (…) due to …``); ``cohort_why``: the
    reason of one from another ClusterQueue (reclamation within the cohort by default)."""
    why = (
        "prioritization in the ClusterQueue"
        if victim.cluster_queue == cq.name
        else cohort_why or "reclamation within the cohort"
    )
    return f"Preempted to accommodate a workload ({preemptor.key}) due to {why}"


__all__ = ["message", "minimize", "preemption_candidates", "usage_of", "victims"]
