"""The served cluster's Job controller: kube-controller-manager's, on the store (``cluster serve``'s ``job``
controller; ``--no-controllers job`` turns it off so that a real kube-controller-manager runs Jobs instead).

It follows Jobs and pods on the server's loop as an informer would, and syncs a Job (:func:`~kubeflux.sim.apiserver.
jobsync.sync_job`, the decisions) whenever it or one of the pods it controls changes, or when a timer it asked for
(the pod-failure back-off, ``activeDeadlineSeconds``) comes. A sync's plan is applied through the store as a
controller's requests would be: pods created with ``generateName`` at kube-controller-manager's client rate (20 a
second after a burst of 30; :mod:`kubeflux.sim.clientrate`), deleted with their grace period, their
``batch.kubernetes.io/job-tracking`` finalizer removed with a metadata update, the Job's status written through
``jobs/status``, Events recorded as ``job-controller``. A pod's Job is its controller ``ownerReference``.

It also does the TTL-after-finished controller's work: a finished Job with ``ttlSecondsAfterFinished`` is deleted
(with its pods, ``propagationPolicy: Foreground``) that many seconds after it finished.

Jobs that a workload replay created are run by the simulator's Job controller
(:class:`kubeflux.sim.apiserver.replay.WorkloadReplay`), so that a replay gives ``kubeflux simulate``'s schedule:
``skip`` names them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver.clock import Clock, Timer
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.jobsync import (
    SYNC_BATCH_SECONDS,
    TRACKING_FINALIZER,
    Backoff,
    JobPlan,
    finished_condition,
    sync_job,
)
from kubeflux.sim.apiserver.kubelet import record_event
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent
from kubeflux.sim.clientrate import KCM_CLIENT_RATE, ClientRate, PacedCreates, TokenBucket
from kubeflux.sim.clock import Priority

__all__ = ["JobController", "api_backoff"]

Object = dict[str, Any]
_COMPONENT = "job-controller"
MAX_API_BACKOFF_SECONDS = 60.0
"""``MaxJobApiBackOff``: the longest wait before a Job whose syncs keep failing (a create refused) is synced again;
the wait starts at ``DefaultJobApiBackOff`` (1 s) and doubles per failure (the controller's rate-limited queue)."""


def api_backoff(failures: int) -> float:
    """Seconds before a Job's sync is retried after ``failures`` failed ones in a row: 1 s doubled per failure, at
    most :data:`MAX_API_BACKOFF_SECONDS`. The exponent is capped: a Job refused by a full store fails a sync on every
    event of its pods, and 2.0 ** 1024 overflowed (the controller's callback died, and Jobs synced no more)."""
    return min(SYNC_BATCH_SECONDS * 2.0 ** min(failures - 1, 32), MAX_API_BACKOFF_SECONDS)


def _controller_uid(pod: Object) -> str | None:
    for ref in pod["metadata"].get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "Job":
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


class _Creation:
    """A sync's creations in progress: the timer of the next one, whether the Job was touched meanwhile."""

    __slots__ = ("again", "timer")

    def __init__(self) -> None:
        self.timer: Timer | None = None
        self.again = False

    def cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


class JobController:
    """Runs every ``batch/v1`` Job of ``store`` that ``skip`` does not name (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        clock: Clock,
        skip: Callable[[str], bool] = lambda uid: False,
        rate: ClientRate | None = KCM_CLIENT_RATE,
    ) -> None:
        pods, jobs = served(store, ("", "v1", "pods"), ("batch", "v1", "jobs"))
        self.store, self.loop, self.clock, self.skip = store, loop, clock, skip
        self.pods_resource, self.jobs_resource = pods, jobs
        self._jobs: dict[str, tuple[str, str]] = {}
        """uid → (namespace, name) of every Job followed."""
        self._pods: dict[str, dict[str, Object]] = {}
        """Job uid → pod uid → the latest version of each pod it controls."""
        self._owner: dict[str, str] = {}
        """pod uid → its Job's uid."""
        self._backoff: dict[str, Backoff] = {}
        self._timers: dict[str, tuple[float, Timer]] = {}
        """Job uid → (when, the timer) of its next requested sync."""
        self._ttl: dict[str, Timer] = {}
        self._paced: set[str] = set()
        """Jobs whose last sync was capped: the events of their pods and status wait for the timer
        (``syncJobBatchPeriod``); a new generation of the Job does not."""
        self._generation: dict[str, Any] = {}
        """Job uid → the ``metadata.generation`` last seen."""
        self._create_failures: dict[str, int] = {}
        """Job uid → syncs in a row that failed to create a pod (a full store: the API back-off grows)."""
        self.bucket = TokenBucket(rate) if rate is not None else None
        """The controller's client's token bucket (kube-controller-manager's 20 requests a second after a burst of
        30, charged with pod creations: :mod:`kubeflux.sim.clientrate`); None: a sync's pods are created at once."""
        self._creating: dict[str, _Creation] = {}
        """Job uid → the sync whose pods are being created: the Job is not synced again until they are (the real
        controller's worker is busy with it)."""
        follow = [(jobs, self._job_watched), (pods, self._pod_watched)]
        self.reconciler: Reconciler[str] = Reconciler(
            store, loop, follow, self._sync_due, order=lambda uid: self._jobs.get(uid, ("", ""))
        )
        """Follows Jobs and pods; syncs each Job (uid) their events or its timers touched."""
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()
        for creation in self._creating.values():
            creation.cancel()
        for _, timer in self._timers.values():
            timer.cancel()
        for timer in self._ttl.values():
            timer.cancel()

    # -- the informers ---------------------------------------------------------------------------------------
    def _job_watched(self, type_: str, event: WatchEvent) -> None:
        self._job_event(type_, event.obj)

    def _pod_watched(self, type_: str, event: WatchEvent) -> None:
        self._pod_event(type_, event.obj)

    def _sync_due(self, uid: str) -> None:
        """After a batch of events: sync a Job it touched, unless its last sync was capped (its timer will) or its
        pods are being created (it is synced again once they are)."""
        if uid in self._paced:
            return
        creation = self._creating.get(uid)
        if creation is not None:
            creation.again = True
        else:
            self._sync(uid)

    def _job_event(self, type_: str, job: Object) -> None:
        meta = job["metadata"]
        uid = meta["uid"]
        if self.skip(uid):
            return
        if type_ == "DELETED":
            self._forget(uid)
            return
        self._jobs[uid] = (meta["namespace"], meta["name"])
        generation = meta.get("generation")
        if self._generation.get(uid) != generation:
            self._generation[uid] = generation
            self._paced.discard(uid)  # a change of the spec is synced at once, one of the status batched
        self.reconciler.add(uid)

    def _pod_event(self, type_: str, pod: Object) -> None:
        uid = pod["metadata"]["uid"]
        before = self._owner.pop(uid, None)
        if before is not None:
            self._pods.get(before, {}).pop(uid, None)
            self.reconciler.add(before)
        job = _controller_uid(pod)
        if job is None or type_ == "DELETED" or self.skip(job):
            return
        self._owner[uid] = job
        self._pods.setdefault(job, {})[uid] = pod
        if job in self._jobs:
            self.reconciler.add(job)
        elif TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ()):
            self._unfinalize(pod["metadata"]["namespace"], pod["metadata"]["name"])  # its Job is gone

    def _forget(self, uid: str) -> None:
        """A Job was deleted: its pods keep no tracking finalizer, its timers go."""
        self._jobs.pop(uid, None)
        self._backoff.pop(uid, None)
        self.reconciler.discard(uid)
        self._paced.discard(uid)
        self._generation.pop(uid, None)
        self._create_failures.pop(uid, None)
        creation = self._creating.pop(uid, None)
        if creation is not None:
            creation.cancel()
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer[1].cancel()
        ttl = self._ttl.pop(uid, None)
        if ttl is not None:
            ttl.cancel()
        for pod in list(self._pods.get(uid, {}).values()):
            if TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or ()):
                self._unfinalize(pod["metadata"]["namespace"], pod["metadata"]["name"])

    # -- one sync --------------------------------------------------------------------------------------------
    def _sync(self, uid: str) -> None:
        key = self._jobs.get(uid)
        if key is None:
            return
        try:
            job = self.store.get(self.jobs_resource, *key)
        except ApiError:
            return
        if job["metadata"]["uid"] != uid:
            return
        pods = sorted(self._pods.get(uid, {}).values(), key=lambda p: p["metadata"]["name"])
        plan = sync_job(job, pods, self.store.clock(), self._backoff.get(uid, Backoff()))
        self._backoff[uid] = plan.backoff
        if plan.paced:
            self._paced.add(uid)
        self._apply(job, plan)

    def _apply(self, job: Object, plan: JobPlan) -> None:
        """Apply a sync's plan: its pods are created first (paced by the client's rate: the rest of the plan
        follows once they are, as the real controller's sync writes the status after its creations)."""
        uid = job["metadata"]["uid"]
        if not plan.create:
            self._apply_rest(job, plan, 0.0)
            return
        namespace, pods, started = job["metadata"]["namespace"], plan.create, self.store.clock()
        creation = _Creation()

        def create(i: int) -> bool:
            try:
                created = self.store.create(self.pods_resource, namespace, pods[i])
            except ApiError as exc:
                self._event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
                return False
            self._event(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
            return True

        def at(when: float, resume: Callable[[], None]) -> None:
            creation.timer = self.clock.call_later(self.loop, when - self.store.clock(), Priority.STAGE, resume)

        def done(ok: bool) -> None:
            if self._creating.pop(uid, None) is not creation:
                return  # the Job went while its pods were being created
            if ok:
                self._create_failures.pop(uid, None)
            else:  # the failed sync is retried: DefaultJobApiBackOff (1 s) doubled per failure, at most 60 s
                failures = self._create_failures[uid] = self._create_failures.get(uid, 0) + 1
                self._requeue(uid, api_backoff(failures))
            self._apply_rest(job, plan, self.store.clock() - started)
            if creation.again and not plan.paced and uid in self._jobs:
                self.reconciler.add(uid)
                self.reconciler.wake()

        self._creating[uid] = creation
        PacedCreates(len(pods), self.bucket, self.store.clock, create, at, done).start()

    def _apply_rest(self, job: Object, plan: JobPlan, elapsed: float) -> None:
        """The plan after its creations, which took ``elapsed`` seconds: deletions, the status writes, Events,
        the next sync (a capped sync's comes :data:`SYNC_BATCH_SECONDS` after its last pod)."""
        meta = job["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        for pod_name, unfinalize_first in plan.delete:
            if unfinalize_first:
                self._unfinalize(namespace, pod_name)
            try:
                self.store.delete(self.pods_resource, namespace, pod_name)
            except ApiError:
                continue
            self._event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
        if plan.tracking_status is not None:
            self._write_status(namespace, name, plan.tracking_status)
        for pod_name in plan.unfinalize:
            self._unfinalize(namespace, pod_name)
        if plan.status is not None:
            self._write_status(namespace, name, plan.status)
        for type_, reason, message in plan.events:
            self._event(job, type_, reason, message)
        if plan.requeue_after is not None:
            self._requeue(uid, max(plan.requeue_after - elapsed, 0.0))
        if plan.paced:
            self._requeue(uid, SYNC_BATCH_SECONDS)
        final = plan.status if plan.status is not None else plan.tracking_status
        self._arm_ttl({**job, "status": final} if final is not None else job)

    def _write_status(self, namespace: str, name: str, status: Object) -> None:
        with contextlib.suppress(ApiError):
            current = self.store.get(self.jobs_resource, namespace, name)
            self.store.update(
                self.jobs_resource, namespace, name, {**current, "status": status}, "status", trusted=True
            )

    def _unfinalize(self, namespace: str, name: str) -> None:
        """Remove the tracking finalizer of a pod (a metadata update; a pod already gone is no error)."""
        with contextlib.suppress(ApiError):
            pod = self.store.get(self.pods_resource, namespace, name)
            finalizers = [f for f in pod["metadata"].get("finalizers") or () if f != TRACKING_FINALIZER]
            if len(finalizers) == len(pod["metadata"].get("finalizers") or ()):
                return
            meta = {**pod["metadata"], "finalizers": finalizers}
            if not finalizers:
                meta.pop("finalizers")
            self.store.update(self.pods_resource, namespace, name, {**pod, "metadata": meta}, trusted=True)

    def _event(self, job: Object, type_: str, reason: str, message: str) -> None:
        involved = {"apiVersion": "batch/v1", "kind": "Job", "metadata": job["metadata"]}
        record_event(self.store, job["metadata"]["namespace"], involved, type_, reason, message, _COMPONENT)

    # -- timers ----------------------------------------------------------------------------------------------
    def _requeue(self, uid: str, after: float) -> None:
        at = self.store.clock() + after
        current = self._timers.get(uid)
        if current is not None:
            if current[0] <= at:
                return
            current[1].cancel()
        timer = self.clock.call_later(self.loop, after, Priority.STAGE, self._timer_sync, uid)
        self._timers[uid] = (at, timer)

    def _timer_sync(self, uid: str) -> None:
        self._timers.pop(uid, None)
        self._paced.discard(uid)
        if uid in self._jobs:
            self.reconciler.add(uid)
            self.reconciler.wake()

    def _arm_ttl(self, job: Object) -> None:
        """The TTL-after-finished controller: delete a finished Job ``ttlSecondsAfterFinished`` after its end."""
        uid = job["metadata"]["uid"]
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        kind = finished_condition(job)
        if not isinstance(ttl, int) or not kind or uid in self._ttl:
            return
        ended = next(
            (c.get("lastTransitionTime") for c in job["status"].get("conditions") or () if c.get("type") == kind), None
        )
        try:
            left = parse_timestamp(ended) + ttl - self.store.clock() if isinstance(ended, str) else float(ttl)
        except ValueError:
            left = float(ttl)
        meta = job["metadata"]
        self._ttl[uid] = self.clock.call_later(
            self.loop, left, Priority.STAGE, self._expire, meta["namespace"], meta["name"], uid
        )

    def _expire(self, namespace: str, name: str, uid: str) -> None:
        self._ttl.pop(uid, None)
        with contextlib.suppress(ApiError):
            self.store.delete(self.jobs_resource, namespace, name, propagation="Foreground", uid=uid)
