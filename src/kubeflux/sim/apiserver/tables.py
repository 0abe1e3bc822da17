"""Server-side printing: the ``meta.k8s.io/v1`` ``Table`` kubectl asks for (``Accept: ...;as=Table``).

``kubectl get`` prints the columns the server sends; without them it shows only NAME and AGE. The columns here are
the real server's printers (``pkg/printers/internalversion``) for the resources kubeflux models; others get NAME and
AGE, as a CRD without ``additionalPrinterColumns``. Ages are rendered by the server, as the real one does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.registry import ResourceType

__all__ = ["TABLE_MEDIA", "human_duration", "table", "wants_table"]

Object = dict[str, Any]
TABLE_MEDIA = "as=Table"
Column = tuple[str, str, int, Callable[[Object, float], Any]]
"""(name, type, priority, cell)."""


def wants_table(accept: str) -> bool:
    return TABLE_MEDIA in accept


def _with_rest(small: int, per: int, unit: str, small_unit: str) -> str:
    """``small`` units as whole ``unit``s of ``per`` each and the rest, if any: ``5m30s``, ``3h``."""
    whole, rest = divmod(small, per)
    return f"{whole}{unit}{rest}{small_unit}" if rest else f"{whole}{unit}"


def human_duration(seconds: float) -> str:
    """``kubectl``'s short duration: ``45s``, ``5m``, ``3h``, ``2d``, ``3y`` (as duration.HumanDuration)."""
    seconds = max(int(seconds), 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return _with_rest(seconds, 60, "m", "s")
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return _with_rest(minutes, 60, "h", "m")
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return _with_rest(hours, 24, "d", "h")
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _since(text: Any, now: float) -> str:
    if not isinstance(text, str) or not text:
        return "<unknown>"
    try:
        return human_duration(now - parse_timestamp(text))
    except ValueError:
        return "<unknown>"


def _name(obj: Object, now: float) -> Any:
    return obj.get("metadata", {}).get("name", "")


def _age(obj: Object, now: float) -> str:
    return _since(obj.get("metadata", {}).get("creationTimestamp"), now)


def _pod_status(obj: Object, now: float) -> str:
    status = obj.get("status", {})
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or ():
        state = container.get("state", {})
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
    if obj.get("metadata", {}).get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _pod_ready(obj: Object, now: float) -> str:
    containers = obj.get("spec", {}).get("containers") or ()
    statuses = obj.get("status", {}).get("containerStatuses") or ()
    return f"{sum(1 for s in statuses if s.get('ready'))}/{len(containers)}"


def _pod_restarts(obj: Object, now: float) -> str:
    return str(sum(int(s.get("restartCount", 0)) for s in obj.get("status", {}).get("containerStatuses") or ()))


def _pod_readiness_gates(obj: Object, now: float) -> str:
    gates = obj.get("spec", {}).get("readinessGates") or ()
    if not gates:
        return "<none>"
    true = {c.get("type") for c in obj.get("status", {}).get("conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _node_status(obj: Object, now: float) -> str:
    ready = next((c for c in obj.get("status", {}).get("conditions") or () if c.get("type") == "Ready"), None)
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if obj.get("spec", {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: Object, now: float) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in obj.get("metadata", {}).get("labels", {}) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _node_address(kind: str) -> Callable[[Object, float], str]:
    def cell(obj: Object, now: float) -> str:
        addresses = obj.get("status", {}).get("addresses") or ()
        return next((str(a.get("address")) for a in addresses if a.get("type") == kind), "<none>")

    return cell


def _job_status(obj: Object, now: float) -> str:
    true = {c.get("type") for c in obj.get("status", {}).get("conditions") or () if c.get("status") == "True"}
    for condition in ("Complete", "Failed"):
        if condition in true:
            return condition
    if obj.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    for condition in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if condition in true:
            return condition
    return "Running"


def _job_completions(obj: Object, now: float) -> str:
    completions = obj.get("spec", {}).get("completions")
    succeeded = obj.get("status", {}).get("succeeded", 0)
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = obj.get("spec", {}).get("parallelism") or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(obj: Object, now: float) -> str:
    status = obj.get("status", {})
    start, end = status.get("startTime"), status.get("completionTime")
    if not start:
        return ""
    if not end:
        return _since(start, now)
    return human_duration(parse_timestamp(end) - parse_timestamp(start))


def _containers(*path: str, field: str) -> Callable[[Object, float], str]:
    def cell(obj: Object, now: float) -> str:
        node: Any = obj
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return ",".join(str(c.get(field, "")) for c in (node or {}).get("containers") or ())

    return cell


def _selector(obj: Object, now: float) -> str:
    """``metav1.FormatLabelSelector`` of ``spec.selector`` (matchLabels and the simple expressions)."""
    selector = obj.get("spec", {}).get("selector")
    if not selector:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        key, op, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _event_object(obj: Object, now: float) -> str:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    kind = str(involved.get("kind", "")).lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def _event_first_seen(obj: Object, now: float) -> str:
    return _since(obj.get("firstTimestamp") or obj.get("eventTime"), now)


def _event_last_seen(obj: Object, now: float) -> str:
    series = obj.get("series")
    if isinstance(series, dict) and series.get("lastObservedTime"):
        return _since(series["lastObservedTime"], now)
    return _since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else _event_first_seen(obj, now)


def _event_source(obj: Object, now: float) -> str:
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {instance}" if instance else str(component)


def _event_count(obj: Object, now: float) -> int:
    series = obj.get("series")
    if isinstance(series, dict):
        return int(series.get("count") or 0)
    return int(obj.get("count") or 0) or 1


def _path(*keys: str, default: Any = "<none>") -> Callable[[Object, float], Any]:
    def cell(obj: Object, now: float) -> Any:
        node: Any = obj
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return default if node in (None, "") else node

    return cell


def _quota_column(limits: bool) -> Callable[[Object, float], str]:
    """A ResourceQuota's ``Request`` or ``Limit`` cell: ``name: used/hard`` for each resource its status limits (the
    ``limits.`` ones in ``Limit``), by name, as ``printResourceQuota`` writes them."""

    def cell(obj: Object, now: float) -> str:
        status = obj.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        names = [n for n in sorted(hard) if (n.split(".", 1)[0] == "limits" and "." in n) == limits]
        return ", ".join(f"{n}: {used.get(n, '0')}/{hard[n]}" for n in names)

    return cell


def _condition(kind: str) -> Callable[[Object, float], str]:
    """The status of the object's condition ``kind`` (a CRD's ``.status.conditions[?(@.type=='<kind>')].status``)."""

    def cell(obj: Object, now: float) -> str:
        found = [c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == kind]
        return str(found[0].get("status", "")) if found else ""

    return cell


_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP"))


def _access_modes(*keys: str) -> Callable[[Object, float], str]:
    """Access modes as ``GetAccessModesAsString`` writes them (``RWO,RWX``, in that order)."""
    modes = _path(*keys, default=[])

    def cell(obj: Object, now: float) -> str:
        have = modes(obj, now)
        return ",".join(short for mode, short in _MODES if mode in have)

    return cell


def _claim(obj: Object, now: float) -> str:
    ref = (obj.get("spec") or {}).get("claimRef") or {}
    return f"{ref.get('namespace')}/{ref.get('name')}" if ref else ""


def _claim_status(obj: Object, now: float) -> str:
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    return str((obj.get("status") or {}).get("phase") or "")


def _storage_class_name(obj: Object, now: float) -> str:
    name = str(obj["metadata"]["name"])
    default = (obj["metadata"].get("annotations") or {}).get("storageclass.kubernetes.io/is-default-class")
    return f"{name} (default)" if default == "true" else name


def _columns(*specs: str) -> list[Column]:
    """Columns of the empty collections, by name (``Name:type:priority``): their cells are never asked for."""
    built: list[Column] = []
    for spec in specs:
        name, type_, priority = spec.split(":")
        built.append(_NAME if name == "Name" else _AGE if name == "Age" else (name, type_, int(priority), _blank))
    return built


def _blank(obj: Object, now: float) -> str:
    return ""


_NAME: Column = ("Name", "string", 0, _name)
_AGE: Column = ("Age", "string", 0, _age)
_EVENTS: list[Column] = [
    ("Last Seen", "string", 0, _event_last_seen),
    ("Type", "string", 0, _path("type", default="")),
    ("Reason", "string", 0, _path("reason", default="")),
    ("Object", "string", 0, _event_object),
    ("Subobject", "string", 1, _path("involvedObject", "fieldPath", default="")),
    ("Source", "string", 1, _event_source),
    ("Message", "string", 0, lambda o, now: str(o.get("message") or "").strip()),
    ("First Seen", "string", 1, _event_first_seen),
    ("Count", "string", 1, _event_count),
    ("Name", "string", 1, _name),
]
_WORKLOAD = ("Name:string:0", "Desired:integer:0", "Current:integer:0", "Ready:integer:0", "Age:string:0")
_WORKLOAD_WIDE = ("Containers:string:1", "Images:string:1", "Selector:string:1")
COLUMNS: dict[str, list[Column]] = {
    "/pods": [
        _NAME,
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "string", 0, _pod_restarts),
        _AGE,
        ("IP", "string", 1, _path("status", "podIP")),
        ("Node", "string", 1, _path("spec", "nodeName")),
        ("Nominated Node", "string", 1, _path("status", "nominatedNodeName")),
        ("Readiness Gates", "string", 1, _pod_readiness_gates),
    ],
    "/nodes": [
        _NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        ("Version", "string", 0, _path("status", "nodeInfo", "kubeletVersion", default="")),
        ("Internal-IP", "string", 1, _node_address("InternalIP")),
        ("External-IP", "string", 1, _node_address("ExternalIP")),
        ("OS-Image", "string", 1, _path("status", "nodeInfo", "osImage", default="<unknown>")),
        ("Kernel-Version", "string", 1, _path("status", "nodeInfo", "kernelVersion", default="<unknown>")),
        ("Container-Runtime", "string", 1, _path("status", "nodeInfo", "containerRuntimeVersion", default="<unknown>")),
    ],
    "/namespaces": [_NAME, ("Status", "string", 0, _path("status", "phase", default="")), _AGE],
    "/events": _EVENTS,
    "batch/jobs": [
        _NAME,
        ("Status", "string", 0, _job_status),
        ("Completions", "string", 0, _job_completions),
        ("Duration", "string", 0, _job_duration),
        _AGE,
        ("Containers", "string", 1, _containers("spec", "template", "spec", field="name")),
        ("Images", "string", 1, _containers("spec", "template", "spec", field="image")),
        ("Selector", "string", 1, _selector),
    ],
    "/resourcequotas": [
        _NAME,
        ("Request", "string", 0, _quota_column(False)),
        ("Limit", "string", 0, _quota_column(True)),
        _AGE,
    ],
    "/configmaps": [_NAME, ("Data", "integer", 0, lambda o, now: len(o.get("data") or {})), _AGE],
    "/secrets": [
        _NAME,
        ("Type", "string", 0, _path("type", default="")),
        ("Data", "string", 0, lambda o, now: len(o.get("data") or {})),
        _AGE,
    ],
    "coordination.k8s.io/leases": [_NAME, ("Holder", "string", 0, _path("spec", "holderIdentity", default="")), _AGE],
    "scheduling.k8s.io/priorityclasses": [
        _NAME,
        ("Value", "integer", 0, _path("value", default=0)),
        ("Global-Default", "boolean", 0, _path("globalDefault", default=False)),
        _AGE,
        ("PreemptionPolicy", "string", 0, _path("preemptionPolicy", default="")),
    ],
    "/services": _columns(
        "Name:string:0", "Type:string:0", "Cluster-IP:string:0", "External-IP:string:0", "Port(s):string:0",
        "Age:string:0", "Selector:string:1",
    ),
    "/replicationcontrollers": _columns(*_WORKLOAD, *_WORKLOAD_WIDE),
    "apps/replicasets": _columns(*_WORKLOAD, *_WORKLOAD_WIDE),
    "apps/statefulsets": _columns("Name:string:0", "Ready:string:0", "Age:string:0", *_WORKLOAD_WIDE[:2]),
    "policy/poddisruptionbudgets": _columns(
        "Name:string:0", "Min Available:string:0", "Max Unavailable:string:0", "Allowed Disruptions:integer:0",
        "Age:string:0",
    ),
    "/persistentvolumes": [
        _NAME,
        ("Capacity", "string", 0, _path("spec", "capacity", "storage", default="")),
        ("Access Modes", "string", 0, _access_modes("spec", "accessModes")),
        ("Reclaim Policy", "string", 0, _path("spec", "persistentVolumeReclaimPolicy", default="")),
        ("Status", "string", 0, _path("status", "phase", default="")),
        ("Claim", "string", 0, _claim),
        ("StorageClass", "string", 0, _path("spec", "storageClassName", default="")),
        ("VolumeAttributesClass", "string", 0, _path("spec", "volumeAttributesClassName", default="<unset>")),
        ("Reason", "string", 0, _path("status", "reason", default="")),
        _AGE,
        ("VolumeMode", "string", 1, _path("spec", "volumeMode", default="Filesystem")),
    ],
    "/persistentvolumeclaims": [
        _NAME,
        ("Status", "string", 0, _claim_status),
        ("Volume", "string", 0, _path("spec", "volumeName", default="")),
        ("Capacity", "string", 0, _path("status", "capacity", "storage", default="")),
        ("Access Modes", "string", 0, _access_modes("status", "accessModes")),
        ("StorageClass", "string", 0, _path("spec", "storageClassName", default="")),
        ("VolumeAttributesClass", "string", 0, _path("spec", "volumeAttributesClassName", default="<unset>")),
        _AGE,
        ("VolumeMode", "string", 1, _path("spec", "volumeMode", default="Filesystem")),
    ],
    "storage.k8s.io/storageclasses": [
        ("Name", "string", 0, _storage_class_name),
        ("Provisioner", "string", 0, _path("provisioner", default="")),
        ("ReclaimPolicy", "string", 0, _path("reclaimPolicy", default="Delete")),
        ("VolumeBindingMode", "string", 0, _path("volumeBindingMode", default="Immediate")),
        ("AllowVolumeExpansion", "string", 0, _path("allowVolumeExpansion", default=False)),
        _AGE,
    ],
    "storage.k8s.io/csinodes": [
        _NAME,
        ("Drivers", "integer", 0, lambda o, now: len((o.get("spec") or {}).get("drivers") or [])),
        _AGE,
    ],
    "storage.k8s.io/csidrivers": _columns(
        "Name:string:0", "AttachRequired:boolean:0", "PodInfoOnMount:boolean:0", "StorageCapacity:boolean:0",
        "TokenRequests:string:0", "RequiresRepublish:boolean:0", "Modes:string:0", "Age:string:0",
    ),
    "storage.k8s.io/volumeattachments": _columns(
        "Name:string:0", "Attacher:string:0", "PV:string:0", "Node:string:0", "Attached:boolean:0", "Age:string:0"
    ),
    # a CRD's printer columns, as Kueue v0.17's declare them (no Age unless declared)
    "kueue.x-k8s.io/clusterqueues": [
        _NAME,
        ("Cohort", "string", 0, _path("spec", "cohort", default="")),
        ("Strategy", "string", 1, _path("spec", "queueingStrategy", default="")),
        ("Pending Workloads", "integer", 0, _path("status", "pendingWorkloads", default="")),
        ("Admitted Workloads", "integer", 1, _path("status", "admittedWorkloads", default="")),
    ],
    "kueue.x-k8s.io/localqueues": [
        _NAME,
        ("ClusterQueue", "string", 0, _path("spec", "clusterQueue", default="")),
        ("Pending Workloads", "integer", 0, _path("status", "pendingWorkloads", default="")),
        ("Admitted Workloads", "integer", 0, _path("status", "admittedWorkloads", default="")),
    ],
    "kueue.x-k8s.io/workloads": [
        _NAME,
        ("Queue", "string", 0, _path("spec", "queueName", default="")),
        ("Reserved in", "string", 0, _path("status", "admission", "clusterQueue", default="")),
        ("Admitted", "string", 0, _condition("Admitted")),
        ("Finished", "string", 0, _condition("Finished")),
        _AGE,
    ],
    "resource.k8s.io/resourceclaims": _columns("Name:string:0", "State:string:0", "Age:string:0"),
    "resource.k8s.io/resourceslices": _columns(
        "Name:string:0", "Node:string:0", "Driver:string:0", "Pool:string:0", "Age:string:0"
    ),
}  # fmt: skip
"""The columns of the real server's printers (``pkg/printers/internalversion``), by collection (as stored: the
events.k8s.io view prints as core Events, as the real server prints it). The server always sends the wide ones
(priority 1): kubectl shows them with ``-o wide``."""
_DEFAULT: list[Column] = [_NAME, _AGE]
_INCLUDE_OBJECT = ("", "Metadata", "Object", "None")


def _cell(cell: Callable[[Object, float], Any], obj: Object, now: float) -> Any:
    """One cell; an object of an unexpected shape (written by a client) prints ``<unknown>``, as kubectl would."""
    try:
        return cell(obj, now)
    except (AttributeError, TypeError, ValueError, KeyError):
        return "<unknown>"


def table(
    resource: ResourceType,
    objects: list[Object],
    now: float,
    metadata: Object,
    *,
    headers: bool = True,
    objects_as: str = "",
) -> Object:
    """A ``Table`` of ``objects`` (in ``resource``'s view). ``objects_as`` is ``includeObject``: each row carries
    the object's metadata (``Metadata``, the default), the whole object (``Object``: what ``kubectl get --sort-by``
    sorts) or nothing (``None``)."""
    if objects_as not in _INCLUDE_OBJECT:
        raise errors.bad_request(f"includeObject: unsupported value {objects_as!r}: Metadata, Object or None")
    columns = COLUMNS.get(resource.collection, _DEFAULT)
    stored = resource.from_view
    rows = []
    for obj in objects:
        printed = stored(obj) if stored is not None else obj
        cells = [_cell(cell, printed, now) for _, _, _, cell in columns]
        rows.append({"cells": cells, "object": _row_object(obj, objects_as)})
    result: Object = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "rows": rows}
    if headers:
        result["columnDefinitions"] = [
            {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": "", "priority": p}
            for name, type_, p, _ in columns
        ]
    return result


def _row_object(obj: Object, objects_as: str) -> Object | None:
    if objects_as == "None":
        return None
    if objects_as == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}
