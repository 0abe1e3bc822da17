"""The replayed workload's records, kept from what the API shows: the simulator's job and pod records
(:class:`~kubeflux.sim.jobs.SimJob`, :class:`~kubeflux.sim.pods.SimPod`) filled from the pods' watch events.

A pod's bind is the watch event that gives it a ``spec.nodeName``, its start the one that makes it ``Running``, its
end the one that makes it ``Succeeded`` or ``Failed`` (exit code and reason from its status), or its deletion
before that (killed, with the reason the Job controller gave). Each is dated by the served clock when the event is
handled; in virtual time the clock cannot move before (the book is one of the pacer's busy probes), so the dates
are the simulated times of the writes. The bookkeeping is :class:`kubeflux.sim.cluster.Cluster`'s: the cores each
pod takes (its :class:`~kubeflux.sim.resourceids.ResourceIds`: ids numbered across the nodes in their order, the
lowest free first), the cores allocated over time (its :class:`~kubeflux.sim.resourceids.Usage`), the jobs'
counters and the queue series; a job ends as it does there (all its pods ended; a ``batch/v1`` Job when its Job
controller says so). A coupled job (the served kubelet holds its pods until the last required one runs) starts
computing at that pod's Running, which is then every waiting pod's compute time in ``pods.csv``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from kubeflux.scheduler.objects import CPU, Node, PodPhase
from kubeflux.sim.apiserver.clock import Clock
from kubeflux.sim.apiserver.follow import Follower
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent
from kubeflux.sim.jobcontroller import Timeline
from kubeflux.sim.jobs import SimJob, job_records, pod_records
from kubeflux.sim.pods import SimPod
from kubeflux.sim.records import RunRecord
from kubeflux.sim.resourceids import ResourceIds, Usage
from kubeflux.sim.workloads.model import JobKind

__all__ = ["ReplayBook"]

Object = dict[str, Any]
_TERMINAL = {"Succeeded": PodPhase.SUCCEEDED, "Failed": PodPhase.FAILED}


class _Replay(Protocol):
    """What the book needs of the replay that owns it."""

    jobs: list[SimJob]

    @property
    def loop(self) -> Timeline: ...

    def finish_job(self, job: SimJob) -> None: ...

    def job_pod_ended(self, job: SimJob) -> None: ...


class ReplayBook:
    """The records of one replay (see the module docstring); follows the pods collection on ``loop``."""

    def __init__(
        self, store: Store, loop: asyncio.AbstractEventLoop, clock: Clock, nodes: list[Node], replay: _Replay
    ) -> None:
        pods = store.registry.find("", "v1", "pods")
        assert pods is not None
        self.store, self.loop, self.clock, self.replay, self.pods_resource = store, loop, clock, replay, pods
        self.node_index = {node.name: index for index, node in enumerate(nodes)}
        self.ids = ResourceIds()
        """The cores' ids, numbered as the simulated cluster numbers them."""
        for node in nodes:
            self.ids.add_node(node.allocatable)
        self.usage = Usage()
        """The cores allocated over time (:attr:`Usage.cores_series`: the run's utilization series)."""
        self.total_cores = sum(node.allocatable.get(CPU, 0) // 1000 for node in nodes)
        self.pods: dict[str, SimPod] = {}
        """uid → record of every replayed pod not yet deleted."""
        self.killing: dict[str, str] = {}
        """``namespace/name`` → why the replay deletes it (its record says so when the deletion is seen)."""
        self.pending_jobs = self.pods_bound = self.events = 0
        self.queue_series: list[tuple[float, int]] = []
        self._follower = Follower(store, loop, [(pods, self._event)])

    @property
    def busy(self) -> bool:
        """Watch events are waiting to be read (the virtual clock must not jump)."""
        return self._follower.busy

    def stop(self) -> None:
        self._follower.stop()

    def track(self, uid: str, sp: SimPod) -> None:
        """Follow the pod ``uid`` (just created by the replay) in ``sp``."""
        self.pods[uid] = sp

    def rejected(self, uid: str, message: str) -> None:
        """A scheduler in the process rejected the pod ``uid`` (it can never run): its job is REJECTED, as
        :meth:`kubeflux.sim.cluster.Cluster.reject` marks it."""
        sp = self.pods.get(uid)
        if sp is None or sp.bound_at is not None:
            return
        job = self.replay.jobs[sp.job_index]
        if not job.rejected_reason:
            job.rejected_reason = message
            self.left_queue(job)

    def _event(self, type_: str, event: WatchEvent) -> None:
        self.events += 1
        sp = self.pods.get(event.obj["metadata"]["uid"])
        if sp is not None:
            self._see(type_, event.obj, sp)

    def _see(self, type_: str, obj: Object, sp: SimPod) -> None:
        if type_ == "DELETED":
            del self.pods[obj["metadata"]["uid"]]
            sp.pod.deleted = True
            if sp.finished_at is None:
                reason = self.killing.pop(sp.pod.key, "Deleted")
                self._end(sp, PodPhase.FAILED, 137, "Error", reason)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node and sp.bound_at is None:
            self._bound(sp, node)
        status = obj.get("status") or {}
        phase = status.get("phase")
        if phase == "Running" and sp.running_at is None and sp.finished_at is None:
            self._running(sp)
        elif phase in _TERMINAL and sp.finished_at is None:
            code, container_reason = _termination(status)
            self._end(sp, _TERMINAL[phase], code, container_reason, str(status.get("reason") or ""))

    # -- what happened -------------------------------------------------------------------------------------------
    def _bound(self, sp: SimPod, node: str) -> None:
        now = self.replay.loop.now
        index = self.node_index.get(node, -1)
        sp.pod.node_name, sp.node_index, sp.bound_at = node, index, now
        self.pods_bound += 1
        job = self.replay.jobs[sp.job_index]
        if job.first_bind is None:
            job.first_bind = now
            if job.rejected_reason:
                job.rejected_reason = ""
            else:
                self.left_queue(job)
        job.last_bind = now
        if index >= 0:
            if sp.cpu >= 1000:
                sp.cores = self.ids.cores.take(index, sp.cpu // 1000)
            self.usage.change(now, sp.cpu, None, 1, 1)

    def _running(self, sp: SimPod) -> None:
        now = self.replay.loop.now
        sp.running_at = now
        sp.pod.phase = PodPhase.RUNNING
        job = self.replay.jobs[sp.job_index]
        job.running_started += 1
        if job.coupled and job.start is None:  # the kubelet holds it until the job's last required pod runs
            job.waiting.append(sp)
            if len(job.waiting) < job.start_quorum:
                return
            job.start = now
            for member in job.waiting:
                member.computing_at = now
            job.waiting = []
            return
        sp.computing_at = now
        if job.start is None and job.running_started >= job.start_quorum:
            job.start = now

    def _end(self, sp: SimPod, phase: PodPhase, code: int, container_reason: str, reason: str) -> None:
        """As :meth:`kubeflux.sim.cluster.Cluster._end`: free the pod's cores, count it in its job."""
        now = self.replay.loop.now
        sp.finished_at, sp.exit_code, sp.container_reason, sp.reason = now, code, container_reason, reason
        sp.pod.phase = phase
        if sp.bound_at is not None and sp.node_index >= 0:
            if sp.cores:
                self.ids.cores.give(sp.node_index, sp.cores)
            self.usage.change(now, sp.cpu, None, -1, -1)
        job = self.replay.jobs[sp.job_index]
        if job.coupled and job.start is None and sp in job.waiting:
            job.waiting.remove(sp)
        job.pod_ended(phase is PodPhase.SUCCEEDED, reason, now, sp.completion_index)
        if job.finish is not None:
            return
        if job.wjob.kind is JobKind.JOB:
            self.replay.job_pod_ended(job)
        elif job.active == 0:
            self.replay.finish_job(job)

    # -- the queue series, as the simulated cluster keeps it ------------------------------------------------------
    def entered_queue(self) -> None:
        self.pending_jobs += 1
        self._sample(self.queue_series, self.pending_jobs)

    def left_queue(self, job: SimJob) -> None:
        self.pending_jobs -= 1
        self._sample(self.queue_series, self.pending_jobs)

    def _sample(self, series: list[tuple[float, int]], value: int) -> None:
        now = self.replay.loop.now
        if series and series[-1][0] == now:
            series[-1] = (now, value)
        else:
            series.append((now, value))

    def run_record(
        self, label: str, workload_name: str, wall_seconds: float, problems: list[str], stopped: str = ""
    ) -> RunRecord:
        return RunRecord(
            scheduler=label,
            workload_name=workload_name,
            jobs=job_records(self.replay.jobs, workload_name),
            total_cores=self.total_cores,
            wall_seconds=wall_seconds,
            pods_bound=self.pods_bound,
            events=self.events,
            utilization_series=list(self.usage.cores_series),
            queue_series=list(self.queue_series),
            problems=list(problems),
            pods=pod_records(self.replay.jobs),
            stopped=stopped,
        )


def _termination(status: Object) -> tuple[int, str]:
    """The exit code and reason of a finished pod's first container (137 and ``Error`` when it has none)."""
    for container in status.get("containerStatuses") or ():
        terminated = ((container or {}).get("state") or {}).get("terminated")
        if isinstance(terminated, dict):
            return int(terminated.get("exitCode", 137)), str(terminated.get("reason") or "")
    return 137, "Error"
