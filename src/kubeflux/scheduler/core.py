"""The kubeflux scheduler core: pods and pod groups placed by the graph engine, with queueing and backfill.

It implements :class:`kubeflux.scheduler.interface.Scheduler`: no I/O, no clock (``now`` is an argument, in
seconds; the engine's time axis is whole seconds from 0, so Unix time and simulated time both fit its horizon).

**Informer logic** (:meth:`KubefluxScheduler.observe`), keyed by pod UID (``namespace/name`` when a pod has
none, or when a tombstone lost it): a pod that Succeeds, Fails or is deleted releases *its own* engine job and
ledger booking at once, so a group keeps the rest of its allocation until its last member ends; a pod bound by
another scheduler is counted on its node (ledger, and engine cores when whole); nodes that are deleted are
marked down in place, cordons, taints and readiness are filters, and a node that appears or changes capacity
triggers a rebuild of the graph with every allocation re-applied (not yet in place).

**One scheduling pass** (:meth:`KubefluxScheduler.schedule`), in named phases:

1. *re-plan*: cancel the reservations of the previous pass; account pods bound by others (or recovered);
2. *order*: ready jobs by priority, arrival, first sight (:mod:`kubeflux.scheduler.queue`), at most
   ``queue_depth`` of them;
3. *filter*: per pod, kube-scheduler's filters (:mod:`kubeflux.scheduler.constraints`) and the exact ledger
   (:mod:`kubeflux.scheduler.ledger`); unfit nodes are marked down in the engine for that match only;
4. *match*: one engine job per pod (:mod:`kubeflux.scheduler.translate`), all members of a group or none;
5. *reserve*: a job that does not fit now gets a reservation (``allocate_orelse_reserve``): under ``fcfs`` only
   the first blocked job, and nothing passes it; under ``easy`` the first blocked job, and later jobs start
   only when they fit now around it; under ``conservative`` every blocked job in the queue depth;
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

import contextlib
import json
import math
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from kubeflux.jobspec import Jobspec
from kubeflux.match.engine import DEFAULT_HORIZON, Engine, EngineError, MatchOp, MatchResult
from kubeflux.match.policy import MatchPolicy, parse_policy
from kubeflux.resources import NodeSpec, Status, build_graph
from kubeflux.scheduler.constraints import fit_error_message, never_fits, static_filter
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Reject, Unschedulable
from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod, PodGroup
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.sharing import SharedSharing, SharingPolicy
from kubeflux.scheduler.translate import (
    Placement,
    PodRequestError,
    gang_jobspec,
    node_spec,
    placement_from_output,
    pod_duration,
    pod_jobspec,
    pod_policy,
    whole_cores,
)

__all__ = ["ALLOCATION_ANNOTATION", "Allocation", "Backfill", "KubefluxScheduler"]

ALLOCATION_ANNOTATION = "kubeflux.io/allocation"
"""Written on every pod kubeflux binds: JSON with the engine job id, node, cores, gpus, start and duration."""
REASON_RESERVED = "node(s) had no free cores for the pod's planned time (reserved for pods ahead in the queue)"
REASON_NOT_OURS = "node(s) are not available to kubeflux under its sharing policy"
CLUSTER_NAME = "kubeflux"


class Backfill(StrEnum):
    FCFS = "fcfs"
    EASY = "easy"
    CONSERVATIVE = "conservative"


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


class KubefluxScheduler:
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
        self.name = name
        self.policy = policy
        self.backfill = Backfill(backfill)
        self.queue_depth = queue_depth
        self.sharing: SharingPolicy = sharing or SharedSharing()
        self.horizon = horizon
        self.group_backoff = group_backoff
        self.max_backoff = max_backoff
        self.log: deque[str] = deque(maxlen=log_limit)
        """Fluence-style log lines (nodes found, cores per node, policy, each match and its result)."""
        self.nodes: dict[str, Node] = {}
        self.queue = PendingQueue()
        self.ledger = Ledger()
        """Every scheduler's bound pods, against each node's allocatable."""
        self.own = Ledger()
        """kubeflux's own pods, against its share of each node (the sharing policy)."""
        self.allocations: dict[str, Allocation] = {}
        """Pod uid → allocation, for every bound unfinished pod of any scheduler."""
        self.engine: Engine | None = None
        self._graph_specs: dict[str, NodeSpec] = {}
        self._paths: dict[str, str] = {}
        self._gone: set[str] = set()
        """Nodes in the graph that were deleted from the cluster: kept down."""
        self._uid_by_key: dict[str, str] = {}
        self._unaccounted: dict[str, Pod] = {}
        """Bound pods (others', or ours after a restart) still to be put into the engine."""
        self._bound: dict[str, Pod] = {}
        """Pod uid → pod, for every allocation (to re-apply it when the graph is rebuilt)."""
        self._now = 0.0
        self._dirty = True
        self._rebuild = False
        self._wake: float | None = None

    # ================================================================== observe (the informer)

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Node):
            self._dirty = True
            self._observe_node(event.kind, obj)
        elif isinstance(obj, PodGroup):
            self._dirty = True
            if event.kind is EventKind.DELETED:
                self.queue.groups.pop(obj.key, None)
            else:
                self.queue.groups[obj.key] = obj
        else:
            self._observe_pod(event.kind, obj)

    def _uid(self, pod: Pod) -> str:
        if pod.uid:
            return pod.uid
        return self._uid_by_key.get(pod.key, pod.key)

    def _observe_pod(self, kind: EventKind, pod: Pod) -> None:
        uid = self._uid(pod)
        if kind is EventKind.DELETED or pod.phase.terminal:
            if uid in self.allocations or uid in self.queue.by_pod:
                self._dirty = True
            self._release(uid, "deleted" if kind is EventKind.DELETED else pod.phase.value)
            self.queue.remove_pod(uid)
            self._uid_by_key.pop(pod.key, None)
            return
        self._uid_by_key[pod.key] = uid
        if pod.node_name:
            if uid not in self.allocations:
                self._dirty = True
                self.queue.remove_pod(uid)
                self._account_bound(uid, pod)
            return
        if pod.scheduler_name != self.name:
            return
        if pod.deleted:
            if self.queue.remove_pod(uid) is not None:
                self._dirty = True
            return
        known = self.queue.by_pod.get(uid)
        if known is None or known.pods.get(uid, pod).priority != pod.priority:
            self._dirty = True
        self.queue.add(uid, pod)

    def _observe_node(self, kind: EventKind, node: Node) -> None:
        name = node.name
        if kind is EventKind.DELETED:
            self.nodes.pop(name, None)
            if name in self._graph_specs:
                self._gone.add(name)
                self._set_status(name, Status.DOWN)
            return
        self.nodes[name] = node
        if self.engine is None:
            return
        spec = node_spec(node, self.sharing.share(node)) if self.sharing.admits(node) else None
        if spec is None:
            if name in self._graph_specs:
                self._rebuild = True
            return
        if self._graph_specs.get(name) != spec:
            self._rebuild = True
        elif name in self._gone:
            self._gone.discard(name)
            self._set_status(name, Status.UP)

    def _account_bound(self, uid: str, pod: Pod) -> None:
        """A pod bound to a node that kubeflux did not (or no longer) account for: book it."""
        node = pod.node_name
        own = pod.scheduler_name == self.name
        self.ledger.take(uid, node, pod.requests)
        if own:
            self.own.take(uid, node, pod.requests)
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
        if alloc.jobid and self.engine is not None:
            with contextlib.suppress(EngineError):
                self.engine.cancel(alloc.jobid)
            self.log.append(f"Cancel flux job: {alloc.jobid} for pod {alloc.key} ({why})")

    # ================================================================== the graph

    def _ensure_engine(self) -> Engine | None:
        if self.engine is not None and not self._rebuild:
            return self.engine
        admitted = [node for node in self.nodes.values() if self.sharing.admits(node)]
        if not admitted:
            return None
        specs = [node_spec(node, self.sharing.share(node)) for node in admitted]
        graph = build_graph(specs, cluster=CLUSTER_NAME)
        rebuilt = self.engine is not None
        self.engine = Engine(graph, policy=self.policy, horizon=self.horizon)
        self._graph_specs = {spec.name: spec for spec in specs}
        self._paths = {spec.name: f"/{CLUSTER_NAME}0/{spec.name}" for spec in specs}
        self._gone.clear()
        self._rebuild = False
        self.log.append(f"Number nodes  {len(specs)}" + ("  (graph rebuilt)" if rebuilt else ""))
        for spec in specs:
            self.log.append(f"Node  {spec.name}  flux cpu  {spec.cores}")
            self.log.append(f"Node  {spec.name}  total mem  {spec.memory}")
        self.log.append(f"Can request at most  {max(s.cores for s in specs)}  exclusive cpu")
        self.log.append(f'Match policy:  {{"matcher_policy": "{self.policy}"}}')
        if rebuilt:
            for alloc in self.allocations.values():
                alloc.jobid = 0
                pod = self._bound.get(alloc.uid)
                if pod is not None:
                    self._unaccounted[alloc.uid] = pod
        return self.engine

    def _set_status(self, name: str, status: Status) -> None:
        if self.engine is not None and name in self._paths:
            self.engine.set_status(self._paths[name], status)

    def _tick(self, now: float) -> int:
        return max(0, math.floor(now))

    def _planned(self, pod: Pod, start: int) -> int:
        """Seconds to plan the pod's allocation for, from ``start``: its duration, cut at the horizon."""
        left = self.horizon - start
        duration = pod_duration(pod)
        return left if duration is None else max(1, min(math.ceil(duration), left))

    def _match(self, op: MatchOp, pod: Pod, duration: int, start: int, down: Iterable[str]) -> MatchResult | None:
        """One engine match for ``pod`` with the ``down`` nodes hidden; None for a ledger-only pod."""
        spec = pod_jobspec(pod, duration)
        if spec is None:
            return None
        return self._match_spec(op, spec, pod.key, start, down, pod_policy(pod, self.policy))

    def _match_spec(
        self, op: MatchOp, spec: Jobspec, what: str, start: int, down: Iterable[str], policy: str | None = None
    ) -> MatchResult:
        engine = self.engine
        assert engine is not None
        hidden = [name for name in down if name not in self._gone]
        for name in hidden:
            self._set_status(name, Status.DOWN)
        saved = engine.policy
        if policy is not None and policy != self.policy:
            engine.policy = engine.traverser.policy = MatchPolicy(parse_policy(policy))
        try:
            result = engine.match(op, spec, now=start, source=what)
        finally:
            engine.policy = engine.traverser.policy = saved
            for name in hidden:
                self._set_status(name, Status.UP)
        if not result.matched:
            self.log.append(f"Match {op.value} {what}: no fit ({result.elapsed:.6f} s)")
        elif result.reserved:
            self.log.append(
                f"Match {op.value} {what}: jobid {result.jobid} reserved at {result.at} ({result.elapsed:.6f} s)"
            )
        else:
            where = placement_from_output(result.resources)
            self.log.append(
                f"Match {op.value} {what}: jobid {result.jobid} node {where.node} cores {len(where.cores)} "
                f"({result.elapsed:.6f} s)"
            )
        return result

    def _account_unaccounted(self) -> None:
        """Put bound pods the engine does not hold yet onto their node's cores (pinned: other nodes hidden)."""
        if not self._unaccounted or self.engine is None:
            return
        pending = self._unaccounted
        self._unaccounted = {}
        by_node: dict[str, list[tuple[Allocation, Pod]]] = {}
        for uid, pod in pending.items():
            alloc = self.allocations.get(uid)
            if alloc is not None and alloc.node in self._graph_specs and alloc.node not in self._gone:
                by_node.setdefault(alloc.node, []).append((alloc, pod))
        for node, items in by_node.items():
            others = [name for name in self._graph_specs if name != node]
            for alloc, pod in items:
                if whole_cores(pod.requests.get(CPU, 0)) == 0 and not pod.requests.get("nvidia.com/gpu", 0):
                    continue
                start = alloc.start if alloc.own and alloc.duration else self._tick(self._now)
                duration = alloc.duration if alloc.own and alloc.duration else self.horizon - start
                try:
                    result = self._match(MatchOp.ALLOCATE, pod, max(1, duration), start, others)
                except PodRequestError:
                    continue
                if result is not None and result.matched:
                    alloc.jobid = result.jobid
                    alloc.placement = placement_from_output(result.resources)
                else:
                    self.log.append(f"Could not account pod {pod.key} on node {node} in the graph (ledger only)")

    # ================================================================== schedule (one pass)

    def schedule(self, now: float) -> list[Decision]:
        self._now = now
        due = self._wake is not None and now >= self._wake
        if not self._dirty and not due:
            return []
        self._dirty = False
        self._wake = None
        out: list[Decision] = []
        engine = self._ensure_engine()
        if engine is None:
            self._report_all(fit_error_message(len(self.nodes), {}), out)
            return out
        self._cancel_reservations()
        self._account_unaccounted()
        blocked = 0
        considered = 0
        for job in self.queue.ordered():
            if considered >= self.queue_depth:
                break
            missing = self.queue.missing_members(job)
            if missing:
                self._report_group_waiting(job, missing, out)
                continue
            if job.ready_since is None:
                job.ready_since = now
            if job.retry_at > now:
                self._wake_at(job.retry_at)
                continue
            considered += 1
            if self._timed_out(job, now, out):
                continue
            if self.backfill is Backfill.FCFS and blocked:
                continue
            try:
                reasons = self._place_now(job, now, out)
            except PodRequestError as exc:
                self._reject(job, str(exc), out)
                continue
            if reasons is None or (job.key in self.queue.jobs and self._never(job, out)):
                continue
            reserve = self.backfill is Backfill.CONSERVATIVE or blocked == 0
            blocked += 1
            expected = self._reserve(job, now) if reserve else None
            gang = f"pod group {job.key} needs its {len(job.pods)} pods placed at once." if job.group else ""
            self._report(job, fit_error_message(len(self.nodes), reasons, post_filter_message=gang), expected, out)
        return out

    def next_wakeup(self, now: float) -> float | None:
        return self._wake if self._wake is not None and self._wake > now else None

    def _wake_at(self, t: float) -> None:
        if self._wake is None or t < self._wake:
            self._wake = t

    def _cancel_reservations(self) -> None:
        engine = self.engine
        for job in self.queue.jobs.values():
            if engine is not None:
                for jobid in job.reservations:
                    with contextlib.suppress(EngineError):
                        engine.cancel(jobid)
            job.reservations.clear()
            job.expected_start = None

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
        message = fit_error_message(
            len(self.nodes),
            {},
            pre_filter_message=(
                f"pod group {job.key} did not fit within its scheduleTimeoutSeconds of {timeout:g}; "
                f"released, retrying in {job.backoff:g} s"
            ),
        )
        self.log.append(message)
        self._report(job, message, None, out)
        return True

    # ================================================================== filter and match

    def _filter(self, pod: Pod, ledger_too: bool) -> tuple[list[str], Counter[str]]:
        """The graph nodes that may take ``pod`` (in graph order) and the reasons the others may not."""
        fit: list[str] = []
        reasons: Counter[str] = Counter()
        for name in self._graph_specs:
            node = self.nodes.get(name)
            if node is None or name in self._gone:
                continue
            why = static_filter(pod, node)
            if why is not None:
                reasons[why] += 1
                continue
            if ledger_too:
                short = self.ledger.shortfall(pod.requests, name, node.allocatable)
                if not short:
                    short = self.own.shortfall(pod.requests, name, self.sharing.share(node))
                if short:
                    reasons.update(short)
                    continue
            fit.append(name)
        outside = sum(1 for name in self.nodes if name not in self._graph_specs)
        if outside:
            reasons[REASON_NOT_OURS] += outside
        return fit, reasons

    def _place_now(self, job: PendingJob, now: float, out: list[Decision]) -> Counter[str] | None:
        """Place every pod of ``job`` now, or none; None when bound, else why not (kube-scheduler reasons)."""
        start = self._tick(now)
        made: list[tuple[Pod, Allocation]] = []
        for uid, pod in job.pods.items():
            fit, reasons = self._filter(pod, ledger_too=True)
            alloc: Allocation | None = None
            if fit:
                alloc = self._place_pod(uid, pod, fit, start)
                if alloc is None:
                    reasons[REASON_RESERVED] += len(fit)
            if alloc is None:
                for _, placed in made:
                    self._release(placed.uid, "gang incomplete")
                if made:  # the reasons as they stand without the members tried before this one
                    _, reasons = self._filter(pod, ledger_too=True)
                return reasons
            made.append((pod, alloc))
        for pod, alloc in made:
            annotation = {
                "jobid": alloc.jobid,
                "node": alloc.node,
                "cores": list(alloc.placement.cores) if alloc.placement else [],
                "gpus": list(alloc.placement.gpus) if alloc.placement else [],
                "cpu": pod.requests.get(CPU, 0),
                "memory": pod.requests.get(MEMORY, 0),
                "start": alloc.start,
                "duration": alloc.duration,
            }
            text = json.dumps(annotation, sort_keys=True, separators=(",", ":"))
            out.append(Bind(pod.key, pod.uid, alloc.node, {ALLOCATION_ANNOTATION: text}))
        self.queue.remove_job(job)
        return None

    def _place_pod(self, uid: str, pod: Pod, fit: list[str], start: int) -> Allocation | None:
        duration = self._planned(pod, start)
        fitting = set(fit)
        down = [name for name in self._graph_specs if name not in fitting]
        result = self._match(MatchOp.ALLOCATE, pod, duration, start, down)
        if result is None:
            placement: Placement | None = None
            node = fit[0]
            jobid = 0
        elif not result.matched:
            return None
        else:
            placement = placement_from_output(result.resources)
            node, jobid = placement.node, result.jobid
        self.ledger.take(uid, node, pod.requests)
        self.own.take(uid, node, pod.requests)
        alloc = Allocation(uid, pod.key, node, True, jobid, start, duration, placement)
        self.allocations[uid] = alloc
        self._bound[uid] = pod
        self._uid_by_key[pod.key] = uid
        return alloc

    def _reserve(self, job: PendingJob, now: float) -> float | None:
        """Reserve ``job`` at the earliest time the engine finds (``allocate_orelse_reserve``); its start or None.

        A lone pod reserves its own slot; a gang whose members take the same cores and gpus reserves all its
        slots as one engine job (one start time for all, on the nodes every member may use); a gang of
        different members reserves each member and expects the latest of their times (an estimate: members
        reserved earlier do not hold their resources until then). None (nothing held) when no time is found,
        or when the engine's cores are free now and only the exact books (memory, millicores, pod count) stop
        the job.
        """
        start = self._tick(now)
        pods = list(job.pods.values())
        fitting: set[str] | None = None
        for pod in pods:
            fit, _ = self._filter(pod, ledger_too=False)
            fitting = set(fit) if fitting is None else fitting & set(fit)
        down = [name for name in self._graph_specs if name not in (fitting or set())]
        duration = max(self._planned(pod, start) for pod in pods)
        gang = gang_jobspec(pods, duration, job.key) if len(pods) > 1 else None
        times: list[int] = []
        if gang is not None:
            result = self._match_spec(MatchOp.ALLOCATE_ORELSE_RESERVE, gang, job.key, start, down)
            if result.matched:
                job.reservations.append(result.jobid)
                times.append(result.at)
        else:
            for pod in pods:
                matched = self._match(MatchOp.ALLOCATE_ORELSE_RESERVE, pod, self._planned(pod, start), start, down)
                if matched is None or not matched.matched:
                    break
                job.reservations.append(matched.jobid)
                times.append(matched.at)
        if len(times) < (1 if gang is not None else len(pods)) or max(times) <= start:
            self._cancel_job_reservations(job)
            return None
        job.expected_start = float(max(times))
        return job.expected_start

    def _cancel_job_reservations(self, job: PendingJob) -> None:
        assert self.engine is not None
        for jobid in job.reservations:
            self.engine.cancel(jobid)
        job.reservations.clear()

    # ================================================================== decisions

    def _never(self, job: PendingJob, out: list[Decision]) -> bool:
        """Reject the job when one of its pods fits on no node even empty; True when rejected."""
        nodes = [
            replace(node, allocatable=self.sharing.share(node))
            for name, node in self.nodes.items()
            if name in self._graph_specs and name not in self._gone
        ]
        for pod in job.pods.values():
            why = never_fits(pod, nodes) if nodes else None
            if why is not None:
                self._reject(job, why, out)
                return True
        return False

    def _reject(self, job: PendingJob, message: str, out: list[Decision]) -> None:
        for pod in job.pods.values():
            out.append(Reject(pod.key, pod.uid, message))
        self.log.append(f"Rejected {job.key}: {message}")
        self.queue.jobs.pop(job.key, None)
        for uid in list(job.pods):
            self.queue.by_pod.pop(uid, None)

    def _report(self, job: PendingJob, message: str, expected: float | None, out: list[Decision]) -> None:
        for uid, pod in job.pods.items():
            said = (message, expected)
            if job.told.get(uid) != said:
                job.told[uid] = said
                out.append(Unschedulable(pod.key, pod.uid, message, expected))

    def _report_group_waiting(self, job: PendingJob, missing: int, out: list[Decision]) -> None:
        group = self.queue.groups.get(job.key)
        if group is None:
            why = f"pod group {job.key} does not exist (yet)"
        else:
            why = f"pod group {job.key} has {len(job.pods)} of its minMember {group.min_member} pods"
        self._report(job, fit_error_message(len(self.nodes), {}, pre_filter_message=why), None, out)

    def _report_all(self, message: str, out: list[Decision]) -> None:
        for job in self.queue.jobs.values():
            self._report(job, message, None, out)


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
