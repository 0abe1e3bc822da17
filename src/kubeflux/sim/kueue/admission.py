"""Kueue's admission in virtual time: the queues of workloads waiting per ClusterQueue, the admission cycle and
the quota it holds. A functional core: no cluster, no clock of its own (``now`` is an argument); the shell
(:mod:`kubeflux.sim.kueue.layer`) creates the pods of what it admits and evicts what it preempts.

Lifecycle of a :class:`QueuedWorkload`: added (:meth:`Admitter.add`) → *inactive* when its LocalQueue does not
exist, names a ClusterQueue that does not exist, or one that is inactive (a flavor it names does not exist) or
whose ``namespaceSelector`` does not take its namespace (it waits for ever, said in :meth:`Admitter.waiting`) →
else *pending* in its ClusterQueue's queue, ordered by priority (higher first), then by its timestamp (Kueue's
queue-order timestamp: its creation, kept when it is preempted; the time of its last eviction for its pods not ready
in time, with ``waitForPodsReady``'s default ``requeuingStrategy``) → *admitted* by a cycle
(:meth:`Admitter.cycle`: its quota is counted) → *finished* (:meth:`Admitter.finish`: its quota is released) or
*evicted* by a preemption (its quota released once it is gone, :meth:`Admitter.evicted`; pending again a moment
later), or for its pods not ready in time (:meth:`Admitter.time_out`, with ``waitForPodsReady``: its quota
released, it waits out a back-off outside any queue until the shell queues it again, :meth:`Admitter.requeue`, or
is *deactivated* for good). A workload that ends in any state (a Job failed while held) is forgotten
(:meth:`Admitter.forget`): out of its queue, its quota released.

One cycle repeats until nothing more can be admitted: it takes the head of every ClusterQueue (a
``BestEffortFIFO`` queue skips the workloads set aside; its *sticky* head, one that preempts, stays its head until
admitted), orders them (those that fit without borrowing first, then priority, then timestamp) and admits each that
fits (:func:`~kubeflux.sim.kueue.flavors.assign`). A head that does not fit may preempt
(:mod:`kubeflux.sim.kueue.preemption`): as in Kueue, the cycle only issues its victims' evictions (their quota held
until they are gone, :meth:`Admitter.evicted`; a head whose victims another head of the cycle targets already is
skipped), and no other head of its cohort is tried in that cycle; the preemptor waits ("Pending the preemption of
N workload(s)") and takes the room in the next cycle, run by the shell once the victims' pods are gone. A victim
waits in its queue again :data:`REQUEUE_SECONDS` later. A head that neither fits nor preempts blocks its queue until
the next cycle (``StrictFIFO``) or is set aside until quota is released in its cohort (``BestEffortFIFO``).

With fair sharing (:mod:`kubeflux.sim.kueue.fairsharing`), the heads are ordered by their ClusterQueue's share with
them admitted, then priority and timestamp, and taken one at a time (the shares move with each admission); a head
that does not fit preempts by Kueue's fair-sharing strategies.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from kubeflux.sim.kueue.fairsharing import FAIR_SHARING_WHY, admission_key, fair_victims
from kubeflux.sim.kueue.flavors import Assignment, Mode, Possibility, assign
from kubeflux.sim.kueue.objects import (
    ClusterQueue,
    KueueObjects,
    QueueingStrategy,
    ReclaimWithinCohort,
    RequeuingTimestamp,
    namespace_labels,
)
from kubeflux.sim.kueue.preemption import Preemptor, message, victims
from kubeflux.sim.kueue.quota import FlavorResource, QuotaBook
from kubeflux.sim.kueue.workload import QueuedWorkload

CYCLE_ROUNDS_PER_WORKLOAD = 4
"""Rounds of one :meth:`Admitter.cycle` at most, per workload known (plus 16): a guard, as every round admits,
evicts or sets a workload aside; a cycle that reaches it stops (:attr:`Admitter.stopped` says so)."""


REQUEUE_SECONDS = 1.0
"""How long after its eviction for a preemption a workload waits in its queue again. Kueue requeues it once its Job
is suspended and its pods are gone, a round trip of its controllers that takes time even where the pods stop at
once (the simulator's); so a workload evicted at an instant is not admitted again, and does not preempt, at that
instant, which is what keeps preemptions that undo each other from looping there for ever."""


@dataclass(frozen=True, slots=True)
class Admitted:
    workload: QueuedWorkload


@dataclass(frozen=True, slots=True)
class Evicted:
    workload: QueuedWorkload
    message: str


Decision = Admitted | Evicted


class Admitter:
    """The admission core of a set of Kueue objects (see the module docstring)."""

    def __init__(self, objects: KueueObjects) -> None:
        self.objects = objects
        self.book = QuotaBook(objects.cluster_queues.values())
        self.inactive_cqs: dict[str, str] = {}
        for cq in objects.cluster_queues.values():
            missing = [f for g in cq.resource_groups for f, _ in g.flavors if f not in objects.flavors]
            if missing:
                self.inactive_cqs[cq.name] = f"ClusterQueue {cq.name} is inactive: flavor {missing[0]} not found"
        self.pending: dict[str, list[tuple[tuple[int, float, int], QueuedWorkload]]] = {
            name: [] for name in objects.cluster_queues
        }
        self.parked: dict[str, set[int]] = {name: set() for name in objects.cluster_queues}
        """Per ``BestEffortFIFO`` ClusterQueue, the workloads set aside until quota is released in its cohort."""
        self.inactive: list[QueuedWorkload] = []
        self.backing_off: set[int] = set()
        """Workloads evicted for their pods not ready in time, waiting out their back-off (:meth:`time_out`)."""
        self.admitted: dict[int, QueuedWorkload] = {}
        self.workloads: dict[int, QueuedWorkload] = {}
        self._seq = 0
        self._cursor: dict[str, int] = dict.fromkeys(self.pending, 0)
        """Per queue, where the current cycle's search for its head starts (:meth:`_heads`)."""
        self.fair_evictions = 0
        """Workloads evicted by fair sharing from another ClusterQueue (``Fair Sharing within the cohort``)."""
        self.weights = {name: cq.fair_weight for name, cq in objects.cluster_queues.items()}
        self.sticky: dict[str, QueuedWorkload] = {}
        """Per ``BestEffortFIFO`` ClusterQueue, the workload at its head that preempts: it stays the head until admitted
        or gone (Kueue's sticky workload, Kueue#6929), so that the workloads it passed over cannot take the room its
        victims leave."""
        self.evicting: dict[int, QueuedWorkload] = {}
        """Admitted workloads whose eviction a cycle issued, their quota held until they are gone (:meth:`evicted`)."""
        self.stopped = ""
        """Why a cycle stopped before its end (the guard of :data:`CYCLE_ROUNDS_PER_WORKLOAD`); empty when none."""

    # -- workloads come and go ------------------------------------------------------------------------------------
    def add(self, wl: QueuedWorkload, now: float) -> bool:
        """A workload is created now; True when it waits in a ClusterQueue's queue (False: inactive)."""
        self.workloads[wl.ref] = wl
        wl.created = wl.timestamp = now
        local = self.objects.local_queues.get(f"{wl.namespace}/{wl.queue}")
        why = ""
        if local is None:
            why = f"LocalQueue {wl.queue} doesn't exist"
        else:
            cq = self.objects.cluster_queues.get(local.cluster_queue)
            if cq is None:
                why = f"ClusterQueue {local.cluster_queue} doesn't exist"
            elif cq.name in self.inactive_cqs:
                why = self.inactive_cqs[cq.name]
            elif cq.namespace_selector is None or not cq.namespace_selector.matches(self._labels(wl.namespace)):
                why = f"Workload namespace doesn't match ClusterQueue {cq.name} selector"
            else:
                wl.cluster_queue = cq.name
        if why:
            wl.why = why
            self.inactive.append(wl)
            return False
        self._enqueue(wl)
        return True

    def _labels(self, namespace: str) -> dict[str, str]:
        return namespace_labels(namespace, self.objects.namespaces.get(namespace))

    def _enqueue(self, wl: QueuedWorkload) -> None:
        self._cursor[wl.cluster_queue] = 0
        self._seq += 1
        wl.seq = self._seq
        bisect.insort(self.pending[wl.cluster_queue], (wl.order(), wl), key=lambda item: item[0])

    def finish(self, ref: int) -> bool:
        """The admitted workload ``ref`` finished: its quota is released. True when it was admitted."""
        wl = self.admitted.pop(ref, None)
        if wl is None or wl.assignment is None:
            return False
        self.book.add(wl.cluster_queue, wl.assignment.usage, -1)
        self._released(wl.cluster_queue)
        return True

    def time_out(self, ref: int, now: float) -> float | None:
        """The admitted workload ``ref``'s pods were not all ready within ``waitForPodsReady.timeout``: its quota is
        released and it is out of its queue until :meth:`requeue` (returns when: now + its back-off), or, requeued
        ``backoffLimitCount`` times already, deactivated (None: it waits for ever, said in :meth:`waiting`)."""
        config = self.objects.wait_for_pods_ready
        wl = self.admitted[ref]
        assert config is not None
        self.finish(ref)
        wl.admitted_at = None
        if config.backoff_limit_count is not None and wl.timeouts + 1 > config.backoff_limit_count:
            wl.deactivated = True
            wl.why = f"deactivated: its pods not ready in time after {wl.timeouts} requeuing(s) (backoffLimitCount)"
            self.inactive.append(wl)
            return None
        wl.timeouts += 1
        if config.timestamp is RequeuingTimestamp.EVICTION:
            wl.timestamp = now
        wl.why = "its pods were not ready in time: requeued after a back-off"
        self.backing_off.add(ref)
        wl.requeued = now + config.backoff(wl.timeouts)
        return wl.requeued

    def requeue(self, ref: int) -> bool:
        """The workload ``ref``'s back-off is over (:meth:`time_out`): it waits in its queue again. False when it
        ended meanwhile."""
        if ref not in self.backing_off:
            return False
        self.backing_off.discard(ref)
        self._enqueue(self.workloads[ref])
        return True

    def forget(self, ref: int) -> None:
        """The workload ``ref`` ended, whatever its state (a Job failed while held, ...): its quota is released if
        admitted, and it leaves its queue (or the inactive ones) so that no cycle admits it again."""
        self.backing_off.discard(ref)
        self.evicting.pop(ref, None)
        if self.finish(ref):
            return
        wl = self.workloads.get(ref)
        if wl is None:
            return
        queue = self.pending.get(wl.cluster_queue)
        if queue is not None:
            at = bisect.bisect_left(queue, wl.order(), key=lambda item: item[0])
            if at < len(queue) and queue[at][1] is wl:
                queue.pop(at)
                self._unstick(wl)
                self._cursor[wl.cluster_queue] = 0
                self.parked[wl.cluster_queue].discard(ref)
                return
        if wl in self.inactive:
            self.inactive.remove(wl)

    def _unstick(self, wl: QueuedWorkload) -> None:
        if self.sticky.get(wl.cluster_queue) is wl:
            del self.sticky[wl.cluster_queue]

    def _released(self, cq: str) -> None:
        """Quota was released in ``cq``: the workloads set aside in its cohort are tried again."""
        cohort = self.book.cohort_of.get(cq)
        for name in self.book.members[cohort] if cohort else (cq,):
            self.parked[name].clear()
            self._cursor[name] = 0

    # -- the admission cycle ------------------------------------------------------------------------------------
    def cycle(self, now: float) -> list[Decision]:
        """Admit what fits now, and issue the evictions that let the others in where the policies allow (module
        docstring); the decisions in order."""
        decisions: list[Decision] = []
        fair = self.objects.fair_sharing is not None
        self._cursor = dict.fromkeys(self.pending, 0)
        held: set[str] = set()
        """The cohorts (a ClusterQueue without one: its name) where a preemption was issued: the room it makes is its
        preemptor's, so no other head there is tried before the next cycle (Kueue counts a preemptor's usage in its
        cycle's snapshot)."""
        targeted: set[int] = set()
        """The workloads this cycle's preemptions target."""
        for _ in range(CYCLE_ROUNDS_PER_WORKLOAD * len(self.workloads) + 16):
            heads = [wl for wl in self._heads() if self._pool(wl.cluster_queue) not in held]
            if not heads:
                break
            progressed = False
            blocked: set[str] = set()
            for wl, assigned in self._ordered(heads):
                if wl.cluster_queue in blocked or self._pool(wl.cluster_queue) in held:
                    continue
                cq = self.objects.cluster_queues[wl.cluster_queue]
                assignment = self._assign(cq, wl) if progressed else assigned  # quota moved since it was made
                if assignment.mode is Mode.FIT:
                    self._admit(wl, assignment, now)
                    decisions.append(Admitted(wl))
                    progressed = True
                    if fair:
                        break  # the shares moved: order the heads again
                    continue
                found = self._victims(cq, wl, assignment) if assignment.mode is Mode.PREEMPT else []
                if found:
                    held.add(self._pool(cq.name))
                    if cq.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO:
                        self.sticky[cq.name] = wl
                    refs = {victim.ref for victim in found}
                    if refs & targeted:
                        wl.why = f"{assignment.why}. Workload has overlapping preemption targets with another workload"
                        continue
                    targeted |= refs
                    fresh = [victim for victim in found if victim.ref not in self.evicting]
                    for victim in fresh:
                        why = message(victim, wl, cq, FAIR_SHARING_WHY if fair else "")
                        self.evicting[victim.ref] = victim
                        self.fair_evictions += fair and victim.cluster_queue != cq.name
                        decisions.append(Evicted(victim, why))
                    wl.why = f"{assignment.why}. Pending the preemption of {len(found)} workload(s)"
                    progressed = progressed or bool(fresh)
                    continue
                wl.why = assignment.why
                if cq.queueing_strategy is QueueingStrategy.STRICT_FIFO:
                    blocked.add(cq.name)
                else:
                    self.parked[cq.name].add(wl.ref)
                    progressed = True
            if not progressed:
                break
        else:
            self.stopped = f"the admission cycle at {now:g} s stopped after its last round could still admit or evict"
        return decisions

    def _pool(self, cq: str) -> str:
        """The cohort of ``cq`` (``cq`` itself without one): where its quota moves."""
        return self.book.cohort_of.get(cq) or cq

    def _heads(self) -> list[QueuedWorkload]:
        """Each queue's first workload not set aside (a StrictFIFO queue's first), found from the queue's cursor:
        within a cycle the workloads before it are set aside, so each is passed once (the cursor goes back to the
        start when a workload is requeued or the set-aside ones are released)."""
        heads = []
        cursor = self._cursor
        for name, queue in self.pending.items():
            if not queue:
                continue
            if self.objects.cluster_queues[name].queueing_strategy is QueueingStrategy.STRICT_FIFO:
                heads.append(queue[0][1])
                continue
            sticky = self.sticky.get(name)
            if sticky is not None and sticky.ref not in self.parked[name]:
                heads.append(sticky)
                continue
            parked = self.parked[name]
            at = cursor[name]
            while at < len(queue) and queue[at][1].ref in parked:
                at += 1
            cursor[name] = at
            if at < len(queue):
                heads.append(queue[at][1])
        return heads

    def _assign(self, cq: ClusterQueue, wl: QueuedWorkload) -> Assignment:
        """``wl``'s flavors in ``cq`` now, each flavor that needs preemption judged by a simulated one (Kueue's
        preemption oracle)."""

        def oracle(fr: FlavorResource, amount: int) -> Possibility:
            found = self._find_victims(cq, wl, {fr: amount}, {fr})
            if not found:
                return Possibility.NO_CANDIDATES
            return Possibility.PREEMPT if any(v.cluster_queue == cq.name for v in found) else Possibility.RECLAIM

        fair = self.objects.fair_sharing is not None
        borrowing = fair and cq.reclaim_within_cohort is not ReclaimWithinCohort.NEVER
        return assign(cq, self.objects.flavors, self.book, wl.requests, wl.constraints(), oracle, borrowing)

    def _victims(self, cq: ClusterQueue, wl: QueuedWorkload, assignment: Assignment) -> list[QueuedWorkload]:
        return self._find_victims(cq, wl, assignment.usage, assignment.needs)

    def _find_victims(
        self, cq: ClusterQueue, wl: QueuedWorkload, usage: dict[FlavorResource, int], needed: set[FlavorResource]
    ) -> list[QueuedWorkload]:
        fair = self.objects.fair_sharing
        preemptor = Preemptor(self.book, self.admitted.values(), cq, wl, usage, needed, self.evicting)
        if fair is None:
            return victims(preemptor)
        return fair_victims(preemptor, self.weights, fair.strategies)

    def _ordered(self, heads: list[QueuedWorkload]) -> list[tuple[QueuedWorkload, Assignment]]:
        """The heads in Kueue's order: those that fit without borrowing first, then by priority and timestamp (with
        fair sharing: by their queue's share once admitted, then priority and timestamp)."""
        scored: list[tuple[tuple[float, int, float, int], QueuedWorkload, Assignment]] = []
        fair = self.objects.fair_sharing is not None
        for wl in heads:
            cq = self.objects.cluster_queues[wl.cluster_queue]
            assignment = self._assign(cq, wl)
            if fair:
                scored.append((admission_key(self.book, cq, wl, assignment.usage), wl, assignment))
                continue
            borrows = assignment.mode is not Mode.FIT or self.book.would_borrow(wl.cluster_queue, assignment.usage)
            scored.append(((float(borrows), -wl.priority, wl.timestamp, wl.seq), wl, assignment))
        scored.sort(key=lambda item: item[0])
        return [(wl, assignment) for _, wl, assignment in scored]

    def _admit(self, wl: QueuedWorkload, assignment: Assignment, now: float) -> None:
        queue = self.pending[wl.cluster_queue]
        at = bisect.bisect_left(queue, wl.order(), key=lambda item: item[0])
        queue.pop(at)
        self._unstick(wl)
        if at < self._cursor[wl.cluster_queue]:
            self._cursor[wl.cluster_queue] -= 1
        self.book.add(wl.cluster_queue, assignment.usage)
        wl.assignment, wl.admitted_at, wl.why = assignment, now, ""
        wl.waits.append(now - (wl.created if wl.requeued is None else wl.requeued))
        if wl.first_admitted is None:
            wl.first_admitted = now
        self.admitted[wl.ref] = wl

    def evicted(self, ref: int, now: float) -> float | None:
        """The workload ``ref``, whose eviction a cycle issued, is gone from the cluster (its pods deleted): its
        quota is released at once, and it waits in its place again (Kueue orders a preempted workload by its
        creation, with the ``PrioritySortingWithinCohort`` gate on by default) from :data:`REQUEUE_SECONDS` later,
        when the shell calls :meth:`requeue` (returns when). None when it was not being evicted."""
        wl = self.evicting.pop(ref, None)
        if wl is None:
            return None
        self.finish(ref)
        wl.evictions += 1
        wl.admitted_at = None
        wl.requeued = now + REQUEUE_SECONDS
        self.backing_off.add(ref)
        return wl.requeued

    # -- reading --------------------------------------------------------------------------------------------------
    def usage(self, cq: str) -> dict[FlavorResource, int]:
        return self.book.usage[cq]

    def waiting(self) -> list[QueuedWorkload]:
        """The workloads not admitted now (inactive, pending, or waiting out a back-off), inactive first."""
        pending = [wl for queue in self.pending.values() for _, wl in queue]
        return [*self.inactive, *pending, *(self.workloads[ref] for ref in sorted(self.backing_off))]


__all__ = [
    "CYCLE_ROUNDS_PER_WORKLOAD",
    "REQUEUE_SECONDS",
    "Admitted",
    "Admitter",
    "Decision",
    "Evicted",
    "QueuedWorkload",
]
