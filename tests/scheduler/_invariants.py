"""The invariants of the scheduler core's whole-workload property test, each a named check over the simulated
cluster's objects and the scheduler's observable state, raising :class:`InvariantBroken` with what it saw.

The oracle for "fits the cluster when it is otherwise idle" (:func:`fits_idle`) is a few lines of
obviously-correct code here, not the scheduler's own filters.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kubeflux.match.policy import parse_policy
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import (
    EXPECTED_START_ANNOTATION,
    Bind,
    ClusterEvent,
    Decision,
    EventKind,
    PodWarning,
    expected_start_text,
)
from kubeflux.scheduler.objects import CPU, PODS, Node, Pod, PodGroup
from kubeflux.scheduler.translate import pod_policy
from kubeflux.sim.cluster import Cluster, SimPod

KUBEFLUX = "kubeflux"

OVERCOMMIT = "no node over-committed"
CORES = "no core or gpu held by two running pods"
BOOKS = "books and graph equal a rebuild"
EXPECTED = "expected start equals the reservation"
LIVENESS = "every pod that fits an idle cluster starts"
RESERVATION = "a job starts by its first reservation"
FILTERS = "every bind passes the node's filters"
REJECTION = "what can never fit is rejected"
INVARIANTS = (OVERCOMMIT, FILTERS, CORES, BOOKS, EXPECTED, LIVENESS, REJECTION, RESERVATION)


class InvariantBroken(AssertionError):
    """An invariant failed: its name (one of :data:`INVARIANTS`), the virtual time, and what was seen."""

    def __init__(self, invariant: str, at: float, detail: str) -> None:
        super().__init__(f"[{invariant}] at t={at:g}: {detail}")
        self.invariant = invariant


def _live_pods(cluster: Cluster) -> list[SimPod]:
    """Pods bound and unfinished, on nodes still in the cluster."""
    return [
        sp
        for sp in cluster.pods.values()
        if sp.pod.node_name and sp.finished_at is None and sp.pod.node_name in cluster.node_index
    ]


def _usage(cluster: Cluster) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = {node.name: {} for node in cluster.current_nodes()}
    for sp in _live_pods(cluster):
        _add(used[sp.pod.node_name], sp.pod.requests)
    return used


def _add(used: dict[str, int], requests: dict[str, int]) -> None:
    for res, amount in requests.items():
        used[res] = used.get(res, 0) + amount
    used[PODS] = used.get(PODS, 0) + 1


def _over(used: dict[str, int], node: Node) -> list[str]:
    alloc = node.allocatable
    return [f"{res} {used[res]} > {alloc.get(res, 0)}" for res in sorted(used) if used[res] > alloc.get(res, 0)]


def check_binds_fit(cluster: Cluster, decisions: Sequence[Decision]) -> None:
    """The scheduler's Binds of one call, added to what the cluster's nodes already run, over-commit nothing
    (cpu, memory, ephemeral-storage, every extended resource and the pod count)."""
    used = _usage(cluster)
    nodes = {node.name: node for node in cluster.current_nodes()}
    now = cluster.loop.now
    for decision in decisions:
        if not isinstance(decision, Bind):
            continue
        if decision.node not in nodes:
            raise InvariantBroken(OVERCOMMIT, now, f"{decision.pod} bound to {decision.node}, not a current node")
        _add(used[decision.node], cluster.pods[decision.pod].pod.requests)
        over = _over(used[decision.node], nodes[decision.node])
        if over:
            raise InvariantBroken(OVERCOMMIT, now, f"binding {decision.pod} over-commits {decision.node}: {over}")


def check_binds_pass_filters(cluster: Cluster, decisions: Sequence[Decision]) -> None:
    """Every Bind of one call goes to a current node that admits the pod: ready, uncordoned, its nodeSelector
    matched and its taints tolerated."""
    nodes = {node.name: node for node in cluster.current_nodes()}
    for decision in decisions:
        if isinstance(decision, Bind):
            node = nodes.get(decision.node)
            if node is None or not _admits(node, cluster.pods[decision.pod].pod):
                detail = f"{decision.pod} bound to {decision.node}, which does not admit it: {node}"
                raise InvariantBroken(FILTERS, cluster.loop.now, detail)


def check_no_overcommit(cluster: Cluster) -> None:
    """The cluster's truth: on every node the bound, unfinished pods' summed requests fit its allocatable; and no
    pod was ever refused by the kubelet's admission (``OutOf<resource>``: a bind onto a node without room)."""
    now = cluster.loop.now
    used = _usage(cluster)
    for node in cluster.current_nodes():
        over = _over(used[node.name], node)
        if over:
            raise InvariantBroken(OVERCOMMIT, now, f"node {node.name} over-committed: {over}")
    refused = [reason for reason in cluster.event_counts if reason.startswith("OutOf")]
    if refused:
        raise InvariantBroken(OVERCOMMIT, now, f"the kubelet refused a bind: {refused}")


def check_cores_exclusive(scheduler: KubefluxScheduler, cluster: Cluster) -> None:
    """No core or gpu vertex of a node is in the placement of two running pods."""
    holders: dict[tuple[str, str], str] = {}
    for alloc in scheduler.books.allocations.values():
        if alloc.placement is None:
            continue
        for leaf in (*alloc.placement.cores, *alloc.placement.gpus):
            other = holders.setdefault((alloc.node, leaf), alloc.key)
            if other != alloc.key:
                detail = f"{leaf} of {alloc.node} held by both {other} and {alloc.key}"
                raise InvariantBroken(CORES, cluster.loop.now, detail)


def rebuilt(
    scheduler: KubefluxScheduler, nodes: Sequence[Node], groups: Iterable[PodGroup], bound: Iterable[Pod], now: float
) -> KubefluxScheduler:
    """A fresh kubeflux fed the current ``nodes``, pod ``groups`` and ``bound`` unfinished pods, with its graph
    built and those pods accounted (one pass, which has nothing to place); made as ``scheduler`` was (its backfill,
    match policy and sharing policy)."""
    fresh = KubefluxScheduler(
        KUBEFLUX, backfill=scheduler.backfill, policy=scheduler.profile.policy, sharing=scheduler.profile.sharing
    )
    for obj in (*nodes, *groups, *bound):
        fresh.observe(ClusterEvent(EventKind.ADDED, obj), now)
    decisions = fresh.schedule(now)
    # Nothing to place; a corrupt allocation annotation is reported on its pod (a PodWarning), nothing else.
    assert all(isinstance(d, PodWarning) for d in decisions), decisions
    return fresh


def check_books_match_rebuild(scheduler: KubefluxScheduler, cluster: Cluster) -> None:
    """The scheduler's books and graph equal a rebuild from the cluster's objects (:func:`compare_books`)."""
    pods = [sp.pod for sp in _live_pods(cluster)]
    compare_books(scheduler, cluster.current_nodes(), cluster.groups.values(), pods, cluster.loop.now)


def compare_books(
    scheduler: KubefluxScheduler, nodes: Sequence[Node], groups: Iterable[PodGroup], bound: Iterable[Pod], now: float
) -> None:
    """The same allocation (node) per pod uid, the same exact ledger per node, the same node shapes in the graph
    and the same busy cores per node as a kubeflux rebuilt from ``nodes``, ``groups`` and ``bound`` pods."""
    fresh = rebuilt(scheduler, nodes, groups, bound, now)

    def fail(detail: str) -> None:
        raise InvariantBroken(BOOKS, now, detail)

    mine = {uid: alloc.node for uid, alloc in scheduler.books.allocations.items()}
    truth = {uid: alloc.node for uid, alloc in fresh.books.allocations.items()}
    if mine != truth:
        extra = {uid: node for uid, node in mine.items() if truth.get(uid) != node}
        missing = {uid: node for uid, node in truth.items() if mine.get(uid) != node}
        fail(f"allocations differ: the scheduler has {extra} beyond the cluster's, lacks {missing}")
    for node in nodes:
        held = {res: n for res, n in scheduler.books.ledger.on(node.name).items() if n}
        real = {res: n for res, n in fresh.books.ledger.on(node.name).items() if n}
        if held != real:
            fail(f"ledger of {node.name}: the scheduler counts {held}, the cluster's pods {real}")
    graph, again = scheduler.books.graph, fresh.books.graph
    if graph is None or again is None:
        return
    at = math.floor(now)
    for node in nodes:
        if again.usable(node.name) != graph.usable(node.name):
            fail(f"node {node.name} usable in the graph: {graph.usable(node.name)}, rebuilt: {again.usable(node.name)}")
        if not again.usable(node.name):
            continue
        if graph.specs[node.name] != again.specs[node.name]:
            fail(f"node {node.name} in the graph: {graph.specs[node.name]}, rebuilt: {again.specs[node.name]}")
        busy, real_busy = graph.busy_cores(node.name, at), again.busy_cores(node.name, at)
        if busy != real_busy:
            fail(f"node {node.name}: {busy} busy cores in the engine, {real_busy} in a rebuild")
    names = {node.name for node in nodes}
    for name in graph.specs:
        if name not in names and graph.usable(name):
            fail(f"node {name} left the cluster but is still usable in the graph")


def check_expected_start(scheduler: KubefluxScheduler, cluster: Cluster) -> None:
    """Every pending kubeflux pod whose job holds a reservation carries the expected-start annotation equal to
    the reservation's start; a pod whose job holds none carries no annotation."""
    graph = scheduler.books.graph
    now = cluster.loop.now
    for sp in cluster.pods.values():
        pod = sp.pod
        if pod.scheduler_name != KUBEFLUX or pod.node_name or pod.deleted or pod.phase.terminal:
            continue
        shown = pod.annotations.get(EXPECTED_START_ANNOTATION)
        job = scheduler.queue.by_pod.get(pod.uid)
        starts = set()
        own = job.member_reservations.get(pod.uid) if job is not None else None
        if own is not None and graph is not None:  # a member beyond minMember reserved on its own
            starts = {graph.engine.jobs[own[0]].at} if own[0] in graph.engine.jobs else set()
        elif job is not None and graph is not None and pod.uid not in job.left_out:  # left out: starts as room frees
            starts = {graph.engine.jobs[j].at for j in job.reservations if j in graph.engine.jobs}
            starts |= {hold.start for hold in job.holds}  # what no engine job holds (millicores, memory, ...)
        want = expected_start_text(min(starts)) if starts else None
        if shown != want:
            raise InvariantBroken(EXPECTED, now, f"{pod.key} shows expected start {shown}, its reservation: {want}")


# ---------------------------------------------------------------------- the end of a run


def _admits(node: Node, pod: Pod) -> bool:
    """Whether ``node`` may ever take ``pod`` (ignoring what runs there): ready, uncordoned, selector, taints."""
    if not node.ready or node.unschedulable:
        return False
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return all(
        taint.effect not in ("NoSchedule", "NoExecute") or any(t.key == taint.key for t in pod.tolerations)
        for taint in node.taints
    )


def fits_idle(
    pods: Sequence[Pod], nodes: Sequence[Node], *, by_size: bool = False, occupied: Iterable[str] = ()
) -> bool:
    """Whether all ``pods`` fit at once on ``nodes`` with nothing else running (a plain backtracking search);
    ``by_size`` counts only the nodes' sizes (not labels, taints, cordons). A pod of a node-exclusive match policy
    (``lonodex``) holds its node whole: it goes only on a node none of the others is on, and none joins it, nor
    on a node named in ``occupied`` (one some pod not counted here runs on)."""
    room = [dict(node.allocatable) for node in nodes]
    busy = set(occupied)
    held = [int(node.name in busy) for node in nodes]  # per node: pods on it, or -1 when one holds it whole
    order = sorted(pods, key=lambda pod: -pod.requests.get(CPU, 0))
    whole = [parse_policy(pod_policy(pod, "lonode")).node_exclusive for pod in order]  # the workloads run lonode

    def place(i: int) -> bool:
        if i == len(order):
            return True
        pod = order[i]
        for k, (node, free) in enumerate(zip(nodes, room, strict=True)):
            wants = {**pod.requests, PODS: 1}
            if held[k] < 0 or (whole[i] and held[k] > 0):
                continue
            if (by_size or _admits(node, pod)) and all(free.get(res, 0) >= n for res, n in wants.items()):
                before = held[k]
                held[k] = -1 if whole[i] else held[k] + 1
                for res, n in wants.items():
                    free[res] = free.get(res, 0) - n
                if place(i + 1):
                    return True
                for res, n in wants.items():
                    free[res] += n
                held[k] = before
        return False

    return place(0)


def check_every_fitting_pod_started(cluster: Cluster) -> None:
    """At the end of a run, on the cluster as it is then: every kubeflux pod that fits it when idle has started;
    every pod group that fits whole has started whole, and one whose minMember fits has started that many."""
    nodes = cluster.current_nodes()
    now = cluster.loop.now
    for job in cluster.jobs:
        pods = [sp.pod for sp in job.pods]
        if not pods or pods[0].scheduler_name != KUBEFLUX:
            continue
        if any(sp.pod.deleted and sp.bound_at is None for sp in job.pods):
            continue  # a user deleted a member before it started
        started = sum(1 for sp in job.pods if sp.bound_at is not None)
        if job.wjob.min_member == 0:
            if not started and fits_idle(pods, nodes):
                why = job.pods[0].unschedulable_message or job.rejected_reason
                raise InvariantBroken(LIVENESS, now, f"{pods[0].key} fits the idle cluster but never started: {why}")
            continue
        need = job.wjob.min_member
        if started < len(pods) and fits_idle(pods, nodes):
            why = job.pods[0].unschedulable_message or job.rejected_reason
            detail = f"group {job.wjob.name} fits the idle cluster whole but {started}/{len(pods)} started: {why}"
            raise InvariantBroken(LIVENESS, now, detail)
        if started < need and any(fits_idle(some, nodes) for some in itertools.combinations(pods, need)):
            why = job.pods[0].unschedulable_message or job.rejected_reason
            detail = (
                f"group {job.wjob.name}: {need} members (its minMember) fit the idle cluster, {started} started: {why}"
            )
            raise InvariantBroken(LIVENESS, now, detail)


def check_never_fitting_jobs_rejected(cluster: Cluster) -> None:
    """At the end of a run, every kubeflux job still waiting that the cluster's nodes could not hold even empty
    (by size alone: labels, taints and cordons change, so they never reject) has been rejected: a lone pod, or a
    group none of whose minMember-subsets fits."""
    nodes = cluster.current_nodes()
    for job in cluster.jobs:
        pods = [sp.pod for sp in job.pods]
        if not pods or pods[0].scheduler_name != KUBEFLUX or job.rejected_reason or job.first_bind is not None:
            continue
        if any(sp.pod.deleted for sp in job.pods):
            continue
        need = job.wjob.min_member or 1
        if not any(fits_idle(some, nodes, by_size=True) for some in itertools.combinations(pods, need)):
            why = job.pods[0].unschedulable_message
            raise InvariantBroken(
                REJECTION, cluster.loop.now, f"{job.wjob.name} can never fit but was not rejected: {why}"
            )


@dataclass(slots=True)
class Disturbance:
    """Something a scheduler cannot plan for that may delay an EASY head: capacity taken away (a node removed,
    cordoned, shrunk, relabelled, tainted), another scheduler's bind, or a higher-priority arrival."""

    at: float
    what: str
    priority: int = 0


def check_reservations_kept(
    cluster: Cluster, first_reservation: dict[str, tuple[float, float, int]], disturbances: Sequence[Disturbance]
) -> None:
    """A job that got a reservation started no later than its first reservation's start, unless something the
    scheduler cannot plan for happened meanwhile (see :class:`Disturbance`). Under EASY only the head gets one,
    so this is "EASY never delays its head"; under conservative every blocked job gets one, so it is
    "conservative never delays an earlier reservation"; under FCFS nothing passes the head."""
    for uid, (told_at, expected, priority) in first_reservation.items():
        sp = next((sp for sp in cluster.pods.values() if sp.pod.uid == uid), None)
        if sp is None:
            sp = next((p for job in cluster.jobs for p in job.pods if p.pod.uid == uid), None)
        if sp is None or sp.pod.deleted:
            continue
        started = sp.bound_at
        if started is not None and started <= expected:
            continue
        until = started if started is not None else math.inf
        excuses = [
            d for d in disturbances if told_at <= d.at <= until and (d.what != "priority" or d.priority > priority)
        ]
        if not excuses:
            when = "never started" if started is None else f"started at {started:g}"
            detail = f"{sp.pod.key} (reserved at {told_at:g} for {expected:g}) {when}"
            raise InvariantBroken(RESERVATION, cluster.loop.now, detail)


def check_head_reserved(scheduler: KubefluxScheduler, cluster: Cluster) -> None:
    """The head of kubeflux's queue (its first pending job by priority, then arrival), when it is blocked but
    would fit the cluster once kubeflux's own pods ended, holds a reservation: every queue policy reserves its
    head. (Other schedulers' pods may run for ever, so room they hold is not counted on; a gang backing off after
    its timeout, or a rejected job, is not the head.)"""
    now = cluster.loop.now
    pending = [
        job
        for job in cluster.jobs
        if job.pods
        and job.pods[0].pod.scheduler_name == KUBEFLUX
        and (not job.rejected_reason or any(sp.pod.uid in scheduler.queue.by_pod for sp in job.pods))  # queued again
        and any(sp.bound_at is None and not sp.pod.deleted for sp in job.pods)
        and not any(sp.bound_at is None and sp.pod.deleted for sp in job.pods)  # a gang short of a member waits
    ]
    if not pending:
        return
    head = min(pending, key=lambda job: (-job.wjob.pods[0].priority, job.submit, job.index))
    waiting = [sp for sp in head.pods if sp.bound_at is None and not sp.pod.deleted]
    if head.group_key and any(sp.bound_at is not None for sp in head.pods):
        return  # a started gang's late members run on their own
    if any("scheduleTimeoutSeconds" in sp.unschedulable_message for sp in waiting):
        return
    job = scheduler.queue.by_pod.get(waiting[0].pod.uid)
    if job is None or job.reservations or job.holds:  # holds: what no engine job holds (a 500m pod)
        return
    others = [sp for sp in _live_pods(cluster) if sp.pod.scheduler_name != KUBEFLUX]
    room = []
    occupied = set()
    for node in cluster.current_nodes():
        left = dict(node.allocatable)
        for sp in others:
            if sp.pod.node_name == node.name:
                occupied.add(node.name)
                for res, amount in {**sp.pod.requests, PODS: 1}.items():
                    left[res] = left.get(res, 0) - amount
        room.append(dataclasses.replace(node, allocatable=left))
    if fits_idle([sp.pod for sp in waiting], room, occupied=occupied):
        why = waiting[0].unschedulable_message
        raise InvariantBroken(RESERVATION, now, f"the head {job.key} holds no reservation though it would fit: {why}")


__all__ = [
    "BOOKS",
    "CORES",
    "EXPECTED",
    "FILTERS",
    "INVARIANTS",
    "KUBEFLUX",
    "LIVENESS",
    "OVERCOMMIT",
    "REJECTION",
    "RESERVATION",
    "Disturbance",
    "InvariantBroken",
    "compare_books",
    "fits_idle",
]
