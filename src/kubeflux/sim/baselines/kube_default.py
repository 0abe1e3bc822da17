"""A kube-scheduler-like baseline: PrioritySort, the default filters, LeastAllocated scoring, no gangs.

One scheduling cycle per pod, as kube-scheduler's framework reads: **pop** (queue order: priority, higher
first; then creation time; then ``namespace/name``), **PreFilter**, **Filter** (NodeUnschedulable,
TaintToleration, NodeAffinity, NodeResourcesFit — :mod:`kubeflux.scheduler.constraints`; NodePorts,
PodTopologySpread, InterPodAffinity — :mod:`kubeflux.scheduler.podterms`), **PostFilter** when
no node passes (DefaultPreemption, :mod:`~kubeflux.sim.baselines.kube_preemption`: pods of lower priority evicted
one by one, the pod nominated to their node; ``preemption="never"`` turns it off), **Score** (NodeResourcesFit
``LeastAllocated``), **select**, **assume**, **Permit**, **bind**.

What is kube-scheduler's behaviour here, exactly:

* Filter reasons and the ``0/N nodes are available: …`` message (``FitError.Error()``), with DefaultPreemption's
  ``preemption: …`` part when it found no node to preempt on.
* ``percentageOfNodesToScore`` (adaptive by default: ``50 − nodes/125`` percent, at least 5 %, at least 100
  nodes): the filter stops once that many feasible nodes are found, scanning round-robin from where the previous
  cycle stopped (``nextStartNodeIndex``). Nodes are listed as kube-scheduler's node tree lists them: zones
  (``topology.kubernetes.io/region``/``zone``) interleaved, each zone in the order its nodes arrived.
* LeastAllocated: per resource ``(allocatable − requested) × 100 // allocatable`` (0 when over), averaged over
  cpu and memory with integer division; ``requested`` counts 100m cpu / 200Mi memory for pods that request
  none (kube-scheduler's ``NonZeroRequested``; applied per pod here, per container in kube-scheduler).
* The cache counts every pod bound to a node, whichever scheduler bound it, until it is terminal or removed (a
  terminating pod still counts);
  pods this scheduler binds are assumed at once.
* Retries: a failed pod waits for a cluster event that may help (node added or changed, a bound pod released)
  and, ordered by its back-off (1 s doubling to 10 s, kube-scheduler's ``podInitialBackoffSeconds`` and
  ``podMaxBackoffSeconds``), is tried again. The default, ``queue="classic"`` (the first baselines: priority then
  creation, a failed pod retried once it saw an event and its back-off ended), gives the published figures.
  ``queue="v1.36"`` (:data:`QUEUE_V136`, what the fidelity page and ``kube-gang`` run) is kube-scheduler v1.36's
  scheduling queue (``pkg/scheduler/backend/queue``), measured against the real kube-scheduler on seed 004's
  one- and two-pod jobs. It is not the default: on gangs of plain pods (the demo's MPI jobs) its outcome swings by
  tens of percent, or deadlocks, with milliseconds of difference in when pods end or cycles run (so does the real
  scheduler's; one run is one draw), and the 5-minute flush of ``unschedulablePods`` is not modelled. Under it a failed
  pod's ``Timestamp`` becomes the time of its failure (PrioritySort orders the active queue by priority, then
  that timestamp, not by creation); its back-off expiry is
  ``Timestamp + min(1 s × 2^(n−1), 10 s)`` truncated to the whole second (``backoffQOrderingWindowDuration``)
  and it is backing off while that expiry is not before the current second. A cluster event that may help
  (``AssignedPodDelete``: a bound pod ended or went; a node added or changed) moves each waiting pod to the
  active queue, or, still backing off, to the backoff queue; the scheduler pops the active queue and, when it is
  empty, the backoff queue (``SchedulerPopFromBackoffQ``) in expiry order — so every waiting pod is tried at
  each such event, the ones done backing off first (oldest failure first), then the others soonest expiry first:
  the pods that failed fewer times. Each failure counts (``UnschedulableCount``) and restarts the back-off, so a
  pod that keeps losing falls behind younger ones (2, 4, 8, 10 s). Pods wait for events, never for a timer.
  ``cycle_seconds`` gives each scheduling cycle that much virtual time (one pod per cycle, the next cycle a
  wake-up later), so an event that comes while the queue is being worked through (the second pod of a pair
  ending a few milliseconds after the first) finds the pods not yet tried still in the active queue, ahead of the
  ones that just failed; 0 (the default) works the whole queue at one instant.

Approximations: ties between equally scored nodes go to the first in scan order (or a seeded random choice with
``seed``) where kube-scheduler picks at random; only LeastAllocated scores (no BalancedAllocation, ImageLocality,
PreferNoSchedule or preferred affinity scoring); no periodic flush of unschedulable pods
(``podMaxInUnschedulablePodsDuration``) since nothing changes without an event; the filter is exact and sequential
where kube-scheduler's is parallel.
"""

from __future__ import annotations

import heapq
import math
import random
from typing import TypedDict

from kubeflux.scheduler.constraints import fit_error_message, never_fits
from kubeflux.scheduler.devices import ClaimAllocation, DeviceBooks, DeviceClass, ResourceClaim, ResourceSlice
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Reject, Unschedulable
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, DisruptionBudget, Namespace, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.podterms import PodsByNode, constrained
from kubeflux.scheduler.storage import STORAGE_KINDS, ClaimBinding, VolumeBook
from kubeflux.scheduler.volumes import claim_bindings, pod_volumes
from kubeflux.sim.baselines.kube_filter import NodeSearch
from kubeflux.sim.baselines.kube_preemption import (
    NO_POST_FILTER,
    PREEMPTION_LOWER_PRIORITY,
    PREEMPTION_SETTINGS,
    DefaultPreemption,
    Failure,
    Failures,
    Placement,
    PostFilterResult,
    pod_never,
)
from kubeflux.sim.baselines.kube_queue import (
    BACKOFF_WINDOW,
    QUEUE_CLASSIC,
    QUEUE_V136,
    QUEUES,
    QueuedPod,
    QueueKey,
    SortKey,
)
from kubeflux.sim.baselines.node_table import NodeTable, num_feasible_nodes_to_find

__all__ = [  # the queue's and the failure memo's names are re-exported for the baselines built on this one
    "QUEUE_CLASSIC",
    "QUEUE_V136",
    "Failure",
    "Failures",
    "KubeDefaultOptions",
    "KubeDefaultScheduler",
    "QueueKey",
    "QueuedPod",
    "SortKey",
    "num_feasible_nodes_to_find",
    "pod_never",
]


class KubeDefaultOptions(TypedDict, total=False):
    """The keyword arguments of :class:`KubeDefaultScheduler` that a scheduler built on it passes through (the
    coscheduling plugin's): their meaning and defaults are :class:`KubeDefaultScheduler`'s."""

    percentage_of_nodes_to_score: int
    seed: int | None
    pod_initial_backoff: float
    pod_max_backoff: float
    reject_never_fits: bool
    preemption: str


class KubeDefaultScheduler:
    """kube-scheduler's default profile, reduced to the plugins that matter for batch workloads.

    ``name`` is the ``schedulerName`` whose pods it places (``default-scheduler`` unless told otherwise).
    ``percentage_of_nodes_to_score`` 0 is kube-scheduler's adaptive default; ``seed`` makes tie-breaking a seeded
    random choice instead of "first in scan order". With ``reject_never_fits`` a pod that no node could hold even
    empty gets a :class:`Reject` instead of repeated :class:`Unschedulable` decisions (kube-scheduler never
    rejects; this is for simulations that report such jobs as rejected). ``preemption``: ``lowerPriority`` (the
    default, kube-scheduler's) runs DefaultPreemption when a pod fails its filters
    (:mod:`~kubeflux.sim.baselines.kube_preemption`); ``never`` turns it off (a profile without it).
    """

    def __init__(
        self,
        name: str = DEFAULT_SCHEDULER,
        *,
        percentage_of_nodes_to_score: int = 0,
        seed: int | None = None,
        pod_initial_backoff: float = 1.0,
        pod_max_backoff: float = 10.0,
        reject_never_fits: bool = False,
        queue: str = QUEUE_CLASSIC,
        cycle_seconds: float = 0.0,
        window_offset: float = 0.0,
        preemption: str = PREEMPTION_LOWER_PRIORITY,
    ) -> None:
        if not 0 <= percentage_of_nodes_to_score <= 100:
            raise ValueError(f"percentage_of_nodes_to_score must be within 0..100, got {percentage_of_nodes_to_score}")
        if queue not in QUEUES:
            raise ValueError(f"queue must be one of {', '.join(QUEUES)}, got {queue!r}")
        if cycle_seconds < 0 or (cycle_seconds and queue != QUEUE_V136):
            raise ValueError("cycle_seconds must be >= 0, and is for the v1.36 queue only")
        if preemption not in PREEMPTION_SETTINGS:
            raise ValueError(f"preemption must be one of {', '.join(PREEMPTION_SETTINGS)}, got {preemption!r}")
        self.queue = queue
        self._v136 = queue == QUEUE_V136
        self.cycle_seconds = cycle_seconds
        self.window_offset = window_offset
        """Where the back-off windows fall: kube-scheduler truncates to whole seconds of the wall clock, so a
        virtual time ``t`` is at ``t + window_offset`` of it (the fraction of a second at which a real run began)."""
        self._busy_until = 0.0
        self.name = name
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.pod_initial_backoff = pod_initial_backoff
        self.pod_max_backoff = pod_max_backoff
        self.reject_never_fits = reject_never_fits
        self._rng = None if seed is None else random.Random(seed)
        self.nodes = NodeTable()
        self._placed: dict[str, Placement] = {}
        self._priorities: dict[int, int] = {}
        """How many placed pods have each priority (so preemption knows at once when no pod is of lower priority)."""
        self._queue: dict[str, QueuedPod] = {}
        self._groups: dict[str, PodGroup] = {}
        self._budgets: dict[str, DisruptionBudget] = {}
        """The PodDisruptionBudgets by ``namespace/name`` (for preemption)."""
        self._group_placed: dict[str, int] = {}
        self._generation = 1  # so that "one behind" (retry after back-off) is never the -1 of "due now"
        self._stamps = 0
        """Counts the pods' entries into the queue and failures (:attr:`QueuedPod.order`)."""
        self._attempted: set[str] = set()
        """The pods tried in the current :meth:`schedule` call (each at most once)."""
        self._active: list[tuple[QueueKey, int, QueuedPod]] = []
        self._sequence = 0
        self._epoch = 0  # placements and releases, so a remembered failure is reused only while nothing moved
        self.pods = PodsByNode()
        """Every bound pod by node, for the filters that look at the pods around a pod."""
        self.volumes = VolumeBook()
        """The storage objects, for the volume filters (:mod:`kubeflux.scheduler.volumes`)."""
        self._claims: dict[str, tuple[ClaimBinding, ...]] = {}
        """Pod key → what its Bind writes for its claims, assumed when it was placed (Reserve)."""
        self.devices = DeviceBooks()
        """The devices and claims of Dynamic Resource Allocation (DynamicResources' filter, and the allocation a Bind
        carries)."""
        self.search = NodeSearch(
            self.nodes, percentage_of_nodes_to_score, self._rng, self.pods, self.volumes, self.devices
        )
        self.preemption: DefaultPreemption | None = None
        """DefaultPreemption, unless ``preemption="never"``."""
        if preemption == PREEMPTION_LOWER_PRIORITY:
            self.preemption = DefaultPreemption(
                self.nodes, self._placed, self._priorities, self._budgets, self._rng, self._preempt_waiting
            )

    # --- the informer side ------------------------------------------------------------------------------

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Node):
            if event.kind is EventKind.DELETED:
                self.nodes.remove_node(obj.name)
            else:
                self.nodes.set_node(obj)
                self._generation += 1
        elif isinstance(obj, Pod):
            self._observe_pod(obj, now, deleted=event.kind is EventKind.DELETED)
            if event.kind is EventKind.ADDED:
                self._on_pod_added(obj)
        elif isinstance(obj, DisruptionBudget):
            if event.kind is EventKind.DELETED:
                self._budgets.pop(obj.key, None)
            else:
                self._budgets[obj.key] = obj
        elif isinstance(obj, Namespace):
            self.pods.namespace(obj.name, None if event.kind is EventKind.DELETED else obj.labels)
            self._generation += 1
        elif isinstance(obj, STORAGE_KINDS):
            self.volumes.observe(event.kind is EventKind.DELETED, obj)
            self._generation += 1
        elif isinstance(obj, ResourceSlice | DeviceClass | ResourceClaim):
            self.devices.observe(obj, event.kind is EventKind.DELETED)
            self._generation += 1
        elif isinstance(obj, PodGroup):
            if event.kind is EventKind.DELETED:
                self._groups.pop(obj.key, None)
            else:
                self._groups[obj.key] = obj
            if not self._v136:  # no plugin of kube-scheduler's default profile registers coscheduling's PodGroup
                self._generation += 1

    def _observe_pod(self, pod: Pod, now: float, *, deleted: bool) -> None:
        key = pod.key
        # A terminating pod (deletionTimestamp set, held by a finalizer or its grace period) stays in kube-scheduler's
        # cache until the object is removed: its resources, ports and labels still count. A pending one is no longer
        # scheduled (``skipPodSchedule``).
        gone = deleted or pod.phase.terminal
        leaving = gone or pod.deleted
        placed = self._placed.get(key)
        if placed is not None and (gone or placed.uid != pod.uid or (pod.node_name and pod.node_name != placed.node)):
            self._unplace(key)
            self._generation += 1  # resources freed: pods waiting for room may fit now
            placed = None
        preemption = self.preemption
        if preemption is not None and (preemption.nominations or preemption.evicting) and (gone or pod.node_name):
            preemption.forget(key, gone=gone)
        if placed is not None:
            placed.pod = pod
            self.pods.add(key, pod, placed.node)  # its labels as they are now
            if placed.started is None and pod.phase is PodPhase.RUNNING:
                placed.started = now
        queued = self._queue.get(key)
        if queued is not None and (leaving or queued.pod.uid != pod.uid or pod.node_name):
            del self._queue[key]
            queued = None
        if leaving or placed is None:
            self._forget_waiting(key)  # a pod held at Permit is assumed (placed); losing either ends the wait
        if gone:
            return
        if pod.node_name:
            if placed is None:
                self._place(pod, pod.node_name, now if pod.phase is PodPhase.RUNNING else None)
        elif pod.deleted:
            return
        elif placed is None and pod.scheduler_name == self.name and not pod.scheduling_gates:  # (SchedulingGates)
            if queued is None:
                self._stamps += 1
                self._queue[key] = QueuedPod(pod, timestamp=pod.creation_time, order=self._stamps)
            else:
                queued.pod = pod
        # else: assumed by us and not yet confirmed bound; keep the assumption

    def _on_pod_added(self, pod: Pod) -> None:
        """Hook for subclasses that requeue on pod arrivals (coscheduling's sibling count)."""

    def _place(self, pod: Pod, node: str, started: float | None = None) -> None:
        self._epoch += 1
        if pod.volume_claims and not pod.node_name:  # AssumePodVolumes, at Reserve (written by its Bind)
            claims = claim_bindings(pod, self.nodes.by_name[node], self.volumes, self.pods)
            self._claims[pod.key] = () if isinstance(claims, str) else claims  # its filters said they fit
        group = pod.group
        self._placed[pod.key] = Placement(pod, node, dict(pod.requests), group, started)
        self.nodes.add_usage(node, pod.requests, +1)
        self.pods.add(pod.key, pod, node)
        priorities = self._priorities
        priorities[pod.priority] = priorities.get(pod.priority, 0) + 1
        if group is not None:
            self._group_placed[group] = self._group_placed.get(group, 0) + 1

    def _unplace(self, key: str) -> None:
        self._epoch += 1
        claims = self._claims.pop(key, None)
        if claims:  # unreserved before its Bind (a Permit's rejection): what it assumed of its claims is undone
            self.volumes.revert(claims)
        placed = self._placed.pop(key)
        if placed.pod.resource_claims:
            self.devices.forget(placed.pod.uid)
        self.nodes.add_usage(placed.node, placed.requests, -1)
        self.pods.remove(key)
        priority = placed.pod.priority
        left = self._priorities[priority] - 1
        if left:
            self._priorities[priority] = left
        else:
            del self._priorities[priority]
        if placed.group is not None:
            self._group_placed[placed.group] -= 1

    # --- the scheduling side ----------------------------------------------------------------------------

    def schedule(self, now: float) -> list[Decision]:
        """Run a scheduling cycle for every pod that is due, in queue order; each pod at most once per call."""
        self.nodes.refresh()
        decisions: list[Decision] = self._before_cycle(now)
        failures: Failures = {}
        if self.cycle_seconds:
            return decisions + self._one_cycle(now, failures)
        attempted = self._attempted = set()
        self._active = self._due_entries(now)
        heapq.heapify(self._active)
        while self._active:
            queued = heapq.heappop(self._active)[2]
            key = queued.pod.key
            if self._queue.get(key) is not queued or key in attempted:
                continue  # bound or gone as a side effect of an earlier cycle, or a duplicate entry
            attempted.add(key)
            decisions.extend(self._schedule_one(queued, now, failures))
        return decisions

    def _one_cycle(self, now: float, failures: Failures) -> list[Decision]:
        """With ``cycle_seconds``: one scheduling cycle, for the head of the queue, unless the previous one is still
        running (then :meth:`next_wakeup` says when it ends)."""
        if now < self._busy_until:
            return []
        entries = self._due_entries(now)
        if not entries:
            return []
        head = min(entries)[2]
        self._attempted = {head.pod.key}
        self._busy_until = now + self.cycle_seconds
        return self._schedule_one(head, now, failures)

    def _due_entries(self, now: float) -> list[tuple[QueueKey, int, QueuedPod]]:
        """Queue entries of the pods due for a cycle now (a hook: coscheduling leaves out blocked groups)."""
        return [self._entry(q, now) for q in self._queue.values() if self._due(q, now)]

    def _due(self, queued: QueuedPod, now: float) -> bool:
        if self._v136:  # popped from the backoff queue when the active one is empty: an event is enough
            return queued.generation < self._generation
        return queued.generation < 0 or (queued.generation < self._generation and queued.backoff_until <= now)

    def _entry(self, queued: QueuedPod, now: float) -> tuple[QueueKey, int, QueuedPod]:
        self._sequence += 1
        return (self._queue_key(queued, now), self._sequence, queued)

    def _queue_key(self, queued: QueuedPod, now: float) -> QueueKey:
        """Where the pod stands in this cycle's order: the active queue by PrioritySort, then (``v1.36``) the
        pods still backing off by expiry, then PrioritySort."""
        if not self._v136:
            return (0, 0.0, self._sort_key(queued.pod))
        pod = queued.pod
        key = (-pod.priority, queued.timestamp, queued.order)
        if queued.attempts and self._backing_off(queued, now):
            return (1, queued.expiry, key)
        return (0, 0.0, key)

    def _backing_off(self, queued: QueuedPod, now: float) -> bool:
        """kube-scheduler's ``isPodBackingoff``: its expiry is not before the current window."""
        return queued.expiry >= self._window(now)

    def _window(self, t: float) -> float:
        """The start of ``t``'s back-off window (``alignToWindow``), in virtual time."""
        offset = self.window_offset
        return math.floor((t + offset) / BACKOFF_WINDOW) * BACKOFF_WINDOW - offset

    def _activate(self, queued: QueuedPod, now: float) -> None:
        """Move a pod to the active queue now (kube-scheduler's ``PodsToActivate``), or once its back-off ends."""
        if queued.backoff_until > now:
            queued.generation = min(queued.generation, self._generation - 1)
            return
        queued.generation = -1
        heapq.heappush(self._active, self._entry(queued, now))

    def next_wakeup(self, now: float) -> float | None:
        if self._v136:  # waiting pods wait for events (the backoff queue is drained when the active one is empty)
            busy = self.cycle_seconds and any(self._due(q, now) for q in self._queue.values())
            return max(self._busy_until, now) if busy else None
        times = [
            q.backoff_until for q in self._queue.values() if q.generation < self._generation and q.backoff_until > now
        ]
        return min(times, default=None)

    def _before_cycle(self, now: float) -> list[Decision]:
        """Hook: decisions due before the queue is walked (coscheduling's Permit timeouts)."""
        return []

    def _sort_key(self, pod: Pod) -> tuple[int, float, str]:
        """PrioritySort ``Less``: priority (higher first), then arrival, then ``namespace/name``."""
        return (-pod.priority, pod.creation_time, pod.key)

    def _forget_waiting(self, key: str) -> None:
        """Hook: a pod left the queue or lost its assumed node while a subclass (Permit) may still hold it."""

    def _schedule_one(self, queued: QueuedPod, now: float, failures: Failures) -> list[Decision]:
        """One scheduling cycle. ``failures`` remembers, within one :meth:`schedule` call and until the next
        placement change (``_epoch``), how pods with the same constraints and requests fail: the same way, and,
        while nothing is of lower priority, DefaultPreemption answers them alike too."""
        pod = queued.pod
        pre_filter_message = self._volume_pre_filter(pod) or self._pre_filter(pod, now)
        if pre_filter_message is not None:
            message = fit_error_message(len(self.nodes), {}, pre_filter_message=pre_filter_message)
            preempted = self._preempt(pod, now, pre_filter_failed=True)
            return self._fail(queued, now, message, self._post_filter(pod, now, preempted))
        preemption = self.preemption
        counted = preemption.count_nominated(pod) if preemption is not None and preemption.nominations else None
        try:  # the filters see the nominated pods of equal or higher priority (Filter and PostFilter alike)
            signature: tuple[object, ...] = (
                self._epoch,
                self.nodes.static_signature(pod),
                tuple(sorted(pod.requests.items())),
            )
            if constrained(pod, self.pods):  # fails as pods with the same terms, labels and namespace do
                signature = (*signature, pod.terms, tuple(sorted(pod.labels.items())), pod.namespace)
            if pod.volume_claims:  # as pods with the same claims do, while no storage object changes
                signature = (*signature, pod.volume_claims, pod.namespace, self.volumes.version)
            if pod.resource_claims:  # as pods with the same ResourceClaims do, while no device object changes
                signature = (*signature, pod.resource_claims, pod.namespace, self.devices.version)
            known = failures.get(signature) if not counted else None
            node = None if known is not None else self._find_node(pod)
            if node is None:
                reused = known[2] if known is not None and pod.priority <= known[1] and not pod_never(pod) else None
                if known is not None and reused is not None:
                    message, preempted = known[0], reused
                else:
                    message = known[0] if known is not None else self._fit_error(pod)
                    preempted = self._preempt(pod, now)
                    if not counted:
                        holds = preemption is None or (not pod_never(pod) and preemption.nothing_lower(pod.priority))
                        failures[signature] = (message, pod.priority, preempted if holds else None)
                return self._fail(queued, now, message, self._post_filter(pod, now, preempted))
        finally:
            if counted and preemption is not None:
                preemption.uncount(counted)
        if preemption is not None and preemption.nominations:
            preemption.forget(pod.key)  # assumed: no longer nominated
        self._place(pod, node)
        return self._permit(queued, node, now)

    def _volume_pre_filter(self, pod: Pod) -> str | None:
        """The volume plugins' PreFilter failure (:func:`~kubeflux.scheduler.volumes.pod_volumes`), or None."""
        if not pod.volume_claims:
            return None
        found = pod_volumes(pod, self.volumes, self.pods)
        return found if isinstance(found, str) else None

    def _pre_filter(self, pod: Pod, now: float) -> str | None:
        """A PreFilter failure message (DynamicResources': a claim not made or not found; subclasses add theirs), or
        None to go on to Filter."""
        return self.devices.waiting(pod) if pod.resource_claims else None

    def _bind(self, pod: Pod, node: str) -> Bind:
        """The Binding of a pod placed on ``node``, with what it writes before it (PreBind): its volume claims'
        bindings (VolumeBinding's, first) and its ResourceClaims' allocation (DynamicResources')."""
        return Bind(pod.key, pod.uid, node, None, self._claims.pop(pod.key, ()), self._allocate(pod, node))

    def _preempt(self, pod: Pod, now: float, *, pre_filter_failed: bool = False) -> PostFilterResult:
        """The PostFilter's first plugin after a failed PreFilter or Filter: DefaultPreemption, unless turned off
        (then no PostFilter plugin runs and the nomination is cleared)."""
        if self.preemption is None:
            return NO_POST_FILTER
        return self.preemption.post_filter(pod, now, pre_filter_failed=pre_filter_failed)

    def _post_filter(self, pod: Pod, now: float, preempted: PostFilterResult) -> PostFilterResult:
        """Hook: the PostFilter plugins after DefaultPreemption said ``preempted`` (coscheduling's adds its own)."""
        return preempted

    def _preempt_waiting(self, key: str, now: float) -> list[Decision] | None:
        """Hook: preempt a victim held at Permit (rejected in memory, not evicted); None when none is held."""
        return None

    def _permit(self, queued: QueuedPod, node: str, now: float) -> list[Decision]:
        """Permit: kube-default allows every pod at once."""
        del self._queue[queued.pod.key]
        return [self._bind(queued.pod, node)]

    def _allocate(self, pod: Pod, node: str) -> tuple[ClaimAllocation, ...]:
        """The devices of ``pod``'s claims on ``node`` (its filter found them there), assumed until written."""
        if not pod.resource_claims:
            return ()
        made = self.devices.allocate(pod, node) or ()
        self.devices.assume(pod.uid, made)
        return made

    def _fail(self, queued: QueuedPod, now: float, message: str, post: PostFilterResult) -> list[Decision]:
        """The pod failed: ``message`` (FitError) with the PostFilter's reason; its nomination as it says."""
        pod = queued.pod
        if post.reason:
            message = f"{message} {post.reason}"
        self._requeue(queued, now, retry=post.freed)
        if self.reject_never_fits:
            reason = never_fits(pod, self.nodes.node_list())
            if reason is not None:
                return [*post.decisions, Reject(pod=pod.key, uid=pod.uid, message=reason)]
        preemption = self.preemption
        if preemption is None or (post.nominated == "" and not preemption.nominations):
            return [*post.decisions, Unschedulable(pod.key, pod.uid, message)]  # no nomination to set or clear
        nominated = preemption.record(pod, post.nominated, message)
        return [*post.decisions, Unschedulable(pod.key, pod.uid, message, nominated_node=nominated)]

    def _requeue(self, queued: QueuedPod, now: float, *, retry: bool) -> None:
        """Back off a failed pod. ``retry``: eligible once the back-off ends (kube-scheduler's backoffQ, for a
        pod whose failure itself freed resources); otherwise it also waits for a cluster event."""
        queued.attempts += 1
        doublings = min(queued.attempts - 1, 64)  # kube-scheduler stops doubling at the cap; so do we (no overflow)
        backoff = min(self.pod_initial_backoff * 2**doublings, self.pod_max_backoff)
        queued.backoff_until = now + backoff
        queued.generation = self._generation - 1 if retry else self._generation
        queued.timestamp = now
        self._stamps += 1
        queued.order = self._stamps
        queued.expiry = self._window(now + backoff)

    # --- Filter and Score over the node arrays -------------------------------------------------------------

    def _find_node(self, pod: Pod) -> str | None:
        """Filter and Score (:class:`~kubeflux.sim.baselines.kube_filter.NodeSearch`), after the node the pod is
        nominated to, if it fits there (``evaluateNominatedNode``: first, unscored)."""
        if len(self.nodes) and self.preemption is not None and self.preemption.nominations:
            nominated = self.preemption.nominated_fit(pod)
            if nominated is not None:
                return nominated
        return self.search.find(pod)

    def _fit_error(self, pod: Pod) -> str:
        """Why no node took ``pod``: the filters' reasons, or the CEL runtime error DynamicResources' Filter met on
        a node the others passed (which fails the cycle in kube-scheduler)."""
        message = self.search.fit_error(pod)
        failed = self.devices.failure(pod) if pod.resource_claims else None
        return failed if failed is not None else message
