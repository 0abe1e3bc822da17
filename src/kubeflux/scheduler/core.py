"""The kubeflux scheduler: pods and pod groups placed by the graph engine, with queueing and backfill.

It implements :class:`kubeflux.scheduler.interface.Scheduler`: no I/O, no clock (``now`` is an argument, in
seconds; the engine's time axis is whole seconds from 0, so Unix time and simulated time both fit its horizon).

:class:`KubefluxScheduler` owns its parts, each usable and tested on its own, as kube-scheduler has a cache, a
scheduling queue and a framework:

* :attr:`~KubefluxScheduler.books` (:class:`~kubeflux.scheduler.books.ClusterBooks`): nodes, the exact books,
  allocations and the engine's graph;
* :attr:`~KubefluxScheduler.informer` (:class:`~kubeflux.scheduler.informer.Informer`): cluster events into the
  books and the queue (:meth:`KubefluxScheduler.observe`, :meth:`KubefluxScheduler.unreserve`);
* :attr:`~KubefluxScheduler.queue` (:class:`~kubeflux.scheduler.queue.PendingQueue`): the waiting jobs;
* :attr:`~KubefluxScheduler.filter` (:class:`~kubeflux.scheduler.filtering.NodeFilter`): which nodes may take a
  pod, by the books;
* :attr:`~KubefluxScheduler.placer` (:class:`~kubeflux.scheduler.placing.Placer`) and
  :attr:`~KubefluxScheduler.reserver` (:class:`~kubeflux.scheduler.reserving.Reserver`): engine matches now and
  reservations for later;
* :attr:`~KubefluxScheduler.preemptor` (:class:`~kubeflux.scheduler.preempting.Preemptor`): whole lower-priority
  jobs evicted for a job that cannot start now;
* :attr:`~KubefluxScheduler.profile` (:class:`~kubeflux.scheduler.profile.Profile`): the settings they share.

**One scheduling pass** (:meth:`KubefluxScheduler.schedule`), in named phases:

1. *snapshot*: the books brought to ``now`` (pods past their planned end extended, engine jobs lost replayed);
2. *pop*: ready jobs by priority, arrival, first sight (:mod:`kubeflux.scheduler.queue`), at most ``queue_depth``
   of them;
3. *re-plan*: cancel the reservations of the previous pass; account pods bound by others (or recovered). A pass
   after nothing but new arrivals keeps the reservations and tries only the new jobs (an incremental pass),
   unless one of them sorts before the blocked head;
4. *place*: per pod, kube-scheduler's filters (:mod:`kubeflux.scheduler.constraints`) and the exact ledger
   (:mod:`kubeflux.scheduler.ledger`), kept incrementally (:mod:`kubeflux.scheduler.fit`); unfit nodes are hidden
   from the engine for that match (:mod:`kubeflux.scheduler.graphview`); one engine job per pod
   (:mod:`kubeflux.scheduler.translate`), all members of a group or none;
5. *preempt*: a job that does not fit now may evict whole jobs of lower priority so that it starts now
   (:mod:`kubeflux.scheduler.preempting`); it then waits for them to leave;
6. *reserve*: a job that does not fit now gets a reservation (``allocate_orelse_reserve``; a gang as one engine
   job, so its members share one start): under ``fcfs`` only the first blocked job, and nothing passes it; under
   ``easy`` the first blocked job, and later jobs start only when they fit now around it; under ``conservative``
   every blocked job in the queue depth;
7. *decide*: :class:`Bind` (with the :data:`~kubeflux.scheduler.allocation.ALLOCATION_ANNOTATION` for recovery),
   else ``Unschedulable`` with kube-scheduler's message and the expected start of the reservation, or
   :class:`Reject` when no node could ever host the pod.

A gang waiting longer than its ``scheduleTimeoutSeconds`` is released (its reservation dropped) and retried after
a back-off that doubles from :attr:`group_backoff` up to :attr:`max_backoff`.

**Recovery**: a restarted scheduler is fed every pod and node again; a bound pod of its own carrying the
allocation annotation is re-applied to the engine at its original start and node before anything new is
placed, so nothing is double-booked.
"""

from __future__ import annotations

import operator
from collections import Counter, deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from mypy_extensions import mypyc_attr

from kubeflux.match.engine import DEFAULT_HORIZON
from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.allocation import Allocation, allocation_annotations
from kubeflux.scheduler.books import ClusterBooks
from kubeflux.scheduler.claimed import Claimed, reserve_claims
from kubeflux.scheduler.claimfreeing import ClaimFreeing
from kubeflux.scheduler.confining import Confiner
from kubeflux.scheduler.constraints import fit_error_message
from kubeflux.scheduler.devices import NOT_AVAILABLE
from kubeflux.scheduler.filtering import NodeFilter
from kubeflux.scheduler.informer import Informer
from kubeflux.scheduler.interface import BIND_BACKOFF, Bind, ClusterEvent, Decision, Reject, Unschedulable
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.placing import REASON_RESERVED, Placer, ceil_time
from kubeflux.scheduler.preempting import Preemptor
from kubeflux.scheduler.profile import LOWER_PRIORITY, Profile, tick
from kubeflux.scheduler.queue import PendingJob, PendingQueue, placement_view
from kubeflux.scheduler.queueview import QueuedJob, queue_snapshot
from kubeflux.scheduler.reserving import Reserver
from kubeflux.scheduler.sharing import SharedSharing, SharingPolicy
from kubeflux.scheduler.translate import NodeShape
from kubeflux.scheduler.validation import PodRequestError

__all__ = ["REASON_RESERVED", "Allocation", "Backfill", "KubefluxScheduler", "Parts", "wire"]


@dataclass(slots=True)
class Parts:
    """The parts a kubeflux scheduler is made of, over one profile and one log, each given the parts it uses (as
    kube-scheduler's scheduler has a cache, a queue and a framework): :func:`wire` makes them, for
    :class:`KubefluxScheduler` and for the tests of one part on its own (:func:`kubeflux.scheduler.testing.parts`)."""

    profile: Profile
    queue: PendingQueue
    books: ClusterBooks
    informer: Informer
    filter: NodeFilter
    placer: Placer
    reserver: Reserver
    confiner: Confiner
    preemptor: Preemptor
    log: deque[str]


def wire(profile: Profile, log: deque[str]) -> Parts:
    """A scheduler's parts for ``profile``, new and empty, writing their log lines to ``log``."""
    queue = PendingQueue()
    books = ClusterBooks(profile, queue, log)
    node_filter = NodeFilter(profile, books, queue)
    placer = Placer(profile, books, queue, node_filter, log)
    return Parts(
        profile,
        queue,
        books,
        Informer(profile, books, queue, log),
        node_filter,
        placer,
        Reserver(placer),
        Confiner(placer),
        Preemptor(profile, books, queue, node_filter, log.append),
        log,
    )


NO_SHARE_REASON: Final = "node(s) are not available to kubeflux under its sharing policy"


class Backfill(StrEnum):
    FCFS = "fcfs"
    EASY = "easy"
    CONSERVATIVE = "conservative"


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (mypyc), a user's Python subclass may still extend it
class KubefluxScheduler:
    """The kubeflux scheduler (see the module docstring). ``name`` is the ``schedulerName`` it owns."""

    ignores_status_updates = True
    """What a shell writes on a pending pod for its decisions (condition, expected start) is nothing it reads
    (:func:`~kubeflux.scheduler.queue.placement_view`; :class:`~kubeflux.scheduler.interface.IgnoresStatusUpdates`):
    the simulator leaves those events out."""

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
        shape: NodeShape | None = None,
        preemption: str = LOWER_PRIORITY,
    ) -> None:
        parse_policy(policy)
        if queue_depth < 1:
            raise ValueError(f"queue_depth must be at least 1, got {queue_depth}")
        self.name = name
        self.profile = Profile(name, policy, sharing or SharedSharing(), horizon, shape, preemption)
        self.log: deque[str] = deque(maxlen=log_limit)
        """Fluence-style log lines (nodes found, cores per node, policy, each match and its result)."""
        parts = wire(self.profile, self.log)
        self.queue = parts.queue
        self.books = parts.books
        self.informer = parts.informer
        self.filter = parts.filter
        self.placer = parts.placer
        self.reserver = parts.reserver
        self.confiner = parts.confiner
        self.freeing = ClaimFreeing(self.books.devices)
        self.preemptor = parts.preemptor
        self.backfill = Backfill(backfill)
        self.queue_depth = queue_depth
        self.group_backoff = group_backoff
        self.max_backoff = max_backoff
        self._planned_epoch = -1
        self._head: PendingJob | None = None
        self._wake: float | None = None
        self._never_fits_not: dict[str, tuple[int, list[Pod]]] = {}
        """Job key → (node epoch, its pods) when the job was last found able to fit the empty cluster."""

    # ================================================================== events

    def observe(self, event: ClusterEvent, now: float) -> None:
        self.informer.observe(event, now)

    def unreserve(self, pod: str, uid: str, node: str, reason: str, now: float) -> None:
        """The cluster refused kubeflux's Bind of ``pod`` (:meth:`Informer.unreserve`)."""
        self.informer.unreserve(pod, uid, node, reason, now)

    def unevict(self, pod: str, uid: str, reason: str, now: float) -> None:
        """The cluster refused kubeflux's eviction of ``pod`` (:meth:`Preemptor.refused`)."""
        self.preemptor.refused(uid, now)

    # ================================================================== schedule (one pass)

    def schedule(self, now: float) -> list[Decision]:
        books = self.books
        queue = self.queue
        self._snapshot(now)
        self.preemptor.new_pass()
        due = self._wake is not None and now >= self._wake
        if not queue.dirty and not due:
            return []
        queue.dirty = False
        self._wake = None
        out: list[Decision] = self.informer.take_notices()  # rejects and warnings found while observing
        if books.ensure_graph() is None:
            reasons = {NO_SHARE_REASON: len(books.nodes)}
            for job in queue.jobs.values():
                self._report(job, fit_error_message(len(books.nodes), reasons), None, out)
            return out
        ordered = queue.ordered()
        full = self._replan(ordered, due)
        self._pass(ordered, now, full, out)
        books.drop_deferred()
        if full:
            self._forget_stale_starts(out)
        return out

    def _snapshot(self, now: float) -> None:
        """The books brought to ``now``: pods past their planned end keep their cores, engine jobs the graph lost
        are replayed."""
        books = self.books
        books.now = now
        if books.graph is not None:
            books.extend_overruns(now)
            books.replay_lost()

    def _replan(self, ordered: list[PendingJob], due: bool) -> bool:
        """Whether this pass is a full one; if so the last pass's reservations are cancelled and the bound pods the
        engine does not hold yet are put in. An incremental pass (nothing changed but new arrivals, none of them
        before the blocked head) keeps the reservations and tries only the new jobs."""
        queue = self.queue
        epoch = queue.epoch
        head = self._head
        full = (
            due
            or epoch != self._planned_epoch
            or head is None
            or head.key not in queue.jobs
            or any(job.tried_epoch != epoch and job.order() < head.order() for job in ordered)
        )
        if full:
            self._cancel_reservations()
            self.books.account_unaccounted()
            self._head = None
            self._planned_epoch = queue.epoch
        return full

    def _pass(self, ordered: list[PendingJob], now: float, full: bool, out: list[Decision]) -> None:
        """The queue in order (pop), each job placed now (place) or else reserved for later (reserve) and told why
        (decide); on an incremental pass only the jobs not tried since the last change."""
        queue = self.queue
        blocked = 0 if full else 1
        considered = 0
        i = 0
        while i < len(ordered):
            job = ordered[i]
            i += 1
            if considered >= self.queue_depth:
                if any(isinstance(decision, Bind) for decision in out):
                    queue.dirty = True  # jobs beyond the depth move up once these are bound: look again
                break
            if queue.missing_members(job):
                self._report_group_waiting(job, out)
                continue
            if job.ready_since is None:
                job.ready_since = now
            considered += 1
            if not full and job.tried_epoch == queue.epoch:
                self._keep_timers(job)
                continue
            job.tried_epoch = queue.epoch
            if self.backfill is Backfill.FCFS and blocked:
                self._report(job, self._behind_message(job), None, out)
                continue
            message = self._place(job, now, out)
            if message is not None and (evictions := self.preemptor.preempt(job, now)):
                out.extend(evictions)
            if message is not None and (gone := self.preemptor.waiting(job)):
                message = self.preemptor.waiting_message(job, gone)
            if message is None:  # bound, or rejected
                if queue.rejected.get(job.key) is job:  # it left the queue for good: the pass goes on past it
                    considered -= 1
                elif left := [queue.by_pod[uid] for uid in job.pods if uid in queue.by_pod]:
                    # members of a started group beyond its minMember, queued on their own: tried in their place in
                    # this pass, before the jobs behind them are planned (and told starts) as if they were not
                    ordered[i:] = sorted([*ordered[i:], *left], key=PendingJob.order)
                continue
            if blocked == 0:
                self._head = job
            expected = self._reserve(job, now, first_blocked=blocked == 0)
            self._report(job, message, expected, out)  # decide
            blocked += 1

    def _place(self, job: PendingJob, now: float, out: list[Decision]) -> str | None:
        """Place the job now (its Binds, or its Rejects, go to ``out``): None when it left the queue, else why it
        waits (backing off, or kube-scheduler's message of why it does not fit now)."""
        if job.retry_at > now:  # backing off
            self._wake_at(job.retry_at)
            return self._backoff_message(job)
        for pod in job.pods.values():
            why = self.filter.pre_filter(pod)
            if why is not None:  # its volume claims rule out every node (kube-scheduler's PreFilter)
                return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)
        claimed = self._claims_problem(job, out) if _has_claims(job) else None
        if claimed is not None:
            return claimed or None
        reasons = self._try_now(job, now, out)
        if reasons is None:
            return None
        if NOT_AVAILABLE in reasons:  # a claim allocated on a node it can no longer use: freed (PostFilter)
            freed = self.freeing.decide((pod, self.filter.fit(pod)) for pod in job.pods.values() if pod.resource_claims)
            if freed is not None:  # tried again after the initial back-off, as kube-scheduler's queue does
                out.append(freed)
                job.retry_at = now + BIND_BACKOFF
                self._wake_at(job.retry_at)
        return self._timed_out(job, now) or self._unfit_message(job, reasons)

    def _claims_problem(self, job: PendingJob, out: list[Decision]) -> str | None:
        """What keeps a job whose pods have ResourceClaims from every node (kube-scheduler's DynamicResources):
        a claim not made yet, or missing, or its class missing (PreFilter: the message it waits with), or a CEL
        selector that fails on a device of a node the other filters pass (its Filter: the job is rejected, "" then);
        None when nothing does."""
        devices = self.books.devices
        claimed = [pod for pod in job.pods.values() if pod.resource_claims]
        for pod in claimed:
            why = devices.waiting(pod)
            if why is not None:
                return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)
        for pod in claimed:
            self.filter.fit(pod)  # the selectors run on the nodes every other filter passes, nowhere else
            failed = devices.failure(pod)
            if failed is not None:
                self._reject(job, f"pod {pod.key}: {failed}", out)
                return ""
        return None

    def _reserve(self, job: PendingJob, now: float, *, first_blocked: bool) -> float | None:
        """Reserve a job that waits, as the backfill policy says (the first blocked job, or every one under
        ``conservative``): its expected start, or None."""
        conservative = self.backfill is Backfill.CONSERVATIVE
        if not (conservative or first_blocked):
            return None
        earliest = ceil_time(job.retry_at) if job.retry_at > now else None
        self.queue.reserving[job] = None  # (the one way a job comes to hold a reservation)
        return self.confiner.attempt(
            job, tick(now), lambda: self.reserver.reserve(job, now, earliest, left_out_too=conservative), reserve=True
        )

    def queued(self, now: float) -> list[QueuedJob]:
        """The waiting jobs in the order they are tried, as of the last pass (:mod:`kubeflux.scheduler.queueview`);
        read-only, on the thread that owns the scheduler."""
        return queue_snapshot(self.queue, now)

    def next_wakeup(self, now: float) -> float | None:
        if self.queue.dirty:  # the pass left work for another (it stopped at the queue depth after binding): now
            return now
        return self._wake if self._wake is not None and self._wake > now else None

    def _wake_at(self, t: float) -> None:
        if self._wake is None or t < self._wake:
            self._wake = t

    def _keep_timers(self, job: PendingJob) -> None:
        """An incremental pass skips a job tried since the last change, but keeps its timers' wake-ups."""
        if job.retry_at > self.books.now:
            self._wake_at(job.retry_at)
        timeout = self.queue.timeout(job)
        if timeout is not None and job.ready_since is not None:
            self._wake_at(job.ready_since + timeout)

    def _cancel_reservations(self) -> None:
        """Every waiting job's reservation cancelled, in the queue's order (the first kept one may be deferred): only
        the jobs reserved since the last time can hold one (:attr:`~kubeflux.scheduler.queue.PendingQueue.
        reserving`)."""
        books, defer, queue = self.books, self.profile.keep_reservations, self.queue
        reserved = queue.registered(queue.reserving)
        queue.reserving = {}
        for job in reserved:
            books.cancel_reservations(job, defer=defer)

    def _timed_out(self, job: PendingJob, now: float) -> str | None:
        """A group still not placed ``scheduleTimeoutSeconds`` after it was ready (or last retried): the message
        saying so, and a back-off before it is matched again, which ends early whenever the cluster changes. A
        kubeflux group holds nothing partially, so nothing is released: it keeps its place and its reservation."""
        timeout = self.queue.timeout(job)
        if timeout is None or job.ready_since is None:
            return None
        if now - job.ready_since < timeout:
            self._wake_at(job.ready_since + timeout)
            return None
        job.backoff = min(self.max_backoff, job.backoff * 2 if job.backoff else self.group_backoff)
        job.retry_at = now + job.backoff
        job.ready_since = now
        self.queue.backing_off.add(job)
        self._wake_at(job.retry_at)
        why = (
            f"pod group {job.key} did not fit within its scheduleTimeoutSeconds of {timeout:g}; "
            f"retrying when the cluster changes, or in {job.backoff:g} s"
        )
        message = fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)
        self.log.append(message)
        return message

    # ================================================================== place now

    def _try_now(self, job: PendingJob, now: float, out: list[Decision]) -> Counter[str] | None:
        """Place the job now; None when it was bound or rejected, else why it does not fit now.

        Members beyond a group's minMember that can never fit are rejected alone and the rest are tried again at
        once: left to a later pass, the group would hold no reservation and keep the expected start it was told
        until some event brings that pass (the Rejects change nothing kubeflux reads), while jobs behind it were
        planned as if it were not there."""
        try:
            size = len(job.pods)
            reasons = self._place_now(job, now, out)
            if reasons is None or self._never(job, out):
                return None
            if len(job.pods) < size:
                reasons = self._place_now(job, now, out)
        except PodRequestError as exc:
            self._reject(job, str(exc), out)
            return None
        return reasons

    def _place_now(self, job: PendingJob, now: float, out: list[Decision]) -> Counter[str] | None:
        """Place the job's pods now (at least its minimum, as many as fit); None when bound, else why not."""
        start = tick(now)
        # its claims are reserved inside the attempt: in a domain whose nodes cannot give every member its devices
        # the placement fails, and the confiner tries the next domain
        placed_claimed = self.confiner.attempt(job, start, lambda: self._start_claimed(job, start), reserve=False)
        if placed_claimed is None:  # it requires one domain, and none has room now
            return self.confiner.reasons(job)
        if isinstance(placed_claimed, Counter):
            return placed_claimed
        made, claimed = placed_claimed
        placed = set()
        for pod, alloc in made:
            placed.add(alloc.uid)
            volumes, devices = claimed.volumes[alloc.uid], claimed.devices.get(alloc.uid, ())
            out.append(Bind(pod.key, pod.uid, alloc.node, allocation_annotations(pod, alloc), volumes, devices))
            if devices:
                self.books.devices.bound(alloc.uid, devices)
        left = [(uid, pod) for uid, pod in job.pods.items() if uid not in placed]
        self.queue.remove_job(job)
        self.queue.backing_off.discard(job)
        for uid, pod in left:  # beyond minMember: each waits on its own, in its started group, in the group's place
            queued = self.queue.add(uid, pod)
            self.queue.take_place(queued, job)
            if uid in job.told:
                self.queue.tell_start(queued, uid, job.told[uid])
            self.queue.dirty = True
        return None

    def _start_claimed(
        self, job: PendingJob, start: int
    ) -> tuple[list[tuple[Pod, Allocation]], Claimed] | Counter[str]:
        """The job's pods placed now (:meth:`Placer.start_at`) and their claims reserved (:func:`reserve_claims`);
        else why not (the placement undone)."""
        made = self.placer.start_at(job, start)
        if isinstance(made, Counter):
            return made
        claimed = reserve_claims(self.books, self.filter, made)
        if isinstance(claimed, Counter):
            return claimed
        return made, claimed

    # ================================================================== decisions

    def _never(self, job: PendingJob, out: list[Decision]) -> bool:
        """Reject the job when it can never fit the cluster's nodes as they are now, even empty; True when rejected.

        A pod never fits when no node admits it (labels, taints, cordon, readiness: kube-scheduler's filters) or
        when no node could take its requests empty; a group when no assignment of at least its minimum of members to
        the empty nodes that admit each exists (the assignment search). A rejected job holds nothing and blocks no
        queue; it is queued again when a node is added or changes, since nodes change. Members beyond a group's
        minMember that can never fit are rejected alone, and the rest are checked as a group: False when they may
        fit (the job goes on, smaller, in the same pass).
        """
        fitted = self._never_fits_not.get(job.key)
        if (
            fitted is not None
            and fitted[0] == self.informer.node_epoch
            and len(fitted[1]) == len(job.pods)
            and (
                all(map(operator.is_, fitted[1], job.pods.values()))  # the very same objects: the usual case
                or all(
                    a is b or placement_view(a) == placement_view(b)
                    for a, b in zip(fitted[1], job.pods.values(), strict=True)
                )
            )
        ):
            # the same pods on the same nodes: known to fit (a pod's object is replaced whenever it changes, also
            # when only its status or the expected start written back on it did: what placing reads is compared)
            return False
        never: list[tuple[str, Pod, str]] = []
        for uid, pod in job.pods.items():
            why = self.books.fits.never(pod, self.filter.empty_nodes)
            if why is None and not self.filter.static_fit(pod).fit:
                why = fit_error_message(
                    len(self.books.nodes),
                    self.filter.static_fit(pod).reasons,
                    post_filter_message="No node admits the pod as the nodes are now; it is reconsidered when a "
                    "node is added or changes.",
                )
            if why is None:
                why = self.books.fits.never_admitted(
                    pod, self.filter.static_fit(pod), self.filter.empty_nodes, len(self.books.nodes)
                )
            if why is not None:
                never.append((uid, pod, why))
        if never:
            group = self.queue.groups.get(job.group) if job.group is not None else None
            if group is None or len(job.pods) - len(never) < group.min_member:
                self._reject(job, never[0][2], out)
                return True
            for uid, pod, why in never:  # beyond minMember: rejected alone, the group goes on without them
                out.append(Reject(pod.key, pod.uid, why))
                self.log.append(f"Rejected {pod.key}: {why}")
                self.queue.remove_pod(uid)
                alone = PendingJob(pod.key, None, pod.creation_time, 0, {uid: pod})
                self.queue.rejected[pod.key] = alone
            if not job.pods:  # a minMember of 0 (refused by validation): nothing is left to place
                return True
        why = self.confiner.never(job)
        if why is None and len(job.pods) > 1:
            why = self.filter.gang_never_fits(job)
        if why is None:
            known = self._never_fits_not
            known[job.key] = (self.informer.node_epoch, list(job.pods.values()))
            if len(known) > 2 * len(self.queue.jobs) + 64:  # forget jobs gone from the queue
                self._never_fits_not = {key: known[key] for key in self.queue.jobs.keys() & known.keys()}
            return False
        self._reject(job, why, out)
        return True

    def _reject(self, job: PendingJob, message: str, out: list[Decision]) -> None:
        for pod in job.pods.values():
            out.append(Reject(pod.key, pod.uid, message))
        self.log.append(f"Rejected {job.key}: {message}")
        self.books.cancel_reservations(job)
        self.queue.backing_off.discard(job)
        self.queue.drop(job)
        self.queue.rejected[job.key] = job

    def _report(self, job: PendingJob, message: str, expected: float | None, out: list[Decision]) -> None:
        told, left_out, own = job.told, job.left_out, job.member_reservations
        kept, cut = (message, expected), (message, None)  # one tuple for all the pods of the job: a pod per pass
        for uid, pod in job.pods.items():
            said = cut if left_out and uid in left_out else kept
            if own and uid in own:
                said = (message, own[uid][1])
            if told.get(uid) != said:
                self.queue.tell_start(job, uid, said)
                out.append(Unschedulable(pod.key, pod.uid, said[0], said[1]))  # (no *said: a native call)

    def _forget_stale_starts(self, out: list[Decision]) -> None:
        """After a full pass, a pending pod told an expected start whose job holds no reservation any more (it was
        not reached this pass) is told again without one, so its annotation never outlives the reservation; also
        one that came with an expected start written before this run (:data:`~kubeflux.scheduler.queue.INHERITED`),
        told why it was not reached."""
        queue = self.queue
        still: dict[PendingJob, None] = {}
        for job in queue.registered(queue.starts_told):  # (only these may have told a start)
            told = job.told
            if job.expected_start is not None:
                still[job] = None
                continue
            for uid in [uid for uid, said in told.items() if said[1] is not None and uid in job.pods]:
                message = told[uid][0] or self._unreached_message(job)
                told[uid] = (message, None)
                pod = job.pods[uid]
                out.append(Unschedulable(pod.key, pod.uid, message, None))
            if any(said[1] is not None for said in told.values()):  # a pod's, away from the job for now
                still[job] = None
        queue.starts_told = still

    def _unfit_message(self, job: PendingJob, reasons: Counter[str]) -> str:
        """kube-scheduler's message for a job that does not fit now, with why the nodes did not take it."""
        gang = f"pod group {job.key} needs its {len(job.pods)} pods placed at once." if job.group else ""
        minimum = self.queue.minimum(job)
        if job.group and minimum < len(job.pods):
            gang = f"pod group {job.key} needs {minimum} of its {len(job.pods)} pods placed at once."
        return fit_error_message(len(self.books.nodes), reasons, post_filter_message=gang)

    def _unreached_message(self, job: PendingJob) -> str:
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        why = f"{what} waits beyond kubeflux's queue depth of {self.queue_depth} jobs, planned as those ahead start"
        return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)

    def _behind_message(self, job: PendingJob) -> str:
        head = self._head.key if self._head is not None else "an earlier job"
        why = f"waiting in FCFS order behind {head}"
        return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)

    def _backoff_message(self, job: PendingJob) -> str:
        said = next(iter(job.told.values()), None)
        if said is not None and said[0]:  # not INHERITED: no message was said in this run
            return said[0]
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        wait = f"{max(0.0, job.retry_at - self.books.now):.3g} s"
        if job.refusal:
            why = f"the Binding of {what} was refused ({job.refusal}); it is tried again in {wait}"
        else:
            why = f"{what} is backing off for {wait}"
        return fit_error_message(len(self.books.nodes), {}, pre_filter_message=why)

    def _report_group_waiting(self, job: PendingJob, out: list[Decision]) -> None:
        group = self.queue.groups.get(job.key)
        if group is None:
            why = f"pod group {job.key} does not exist (yet)"
        else:
            why = f"pod group {job.key} has {len(job.pods)} of its minMember {group.min_member} pods"
        self._report(job, fit_error_message(len(self.books.nodes), {}, pre_filter_message=why), None, out)


def _has_claims(job: PendingJob) -> bool:
    """Whether a pod of ``job`` has ResourceClaims (Dynamic Resource Allocation)."""
    return any(pod.resource_claims for pod in job.pods.values())
