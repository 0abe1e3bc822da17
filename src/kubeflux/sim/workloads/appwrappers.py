"""AppWrappers (``workload.codeflare.dev/v1beta2``) in a workload file: several Kubernetes objects that Kueue admits
as one workload, as its AppWrapper integration (built in and on by default since Kueue v0.11) treats them.

An AppWrapper lists its ``spec.components``; each is a ``template`` (the object to create) and optionally its
``podSets`` (where in the template its pod templates are, and how many pods each makes). Kueue's Workload for it has
one PodSet per component PodSet, so it asks what all its components' pods ask at once. It is suspended until
admitted; the AppWrapper controller then creates its components with the PodSets' flavors (node selector,
tolerations) and the label ``workload.codeflare.dev/appwrapper: <name>``, and the AppWrapper is done once every
component is.

Read here (:func:`app_wrapper_jobs`): each component becomes a workload job of the run, read as the file's own Jobs
and Pods are, in the AppWrapper's namespace, at the AppWrapper's ``sim.kubeflux.io/submit-time``, in the LocalQueue
its ``kueue.x-k8s.io/queue-name`` label names, with :attr:`~kubeflux.sim.workloads.model.WorkloadJob.app_wrapper`
saying which AppWrapper it belongs to: the admission layer (:mod:`kubeflux.sim.kueue.layer`) holds, admits, evicts
and releases them together. Supported components: ``batch/v1`` Job (its PodSet at ``template.spec.template``,
``parallelism`` pods) and ``v1`` Pod (at ``template``, 1 pod), the PodSets Kueue's AppWrapper integration infers for
them; ``podSets`` given must say the same. Another kind (a PyTorchJob, a RayCluster, a JobSet ...) is refused,
naming the field: the simulator has no controller to run it. A component rejected (a run time no kubelet can read)
rejects the whole AppWrapper, which could never run whole. Without Kueue objects in the run, or without a queue, the
components run at once, as the AppWrapper controller deploys an AppWrapper that Kueue does not suspend.

Not modelled: the AppWrapper controller's fault tolerance (its grace periods, and the reset that deletes and
re-creates every component after a failure, up to ``retryLimit``): a failed component ends as it would outside an
AppWrapper, and the AppWrapper is done once all its components ended. A component that finished before its AppWrapper
was evicted is not created again when it is re-admitted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubeflux.apiobjects.manifests import ManifestError
from kubeflux.apiobjects.rules import dns_label_problem, dns_subdomain_problem
from kubeflux.scheduler.objects import POD_GROUP_LABEL
from kubeflux.sim.kueue.objects import QUEUE_NAME_LABEL
from kubeflux.sim.kueue.reader import queue_label
from kubeflux.sim.workloads.limits import echo
from kubeflux.sim.workloads.model import SUBMIT_TIME_ANNOTATION, WorkloadJob, WrapperRef

API_VERSION: Final = "workload.codeflare.dev/v1beta2"
APP_WRAPPER_LABEL: Final = "workload.codeflare.dev/appwrapper"
"""The label the AppWrapper controller puts on the components it creates (and their pods): the AppWrapper's name."""
POD_SET_PATHS: Final = {("batch/v1", "Job"): "template.spec.template", ("v1", "Pod"): "template"}
"""Where the one PodSet of each supported kind of component is, as Kueue's AppWrapper integration infers it."""

ReadComponent = Callable[[str, dict[str, Any]], WorkloadJob]
"""Reads one component object (a Job or a Pod, said as ``where``) into its workload job, as the file's own are
read; raises :class:`ManifestError`."""


def _mapping(label: str, path: str, value: Any, required: bool = True) -> Mapping[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(label, path, "required" if value is None else f"expected a mapping, got {echo(value)}")
    return value


def _replicas(label: str, path: str, template: Mapping[str, Any], kind: str) -> int:
    """The pods the component's PodSet makes: a Job's ``parallelism`` (default 1), a Pod's 1."""
    if kind != "Job":
        return 1
    spec = template.get("spec")
    parallelism = spec.get("parallelism", 1) if isinstance(spec, dict) else 1
    if isinstance(parallelism, bool) or not isinstance(parallelism, int):
        raise ManifestError(label, f"{path}.spec.parallelism", f"expected an integer, got {echo(parallelism)}")
    return parallelism


def _check_pod_sets(label: str, path: str, component: Mapping[str, Any], inferred: str, replicas: int) -> None:
    """``podSets`` given must be the one PodSet Kueue infers for the component's kind."""
    given = component.get("podSets")
    if given is None:
        return
    if not isinstance(given, list) or len(given) != 1:
        raise ManifestError(label, f"{path}.podSets", f"must list the one PodSet at {inferred!r}, got {echo(given)}")
    pod_set = _mapping(label, f"{path}.podSets[0]", given[0])
    if pod_set.get("path") != inferred:
        raise ManifestError(label, f"{path}.podSets[0].path", f"must be {inferred!r}, got {echo(pod_set.get('path'))}")
    if pod_set.get("replicas", replicas) != replicas:
        problem = f"must be {replicas} (the pods the template makes), got {echo(pod_set.get('replicas'))}"
        raise ManifestError(label, f"{path}.podSets[0].replicas", problem)


def components(obj: Mapping[str, Any], label: str, namespace: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    """``(path, object)`` of each component of the AppWrapper ``obj`` (``label``: how messages name it), the object as
    the AppWrapper controller creates it: in ``namespace``, labelled with :data:`APP_WRAPPER_LABEL`, without a queue
    of its own, at the AppWrapper's submit time (its annotation copied; a component may not give one). Raises
    :class:`ManifestError` naming the field of a component the simulator cannot run or the AppWrapper webhook
    refuses."""
    spec = _mapping(label, "spec", obj.get("spec"))
    listed = spec.get("components")
    if not isinstance(listed, list) or not listed:
        raise ManifestError(label, "spec.components", f"must list at least one component, got {echo(listed)}")
    found = []
    for index, raw in enumerate(listed):
        path = f"spec.components[{index}]"
        component = _mapping(label, path, raw)
        template = _mapping(label, f"{path}.template", component.get("template"))
        kind, api = template.get("kind"), template.get("apiVersion")
        inferred = POD_SET_PATHS.get((api, kind)) if isinstance(api, str) and isinstance(kind, str) else None
        if inferred is None:
            supported = " and ".join(f"{a} {k}" for a, k in POD_SET_PATHS)
            what = f"{echo(kind)} ({echo(api)})"
            raise ManifestError(label, f"{path}.template.kind", f"{what} is not supported: only {supported} components")
        _check_pod_sets(label, path, component, inferred, _replicas(label, f"{path}.template", template, str(kind)))
        meta = dict(_mapping(label, f"{path}.template.metadata", template.get("metadata"), required=False))
        if meta.get("namespace", namespace) != namespace:
            problem = f"must be the AppWrapper's namespace {namespace!r}, got {echo(meta.get('namespace'))}"
            raise ManifestError(label, f"{path}.template.metadata.namespace", problem)
        annotations = dict(_mapping(label, f"{path}.template.metadata.annotations", meta.get("annotations"), False))
        if SUBMIT_TIME_ANNOTATION in annotations:
            problem = "a component is created when its AppWrapper is: give the AppWrapper's submit time"
            raise ManifestError(label, f"{path}.template.metadata.annotations.{SUBMIT_TIME_ANNOTATION}", problem)
        labels = dict(_mapping(label, f"{path}.template.metadata.labels", meta.get("labels"), False))
        pod_labels = labels
        if kind == "Job":
            pod_meta = _mapping(label, f"{path}.template.spec", template.get("spec")).get("template")
            pod_meta = pod_meta.get("metadata") if isinstance(pod_meta, dict) else None
            pod_labels = pod_meta.get("labels") or {} if isinstance(pod_meta, dict) else {}
        if POD_GROUP_LABEL in labels or (isinstance(pod_labels, dict) and POD_GROUP_LABEL in pod_labels):
            problem = "a PodGroup inside an AppWrapper is not supported: Kueue admits the AppWrapper whole"
            raise ManifestError(label, f"{path}.template: label {POD_GROUP_LABEL}", problem)
        submit = _mapping(label, "metadata", obj.get("metadata")).get("annotations") or {}
        if isinstance(submit, dict) and SUBMIT_TIME_ANNOTATION in submit:
            annotations[SUBMIT_TIME_ANNOTATION] = submit[SUBMIT_TIME_ANNOTATION]  # the AppWrapper's time
        labels.pop(QUEUE_NAME_LABEL, None)  # Kueue manages the AppWrapper, not the objects it owns
        labels[APP_WRAPPER_LABEL] = name
        meta.update(namespace=namespace, labels=labels, annotations=annotations)
        found.append((f"{path}.template", {**template, "metadata": meta}))
    return found


def app_wrapper_jobs(obj: Mapping[str, Any], where: str, read: ReadComponent) -> list[WorkloadJob]:
    """The workload jobs of the AppWrapper ``obj`` found at ``where`` (module docstring), each component read by
    ``read``. Raises :class:`ManifestError` naming the AppWrapper's field."""
    meta = _mapping("AppWrapper", "metadata", obj.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace") or "default"
    label = f"AppWrapper {namespace}/{name}"
    if obj.get("apiVersion") != API_VERSION:
        raise ManifestError(label, "apiVersion", f"expected {API_VERSION!r}, got {echo(obj.get('apiVersion'))}")
    if not isinstance(name, str) or not name:
        raise ManifestError(label, "metadata.name", "required")
    for field, value, rule in (
        ("metadata.name", name, dns_subdomain_problem(name)),
        ("metadata.namespace", namespace, dns_label_problem(str(namespace))),
    ):
        if rule is not None:
            raise ManifestError(label, field, f"{echo(value)}: {rule}")
    parts = components(obj, label, namespace, name)
    key, queue = f"{namespace}/{name}", queue_label(meta.get("labels"))
    jobs = []
    for index, (path, template) in enumerate(parts):
        try:
            job = read(f"{where}, {path}", template)
        except ManifestError as exc:
            raise ManifestError(label, f"{path}.{exc.path}" if exc.path else path, exc.problem) from exc
        job.queue_name = queue
        job.app_wrapper = WrapperRef(key, index, len(parts))
        jobs.append(job)
    bad = next((job for job in jobs if job.rejected), None)
    for job in jobs:
        if bad is not None and not job.rejected:
            job.rejected = f"its AppWrapper {key} has a rejected component ({bad.id}): it can never run whole"
    return jobs


__all__ = ["API_VERSION", "APP_WRAPPER_LABEL", "POD_SET_PATHS", "app_wrapper_jobs", "components"]
