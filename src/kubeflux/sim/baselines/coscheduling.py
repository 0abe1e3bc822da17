"""The scheduler-plugins *Coscheduling* plugin on top of the kube-default baseline: all-or-nothing pod groups.

Pods join a group with the label ``scheduling.x-k8s.io/pod-group: <name>`` (a ``PodGroup`` in the same
namespace). Each pod is filtered and scored like :class:`KubeDefaultScheduler`, then held at **Permit** (assumed:
its resources are reserved) until ``minMember`` pods of the group have nodes; then all are bound together. As in
``sigs.k8s.io/scheduler-plugins/pkg/coscheduling`` (kubeflux follows the plugin's code, not only its docs):

* **QueueSort** ``Less``: priority (higher first), then the PodGroup's creation time (a pod outside a group, or
  whose PodGroup is unknown, uses its own), then ``namespace/name`` — so a group's pods stay together.
* **PreFilter** fails (``UnschedulableAndUnresolvable``) while the group is backed off (``podGroup ns/pg failed
  recently``), has fewer than ``minMember`` pods in total (``pre-filter pod p cannot find enough sibling pods,
  current pods number: 2, minMember of group: 3``), or, with ``min_resources``, while the free resources of all
  nodes together (the group's own placed pods counted as free) lack its minResources (``CheckClusterResource``:
  ``resource gap: cpu: 3, pods: 1``); a group that passes is not checked again for the Permit wait
  (``permittedPG``). A pod whose PodGroup does not exist passes PreFilter and is refused at Permit
  (``PodGroup not found``).
* **Permit**: if the pods of the group already assigned (bound or waiting) + this one reach ``minMember``, allow
  all waiting siblings and bind; otherwise wait ``scheduleTimeoutSeconds`` (or ``permitWaitingTimeSeconds``,
  default 60 s). The first pod of a group to wait activates its siblings (retried at once).
* **PostFilter** when a pod fails: unless ``minMember`` pods are already assigned or at most 10 % are missing,
  reject every waiting pod of the group (``optimistic rejection in PostFilter``), back the group off for
  ``podGroupBackoffSeconds`` if set (default 0: none), and append ``PodGroup ns/pg gets rejected due to Pod p is
  unschedulable even after PostFilter`` to the message. A pod outside any group gets ``can not find pod group``.
* **PostFilter order**: the plugin's documented configuration enables Coscheduling in ``multiPoint``, after the
  default plugins, so kube-scheduler's DefaultPreemption runs first
  (:mod:`~kubeflux.sim.baselines.kube_preemption`, pod by pod). When it nominates a node the PostFilter phase
  ends and the group is not rejected; otherwise Coscheduling's PostFilter runs and the two reasons are joined
  (``preemption: 0/1 nodes are available: …, PodGroup … gets rejected …``). Every PreFilter failure above is
  ``UnschedulableAndUnresolvable`` "to avoid any preemption attempts": a group short of its minResources on a
  full cluster never preempts (the registry's ``coscheduling``), one without minResources preempts pod by pod.
  A victim held at Permit is preempted in memory (``preempted``) and Unreserve rejects its group's other waiting
  pods.
* **Timeout**: the first waiting pod whose wait expires is rejected (``rejected due to timeout after waiting 1m0s
  at plugin Coscheduling``) and Unreserve rejects the others (``rejection in Unreserve``); their reservations are
  released, and the group is backed off as after PostFilter (the plugin's deny list of denied groups).

The queue order keeps a group's pods together, and a group is tried, rejected and backed off as a whole: while
it is backed off, or still short of its minResources, its pods are not popped at all (each would fail PreFilter
at once for the reason it was last given; their pod back-off does not grow meanwhile), so a congested
cluster costs one check per group and time point, not one placement per pod.

``minResources``: the PodGroup object here carries none; with ``min_resources`` each group is taken to have the
one the Kubeflow training operator writes for this plugin, the summed requests of ``minMember`` of its pods. The
registry's ``coscheduling`` (:func:`simulated_coscheduling`) does so. Without it a gang that does not fit is
placed pod by pod, held, and rejected at every cluster event, as the plugin does for a bare PodGroup (HPC2N's
trace then takes more than ten minutes where it takes seconds with minResources).

Rejected pods retry after their pod back-off. Like kube-scheduler, a group that can never be completed keeps
cycling through wait and reject; each cycle is spaced by the pod back-off (at most 10 s), and :meth:`next_wakeup`
reports when the next one is due.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import CPU, DEFAULT_SCHEDULER, MEMORY, PODS, Pod, PodGroup, ResourceList
from kubeflux.scheduler.units import format_duration, format_quantity
from kubeflux.sim.baselines.kube_default import (
    QUEUE_CLASSIC,
    KubeDefaultOptions,
    KubeDefaultScheduler,
    QueuedPod,
    QueueKey,
)
from kubeflux.sim.baselines.kube_preemption import PostFilterResult

__all__ = ["DEFAULT_PERMIT_WAITING_TIME_SECONDS", "CoschedulingScheduler", "simulated_coscheduling"]

DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60.0
PLUGIN = "Coscheduling"
JOINED_KEPT = 4_096


def _amount(resource: str, value: int) -> str:
    return format_quantity(resource, value) if resource in (CPU, MEMORY) else str(value)


@dataclass(slots=True)
class _Waiting:
    queued: QueuedPod
    node: str
    deadline: float
    wait: float


class CoschedulingScheduler(KubeDefaultScheduler):
    """Gang scheduling as the coscheduling plugin does it; pods outside a group are scheduled as by kube-default.

    ``permit_waiting_time_seconds`` and ``pod_group_backoff_seconds`` are the plugin's ``CoschedulingArgs``
    (defaults 60 and 0). ``min_resources``: every PodGroup is taken to carry minResources (the module docstring).
    The other keyword arguments (:class:`~kubeflux.sim.baselines.kube_default.KubeDefaultOptions`) go to
    :class:`KubeDefaultScheduler`.
    """

    def __init__(
        self,
        name: str = DEFAULT_SCHEDULER,
        *,
        permit_waiting_time_seconds: float = DEFAULT_PERMIT_WAITING_TIME_SECONDS,
        pod_group_backoff_seconds: float = 0.0,
        min_resources: bool = False,
        **options: Unpack[KubeDefaultOptions],
    ) -> None:
        super().__init__(name, queue=QUEUE_CLASSIC, **options)  # its Permit and group back-off: the first queue's
        if permit_waiting_time_seconds <= 0 or pod_group_backoff_seconds < 0:
            raise ValueError("permit_waiting_time_seconds must be positive and pod_group_backoff_seconds not negative")
        self.permit_waiting_time_seconds = permit_waiting_time_seconds
        self.pod_group_backoff_seconds = pod_group_backoff_seconds
        self._members: dict[str, set[str]] = {}
        self._waiting: dict[str, dict[str, _Waiting]] = {}
        self._backoff: dict[str, float] = {}
        self.min_resources = min_resources
        self._requests: dict[str, ResourceList] = {}
        """Requests of every live pod of a group, by pod key (for the group's minResources)."""
        self._need: dict[str, ResourceList] = {}
        """Each group's minResources (with ``pods: minMember``), computed when first needed."""
        self._permitted: dict[str, float] = {}
        """Groups that passed the minResources check, until when (the plugin's ``permittedPG`` cache)."""
        self._short: set[str] = set()
        """Groups whose last minResources check failed; :meth:`_before_cycle` finds which still fall short."""
        self._still_short: set[str] = set()
        self._gap_memo: dict[str, tuple[int, str]] = {}
        self._joined: dict[tuple[str, str | None, str], PostFilterResult] = {}
        """PostFilter answers by (DefaultPreemption's reason and nomination, Coscheduling's reason)."""

    # --- informer -----------------------------------------------------------------------------------------

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Pod) and obj.group is not None:
            members = self._members.setdefault(obj.group, set())
            if event.kind is EventKind.DELETED or obj.deleted:
                if obj.key in members:
                    members.discard(obj.key)
                    del self._requests[obj.key]
                    self._need.pop(obj.group, None)
            elif obj.key not in members:
                members.add(obj.key)
                self._requests[obj.key] = obj.requests
                self._need.pop(obj.group, None)
        elif isinstance(obj, PodGroup):
            self._need.pop(obj.key, None)  # minMember may have changed
            self._permitted.pop(obj.key, None)
        super().observe(event, now)

    def _on_pod_added(self, pod: Pod) -> None:
        if pod.group is not None:
            self._generation += 1  # the plugin requeues on Pod/Add: a group may now have enough pods

    def _forget_waiting(self, key: str) -> None:
        for group, waiting in self._waiting.items():
            if waiting.pop(key, None) is not None:
                if not waiting:
                    del self._waiting[group]
                return

    # --- queue, PreFilter, PostFilter, Permit -------------------------------------------------------------

    def _sort_key(self, pod: Pod) -> tuple[int, float, str]:
        group = None if pod.group is None else self._groups.get(pod.group)
        created = pod.creation_time if group is None else group.creation_time
        return (-pod.priority, created, pod.key)

    def _due_entries(self, now: float) -> list[tuple[QueueKey, int, QueuedPod]]:
        """The pods of a backed-off group, or of a group still short of its minResources, are not popped: each
        would fail PreFilter at once, for the reason it was last told. A backed-off group's pods become due
        together when the back-off ends (:meth:`_before_cycle`); a short group's, once the cluster has room."""
        blocked_groups = self._still_short.union(g for g, until in self._backoff.items() if until > now)
        if not blocked_groups:
            return super()._due_entries(now)
        blocked: set[str] = set().union(*(self._members.get(g, ()) for g in blocked_groups))
        due = self._due
        return [self._entry(q, now) for key, q in self._queue.items() if key not in blocked and due(q, now)]

    def _pre_filter(self, pod: Pod, now: float) -> str | None:
        devices = super()._pre_filter(pod, now)  # DynamicResources' PreFilter, then coscheduling's
        if devices is not None:
            return devices
        group_key = pod.group
        group = None if group_key is None else self._groups.get(group_key)
        if group_key is None or group is None:
            return None
        if self._backoff.get(group_key, 0.0) > now:
            return f"podGroup {group_key} failed recently"
        count = len(self._members.get(group_key, ()))
        if count < group.min_member:
            return (
                f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                f"current pods number: {count}, minMember of group: {group.min_member}"
            )
        if not self.min_resources or self._permitted.get(group_key, -1.0) > now:
            return None
        memo = self._gap_memo.get(group_key)
        if memo is not None and memo[0] == self._epoch:
            return memo[1]  # a sibling just failed the check and nothing was placed or released since
        gap = self._resource_gap(group_key, group)
        if gap:
            self._short.add(group_key)
            self._still_short.add(group_key)
            text = ", ".join(f"{name}: {_amount(name, v)}" for name, v in gap.items())
            self._gap_memo[group_key] = (self._epoch, f"resource gap: {text}")
            return f"resource gap: {text}"
        self._short.discard(group_key)
        self._gap_memo.pop(group_key, None)
        self._permitted[group_key] = now + self.permit_waiting_time_seconds
        return None

    def _min_resources(self, group_key: str, group: PodGroup) -> ResourceList:
        """The group's minResources: what ``minMember`` of its pods request together, and ``pods: minMember``.

        A PodGroup object here carries no ``minResources``; the workload's groups are taken to have the one the
        Kubeflow training operator writes for scheduler-plugins (the members' summed requests)."""
        need = self._need.get(group_key)
        if need is None:
            need = {PODS: group.min_member}
            for key in sorted(self._members.get(group_key, ()))[: group.min_member]:
                for name, amount in self._requests.get(key, {}).items():
                    if amount > 0 and name != PODS:
                        need[name] = need.get(name, 0) + amount
            self._need[group_key] = need
        return need

    def _resource_gap(self, group_key: str, group: PodGroup) -> ResourceList:
        """``CheckClusterResource``: what minResources lacks beyond the free resources of every node, counting
        the group's own placed pods as free (a partly placed group is not held back by itself). Empty: no gap."""
        own: dict[str, int] = {}
        for key in self._members.get(group_key, ()):
            placed = self._placed.get(key)
            if placed is not None:
                own[PODS] = own.get(PODS, 0) + 1
                for name, amount in placed.requests.items():
                    own[name] = own.get(name, 0) + amount
        nodes = self.nodes
        gap: dict[str, int] = {}
        for name, amount in self._min_resources(group_key, group).items():
            lacking = amount - nodes.free_total(name) - own.get(name, 0)
            if lacking > 0:
                gap[name] = lacking
        return gap

    def _post_filter(self, pod: Pod, now: float, preempted: PostFilterResult) -> PostFilterResult:
        """kube-scheduler's default DefaultPreemption first (``multiPoint`` appends Coscheduling after the default
        plugins); when it nominates a node the PostFilter phase ends there, else Coscheduling's runs and the
        reasons are joined (``, ``)."""
        if preempted.nominated:
            return preempted
        reason, decisions = self._reject_on_post_filter(pod, now)
        if not reason and not decisions:
            return preempted
        if not decisions and not preempted.decisions:  # the common answer: remembered, joined once
            key = (preempted.reason, preempted.nominated, reason)
            joined = self._joined.get(key)
            if joined is None:
                if len(self._joined) >= JOINED_KEPT:
                    self._joined.clear()
                joined = self._joined[key] = self._join(preempted, reason, ())
            return joined
        return self._join(preempted, reason, decisions)

    @staticmethod
    def _join(preempted: PostFilterResult, reason: str, decisions: Sequence[Decision]) -> PostFilterResult:
        """DefaultPreemption's answer followed by Coscheduling's ``reason`` and ``decisions``."""
        if reason and preempted.reason:
            reason = f"{preempted.reason}, {reason}"
        return PostFilterResult(
            reason or preempted.reason, preempted.nominated, (*preempted.decisions, *decisions), preempted.freed
        )

    def _preempt_waiting(self, key: str, now: float) -> list[Decision] | None:
        """A victim held at Permit is preempted in memory (``waitingPod.Preempt``: ``preempted``); Unreserve then
        rejects its group's other waiting pods, as after a timeout."""
        for group_key, waiting in self._waiting.items():
            if key in waiting:
                decisions = self._reject_group(group_key, now, "rejection in Unreserve", key, "preempted")
                self._permitted.pop(group_key, None)
                if self.pod_group_backoff_seconds > 0:
                    self._backoff[group_key] = now + self.pod_group_backoff_seconds
                return decisions
        return None

    def _reject_on_post_filter(self, pod: Pod, now: float) -> tuple[str, list[Decision]]:
        """Coscheduling's PostFilter: the reason it gives and the decisions rejecting the group's waiting pods."""
        group_key = pod.group
        group = None if group_key is None else self._groups.get(group_key)
        if group_key is None or group is None:
            return "can not find pod group", []
        assigned = self._group_placed.get(group_key, 0)
        if assigned >= group.min_member:
            return "", []
        if (group.min_member - assigned) * 10 <= group.min_member:
            return "", []  # at most 10 % missing: later pods may still complete the group
        decisions = self._reject_group(group_key, now, "optimistic rejection in PostFilter")
        self._permitted.pop(group_key, None)
        if self.pod_group_backoff_seconds > 0 and len(self._members.get(group_key, ())) >= group.min_member:
            self._backoff[group_key] = now + self.pod_group_backoff_seconds
        message = f"PodGroup {group_key} gets rejected due to Pod {pod.name} is unschedulable even after PostFilter"
        return message, decisions

    def _permit(self, queued: QueuedPod, node: str, now: float) -> list[Decision]:
        pod = queued.pod
        group_key = pod.group
        if group_key is None:
            return super()._permit(queued, node, now)
        group = self._groups.get(group_key)
        if group is None:
            self._unplace(pod.key)
            self._requeue(queued, now, retry=False)
            return [Unschedulable(pod=pod.key, uid=pod.uid, message="PodGroup not found")]
        assigned = self._group_placed.get(group_key, 0) - 1  # the plugin's snapshot does not hold this pod yet
        if assigned + 1 >= group.min_member:
            decisions: list[Decision] = []
            for waiting in self._waiting.pop(group_key, {}).values():
                other = waiting.queued.pod
                decisions.append(self._bind(other, waiting.node))
            return [*decisions, *super()._permit(queued, node, now)]
        wait = group.schedule_timeout_seconds or self.permit_waiting_time_seconds
        del self._queue[pod.key]
        self._waiting.setdefault(group_key, {})[pod.key] = _Waiting(queued, node, now + wait, wait)
        if assigned == 0:
            for key in sorted(self._members.get(group_key, ())):
                sibling = self._queue.get(key)
                if sibling is not None:
                    self._activate(sibling, now)
        return []

    def _reject_group(
        self, group_key: str, now: float, message: str, first: str = "", first_message: str = ""
    ) -> list[Decision]:
        """Reject every pod of the group waiting at Permit: release its node and send it back to the queue.

        ``first`` names a pod rejected for its own reason, ``first_message`` (default: its timeout).
        """
        decisions: list[Decision] = []
        waiting = self._waiting.pop(group_key, {})
        for key, held in waiting.items():
            pod = held.queued.pod
            self._unplace(key)
            self._queue[key] = held.queued
            self._requeue(held.queued, now, retry=True)
            text = message
            if key == first:
                text = first_message or (
                    f"rejected due to timeout after waiting {format_duration(held.wait)} at plugin {PLUGIN}"
                )
            decisions.append(Unschedulable(pod=pod.key, uid=pod.uid, message=text))
        if waiting:
            self._generation += 1  # reservations released: other pods may fit now
        return decisions

    # --- time ---------------------------------------------------------------------------------------------

    def _before_cycle(self, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        self._still_short = set()
        for group_key in list(self._short):
            group = self._groups.get(group_key)
            if group is None or not self._members.get(group_key):
                self._short.discard(group_key)
            elif self._resource_gap(group_key, group):
                self._still_short.add(group_key)
        for group_key in sorted(self._waiting):
            waiting = self._waiting[group_key]
            first = min(waiting.values(), key=lambda w: (w.deadline, w.queued.pod.key))
            if first.deadline <= now:
                decisions += self._reject_group(group_key, now, "rejection in Unreserve", first.queued.pod.key)
                self._permitted.pop(group_key, None)
                if self.pod_group_backoff_seconds > 0:
                    self._backoff[group_key] = now + self.pod_group_backoff_seconds
        for group_key, until in list(self._backoff.items()):
            if until <= now:
                del self._backoff[group_key]
                for key in self._members.get(group_key, ()):
                    queued = self._queue.get(key)
                    if queued is not None:
                        queued.generation = min(queued.generation, self._generation - 1)
        return decisions

    def next_wakeup(self, now: float) -> float | None:
        times = [w.deadline for waiting in self._waiting.values() for w in waiting.values()]
        times += self._backoff.values()
        base = super().next_wakeup(now)
        if base is not None:
            times.append(base)
        return min(times, default=None)


def simulated_coscheduling() -> CoschedulingScheduler:
    """``kubeflux simulate --scheduler coscheduling``: the plugin with its shipped defaults, its PodGroups taken
    to carry minResources (see :meth:`CoschedulingScheduler._min_resources`)."""
    return CoschedulingScheduler(min_resources=True)
