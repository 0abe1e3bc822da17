"""What kubeflux knows of the cluster: the informer logic and the books, kept true to the cluster's pods and nodes.

Keyed by pod UID (``namespace/name`` when a pod has none, or when a tombstone lost it):

* a pod that Succeeds, Fails or is deleted releases *its own* engine job and booking at once, so a group keeps
  the rest of its allocation until its last member ends; a pending pod that leaves gives up its job's
  reservation;
* a pod bound by another scheduler (or by kubeflux before a restart: the :data:`ALLOCATION_ANNOTATION` says
  where and when) is counted in the exact books and its whole cores and gpus are replayed onto its node with
  the engine's ``update``;
* nodes that are deleted are marked down in place; cordons, taints and readiness are filters; a node that
  appears or changes capacity is attached in place (the engine's ``attach``/``remove``) and its pods replayed;
* a pod still running at the end of its planned time keeps its cores (its job is extended to the horizon);
* a Bind the cluster refuses (:meth:`ClusterBooks.unreserve`), or a pod seen bound to another node than the one
  kubeflux chose, releases kubeflux's allocation for it at once; a pod still pending waits in the queue again;
* a pod seen under a ``namespace/name`` that another UID held (a StatefulSet re-created it; a relist folded
  DELETED and ADDED into one update) first releases the old UID's allocation and queue entry, whatever the order;
* a bound pod whose requests change (an in-place resize, see :mod:`kubeflux.scheduler.kube_objects`) is counted
  anew in the books, and its engine job is replayed when its whole cores or gpus change;
* a bound pod the engine cannot take yet (its node has too few free cores or gpus, or holds a node-exclusive
  job, or is down) stays counted in the books and is retried whenever a pod on its node ends or the node changes;
  until then node-exclusive matches never land on its node (:attr:`GraphView.unrecorded`);
* a bound pod of kubeflux's own gang found after a restart marks the gang started, so its missing members are
  placed one by one, as an uninterrupted scheduler places them;
* every object is checked first (:mod:`kubeflux.scheduler.validation`): a bad pod of kubeflux's that waits is
  rejected (:class:`Reject`), any other bad pod or a corrupt allocation annotation is reported
  (:class:`PodWarning`, once per problem), a bad node or PodGroup is logged and kept out; nothing bad reaches the
  engine. These notices go out with the next ``schedule``.

:class:`ClusterBooks` holds this state; :class:`kubeflux.scheduler.core.KubefluxScheduler` adds the queue's
scheduling pass on top.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from kubeflux.match.engine import MatchOp, MatchResult
from kubeflux.match.policy import parse_policy
from kubeflux.resources import id_from_name_suffix
from kubeflux.scheduler.fit import FitIndex
from kubeflux.scheduler.graphview import GraphView, HiddenNodes
from kubeflux.scheduler.interface import (
    EXPECTED_START_ANNOTATION,
    ClusterEvent,
    Decision,
    EventKind,
    PodWarning,
    Reject,
)
from kubeflux.scheduler.kept import keeps_reservations
from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import CPU, Node, Pod, PodGroup, PodPhase, ResourceList
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.sharing import SharingPolicy
from kubeflux.scheduler.timebooks import TimeBooks
from kubeflux.scheduler.translate import (
    NodeShape,
    Placement,
    PodRequestError,
    gpu_count,
    node_spec,
    pod_duration,
    pod_jobspec,
    pod_policy,
    pod_shape,
    whole_cores,
)
from kubeflux.scheduler.validation import InvalidObject, check_group, check_node, check_pod, read_allocation

__all__ = ["ALLOCATION_ANNOTATION", "Allocation", "ClusterBooks"]

ALLOCATION_ANNOTATION = "kubeflux.io/allocation"
"""Written on every pod kubeflux binds: JSON with the engine job id, node, cores, gpus, start and duration."""
BIND_BACKOFF = 1.0
"""Seconds a pod whose Bind was refused waits before it is tried again (kube-scheduler's
``podInitialBackoffSeconds``)."""


def _graph_order(node: Node) -> tuple[bool, int, str]:
    """Where a node goes among the graph's first nodes: by the id its name gives its vertex (``node-10`` → 10), as
    Fluxion numbers nodes, then by name. The API server lists nodes by name (``node-0``, ``node-1``, ``node-10``,
    ``node-100`` …): in that order a node-centric policy's walk never finds its best nodes first, cannot stop early
    (:mod:`kubeflux.match.ranked`) and visits every node for every pod (5,000 nodes of 64 cores, real API server:
    ~14 ms of CPU a pod instead of ~0.3). Nodes without a number keep their order after the numbered ones."""
    suffix = id_from_name_suffix(node.name)
    return suffix is None, suffix or 0, node.name if suffix is not None else ""


@dataclass(slots=True, init=False)
class Allocation:
    """One bound pod as kubeflux counts it (its own ``__init__``: compiled, the generated one stays interpreted)."""

    uid: str
    key: str
    node: str
    own: bool
    jobid: int = 0
    """The engine job holding its cores/gpus; 0 when it has none (a fractional pod, or not in the graph)."""
    start: int = 0
    duration: int = 0
    placement: Placement | None = None
    """Where the engine holds it now."""
    named: Placement | None = None
    """The placement its allocation annotation names (written as it was bound, or read when recovered): a replay
    puts it back there first. It differs from :attr:`placement` once a replay had to use other cores (its node
    shrank below them)."""

    def __init__(
        self,
        uid: str,
        key: str,
        node: str,
        own: bool,
        jobid: int = 0,
        start: int = 0,
        duration: int = 0,
        placement: Placement | None = None,
    ) -> None:
        self.uid = uid
        self.key = key
        self.node = node
        self.own = own
        self.jobid = jobid
        self.start = start
        self.duration = duration
        self.placement = self.named = placement


@mypyc_attr(allow_interpreted_subclasses=True)  # so that KubefluxScheduler may allow them (core.py)
class ClusterBooks:
    """The informer's state for the scheduler named ``name`` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        policy: str,
        sharing: SharingPolicy,
        horizon: int,
        log_limit: int,
        shape: NodeShape | None = None,
    ) -> None:
        self.name = name
        self.policy = policy
        self.sharing = sharing
        self.shape = shape or NodeShape()
        """How nodes become graph vertices (sockets, which resources are gpus)."""
        self.horizon = horizon
        self.log: deque[str] = deque(maxlen=log_limit)
        """Fluence-style log lines (nodes found, cores per node, policy, each match and its result)."""
        self.nodes: dict[str, Node] = {}
        self.queue = PendingQueue()
        self.ledger = Ledger()
        """Every scheduler's bound pods, against each node's allocatable."""
        self.own = Ledger()
        """kubeflux's own pods, against its share of each node (the sharing policy)."""
        self.plans = TimeBooks(self.ledger, self._planned_end)
        """:attr:`ledger` in time, with the reservations' holds."""
        self.own_plans = TimeBooks(self.own, self._planned_end, self.plans.holds)
        """:attr:`own` in time, with the same holds (checked against the share when the sharing policy is not
        ``shared``)."""
        self.allocations: dict[str, Allocation] = {}
        """Pod uid → allocation, for every bound unfinished pod of any scheduler."""
        self.graph: GraphView | None = None
        self._uid_by_key: dict[str, str] = {}
        self._bound: dict[str, Pod] = {}
        """Pod uid → pod, for every allocation (to replay it when its node is re-attached)."""
        self._unaccounted: dict[str, Pod] = {}
        """Bound pods (others', or ours after a restart) still to be put into the engine."""
        self._stuck: dict[str, dict[str, Pod]] = {}
        """Node name → the bound pods there the engine could not take when last tried (pod uid → pod), retried
        when the node changes or a pod there ends."""
        self._notices: list[Decision] = []
        """Rejects and warnings found while observing, for the next ``schedule``."""
        self._told: dict[str, str] = {}
        """Pod uid → the last notice message said about it (each problem is said once)."""
        self._bad_groups: dict[str, str] = {}
        """PodGroup key → why it is unusable; its pods are rejected with that until it is fixed."""
        self._bad_nodes: dict[str, str] = {}
        """Node name → why it is kept out of the graph (logged once per problem)."""
        self._held: dict[str, Pod] = {}
        """Pod uid → kubeflux's pending pods rejected for their bad PodGroup, queued again when it is fixed."""
        self._ends: list[tuple[int, str]] = []
        """(planned end, pod uid) of kubeflux's allocations, to extend those of pods that run past it."""
        self._fits = FitIndex()
        self.keep_reservations = keeps_reservations(policy)
        """Whether a gang's reservation may be put back as it was when the engine would make it again
        (:mod:`kubeflux.scheduler.kept`); False re-plans every one."""
        self._deferred: PendingJob | None = None
        """A job whose cancelled reservation is still in the engine (:meth:`_cancel_job_reservations`)."""
        self._shared: dict[int, set[str]] = {}
        """Engine job id → the pods holding a part of it: a gang's alike members placed by one match
        (:meth:`Placer._run_at_once`); each pod's end releases its own vertices of the job."""
        self._dirty = True
        self._epoch = 0
        """Bumped whenever a waiting job might now fit, or a reservation might no longer hold."""
        self._now = 0.0

    # ================================================================== observe

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Node):
            self._changed()
            kind = event.kind
            if kind is not EventKind.DELETED:
                try:
                    check_node(obj)
                    self.shape.check(obj)
                except InvalidObject as exc:
                    if self._bad_nodes.get(obj.name) != str(exc):  # said once, not at every heartbeat
                        self._bad_nodes[obj.name] = str(exc)
                        self.log.append(f"{exc}; the node is kept out of the graph")
                    kind = EventKind.DELETED
                else:
                    self._bad_nodes.pop(obj.name, None)
            self._observe_node(kind, obj)
        elif isinstance(obj, PodGroup):
            self._changed()
            self._observe_group(event.kind, obj)
        else:
            self._observe_pod(event.kind, obj)

    def _take_notices(self) -> list[Decision]:
        """The rejects and warnings found since the last call (the start of a ``schedule``'s decisions)."""
        notices, self._notices = self._notices, []
        return notices

    def _notify(self, uid: str, notice: Reject | PodWarning) -> None:
        if self._told.get(uid) != notice.message:
            self._told[uid] = notice.message
            self._notices.append(notice)
            self._dirty = True

    def _valid(self, uid: str, pod: Pod) -> bool:
        """Whether ``pod`` may be used; a bad one is reported: rejected when it is kubeflux's and waits (its
        duration and match policy annotations too), else warned about. Nothing of it is counted or queued."""
        try:
            check_pod(pod)
            if pod.scheduler_name == self.name and not pod.node_name:  # what placing it reads (annotations)
                pod_duration(pod)
                pod_policy(pod, self.policy)
        except (InvalidObject, PodRequestError) as exc:
            message = str(exc)
            if self._told.get(uid) != message:
                self.log.append(f"{message}; the pod is left out")
            if pod.scheduler_name == self.name and not pod.node_name:
                self._notify(uid, Reject(pod.key, pod.uid, message))
            else:
                self._notify(uid, PodWarning(pod.key, pod.uid, "InvalidPod", f"{message}; kubeflux does not count it"))
            return False
        return True

    def _observe_group(self, kind: EventKind, group: PodGroup) -> None:
        key = group.key
        queue = self.queue
        if kind is EventKind.DELETED:
            queue.groups.pop(key, None)
            queue.started_groups.discard(key)  # a group made again under this name is a new gang
            if self._bad_groups.pop(key, None) is not None:
                self._unhold(key)  # they wait for a group of that name, as members of a missing group do
            return
        try:
            check_group(group)
        except InvalidObject as exc:
            message = str(exc)
            if self._bad_groups.get(key) != message:
                self.log.append(f"{message}; its pods are rejected until it is fixed")
            self._bad_groups[key] = message
            queue.groups.pop(key, None)
            job = queue.jobs.get(key)
            for uid, pod in list(job.pods.items()) if job is not None and job.group == key else []:
                self._hold(uid, pod, message)
            return
        queue.groups[key] = group
        if self._bad_groups.pop(key, None) is not None:
            self._unhold(key)

    def _unhold(self, group: str) -> None:
        """The pods held for the bad PodGroup ``group`` are observed again (it was fixed or deleted)."""
        for uid, pod in list(self._held.items()):
            if pod.group == group:
                del self._held[uid]
                self._told.pop(uid, None)
                self._observe_pod(EventKind.MODIFIED, pod)

    def _hold(self, uid: str, pod: Pod, message: str) -> None:
        """Reject a pending pod of a bad PodGroup, and keep it to queue again when the group is fixed."""
        self._forget_pending(uid)
        self._held[uid] = pod
        self._notify(uid, Reject(pod.key, pod.uid, message))

    def _changed(self) -> None:
        self._dirty = True
        self._epoch += 1

    def _note_end(self, end: int, uid: str) -> None:
        """Remember a kubeflux allocation's planned end, to extend it if the pod runs past it."""
        heapq.heappush(self._ends, (end, uid))

    def _planned_end(self, uid: str) -> float:
        """When a booked pod is planned to leave its node: kubeflux's own at its allocation's end, unless it runs
        past it; every other pod holds on for ever (:class:`~kubeflux.scheduler.timebooks.TimeBooks`)."""
        alloc = self.allocations.get(uid)
        if alloc is None or not alloc.own or not alloc.duration:
            return math.inf
        end = alloc.start + alloc.duration
        return end if end > self._now and end < self.horizon else math.inf

    def _uid(self, pod: Pod) -> str:
        return pod.uid or self._uid_by_key.get(pod.key, pod.key)

    def _observe_pod(self, kind: EventKind, pod: Pod) -> None:
        uid = self._uid(pod)
        phase = pod.phase  # PodPhase.terminal, without the property call (pure Python) on every pod event
        if kind is EventKind.DELETED or phase is PodPhase.SUCCEEDED or phase is PodPhase.FAILED:
            self._gone(uid, "deleted" if kind is EventKind.DELETED else pod.phase.value)
            group = pod.group  # a member that ran means its gang started (news to a restarted scheduler)
            own = pod.scheduler_name == self.name
            if own and pod.node_name and group is not None and group not in self.queue.started_groups:
                self._started(group)
            key = pod.key
            if self._uid_by_key.get(key) == uid:  # a late tombstone of a re-created pod keeps the new one
                del self._uid_by_key[key]
            return
        key = pod.key
        previous = self._uid_by_key.get(key)
        if previous is not None and previous != uid:
            self._gone(previous, f"re-created as uid {uid}")
        self._uid_by_key[key] = uid
        if pod.node_name:
            alloc = self.allocations.get(uid)
            if alloc is not None and alloc.node != pod.node_name:  # bound elsewhere than kubeflux decided
                self._release(uid, f"bound to {pod.node_name} instead")
                alloc = None
            if alloc is None:
                if self._forget_pending(uid) is not None:
                    self._changed()
                if self._valid(uid, pod):
                    self._changed()
                    self._account_bound(uid, pod)
                return
            booking = self.ledger.bookings.get(uid)
            if booking is not None and booking.requests != pod.requests and self._valid(uid, pod):
                self._resized(uid, pod, alloc, booking.requests)
            return
        if pod.scheduler_name != self.name:
            return
        assumed = self.allocations.get(uid)
        if assumed is not None and assumed.own:
            # Assumed, as kube-scheduler's cache says: kubeflux decided to bind it and the Binding is in flight. The
            # watch may still show writes sent before it (the expected start taken off, a PodScheduled=False held
            # back): the pod is never queued again; only the Binding's refusal (unreserve), the pod's end or
            # deletion, or its binding elsewhere changes that.
            self._bound[uid] = pod
            return
        if pod.deleted:
            if self._forget_pending(uid) is not None:
                self._changed()
            return
        known = self.queue.by_pod.get(uid)
        if (
            known is not None
            and uid not in self._told
            and uid not in self._held
            and (pod.group is None or pod.group not in self._bad_groups)
            and (known.pods[uid] is pod or placement_view(known.pods[uid]) == placement_view(pod))
        ):
            # a queued pod whose change placing does not read (its status, the expected start written back on
            # it: most events about a waiting pod; the simulator sends the live pod it changed in place, whose
            # view is its own): as valid as it was, and it keeps its place in the plan
            self.queue.add(uid, pod)
            return
        if not self._valid(uid, pod):
            if self._forget_pending(uid) is not None:
                self._changed()
            return
        group = pod.group
        if group is not None and group in self._bad_groups:
            self._hold(uid, pod, self._bad_groups[group])
            return
        self._held.pop(uid, None)
        if self._told.pop(uid, None) is not None:  # it was rejected and is usable now
            self._changed()
        if known is not None:  # (nothing above changed the queue)
            # A queued pod changed: only what placing it reads matters. The status and the expected-start
            # annotation the shell writes for kubeflux's own decisions change nothing, and must not make the
            # queue's head be tried again as if it were new (it would lose its place in the plan).
            changed = placement_view(known.pods[uid]) != placement_view(pod)
            job = self.queue.add(uid, pod)
            if changed:
                job.tried_epoch = -1
                self._changed()
            return
        self._dirty = True
        job = self.queue.add(uid, pod)
        job.tried_epoch = -1
        if job.reservations:  # a gang grew: its reservation no longer covers it, so re-plan
            self._changed()

    def unreserve(self, pod: str, uid: str, node: str, reason: str, now: float) -> None:
        """The cluster refused kubeflux's Bind of ``pod`` to ``node`` (see
        :class:`~kubeflux.scheduler.interface.Unreserve`): the allocation made for it is released at once (engine
        job and books) and the pod, unless it is deleted or bound, waits in the queue again. A pod the informer
        has meanwhile seen bound (elsewhere) is already counted where it runs, and stays so."""
        uid = uid or self._uid_by_key.get(pod, pod)
        alloc = self.allocations.get(uid)
        waiting = self._bound.get(uid)
        if alloc is None or not alloc.own or alloc.node != node or waiting is None or waiting.node_name:
            return
        self._now = now
        self._changed()
        self._release(uid, f"bind refused: {reason}")
        self.log.append(f"Bind of pod {pod} to node {node} refused: {reason}; its allocation is released")
        if not waiting.deleted and waiting.scheduler_name == self.name:
            job = self.queue.add(uid, waiting)
            job.tried_epoch = -1
            # the refusal often comes before the watch shows why (the pod bound by another scheduler, or
            # deleted): tried again at once, it would be bound and refused again, as often as the watch lags
            job.retry_at = max(job.retry_at, now + BIND_BACKOFF)

    def _gone(self, uid: str, why: str) -> None:
        """The pod of ``uid`` ended, was deleted, or its name now belongs to another pod: all of it goes."""
        if uid in self.allocations or uid in self.queue.by_pod:
            self._changed()
        self._release(uid, why)
        self._forget_pending(uid)
        self._told.pop(uid, None)
        self._held.pop(uid, None)

    def _forget_pending(self, uid: str) -> PendingJob | None:
        """A pending pod is gone (bound elsewhere, ended, deleted): out of the queue, its job's reservation too."""
        job = self.queue.by_pod.get(uid)
        if job is not None:
            self._cancel_job_reservations(job)
        return self.queue.remove_pod(uid)

    def _observe_node(self, kind: EventKind, node: Node) -> None:
        name = node.name
        self._fits.reset()
        if kind is EventKind.DELETED:
            self.nodes.pop(name, None)
            if self.graph is not None:
                self.graph.set_gone(name, True)
            return
        self.nodes[name] = node
        graph = self.graph
        if graph is None:
            return
        self._retry_stuck(name)
        spec = node_spec(node, self.sharing.share(node), self.shape) if self.sharing.admits(node) else None
        if spec is None:
            graph.set_gone(name, True)  # no longer kubeflux's under the sharing policy: kept down
        elif graph.specs.get(name) == spec:
            graph.set_gone(name, False)
        else:  # a new node, or new capacity: attached in place, its pods replayed onto it
            graph.put_node(spec)
            for alloc in [alloc for alloc in self.allocations.values() if alloc.node == name]:
                if alloc.jobid:  # its vertices went with the node, not its record: the job is cancelled whole
                    graph.cancel(alloc.jobid)
                    self._unshare(alloc.jobid)
                alloc.jobid = 0
                pod = self._bound.get(alloc.uid)
                if pod is not None and (alloc.own or self.sharing.name != "capped"):  # as _account_bound
                    self._unaccounted[alloc.uid] = pod

    def _account_bound(self, uid: str, pod: Pod) -> None:
        """A pod bound to a node kubeflux does not count yet (another scheduler's, or ours after a restart).

        Ours carries the allocation annotation: its start, duration and cores are put back as they were. A
        corrupt one is reported (:class:`PodWarning`) and the pod put back as if it had none: counted by its
        requests from now on, on any free cores of its node. A member of one of our gangs marks the gang started.
        """
        node = pod.node_name
        own = pod.scheduler_name == self.name
        self.ledger.take(uid, node, pod.requests)
        if own:
            self.own.take(uid, node, pod.requests)
        self._fits.changed(node)
        alloc = Allocation(uid, pod.key, node, own)
        raw = pod.annotations.get(ALLOCATION_ANNOTATION) if own else None
        if raw is not None:
            try:
                record = read_allocation(raw, self.horizon)
            except ValueError as exc:
                message = (
                    f"Pod {pod.key}: metadata.annotations[{ALLOCATION_ANNOTATION}]: {exc}; "
                    f"counted by its requests on node {node}, on any free cores"
                )
                self.log.append(message)
                self._notify(uid, PodWarning(pod.key, pod.uid, "InvalidAllocation", message))
            else:
                alloc.start, alloc.duration = record.start, record.duration
                alloc.placement = alloc.named = Placement(node, record.cores, record.gpus)
        self.allocations[uid] = alloc
        self._bound[uid] = pod
        if own or self.sharing.name != "capped":
            self._unaccounted[uid] = pod
        self.log.append(f"Accounting pod {pod.key} on node {node} ({'recovered' if own else pod.scheduler_name})")
        group = pod.group
        if own and group is not None and group not in self.queue.started_groups:
            self._started(group)

    def _started(self, group: str) -> None:
        """A member of kubeflux's gang ``group`` is bound (seen after a restart): the gang has started, so the
        members still pending, queued together before this was known, wait as lone pods."""
        queue = self.queue
        queue.started_groups.add(group)
        job = queue.jobs.get(group)
        if job is None or job.group != group:
            return
        self._changed()
        for uid, member in list(job.pods.items()):
            self._forget_pending(uid)
            queue.add(uid, member).tried_epoch = -1

    def _resized(self, uid: str, pod: Pod, alloc: Allocation, before: ResourceList) -> None:
        """A bound pod's requests changed (an in-place resize): counted anew in the books, and when its whole
        cores or gpus changed, its engine job is dropped and the pod replayed onto its node (its own cores first;
        when the node has too few, it is retried as pods there end)."""
        node = alloc.node
        self.ledger.give(uid)
        self.ledger.take(uid, node, pod.requests)
        if self.own.give(uid) is not None:
            self.own.take(uid, node, pod.requests)
        self._fits.changed(node)
        self._bound[uid] = pod
        self._changed()
        resize = f" ({pod.resize})" if pod.resize else ""
        self.log.append(f"Pod {pod.key} on node {node} resized{resize}: requests {before} -> {pod.requests}")
        shape = (whole_cores(before.get(CPU, 0)), gpu_count(before, self.shape.gpu_resources))
        if shape != self._pod_shape(pod) or uid in self._stuck.get(node, ()):
            if alloc.jobid and self.graph is not None:
                self._drop_job(alloc)
            if alloc.own or self.sharing.name != "capped":
                self._unaccounted[uid] = pod
        self._retry_stuck(node)

    def _drop_job(self, alloc: Allocation) -> None:
        """Give up the engine job of a pod that stays counted in the books (it is replayed again later)."""
        self._release_engine(alloc)
        alloc.jobid = 0

    def _release_engine(self, alloc: Allocation) -> bool:
        """Release the engine vertices of a pod's allocation: its own job, or its part of a job it shares with
        other members of its gang (:attr:`_shared`). False when the engine no longer knew the job."""
        graph = self.graph
        assert graph is not None
        leaves = (*alloc.placement.cores, *alloc.placement.gpus) if alloc.placement is not None else ()
        sharers = self._shared.get(alloc.jobid)
        if sharers is not None:
            sharers.discard(alloc.uid)
            if sharers:
                if not graph.release(alloc.jobid, alloc.node, leaves, partial=True):
                    self._unshare(alloc.jobid)  # cancelled whole instead: the others are replayed
                return True
            del self._shared[alloc.jobid]
        return graph.release(alloc.jobid, alloc.node, leaves)

    def _unshare(self, jobid: int) -> None:
        """Engine job ``jobid`` is gone whole: the pods that held parts of it are replayed onto their cores."""
        for uid in self._shared.pop(jobid, ()):
            alloc = self.allocations.get(uid)
            pod = self._bound.get(uid)
            if alloc is None or alloc.jobid != jobid:
                continue
            alloc.jobid = 0
            if pod is not None:
                self._unaccounted[uid] = pod
                self._changed()

    def _replay_lost(self) -> None:
        """The pods of the engine jobs the graph had to cancel whole (:attr:`GraphView.lost`) are replayed."""
        graph = self.graph
        if graph is not None and graph.lost:
            lost, graph.lost = graph.lost, []
            for jobid in lost:
                self._unshare(jobid)

    def _retry_stuck(self, node: str) -> None:
        """Node ``node`` changed or freed something: its pods the engine could not take are tried again."""
        if self._stuck:
            self._unaccounted.update(self._stuck.pop(node, {}))

    def _release(self, uid: str, why: str) -> None:
        alloc = self.allocations.pop(uid, None)
        self._unaccounted.pop(uid, None)
        self._bound.pop(uid, None)
        if alloc is None:
            return
        if self._stuck:
            self._stuck.get(alloc.node, {}).pop(uid, None)
        self.ledger.give(uid)
        self.own.give(uid)
        self._fits.changed(alloc.node)
        self._retry_stuck(alloc.node)
        if not alloc.jobid or self.graph is None:
            return
        if self._release_engine(alloc):
            self.log.append(f"Cancel flux job: {alloc.jobid} for pod {alloc.key} ({why})")

    # ================================================================== the graph

    def _ensure_graph(self) -> GraphView | None:
        """The graph, built from the admitted nodes the first time there are any; later changes are in place."""
        if self.graph is not None:
            return self.graph
        admitted = sorted((node for node in self.nodes.values() if self.sharing.admits(node)), key=_graph_order)
        if not admitted:
            return None
        specs = [node_spec(node, self.sharing.share(node), self.shape) for node in admitted]
        self.graph = GraphView(specs, self.policy, self.horizon, self.log)
        self._fits.reset()
        return self.graph

    def _pod_shape(self, pod: Pod) -> tuple[int, int]:
        """(exclusive cores, gpus) ``pod`` takes from the graph (:func:`~kubeflux.scheduler.translate.pod_shape`)."""
        return pod_shape(pod, self.shape.gpu_resources)

    def _tick(self, now: float) -> int:
        return max(0, math.floor(now))

    def _planned(self, pod: Pod, start: int, *, reserve: bool = False) -> int:
        """Seconds to plan the pod's allocation for, from ``start``: its duration, cut at the horizon.

        A pod without a duration holds its resources to the end of the graph's horizon; reserved for later, it
        plans half the time left, so that a later start still fits the horizon.
        """
        left = self.horizon - start
        duration = pod_duration(pod)
        if duration is None:
            return left // 2 if reserve else left
        return max(1, min(math.ceil(duration), left // 2 if reserve else left))

    def _match(
        self, op: MatchOp, pod: Pod, duration: int, start: int, hide: set[str] | HiddenNodes
    ) -> MatchResult | None:
        """One engine match for ``pod`` with the ``hide`` nodes down; None for a pod that takes no core/gpu."""
        assert self.graph is not None
        spec = pod_jobspec(pod, duration, self.shape.gpu_resources, self.graph.socket_size)
        if spec is None:
            return None
        return self.graph.match(op, spec, pod.key, start, hide, pod_policy(pod, self.policy))

    def _account_unaccounted(self) -> None:
        """Replay the bound pods the engine does not hold yet (others', or ours after a restart, a resize or a node
        change) onto their node's cores and gpus: those named in their allocation when still free, else any free
        ones. A pod whose node is down or has too few free ones (or holds a node-exclusive job) stays counted in
        the exact books only and waits, stuck, until its node changes or a pod there ends; meanwhile its node is
        hidden from node-exclusive matches (:attr:`GraphView.unrecorded`)."""
        graph = self.graph
        if graph is None or not (self._unaccounted or graph.unrecorded):
            return
        self._drop_deferred()
        pending, self._unaccounted = self._unaccounted, {}
        now = self._tick(self._now)
        for uid, pod in sorted(pending.items(), key=self._others_last):
            alloc = self.allocations.get(uid)
            cores, gpus = self._pod_shape(pod)
            if alloc is None or (cores == 0 and gpus == 0):
                continue
            if not graph.usable(alloc.node):
                # a node that is down is tried again when it comes back; one outside the graph has all its pods
                # replayed when it is attached
                if alloc.node in graph.specs:
                    self._stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            if alloc.own and alloc.duration and alloc.start + alloc.duration > now:
                start, duration = alloc.start, alloc.duration
            else:
                start, duration = now, self.horizon - now
            # the cores its annotation names first (a CPU pinning agent reads them), then those it last held
            named = [*alloc.named.cores, *alloc.named.gpus] if alloc.named is not None else []
            last = [*alloc.placement.cores, *alloc.placement.gpus] if alloc.placement is not None else []
            core_uids = graph.free_leaves(alloc.node, "core", start, duration, cores, named, last)
            gpu_uids = graph.free_leaves(alloc.node, "gpu", start, duration, gpus, named, last)
            if core_uids is None or gpu_uids is None:
                self.log.append(
                    f"Could not put pod {pod.key} on node {alloc.node} in the graph "
                    "(counted in the books; tried again when a pod there ends or the node changes)"
                )
                self._stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            whole_node = alloc.own and self._holds_node_whole(pod)
            result = graph.replay(
                alloc.node, core_uids + gpu_uids, start, duration, pod.key, now, whole_node=whole_node
            )
            if not result.matched:
                self._stuck.setdefault(alloc.node, {})[uid] = pod
                continue
            alloc.jobid = result.jobid
            if alloc.own:
                alloc.start, alloc.duration = start, duration
                heapq.heappush(self._ends, (start + duration, uid))
            names = graph.engine.graph.vertices
            alloc.placement = Placement(
                alloc.node, tuple(names[u].name for u in core_uids), tuple(names[u].name for u in gpu_uids)
            )
        graph.unrecorded = {name for name, pods in self._stuck.items() if pods and graph.usable(name)}

    def _others_last(self, item: tuple[str, Pod]) -> bool:
        """Replay order: kubeflux's own pods first (their cores are recorded, a node-exclusive one holds its node
        whole), then other schedulers' (kubeflux picks any free cores for them), so a relist that lists another
        scheduler's pod first rebuilds the graph the restarted scheduler had, not one where that pod keeps ours out."""
        alloc = self.allocations.get(item[0])
        return alloc is None or not alloc.own

    def _holds_node_whole(self, pod: Pod) -> bool:
        """Whether kubeflux placed ``pod`` under a node-exclusive policy (its annotation's, else the profile's)."""
        try:
            name = pod_policy(pod, self.policy)
        except PodRequestError:  # the annotation changed since: the profile's policy placed it
            name = self.policy
        return parse_policy(name).node_exclusive

    def _extend_overruns(self, now: float) -> None:
        """A pod of kubeflux still running at the end of its planned time keeps its cores: its engine job is
        replaced by one from now to the horizon (so reservations do not count on cores that are not free)."""
        tick = self._tick(now)
        ends = self._ends
        while ends and ends[0][0] <= tick:
            end, uid = heapq.heappop(ends)
            alloc = self.allocations.get(uid)
            pod = self._bound.get(uid)
            if alloc is None or pod is None or not alloc.jobid or alloc.start + alloc.duration != end:
                continue
            assert self.graph is not None
            if alloc.jobid in self._shared:
                self._release_engine(alloc)
            else:
                self.graph.cancel(alloc.jobid)
            alloc.jobid = 0
            alloc.start, alloc.duration = tick, self.horizon - tick
            self._unaccounted[uid] = pod
            self._changed()
            self.log.append(f"Pod {alloc.key} runs past its planned end ({end}); its allocation is extended")

    def _cancel_job_reservations(self, job: PendingJob, *, defer: bool = False) -> None:
        """Drop the job's reservation: its engine jobs and holds. With ``defer`` a kept gang reservation
        (:mod:`kubeflux.scheduler.kept`) stays in the engine, for one job at a time, until the pass either finds it
        the same again or touches the engine otherwise (:meth:`_drop_deferred`)."""
        graph = self.graph
        if graph is not None:
            kept = job.kept
            for jobid in job.reservations:
                if kept is None or jobid != kept.jobid:
                    graph.cancel(jobid)
                elif defer and self._deferred is None:
                    self._deferred = job
                else:  # its vertices are known: named in the release log
                    graph.cancel(jobid, kept.leaves, job)
            if self._deferred is job and not defer:
                self._drop_deferred()
        job.reservations.clear()
        for hold in job.holds:
            self.plans.drop(hold)
            self.own_plans.drop(hold)
        job.holds.clear()
        job.left_out.clear()
        job.member_reservations.clear()
        job.expected_start = None

    def _drop_deferred(self) -> None:
        """Cancel the engine job of the reservation left in the engine by a deferred cancel, if any: called before
        anything else reads or changes the engine in a pass."""
        job = self._deferred
        if job is None:
            return
        self._deferred = None
        kept = job.kept
        if kept is not None and self.graph is not None:
            self.graph.cancel(kept.jobid, kept.leaves, job)


def placement_view(pod: Pod) -> tuple[object, ...]:
    """What placing a pending pod reads of it (not its status, nor the expected start written back on it)."""
    annotations = {k: v for k, v in pod.annotations.items() if k != EXPECTED_START_ANNOTATION}
    return (
        pod.requests,
        pod.priority,
        pod.labels,
        annotations,
        pod.node_selector,
        pod.tolerations,
        pod.required_node_affinity,
        pod.active_deadline_seconds,
        pod.scheduler_name,
    )
