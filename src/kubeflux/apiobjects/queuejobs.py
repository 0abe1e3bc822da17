"""The queue as its readers count jobs: one entry per waiting Job, PodGroup or lone pod, as Kueue's and Volcano's users
see their workloads (``kueuectl list workload``, ``vcctl job list``).

A kubeflux scheduler queues a PodGroup as one job but the pods of a ``batch/v1`` Job that has no PodGroup each on
their own (:mod:`kubeflux.scheduler.queueview`: a Job of parallelism 3 is three rows). :func:`queue_by_job` answers
``GET`` :data:`QUEUE_PATH` with those pods gathered under their controlling Job (the pod's ``ownerReferences``,
:attr:`~kubeflux.scheduler.objects.Pod.owner`), and a ``kind`` for each entry (``Job``, ``PodGroup`` or ``Pod``). A
Job's entry is at the place of its first pod in the order tried and takes its state and reason from it; it holds
every waiting pod, the earliest arrival (so the longest wait), the earliest expected start, what all its pods'
reservations hold and their nodes. Positions count the entries from 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from kubeflux.scheduler.objects import ResourceList
from kubeflux.scheduler.queue import PendingQueue
from kubeflux.scheduler.queueview import QueuedJob, rfc3339

__all__ = ["QUEUE_PATH", "queue_by_job", "waiting_jobs"]

QUEUE_PATH: Final = "/kubeflux/queue"
"""Where ``serve``'s operations port and ``cluster serve`` answer :func:`queue_by_job` (``GET``, JSON)."""


def _job_owners(scheduler: object) -> dict[str, str]:
    """``namespace/name`` of each waiting or gated pod of ``scheduler`` whose controlling owner is a Job → the Job's
    ``namespace/name``."""
    queue = getattr(scheduler, "queue", None)
    owners: dict[str, str] = {}
    if isinstance(queue, PendingQueue):
        waiting = [pod for pending in queue.jobs.values() for pod in pending.pods.values()]
        for pod in [*waiting, *queue.gated.values()]:
            kind, _, name = pod.owner.partition("/")
            if kind == "Job" and name:
                owners[pod.key] = f"{pod.namespace}/{name}"
    return owners


def waiting_jobs(queued: Iterable[QueuedJob], owners: Mapping[str, str]) -> list[tuple[str, QueuedJob]]:
    """``queued`` (a scheduler's entries, in the order tried) with the lone pods of one Job (``owners``: pod key →
    Job key) gathered into one entry: ``(kind, entry)`` pairs, numbered from 1 (see the module docstring)."""
    gathered: dict[str, tuple[str, list[QueuedJob]]] = {}
    for entry in queued:
        owner = None if entry.group or len(entry.pods) != 1 else owners.get(entry.pods[0])
        kind = "PodGroup" if entry.group else ("Job" if owner else "Pod")
        key = f"Job {owner}" if owner else f"{kind} {entry.job}"
        gathered.setdefault(key, (kind, []))[1].append(entry)
    out: list[tuple[str, QueuedJob]] = []
    for position, (key, (kind, parts)) in enumerate(gathered.items(), start=1):
        first = parts[0]
        if len(parts) == 1 and kind != "Job":
            out.append((kind, replace(first, position=position)))
            continue
        starts = [part.expected_start for part in parts if part.expected_start is not None]
        reserved: ResourceList = {}
        for part in parts:
            for name, value in part.reserved.items():
                reserved[name] = reserved.get(name, 0) + value
        merged = replace(
            first,
            position=position,
            job=key.split(" ", 1)[1],
            pods=tuple(pod for part in parts for pod in part.pods),
            arrival=min(part.arrival for part in parts),
            waited=max(part.waited for part in parts),
            expected_start=min(starts) if starts else None,
            reason=next((part.reason for part in parts if part.reason), ""),
            reserved=reserved,
            nodes=tuple(sorted({node for part in parts for node in part.nodes})),
        )
        out.append((kind, merged))
    return out


def queue_by_job(schedulers: Iterable[object], now: float, source: str) -> dict[str, Any]:
    """What ``GET`` :data:`QUEUE_PATH` answers: ``now`` in seconds and RFC 3339, ``source`` (``serve`` or
    ``cluster serve``), each scheduler's name and jobs (:meth:`~kubeflux.scheduler.queueview.QueuedJob.to_json`, one
    entry per waiting job, :func:`waiting_jobs`, each with its ``kind``), null for one that keeps no queue it can show
    (a baseline: ``queued`` missing)."""
    listed: list[dict[str, Any]] = []
    for scheduler in schedulers:
        queued = getattr(scheduler, "queued", None)
        jobs = None
        if queued is not None:
            jobs = [{**job.to_json(), "kind": kind} for kind, job in waiting_jobs(queued(now), _job_owners(scheduler))]
        listed.append({"name": str(getattr(scheduler, "name", "")), "jobs": jobs})
    return {"now": now, "nowTime": rfc3339(now), "source": source, "schedulers": listed}
