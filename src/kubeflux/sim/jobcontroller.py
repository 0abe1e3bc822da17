"""kube-controller-manager's Job controller for the simulated cluster (``batch/v1`` Jobs).

A Job runs up to ``parallelism`` pods at once until ``completions`` of them succeeded. A failed pod is replaced
after a back-off of :data:`JOB_BACKOFF_BASE` seconds doubled per failure since the last success, capped at
:data:`JOB_BACKOFF_CAP`; the Job fails (``BackoffLimitExceeded``) once more than ``backoffLimit`` pods failed, or
(``DeadlineExceeded``) when it has been active for ``activeDeadlineSeconds``, or (``PodFailurePolicy``) when a
``FailJob`` rule of its ``podFailurePolicy`` matched a failed pod; its running pods are then deleted. A failed pod
an ``Ignore`` rule matched is not counted towards ``backoffLimit`` (:mod:`kubeflux.apiobjects.podfailure`).

The controller acts on the cluster that owns it through :class:`JobHost`, the few public operations any
controller of a real cluster has (the clock, create and delete a pod, end a Job, record an Event), so every change
is a watch event like any other and this module does not import the cluster's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final, Protocol

from kubeflux.sim.clientrate import ClientRate, PacedCreates, TokenBucket
from kubeflux.sim.clock import Callback, Priority
from kubeflux.sim.jobs import SimJob
from kubeflux.sim.pods import Lifecycle, TemplateTiming

JOB_BACKOFF_BASE: Final = 10.0
"""Seconds before the first replacement of a failed Job pod (kube-controller-manager's default)."""
JOB_BACKOFF_CAP: Final = 360.0
"""The back-off never exceeds 6 minutes."""
MAX_POD_CREATE_DELETE_PER_SYNC: Final = 500
"""With a client rate: a sync creates at most this many pods (``MaxPodCreateDeletePerSync``)."""
SYNC_BATCH_SECONDS: Final = 1.0
"""``syncJobBatchPeriod``: a capped sync's Job is synced again this long after its last pod was created."""
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
"""The label and annotation with an Indexed Job's pod's completion index."""


def completed_indexes(done: set[int]) -> str:
    """``status.completedIndexes`` as Kubernetes writes it: ``{1, 2, 3, 5, 7, 8}`` → ``1-3,5,7-8``."""
    ranges: list[list[int]] = []
    for index in sorted(done):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in ranges)


class Timeline(Protocol):
    """The clock and timers a Job controller needs (an :class:`~kubeflux.sim.clock.EventLoop` is one)."""

    @property
    def now(self) -> float:
        """Seconds of simulated time."""
        ...

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        """Run ``callback(payload)`` at ``at``."""
        ...


class JobHost(Protocol):
    """The cluster as its Job controller sees it (:class:`~kubeflux.sim.cluster.Cluster` is one, and so is the
    served cluster's workload replay)."""

    @property
    def loop(self) -> Timeline:
        """The cluster's clock and event queue."""
        ...

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        """Create one of ``job``'s pods from ``timing``, named ``name`` (with its completion ``index``: the
        :data:`COMPLETION_INDEX` label and annotation)."""
        ...

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        """Delete the pod ``key`` now; a running one is killed (exit 137) with ``reason``."""
        ...

    def finish_job(self, job: SimJob) -> None:
        """``job`` has ended."""
        ...

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        """Record a Kubernetes Event about ``obj``."""
        ...


def _resume(resume: Callable[[], None]) -> None:
    resume()


class _Creation:
    """One sync's creations in progress: whether it was capped, whether the Job asked to be synced meanwhile."""

    __slots__ = ("again", "capped")

    def __init__(self, capped: bool) -> None:
        self.capped = capped
        self.again = False


class JobController:
    """The Job controller of one simulated cluster (see the module docstring)."""

    def __init__(self, cluster: JobHost, sync_delay: float = 0.0, rate: ClientRate | None = None) -> None:
        self.cluster = cluster
        self.sync_delay = sync_delay
        """Seconds from a pod's end to the sync that acts on it (kube-controller-manager: 1 s, its
        ``syncJobBatchPeriod``); the pod ends within that window are acted on together."""
        self.bucket = TokenBucket(rate) if rate is not None else None
        """The controller's client's token bucket (None: pods are created at once, as many as a Job lacks)."""
        self._creating: dict[int, _Creation] = {}
        """Job index → its pods being created (with :attr:`bucket`: the creations wait for tokens)."""
        self._deadlines: dict[int, float] = {}
        """Job index → when its ``activeDeadlineSeconds`` falls, counted from its last start: a suspended Job's timer
        stops and starts again when it resumes (Kubernetes resets its ``startTime``), so a timer armed before the
        suspension is void."""

    @classmethod
    def for_lifecycle(cls, cluster: JobHost, lifecycle: Lifecycle) -> JobController:
        """The Job controller ``lifecycle`` describes (its sync delay, its client's rate)."""
        return cls(cluster, lifecycle.job_sync_delay, lifecycle.job_client_rate())

    def start(self, job: SimJob) -> None:
        """A Job was created, or resumed after a suspension (an admission layer held it): arm its
        ``activeDeadlineSeconds`` from now and create its first wave of pods."""
        deadline = job.wjob.active_deadline_seconds
        loop = self.cluster.loop
        if job.succeeded >= job.wjob.completions:  # completions: 0 — complete at once, as kube-controller-manager
            self.cluster.finish_job(job)
            return
        if deadline is not None:
            at = self._deadlines[job.index] = loop.now + deadline
            loop.schedule(at, Priority.RELEASE, self._deadline, job)
        self._fill(job)

    def pod_ended(self, job: SimJob) -> None:
        """One of the Job's pods reached a terminal phase (its counters are already updated). The controller looks
        once every pod ending at this instant has ended: as in a real cluster, where each kubelet reports its own
        pod's end and the controller syncs the Job after, two pods that fail at the same instant both end as they
        did (``Error``, their exit code), rather than the first one's failure deleting the second. With
        :attr:`sync_delay`, that sync comes that much later and covers every pod ending until then."""
        loop = self.cluster.loop
        if job.sync_at < loop.now:
            job.sync_at = loop.now + self.sync_delay
            loop.schedule(job.sync_at, Priority.RELEASE, self._sync, job)

    def _sync(self, job: SimJob) -> None:
        job.sync_at = -1.0  # a pod ending later at this same instant (one of no run time made here) syncs again
        if job.finish is not None or job.held:
            return
        wjob = job.wjob
        if job.fail_message:  # a podFailurePolicy rule FailJob matched a failed pod
            self._fail(job, "PodFailurePolicy")
            self.cluster.record_event("Warning", "PodFailurePolicy", f"{wjob.namespace}/{wjob.name}", job.fail_message)
        elif job.succeeded >= wjob.completions:
            self.cluster.finish_job(job)
        elif job.failed > wjob.backoff_limit:
            self._fail(job, "BackoffLimitExceeded")
        else:
            self._fill(job)

    def _fill(self, job: SimJob) -> None:
        """Create the pods a Job lacks, after the back-off when pods have failed since the last success (none while
        it is suspended: ``held``)."""
        if job.finish is not None or job.held:
            return
        cluster = self.cluster
        now = cluster.loop.now
        if job.fail_streak > 0:
            at = job.last_failure + min(JOB_BACKOFF_BASE * 2 ** (job.fail_streak - 1), JOB_BACKOFF_CAP)
            if at > now:
                if job.fill_at != at:
                    job.fill_at = at
                    cluster.loop.schedule(at, Priority.STAGE, self._fill, job)
                return
        if self.bucket is not None:
            self._paced_fill(job)
            return
        for index in self._missing(job, None):
            self._create(job, index)

    def _missing(self, job: SimJob, cap: int | None) -> list[int | None]:
        """The pods a Job lacks, at most ``cap``: an Indexed Job's by their index (the lowest neither done nor
        running), a NonIndexed Job's as None."""
        wjob = job.wjob
        want = max(min(wjob.parallelism, wjob.completions - job.succeeded) - job.active, 0)
        if cap is not None:
            want = min(want, cap)
        if not wjob.indexed:
            return [None] * want
        done, active = job.indexes_done, job.indexes_active
        free = (i for i in range(wjob.completions) if i not in done and i not in active)
        return list(itertools.islice(free, want))

    def _create(self, job: SimJob, index: int | None) -> None:
        """Create one of the Job's pods (an Indexed Job's named after its index)."""
        wjob = job.wjob
        if job.fail_streak > 0:
            job.retries += 1
        if index is None:
            self.cluster.create_pod(job, job.timings[0], f"{wjob.name}-{job.created}")
        else:
            job.indexes_active.add(index)
            self.cluster.create_pod(job, job.timings[0], f"{wjob.name}-{index}-{job.created}", index)

    def _paced_fill(self, job: SimJob) -> None:
        """:meth:`_fill` with the client's rate: at most :data:`MAX_POD_CREATE_DELETE_PER_SYNC` pods, in slow-start
        batches whose creations wait for their tokens; while they are made the Job is not synced again (the real
        controller's worker is busy with it), and a capped sync's rest comes :data:`SYNC_BATCH_SECONDS` after its
        last pod."""
        creation = self._creating.get(job.index)
        if creation is not None:
            creation.again = True
            return
        indexes = self._missing(job, MAX_POD_CREATE_DELETE_PER_SYNC)
        if not indexes:
            return
        for index in indexes:
            if index is not None:
                job.indexes_active.add(index)  # reserved: a later sync does not pick it
        creation = self._creating[job.index] = _Creation(len(indexes) == MAX_POD_CREATE_DELETE_PER_SYNC)
        loop = self.cluster.loop

        def create(i: int) -> bool:
            if job.finish is not None or job.held:  # the Job ended (or was suspended) meanwhile: the rest are not made
                return False
            index = indexes[i]
            if index is not None:
                job.indexes_active.discard(index)
            self._create(job, index)
            return True

        def at(when: float, resume: Callable[[], None]) -> None:
            loop.schedule(when, Priority.STAGE, _resume, resume)

        def done(ok: bool) -> None:
            del self._creating[job.index]
            if job.finish is not None:
                return
            if creation.capped:
                loop.schedule(loop.now + SYNC_BATCH_SECONDS, Priority.STAGE, self._fill, job)
            elif creation.again:
                self._fill(job)

        PacedCreates(len(indexes), self.bucket, lambda: loop.now, create, at, done).start()

    def _fail(self, job: SimJob, reason: str) -> None:
        """The Job failed (``BackoffLimitExceeded``, ``DeadlineExceeded``, ``PodFailurePolicy``): its active pods are
        deleted."""
        cluster = self.cluster
        job.failed_reason = reason
        cluster.finish_job(job)
        why = reason if reason == "DeadlineExceeded" else "Deleted"
        for sp in [p for p in job.pods if p.finished_at is None]:
            cluster.delete_pod(sp.pod.key, why)

    def _deadline(self, job: SimJob) -> None:
        """The Job's deadline falls, unless it ended, is suspended, or resumed since the timer was armed."""
        if self._deadlines.get(job.index) != self.cluster.loop.now:
            return  # armed before a suspension: void
        del self._deadlines[job.index]
        if job.finish is None and not job.held:
            self._fail(job, "DeadlineExceeded")
            self.cluster.record_event(
                "Warning",
                "DeadlineExceeded",
                f"{job.wjob.namespace}/{job.wjob.name}",
                "Job was active longer than specified deadline",
            )


__all__ = [
    "COMPLETION_INDEX",
    "JOB_BACKOFF_BASE",
    "JOB_BACKOFF_CAP",
    "JobController",
    "JobHost",
    "Timeline",
    "completed_indexes",
]
