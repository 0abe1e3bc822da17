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
  kubeflux chose, releases kubeflux's allocation for it at once; a pod still pending waits in the queue again.

:class:`ClusterBooks` holds this state; :class:`kubeflux.scheduler.core.KubefluxScheduler` adds the queue's
scheduling pass on top.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import deque
from dataclasses import dataclass

from kubeflux.match.engine import MatchOp, MatchResult
from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.fit import FitIndex
from kubeflux.scheduler.graphview import GraphView, HiddenNodes
from kubeflux.scheduler.interface import ClusterEvent, EventKind
from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import Node, Pod, PodGroup
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.sharing import SharingPolicy
from kubeflux.scheduler.timebooks import TimeBooks
from kubeflux.scheduler.translate import (
    Placement,
    PodRequestError,
    node_spec,
    pod_duration,
    pod_jobspec,
    pod_policy,
    pod_shape,
)

__all__ = ["ALLOCATION_ANNOTATION", "Allocation", "ClusterBooks"]

ALLOCATION_ANNOTATION = "kubeflux.io/allocation"
"""Written on every pod kubeflux binds: JSON with the engine job id, node, cores, gpus, start and duration."""


@dataclass(slots=True)
class Allocation:
    """One bound pod as kubeflux counts it."""

    uid: str
    key: str
    node: str
    own: bool
    jobid: int = 0
    """The engine job holding its cores/gpus; 0 when it has none (a fractional pod, or not in the graph)."""
    start: int = 0
    duration: int = 0
    placement: Placement | None = None


class ClusterBooks:
    """The informer's state for the scheduler named ``name`` (see the module docstring)."""

    def __init__(self, name: str, policy: str, sharing: SharingPolicy, horizon: int, log_limit: int) -> None:
        self.name = name
        self.policy = policy
        self.sharing = sharing
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
        self._ends: list[tuple[int, str]] = []
        """(planned end, pod uid) of kubeflux's allocations, to extend those of pods that run past it."""
        self._fits = FitIndex()
        self._dirty = True
        self._epoch = 0
        """Bumped whenever a waiting job might now fit, or a reservation might no longer hold."""
        self._now = 0.0

    # ================================================================== observe

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Node):
            self._changed()
            self._observe_node(event.kind, obj)
        elif isinstance(obj, PodGroup):
            self._changed()
            if event.kind is EventKind.DELETED:
                self.queue.groups.pop(obj.key, None)
                self.queue.started_groups.discard(obj.key)  # a group made again under this name is a new gang
            else:
                self.queue.groups[obj.key] = obj
        else:
            self._observe_pod(event.kind, obj)

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
        if kind is EventKind.DELETED or pod.phase.terminal:
            if uid in self.allocations or uid in self.queue.by_pod:
                self._changed()
            self._release(uid, "deleted" if kind is EventKind.DELETED else pod.phase.value)
            self._forget_pending(uid)
            self._uid_by_key.pop(pod.key, None)
            return
        self._uid_by_key[pod.key] = uid
        if pod.node_name:
            alloc = self.allocations.get(uid)
            if alloc is not None and alloc.node != pod.node_name:  # bound elsewhere than kubeflux decided
                self._release(uid, f"bound to {pod.node_name} instead")
                alloc = None
            if alloc is None:
                self._changed()
                self._forget_pending(uid)
                self._account_bound(uid, pod)
            return
        if pod.scheduler_name != self.name:
            return
        if pod.deleted:
            if self._forget_pending(uid) is not None:
                self._changed()
            return
        known = self.queue.by_pod.get(uid)
        if known is not None and known.pods[uid].priority != pod.priority:
            self._changed()
        elif known is None:
            self._dirty = True
        job = self.queue.add(uid, pod)
        job.tried_epoch = -1
        if known is None and job.reservations:  # a gang grew: its reservation no longer covers it, so re-plan
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
        spec = node_spec(node, self.sharing.share(node)) if self.sharing.admits(node) else None
        if spec is None:
            graph.set_gone(name, True)  # no longer kubeflux's under the sharing policy: kept down
        elif graph.specs.get(name) == spec:
            graph.set_gone(name, False)
        else:  # a new node, or new capacity: attached in place, its pods replayed onto it
            graph.put_node(spec)
            for alloc in self.allocations.values():
                if alloc.node == name:
                    if alloc.jobid:  # each pod has a job of its own: its vertices went with the node, not its record
                        graph.cancel(alloc.jobid)
                    alloc.jobid = 0
                    pod = self._bound.get(alloc.uid)
                    if pod is not None:
                        self._unaccounted[alloc.uid] = pod

    def _account_bound(self, uid: str, pod: Pod) -> None:
        """A pod bound to a node kubeflux does not count yet (another scheduler's, or ours after a restart)."""
        node = pod.node_name
        own = pod.scheduler_name == self.name
        self.ledger.take(uid, node, pod.requests)
        if own:
            self.own.take(uid, node, pod.requests)
        self._fits.changed(node)
        alloc = Allocation(uid, pod.key, node, own)
        record = _read_annotation(pod) if own else None
        if record is not None:
            alloc.start, alloc.duration = record
        self.allocations[uid] = alloc
        self._bound[uid] = pod
        if own or self.sharing.name != "capped":
            self._unaccounted[uid] = pod
        self.log.append(f"Accounting pod {pod.key} on node {node} ({'recovered' if own else pod.scheduler_name})")

    def _release(self, uid: str, why: str) -> None:
        alloc = self.allocations.pop(uid, None)
        self._unaccounted.pop(uid, None)
        self._bound.pop(uid, None)
        if alloc is None:
            return
        self.ledger.give(uid)
        self.own.give(uid)
        self._fits.changed(alloc.node)
        if not alloc.jobid or self.graph is None:
            return
        leaves = (*alloc.placement.cores, *alloc.placement.gpus) if alloc.placement is not None else ()
        if self.graph.release(alloc.jobid, alloc.node, leaves):
            self.log.append(f"Cancel flux job: {alloc.jobid} for pod {alloc.key} ({why})")

    # ================================================================== the graph

    def _ensure_graph(self) -> GraphView | None:
        """The graph, built from the admitted nodes the first time there are any; later changes are in place."""
        if self.graph is not None:
            return self.graph
        admitted = [node for node in self.nodes.values() if self.sharing.admits(node)]
        if not admitted:
            return None
        specs = [node_spec(node, self.sharing.share(node)) for node in admitted]
        self.graph = GraphView(specs, self.policy, self.horizon, self.log)
        self._fits.reset()
        return self.graph

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
        spec = pod_jobspec(pod, duration)
        if spec is None:
            return None
        return self.graph.match(op, spec, pod.key, start, hide, pod_policy(pod, self.policy))

    def _account_unaccounted(self) -> None:
        """Replay the bound pods the engine does not hold yet (others', or ours after a restart or a node change)
        onto their node's cores and gpus: those named in our allocation annotation when still free, else any
        free ones. A pod whose node has too few free ones stays counted in the exact books only."""
        graph = self.graph
        if not self._unaccounted or graph is None:
            return
        pending, self._unaccounted = self._unaccounted, {}
        now = self._tick(self._now)
        for uid, pod in pending.items():
            alloc = self.allocations.get(uid)
            cores, gpus = pod_shape(pod)
            if alloc is None or not graph.usable(alloc.node) or (cores == 0 and gpus == 0):
                continue
            if alloc.own and alloc.duration and alloc.start + alloc.duration > now:
                start, duration = alloc.start, alloc.duration
            else:
                start, duration = now, self.horizon - now
            if alloc.placement is not None:
                named = [*alloc.placement.cores, *alloc.placement.gpus]
            else:
                named = _annotated_leaves(pod) if alloc.own else []
            core_uids = graph.free_leaves(alloc.node, "core", start, duration, cores, named)
            gpu_uids = graph.free_leaves(alloc.node, "gpu", start, duration, gpus, named)
            if core_uids is None or gpu_uids is None:
                self.log.append(f"Could not put pod {pod.key} on node {alloc.node} in the graph (counted in the books)")
                continue
            whole_node = alloc.own and self._holds_node_whole(pod)
            result = graph.replay(
                alloc.node, core_uids + gpu_uids, start, duration, pod.key, now, whole_node=whole_node
            )
            if result.matched:
                alloc.jobid = result.jobid
                if alloc.own:
                    alloc.start, alloc.duration = start, duration
                    heapq.heappush(self._ends, (start + duration, uid))
                names = graph.engine.graph.vertices
                alloc.placement = Placement(
                    alloc.node, tuple(names[u].name for u in core_uids), tuple(names[u].name for u in gpu_uids)
                )

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
            self.graph.cancel(alloc.jobid)
            alloc.jobid = 0
            alloc.start, alloc.duration = tick, self.horizon - tick
            self._unaccounted[uid] = pod
            self._changed()
            self.log.append(f"Pod {alloc.key} runs past its planned end ({end}); its allocation is extended")

    def _cancel_job_reservations(self, job: PendingJob) -> None:
        if self.graph is not None:
            for jobid in job.reservations:
                self.graph.cancel(jobid)
        job.reservations.clear()
        for hold in job.holds:
            self.plans.drop(hold)
            self.own_plans.drop(hold)
        job.holds.clear()
        job.expected_start = None


def _annotated_leaves(pod: Pod) -> list[str]:
    """The core and gpu names of a pod's allocation annotation (empty when absent or unreadable)."""
    try:
        data = json.loads(pod.annotations.get(ALLOCATION_ANNOTATION, "{}"))
        return [str(name) for name in [*data.get("cores", []), *data.get("gpus", [])]]
    except (ValueError, TypeError, AttributeError):
        return []


def _read_annotation(pod: Pod) -> tuple[int, int] | None:
    """(start, duration) from a pod's allocation annotation, or None when absent or unreadable."""
    raw = pod.annotations.get(ALLOCATION_ANNOTATION)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        start, duration = int(data["start"]), int(data["duration"])
    except (ValueError, KeyError, TypeError):
        return None
    return start, duration
