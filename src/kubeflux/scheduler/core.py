"""The kubeflux scheduler core: pods and pod groups placed by the graph engine, with queueing and backfill.

It implements :class:`kubeflux.scheduler.interface.Scheduler`: no I/O, no clock (``now`` is an argument, in
seconds; the engine's time axis is whole seconds from 0, so Unix time and simulated time both fit its horizon).

**Informer logic** (:meth:`KubefluxScheduler.observe`): in :mod:`kubeflux.scheduler.informer` — each pod that
ends releases its own allocation, other schedulers' pods are counted and replayed onto their node, nodes change
the graph in place.

**One scheduling pass** (:meth:`KubefluxScheduler.schedule`), in named phases:

1. *re-plan*: cancel the reservations of the previous pass; account pods bound by others (or recovered). A
   pass after nothing but new arrivals keeps the reservations and tries only the new jobs (an incremental
   pass), unless one of them sorts before the blocked head;
2. *order*: ready jobs by priority, arrival, first sight (:mod:`kubeflux.scheduler.queue`), at most
   ``queue_depth`` of them;
3. *filter*: per pod, kube-scheduler's filters (:mod:`kubeflux.scheduler.constraints`) and the exact ledger
   (:mod:`kubeflux.scheduler.ledger`), kept incrementally (:mod:`kubeflux.scheduler.fit`); unfit nodes are
   hidden from the engine for that match (:mod:`kubeflux.scheduler.graphview`);
4. *match*: one engine job per pod (:mod:`kubeflux.scheduler.translate`), all members of a group or none;
5. *reserve*: a job that does not fit now gets a reservation (``allocate_orelse_reserve``; a gang as one engine
   job, so its members share one start): under ``fcfs`` only the first blocked job, and nothing passes it;
   under ``easy`` the first blocked job, and later jobs start only when they fit now around it; under
   ``conservative`` every blocked job in the queue depth;
6. *decide*: :class:`Bind` (with the :data:`ALLOCATION_ANNOTATION` for recovery), else ``Unschedulable`` with
   kube-scheduler's message and the expected start of the reservation, or :class:`Reject` when no node could
   ever host the pod.

A gang waiting longer than its ``scheduleTimeoutSeconds`` is released (its reservation dropped) and retried after
a back-off that doubles from :attr:`group_backoff` up to :attr:`max_backoff`.

**Recovery**: a restarted scheduler is fed every pod and node again; a bound pod of its own carrying the
allocation annotation is re-applied to the engine at its original start and node before anything new is
placed, so nothing is double-booked.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from enum import StrEnum

from kubeflux.match.engine import DEFAULT_HORIZON, MatchOp
from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.constraints import fit_error_message
from kubeflux.scheduler.fit import NodeFit, StaticFit
from kubeflux.scheduler.informer import ALLOCATION_ANNOTATION, Allocation, ClusterBooks
from kubeflux.scheduler.interface import Bind, Decision, Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, MEMORY, PODS, Node, Pod
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.sharing import SharedSharing, SharingPolicy
from kubeflux.scheduler.translate import (
    Placement,
    PodRequestError,
    gang_jobspec,
    placement_from_output,
    pod_policy,
)

__all__ = ["ALLOCATION_ANNOTATION", "Allocation", "Backfill", "KubefluxScheduler"]

REASON_RESERVED = "node(s) had no free cores for the pod's planned time (reserved for pods ahead in the queue)"


class Backfill(StrEnum):
    FCFS = "fcfs"
    EASY = "easy"
    CONSERVATIVE = "conservative"


class KubefluxScheduler(ClusterBooks):
    """The kubeflux scheduler (see the module docstring). ``name`` is the ``schedulerName`` it owns."""

    def __init__(
        self,
        name: str = "kubeflux",
        *,
        policy: str = "lonode",
        backfill: Backfill | str = Backfill.EASY,
        queue_depth: int = 64,
        sharing: SharingPolicy | None = None,
        horizon: int = DEFAULT_HORIZON,
        group_backoff: float = 10.0,
        max_backoff: float = 300.0,
        log_limit: int = 10_000,
    ) -> None:
        parse_policy(policy)
        if queue_depth < 1:
            raise ValueError(f"queue_depth must be at least 1, got {queue_depth}")
        super().__init__(name, policy, sharing or SharedSharing(), horizon, log_limit)
        self.backfill = Backfill(backfill)
        self.queue_depth = queue_depth
        self.group_backoff = group_backoff
        self.max_backoff = max_backoff
        self._planned_epoch = -1
        self._head: PendingJob | None = None
        self._wake: float | None = None

    # ================================================================== schedule (one pass)

    def schedule(self, now: float) -> list[Decision]:
        self._now = now
        if self.graph is not None:
            self._extend_overruns(now)
        due = self._wake is not None and now >= self._wake
        if not self._dirty and not due:
            return []
        self._dirty = False
        self._wake = None
        out: list[Decision] = self._take_notices()  # rejects and warnings the informer found while observing
        if self._ensure_graph() is None:
            for job in self.queue.jobs.values():
                self._report(job, fit_error_message(len(self.nodes), {}), None, out)
            return out
        ordered = self.queue.ordered()
        head = self._head
        full = (
            due
            or self._epoch != self._planned_epoch
            or head is None
            or head.key not in self.queue.jobs
            or any(job.tried_epoch != self._epoch and job.order() < head.order() for job in ordered)
        )
        if full:
            self._cancel_reservations()
            self._account_unaccounted()
            self._head = None
            self._planned_epoch = self._epoch
        self._pass(ordered, now, full, out)
        return out

    def _pass(self, ordered: list[PendingJob], now: float, full: bool, out: list[Decision]) -> None:
        """Try the queue in order; on an incremental pass only the jobs not tried since the last change."""
        blocked = 0 if full else 1
        considered = 0
        for job in ordered:
            if considered >= self.queue_depth:
                break
            missing = self.queue.missing_members(job)
            if missing:
                self._report_group_waiting(job, out)
                continue
            if job.ready_since is None:
                job.ready_since = now
            if job.retry_at > now:
                self._wake_at(job.retry_at)
                continue
            considered += 1
            if not full and job.tried_epoch == self._epoch:
                timeout = self.queue.timeout(job)
                if timeout is not None and job.ready_since is not None:
                    self._wake_at(job.ready_since + timeout)  # keep its timeout's wake-up
                continue
            job.tried_epoch = self._epoch
            if self._timed_out(job, now, out):
                continue
            if self.backfill is Backfill.FCFS and blocked:
                self._report(job, self._behind_message(job), None, out)
                continue
            try:
                reasons = self._place_now(job, now, out)
            except PodRequestError as exc:
                self._reject(job, str(exc), out)
                continue
            if reasons is None or self._never(job, out):
                continue
            reserve = self.backfill is Backfill.CONSERVATIVE or blocked == 0
            if blocked == 0:
                self._head = job
            blocked += 1
            expected = self._reserve(job, now) if reserve else None
            gang = f"pod group {job.key} needs its {len(job.pods)} pods placed at once." if job.group else ""
            self._report(job, fit_error_message(len(self.nodes), reasons, post_filter_message=gang), expected, out)

    def next_wakeup(self, now: float) -> float | None:
        return self._wake if self._wake is not None and self._wake > now else None

    def _wake_at(self, t: float) -> None:
        if self._wake is None or t < self._wake:
            self._wake = t

    def _cancel_reservations(self) -> None:
        for job in self.queue.jobs.values():
            self._cancel_job_reservations(job)

    def _timed_out(self, job: PendingJob, now: float, out: list[Decision]) -> bool:
        timeout = self.queue.timeout(job)
        if timeout is None or job.ready_since is None:
            return False
        if now - job.ready_since < timeout:
            self._wake_at(job.ready_since + timeout)
            return False
        job.backoff = min(self.max_backoff, job.backoff * 2 if job.backoff else self.group_backoff)
        job.retry_at = now + job.backoff
        job.ready_since = None
        self._wake_at(job.retry_at)
        why = (
            f"pod group {job.key} did not fit within its scheduleTimeoutSeconds of {timeout:g}; "
            f"released, retrying in {job.backoff:g} s"
        )
        message = fit_error_message(len(self.nodes), {}, pre_filter_message=why)
        self.log.append(message)
        self._report(job, message, None, out)
        return True

    # ================================================================== filter, match, reserve

    def _static_fit(self, pod: Pod) -> StaticFit:
        """The graph nodes passing the usage-independent filters for pods constrained like ``pod``."""
        known = self._fits.known_static(pod)
        if known is not None:
            return known
        graph = self.graph
        assert graph is not None
        outside = sum(1 for name in self.nodes if name not in graph.specs)
        usable = [name for name in graph.specs if graph.usable(name)] if graph.gone else graph.specs
        return self._fits.static(pod, usable, self.nodes, outside)

    def _shortfall(self, name: str, pod: Pod) -> list[str]:
        node = self.nodes[name]
        short = self.ledger.shortfall(pod.requests, name, node.allocatable)
        if not short and self.sharing.name != "shared":
            short = self.own.shortfall(pod.requests, name, self.sharing.share(node))
        return short

    def _fit(self, pod: Pod) -> NodeFit:
        """The graph nodes that may take ``pod`` now."""
        return self._fits.fit(pod, self._static_fit(pod), self._shortfall)

    def _reasons(self, pod: Pod) -> Counter[str]:
        """Why each node may not take ``pod`` now, counted as kube-scheduler counts them."""
        return self._fit(pod).reasons()

    def _place_now(self, job: PendingJob, now: float, out: list[Decision]) -> Counter[str] | None:
        """Place every pod of ``job`` now, or none; None when bound, else why not (kube-scheduler reasons)."""
        start = self._tick(now)
        if len(job.pods) > 1:
            short = self._first_short_member(job)
            if short is not None:
                return self._reasons(short)
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod in job.pods.items():
            fit = self._fit(pod)
            try:
                alloc = self._place_pod(uid, pod, fit, start) if fit.any else None
            except PodRequestError:
                for _, placed in made:
                    self._release(placed.uid, "gang rejected")
                raise
            if alloc is None:
                for _, placed in made:
                    self._release(placed.uid, "gang incomplete")
                reasons = self._reasons(pod)
                if fit.any and not made:
                    reasons[REASON_RESERVED] += len(fit.fitting())
                return reasons
            made.append((pod, alloc))
        for pod, alloc in made:
            record = {
                "jobid": alloc.jobid,
                "node": alloc.node,
                "cores": list(alloc.placement.cores) if alloc.placement else [],
                "gpus": list(alloc.placement.gpus) if alloc.placement else [],
                "cpu": pod.requests.get(CPU, 0),
                "memory": pod.requests.get(MEMORY, 0),
                "start": alloc.start,
                "duration": alloc.duration,
            }
            text = json.dumps(record, sort_keys=True, separators=(",", ":"))
            out.append(Bind(pod.key, pod.uid, alloc.node, {ALLOCATION_ANNOTATION: text}))
        self.queue.remove_job(job)
        return None

    def _first_short_member(self, job: PendingJob) -> Pod | None:
        """A quick test before matching a gang pod by pod: pack the members first fit into the free amounts the
        exact books show; the first member that finds no room (None when all do). Packing may fail where the
        matcher would succeed only in rare fragmented cases; the gang is then tried again on the next change.

        Members alike (same requests and constraints) pack first fit node after node, each node taking as many
        as fit in it, so the first short one is the one after the sum of those counts."""
        pods = list(job.pods.values())
        first = pods[0]
        if PODS not in first.requests and all(_alike(pod, first) for pod in pods):
            wanted = len(pods)
            packed = 0
            for name in self._fit(first).fitting():
                copies = _copies(self._room(name), first.requests)
                if copies is None:
                    return None
                packed += copies
                if packed >= wanted:
                    return None
            return pods[packed]
        free: dict[str, dict[str, int]] = {}
        for pod in pods:
            for name in self._fit(pod).fitting():
                room = free.get(name)
                if room is None:
                    room = free[name] = self._room(name)
                if all(room.get(res, 0) >= amount for res, amount in pod.requests.items() if amount > 0) and (
                    room.get(PODS, 1) >= 1
                ):
                    for res, amount in pod.requests.items():
                        room[res] = room.get(res, 0) - amount
                    if PODS in room:
                        room[PODS] -= 1
                    break
            else:
                return pod
        return None

    def _room(self, name: str) -> dict[str, int]:
        """What kubeflux may still use of node ``name`` by the exact books (under its sharing policy)."""
        node = self.nodes[name]
        if self.sharing.name == "shared":
            alloc, used = node.allocatable, self.ledger.on(name)
        else:
            alloc, used = self.sharing.share(node), self.own.on(name)
        return {res: amount - used.get(res, 0) for res, amount in alloc.items()}

    def _place_pod(self, uid: str, pod: Pod, fit: NodeFit, start: int) -> Allocation | None:
        duration = self._planned(pod, start)
        result = self._match(MatchOp.ALLOCATE, pod, duration, start, fit.hidden)
        placement: Placement | None = None
        if result is None:  # takes no core or gpu: the policy's node among those the books can take it on
            assert self.graph is not None
            chosen = self.graph.preferred_node(fit.fits, pod_policy(pod, self.policy), start)
            assert chosen is not None
            node, jobid = chosen, 0
        elif not result.matched:
            return None
        else:
            placement = placement_from_output(result.resources)
            node, jobid = placement.node, result.jobid
        self.ledger.take(uid, node, pod.requests)
        self.own.take(uid, node, pod.requests)
        self._fits.changed(node)
        alloc = Allocation(uid, pod.key, node, True, jobid, start, duration, placement)
        self.allocations[uid] = alloc
        if jobid:
            heapq.heappush(self._ends, (start + duration, uid))
        self._bound[uid] = pod
        self._uid_by_key[pod.key] = uid
        return alloc

    def _reserve(self, job: PendingJob, now: float) -> float | None:
        """Reserve ``job`` at the earliest time the engine finds (``allocate_orelse_reserve``); its start or None.

        A lone pod reserves its own slot. A gang reserves all its slots as one engine job, so all members start
        at one time, on the nodes every member may use; when members differ, each slot takes the largest
        member's cores and gpus (the reservation covers every member, at the price of holding a little more).
        None (nothing held) when no time is found, or when the engine's cores are free now and only the exact
        books (memory, millicores, pod count) stop the job.
        """
        assert self.graph is not None
        start = self._tick(now)
        pods = list(job.pods.values())
        hide: set[str] = set()
        for pod in pods:
            hide |= self._static_fit(pod).unfit
        if len(pods) == 1:
            duration = self._planned(pods[0], start, reserve=True)
            result = self._match(MatchOp.ALLOCATE_ORELSE_RESERVE, pods[0], duration, start, hide)
        else:
            duration = max(self._planned(pod, start, reserve=True) for pod in pods)
            gang = gang_jobspec(pods, duration, job.key, cover=True)
            result = None
            if gang is not None:
                result = self.graph.match(MatchOp.ALLOCATE_ORELSE_RESERVE, gang, job.key, start, hide)
        if result is None or not result.matched:
            return None
        job.reservations.append(result.jobid)
        if result.at <= start:
            self._cancel_job_reservations(job)
            return None
        job.expected_start = float(result.at)
        return job.expected_start

    # ================================================================== decisions

    def _never(self, job: PendingJob, out: list[Decision]) -> bool:
        """Reject the job when one of its pods is larger than any node even empty; True when rejected.

        Only size rejects: a pod that no node's labels, taints or cordon admit stays queued (Unschedulable),
        since nodes change.
        """
        for pod in job.pods.values():
            why = self._fits.never(pod, self._empty_nodes)
            if why is not None:
                self._reject(job, why, out)
                return True
        return False

    def _empty_nodes(self) -> list[Node]:
        """The usable graph nodes, empty, with kubeflux's share of each (the sharing policy) as allocatable."""
        graph = self.graph
        assert graph is not None
        return [
            Node(name, allocatable=self.sharing.share(node)) for name, node in self.nodes.items() if graph.usable(name)
        ]

    def _reject(self, job: PendingJob, message: str, out: list[Decision]) -> None:
        for pod in job.pods.values():
            out.append(Reject(pod.key, pod.uid, message))
        self.log.append(f"Rejected {job.key}: {message}")
        self._cancel_job_reservations(job)
        self.queue.drop(job)

    def _report(self, job: PendingJob, message: str, expected: float | None, out: list[Decision]) -> None:
        for uid, pod in job.pods.items():
            said = (message, expected)
            if job.told.get(uid) != said:
                job.told[uid] = said
                out.append(Unschedulable(pod.key, pod.uid, message, expected))

    def _behind_message(self, job: PendingJob) -> str:
        head = self._head.key if self._head is not None else "an earlier job"
        why = f"waiting in FCFS order behind {head}"
        return fit_error_message(len(self.nodes), {}, pre_filter_message=why)

    def _report_group_waiting(self, job: PendingJob, out: list[Decision]) -> None:
        group = self.queue.groups.get(job.key)
        if group is None:
            why = f"pod group {job.key} does not exist (yet)"
        else:
            why = f"pod group {job.key} has {len(job.pods)} of its minMember {group.min_member} pods"
        self._report(job, fit_error_message(len(self.nodes), {}, pre_filter_message=why), None, out)


def _alike(pod: Pod, other: Pod) -> bool:
    """Whether the two pods request the same and are constrained alike (one fit shape)."""
    return pod is other or (
        pod.requests == other.requests
        and pod.node_selector == other.node_selector
        and pod.tolerations == other.tolerations
        and pod.required_node_affinity == other.required_node_affinity
    )


def _copies(room: dict[str, int], requests: dict[str, int]) -> int | None:
    """How many pods requesting ``requests`` fit in ``room`` (None: any number)."""
    counts = [max(0, room.get(res, 0) // amount) for res, amount in requests.items() if amount > 0]
    if PODS in room:
        counts.append(max(0, room[PODS]))
    return min(counts) if counts else None
