"""Strict first-come first-served on whole jobs: the classic HPC baseline.

A *job* is a pod group (the pods labelled ``scheduling.x-k8s.io/pod-group``, once its PodGroup is known and at
least ``minMember`` of them exist) or a lone pod. A job starts when all its pods fit at once; pods are placed by
resources (cpu millicores, memory, ``nvidia.com/gpu``; extended resources and node constraints on the slow path)
with first fit over the nodes in the order they were added, like an HPC resource manager's node allocation. A
pod goes only where kube-default would let it: the node's pod limit, cordon, taints (a NotReady node's
included) unless tolerated, node selector and required node affinity (:mod:`kubeflux.sim.baselines.capacity`).

Jobs start in submission order: by creation time, ties by the order the scheduler first saw them (the simulator
creates a workload's pods in job order, so ties go by job number). A job that does not fit blocks every later
one. On one-core nodes, a job of P one-core pods therefore fits exactly when P nodes are free.

The scheduler accounts for every pod bound to a node, whichever scheduler bound it, until it ends; its own binds
are assumed at once. A job asking more than the whole cluster is rejected, as is a job with a pod that no node
could host even empty (larger than any node, or matching no node's labels or tolerating no node's taints:
kube-default would keep such a pod pending for ever, and in FCFS it would block every later job).
"""

from __future__ import annotations

import math
from bisect import insort
from collections import Counter
from dataclasses import replace

from kubeflux.scheduler.constraints import insufficient_resources, node_affinity, taint_toleration
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL, WALLTIME_ANNOTATION, Node, Pod, PodGroup
from kubeflux.scheduler.objects import PodPhase as PodPhase
from kubeflux.sim.baselines.capacity import NodeCapacity, is_special
from kubeflux.sim.baselines.node_table import NodeTable
from kubeflux.sim.jobs import parse_duration


def walltime_of(pod: Pod) -> float:
    """The pod's walltime estimate in seconds (:data:`WALLTIME_ANNOTATION`), ``inf`` when absent or unreadable."""
    raw = pod.annotations.get(WALLTIME_ANNOTATION)
    if raw is None:
        return math.inf
    try:
        return float(raw)
    except ValueError:
        try:
            return parse_duration(raw)
        except ValueError:
            return math.inf


class QueuedJob:
    """A job waiting to start: its pods (in the order seen), their summed requests, its walltime."""

    __slots__ = (
        "cpu",
        "created",
        "gpu",
        "key",
        "keys",
        "mem",
        "pods",
        "queued",
        "reported",
        "seq",
        "special",
        "tried",
        "walltime",
    )

    def __init__(self, key: str, created: float, seq: int) -> None:
        self.key = key
        self.created = created
        self.seq = seq
        self.pods: list[Pod] = []
        self.keys: list[str] = []
        self.cpu = self.mem = self.gpu = 0
        self.special = False
        self.walltime = 0.0
        self.tried = -1
        """:attr:`NodeCapacity.released` when the job last failed to fit (-1: never tried)."""
        self.reported = False
        self.queued = False
        """In the ready queue."""

    def add(self, pod: Pod, key: str) -> None:
        self.pods.append(pod)
        self.keys.append(key)
        req = pod.requests
        self.cpu += req.get(CPU, 0)
        self.mem += req.get(MEMORY, 0)
        self.gpu += req.get(GPU, 0)
        self.special = self.special or is_special(pod)
        self.walltime = max(self.walltime, walltime_of(pod))


class RunningJob:
    """A started job of this scheduler: where its pods are and when it is expected to end (seconds)."""

    __slots__ = ("allocs", "end", "key", "keys", "live", "seq")

    def __init__(self, key: str, end: float, seq: int, allocs: list[tuple[Pod, int]], keys: list[str]) -> None:
        self.key = key
        self.end = end
        self.seq = seq
        self.allocs = allocs
        self.keys = keys
        self.live = len(allocs)


def _no_node_ever(pod: Pod, nodes: list[Node]) -> str:
    """Why no node could host ``pod`` even empty, Ready and uncordoned ("" when one could): its node selector or
    affinity, a taint of the node's spec it does not tolerate, or its requests beyond the allocatable."""
    reasons: Counter[str] = Counter()
    for node in nodes:
        why = (
            node_affinity(pod, node)
            or taint_toleration(pod, replace(node, ready=True))
            or next(iter(insufficient_resources(pod.requests, node.allocatable, {})), None)
        )
        if why is None:
            return ""
        reasons[why] += 1
    text = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
    return f"pod {pod.key} fits no node even empty ({text})"


def _sort_key(job: QueuedJob) -> tuple[float, int]:
    return (job.created, job.seq)


class FCFSScheduler:
    """Strict FCFS over whole jobs (see the module docstring). ``name`` is the ``schedulerName`` it owns."""

    def __init__(self, name: str = "fcfs") -> None:
        self.name = name
        self.cap = NodeCapacity()
        self._placed: dict[str, int] = {}
        """Every bound, unfinished pod (any scheduler): uid → node number."""
        self._pending: dict[str, QueuedJob] = {}
        """This scheduler's jobs not started yet, ready or not, by job key."""
        self._queue: list[QueuedJob] = []
        """Ready jobs in start order."""
        self._fresh: list[QueuedJob] = []
        """Jobs that became ready since the last scheduling pass."""
        self._groups: dict[str, int] = {}
        """``namespace/name`` of known PodGroups → minMember."""
        self._running: dict[str, RunningJob] = {}
        self._pod_job: dict[str, RunningJob] = {}
        self._pending_pods: dict[str, QueuedJob] = {}
        """uid of each pending pod of this scheduler → its job. All pod dicts are keyed by uid (key if none)."""
        self._seq = 0
        self._shape: tuple[int, dict[str, int], dict[str, int]] = (-1, {}, {})
        self._hosts: tuple[int, dict[object, str]] = (-1, {})
        """Per pod shape (constraints and requests), why no node could ever host it ("": some node could)."""

    # -- observe ------------------------------------------------------------------------------------------------
    def observe(self, event: ClusterEvent, now: float) -> None:
        pod = event.obj
        if type(pod) is not Pod:
            self._observe_other(event)
            return
        uid = pod.uid or pod.key
        phase = pod.phase
        deleted = event.kind is EventKind.DELETED
        if deleted or phase is PodPhase.SUCCEEDED or phase is PodPhase.FAILED:
            i = self._placed.pop(uid, None)
            if i is not None:
                self.cap.give(i, pod)
                running = self._pod_job.pop(uid, None)
                if running is not None:
                    running.live -= 1
                    if running.live == 0:
                        del self._running[running.key]
                        self._job_ended(running)
            elif uid in self._pending_pods:
                self._forget_pending(pod, uid)
            return
        if pod.node_name:
            if uid not in self._placed:
                i = self.cap.index.get(pod.node_name, -1)
                if i >= 0:
                    self.cap.take(i, pod)
                    self._placed[uid] = i
                if uid in self._pending_pods:
                    self._forget_pending(pod, uid)  # bound by someone else
            return
        if pod.scheduler_name == self.name and uid not in self._pending_pods and not pod.scheduling_gates:
            self._add_pending(pod, uid)

    def _observe_other(self, event: ClusterEvent) -> None:
        obj = event.obj
        if type(obj) is Node:
            if event.kind is EventKind.DELETED:
                self.cap.remove_node(obj.name)
            else:
                self.cap.set_node(obj)
        elif type(obj) is PodGroup:
            if event.kind is EventKind.DELETED:
                self._groups.pop(obj.key, None)
            else:
                self._groups[obj.key] = obj.min_member
                job = self._pending.get(obj.key)
                if job is not None:
                    self._maybe_ready(job)

    def _add_pending(self, pod: Pod, uid: str) -> None:
        key = pod.key
        group = pod.labels.get(POD_GROUP_LABEL) if pod.labels else None
        job_key = key if group is None else f"{pod.namespace}/{group}"
        job = self._pending.get(job_key)
        if job is None:
            if job_key in self._running:
                job_key = key  # a late member of a started group runs on its own
            self._seq += 1
            job = QueuedJob(job_key, pod.creation_time, self._seq)
            self._pending[job_key] = job
            job.add(pod, key)
            self._pending_pods[uid] = job
            self._maybe_ready(job)
            return
        job.add(pod, key)
        self._pending_pods[uid] = job
        if job.queued:
            job.tried = -1  # a ready job grew: try it again
        else:
            self._maybe_ready(job)

    def _maybe_ready(self, job: QueuedJob) -> None:
        if job.queued:
            return
        if job.key != job.keys[0]:
            need = self._groups.get(job.key)
            if need is None or len(job.pods) < need:
                return
        queue = self._queue
        if not queue or _sort_key(queue[-1]) <= _sort_key(job):
            queue.append(job)
        else:
            insort(queue, job, key=_sort_key)
        job.queued = True
        self._fresh.append(job)

    def _forget_pending(self, pod: Pod, uid: str) -> None:
        job = self._pending_pods.pop(uid)
        at = next(n for n, p in enumerate(job.pods) if p is pod or (p.uid or p.key) == uid)
        del job.keys[at]
        del job.pods[at]
        req = pod.requests
        job.cpu -= req.get(CPU, 0)
        job.mem -= req.get(MEMORY, 0)
        job.gpu -= req.get(GPU, 0)
        if not job.pods:
            del self._pending[job.key]
            if job.queued:
                self._queue.remove(job)
                job.queued = False

    # -- placement ----------------------------------------------------------------------------------------------
    def _fits_totals(self, job: QueuedJob) -> bool:
        """Whether the free resources in all could hold the job: of the open nodes, or for a job with
        constraints (tolerations may open a tainted node) of every node."""
        cap = self.cap
        if job.special:
            return job.cpu <= cap.usable_cpu and job.mem <= cap.usable_mem and job.gpu <= cap.usable_gpu
        return job.cpu <= cap.total_cpu and job.mem <= cap.total_mem and job.gpu <= cap.total_gpu

    def _try_place(self, job: QueuedJob, exclude: set[int] | None = None) -> list[tuple[Pod, int]] | None:
        """Place every pod of ``job`` now (first fit), taking the resources; None (and nothing taken) if not."""
        if not self._fits_totals(job):
            return None
        cap = self.cap
        allocs: list[tuple[Pod, int]] = []
        special = job.special
        for pod in job.pods:
            i = cap.find(pod, special)
            while exclude and i in exclude:
                i = cap.find(pod, special, i + 1)
            if i < 0:
                for placed, j in allocs:
                    cap.untake(j, placed)
                return None
            cap.take(i, pod)
            allocs.append((pod, i))
        return allocs

    def _never_fits(self, job: QueuedJob) -> str:
        """Why ``job`` cannot run even on the empty cluster, or "": more than the nodes have in all, or a pod that
        no node could host even empty, Ready and uncordoned (:func:`_no_node_ever`)."""
        cap = self.cap
        if self._shape[0] != cap.shape_version:
            total: dict[str, int] = {}
            most: dict[str, int] = {}
            for node in cap.nodes:
                for res, amount in node.allocatable.items():
                    total[res] = total.get(res, 0) + amount
                    most[res] = max(most.get(res, 0), amount)
            self._shape = (cap.shape_version, total, most)
        _, total, most = self._shape
        for res, need in ((CPU, job.cpu), (MEMORY, job.mem), (GPU, job.gpu)):
            if need > total.get(res, 0):
                return f"the job asks {need} {res} in all, more than the {len(cap.nodes)} nodes have"
        for pod in job.pods:
            for res, amount in pod.requests.items():
                if amount > most.get(res, 0):
                    return f"pod {pod.key} asks {amount} {res}, more than any node has"
        if self._hosts[0] != cap.shape_version:
            self._hosts = (cap.shape_version, {})
        hosts = self._hosts[1]
        for pod in job.pods:
            shape = (NodeTable.static_signature(pod), tuple(sorted(pod.requests.items())))
            why = hosts.get(shape)
            if why is None:
                why = hosts[shape] = _no_node_ever(pod, [n for i, n in enumerate(cap.nodes) if cap.usable[i]])
            if why:
                return why
        return ""

    def _start(self, job: QueuedJob, allocs: list[tuple[Pod, int]], now: float, out: list[Decision]) -> None:
        nodes = self.cap.nodes
        placed = self._placed
        running = RunningJob(job.key, now + job.walltime, job.seq, allocs, job.keys)
        pod_job = self._pod_job
        pending_pods = self._pending_pods
        for (pod, i), key in zip(allocs, job.keys, strict=True):
            uid = pod.uid or key
            placed[uid] = i
            pod_job[uid] = running
            del pending_pods[uid]
            out.append(Bind(key, pod.uid, nodes[i].name))
        del self._pending[job.key]
        self._running[job.key] = running
        self._job_started(running)

    def _report(self, job: QueuedJob, message: str, out: list[Decision], expected: float | None = None) -> None:
        if job.reported:
            return
        job.reported = True
        text = f"0/{len(self.cap.nodes)} nodes are available: {message}."
        for pod, key in zip(job.pods, job.keys, strict=True):
            out.append(Unschedulable(key, pod.uid, text, expected))

    def _reject(self, job: QueuedJob, why: str, out: list[Decision]) -> None:
        for pod, key in zip(job.pods, job.keys, strict=True):
            out.append(Reject(key, pod.uid, f"0/{len(self.cap.nodes)} nodes are available: {why}."))
            self._pending_pods.pop(pod.uid or key, None)
        del self._pending[job.key]

    # -- the scheduling pass ------------------------------------------------------------------------------------
    def _start_head(self, now: float, out: list[Decision]) -> QueuedJob | None:
        """Start jobs from the head of the queue while they fit; return the blocked head (None: queue empty)."""
        queue = self._queue
        released = self.cap.released
        started = 0
        blocked: QueuedJob | None = None
        while started < len(queue):
            job = queue[started]
            if job.tried == released:
                blocked = job
                break
            allocs = self._try_place(job)
            if allocs is None:
                why = self._never_fits(job) if job.tried == -1 else ""
                if why:
                    self._reject(job, why, out)
                    queue.pop(started)
                    job.queued = False
                    continue
                job.tried = released
                blocked = job
                break
            self._start(job, allocs, now, out)
            job.queued = False
            started += 1
        if started:
            del queue[:started]
        return blocked

    def schedule(self, now: float) -> list[Decision]:
        out: list[Decision] = []
        if self._queue:
            head = self._start_head(now, out)
            if head is not None:
                message = (
                    f"job {head.key} ({len(head.pods)} pod(s)) does not fit in the free resources; later jobs wait"
                )
                self._report(head, message, out)
        self._fresh.clear()
        return out

    def next_wakeup(self, now: float) -> float | None:
        return None

    # -- hooks for subclasses -------------------------------------------------------------------------------------
    def _job_started(self, job: RunningJob) -> None:
        """A job of this scheduler was bound (called once, after its pods are recorded)."""

    def _job_ended(self, job: RunningJob) -> None:
        """The last pod of a started job ended."""


__all__ = ["FCFSScheduler", "QueuedJob", "RunningJob", "walltime_of"]
