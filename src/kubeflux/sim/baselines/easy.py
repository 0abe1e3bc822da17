"""EASY backfilling on whole jobs (Lifka's Extensible Argonne Scheduling sYstem, as in every HPC simulator).

The queue is FCFS (see :mod:`kubeflux.sim.baselines.fcfs`), but when the head job does not fit it gets a
*reservation*: the earliest time its pods fit, found by releasing the running jobs' resources in order of their
expected end (start + walltime: the pod's ``kubeflux.io/walltime`` annotation, which the simulator fills from the
workload's requested time or else the run time; a job without one never ends in this plan). That time is the
*shadow time*, and the nodes the head would take then are its reserved nodes.

A later job may start now (backfill) when all its pods fit now and either

* it is expected to end by the shadow time, or
* it uses none of the head's reserved nodes ("the extra nodes"), so the head's placement at the shadow time
  stays possible.

Either way the head is never delayed by a backfilled job that respects its walltime. Candidates are tried in
queue order. The reservation is recomputed only when the cluster changed (a release, another scheduler's bind,
a node change) or the head changed; when nothing was released, only newly queued jobs are tried for backfill.
Pods of other schedulers are assumed to hold their resources until they end (no walltime is known for them).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort

from kubeflux.scheduler.interface import Decision
from kubeflux.scheduler.objects import Pod
from kubeflux.sim.baselines.fcfs import FCFSScheduler, QueuedJob, RunningJob


class Reservation:
    """The head job's reservation: its shadow time (seconds; ``inf`` when no plan frees enough) and nodes."""

    __slots__ = ("head", "nodes", "shadow", "version")

    def __init__(self, head: str, shadow: float, nodes: set[int], version: int) -> None:
        self.head = head
        self.shadow = shadow
        self.nodes = nodes
        self.version = version


class EasyScheduler(FCFSScheduler):
    """EASY backfilling (see the module docstring). ``name`` is the ``schedulerName`` it owns."""

    def __init__(self, name: str = "easy") -> None:
        super().__init__(name)
        self._ends: list[tuple[float, int, str]] = []
        """Running jobs of this scheduler by expected end: (end, seq, job key)."""
        self._resv: Reservation | None = None
        self._backfill_released = -1
        self.reservation: Reservation | None = None
        """The current head's reservation, for inspection (None when nothing waits)."""

    def _job_started(self, job: RunningJob) -> None:
        insort(self._ends, (job.end, job.seq, job.key))

    def _job_ended(self, job: RunningJob) -> None:
        entry = (job.end, job.seq, job.key)
        ends = self._ends
        at = bisect_left(ends, entry)
        if at < len(ends) and ends[at] == entry:
            del ends[at]

    # -- the reservation ----------------------------------------------------------------------------------------
    def _reserve(self, head: QueuedJob, now: float) -> Reservation:
        """Find the head's shadow time and nodes by releasing running jobs in expected-end order, then restore."""
        cap = self.cap
        placed = self._placed
        running = self._running
        ends = self._ends
        given: list[tuple[Pod, int]] = []
        shadow, nodes = math.inf, set[int]()
        k, n = 0, len(ends)
        while k < n:
            at = ends[k][0]
            if at == math.inf:
                break
            while k < n and ends[k][0] == at:
                job = running[ends[k][2]]
                for (pod, i), key in zip(job.allocs, job.keys, strict=True):
                    if placed.get(pod.uid or key) == i:
                        cap.untake(i, pod)
                        given.append((pod, i))
                k += 1
            allocs = self._try_place(head)
            if allocs is not None:
                shadow, nodes = max(at, now), {i for _, i in allocs}
                for pod, i in allocs:
                    cap.untake(i, pod)
                break
        for pod, i in given:
            cap.take(i, pod)
        return Reservation(head.key, shadow, nodes, cap.version)

    # -- the scheduling pass ------------------------------------------------------------------------------------
    def schedule(self, now: float) -> list[Decision]:
        out: list[Decision] = []
        if not self._queue:
            self._fresh.clear()
            self.reservation = None
            return out
        cap = self.cap
        head = self._start_head(now, out)
        if head is None:
            self._fresh.clear()
            self.reservation = None
            return out
        resv = self._resv
        recomputed = resv is None or resv.head != head.key or resv.version != cap.version or resv.shadow < now
        if recomputed:
            resv = self._reserve(head, now)
        assert resv is not None
        expected = resv.shadow if resv.shadow < math.inf else None
        self._report(head, f"job {head.key} waits for a reservation (EASY backfilling)", out, expected)
        full = recomputed or self._backfill_released != cap.released
        candidates = self._queue[1:] if full else [j for j in self._fresh if j.queued and j is not head]
        started = False
        for job in candidates:
            if not self._fits_totals(job):
                continue
            short = now + job.walltime <= resv.shadow  # ends before the head's start: any free node will do
            allocs = self._try_place(job, None if short else resv.nodes)
            if allocs is not None:
                self._start(job, allocs, now, out)
                job.queued = False
                started = True
        if started:
            self._queue = [j for j in self._queue if j.queued]
        self._backfill_released = cap.released
        resv.version = cap.version
        self._resv = self.reservation = resv
        self._fresh.clear()
        return out


__all__ = ["EasyScheduler", "Reservation"]
