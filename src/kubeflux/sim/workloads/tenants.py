"""Which Kueue LocalQueue a job goes to, besides the ``kueue.x-k8s.io/queue-name`` label its manifest gives.

**A namespace's default LocalQueue** (:func:`default_local_queues`): a ``batch/v1`` Job without the label, in a
namespace that has a LocalQueue named ``default``, goes to that queue, as Kueue's LocalQueueDefaulting sets the
label (beta and on by default since Kueue v0.12, GA in v0.17) on the jobs of its enabled integrations, of which
``batch/job`` is one by default, and so is an AppWrapper (all its components). Plain pods (Kueue's ``pod``
integration is off by default), coscheduling's PodGroups (no Kueue integration) and trace jobs keep what they name.
So a file of Kueue objects alone puts a workload of Jobs behind Kueue: ``simulate --preset seed004-jobs -w
examples/workloads/kueue-seed004.yaml``.

**Trace users as tenants**: ``simulate --user-queues tenant-a,tenant-b`` puts each trace job in the LocalQueue
of its user's tenant, as a cluster shared by teams gives each team a LocalQueue (Kueue's multi-tenancy setup).

The rule, for ``n`` queues: the user whose id is the number ``u`` goes to queue ``u mod n`` (a trace's user ids are
small numbers, so the tenants split the users evenly and the split is read off the id); a user named otherwise
goes to the queue its name's CRC-32 picks; a job whose user the trace does not know goes to the first queue. Two
traces merged share their user ids: user 3 of both is one tenant. Jobs of the Kubernetes kinds keep the
``kueue.x-k8s.io/queue-name`` their manifests give (or none). The LocalQueues and the ClusterQueues behind them come
from a workload file of Kueue objects given beside the trace (``examples/workloads/kueue-tenants.yaml``). Asked on
the command line, a mistake is refused before the run: a queue the run does not define (or whose ClusterQueue it
does not), a workload without trace jobs, or trace jobs none of which names a user (all would go to one queue).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import replace

from kubeflux.apiobjects.rules import dns_subdomain_problem
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob

__all__ = [
    "DEFAULT_LOCAL_QUEUE",
    "TRACE_NAMESPACE",
    "default_local_queues",
    "parse_queues",
    "queue_of_user",
    "queues_by_user",
]

DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue name that takes a namespace's unlabelled jobs (Kueue's LocalQueueDefaulting)."""

TRACE_NAMESPACE = "default"
"""The namespace of a trace's jobs, where their LocalQueues must be."""


def parse_queues(text: str, option: str = "--user-queues") -> tuple[str, ...]:
    """``"tenant-a, tenant-b"`` → ``("tenant-a", "tenant-b")``; ValueError naming ``option`` and the bad name."""
    names = tuple(part.strip() for part in text.split(","))
    if not any(names):
        raise ValueError(f"{option}: name at least one LocalQueue, e.g. tenant-a,tenant-b")
    for name in names:
        problem = dns_subdomain_problem(name) or ("must be no more than 63 characters" if len(name) > 63 else None)
        if problem is not None:  # a LocalQueue's name, and the value of the queue-name label
            raise ValueError(f"{option}: {name!r} is not a LocalQueue name: {problem}")
    if len(set(names)) != len(names):
        raise ValueError(f"{option}: a LocalQueue is named twice in {text!r}")
    return names


def queue_of_user(user: str, queues: Sequence[str]) -> str:
    """The LocalQueue of ``user`` among ``queues`` (the module docstring's rule)."""
    if not user:
        return queues[0]
    index = int(user) if user.isascii() and user.isdigit() else zlib.crc32(user.encode())
    return queues[index % len(queues)]


def queues_by_user(workload: Workload, queues: Sequence[str]) -> Workload:
    """``workload`` with each trace job in the LocalQueue of its user's tenant (its other jobs as they were).
    ValueError when the workload defines no LocalQueue of one of ``queues`` in the trace jobs' namespace (its jobs
    would wait for ever, as Kueue leaves them: asked on the command line, it is a mistake to say so at once)."""
    defined = workload.kueue.local_queues if workload.kueue is not None else {}
    missing = [name for name in queues if f"{TRACE_NAMESPACE}/{name}" not in defined]
    if missing:
        have = ", ".join(sorted(defined)) or "none: give a --workload file of Kueue objects beside the trace"
        raise ValueError(
            f"--user-queues: no LocalQueue {', '.join(missing)} in namespace {TRACE_NAMESPACE} (LocalQueues: {have})"
        )
    cluster_queues = workload.kueue.cluster_queues if workload.kueue is not None else {}
    for name in queues:
        target = defined[f"{TRACE_NAMESPACE}/{name}"].cluster_queue
        if target not in cluster_queues:
            raise ValueError(f"--user-queues: LocalQueue {name} leads to ClusterQueue {target}, which is not defined")
    trace = [job for job in workload.jobs if job.kind is JobKind.TRACE]
    if not trace:
        raise ValueError("--user-queues: the workload has no trace jobs (SWF, Batsim) to put in LocalQueues")
    if not any(job.user for job in trace):
        raise ValueError(
            f"--user-queues: no trace job names a user (Batsim workloads and synthetic jobs do not), so all "
            f"{len(trace):,} would go to {queues[0]}"
        )
    jobs = [
        replace(job, queue_name=queue_of_user(job.user, queues)) if job.kind is JobKind.TRACE else job
        for job in workload.jobs
    ]
    return replace(workload, jobs=jobs)


def default_local_queues(workload: Workload) -> Workload:
    """``workload`` with each Job that names no LocalQueue, in a namespace that has one named ``default``, in that
    queue; the workload itself when no job changes."""
    if workload.kueue is None:
        return workload
    defaults = {q.namespace for q in workload.kueue.local_queues.values() if q.name == DEFAULT_LOCAL_QUEUE}

    def defaulted(job: WorkloadJob) -> bool:
        wrapped = job.app_wrapper is not None  # an AppWrapper, Kueue's integration on by default, is defaulted too
        return (wrapped or job.kind is JobKind.JOB) and not job.queue_name and job.namespace in defaults

    if not defaults or not any(map(defaulted, workload.jobs)):
        return workload
    jobs = [replace(job, queue_name=DEFAULT_LOCAL_QUEUE) if defaulted(job) else job for job in workload.jobs]
    return replace(workload, jobs=jobs)
