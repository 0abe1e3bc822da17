"""Preemption for quota, as Kueue's ``preemption`` package chooses victims for a workload that does not fit.

Candidates, among the admitted workloads that use a flavor-resource the preemptor needs:

* ``withinClusterQueue``: in its own ClusterQueue, those of lower priority (``LowerPriority``), or also those of
  equal priority queued later (``LowerOrNewerEqualPriority``; Kueue compares the queue-order timestamps, its
  creation or, for a workload evicted since, its eviction);
* ``reclaimWithinCohort``: in the other ClusterQueues of its cohort that borrow, those of lower priority
  (``LowerPriority``) or any (``Any``) — only when the preemptor's ClusterQueue stays within its nominal quota
  once it is admitted (it reclaims what it lent; it may not borrow by preempting).

They are tried in Kueue's order: other ClusterQueues' first, then lower priority first, then the most recently
admitted first; each is removed (an other ClusterQueue's only while that queue still borrows) until the preemptor
fits, then those not needed are put back (the last removed kept): a minimal set. When the candidates come from its
cohort, the preemptor must fit without borrowing. None: it waits.
"""

from __future__ import annotations

from collections.abc import Iterable

from kubeflux.sim.kueue.flavors import Assignment
from kubeflux.sim.kueue.objects import ClusterQueue, ReclaimWithinCohort, WithinClusterQueue
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook
from kubeflux.sim.kueue.workload import QueuedWorkload


def preemption_candidates(
    book: QuotaBook,
    admitted: Iterable[QueuedWorkload],
    cq: ClusterQueue,
    wl: QueuedWorkload,
    needed: set[FlavorResource],
) -> list[QueuedWorkload]:
    """The admitted workloads ``wl`` may preempt in ``cq`` (module docstring), in Kueue's order; ``needed``: the
    flavor-resources it needs preempted."""
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
    for other in admitted:
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
        usage = other.assignment.usage if other.assignment is not None else {}
        if needed.intersection(usage):
            found.append(other)
    found.sort(key=lambda o: (o.cluster_queue == cq.name, o.priority, -(o.admitted_at or 0.0), -o.seq))
    return found


def victims(
    book: QuotaBook, admitted: Iterable[QueuedWorkload], cq: ClusterQueue, wl: QueuedWorkload, assignment: Assignment
) -> list[tuple[QueuedWorkload, str]]:
    """The workloads of ``admitted`` to evict so that ``wl`` fits ``cq`` with ``assignment`` (module docstring),
    each with the message of its eviction; empty when no set of candidates makes room. ``book`` is left as it was."""
    usage = assignment.usage
    needed = set(usage)
    if cq.within_cluster_queue is WithinClusterQueue.NEVER and book.would_borrow(cq.name, usage):
        return []  # reclaiming only, and it would borrow: no candidate may be preempted for it
    candidates = preemption_candidates(book, admitted, cq, wl, needed)
    if not candidates:
        return []
    cross = any(c.cluster_queue != cq.name for c in candidates)
    if cross and book.would_borrow(cq.name, usage):
        candidates = [c for c in candidates if c.cluster_queue == cq.name]  # no reclaiming in order to borrow
        cross = False
    borrow = not cross
    removed: list[QueuedWorkload] = []
    fits = False
    for candidate in candidates:
        if candidate.cluster_queue != cq.name and not any(book.borrowing(candidate.cluster_queue, fr) for fr in needed):
            continue
        book.add(candidate.cluster_queue, usage_of(candidate), -1)
        removed.append(candidate)
        if book.fits(cq.name, usage, borrow):
            fits = True
            break
    if fits:
        minimize(book, cq.name, usage, removed, borrow)
    for candidate in removed:
        book.add(candidate.cluster_queue, usage_of(candidate))
    if not fits:
        return []
    return [(victim, message(victim, wl, cq)) for victim in removed]


def minimize(
    book: QuotaBook, cq: str, usage: dict[FlavorResource, int], removed: list[QueuedWorkload], borrow: bool = True
) -> None:
    """Put back into ``book`` the workloads of ``removed`` (their usage taken out of it, the last one's needed) that
    the preemptor of ``usage`` in ``cq`` does not need to fit (``borrow``: borrowing if need be): in reverse, each one
    that it still fits beside leaves ``removed``. Kueue's last step of both preemption algorithms."""
    for candidate in reversed(removed[:-1]):
        book.add(candidate.cluster_queue, usage_of(candidate))
        if book.fits(cq, usage, borrow):
            removed.remove(candidate)
        else:
            book.add(candidate.cluster_queue, usage_of(candidate), -1)


def usage_of(wl: QueuedWorkload) -> dict[tuple[str, str], int]:
    return wl.assignment.usage if wl.assignment is not None else {}


def message(victim: QueuedWorkload, preemptor: QueuedWorkload, cq: ClusterQueue, cohort_why: str = "") -> str:
    """Kueue's eviction message (``Preempted to accommodate a workload (UID: …) due to …``); ``cohort_why``: the
    reason of one from another ClusterQueue (reclamation within the cohort by default)."""
    why = (
        "prioritization in the ClusterQueue"
        if victim.cluster_queue == cq.name
        else cohort_why or "reclamation within the cohort"
    )
    return f"Preempted to accommodate a workload ({preemptor.key}) due to {why}"


__all__ = ["message", "minimize", "preemption_candidates", "usage_of", "victims"]
