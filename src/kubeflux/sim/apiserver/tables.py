"""Server-side printing: the ``meta.k8s.io/v1`` ``Table`` kubectl asks for (``Accept: ...;as=Table``).

``kubectl get`` prints the columns the server sends; without them it shows only NAME and AGE. The columns here are
the real server's printers (``pkg/printers/internalversion``) for the resources kubeflux models; others get NAME and
AGE, as a CRD without ``additionalPrinterColumns``. Ages are rendered by the server, as the real one does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeflux.scheduler.kube_objects import parse_timestamp
from kubeflux.sim.apiserver.registry import ResourceType

__all__ = ["TABLE_MEDIA", "human_duration", "table", "wants_table"]

Object = dict[str, Any]
TABLE_MEDIA = "as=Table"
Column = tuple[str, str, int, Callable[[Object, float], Any]]
"""(name, type, priority, cell)."""


def wants_table(accept: str) -> bool:
    return TABLE_MEDIA in accept


def human_duration(seconds: float) -> str:
    """``kubectl``'s short duration: ``45s``, ``5m``, ``3h``, ``2d``, ``3y`` (as duration.HumanDuration)."""
    seconds = max(int(seconds), 0)
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        rest = hours % 24
        return f"{days}d{rest}h" if rest else f"{days}d"
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


def _pod_restarts(obj: Object, now: float) -> int:
    return sum(int(s.get("restartCount", 0)) for s in obj.get("status", {}).get("containerStatuses") or ())


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


def _job_status(obj: Object, now: float) -> str:
    for condition in obj.get("status", {}).get("conditions") or ():
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed", "Suspended"):
            return str(condition["type"])
    return "Running" if obj.get("status", {}).get("active") else "Pending"


def _job_completions(obj: Object, now: float) -> str:
    completions = obj.get("spec", {}).get("completions")
    succeeded = obj.get("status", {}).get("succeeded", 0)
    return (
        f"{succeeded}/{completions}"
        if completions is not None
        else f"{succeeded}/1 of {obj['spec'].get('parallelism')}"
    )


def _event_object(obj: Object, now: float) -> str:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _event_last_seen(obj: Object, now: float) -> str:
    stamp = obj.get("lastTimestamp") or obj.get("eventTime") or obj.get("metadata", {}).get("creationTimestamp")
    return _since(stamp, now)


def _path(*keys: str, default: Any = "<none>") -> Callable[[Object, float], Any]:
    def cell(obj: Object, now: float) -> Any:
        node: Any = obj
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return default if node in (None, "") else node

    return cell


_NAME: Column = ("Name", "string", 0, _name)
_AGE: Column = ("Age", "string", 0, _age)
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
    ],
    "/nodes": [
        _NAME,
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        _AGE,
        ("Version", "string", 0, _path("status", "nodeInfo", "kubeletVersion", default="")),
    ],
    "/namespaces": [_NAME, ("Status", "string", 0, _path("status", "phase", default="")), _AGE],
    "/events": [
        ("Last Seen", "string", 0, _event_last_seen),
        ("Type", "string", 0, _path("type", default="")),
        ("Reason", "string", 0, _path("reason", default="")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, _path("message", default="")),
    ],
    "batch/jobs": [
        _NAME,
        ("Status", "string", 0, _job_status),
        ("Completions", "string", 0, _job_completions),
        _AGE,
    ],
    "/configmaps": [_NAME, ("Data", "integer", 0, lambda o, now: len(o.get("data") or {})), _AGE],
    "coordination.k8s.io/leases": [_NAME, ("Holder", "string", 0, _path("spec", "holderIdentity", default="")), _AGE],
    "scheduling.k8s.io/priorityclasses": [
        _NAME,
        ("Value", "integer", 0, _path("value", default=0)),
        ("Global-Default", "boolean", 0, _path("globalDefault", default=False)),
        _AGE,
    ],
}


def _cell(cell: Callable[[Object, float], Any], obj: Object, now: float) -> Any:
    """One cell; an object of an unexpected shape (written by a client) prints ``<unknown>``, as kubectl would."""
    try:
        return cell(obj, now)
    except (AttributeError, TypeError, ValueError, KeyError):
        return "<unknown>"


def table(
    resource: ResourceType, objects: list[Object], now: float, metadata: Object, *, headers: bool = True
) -> Object:
    """A ``Table`` of ``objects`` (in ``resource``'s view); rows carry the object's metadata for kubectl."""
    columns = COLUMNS.get(resource.collection, [_NAME, _AGE])
    if resource.to_view is not None:
        columns = [_NAME, _AGE]
    rows = [
        {
            "cells": [_cell(cell, obj, now) for _, _, _, cell in columns],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata", {}),
            },
        }
        for obj in objects
    ]
    result: Object = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "rows": rows}
    if headers:
        result["columnDefinitions"] = [
            {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": "", "priority": p}
            for name, type_, p, _ in columns
        ]
    return result
