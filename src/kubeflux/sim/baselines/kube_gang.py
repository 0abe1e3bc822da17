"""kube-scheduler v1.36's own gang scheduling (the ``GenericWorkload`` and ``GangScheduling`` feature gates,
``scheduling.k8s.io/v1alpha2`` PodGroups with ``schedulingPolicy.gang.minCount``), on the kube-default baseline
with kube-scheduler v1.36's queue (:data:`~kubeflux.sim.baselines.kube_default.QUEUE_V136`).

What it does, as ``pkg/scheduler/schedule_one_podgroup.go`` and ``framework/plugins/gangscheduling`` do:

* **PreEnqueue**: a gang's pods enter the queue once ``minCount`` of them exist (``waiting for minCount pods from
  a gang to appear in scheduling queue``).
* **A pod group cycle**: when a gang's pod is popped, every unscheduled pod of its group is taken from the queue
  (``PopSpecificPod``) and placed on one snapshot, in priority then first-attempt order; the gang is bound whole
  when ``minCount`` of them found nodes, otherwise none is (all-or-nothing), and each of its pods fails.
* **Retries**: a failed pod of a gang is always requeued after its back-off (``determineSchedulingHintForInFlightPod``
  returns ``queueAfterBackoff`` for pods with a scheduling group), never parked until an event; and with the active
  queue empty the scheduler pops the backoff queue at once (``SchedulerPopFromBackoffQ``). A blocked gang is so
  retried in a busy loop (the fidelity page counted 11.4 million attempts in 31 minutes, one core busy): its pods'
  back-off reaches 10 s after a few attempts, and the backoff queue, ordered by expiry then by the last attempt,
  turns through the blocked gangs round and round, thousands of times a second.
* **Which gang gets freed room**: the one the busy loop reaches first after the room appears — a new gang (in
  the active queue) before any blocked one, and among blocked gangs wherever the rotation stands, which wall time
  decides. Virtual time has no such position: this baseline draws it, one seeded random order of the blocked
  gangs per cycle (``seed``). Equal gangs then start at the same times as on the real cluster, in another order;
  the mean JCT does not depend on it, the longest wait and each job's start do.

Permit (``waiting for minCount pods from a gang to be scheduled``, 5 minutes) is never waited at: the group cycle
places the whole gang on one snapshot. Pods outside a group are scheduled as by kube-default.

**Preemption** is kube-scheduler v1.36's for gangs too: pod by pod. Workload-aware preemption
(``PodGroupPostFilter``, ``framework/preemption/podgrouppreemption.go``: a gang's victims chosen as a whole) is behind
the ``WorkloadAwarePreemption`` gate, alpha and off by default in v1.36, so this baseline leaves it off. In a group
cycle each member that fails its filters runs DefaultPreemption (``runAllPostFilters``), which evicts its victims at
once and nominates a node; the member is then taken as placed there for the members after it. A gang that fits
only so is not bound: every member is told ``pod group is waiting for preemption to complete``, nominated to its
node, and tried again once the victims are gone. A gang that cannot be completed is not bound either, and the
pods already evicted for its members stay evicted. (kube-scheduler tries every member whatever becomes of the
others; this baseline stops at the first that fails unless pods of lower priority run, which changes only the
messages and where the next scan starts.)
"""

from __future__ import annotations

import random

from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER, Pod, PodGroup
from kubeflux.sim.baselines.kube_default import QUEUE_V136, Failures, KubeDefaultScheduler, QueuedPod, QueueKey
from kubeflux.sim.baselines.kube_preemption import PostFilterResult

__all__ = ["KubeGangScheduler"]

WAITING_FOR_PODS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_PREEMPTION = "pod group is unschedulable, pod group is waiting for preemption to complete"
"""What every member of a gang that fits only after evictions is told (the pod group status' error and reason)."""


class KubeGangScheduler(KubeDefaultScheduler):
    """See the module docstring. ``seed`` draws the busy loop's position; other keyword arguments go to
    :class:`KubeDefaultScheduler`."""

    def __init__(self, name: str = DEFAULT_SCHEDULER, *, seed: int = 0, **options: object) -> None:
        super().__init__(name, queue=QUEUE_V136, **options)  # type: ignore[arg-type]
        self._rotation = random.Random(seed)
        self._members: dict[str, set[str]] = {}
        self._order: dict[str, float] = {}
        """Each blocked gang's place in this cycle's turn of the busy loop."""

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Pod) and obj.group is not None:
            members = self._members.setdefault(obj.group, set())
            if event.kind is EventKind.DELETED or obj.deleted:
                members.discard(obj.key)
            else:
                members.add(obj.key)
        super().observe(event, now)
        if isinstance(obj, PodGroup) and event.kind is EventKind.ADDED:
            self._generation += 1  # GangScheduling's hint on PodGroup/Add

    def _on_pod_added(self, pod: Pod) -> None:
        if pod.group is not None:
            self._generation += 1  # the plugin's hint on Pod/Add: the gang may have its minCount now

    def _due_entries(self, now: float) -> list[tuple[QueueKey, int, QueuedPod]]:
        self._order = {}
        return super()._due_entries(now)

    def _queue_key(self, queued: QueuedPod, now: float) -> QueueKey:
        pod = queued.pod
        if pod.group is None or not queued.attempts:
            return super()._queue_key(queued, now)
        place = self._order.get(pod.group)
        if place is None:
            place = self._order[pod.group] = self._rotation.random()
        return (1, place, (-pod.priority, 0.0, pod.group))

    def _schedule_one(self, queued: QueuedPod, now: float, failures: Failures) -> list[Decision]:
        group_key = queued.pod.group
        group = None if group_key is None else self._groups.get(group_key)
        if group_key is None or group is None:
            return super()._schedule_one(queued, now, failures)
        members = [self._queue[key] for key in sorted(self._members.get(group_key, ())) if key in self._queue]
        self._attempted.update(q.pod.key for q in members)
        if len(self._members.get(group_key, ())) < group.min_member:
            return [self._park(q, now, WAITING_FOR_PODS) for q in members]
        members.sort(key=lambda q: (-q.pod.priority, q.pod.creation_time, q.pod.key))
        placed: list[tuple[QueuedPod, str]] = []
        preempted = False
        decisions: list[Decision] = []
        message = ""
        for member in members:
            node, failure, post = self._place_member(member.pod, now)
            if post is not None:
                decisions.extend(post.decisions)
                preempted = preempted or bool(post.nominated)
            if node is None:
                message = message or failure
                if not self._may_preempt(member.pod):
                    break
                continue
            self._place(member.pod, node)
            placed.append((member, node))
        already = self._group_placed.get(group_key, 0) - len(placed)
        feasible = len(placed) == len(members) and already + len(placed) >= group.min_member
        if feasible and not preempted:
            for member, _ in placed:
                del self._queue[member.pod.key]
            return [self._bind(m.pod, node) for m, node in placed]
        nodes = {member.pod.key: node for member, node in placed}
        for member, _ in placed:
            self._unplace(member.pod.key)
        if feasible:  # every member has a node, some after their evictions: all wait for those to finish
            message = WAITING_FOR_PREEMPTION
        elif not message:
            message = self._fit_error(members[len(placed)].pod) if len(placed) < len(members) else WAITING_FOR_PODS
        for member in members:
            self._requeue(member, now, retry=False)  # the busy loop: tried again at once, changed by an event only
            pod = member.pod
            nominated = nodes.get(pod.key, "") if feasible else ""
            if self.preemption is not None:
                nominated = self.preemption.record(pod, nominated, message)
            decisions.append(Unschedulable(pod.key, pod.uid, message, nominated_node=nominated))
        return decisions

    def _place_member(self, pod: Pod, now: float) -> tuple[str | None, str, PostFilterResult | None]:
        """One member's pod-by-pod algorithm in the group cycle: (its node, or the nominated one after
        DefaultPreemption evicted pods for it; the failure message; the PostFilter's result, when it ran)."""
        preemption = self.preemption
        counted = preemption.count_nominated(pod) if preemption is not None and preemption.nominations else None
        try:
            node = self._find_node(pod)
            if node is not None:
                if preemption is not None:
                    preemption.forget(pod.key)
                return node, "", None
            message = self._fit_error(pod)
            if preemption is None:
                return None, message, None
            post = self._post_filter(pod, now, self._preempt(pod, now))
            if post.nominated:
                return post.nominated, "", post
            return None, f"{message} {post.reason}" if post.reason else message, post
        finally:
            if counted and preemption is not None:
                preemption.uncount(counted)

    def _may_preempt(self, pod: Pod) -> bool:
        """Whether a later member may still preempt after one failed: kube-scheduler tries every member whatever
        happens to the others; this baseline stops at the first failure unless pods of lower priority run (the
        rest would only change the messages and where the next scan starts)."""
        return self.preemption is not None and bool(self._priorities) and min(self._priorities) < pod.priority

    def _park(self, queued: QueuedPod, now: float, message: str) -> Decision:
        """PreEnqueue refused the pod: it waits for its gang's other pods (an event), not for a timer."""
        queued.generation = self._generation
        return Unschedulable(pod=queued.pod.key, uid=queued.pod.uid, message=message)
