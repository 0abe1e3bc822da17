"""Strategies of the batch workloads: ``batch/v1`` Jobs and CronJobs, and pod groups (scheduler-plugins' and
Kubernetes' own gang API)."""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.batchjob import count_defaults, job_decode_error, job_problems, template_restart_problem
from kubeflux.apiobjects.manifests import pod_from_manifest, podgroup_from_manifest
from kubeflux.sim.apiserver.core_strategies import (
    default_template_spec,
    pod_spec_causes,
    pod_view,
    unreadable_causes,
)
from kubeflux.sim.apiserver.errors import Cause, not_supported
from kubeflux.sim.apiserver.gates import gate_causes
from kubeflux.sim.apiserver.registry import Strategy, required

__all__ = ["CronJobStrategy", "JobStrategy", "PodGroupStrategy", "WorkloadStrategy", "job_template_causes"]

Object = dict[str, Any]


class PodGroupStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def validate(self, obj: Object) -> list[Cause]:
        return unreadable_causes(podgroup_from_manifest, obj)


class WorkloadStrategy(Strategy):
    """``scheduling.k8s.io`` Workloads: policy templates that controllers copy into PodGroups; stored as given."""

    tracks_generation = True


# --- batch/v1 Jobs --------------------------------------------------------------------------------------------

_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
_JOB_NAME = "batch.kubernetes.io/job-name"


class JobStrategy(Strategy):
    has_status = True
    tracks_generation = True
    orphan_by_default = True
    fields = frozenset({"status.successful"})

    def decode_error(self, obj: Object) -> str:
        problem = job_decode_error(obj.get("spec"))
        return problem.message if problem else ""

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        meta = obj["metadata"]
        spec.update(count_defaults(spec))
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        policy = spec.get("podFailurePolicy")
        spec.setdefault("podReplacementPolicy", "Failed" if isinstance(policy, dict) else "TerminatingOrFailed")
        for rule in (policy.get("rules") if isinstance(policy, dict) else None) or ():
            for pattern in (rule.get("onPodConditions") if isinstance(rule, dict) else None) or ():
                if isinstance(pattern, dict) and not pattern.get("status"):
                    pattern["status"] = "True"  # SetDefaults_PodFailurePolicyOnPodConditionsPattern
        spec.setdefault("manualSelector", False)
        if not spec.get("manualSelector"):
            spec["selector"] = {"matchLabels": {_CONTROLLER_UID: meta["uid"]}}
        template = spec.get("template")
        if isinstance(template, dict):
            template_meta = template.setdefault("metadata", {})
            if isinstance(template_meta, dict):
                labels = template_meta.setdefault("labels", {})
                if isinstance(labels, dict):
                    labels.update(
                        {
                            _CONTROLLER_UID: meta["uid"],
                            _JOB_NAME: meta["name"],
                            "controller-uid": meta["uid"],
                            "job-name": meta["name"],
                        }
                    )
            if isinstance(template.get("spec"), dict):
                default_template_spec(template["spec"], restart_policy=False)
            template_labels = (template.get("metadata") or {}).get("labels")
            if not meta.get("labels") and isinstance(template_labels, dict) and template_labels:
                meta["labels"] = dict(template_labels)  # the real server's defaulting: a Job is labelled as its pods
        obj["status"] = {}

    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required("spec")]
        name = str(obj["metadata"].get("name") or "")
        causes = [Cause(p.field, p.message, p.reason) for p in job_problems(name, spec)]
        template = spec.get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            return [*causes, required("spec.template.spec")]
        causes.extend(_template_causes(template["spec"], "spec.template.spec."))
        if not causes:
            meta = obj["metadata"]
            pod = pod_view(meta.get("name", ""), meta.get("namespace", ""), template["spec"])
            causes.extend(unreadable_causes(pod_from_manifest, pod, "spec.template."))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        new_spec, old_spec = new.get("spec", {}), old.get("spec", {})
        for field in ("selector", "template", "completionMode", "podFailurePolicy"):
            if isinstance(new_spec, dict) and new_spec.get(field) != old_spec.get(field):
                where = f"spec.{field}"
                if field == "template" and _held(old, old_spec):
                    if _scheduling_directives_only(new_spec, old_spec):
                        continue
                    where = "spec.template.spec"  # (kube-apiserver then compares the pod spec, the directives put back)
                causes.append(Cause(where, "Invalid value: field is immutable"))
        if isinstance(new_spec, dict) and isinstance(old_spec, dict):
            causes.extend(_completions_update_causes(new_spec, old_spec))
        return causes


_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def _held(old: Object, old_spec: Object) -> bool:
    """Whether the Job was suspended and never started (no ``status.startTime``): its template's scheduling
    directives may change (``JobMutableNodeSchedulingDirectives``)."""
    return old_spec.get("suspend") is True and not (old.get("status") or {}).get("startTime")


def _scheduling_directives_only(new_spec: Object, old_spec: Object) -> bool:
    """The template of a held Job (:func:`_held`) changes only in its pods' scheduling directives (node selector,
    tolerations, affinity, scheduling gates) and its labels and annotations: what kube-apiserver lets a queue
    controller such as Kueue change before it resumes the Job."""
    new_template, old_template = new_spec.get("template"), old_spec.get("template")
    if not isinstance(new_template, dict) or not isinstance(old_template, dict):
        return False

    def fixed(template: Object) -> Object:
        spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in _SCHEDULING_DIRECTIVES}
        metadata = {k: v for k, v in (template.get("metadata") or {}).items() if k not in ("labels", "annotations")}
        return {**template, "spec": spec, "metadata": metadata}

    return fixed(new_template) == fixed(old_template)


def _completions_update_causes(new: Object, old: Object) -> list[Cause]:
    """``completions`` is immutable, but for an Indexed Job that changes it in tandem with ``parallelism``."""
    completions = new.get("completions")
    if completions == old.get("completions"):
        return []
    if new.get("completionMode") == "Indexed" and isinstance(completions, int):
        grown = completions - int(old.get("completions") or 0)
        if grown == int(new.get("parallelism") or 0) - int(old.get("parallelism") or 0):
            return []
        why = "can only be modified in tandem with spec.parallelism"
        return [Cause("spec.completions", f"Invalid value: {completions}: {why}")]
    return [Cause("spec.completions", f"Invalid value: {completions}: field is immutable")]


_CONCURRENCY = ("Allow", "Forbid", "Replace")
_SCHEDULE_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def _schedule_causes(schedule: Any) -> list[Cause]:
    """A cron schedule: five fields, a macro or ``@every <duration>`` (the fields themselves are not parsed); no
    ``TZ=`` in it (``spec.timeZone`` says that)."""
    if not isinstance(schedule, str) or not schedule:
        return [required("spec.schedule")]
    if "TZ" in schedule:
        return [
            Cause(
                "spec.schedule",
                f'Invalid value: "{schedule}": cannot use TZ or CRON_TZ in schedule, use timeZone field instead',
            )
        ]
    fields = schedule.split()
    if schedule.startswith("@"):
        if schedule in _SCHEDULE_MACROS or (fields[0] == "@every" and len(fields) == 2):
            return []
        return [Cause("spec.schedule", f'Invalid value: "{schedule}": unrecognized descriptor: {schedule}')]
    if len(fields) != 5:
        message = f'Invalid value: "{schedule}": expected exactly 5 fields, found {len(fields)}: [{schedule}]'
        return [Cause("spec.schedule", message)]
    return []


class CronJobStrategy(Strategy):
    """``batch/v1`` CronJobs: a schedule and a Job template (whose counts are held to a Job's: a string or a number
    beyond ``int32`` is a 400, a negative one a 422); kube-controller-manager's CronJob controller makes the Jobs and
    writes the status."""

    has_status = True
    tracks_generation = True

    def decode_error(self, obj: Object) -> str:
        problem = job_decode_error(_job_template_spec(obj), _JOB_TEMPLATE)  # the Job's own decoding, at its path
        return problem.message if problem else ""

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("concurrencyPolicy", "Allow")
            spec.setdefault("suspend", False)
            spec.setdefault("successfulJobsHistoryLimit", 3)
            spec.setdefault("failedJobsHistoryLimit", 1)
            template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
            if isinstance(template, dict) and isinstance(template.get("spec"), dict):
                default_template_spec(template["spec"], restart_policy=False)
        obj["status"] = {}

    def canonicalize(self, obj: Object) -> None:
        spec = obj.get("spec")
        job = spec.get("jobTemplate") if isinstance(spec, dict) else None
        if isinstance(job, dict):  # ObjectMeta is no pointer: Go shows the templates' metadata, empty
            if job.get("metadata") is None:
                job["metadata"] = {}
            template = (job.get("spec") or {}).get("template")
            if isinstance(template, dict) and template.get("metadata") is None:
                template["metadata"] = {}

    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required("spec")]
        causes = _schedule_causes(spec.get("schedule"))
        for name in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
            value = spec.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                causes.append(Cause(f"spec.{name}", f"Invalid value: {value!r}: must be greater than or equal to 0"))
        policy = spec.get("concurrencyPolicy")
        if policy not in _CONCURRENCY:
            causes.append(not_supported("spec.concurrencyPolicy", policy, _CONCURRENCY))
        job_spec = _job_template_spec(obj)
        counts = [] if job_spec is None else job_problems(None, job_spec, _JOB_TEMPLATE)  # a Job's, unnamed
        causes.extend(Cause(p.field, p.message, p.reason) for p in counts)
        return causes + job_template_causes(spec.get("jobTemplate"), f"{_JOB_TEMPLATE}template.spec.")


_JOB_TEMPLATE = "spec.jobTemplate.spec."


def _job_template_spec(obj: Object) -> Object | None:
    """A CronJob's ``spec.jobTemplate.spec``, None when it has none: held to a Job's spec's rules
    (:mod:`kubeflux.apiobjects.batchjob`, ``ValidateJobTemplateSpec``) but for the name, as its Jobs get theirs
    later."""
    spec = obj.get("spec")
    job = spec.get("jobTemplate") if isinstance(spec, dict) else None
    job_spec = job.get("spec") if isinstance(job, dict) else None
    return job_spec if isinstance(job_spec, dict) else None


def job_template_causes(job: Any, prefix: str) -> list[Cause]:
    """The pod template of a Job's template (a missing one is empty, as Go decodes it): :func:`_template_causes`."""
    job_spec = job.get("spec") if isinstance(job, dict) else None
    template = job_spec.get("template") if isinstance(job_spec, dict) else None
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    return _template_causes(pod_spec if isinstance(pod_spec, dict) else {}, prefix)


def _template_causes(pod_spec: Object, prefix: str) -> list[Cause]:
    """A Job's pod template as the real server validates it: a pod spec first (its ``restartPolicy`` defaulted to
    ``Always`` when missing), then the Job's own rule on the restart policy (:func:`template_restart_problem`)."""
    if pod_spec.get("restartPolicy") in (None, ""):
        pod_spec = {**pod_spec, "restartPolicy": "Always"}
    causes = pod_spec_causes(pod_spec, prefix) + gate_causes(pod_spec, create=False, prefix=prefix)
    restart = template_restart_problem(pod_spec, prefix)
    if restart is not None:
        causes.append(Cause(restart.field, restart.message, restart.reason))
    return causes
