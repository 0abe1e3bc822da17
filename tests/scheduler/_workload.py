"""Whole workloads for the scheduler core's property tests: a readable scenario model, its run through the real
simulator, and the invariants checked after every scheduler call and at the end of the run.

A :class:`Scenario` is nodes of mixed shapes, jobs (lone pods and pod groups, kubeflux's and kube-default's) that
arrive at whole seconds, and cluster changes at whole seconds (a node added, removed, cordoned, resized,
relabelled, tainted; kubeflux restarted). :func:`run` plays it on :class:`kubeflux.sim.driver.Simulation` with the
real :class:`KubefluxScheduler` wrapped in :class:`Checked`, which runs the chosen invariants after every call of
the scheduler and raises :class:`InvariantBroken` (an AssertionError) at the first one that fails, naming it.

The invariants are in :mod:`tests.scheduler._invariants`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import (
    ClusterEvent,
    Decision,
    EventKind,
    Unschedulable,
)
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node, Pod, Taint, Toleration
from kubeflux.scheduler.translate import POLICY_ANNOTATION
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.clock import Priority
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from tests.scheduler._invariants import (
    BOOKS,
    CORES,
    EXPECTED,
    FILTERS,
    INVARIANTS,
    KUBEFLUX,
    LIVENESS,
    OVERCOMMIT,
    REJECTION,
    RESERVATION,
    Disturbance,
    InvariantBroken,
    check_binds_fit,
    check_binds_pass_filters,
    check_books_match_rebuild,
    check_cores_exclusive,
    check_every_fitting_pod_started,
    check_expected_start,
    check_head_reserved,
    check_never_fitting_jobs_rejected,
    check_no_overcommit,
    check_reservations_kept,
)

GI = 2**30
STORAGE = "ephemeral-storage"
FPGA = "example.com/fpga"
OTHER = "default-scheduler"
ZONE = "zone"
DEDICATED = Taint("dedicated", "hpc", "NoSchedule")
TOLERATE_DEDICATED = Toleration("dedicated", "Equal", "hpc", "NoSchedule")

# ====================================================================== the scenario model


@dataclass(frozen=True)
class NodeShape:
    """A node: cpu in millicores, memory and ephemeral storage in GiB, fpga and gpu devices, a pod limit."""

    cpu: int = 8000
    memory: int = 32
    storage: int = 100
    fpga: int = 0
    gpu: int = 0
    pods: int = 110
    zone: str = "a"
    tainted: bool = False

    def node(self, name: str) -> Node:
        allocatable = {CPU: self.cpu, MEMORY: self.memory * GI, STORAGE: self.storage * GI, PODS: self.pods}
        if self.fpga:
            allocatable[FPGA] = self.fpga
        if self.gpu:
            allocatable[GPU] = self.gpu
        return Node(name, uid=name, allocatable=allocatable, labels={ZONE: self.zone}, taints=self.taints())

    def taints(self) -> tuple[Taint, ...]:
        return (DEDICATED,) if self.tainted else ()


@dataclass(frozen=True)
class PodShape:
    """A pod: cpu in millicores, memory and storage in GiB, devices; it runs ``run`` seconds once bound."""

    cpu: int = 1000
    memory: int = 0
    storage: int = 0
    fpga: int = 0
    gpu: int = 0
    run: int = 60
    zone: str = ""
    """A ``nodeSelector`` on the zone label, when set."""
    tolerates: bool = False
    """Tolerates the ``dedicated=hpc:NoSchedule`` taint."""
    policy: str = ""
    """kubeflux's match policy annotation (``lonodex``: the pod holds its node whole), when set."""

    def requests(self) -> dict[str, int]:
        amounts = {CPU: self.cpu, MEMORY: self.memory * GI, STORAGE: self.storage * GI, FPGA: self.fpga, GPU: self.gpu}
        return {res: amount for res, amount in amounts.items() if amount}

    def template(self, name: str, scheduler: str, priority: int) -> PodTemplate:
        return PodTemplate(
            name,
            self.requests(),
            float(self.run),
            scheduler_name=scheduler,
            priority=priority,
            node_selector={ZONE: self.zone} if self.zone else {},
            tolerations=(TOLERATE_DEDICATED,) if self.tolerates else (),
            annotations={POLICY_ANNOTATION: self.policy} if self.policy else {},
        )


@dataclass(frozen=True)
class JobShape:
    """A lone pod (one member, ``min_member`` 0) or a pod group of its members, arriving at ``at`` seconds."""

    at: int
    members: tuple[PodShape, ...]
    min_member: int = 0
    """0: lone pods (one job per member); else a PodGroup with this minMember."""
    timeout: int | None = None
    """The group's ``scheduleTimeoutSeconds``."""
    priority: int = 0
    other: bool = False
    """Owned by kube-default (``default-scheduler``), not kubeflux."""


@dataclass(frozen=True)
class Change:
    """A change of the cluster at ``at`` seconds. ``node`` picks among the current nodes (modulo their number).

    ``what``: ``add`` (a node of ``shape``), ``readd`` (the node last removed comes back as ``shape``),
    ``remove``, ``cordon``, ``uncordon``, ``grow`` (allocatable doubled), ``shrink`` (halved, never below what its
    pods use), ``relabel`` (zone a ↔ b), ``taint`` (the dedicated taint toggled), ``restart`` (kubeflux restarts
    and is re-fed the cluster's objects), ``delete`` (a user deletes the ``node``-th pod), ``recreate`` (… and it
    comes back under its name with a new UID, as a StatefulSet's pod does)."""

    at: int
    what: str
    node: int = 0
    shape: NodeShape = NodeShape()


@dataclass(frozen=True)
class Scenario:
    nodes: tuple[NodeShape, ...]
    jobs: tuple[JobShape, ...]
    changes: tuple[Change, ...] = ()
    backfill: str = "easy"


# ====================================================================== the checked scheduler and the run


class Checked:
    """kubeflux under test: the real core, restarted on demand (a fresh one re-fed the cluster's objects, as a
    restarted informer lists them), with the ``checks`` run after every call.

    The simulation driver asks ``next_wakeup`` right after applying this scheduler's decisions, so the checks of
    the cluster's state run there; the Binds are checked against the cluster before they are applied."""

    def __init__(self, backfill: str, checks: Iterable[str]) -> None:
        self.name = KUBEFLUX
        self.backfill = backfill
        self.checks = set(checks)
        self.inner = KubefluxScheduler(KUBEFLUX, backfill=backfill)
        self.cluster: Cluster = None  # type: ignore[assignment]  # set by run() before the first event
        self.restart_due = False
        self.restarts = 0
        self.calls = 0
        self.first_reservation: dict[str, tuple[float, float, int]] = {}
        """Pod uid → (when told, expected start, priority) of its first reservation."""
        self.disturbances: list[Disturbance] = []
        self._events_checked = -1
        self._decided = False

    def observe(self, event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, Pod) and obj.scheduler_name == KUBEFLUX and event.kind is EventKind.ADDED:
            self.disturbances.append(Disturbance(now, "priority", obj.priority))
        elif isinstance(obj, Pod) and obj.scheduler_name != KUBEFLUX and obj.node_name and not obj.phase.terminal:
            self.disturbances.append(Disturbance(now, f"{obj.scheduler_name} bound {obj.key}"))
        self.inner.observe(event, now)

    def restart(self, now: float) -> None:
        self.restarts += 1
        self.inner = KubefluxScheduler(KUBEFLUX, backfill=self.backfill)
        for node in self.cluster.current_nodes():
            self.inner.observe(ClusterEvent(EventKind.ADDED, node), now)
        for group in self.cluster.groups.values():
            self.inner.observe(ClusterEvent(EventKind.ADDED, group), now)
        for sp in self.cluster.pods.values():
            self.inner.observe(ClusterEvent(EventKind.ADDED, sp.pod), now)

    def schedule(self, now: float) -> list[Decision]:
        if self.restart_due:
            self.restart_due = False
            self.restart(now)
        self.calls += 1
        decisions = self.inner.schedule(now)
        self._decided = bool(decisions)
        if OVERCOMMIT in self.checks:
            check_binds_fit(self.cluster, decisions)
        if FILTERS in self.checks:
            check_binds_pass_filters(self.cluster, decisions)
        for decision in decisions:
            told = isinstance(decision, Unschedulable) and decision.expected_start is not None
            if told and decision.uid not in self.first_reservation:
                priority = self.cluster.pods[decision.pod].pod.priority
                self.first_reservation[decision.uid] = (now, decision.expected_start, priority)  # type: ignore[union-attr]
        return decisions

    def next_wakeup(self, now: float) -> float | None:
        wake = self.inner.next_wakeup(now)
        if self._decided or self.cluster.events_emitted != self._events_checked:  # else nothing changed
            self._events_checked = self.cluster.events_emitted
            self.after_call(settled=wake != now)
        return wake

    def after_call(self, *, settled: bool = True) -> None:
        """The invariants after a call; those of a settled plan only once no other pass is due at once (a pass
        that stopped at the queue depth after binding leaves the jobs behind for the next: ``next_wakeup`` now)."""
        if OVERCOMMIT in self.checks:
            check_no_overcommit(self.cluster)
        if CORES in self.checks:
            check_cores_exclusive(self.inner, self.cluster)
        if BOOKS in self.checks:
            check_books_match_rebuild(self.inner, self.cluster)
        if not settled:
            return
        if EXPECTED in self.checks:
            check_expected_start(self.inner, self.cluster)
        if RESERVATION in self.checks:
            check_head_reserved(self.inner, self.cluster)


@dataclass(slots=True)
class Outcome:
    simulation: Simulation
    checked: Checked
    problems: list[str] = field(default_factory=list)

    def started(self, name: str) -> float | None:
        """When the pod ``default/name`` was bound (None: never)."""
        return self.simulation.cluster.pod(f"default/{name}").bound_at


SETTLE = 20_000
"""Seconds a run goes on after the last arrival or change: far more than any workload here needs to drain (at
most 16 jobs of at most 300 s, back-offs of at most 300 s), so a pod still pending then is starved."""


def workload(scenario: Scenario) -> Workload:
    jobs: list[WorkloadJob] = []
    for i, shape in enumerate(scenario.jobs):
        scheduler = OTHER if shape.other else KUBEFLUX
        if shape.min_member:
            templates = [m.template(f"j{i}-{k}", scheduler, shape.priority) for k, m in enumerate(shape.members)]
            job = WorkloadJob(f"j{i}", float(shape.at), JobKind.POD_GROUP, f"j{i}", pods=templates)
            job.min_member = shape.min_member
            job.schedule_timeout_seconds = None if shape.timeout is None else float(shape.timeout)
            jobs.append(job)
            continue
        for k, member in enumerate(shape.members):
            name = f"j{i}" if len(shape.members) == 1 else f"j{i}-{k}"
            template = member.template(name, scheduler, shape.priority)
            jobs.append(WorkloadJob(name, float(shape.at), JobKind.POD, name, pods=[template]))
    return Workload("props", jobs)


def run(scenario: Scenario, checks: Iterable[str] = INVARIANTS) -> Outcome:
    """Play ``scenario`` with the ``checks`` on; raises :class:`InvariantBroken` at the first broken one."""
    checks = set(checks)
    checked = Checked(scenario.backfill, checks)
    nodes = [shape.node(f"n{i}") for i, shape in enumerate(scenario.nodes)]
    schedulers = {KUBEFLUX: checked, OTHER: KubeDefaultScheduler(OTHER)}
    last = max([job.at for job in scenario.jobs] + [change.at for change in scenario.changes])
    options = SimulationOptions(until=last + SETTLE)
    sim = Simulation(workload(scenario), nodes, schedulers, primary=KUBEFLUX, options=options)  # type: ignore[dict-item]
    checked.cluster = sim.cluster
    added = itertools.count(len(nodes))
    for change in scenario.changes:
        sim.loop.schedule(float(change.at), Priority.NODE, _apply_change, (sim.cluster, checked, change, added))
    record = sim.run()
    outcome = Outcome(sim, checked, list(record.problems))
    if LIVENESS in checks:
        if any("the run stopped" in problem for problem in record.problems):
            raise InvariantBroken(LIVENESS, sim.loop.now, f"livelock: {record.problems}")
        check_every_fitting_pod_started(sim.cluster)
    if REJECTION in checks:
        check_never_fitting_jobs_rejected(sim.cluster)
    if RESERVATION in checks:
        check_reservations_kept(sim.cluster, checked.first_reservation, checked.disturbances)
    return outcome


def _apply_change(payload: tuple[Cluster, Checked, Change, itertools.count[int]]) -> None:
    cluster, checked, change, serial = payload
    now = cluster.loop.now
    if change.what == "restart":
        checked.restart_due = True
        return
    if change.what == "add":
        cluster.add_node(change.shape.node(f"n{next(serial)}"))
        return
    if change.what == "readd":
        gone = [node.name for node in cluster.nodes if node.name not in cluster.node_index]
        if gone:
            cluster.add_node(change.shape.node(gone[-1]))
        return
    if change.what in ("delete", "recreate"):
        _delete_pod(cluster, change.node, again=change.what == "recreate")
        return
    nodes = cluster.current_nodes()
    node = nodes[change.node % len(nodes)]
    taken = change.what in ("remove", "cordon", "shrink", "relabel", "taint")
    if change.what == "remove":
        if len(nodes) == 1:
            return
        cluster.remove_node(node.name)
    elif change.what in ("cordon", "uncordon"):
        cluster.cordon(node.name, change.what == "cordon")
    elif change.what in ("grow", "shrink"):
        free = cluster.free(node.name)
        alloc = dict(node.allocatable)
        for res in (CPU, MEMORY, STORAGE, FPGA, GPU):
            if res in alloc:
                used = alloc[res] - free.get(res, 0)
                alloc[res] = alloc[res] * 2 if change.what == "grow" else max(alloc[res] // 2, used)
        cluster.update_node(node.name, allocatable=alloc)
    elif change.what == "relabel":
        zone = "b" if node.labels.get(ZONE) == "a" else "a"
        cluster.update_node(node.name, labels={**node.labels, ZONE: zone})
    elif change.what == "taint":
        cluster.update_node(node.name, taints=() if node.taints else (DEDICATED,))
    if taken:
        checked.disturbances.append(Disturbance(now, f"{change.what} {node.name}"))


def _delete_pod(cluster: Cluster, pick: int, *, again: bool) -> None:
    """``kubectl delete`` of the ``pick``-th pod; ``again``: re-created under its name with a new UID, as a
    StatefulSet does (only lone pods and members of a gang that has started whole)."""
    keys = sorted(key for key, sp in cluster.pods.items() if not sp.pod.deleted and sp.finished_at is None)
    if not keys:
        return
    sp = cluster.pods[keys[pick % len(keys)]]
    job = cluster.jobs[sp.job_index]
    started = all(member.bound_at is not None for member in job.pods)
    if again and job.wjob.min_member and not started:
        return
    cluster.delete_pod(sp.pod.key)
    if again:
        template = dataclasses.replace(sp.timing.template, labels=dict(sp.pod.labels))
        name = sp.pod.name
        cluster.submit(WorkloadJob(f"{name}-again", cluster.loop.now, JobKind.POD, name, pods=[template]))


def group(at: int, *members: PodShape, min_member: int | None = None, **kwargs: object) -> JobShape:
    """A pod group of ``members`` (minMember: all of them unless given)."""
    return JobShape(at, members, min_member=len(members) if min_member is None else min_member, **kwargs)  # type: ignore[arg-type]


def lone(at: int, pod: PodShape, **kwargs: object) -> JobShape:
    return JobShape(at, (pod,), **kwargs)  # type: ignore[arg-type]


__all__ = ["Change", "Checked", "JobShape", "NodeShape", "Outcome", "PodShape", "Scenario", "group", "lone", "run"]
