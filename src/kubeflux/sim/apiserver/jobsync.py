"""One sync of a ``batch/v1`` Job, as kube-controller-manager v1.36's Job controller does it
(``pkg/controller/job/job_controller.go``, ``syncJob``), as a pure function: the Job, its pods and the time go in,
a :class:`JobPlan` (pods to create and delete, finalizers to remove, the statuses to write, events, when to look
again) comes out. The shell that reads the store and applies the plan is :mod:`kubeflux.sim.apiserver.jobs`; what the
controller reads of a pod, and the pods it makes, are :mod:`kubeflux.sim.apiserver.jobpods`.

What a sync decides, in the controller's order:

* counts: ``active`` (not finished, not being deleted), ``ready`` (active with ``Ready=True``), ``terminating``
  (being deleted, not finished); pods still carrying the ``batch.kubernetes.io/job-tracking`` finalizer that
  finished are new successes or failures (a pod deleted before it finished is a failure);
* ``startTime`` once the Job is not suspended; the pod-failure back-off (10 s doubled per failure since the last
  success, at most 10 minutes, from the last failure's finish time);
* a finish: a failed pod that a ``podFailurePolicy`` rule ``FailJob`` matches (``PodFailurePolicy``, the rule's
  message), ``failed > backoffLimit`` (``BackoffLimitExceeded``; a failure an ``Ignore`` rule matches is not
  counted, :mod:`kubeflux.apiobjects.podfailure`) or ``activeDeadlineSeconds`` since ``startTime``
  (``DeadlineExceeded``) give ``FailureTarget`` and delete the active pods; otherwise the pods are
  managed: a suspended Job's are deleted, more than wanted are deleted (not ready, unscheduled, pending first),
  fewer are created (after the back-off), at most 500 created or deleted a sync (``MaxPodCreateDeletePerSync``;
  the next sync of a capped Job comes a second later, ``syncJobBatchPeriod``), in slow-start batches of 1, 2, 4, …
  that stop at a failed create, from the template with ``generateName`` ``<job>-`` (``<job>-<index>-``
  for an Indexed Job, whose pods carry their index as label and annotation, the ``JOB_COMPLETION_INDEX`` variable
  and the hostname ``<job>-<index>``); wanted = ``min(parallelism, completions - succeeded)``, or with no
  ``completions`` ``parallelism`` until one pod succeeded; enough successes and no active pod give
  ``SuccessCriteriaMet``; ``Suspended`` True/False with ``JobSuspended``/``JobResumed`` (a resume resets
  ``startTime``);
* tracking: finished pods are put in ``uncountedTerminatedPods`` (first status write), their finalizers removed,
  then counted in ``succeeded``/``failed`` (second write); the terminal condition (``Complete`` with
  ``completionTime``, or ``Failed``) follows its interim one once nothing is uncounted or terminating.

With ``podReplacementPolicy: Failed`` (implied by a ``podFailurePolicy``) a pod counts as failed once it is
``Failed``, not when its deletion starts, and terminating pods are not replaced until they ended.

Not modelled: ``successPolicy``, ``backoffLimitPerIndex`` (and so ``FailIndex``, which counts), ``managedBy``,
restarts under ``restartPolicy: OnFailure``, adoption of orphan pods that match
the selector, and the controller's one-second batching of pod events (a sync here follows the event at once).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.apiobjects.podfailure import PodFailurePolicy, failed_pod_of
from kubeflux.sim.apiserver import jobpods
from kubeflux.sim.apiserver.jobpods import TRACKING_FINALIZER
from kubeflux.sim.jobcontroller import completed_indexes

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "TRACKING_FINALIZER",
    "Backoff",
    "JobPlan",
    "finished_condition",
    "sync_job",
]

Object = dict[str, Any]

BACKOFF_BASE = 10.0
"""Seconds before the first replacement of a failed pod (``DefaultJobPodFailureBackOff``)."""
BACKOFF_CAP = 600.0
"""The back-off never exceeds 10 minutes (``MaxJobPodFailureBackOff``)."""
MAX_POD_CREATE_DELETE_PER_SYNC = 500
"""A sync creates or deletes at most this many pods (``MaxPodCreateDeletePerSync``); the rest wait for a later one."""
SYNC_BATCH_SECONDS = 1.0
"""``syncJobBatchPeriod``: a Job whose sync was capped is synced again this long after, not at its pods' events."""
_TERMINAL = ("Succeeded", "Failed")
_COMPLETED = ("CompletionsReached", "Reached expected number of succeeded pods")
_FAILURES = {
    "BackoffLimitExceeded": "Job has reached the specified backoff limit",
    "DeadlineExceeded": "Job was active longer than specified deadline",
}


@dataclass(slots=True)
class Backoff:
    """The controller's memory of a Job's failures: how many pods failed since the last success, and when the
    last one finished (seconds)."""

    failures: int = 0
    last_failure: float | None = None

    def remaining(self, now: float) -> float:
        """Seconds before a replacement pod may be created."""
        if self.failures == 0 or self.last_failure is None:
            return 0.0
        delay: float = min(BACKOFF_BASE * 2.0 ** min(self.failures - 1, 32), BACKOFF_CAP)
        return max(0.0, delay - (now - self.last_failure))


@dataclass(slots=True)
class JobPlan:
    """What one sync does, applied in this order by the shell."""

    create: list[Object] = field(default_factory=list)
    """Pods to create (``generateName`` set)."""
    delete: list[tuple[str, bool]] = field(default_factory=list)
    """(pod name, remove its finalizer first): pods to delete."""
    tracking_status: Object | None = None
    """The status with newly finished pods in ``uncountedTerminatedPods`` (None: no write needed)."""
    unfinalize: list[str] = field(default_factory=list)
    """Pods whose tracking finalizer goes once that status is written."""
    status: Object | None = None
    """The status after the finalizers went (None: unchanged)."""
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) Events about the Job."""
    requeue_after: float | None = None
    """Sync again this many seconds from now (back-off, deadline)."""
    paced: bool = False
    """The sync was capped at :data:`MAX_POD_CREATE_DELETE_PER_SYNC`: the next one comes :data:`SYNC_BATCH_SECONDS`
    after its last pod was made (the shell's timer), not at the events of the pods this one made or deleted."""
    backoff: Backoff = field(default_factory=Backoff)


def _conditions(status: Object) -> list[Object]:
    return [c for c in status.get("conditions") or () if isinstance(c, dict)]


def _condition(status: Object, kind: str) -> Object | None:
    return next((c for c in _conditions(status) if c.get("type") == kind and c.get("status") == "True"), None)


def finished_condition(job: Object) -> str:
    """``Complete`` or ``Failed`` when the Job has finished, else ``""``."""
    status = job.get("status") or {}
    return next((kind for kind in ("Complete", "Failed") if _condition(status, kind)), "")


def _new_condition(kind: str, status: str, reason: str, message: str, now: str) -> Object:
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _ensure(conditions: list[Object], kind: str, status: str, reason: str, message: str, now: str) -> bool:
    """``ensureJobConditionStatus``: set or append the condition (a False one is never appended); True if changed."""
    for index, condition in enumerate(conditions):
        if condition.get("type") == kind:
            if (condition.get("status"), condition.get("reason"), condition.get("message")) == (
                status,
                reason,
                message,
            ):
                return False
            conditions[index] = _new_condition(kind, status, reason, message, now)
            return True
    if status == "False":
        return False
    conditions.append(_new_condition(kind, status, reason, message, now))
    return True


def _next_backoff(before: Backoff, succeeded: list[Object], failed: list[Object]) -> Backoff:
    """``newBackoffRecord``: a success resets the count to the failures that finished after it."""
    if not failed:
        return Backoff() if succeeded else Backoff(before.failures, before.last_failure)
    failure_times = sorted(jobpods.finished_at(p) for p in failed)
    if not succeeded:
        return Backoff(before.failures + len(failed), failure_times[-1])
    last_success = max(jobpods.finished_at(p) for p in succeeded)
    later = [at for at in failure_times if at > last_success]
    return Backoff(len(later), later[-1] if later else None)


def _parse_indexes(text: str, completions: int) -> set[int]:
    done: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        try:
            done.update(i for i in range(int(first), int(last or first) + 1) if i < completions)
        except ValueError:
            continue
    return done


class _Sync:
    """The state of one sync (``syncJobCtx``)."""

    def __init__(self, job: Object, pods: list[Object], now: float, backoff: Backoff) -> None:
        self.job, self.now, self.stamp = job, now, format_timestamp(float(int(now)))
        self.spec: Object = job.get("spec") or {}
        self.status: Object = copy.deepcopy(job.get("status") or {})
        self.pods = pods
        self.plan = JobPlan()
        self.suspended = bool(self.spec.get("suspend"))
        self.policy = PodFailurePolicy.from_spec(self.spec.get("podFailurePolicy"))
        self.only_failed = self.policy is not None or self.spec.get("podReplacementPolicy") == "Failed"
        """``onlyReplaceFailedPods``: a pod counts as failed once Failed, and terminating pods are not replaced."""
        self.indexed = self.spec.get("completionMode") == "Indexed"
        completions = self.spec.get("completions")
        self.completions: int | None = completions if isinstance(completions, int) else None
        self.active = [p for p in pods if jobpods.phase(p) not in _TERMINAL and not jobpods.deleting(p)]
        self.terminating = sum(1 for p in pods if jobpods.deleting(p) and jobpods.phase(p) not in _TERMINAL)
        self.ready = sum(1 for p in self.active if jobpods.ready(p))
        uncounted = self.status.get("uncountedTerminatedPods") or {}
        self.uncounted_succeeded = list(uncounted.get("succeeded") or ())
        self.uncounted_failed = list(uncounted.get("failed") or ())
        valid = [p for p in pods if jobpods.tracked(p) and self._valid_index(p)]
        new_succeeded = [
            p for p in valid if jobpods.phase(p) == "Succeeded" and p["metadata"]["uid"] not in self.uncounted_succeeded
        ]
        new_failed = [
            p
            for p in valid
            if jobpods.failed(p, self.only_failed) and p["metadata"]["uid"] not in self.uncounted_failed
        ]
        self.succeeded = int(self.status.get("succeeded") or 0) + len(new_succeeded) + len(self.uncounted_succeeded)
        counted = sum(1 for p in new_failed if self._counts(p))  # nonIgnoredFailedPodsCount
        self.failed = int(self.status.get("failed") or 0) + counted + len(self.uncounted_failed)
        self.plan.backoff = _next_backoff(backoff, new_succeeded, new_failed)
        self.done_indexes: set[int] = set()
        if self.indexed and self.completions is not None:
            self.done_indexes = _parse_indexes(str(self.status.get("completedIndexes") or ""), self.completions)
            self.done_indexes.update(
                i
                for p in pods
                if jobpods.phase(p) == "Succeeded"
                and (i := jobpods.completion_index(p)) is not None
                and i < self.completions
            )
            self.succeeded = len(self.done_indexes)

    def _counts(self, pod: Object) -> bool:
        """The pod's failure counts towards ``backoffLimit`` (no ``podFailurePolicy`` rule ``Ignore`` matched it)."""
        return self.policy is None or self.policy.judge(failed_pod_of(pod)).counts

    def _fail_job_message(self) -> str:
        """``getFailJobMessage``: the message of the first failed pod a ``FailJob`` rule matched, or ``""``."""
        if self.policy is None:
            return ""
        for pod in self.pods:
            if jobpods.failed(pod, self.only_failed):
                message = self.policy.judge(failed_pod_of(pod)).fail_job
                if message:
                    return message
        return ""

    def _valid_index(self, pod: Object) -> bool:
        if not self.indexed:
            return True
        index = jobpods.completion_index(pod)
        return index is not None and self.completions is not None and index < self.completions

    def run(self) -> JobPlan:
        status, plan = self.status, self.plan
        if "startTime" not in status and not self.suspended:
            status["startTime"] = self.stamp
        finish = self._finish()
        active = len(self.active)
        suspend_changed = False
        if finish is not None and finish["type"] == "FailureTarget":
            deleted = self.active
            plan.delete.extend((p["metadata"]["name"], False) for p in deleted)
            active = 0
            self.terminating += len(deleted)
            self.ready -= sum(1 for p in deleted if jobpods.ready(p))
        else:
            active = self._manage()
            complete = (
                self.succeeded > 0 and active == 0
                if self.completions is None
                else self.succeeded >= self.completions and active == 0
            )
            if complete and finish is None:
                finish = _new_condition("SuccessCriteriaMet", "True", *_COMPLETED, self.stamp)
            elif finish is None:
                suspend_changed = self._suspension()
        job_status = self.job.get("status") or {}
        changed = suspend_changed or active != int(job_status.get("active") or 0)
        changed = changed or self.ready != job_status.get("ready") or self.terminating != job_status.get("terminating")
        self._set_counts(active)
        self._track(finish, changed)
        return plan

    def _finish(self) -> Object | None:
        """The finish this sync works towards (``finishedCondition``), or None; arms the deadline's timer."""
        status, spec = self.status, self.spec
        met = _condition(status, "SuccessCriteriaMet")
        if met is not None:
            return met
        target = _condition(status, "FailureTarget")
        if target is not None:
            return target
        message = self._fail_job_message()
        if message:
            return _new_condition("FailureTarget", "True", "PodFailurePolicy", message, self.stamp)
        reason = ""
        if self.failed > int(spec.get("backoffLimit", 6)):
            reason = "BackoffLimitExceeded"
        deadline = spec.get("activeDeadlineSeconds")
        start = jobpods.seconds(status.get("startTime"))
        if not reason and isinstance(deadline, int) and start is not None and not self.suspended:
            left = start + deadline - self.now
            if left <= 0:
                reason = "DeadlineExceeded"
            else:
                self._requeue(left)
        if not reason:
            return None
        return _new_condition("FailureTarget", "True", reason, _FAILURES[reason], self.stamp)

    def _requeue(self, seconds: float) -> None:
        plan = self.plan
        plan.requeue_after = seconds if plan.requeue_after is None else min(plan.requeue_after, seconds)

    def _pace(self) -> None:
        self.plan.paced = True

    def _manage(self) -> int:
        """``manageJob``: delete or create pods; the number active afterwards."""
        plan, active_pods = self.plan, self.active
        active = len(active_pods)
        parallelism = int(self.spec.get("parallelism", 1) or 0)
        if self.suspended:
            plan.delete.extend((p["metadata"]["name"], True) for p in active_pods)
            self.terminating += active
            self.ready -= sum(1 for p in active_pods if jobpods.ready(p))
            return 0
        if self.completions is None:
            want = active if self.succeeded > 0 else parallelism
        else:
            want = max(0, min(self.completions - self.succeeded, parallelism))
        remove = self._for_removal(max(active - want, 0))
        if len(remove) > MAX_POD_CREATE_DELETE_PER_SYNC:
            remove = remove[:MAX_POD_CREATE_DELETE_PER_SYNC]
            self._pace()
        if remove:
            plan.delete.extend((p["metadata"]["name"], True) for p in remove)
            self.terminating += len(remove)
            self.ready -= sum(1 for p in remove if jobpods.ready(p))
            return active - len(remove)
        missing = want - active - (self.terminating if self.only_failed else 0)
        if missing <= 0:
            return active
        wait = plan.backoff.remaining(self.now)
        if wait > 0:
            self._requeue(wait)
            return active
        if missing > MAX_POD_CREATE_DELETE_PER_SYNC:
            missing = MAX_POD_CREATE_DELETE_PER_SYNC
            self._pace()
        indexes: list[int | None] = [None] * missing
        if self.indexed and self.completions is not None:
            running = {jobpods.completion_index(p) for p in active_pods}
            free = (i for i in range(self.completions) if i not in self.done_indexes and i not in running)
            indexes = [i for _, i in zip(range(missing), free, strict=False)]
        for index in indexes:
            plan.create.append(jobpods.pod_from_template(self.job, index))
        return active + len(indexes)

    def _for_removal(self, at_least: int) -> list[Object]:
        """``activePodsForRemoval``: an Indexed Job's pods of repeated or invalid indexes, then the earliest in
        their life."""
        remove: list[Object] = []
        left = list(self.active)
        if self.indexed:
            seen: set[int] = set()
            left = []
            for pod in sorted(
                self.active, key=lambda p: (not jobpods.ready(p), p["metadata"].get("creationTimestamp", ""))
            ):
                index = jobpods.completion_index(pod)
                if index is None or index in seen or not self._valid_index(pod) or index in self.done_indexes:
                    remove.append(pod)
                else:
                    seen.add(index)
                    left.append(pod)
        if len(remove) < at_least:
            left.sort(key=jobpods.removal_order)
            remove.extend(left[: at_least - len(remove)])
        return remove

    def _suspension(self) -> bool:
        conditions = _conditions(self.status)
        if self.suspended:
            changed = _ensure(conditions, "Suspended", "True", "JobSuspended", "Job suspended", self.stamp)
            if changed:
                self.plan.events.append(("Normal", "Suspended", "Job suspended"))
        else:
            changed = _ensure(conditions, "Suspended", "False", "JobResumed", "Job resumed", self.stamp)
            if changed:
                self.plan.events.append(("Normal", "Resumed", "Job resumed"))
                self.status["startTime"] = self.stamp
        if changed:
            self.status["conditions"] = conditions
        return changed

    def _set_counts(self, active: int) -> None:
        status = self.status
        for key, value in (("active", active), ("succeeded", int(status.get("succeeded") or 0))):
            if value:
                status[key] = value
            else:
                status.pop(key, None)
        status["ready"] = max(self.ready, 0)
        status["terminating"] = self.terminating

    def _track(self, finish: Object | None, changed: bool) -> None:
        """``trackJobStatusAndRemoveFinalizers``: count finished pods through ``uncountedTerminatedPods``."""
        status, plan = self.status, self.plan
        before = copy.deepcopy(self.job.get("status") or {})
        failing = finish is not None and finish["type"] in ("FailureTarget", "Failed")
        new_succeeded: list[int] = []
        for pod in self.pods:
            uid = pod["metadata"]["uid"]
            if not jobpods.tracked(pod):
                continue
            failed = jobpods.failed(pod, self.only_failed)
            if not (finish is not None or jobpods.phase(pod) == "Succeeded" or failed):
                continue
            plan.unfinalize.append(pod["metadata"]["name"])
            if jobpods.phase(pod) == "Succeeded" and uid not in self.uncounted_failed:
                index = jobpods.completion_index(pod)
                if self.indexed:
                    if index is not None and self._valid_index(pod):
                        new_succeeded.append(index)
                elif uid not in self.uncounted_succeeded:
                    self.uncounted_succeeded.append(uid)
            elif (
                (failed or failing)
                and uid not in self.uncounted_failed
                and self._valid_index(pod)
                and self._counts(pod)
            ):
                self.uncounted_failed.append(uid)  # (an ignored failure loses its finalizer, uncounted)
        if self.indexed and self.completions is not None:
            status["completedIndexes"] = completed_indexes(self.done_indexes | set(new_succeeded))
            status["succeeded"] = len(self.done_indexes | set(new_succeeded))
            if not status["succeeded"]:
                status.pop("succeeded")
        status["uncountedTerminatedPods"] = _uncounted(self.uncounted_succeeded, self.uncounted_failed)
        conditions = _conditions(status)
        final: Object | None = None
        if finish is not None and finish["type"] in ("FailureTarget", "SuccessCriteriaMet"):
            if not any(c.get("type") == finish["type"] for c in conditions):
                conditions.append(finish)
            kind = "Failed" if finish["type"] == "FailureTarget" else "Complete"
            final = _new_condition(kind, "True", finish["reason"], finish["message"], self.stamp)
        if conditions:
            status["conditions"] = conditions
        if status != before or changed:
            plan.tracking_status = _ordered(copy.deepcopy(status))
        # the finalizers go, then the uncounted pods are counted
        status["succeeded"] = int(status.get("succeeded") or 0) + (0 if self.indexed else len(self.uncounted_succeeded))
        status["failed"] = int(status.get("failed") or 0) + len(self.uncounted_failed)
        for key in ("succeeded", "failed"):
            if not status[key]:
                status.pop(key)
        status["uncountedTerminatedPods"] = {}
        if final is not None and self.terminating == 0 and not _condition(status, final["type"]):
            conditions = _conditions(status)
            conditions.append(final)
            status["conditions"] = conditions
            if final["type"] == "Complete":
                status["completionTime"] = self.stamp
                plan.events.append(("Normal", "Completed", "Job completed"))
            else:
                plan.events.append(("Warning", final["reason"], final["message"]))
        latest = plan.tracking_status if plan.tracking_status is not None else before
        if status != latest:
            plan.status = _ordered(status)


_STATUS_ORDER = (
    "conditions",
    "startTime",
    "completionTime",
    "active",
    "succeeded",
    "failed",
    "terminating",
    "completedIndexes",
    "failedIndexes",
    "uncountedTerminatedPods",
    "ready",
)
"""``JobStatus``'s fields in the order the real server writes them (Go's struct order)."""


def _ordered(status: Object) -> Object:
    ordered = {key: status[key] for key in _STATUS_ORDER if key in status}
    ordered.update((key, value) for key, value in status.items() if key not in ordered)
    return ordered


def _uncounted(succeeded: list[str], failed: list[str]) -> Object:
    uncounted: Object = {}
    if succeeded:
        uncounted["succeeded"] = list(succeeded)
    if failed:
        uncounted["failed"] = list(failed)
    return uncounted


def sync_job(job: Object, pods: list[Object], now: float, backoff: Backoff) -> JobPlan:
    """One sync of ``job`` (a stored Job) with the pods it controls, at ``now`` (seconds), given its back-off
    record; see the module docstring. A finished Job only has its pods' finalizers removed."""
    if finished_condition(job):
        plan = JobPlan(backoff=backoff)
        plan.unfinalize = [p["metadata"]["name"] for p in pods if jobpods.tracked(p)]
        return plan
    return _Sync(job, pods, now, backoff).run()
