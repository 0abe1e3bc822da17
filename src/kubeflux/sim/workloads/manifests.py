"""Kubernetes YAML workloads: Pods, ``batch/v1`` Jobs and PodGroups (coscheduling's ``scheduling.x-k8s.io``, and
Kubernetes' own ``scheduling.k8s.io`` whose bare pods name it in ``spec.schedulingGroup``).

A file holds any number of YAML documents (``---``), each an object or a ``v1`` ``List`` of objects. What becomes
a :class:`~kubeflux.sim.workloads.model.WorkloadJob` (one row of ``jobs.csv``):

* a **Pod** without the ``scheduling.x-k8s.io/pod-group`` label: a ``pod`` job of one pod;
* a **Job** (``batch/v1``): a ``job`` job whose one pod template runs ``completions`` times, ``parallelism`` at a
  time, retried up to ``backoffLimit`` times, killed ``activeDeadlineSeconds`` after it starts. ``completions``
  defaults to 1, or to ``parallelism`` when only that is set (Kubernetes' work-queue mode, where every one of
  the ``parallelism`` pods runs once); ``parallelism`` defaults to 1 and ``backoffLimit`` to 6. The spec is held
  to what the API server accepts, in its words (:mod:`kubeflux.apiobjects.batchjob`, shared with ``cluster
  serve``): ``completions: 0`` completes at once, ``parallelism: 0`` never runs a pod. When the pod
  template carries the pod-group label of a PodGroup in the file, the Job is that gang (``min_member`` and
  ``scheduleTimeoutSeconds`` from the PodGroup);
* a **PodGroup** and the bare Pods labelled with its name: one ``podgroup`` job (a gang of ``minMember``).
* a **PriorityClass** (``scheduling.k8s.io/v1``) or a **PodDisruptionBudget** (``policy/v1``): no job, but in the
  cluster from the start, or from its ``sim.kubeflux.io/submit-time`` until its ``sim.kubeflux.io/delete-time``
  when it gives them (:mod:`kubeflux.sim.workloads.policies`); the file's classes are read first, and every Pod
  and Job pod template is admitted with those that exist at its submit time as the API server's Priority
  admission admits it (a class named gives ``spec.priority`` and ``spec.preemptionPolicy``; an unknown one, or one
  not created yet, forbids the Pod, and rejects the Job). A PodGroup's bare pods are admitted at the PodGroup's
  time when it gives one, else each at its own.
  Pods naming a PodGroup the file does not define are reported and run as lone pods; pods and Jobs naming a
  PodGroup the file defines but validation refuses (``minMember: 0``: the same check, and the same words, as
  ``cluster serve``'s 422) are rejected with its reason, as they could never be scheduled.
* a **StorageClass**, **PersistentVolume**, **PersistentVolumeClaim** or **CSINode**: no job, in the cluster from
  the start, what the volume filters read (:mod:`kubeflux.sim.workloads.storage`);
* Dynamic Resource Allocation's **DeviceClass**, **ResourceSlice**, **ResourceClaim** and **ResourceClaimTemplate**
  (``resource.k8s.io/v1``): no job, in the cluster from the start (:mod:`kubeflux.sim.claims`); pods name the claims
  in ``spec.resourceClaims``;
* Kueue's **ResourceFlavor**, **ClusterQueue** and **LocalQueue**: no job, the run's admission layer
  (:mod:`kubeflux.sim.kueue`); a Job, Pod or PodGroup's pods labelled ``kueue.x-k8s.io/queue-name`` wait for it.
* an **AppWrapper** (``workload.codeflare.dev/v1beta2``): one job per component (a Job or a Pod), admitted by Kueue
  as one workload (:mod:`kubeflux.sim.workloads.appwrappers`).

How each pod behaves once it runs (KWOK's annotations, so the same file runs on a KWOK cluster):

* run time: ``pod-complete.stage.kwok.x-k8s.io/delay``, a Go duration (``60s``, ``1m30s``, ``500ms``). Without
  it a Job's pod completes as soon as it runs (KWOK's default ``pod-complete`` stage has no delay) and a bare pod
  runs until it is deleted (``simulate`` says how many, and ``--default-runtime`` gives them one);
* ``pod-complete.stage.kwok.x-k8s.io/jitter-delay``: the upper bound of a random run time (KWOK: delay +
  random(jitter − delay)), in :attr:`~kubeflux.sim.workloads.model.PodTemplate.run_time_jitter`;
* ``sim.kubeflux.io/exit-code``: the exit code (0–255, default 0; non-zero ends the pod ``Failed``).

They are read by :func:`kubeflux.scheduler.validation.pod_run`, the one reading of them: a pod whose annotations it
cannot read (not a Go duration, negative or beyond 100 years, a jitter below the delay, an exit code beyond 0–255)
is a valid object no kubelet can run, so it is kept and **rejected** with the reason (its Job or PodGroup with it),
as kubeflux's scheduler rejects it in ``cluster serve`` rather than bind it: it never holds resources.

When objects arrive: the annotation ``sim.kubeflux.io/submit-time`` on the Pod, Job or PodGroup, in seconds from
the moment the file is applied (``kubectl apply``: time 0 of the workload, which is also the origin of the times in
``jobs.csv``); **default 0** (everything is submitted at once, when the file is applied). A PodGroup's bare pods
are submitted together, at the PodGroup's time if it has the annotation, else at the earliest of their times.

A job's Batsim **profile** (``jobs.csv``'s ``profile``) is its pods' container images, joined by ``+``
(``busybox:1.36``, ``trainer:v2+sidecar:1``): what it runs, as a Batsim profile says what a job runs.

``spec.schedulerName`` is kept as written (a pod of ``default-scheduler`` is another scheduler's); when it is
absent the pod belongs to the scheduler under test.

A document Kubernetes would reject (a bad field, an unknown kind, a name that is no DNS-1123 subdomain, a
``priority`` or ``minMember`` beyond ``int32``: :mod:`kubeflux.apiobjects.rules`, in the API server's words, as
``cluster serve`` refuses it) is reported in ``Workload.problems`` as
``file: document N[, items[i]]: Kind namespace/name: field: what`` and skipped; broken YAML raises
:class:`~kubeflux.sim.workloads.errors.WorkloadError` with the line.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubeflux.apiobjects.batchjob import count_defaults, job_decode_error, job_problems, template_restart_problem
from kubeflux.apiobjects.manifests import (
    ManifestError,
    namespace_from_manifest,
    pod_from_manifest,
    podgroup_from_manifest,
)
from kubeflux.apiobjects.podfailure import PodFailurePolicy
from kubeflux.apiobjects.rules import dns_label_problem, dns_subdomain_problem
from kubeflux.apiobjects.storage import default_class_name, wants_default_class
from kubeflux.scheduler.objects import CPU, POD_GROUP_LABEL, Pod, PodGroup
from kubeflux.scheduler.storage import PersistentVolumeClaim, StorageObject
from kubeflux.scheduler.validation import (
    EXIT_CODE_ANNOTATION,
    JITTER_ANNOTATION,
    RUN_TIME_ANNOTATION,
    InvalidRunTime,
    PodRun,
    pod_run,
)
from kubeflux.sim.claims import DEVICE_KINDS, DeviceObjects, read_device_object
from kubeflux.sim.kueue.objects import QUEUE_NAME_LABEL
from kubeflux.sim.kueue.reader import KUEUE_KINDS, KueueReader, queue_label
from kubeflux.sim.workloads.appwrappers import app_wrapper_jobs
from kubeflux.sim.workloads.limits import echo, parse_number, seconds_problem
from kubeflux.sim.workloads.model import SUBMIT_TIME_ANNOTATION, JobKind, Lifetime, PodTemplate, Workload, WorkloadJob
from kubeflux.sim.workloads.policies import POLICY_KINDS, ClusterPolicies
from kubeflux.sim.workloads.storage import STORAGE_KINDS, read_storage_object
from kubeflux.sim.workloads.swf import workload_name
from kubeflux.sim.workloads.yamlfiles import YamlLoader, load_documents

DELETE_TIME_ANNOTATION = "sim.kubeflux.io/delete-time"
"""When a PriorityClass or a PodDisruptionBudget of the file is deleted (seconds from when the file is applied)."""


def _object_name(obj: dict[str, Any], kind: str) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    namespace = (meta.get("namespace") if isinstance(meta, dict) else None) or "default"
    return f"{kind} {namespace}/{name}"


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return {str(k): str(v) for k, v in annotations.items()} if isinstance(annotations, dict) else {}


def _annotation_seconds(obj: str, annotations: dict[str, str], key: str, path: str) -> float | None:
    text = annotations.get(key)
    if text is None:
        return None
    try:
        value = parse_number(text)
    except ValueError:
        value = math.nan
    problem = seconds_problem(value) if value == value else "must be a non-negative number of seconds"
    if problem is not None:
        raise ManifestError(obj, f"{path}.annotations.{key}", f"{problem.split(', got')[0]}, got {echo(text)}")
    return value


def pod_template(
    pod: Pod,
    manifest: dict[str, Any],
    obj: str,
    path: str,
    default_run_time: float | None,
    run: PodRun | None = None,
) -> PodTemplate:
    """The simulator's view of one pod: its request, constraints and how it behaves once Running (``run``, else
    read from its annotations: :func:`~kubeflux.scheduler.validation.pod_run`, which raises
    :class:`InvalidRunTime` for annotations no kubelet can read)."""
    annotations = pod.annotations
    if run is None:
        run = pod_run(obj, annotations, path, default_run_time)
    spec = manifest.get("spec")
    scheduler = spec.get("schedulerName") if isinstance(spec, dict) else None
    priority_class = spec.get("priorityClassName") if isinstance(spec, dict) else None
    return PodTemplate(
        name=pod.name,
        requests=dict(pod.requests),
        run_time=run.run_time,
        run_time_jitter=run.jitter,
        exit_code=run.exit_code,
        scheduler_name=scheduler if isinstance(scheduler, str) else "",
        priority=pod.priority,
        labels=dict(pod.labels),
        annotations=dict(annotations),
        node_selector=dict(pod.node_selector),
        tolerations=pod.tolerations,
        required_node_affinity=pod.required_node_affinity,
        active_deadline_seconds=pod.active_deadline_seconds,
        manifest=manifest,
        preemption_policy=pod.preemption_policy,
        priority_class=priority_class if isinstance(priority_class, str) else "",
        terms=pod.terms,
        volume_claims=pod.volume_claims,
        resource_claims=pod.resource_claims,
    )


def _checked_template(
    pod: Pod, manifest: dict[str, Any], obj: str, path: str, default_run_time: float | None
) -> tuple[PodTemplate, str]:
    """:func:`pod_template`, and why the pod is rejected (``""`` when it is not): a pod whose run-time annotations no
    kubelet can read is a valid object, so it is kept, rejected with the reason (as kubeflux's scheduler rejects it
    in ``cluster serve`` rather than bind it), never skipped as one the API would refuse. So is a pod with
    ``spec.schedulingGates``: no scheduler may place it, and no controller of the simulator would ever remove them."""
    try:
        template = pod_template(pod, manifest, obj, path, default_run_time)
    except InvalidRunTime as exc:
        return pod_template(pod, manifest, obj, path, default_run_time, PodRun()), str(exc)
    if pod.scheduling_gates:
        gates = ", ".join(pod.scheduling_gates)
        return template, f"{obj}: spec.schedulingGates: held by {gates}, which nothing in simulate removes (no Kueue)"
    return template, ""


def _cores(pod: PodTemplate) -> int:
    """Whole cores a pod asks (``requested_number_of_resources`` counts cores; 500m counts as 1)."""
    return -(-pod.requests.get(CPU, 0) // 1000)


def job_from_manifest(obj: dict[str, Any], source: str = "", policies: ClusterPolicies | None = None) -> WorkloadJob:
    """The workload job of one ``batch/v1`` Job object (rules in the module docstring; ``source`` says where it
    came from, for messages; ``policies``: the PriorityClasses its pods are admitted with, the system ones when
    None). Raises :class:`ManifestError` naming the field Kubernetes would reject; a Job whose pods the Priority
    admission forbids is rejected (its controller could never create one)."""
    label = _object_name(obj, "Job")
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(label, "metadata.name", "required")
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ManifestError(label, "metadata.namespace", f"expected a string, got {namespace!r}")
    for field, value, rule in (
        ("metadata.name", name, dns_subdomain_problem(name)),
        ("metadata.namespace", namespace, dns_label_problem(namespace)),
    ):
        if rule is not None:  # the API server's words (kubeflux.apiobjects.rules), as for a Pod or a PodGroup
            raise ManifestError(label, field, f"{echo(value)}: {rule}")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ManifestError(label, "spec", "required")
    submit = _annotation_seconds(label, _annotations(obj), SUBMIT_TIME_ANNOTATION, "metadata")
    problem = job_decode_error(spec)  # the one validation cluster serve's Job strategy makes too
    if problem is not None:
        raise ManifestError(label, problem.field, problem.message)
    spec = {**spec, **count_defaults(spec)}
    problems = job_problems(name, spec)
    if problems:
        also = "".join(f"; {p.field}: {p.message}" for p in problems[1:])
        raise ManifestError(label, problems[0].field, problems[0].message + also)
    parallelism: int = spec["parallelism"]
    completions: int | None = spec.get("completions")
    backoff: int | None = spec.get("backoffLimit")
    deadline: int | None = spec.get("activeDeadlineSeconds")
    mode = spec.get("completionMode") or "NonIndexed"
    if completions is None:  # work-queue mode: each of the parallelism pods runs once (none: it never runs)
        completions = parallelism or 1
    parallelism = min(parallelism, completions)
    template_obj = spec.get("template")
    if not isinstance(template_obj, dict):
        raise ManifestError(label, "spec.template", "required")
    template_meta = template_obj.get("metadata") or {}
    if not isinstance(template_meta, dict):
        raise ManifestError(label, "spec.template.metadata", "expected a mapping")
    template_spec = template_obj.get("spec")
    restart = template_restart_problem(template_spec) if isinstance(template_spec, dict) else None
    if restart is not None:  # as cluster serve's Job strategy refuses it (422)
        raise ManifestError(label, restart.field, restart.message)
    forbidden = ""
    try:
        admission = policies or ClusterPolicies()
        pod_spec = admission.admit(label, name, template_spec, "spec.template.spec", submit or 0.0)
    except ManifestError as exc:  # the Job is valid; the Job controller's pods are refused
        pod_spec, forbidden = template_spec, str(exc)
    pod_manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template_meta, "name": name, "namespace": namespace},
        "spec": pod_spec,
    }
    try:
        pod = pod_from_manifest(pod_manifest)
    except ManifestError as exc:  # name the field as it is in the Job
        field = f"spec.template.{exc.path}" if exc.path else "spec.template"
        raise ManifestError(label, field, exc.problem) from exc
    template, rejected = _checked_template(pod, pod_manifest, label, "spec.template.metadata", 0.0)
    return WorkloadJob(
        id=f"{namespace}/{name}",
        submit_time=submit or 0.0,
        kind=JobKind.JOB,
        name=name,
        namespace=namespace,
        pods=[template],
        completions=completions,
        parallelism=parallelism,
        indexed=mode == "Indexed",
        backoff_limit=6 if backoff is None else backoff,
        requested_processors=_cores(template) * parallelism,
        active_deadline_seconds=None if deadline is None else float(deadline),
        pod_failure_policy=PodFailurePolicy.from_spec(spec.get("podFailurePolicy")),
        source=source,
        rejected=forbidden or rejected,
    )


NAMESPACED_DEVICE_KINDS: Final = frozenset({"ResourceClaim", "ResourceClaimTemplate"})


@dataclass(slots=True)
class _GroupMember:
    pod: PodTemplate
    namespace: str
    submit_time: float | None
    where: str
    rejected: str = ""
    """Why the pod is rejected (its run-time annotations), ``""`` when it is not."""


@dataclass(slots=True)
class _Builder:
    """Collects the objects of one file, then joins PodGroups with their pods and Jobs."""

    file_name: str
    jobs: list[WorkloadJob]
    problems: list[str]
    groups: dict[str, tuple[PodGroup, float | None, str]]
    members: dict[str, list[_GroupMember]]
    group_jobs: dict[str, list[WorkloadJob]]
    default_run_time: float | None = None
    refused_groups: dict[str, str] = dataclasses.field(default_factory=dict)
    """``namespace/name`` of each PodGroup refused by validation → where it is and why (the 422 of ``cluster
    serve``): the pods and Jobs that name it are rejected with that reason instead of waiting for ever."""
    skipped: int = 0
    policies: ClusterPolicies = dataclasses.field(default_factory=ClusterPolicies)
    defined: dict[str, str] = dataclasses.field(default_factory=dict)
    """``Kind namespace/name`` of each Pod and Job read → where: a second one of the name is refused (cluster serve
    answers 409 AlreadyExists), instead of running as a renamed job whose pods collide."""
    group_times: dict[str, float] = dataclasses.field(default_factory=dict)
    """``namespace/name`` of each PodGroup of the file that gives a submit time → it (its pods are admitted then)."""
    kueue: KueueReader = dataclasses.field(default_factory=KueueReader)
    namespaces_at: list[str] = dataclasses.field(default_factory=list)
    """Where the file's Namespace objects are (read for Kueue's ``namespaceSelector``; skipped without Kueue)."""
    storage: list[StorageObject] = dataclasses.field(default_factory=list)
    """The StorageClasses, PersistentVolumes, claims and CSINodes of the file (:mod:`.storage`)."""
    devices: DeviceObjects = dataclasses.field(default_factory=DeviceObjects)
    storage_classes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The StorageClass manifests of the file."""
    cluster_objects: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The storage and device manifests read (:attr:`~kubeflux.sim.workloads.model.Workload.cluster_objects`)."""
    classless: list[int] = dataclasses.field(default_factory=list)
    """Where in :attr:`storage` the claims naming no class are: they get the default class at :meth:`finish`, as
    the API server's DefaultStorageClass admission gives it."""

    def _once(self, label: str, where: str) -> None:
        first = self.defined.setdefault(label, where)
        if first != where:
            raise ManifestError(label, "metadata.name", f"defined twice (first in {first})")

    def _once_object(self, kind: str, obj: dict[str, Any], where: str) -> None:
        """A second object of ``kind`` and name in the file is refused, as a second pod of the name is (``cluster
        serve`` answers 409 AlreadyExists), rather than silently replacing the first."""
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return  # the object's reader says what is wrong
        namespace = meta.get("namespace") or "default"
        key = f"{namespace}/{meta['name']}" if kind in NAMESPACED_DEVICE_KINDS else meta["name"]
        self._once(f"{kind} {key}", where)

    def add(self, where: str, obj: Any) -> None:
        if not isinstance(obj, dict):
            self.problems.append(f"{self.file_name}: {where}: expected a Kubernetes object, got {type(obj).__name__}")
            self.skipped += 1
            return
        kind = obj.get("kind")
        try:
            if kind == "Pod":
                self._pod(where, obj)
            elif kind == "Job":
                self._job(where, obj)
            elif kind == "PodGroup":
                self._group(where, obj)
            elif kind in POLICY_KINDS:
                self._policy(where, obj)
            elif kind in STORAGE_KINDS:
                read = read_storage_object(obj)
                if kind == "StorageClass":
                    self.storage_classes.append(obj)
                elif kind == "PersistentVolumeClaim" and wants_default_class(obj):
                    self.classless.append(len(self.storage))
                self.storage.append(read)
                self.cluster_objects.append(obj)
            elif kind in KUEUE_KINDS:
                self.kueue.add(where, obj)
            elif kind == "Namespace":  # its labels, for Kueue's namespaceSelector (the file's Kueue objects)
                defined = namespace_from_manifest(obj)
                self._once(f"Namespace {defined.name}", where)
                self.kueue.objects.namespaces[defined.name] = dict(defined.labels)
                self.namespaces_at.append(where)
            elif kind == "AppWrapper":
                self._app_wrapper(where, obj)
            elif kind in DEVICE_KINDS:
                self._once_object(kind, obj, where)
                read_device_object(self.devices, obj)
                self.cluster_objects.append(obj)
            else:
                hint = " (a cluster file? pass it as the cluster)" if kind == "Node" else ""
                what = f"kind {kind!r} is not a workload object{hint}; skipped"
                self.problems.append(f"{self.file_name}: {where}: {what}")
                self.skipped += 1
        except ManifestError as exc:
            self.problems.append(f"{self.file_name}: {where}: {exc}; skipped")
            self.skipped += 1
            if kind == "PodGroup":
                meta = obj.get("metadata")
                meta = meta if isinstance(meta, dict) else {}
                name, namespace = meta.get("name"), meta.get("namespace") or "default"
                if isinstance(name, str) and isinstance(namespace, str):
                    self.refused_groups.setdefault(f"{namespace}/{name}", f"{where}: {exc.path}: {exc.problem}")

    def _policy(self, where: str, obj: dict[str, Any]) -> None:
        """A PriorityClass or a PodDisruptionBudget, with its times read and checked as a job's are."""
        meta = _meta(obj)
        name = meta.get("name")
        kind = obj.get("kind")
        label = f"{kind} {name}" if kind == "PriorityClass" else f"{kind} {meta.get('namespace') or 'default'}/{name}"
        annotations = _annotations(obj)
        created = _annotation_seconds(label, annotations, SUBMIT_TIME_ANNOTATION, "metadata") or 0.0
        deleted = _annotation_seconds(label, annotations, DELETE_TIME_ANNOTATION, "metadata")
        if deleted is not None and deleted <= created:
            field = f"metadata.annotations.{DELETE_TIME_ANNOTATION}"
            raise ManifestError(label, field, f"must be after its submit time ({created:g} s), got {deleted:g}")
        self.policies.add(where, obj, Lifetime(created, deleted))

    def _pod(self, where: str, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        name = meta.get("name")
        namespace = meta.get("namespace") or "default"
        label = f"Pod {namespace}/{name}"
        labels = meta.get("labels")
        group = labels.get(POD_GROUP_LABEL) if isinstance(labels, dict) else None
        at = self.group_times.get(f"{namespace}/{group}") if group is not None else None
        if at is None:  # its own time (the reader below names a bad one)
            at = _seconds_or_zero(_annotations(obj).get(SUBMIT_TIME_ANNOTATION))
        obj = {**obj, "spec": self.policies.admit(label, str(name), obj.get("spec"), at=at)}
        pod = pod_from_manifest(obj)
        label = f"Pod {pod.namespace}/{pod.name}"
        template, rejected = _checked_template(pod, obj, label, "metadata", self.default_run_time)
        submit = _annotation_seconds(label, pod.annotations, SUBMIT_TIME_ANNOTATION, "metadata")
        group = pod.labels.get(POD_GROUP_LABEL)
        if group is None and pod.scheduling_group:
            # Kubernetes' own PodGroup (spec.schedulingGroup): the simulated schedulers, baselines included, see
            # its pods as members of that group through coscheduling's label
            group = template.labels[POD_GROUP_LABEL] = pod.scheduling_group
        self._once(label, where)
        if group is not None:
            member = _GroupMember(template, pod.namespace, submit, where, rejected)
            self.members.setdefault(f"{pod.namespace}/{group}", []).append(member)
            return
        self.jobs.append(self._lone_pod(template, pod.namespace, submit, where, rejected))

    def _app_wrapper(self, where: str, obj: dict[str, Any]) -> None:
        """An AppWrapper's components (:mod:`.appwrappers`); refused whole, none of their names is taken."""
        label = _object_name(obj, "AppWrapper")
        _annotation_seconds(label, _annotations(obj), SUBMIT_TIME_ANNOTATION, "metadata")  # a bad one named
        defined = dict(self.defined)
        try:
            self.jobs += app_wrapper_jobs(obj, where, self._component)
        except ManifestError:
            self.defined = defined
            raise

    def _component(self, where: str, obj: dict[str, Any]) -> WorkloadJob:
        """An AppWrapper's component (a Job, or a Pod of no PodGroup) read as the file's own, not kept here."""
        before = len(self.jobs)
        (self._job if obj.get("kind") == "Job" else self._pod)(where, obj)
        return self.jobs.pop(before)

    def _reject(self, job: WorkloadJob, rejected: str) -> None:
        """Mark ``job`` rejected (``rejected``: why; nothing when empty) and say so in the problems."""
        if rejected:
            job.rejected = rejected
            self.problems.append(f"{job.source}: {rejected}; rejected")

    def _lone_pod(
        self, template: PodTemplate, namespace: str, submit: float | None, where: str, rejected: str = ""
    ) -> WorkloadJob:
        job = WorkloadJob(
            id=f"{namespace}/{template.name}",
            submit_time=submit or 0.0,
            kind=JobKind.POD,
            name=template.name,
            namespace=namespace,
            pods=[template],
            requested_processors=_cores(template),
            source=f"{self.file_name}: {where}",
            queue_name=queue_label(template.labels),
        )
        self._reject(job, rejected)
        return job

    def _job(self, where: str, obj: dict[str, Any]) -> None:
        job = job_from_manifest(obj, f"{self.file_name}: {where}", self.policies)
        self._once(f"Job {job.id}", where)
        job.queue_name = queue_label(_meta(obj).get("labels"))
        rejected, job.rejected = job.rejected, ""
        self._reject(job, rejected)
        template = job.pods[0]
        self.jobs.append(job)
        group = template.labels.get(POD_GROUP_LABEL)
        if group is not None:
            self.group_jobs.setdefault(f"{job.namespace}/{group}", []).append(job)

    def _group(self, where: str, obj: dict[str, Any]) -> None:
        # Kubernetes' own PodGroup is simulated as coscheduling's (its pods carry the label): one name, one group
        group = dataclasses.replace(podgroup_from_manifest(obj), native=False)
        label = f"PodGroup {group.key}"
        submit = _annotation_seconds(label, _annotations(obj), SUBMIT_TIME_ANNOTATION, "metadata")
        if group.key in self.groups:
            raise ManifestError(label, "metadata.name", "defined twice")
        self.groups[group.key] = (group, submit, where)

    def finish(self) -> None:
        """Join each PodGroup with its Jobs or bare pods; report groups without pods and pods without groups. Claims
        naming no class get the default one (DefaultStorageClass admission)."""
        default = default_class_name(self.storage_classes)
        for index in self.classless:
            claim = self.storage[index]
            assert isinstance(claim, PersistentVolumeClaim)
            self.storage[index] = dataclasses.replace(claim, storage_class=default or "")
        for key, (group, submit, where) in self.groups.items():
            jobs = self.group_jobs.pop(key, [])
            members = self.members.pop(key, [])
            for job in jobs:
                job.min_member = group.min_member
                job.schedule_timeout_seconds = group.schedule_timeout_seconds
            if members:
                pods = [member.pod for member in members]
                times = [member.submit_time for member in members if member.submit_time is not None]
                start = submit if submit is not None else min(times, default=0.0)
                if len(pods) < group.min_member and not jobs:
                    self.problems.append(
                        f"{self.file_name}: {where}: PodGroup {key} has minMember {group.min_member} but only "
                        f"{len(pods)} pods in the file; it can never be scheduled"
                    )
                self.jobs.append(
                    WorkloadJob(
                        id=key,
                        submit_time=start,
                        kind=JobKind.POD_GROUP,
                        name=group.name,
                        namespace=group.namespace,
                        pods=pods,
                        min_member=group.min_member,
                        schedule_timeout_seconds=group.schedule_timeout_seconds,
                        requested_processors=sum(_cores(pod) for pod in pods),
                        source=f"{self.file_name}: {where}",
                        queue_name=next((q for pod in pods if (q := queue_label(pod.labels))), ""),
                    )
                )
                queues = sorted({queue_label(pod.labels) for pod in pods})
                if len(queues) > 1:  # one Kueue workload has one queue: which would be a guess
                    named = ", ".join(queue or "none" for queue in queues)
                    self.jobs[-1].rejected = f"its pods name different LocalQueues ({QUEUE_NAME_LABEL}: {named})"
                    self.problems.append(f"{self.file_name}: {where}: PodGroup {key}: {self.jobs[-1].rejected}")
                bad = next((member for member in members if member.rejected), None)
                if bad is not None:  # a gang with a pod no kubelet can run can never run whole
                    self.jobs[-1].rejected = bad.rejected
                    self.problems.append(f"{self.file_name}: {bad.where}: {bad.rejected}; its PodGroup is rejected")
            elif not jobs:
                self.problems.append(f"{self.file_name}: {where}: PodGroup {key} has no pods in the file; skipped")
        for key, members in self.members.items():
            for member in members:
                lone = self._lone_pod(member.pod, member.namespace, member.submit_time, member.where, member.rejected)
                where = f"{self.file_name}: {member.where}: Pod {member.namespace}/{member.pod.name}"
                self._ungrouped(lone, where, key, "it runs as a lone pod")
                self.jobs.append(lone)
        for key, jobs in self.group_jobs.items():
            for job in jobs:
                self._ungrouped(job, f"{job.source}: Job {job.id}", key, "no gang")

    def _ungrouped(self, job: WorkloadJob, where: str, key: str, otherwise: str) -> None:
        """``job`` (said as ``where``) names the PodGroup ``key``, which the file does not define as a valid group:
        rejected when the file defines it invalid, else it runs as it is (``otherwise`` says how); a problem says
        which."""
        refused = self.refused_groups.get(key)
        if refused is not None:
            job.rejected = f"its PodGroup {key} is invalid ({refused})"
            self.problems.append(f"{where}: {job.rejected}; rejected")
        else:
            self.problems.append(f"{where} names PodGroup {key}, which the file does not define; {otherwise}")


def images(pods: list[PodTemplate]) -> str:
    """The container images of ``pods`` (each once, in order) joined by ``+``: a manifest job's Batsim profile (what
    it runs, as a Batsim profile says what a job runs); empty when no container names an image."""
    seen: dict[str, None] = {}
    for pod in pods:
        spec = pod.manifest.get("spec") if isinstance(pod.manifest, dict) else None
        containers = spec.get("containers") if isinstance(spec, dict) else None
        for container in containers if isinstance(containers, list) else ():
            image = container.get("image") if isinstance(container, dict) else None
            if isinstance(image, str) and image:
                seen[image] = None
    return "+".join(seen)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _seconds_or_zero(text: str | None) -> float:
    """A submit-time annotation's seconds, 0 when absent or unreadable (whoever reads it for real names it)."""
    try:
        value = parse_number(text) if text is not None else 0.0
    except ValueError:
        return 0.0
    return value if value == value and seconds_problem(value) is None else 0.0


def _group_times(documents: list[tuple[str, Any]]) -> dict[str, float]:
    """The submit times the file's PodGroups give, by ``namespace/name`` (their bare pods are admitted then)."""
    times: dict[str, float] = {}
    for _, obj in documents:
        if isinstance(obj, dict) and obj.get("kind") == "PodGroup":
            meta = _meta(obj)
            text = _annotations(obj).get(SUBMIT_TIME_ANNOTATION)
            if text is not None and isinstance(meta.get("name"), str):
                times[f"{meta.get('namespace') or 'default'}/{meta['name']}"] = _seconds_or_zero(text)
    return times


def _unique_ids(jobs: list[WorkloadJob]) -> None:
    """Make ids unique: a Job and a bare-pod PodGroup may share a name; the later one gets ``.kind`` appended."""
    seen: set[str] = set()
    for job in jobs:
        if job.id in seen:
            job.id = f"{job.id}.{job.kind.value}"
        seen.add(job.id)


def read_manifests(path: Path | str, *, name: str | None = None, default_run_time: float | None = None) -> Workload:
    """Read a Kubernetes YAML workload (rules in the module docstring).

    Jobs are ordered by submit time, then by their order in the file. ``default_run_time``: the run time, in
    seconds, of a Pod or PodGroup member without the run-time annotation (``simulate --default-runtime``); None
    keeps KWOK's behaviour (it runs until deleted).
    """
    path = Path(path)
    builder = _Builder(path.name, [], [], {}, {}, {}, default_run_time)
    documents = list(load_documents(path))
    builder.group_times = _group_times(documents)
    classes = [isinstance(obj, dict) and obj.get("kind") == "PriorityClass" for _, obj in documents]
    ordered = [item for item, pc in zip(documents, classes, strict=True) if pc]
    ordered += [item for item, pc in zip(documents, classes, strict=True) if not pc]
    for where, obj in ordered:  # the classes before the pods they admit
        builder.add(where, obj)
    builder.finish()
    if not builder.kueue.objects:  # no Kueue to read the namespaces' labels: as any object it does not run
        builder.problems += [
            f"{path.name}: {at}: kind 'Namespace' is not a workload object; skipped" for at in builder.namespaces_at
        ]
        builder.skipped += len(builder.namespaces_at)
    jobs = sorted(builder.jobs, key=lambda job: job.submit_time)
    _unique_ids(jobs)
    for job in jobs:
        job.profile = images(job.pods)
    return Workload(
        name=name or workload_name(path),
        jobs=jobs,
        problems=builder.problems,
        skipped=builder.skipped,
        priority_classes=builder.policies.user_classes,
        budgets=list(builder.policies.budgets.values()),
        lifetimes=builder.policies.lifetimes,
        kueue=builder.kueue.objects or None,
        storage=builder.storage,
        devices=builder.devices,
        cluster_objects=builder.cluster_objects,
    )


__all__ = [
    "DELETE_TIME_ANNOTATION",
    "EXIT_CODE_ANNOTATION",
    "JITTER_ANNOTATION",
    "RUN_TIME_ANNOTATION",
    "SUBMIT_TIME_ANNOTATION",
    "YamlLoader",
    "images",
    "job_from_manifest",
    "load_documents",
    "pod_template",
    "read_manifests",
]
