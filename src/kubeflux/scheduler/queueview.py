"""A read-only view of a scheduler's queue, for people (``kubeflux queue``) and programs (its JSON).

:func:`queue_snapshot` copies what :class:`~kubeflux.scheduler.queue.PendingQueue` holds into plain values, in
the order the scheduler tries the jobs (priority, arrival, first sight), as Slurm's ``squeue`` lists its pending
jobs: for each job its pods, priority, how long it has waited, the start its reservation plans (the expected start
written on its pods), the reason it waits (the message its pods were last told, kube-scheduler's form) and what
its reservation holds. It changes nothing; a shell calls it on the thread that owns the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubeflux.scheduler.messages import GATED_MESSAGE, rfc3339
from kubeflux.scheduler.objects import Pod, ResourceList
from kubeflux.scheduler.queue import PendingJob, PendingQueue
from kubeflux.scheduler.units import format_quantity

__all__ = ["QueuedJob", "queue_snapshot", "rfc3339"]


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """One waiting job (a lone pod, or a pod group's waiting members), as the scheduler last decided about it."""

    position: int
    """1 for the job tried first."""
    job: str
    """``namespace/name`` of the pod group, or of the lone pod."""
    group: bool
    """Whether :attr:`job` names a pod group."""
    pods: tuple[str, ...]
    """``namespace/name`` of its waiting pods, in the order seen."""
    priority: int
    arrival: float
    """When it arrived (the PodGroup's creation, else its first pod's), in seconds on the scheduler's clock."""
    waited: float
    """Seconds from :attr:`arrival` to the snapshot."""
    state: str
    """``reserved`` (a reservation holds its start), ``waiting`` (tried; no reservation), ``backing off`` (a gang
    past its ``scheduleTimeoutSeconds``), ``incomplete`` (a group short of ``minMember`` pods or of its
    PodGroup), ``new`` (not tried yet) or ``gated`` (its pods still have ``spec.schedulingGates``: listed after
    the queue, as kube-scheduler keeps them out of it)."""
    expected_start: float | None
    """When its reservation lets it start (seconds on the scheduler's clock), None without one."""
    reason: str
    """Why it waits: the message its pods were last told (empty before the first pass that tried it)."""
    reserved: ResourceList
    """What its reservation holds in all (the requests of the pods it holds: ``cpu`` in millicores, bytes …);
    empty without a reservation."""
    nodes: tuple[str, ...]
    """The nodes its reservation holds, where the scheduler knows them (empty when the engine planned the start on
    its own, without naming nodes)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON object; times in seconds and as RFC 3339 (``expectedStartTime``), requests as quantities."""
        start = self.expected_start
        return {
            "position": self.position,
            "job": self.job,
            "group": self.group,
            "pods": list(self.pods),
            "priority": self.priority,
            "arrival": self.arrival,
            "waitedSeconds": round(self.waited, 3),
            "state": self.state,
            "expectedStart": start,
            "expectedStartTime": None if start is None else rfc3339(start),
            "reason": self.reason,
            "reserved": {name: format_quantity(name, value) for name, value in sorted(self.reserved.items())},
            "nodes": list(self.nodes),
        }


def _state(queue: PendingQueue, job: PendingJob, now: float) -> str:
    if queue.missing_members(job):
        return "incomplete"
    if job.expected_start is not None:
        return "reserved"
    if job.retry_at > now:
        return "backing off"
    return "waiting" if job.told else "new"


def _reserved(job: PendingJob) -> tuple[ResourceList, tuple[str, ...]]:
    """The requests and nodes the job's reservation holds (none without one)."""
    if job.expected_start is None:
        return {}, ()
    total: ResourceList = {}
    for uid, pod in job.pods.items():
        if uid in job.left_out:
            continue
        for name, value in pod.requests.items():
            total[name] = total.get(name, 0) + value
    nodes = {hold.node for hold in job.holds}
    nodes.update(job.assigned.values())
    kept = job.kept
    if kept is not None and kept.jobid in job.reservations:
        nodes.update(node for node, _ in kept.per_node)
    return total, tuple(sorted(nodes))


def queue_snapshot(queue: PendingQueue, now: float) -> list[QueuedJob]:
    """The jobs of ``queue`` in the order they are tried, as they stand at ``now`` (see the module docstring)."""
    out: list[QueuedJob] = []
    for position, job in enumerate(queue.ordered(), start=1):
        told = [said[0] for uid, said in job.told.items() if uid in job.pods and said[0]]
        reserved, nodes = _reserved(job)
        out.append(
            QueuedJob(
                position=position,
                job=job.key,
                group=job.group is not None,
                pods=tuple(pod.key for pod in job.pods.values()),
                priority=job.priority,
                arrival=job.arrival,
                waited=max(0.0, now - job.arrival),
                state=_state(queue, job, now),
                expected_start=job.expected_start,
                reason=told[0] if told else "",
                reserved=reserved,
                nodes=nodes,
            )
        )
    gated: dict[str, list[Pod]] = {}
    for pod in queue.gated.values():
        group = pod.group
        gated.setdefault(pod.key if group is None else group, []).append(pod)
    for position, (key, pods) in enumerate(sorted(gated.items()), start=len(out) + 1):
        arrival = min(pod.creation_time for pod in pods)
        gates = sorted({gate for pod in pods for gate in pod.scheduling_gates})
        out.append(
            QueuedJob(
                position=position,
                job=key,
                group=pods[0].group is not None,
                pods=tuple(pod.key for pod in pods),
                priority=max(pod.priority for pod in pods),
                arrival=arrival,
                waited=max(0.0, now - arrival),
                state="gated",
                reason=f"{GATED_MESSAGE} ({', '.join(gates)})",
                expected_start=None,
                reserved={},
                nodes=(),
            )
        )
    return out
