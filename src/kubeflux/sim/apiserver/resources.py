"""The resources kubeflux serves and their strategies (see :mod:`kubeflux.sim.apiserver.registry`).

Validation reuses the scheduler's manifest readers (:mod:`kubeflux.scheduler.kube_objects`), so what the API
server accepts is what the scheduler and simulator can read; their ``ManifestError`` (object, field, problem)
becomes a 422 cause on the same field. Defaults are the real server's for the fields clients read back
(``schedulerName``, ``restartPolicy``, ``terminationGracePeriodSeconds``, a Job's selector and labels ...).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson

from kubeflux.scheduler.kube_objects import (
    ManifestError,
    node_from_manifest,
    pod_from_manifest,
    podgroup_from_manifest,
)
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.authorization import review_resources
from kubeflux.sim.apiserver.data_strategies import (
    ConfigMapStrategy,
    SecretStrategy,
    events_v1_causes,
    events_v1_update_causes,
    quantity_error,
)
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.pod_admission import admit_pod
from kubeflux.sim.apiserver.registry import (
    Registry,
    ResourceType,
    Strategy,
    dns_label_causes,
    path_segment_causes,
)

__all__ = ["EMPTY_COLLECTIONS", "FEATURE_GATES", "default_registry"]

Object = dict[str, Any]


def _manifest_causes(error: ManifestError, prefix: str = "") -> list[Cause]:
    problem = error.problem
    reason = "FieldValueRequired" if problem == "required" else "FieldValueInvalid"
    message = "Required value" if problem == "required" else f"Invalid value: {problem}"
    return [Cause(prefix + error.path, message, reason)]


def list_of_objects_causes(parent: Object, prefix: str, fields: tuple[str, ...]) -> list[Cause]:
    """Each of ``fields`` of ``parent``, when present, is a list of objects (what readers of it iterate)."""
    causes = []
    for field in fields:
        value = parent.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, dict) for v in value)):
            causes.append(Cause(f"{prefix}{field}", "Invalid value: must be a list of objects"))
    return causes


def objects_causes(parent: Object, prefix: str, fields: tuple[str, ...]) -> list[Cause]:
    """Each of ``fields`` of ``parent``, when present, is an object."""
    return [
        Cause(f"{prefix}{field}", "Invalid value: must be an object")
        for field in fields
        if parent.get(field) is not None and not isinstance(parent.get(field), dict)
    ]


_FORBIDDEN = "FieldValueForbidden"
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NODE_INFO = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)
"""``status.nodeInfo``'s strings, which Go writes even when empty."""


def _required(path: str) -> Cause:
    return Cause(path, "Required value", "FieldValueRequired")


# --- pods -----------------------------------------------------------------------------------------------------

_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
_RESTART_POLICIES = ("Always", "OnFailure", "Never")


def _default_container(container: Any) -> None:
    if not isinstance(container, dict):
        return
    image = container.get("image")
    if isinstance(image, str) and "imagePullPolicy" not in container:
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        container["imagePullPolicy"] = "IfNotPresent" if tagged and not image.endswith(":latest") else "Always"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})


def default_template_spec(spec: Object, *, restart_policy: bool = True) -> None:
    """The real server's defaults of a pod spec in a template (a Job's: its restart policy is not defaulted)."""
    if restart_policy:
        spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            _default_container(container)


def default_pod_spec(spec: Object) -> None:
    """The real server's defaults for the pod spec fields clients read back: a template's, and what a pod gets
    besides (``enableServiceLinks``, defaulted on pods only, and the Priority admission's fields)."""
    default_template_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)


def _condition_times(obj: Object, names: tuple[str, ...]) -> None:
    """Each status condition shows its times, ``null`` when unset (``metav1.Time`` is not a pointer)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict):
            for name in names:
                if name not in condition:
                    condition[name] = None


def pod_spec_causes(spec: Any, prefix: str, restart_policies: tuple[str, ...] = _RESTART_POLICIES) -> list[Cause]:
    """Containers present, named (unique DNS labels) and with an image; a known restart policy."""
    if not isinstance(spec, dict):
        return [_required(prefix.rstrip("."))]
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(_required(f"{prefix}containers"))
    names: set[str] = set()
    for field in ("containers", "initContainers"):
        items = spec.get(field) or []
        if not isinstance(items, list):
            causes.append(Cause(f"{prefix}{field}", "Invalid value: must be a list"))
            continue
        for index, container in enumerate(items):
            path = f"{prefix}{field}[{index}]"
            if not isinstance(container, dict):
                causes.append(Cause(path, "Invalid value: must be an object"))
                continue
            name = container.get("name")
            if not isinstance(name, str) or not name:
                causes.append(_required(f"{path}.name"))
            else:
                causes.extend(dns_label_causes(name, f"{path}.name"))
                if name in names:
                    causes.append(Cause(f"{path}.name", f"Duplicate value: {name!r}", "FieldValueDuplicate"))
                names.add(name)
            if not isinstance(container.get("image"), str) or not container.get("image"):
                causes.append(_required(f"{path}.image"))
    policy = spec.get("restartPolicy")
    if policy not in restart_policies:
        allowed = ", ".join(f'"{p}"' for p in restart_policies)
        causes.append(
            Cause(
                f"{prefix}restartPolicy",
                f"Unsupported value: {policy!r}: supported values: {allowed}",
                "FieldValueNotSupported",
            )
        )
    return causes


@functools.lru_cache(maxsize=4096)
def _pod_spec_causes(spec_json: bytes) -> tuple[Cause, ...]:
    """The causes of one pod spec, cached: pods of a Job or a trace share their spec, and reading a spec through
    the scheduler's manifest reader (the check that it is readable) is most of the cost of a create."""
    spec = orjson.loads(spec_json)
    causes = pod_spec_causes(spec, "spec.")
    if causes:
        return tuple(causes)
    try:
        pod_from_manifest(_pod_view("pod", "default", spec))
    except ManifestError as exc:
        return tuple(_manifest_causes(exc))
    return ()


def _pod_view(name: str, namespace: str, spec: Object) -> Object:
    return {"kind": "Pod", "metadata": {"name": name or "pod", "namespace": namespace}, "spec": spec}


class PodStrategy(Strategy):
    has_status = True
    tracks_generation = True
    returns_deleted_object = True
    graceful_delete = True
    fields = frozenset(
        {
            "spec.nodeName",
            "spec.schedulerName",
            "status.phase",
            "spec.restartPolicy",
            "spec.serviceAccountName",
            "status.podIP",
            "status.nominatedNodeName",
            "spec.hostNetwork",
        }
    )

    def decode_error(self, obj: Object) -> str:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return ""
        for field in ("containers", "initContainers"):
            items = spec.get(field)
            for container in items if isinstance(items, list) else ():
                resources = container.get("resources") if isinstance(container, dict) else None
                if isinstance(resources, dict):
                    problem = quantity_error(resources.get("requests")) or quantity_error(resources.get("limits"))
                    if problem:
                        return problem
        return ""

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_pod_spec(spec)
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec if isinstance(spec, dict) else {})}

    def canonicalize(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and None in spec.values():  # nil pointers, left out (a null token automount)
            for key in [k for k, v in spec.items() if v is None]:
                del spec[key]
        _condition_times(obj, ("lastProbeTime", "lastTransitionTime"))

    def admit(self, obj: Object, lookup: Callable[[str, str, str], Object | None]) -> None:
        """The mutating admission plugins (:func:`admit_pod`) and Priority: ``spec.priority`` from
        ``spec.priorityClassName``."""
        spec = obj["spec"]
        admit_pod(obj)
        name = spec.get("priorityClassName")
        if not name:
            return
        found = lookup("scheduling.k8s.io/priorityclasses", "", name) if isinstance(name, str) else None
        if found is None:
            raise errors.forbidden(
                f'pods "{obj["metadata"]["name"]}" is forbidden: no PriorityClass with name {name} was found'
            )
        spec["priority"] = found.get("value", 0)

    def validate(self, obj: Object) -> list[Cause]:
        causes = _pod_status_causes(obj)
        if causes:
            return causes
        return list(_pod_spec_causes(orjson.dumps(obj.get("spec"), option=orjson.OPT_SORT_KEYS)))

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        spec = new.get("spec")
        if spec is not None and spec is old.get("spec"):  # a status write keeps the stored (valid) spec itself
            return _pod_status_causes(new)
        if isinstance(spec, dict):
            default_pod_spec(spec)
        causes = self.validate(new)
        if causes:
            return causes
        old_spec = old.get("spec", {})
        new_spec = new.get("spec", {})
        if len(new_spec.get("containers") or ()) != len(old_spec.get("containers") or ()):
            return [Cause("spec.containers", "Forbidden: pod updates may not add or remove containers", _FORBIDDEN)]
        if _frozen_pod_spec(new_spec) != _frozen_pod_spec(old_spec):
            message = (
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                "existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)"
            )
            return [Cause("spec", message, "FieldValueForbidden")]
        return []

    def grace_seconds(self, obj: Object, requested: int | None) -> int:
        if not obj.get("spec", {}).get("nodeName"):
            return 0
        if obj.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is None:
            requested = obj.get("spec", {}).get("terminationGracePeriodSeconds", 30)
        if not isinstance(requested, int):
            return 30
        return max(requested, 0)


def _pod_status_causes(obj: Object) -> list[Cause]:
    status = obj.get("status")
    if not isinstance(status, dict):
        return [Cause("status", "Invalid value: must be an object")]
    phase = status.get("phase")
    if phase is not None and not isinstance(phase, str):  # any string: the real server takes a phase it does not know
        return [Cause("status.phase", f"Unsupported value: {phase!r}", "FieldValueNotSupported")]
    return list_of_objects_causes(status, "status.", ("conditions", "containerStatuses", "initContainerStatuses"))


def _frozen_pod_spec(spec: Object) -> Object:
    frozen = {k: v for k, v in spec.items() if k not in _POD_MUTABLE}
    for field in ("containers", "initContainers"):
        if isinstance(frozen.get(field), list):
            frozen[field] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in frozen[field]
            ]
    return frozen


def _qos_class(spec: Object) -> str:
    requests_seen = False
    guaranteed = True
    for container in spec.get("containers") or ():
        if not isinstance(container, dict):
            continue
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {} if isinstance(resources, dict) else {}
        limits = resources.get("limits") or {} if isinstance(resources, dict) else {}
        if requests or limits:
            requests_seen = True
        for name in ("cpu", "memory"):
            if name not in limits or (name in requests and requests[name] != limits[name]):
                guaranteed = False
    if not requests_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# --- nodes, namespaces, pod groups ---------------------------------------------------------------------------


class NodeStrategy(Strategy):
    has_status = True
    keep_status_on_create = True
    fields = frozenset({"spec.unschedulable"})

    def decode_error(self, obj: Object) -> str:
        status = obj.get("status")
        if not isinstance(status, dict):
            return ""
        return quantity_error(status.get("capacity")) or quantity_error(status.get("allocatable"))

    def canonicalize(self, obj: Object) -> None:
        if obj.get("spec") is None:
            obj["spec"] = {}
        if obj.get("status") is None:
            obj["status"] = {}
        status = obj["status"]
        if not isinstance(status, dict):
            return
        if status.get("daemonEndpoints") is None:
            status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 0}}
        info = status.get("nodeInfo")
        if info is None:
            status["nodeInfo"] = dict.fromkeys(_NODE_INFO, "")
        elif isinstance(info, dict) and len(info) < len(_NODE_INFO):
            for key in _NODE_INFO:
                info.setdefault(key, "")
        _condition_times(obj, ("lastHeartbeatTime", "lastTransitionTime"))

    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec")
        taints = spec.get("taints") if isinstance(spec, dict) else None
        causes = []
        for index, taint in enumerate(taints if isinstance(taints, list) else ()):
            effect = taint.get("effect") if isinstance(taint, dict) else None
            if effect not in _TAINT_EFFECTS:  # the real server names the path metadata.taints, and so do we
                supported = ", ".join(f'"{e}"' for e in _TAINT_EFFECTS)
                message = f'Unsupported value: "{effect}": supported values: {supported}'
                causes.append(Cause(f"metadata.taints[{index}].effect", message, "FieldValueNotSupported"))
        if causes:
            return causes
        try:
            node_from_manifest(obj)
        except ManifestError as exc:
            return _manifest_causes(exc)
        return []


class NamespaceStrategy(Strategy):
    has_status = True
    delete_collection = False
    fields = frozenset({"status.phase"})
    name_causes = staticmethod(dns_label_causes)

    def prepare_create(self, obj: Object, now: str) -> None:
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        if isinstance(labels, dict):
            labels.setdefault("kubernetes.io/metadata.name", obj["metadata"]["name"])


class PodGroupStrategy(Strategy):
    has_status = True
    tracks_generation = True

    def validate(self, obj: Object) -> list[Cause]:
        try:
            podgroup_from_manifest(obj)
        except ManifestError as exc:
            return _manifest_causes(exc)
        return []


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

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        meta = obj["metadata"]
        if "completions" not in spec and "parallelism" not in spec:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
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
            return [_required("spec")]
        causes: list[Cause] = []
        for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            value = spec.get(field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                causes.append(Cause(f"spec.{field}", f"Invalid value: {value!r}: must be greater than or equal to 0"))
        if spec.get("completionMode") not in ("NonIndexed", "Indexed"):
            causes.append(
                Cause(
                    "spec.completionMode",
                    f"Unsupported value: {spec.get('completionMode')!r}",
                    "FieldValueNotSupported",
                )
            )
        template = spec.get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            return [*causes, _required("spec.template.spec")]
        if template["spec"].get("restartPolicy") in (None, ""):
            causes.append(_required("spec.template.spec.restartPolicy"))
        else:
            causes.extend(pod_spec_causes(template["spec"], "spec.template.spec.", ("OnFailure", "Never")))
        if not causes:
            meta = obj["metadata"]
            try:
                pod_from_manifest(_pod_view(meta.get("name", ""), meta.get("namespace", ""), template["spec"]))
            except ManifestError as exc:
                causes.extend(_manifest_causes(exc, "spec.template."))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        new_spec, old_spec = new.get("spec", {}), old.get("spec", {})
        for field in ("selector", "template", "completionMode"):
            if isinstance(new_spec, dict) and new_spec.get(field) != old_spec.get(field):
                causes.append(Cause(f"spec.{field}", "Invalid value: field is immutable"))
        if isinstance(new_spec, dict) and isinstance(old_spec, dict):
            causes.extend(_completions_update_causes(new_spec, old_spec))
        return causes


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


# --- leases, configmaps, priority classes, events -----------------------------------------------------------


class LeaseStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        if not isinstance(spec, dict):
            return [Cause("spec", "Invalid value: must be an object")]
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0):
            return [Cause("spec.leaseDurationSeconds", f"Invalid value: {duration!r}: must be greater than 0")]
        return []


class PriorityClassStrategy(Strategy):
    tracks_generation = True

    def prepare_create(self, obj: Object, now: str) -> None:
        obj.setdefault("value", 0)
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def validate(self, obj: Object) -> list[Cause]:
        value = obj.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            return [_required("value")]
        if value > 1_000_000_000 and not obj["metadata"]["name"].startswith("system-"):
            message = "Forbidden: maximum allowed value of a user defined priority is 1000000000"
            return [Cause("value", message, _FORBIDDEN)]
        return []

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        if new.get("value") != old.get("value"):
            return [Cause("value", "Forbidden: may not be changed in an update.", "FieldValueForbidden")]
        return self.validate(new)


class EventStrategy(Strategy):
    name_causes = staticmethod(path_segment_causes)

    def canonicalize(self, obj: Object) -> None:
        for field in ("eventTime", "firstTimestamp", "lastTimestamp"):
            if field not in obj:
                obj[field] = None
        for field in ("reportingComponent", "reportingInstance"):
            if obj.get(field) is None:
                obj[field] = ""
        for field in ("involvedObject", "source"):
            if obj.get(field) is None:
                obj[field] = {}

    def validate(self, obj: Object) -> list[Cause]:
        causes = objects_causes(obj, "", ("involvedObject", "source", "series", "related"))
        involved = obj.get("involvedObject")
        namespace = involved.get("namespace") if isinstance(involved, dict) else None
        if namespace and namespace != obj["metadata"].get("namespace"):
            causes.append(
                Cause("involvedObject.namespace", f'Invalid value: "{namespace}": does not match event.namespace')
            )
        for field in ("reason", "message", "type", "reportingComponent", "reportingInstance", "action"):
            if obj.get(field) is not None and not isinstance(obj.get(field), str):
                causes.append(Cause(field, "Invalid value: must be a string"))
        count = obj.get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            causes.append(Cause("count", "Invalid value: must be an integer"))
        return causes

    fields = frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    )


class EventsV1Strategy(EventStrategy):
    def validate(self, obj: Object) -> list[Cause]:
        return super().validate(obj) + events_v1_causes(obj)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return events_v1_update_causes(new, old) + super().validate(new)

    fields = frozenset(
        {
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        }
    )


_EVENT_FIELDS = (  # (events.k8s.io/v1, core/v1)
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
_EVENT_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


_EVENT_V1_ZERO: tuple[tuple[str, Any], ...] = (
    ("eventTime", None),
    ("deprecatedSource", {}),
    ("deprecatedFirstTimestamp", None),
    ("deprecatedLastTimestamp", None),
)
"""What events.k8s.io/v1 shows though unset (Go structs that are not pointers)."""


def event_v1_from_core(obj: Object) -> Object:
    """A stored core/v1 Event as events.k8s.io/v1 shows it (the real server's conversion)."""
    view: Object = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for field in _EVENT_SAME:
        value = obj.get(field)
        if value is not None and value != "":
            view[field] = value
    for new, old in _EVENT_FIELDS:
        if obj.get(old) not in (None, "", {}, 0):
            view[new] = obj[old]
    for field, zero in _EVENT_V1_ZERO:
        view.setdefault(field, dict(zero) if isinstance(zero, dict) else zero)
    return view


def core_event_from_v1(obj: Object) -> Object:
    stored: Object = {"apiVersion": "v1", "kind": "Event"}
    for field in _EVENT_SAME:
        if obj.get(field) is not None:
            stored[field] = obj[field]
    for new, old in _EVENT_FIELDS:
        if obj.get(new) is not None:
            stored[old] = obj[new]
    return stored


# --- the registry ---------------------------------------------------------------------------------------------

EMPTY_COLLECTIONS: tuple[tuple[str, str, str, str, bool, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", "v1", "services", "Service", True, ("svc",), ("all",)),
    ("", "v1", "replicationcontrollers", "ReplicationController", True, ("rc",), ("all",)),
    ("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",), ()),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",), ()),
    ("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",), ("all",)),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",), ("all",)),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",), ()),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",), ()),
    ("storage.k8s.io", "v1", "csinodes", "CSINode", False, (), ()),
    ("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, (), ()),
    ("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True, (), ()),
    ("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, (), ()),
    ("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, (), ()),
    ("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, (), ()),
    ("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, (), ()),
)
"""What kube-scheduler v1.36 watches at start and kubeflux does not model.

(group, version, plural, kind, namespaced, short names, categories), as the real server's discovery has them."""


FEATURE_GATES = ("GenericWorkload",)
"""The feature gates the served cluster knows (all off by default, as in Kubernetes v1.36)."""


def default_registry(*, generic_workload: bool = False) -> Registry:
    """Every resource the simulated cluster serves; with ``generic_workload`` (the ``GenericWorkload`` gate),
    Kubernetes' own gang API too."""
    events = EventStrategy()
    resources = [
        ResourceType(
            "", "v1", "namespaces", "Namespace", False, NamespaceStrategy(), ("ns",), (), ("finalize", "status")
        ),
        ResourceType("", "v1", "nodes", "Node", False, NodeStrategy(), ("no",), (), ("status",)),
        ResourceType(
            "", "v1", "pods", "Pod", True, PodStrategy(), ("po",), ("all",), ("status", "binding", "eviction", "log")
        ),
        ResourceType("", "v1", "bindings", "Binding", True, create_only=True),
        ResourceType("", "v1", "events", "Event", True, events, ("ev",)),
        ResourceType("", "v1", "configmaps", "ConfigMap", True, ConfigMapStrategy(), ("cm",)),
        ResourceType("", "v1", "secrets", "Secret", True, SecretStrategy()),
        ResourceType("batch", "v1", "jobs", "Job", True, JobStrategy(), (), ("all",), ("status",)),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, LeaseStrategy()),
        ResourceType(
            "events.k8s.io",
            "v1",
            "events",
            "Event",
            True,
            EventsV1Strategy(),
            ("ev",),
            (),
            (),
            storage="/events",
            to_view=event_v1_from_core,
            from_view=core_event_from_v1,
        ),
        ResourceType(
            "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, PriorityClassStrategy(), ("pc",)
        ),
        ResourceType(
            "scheduling.x-k8s.io",
            "v1alpha1",
            "podgroups",
            "PodGroup",
            True,
            PodGroupStrategy(),
            ("pg", "pgs"),
            (),
            ("status",),
        ),
    ]
    if generic_workload:
        # Kubernetes' own gang API as v1.36 serves it with the gate on (kubectl's `podgroup` then means this one, as
        # on a real cluster): pods name their group in spec.schedulingGroup.podGroupName; no status is written here
        resources += [
            ResourceType(
                "scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, PodGroupStrategy(), (), (), ("status",)
            ),
            ResourceType("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True, WorkloadStrategy()),
        ]
    resources += review_resources()
    resources.extend(
        ResourceType(group, version, plural, kind, namespaced, Strategy(), short, categories, read_only_empty=True)
        for group, version, plural, kind, namespaced, short, categories in EMPTY_COLLECTIONS
    )
    return Registry(resources)
