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

import dataclasses
import json
import operator
from collections import Counter
from enum import StrEnum
from typing import Any, cast

import orjson
from mypy_extensions import mypyc_attr

from kubeflux.match.engine import DEFAULT_HORIZON
from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.constraints import fit_error_message
from kubeflux.scheduler.gang import GangMember, assign
from kubeflux.scheduler.informer import ALLOCATION_ANNOTATION, Allocation, placement_view
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, PodWarning, Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, MEMORY, PODS, Node, Pod, PodPhase
from kubeflux.scheduler.placing import REASON_RESERVED, alike_run, ceil_time
from kubeflux.scheduler.quantity import format_quantity
from kubeflux.scheduler.queue import PendingJob
from kubeflux.scheduler.reserving import Reserver
from kubeflux.scheduler.sharing import SharedSharing, SharingPolicy
from kubeflux.scheduler.translate import NodeShape, PodRequestError
from kubeflux.scheduler.validation import InvalidObject, pod_fields_problem

__all__ = ["ALLOCATION_ANNOTATION", "REASON_RESERVED", "Allocation", "Backfill", "KubefluxScheduler"]


NO_SHARE_REASON = "node(s) are not available to kubeflux under its sharing policy"


def _fields_typed(pod: Any) -> bool:
    """Whether what :meth:`KubefluxScheduler.observe` reads of a pod before validating it is of its type: compiled
    (mypyc), reading a mistyped field raises a TypeError where the pure sources went on. ``pod`` is ``Any`` so the
    fields are read unchecked (five attribute reads and type tests, on every pod event)."""
    return (
        type(pod.uid) is str
        and type(pod.node_name) is str
        and type(pod.deleted) is bool
        and type(pod.phase) is PodPhase
        and type(pod.scheduler_name) is str
    )


class Backfill(StrEnum):
    FCFS = "fcfs"
    EASY = "easy"
    CONSERVATIVE = "conservative"


@mypyc_attr(allow_interpreted_subclasses=True)  # compiled (mypyc), a user's Python subclass may still extend it
class KubefluxScheduler(Reserver):
    """The kubeflux scheduler (see the module docstring). ``name`` is the ``schedulerName`` it owns."""

    ignores_status_updates = True
    """What a shell writes on a pending pod for its decisions (condition, expected start) is nothing it reads
    (:func:`~kubeflux.scheduler.informer.placement_view`; :class:`~kubeflux.scheduler.interface.IgnoresStatusUpdates`):
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
    ) -> None:
        parse_policy(policy)
        if queue_depth < 1:
            raise ValueError(f"queue_depth must be at least 1, got {queue_depth}")
        super().__init__(name, policy, sharing or SharedSharing(), horizon, log_limit, shape)
        self.backfill = Backfill(backfill)
        self.queue_depth = queue_depth
        self.group_backoff = group_backoff
        self.max_backoff = max_backoff
        self._planned_epoch = -1
        self._head: PendingJob | None = None
        self._wake: float | None = None
        self._backing_off: set[PendingJob] = set()
        self._rejected: dict[str, PendingJob] = {}
        """Jobs rejected as never fitting, kept to be queued again when a node is added or changes."""
        self._never_fits_not: dict[str, tuple[int, list[Pod]]] = {}
        """Job key → (node epoch, its pods) when the job was last found able to fit the empty cluster."""
        self._node_epoch = 0
        self._alike_fit: tuple[int, set[tuple[object, ...]]] = (-1, set())
        """(fit index resets, the shapes of groups of alike members found able to fit the empty nodes then): the
        static fits named by id are the index's own, kept until its next reset."""
        self._node_seen: dict[str, Node] = {}
        """Each node as last seen, to tell a change (which reconsiders rejected jobs) from a repeat."""

    # ================================================================== events the queue cares about

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if type(obj) is Pod:
            if not _fields_typed(obj):
                self._refuse(obj)
                return
            if not obj.node_name and self._same_waiting(event.kind, obj):
                return
        if isinstance(obj, Node):
            if type(cast(Any, obj).name) is not str:
                self._refuse_node(obj)
                return
            super().observe(event, now)
            if event.kind.value == "DELETED":
                self._node_seen.pop(obj.name, None)
                self._node_epoch += 1  # a job found able to fit may no longer: asked again
                return
            # A copy, not the object: a caller may change a node in place and tell it again.
            seen = dataclasses.replace(obj, allocatable=dict(obj.allocatable), labels=dict(obj.labels))
            if self._node_seen.get(obj.name) != seen:
                self._node_seen[obj.name] = seen
                self._node_epoch += 1
                self._requeue_rejected()
            return
        if self._rejected and isinstance(obj, Pod) and self._still_rejected(event.kind, obj):
            return
        super().observe(event, now)

    def _refuse(self, pod: Pod) -> None:
        """Leave out a pod whose uid, node name, scheduler name, deleted flag or phase is not of its type (one built
        through the Python API): rejected when it names kubeflux and is unbound, else warned about, as the
        informer does with a pod that fails validation (:meth:`_valid`)."""
        field, problem = pod_fields_problem(pod) or ("", "unusable")
        message = str(InvalidObject(f"Pod {pod.key}", field, problem))
        raw: Any = pod  # (Any: compiled code would check each field's type, the very check that failed)
        uid = raw.uid if type(raw.uid) is str and raw.uid else pod.key
        if self._told.get(uid) != message:
            self.log.append(f"{message}; the pod is left out")
        if self._forget_pending(uid) is not None:
            self._changed()
        if type(raw.scheduler_name) is str and raw.scheduler_name == self.name and not raw.node_name:
            self._notify(uid, Reject(pod.key, uid, message))
        else:
            self._notify(uid, PodWarning(pod.key, uid, "InvalidPod", f"{message}; kubeflux does not count it"))

    def _refuse_node(self, node: Node) -> None:
        """Leave out a node whose name is no string (said once per name): nothing can be booked on it."""
        name = repr(cast(Any, node).name)
        if name not in self._bad_nodes:
            message = f"Node {name}: name: must be a non-empty string, got {name}"
            self._bad_nodes[name] = message
            self.log.append(f"{message}; the node is kept out of the graph")

    def _same_waiting(self, kind: EventKind, pod: Pod) -> bool:
        """Whether ``pod`` is a queued pod of kubeflux's told again as the very object it was queued as, still
        waiting and usable (most events: the status and expected start written on a waiting pod, by the shell
        for kubeflux's own decisions): the informer would keep it as it is, so nothing is done."""
        uid = pod.uid
        if not uid or self._rejected or kind is EventKind.DELETED or pod.deleted:
            return False
        job = self.queue.by_pod.get(uid)
        if job is None or job.pods.get(uid) is not pod:  # the cheap, decisive tests first: ~200,000 calls a run
            return False
        return not pod.phase.terminal and (
            uid not in self._told
            and uid not in self._held
            and pod.scheduler_name == self.name
            and self._uid_by_key.get(pod.key) == uid
            and (not self._bad_groups or pod.group is None or pod.group not in self._bad_groups)
        )

    def _still_rejected(self, kind: EventKind, pod: Pod) -> bool:
        """A pending pod of a job rejected as never fitting changed: a change placing reads (its requests,
        selector, tolerations …) queues the whole job again; any other (a status the shell wrote) keeps it
        rejected, with the new object, and is not passed on (it would queue the pod alone, splitting a gang)."""
        if kind is EventKind.DELETED or pod.phase.terminal or pod.node_name or pod.deleted:
            return False
        uid = self._uid(pod)
        for key, job in self._rejected.items():
            known = job.pods.get(uid)
            if known is None:
                continue
            job.put(uid, pod)
            if placement_view(known) != placement_view(pod):
                del self._rejected[key]
                for member_uid, member in job.pods.items():
                    if member_uid not in self.allocations and member_uid not in self.queue.by_pod:
                        self.queue.add(member_uid, member).tried_epoch = -1
                self._changed()
            return True
        return False

    def _changed(self) -> None:
        super()._changed()
        if self._backing_off:  # the cluster changed: a gang backing off may fit now, so it is tried again
            for job in self._backing_off:
                job.retry_at = 0.0
            self._backing_off.clear()

    def _requeue_rejected(self) -> None:
        """A node was added or changed: every job rejected as never fitting is queued again and reconsidered."""
        rejected, self._rejected = self._rejected, {}
        for job in rejected.values():
            for uid, pod in job.pods.items():
                if uid not in self.allocations and uid not in self.queue.by_pod:
                    self.queue.add(uid, pod)  # told afresh: the Reject replaced its message and expected start
        if rejected:
            self._dirty = True

    def _forget_pending(self, uid: str) -> PendingJob | None:
        for job in self._rejected.values():
            job.drop(uid)
        return super()._forget_pending(uid)

    # ================================================================== schedule (one pass)

    def schedule(self, now: float) -> list[Decision]:
        self._now = now
        if self.graph is not None:
            self._extend_overruns(now)
            self._replay_lost()
        due = self._wake is not None and now >= self._wake
        if not self._dirty and not due:
            return []
        self._dirty = False
        self._wake = None
        out: list[Decision] = self._take_notices()  # rejects and warnings the informer found while observing
        if self._ensure_graph() is None:
            reasons = {NO_SHARE_REASON: len(self.nodes)}
            for job in self.queue.jobs.values():
                self._report(job, fit_error_message(len(self.nodes), reasons), None, out)
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
        self._drop_deferred()
        if full:
            self._forget_stale_starts(out)
        return out

    def _pass(self, ordered: list[PendingJob], now: float, full: bool, out: list[Decision]) -> None:
        """Try the queue in order; on an incremental pass only the jobs not tried since the last change."""
        blocked = 0 if full else 1
        considered = 0
        i = 0
        while i < len(ordered):
            job = ordered[i]
            i += 1
            if considered >= self.queue_depth:
                if any(isinstance(decision, Bind) for decision in out):
                    self._dirty = True  # jobs beyond the depth move up once these are bound: look again
                break
            missing = self.queue.missing_members(job)
            if missing:
                self._report_group_waiting(job, out)
                continue
            if job.ready_since is None:
                job.ready_since = now
            considered += 1
            if not full and job.tried_epoch == self._epoch:
                self._keep_timers(job)
                continue
            job.tried_epoch = self._epoch
            if self.backfill is Backfill.FCFS and blocked:
                self._report(job, self._behind_message(job), None, out)
                continue
            backing_off = job.retry_at > now
            if backing_off:
                self._wake_at(job.retry_at)
                message = self._backoff_message(job)
            else:
                reasons = self._try_now(job, now, out)
                if reasons is None:
                    if self._rejected.get(job.key) is job:  # it left the queue for good: the pass goes on past it
                        considered -= 1
                    elif left := [self.queue.by_pod[uid] for uid in job.pods if uid in self.queue.by_pod]:
                        # members of a started group beyond its minMember, queued on their own: tried in their place
                        # in this pass, before the jobs behind them are planned (and told starts) as if they were not
                        ordered[i:] = sorted([*ordered[i:], *left], key=PendingJob.order)
                    continue
                gang = f"pod group {job.key} needs its {len(job.pods)} pods placed at once." if job.group else ""
                if job.group and self._minimum(job) < len(job.pods):
                    gang = f"pod group {job.key} needs {self._minimum(job)} of its {len(job.pods)} pods placed at once."
                message = fit_error_message(len(self.nodes), reasons, post_filter_message=gang)
                message = self._timed_out(job, now) or message
            reserve = self.backfill is Backfill.CONSERVATIVE or blocked == 0
            if blocked == 0:
                self._head = job
            blocked += 1
            earliest = ceil_time(job.retry_at) if job.retry_at > now else None
            conservative = self.backfill is Backfill.CONSERVATIVE
            expected = self._reserve(job, now, earliest, left_out_too=conservative) if reserve else None
            self._report(job, message, expected, out)

    def next_wakeup(self, now: float) -> float | None:
        if self._dirty:  # the pass left work for another (it stopped at the queue depth after binding): now
            return now
        return self._wake if self._wake is not None and self._wake > now else None

    def _wake_at(self, t: float) -> None:
        if self._wake is None or t < self._wake:
            self._wake = t

    def _keep_timers(self, job: PendingJob) -> None:
        """An incremental pass skips a job tried since the last change, but keeps its timers' wake-ups."""
        if job.retry_at > self._now:
            self._wake_at(job.retry_at)
        timeout = self.queue.timeout(job)
        if timeout is not None and job.ready_since is not None:
            self._wake_at(job.ready_since + timeout)

    def _cancel_reservations(self) -> None:
        for job in self.queue.jobs.values():
            self._cancel_job_reservations(job, defer=self.keep_reservations)

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
        self._backing_off.add(job)
        self._wake_at(job.retry_at)
        why = (
            f"pod group {job.key} did not fit within its scheduleTimeoutSeconds of {timeout:g}; "
            f"retrying when the cluster changes, or in {job.backoff:g} s"
        )
        message = fit_error_message(len(self.nodes), {}, pre_filter_message=why)
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
        start = self._tick(now)
        made = self._start_at(job, start)
        if isinstance(made, Counter):
            return made
        placed = set()
        for pod, alloc in made:
            placed.add(alloc.uid)
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
            out.append(Bind(pod.key, pod.uid, alloc.node, {ALLOCATION_ANNOTATION: _allocation_text(record)}))
        left = [(uid, pod) for uid, pod in job.pods.items() if uid not in placed]
        self.queue.remove_job(job)
        self._backing_off.discard(job)
        for uid, pod in left:  # beyond minMember: each waits on its own, in its started group, in the group's place
            queued = self.queue.add(uid, pod)
            queued.arrival, queued.seq = job.arrival, job.seq
            queued.told.update({uid: job.told[uid]} if uid in job.told else {})
            self._dirty = True
        return None

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
            and fitted[0] == self._node_epoch
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
            why = self._fits.never(pod, self._empty_nodes)
            if why is None and not self._static_fit(pod).fit:
                why = fit_error_message(
                    len(self.nodes),
                    self._static_fit(pod).reasons,
                    post_filter_message="No node admits the pod as the nodes are now; it is reconsidered when a "
                    "node is added or changes.",
                )
            if why is None:
                why = self._fits.never_admitted(pod, self._static_fit(pod), self._empty_nodes, len(self.nodes))
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
                self._rejected[pod.key] = alone
            if not job.pods:  # a minMember of 0 (refused by validation): nothing is left to place
                return True
        why = self._gang_never_fits(job) if len(job.pods) > 1 else None
        if why is None:
            known = self._never_fits_not
            known[job.key] = (self._node_epoch, list(job.pods.values()))
            if len(known) > 2 * len(self.queue.jobs) + 64:  # forget jobs gone from the queue
                self._never_fits_not = {key: known[key] for key in self.queue.jobs.keys() & known.keys()}
            return False
        self._reject(job, why, out)
        return True

    def _gang_never_fits(self, job: PendingJob) -> str | None:
        """Why the group can never fit the cluster's nodes even empty, or None (also when the search gave up).

        A group of alike members that fits is remembered by its shape (constraints, requests, policy, size, minimum)
        until the nodes change (the fit index is reset), so the next group alike is not searched again."""
        pods = list(job.pods.values())
        alike: tuple[object, ...] | None = None
        if alike_run(job) == len(pods):
            first = pods[0]
            shape = (id(self._static_fit(first)), tuple(sorted(first.requests.items())), self._pod_shape(first))
            alike = (*shape, self._whole_node_policy(first), len(pods), self._minimum(job))
            resets = self._fits.version[0]
            if self._alike_fit[0] != resets:
                self._alike_fit = (resets, set())
            if alike in self._alike_fit[1]:
                return None
        why = self._search_gang(job, pods)
        if why is None and alike is not None:
            self._alike_fit[1].add(alike)
        return why

    def _search_gang(self, job: PendingJob, pods: list[Pod]) -> str | None:
        """:meth:`_gang_never_fits` by an assignment search on the empty nodes."""
        nodes = self._fits.empty(self._empty_nodes)
        graph = self.graph
        assert graph is not None
        dims = sorted({res for pod in pods for res, amount in pod.requests.items() if amount > 0})
        free = []
        for node in nodes:
            spec = graph.specs[node.name]
            free.append([spec.cores, spec.gpus, *(node.allocatable.get(res, 0) for res in dims)])
            free[-1].append(node.allocatable.get(PODS, 1 << 62))
        index = {node.name: i for i, node in enumerate(nodes)}
        candidates: dict[int, tuple[int, ...]] = {}  # per static fit: members constrained alike share one
        members = []
        for pod in pods:
            static = self._static_fit(pod)
            mine = candidates.get(id(static))
            if mine is None:
                mine = candidates[id(static)] = tuple(index[name] for name in static.fit if name in index)
            shape = (*self._pod_shape(pod), *(pod.requests.get(res, 0) for res in dims), 1)
            members.append(GangMember(shape, mine, self._whole_node_policy(pod)))
        minimum = self._minimum(job)
        found = assign(members, free, [True] * len(nodes), minimum)
        if found is not None:  # an assignment, or the search gave up: not proven never to fit
            return None
        need: Counter[str] = Counter()
        for pod in sorted(pods, key=lambda p: -sum(p.requests.values()))[:minimum]:
            need.update({res: amount for res, amount in pod.requests.items() if amount > 0})
        have: Counter[str] = Counter()
        for node in nodes:
            have.update({res: node.allocatable.get(res, 0) for res in need})
        wanted = ", ".join(f"{format_quantity(res, need[res])} {res}" for res in sorted(need))
        held = ", ".join(f"{format_quantity(res, have[res])} {res}" for res in sorted(need))
        count = f"{minimum} of its {len(pods)} pods" if minimum < len(pods) else f"its {len(pods)} pods"
        short = [res for res in sorted(need) if need[res] > have[res]]
        why = f"too little {', '.join(short)}" if short else "no assignment of each pod to a node that admits it fits"
        if not short and any(self._whole_node_policy(pod) for pod in pods):
            why += "; a node-exclusive pod holds its node whole"
        return (
            f"pod group {job.key} can never fit: {count} need {wanted} in all; the {len(nodes)} node(s) available "
            f"to kubeflux have {held} even when empty ({why})."
        )

    def _reject(self, job: PendingJob, message: str, out: list[Decision]) -> None:
        for pod in job.pods.values():
            out.append(Reject(pod.key, pod.uid, message))
        self.log.append(f"Rejected {job.key}: {message}")
        self._cancel_job_reservations(job)
        self._backing_off.discard(job)
        self.queue.drop(job)
        self._rejected[job.key] = job

    def _report(self, job: PendingJob, message: str, expected: float | None, out: list[Decision]) -> None:
        told, left_out, own = job.told, job.left_out, job.member_reservations
        kept, cut = (message, expected), (message, None)  # one tuple for all the pods of the job: a pod per pass
        for uid, pod in job.pods.items():
            said = cut if left_out and uid in left_out else kept
            if own and uid in own:
                said = (message, own[uid][1])
            if told.get(uid) != said:
                told[uid] = said
                out.append(Unschedulable(pod.key, pod.uid, said[0], said[1]))  # (no *said: a native call)

    def _forget_stale_starts(self, out: list[Decision]) -> None:
        """After a full pass, a pending pod told an expected start whose job holds no reservation any more (it was
        not reached this pass) is told again without one, so its annotation never outlives the reservation; also
        one that came with an expected start written before this run (:data:`~kubeflux.scheduler.queue.INHERITED`),
        told why it was not reached."""
        for job in self.queue.jobs.values():
            if job.expected_start is not None:
                continue
            told = job.told
            for uid in [uid for uid, said in told.items() if said[1] is not None and uid in job.pods]:
                message = told[uid][0] or self._unreached_message(job)
                told[uid] = (message, None)
                pod = job.pods[uid]
                out.append(Unschedulable(pod.key, pod.uid, message, None))

    def _unreached_message(self, job: PendingJob) -> str:
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        why = f"{what} waits beyond kubeflux's queue depth of {self.queue_depth} jobs, planned as those ahead start"
        return fit_error_message(len(self.nodes), {}, pre_filter_message=why)

    def _behind_message(self, job: PendingJob) -> str:
        head = self._head.key if self._head is not None else "an earlier job"
        why = f"waiting in FCFS order behind {head}"
        return fit_error_message(len(self.nodes), {}, pre_filter_message=why)

    def _backoff_message(self, job: PendingJob) -> str:
        said = next(iter(job.told.values()), None)
        if said is not None and said[0]:  # not INHERITED: no message was said in this run
            return said[0]
        what = f"pod group {job.key}" if job.group else f"pod {job.key}"
        why = f"{what} is backing off until {job.retry_at:g}"
        return fit_error_message(len(self.nodes), {}, pre_filter_message=why)

    def _report_group_waiting(self, job: PendingJob, out: list[Decision]) -> None:
        group = self.queue.groups.get(job.key)
        if group is None:
            why = f"pod group {job.key} does not exist (yet)"
        else:
            why = f"pod group {job.key} has {len(job.pods)} of its minMember {group.min_member} pods"
        self._report(job, fit_error_message(len(self.nodes), {}, pre_filter_message=why), None, out)


def _allocation_text(record: dict[str, object]) -> str:
    """``json.dumps(record, sort_keys=True, separators=(",", ":"))``, ten times faster (one per bound pod), except
    that non-ASCII names are written as they are, not escaped; the same object when read back."""
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:  # an integer past 64 bits (a memory request of over 9.2 EB)
        return json.dumps(record, sort_keys=True, separators=(",", ":"))
