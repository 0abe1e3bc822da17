"""Strategies of the core resources the scheduler reads: pods, nodes and namespaces (see
:mod:`kubeflux.sim.apiserver.registry`).

Validation reuses the scheduler's manifest readers (:mod:`kubeflux.apiobjects.manifests`), so what the API
server accepts is what the scheduler and simulator can read; their ``ManifestError`` (object, field, problem)
becomes a 422 cause on the same field. Defaults are the real server's for the fields clients read back
(``schedulerName``, ``restartPolicy``, ``terminationGracePeriodSeconds`` ...).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

import orjson

from kubeflux.apiobjects.manifests import ManifestError, node_from_manifest, pod_from_manifest
from kubeflux.apiobjects.priority import PriorityClass, PriorityRefused, admit_priority, default_class
from kubeflux.apiobjects.rules import int_decode_error
from kubeflux.scheduler.objects import DEFAULT_SCHEDULER
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.data_strategies import quantity_error
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.gates import gate_causes, gated_condition, gated_update, gates_decode_error
from kubeflux.sim.apiserver.pod_admission import admit_pod
from kubeflux.sim.apiserver.registry import (
    PRIORITY_CLASSES,
    Lookup,
    Object,
    Strategy,
    dns_label_causes,
    list_of_objects_causes,
    required,
)

__all__ = [
    "NamespaceStrategy",
    "NodeStrategy",
    "PodStrategy",
    "condition_times",
    "default_pod_spec",
    "default_template_spec",
    "manifest_causes",
    "pod_spec_causes",
    "pod_view",
    "unreadable_causes",
]


_WORDED: Final = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value: ", "FieldValueNotSupported"),
    ("Duplicate value: ", "FieldValueDuplicate"),
    ("Forbidden: ", "FieldValueForbidden"),
    ("Invalid value: ", "FieldValueInvalid"),
)
"""The problems a reader words as the real server does (their start, and the cause's reason)."""


def manifest_causes(error: ManifestError, prefix: str = "") -> list[Cause]:
    """The cause the real server gives for what the reader refused: a required value, a problem the reader says in
    the server's words (:data:`_WORDED`), else an invalid one."""
    problem = error.problem
    if problem == "required":
        return [Cause(prefix + error.path, "Required value", "FieldValueRequired")]
    for start, reason in _WORDED:
        if problem.startswith(start):
            return [Cause(prefix + error.path, problem, reason)]
    return [Cause(prefix + error.path, f"Invalid value: {problem}", "FieldValueInvalid")]


def unreadable_causes(read: Callable[[Object], object], obj: Object, prefix: str = "") -> list[Cause]:
    """What the scheduler's reader ``read`` (:func:`node_from_manifest`, …) finds wrong with ``obj`` (its paths
    after ``prefix``): none when it reads it."""
    try:
        read(obj)
    except ManifestError as exc:
        return manifest_causes(exc, prefix)
    return []


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
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("securityContext", {})
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            _default_container(container)


def default_pod_spec(spec: Object) -> None:
    """The real server's defaults for the pod spec fields clients read back: a template's, and what a pod gets
    besides (``enableServiceLinks``, defaulted on pods only). The Priority admission's fields are set on create
    (:meth:`PodStrategy.admit`) and kept on update."""
    default_template_spec(spec)
    spec.setdefault("enableServiceLinks", True)


def condition_times(obj: Object, names: tuple[str, ...]) -> None:
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
        return [required(prefix.rstrip("."))]
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(required(f"{prefix}containers"))
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
                causes.append(required(f"{path}.name"))
            else:
                causes.extend(dns_label_causes(name, f"{path}.name"))
                if name in names:
                    causes.append(Cause(f"{path}.name", f"Duplicate value: {name!r}", "FieldValueDuplicate"))
                names.add(name)
            if not isinstance(container.get("image"), str) or not container.get("image"):
                causes.append(required(f"{path}.image"))
    policy = spec.get("restartPolicy")
    if policy not in restart_policies:
        causes.append(errors.not_supported(f"{prefix}restartPolicy", policy, restart_policies))
    return causes


@functools.lru_cache(maxsize=4096)
def _pod_spec_causes(spec_json: bytes) -> tuple[Cause, ...]:
    """The causes of one pod spec, cached: pods of a Job or a trace share their spec, and reading a spec through
    the scheduler's manifest reader (the check that it is readable) is most of the cost of a create."""
    spec = orjson.loads(spec_json)
    causes = pod_spec_causes(spec, "spec.")
    return tuple(causes or unreadable_causes(pod_from_manifest, pod_view("pod", "default", spec)))


def pod_view(name: str, namespace: str, spec: Object) -> Object:
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
        for name, go_type in (("priority", "int32"), ("activeDeadlineSeconds", "int64")):
            problem = int_decode_error("PodSpec", f"spec.{name}", spec.get(name), go_type)
            if problem:
                return problem
        problem = gates_decode_error(spec)
        if problem:
            return problem
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
        gated_condition(obj, now)

    def canonicalize(self, obj: Object) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and None in spec.values():  # nil pointers, left out (a null token automount)
            for key in [k for k, v in spec.items() if v is None]:
                del spec[key]
        if isinstance(spec, dict) and spec.get("schedulingGates") == []:  # an empty list is Go's nil slice: left out
            del spec["schedulingGates"]
        condition_times(obj, ("lastProbeTime", "lastTransitionTime"))

    def admit(self, obj: Object, lookup: Lookup) -> None:
        """The mutating admission plugins (:func:`admit_pod`) and Priority (:func:`admit_priority`: the pod's
        class, or the global default one, gives ``spec.priority`` and ``spec.preemptionPolicy``)."""
        spec = obj["spec"]
        admit_pod(obj)

        def find(name: str) -> PriorityClass | None:
            found = lookup.get(PRIORITY_CLASSES, "", name)
            return None if found is None else PriorityClass.from_object(found)

        default = None
        if not spec.get("priorityClassName"):
            default = default_class(PriorityClass.from_object(pc) for pc in lookup.every(PRIORITY_CLASSES))
        try:
            admit_priority(spec, find, default)
        except PriorityRefused as refused:
            raise errors.forbidden(f'pods "{obj["metadata"]["name"]}" is forbidden: {refused}') from None

    def validate(self, obj: Object) -> list[Cause]:
        return self._causes(obj, create=True)

    def _causes(self, obj: Object, *, create: bool) -> list[Cause]:
        causes = _pod_status_causes(obj)
        if causes:
            return causes
        causes = list(_pod_spec_causes(orjson.dumps(obj.get("spec"), option=orjson.OPT_SORT_KEYS)))
        return causes or gate_causes(obj.get("spec"), create=create)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        spec = new.get("spec")
        if spec is not None and spec is old.get("spec"):  # a status write keeps the stored (valid) spec itself
            return _pod_status_causes(new)
        old_spec = old.get("spec", {})
        if isinstance(spec, dict):
            default_pod_spec(spec)
            for field in ("priority", "preemptionPolicy"):  # what Priority admission set on create stays
                if spec.get(field) is None and field in old_spec:
                    spec[field] = old_spec[field]
        causes = self._causes(new, create=False)
        if causes:
            return causes
        new_spec = new.get("spec", {})
        if len(new_spec.get("containers") or ()) != len(old_spec.get("containers") or ()):
            return [Cause("spec.containers", "Forbidden: pod updates may not add or remove containers", _FORBIDDEN)]
        causes, new_spec = gated_update(new_spec, old_spec)  # told beside any other change, as the real server does
        if _frozen_pod_spec(new_spec) != _frozen_pod_spec(old_spec):
            message = (
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                "existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                "previously negative)"
            )
            causes.append(Cause("spec", message, "FieldValueForbidden"))
        return causes

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
        condition_times(obj, ("lastHeartbeatTime", "lastTransitionTime"))

    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec")
        taints = spec.get("taints") if isinstance(spec, dict) else None
        causes = []
        for index, taint in enumerate(taints if isinstance(taints, list) else ()):
            effect = taint.get("effect") if isinstance(taint, dict) else None
            if effect not in _TAINT_EFFECTS:  # the real server names the path metadata.taints, and so do we
                causes.append(errors.not_supported(f"metadata.taints[{index}].effect", effect, _TAINT_EFFECTS))
        if causes:
            return causes
        return unreadable_causes(node_from_manifest, obj)


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
