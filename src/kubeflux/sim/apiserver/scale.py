"""The ``scale`` subresource of Deployments, ReplicaSets and StatefulSets: ``autoscaling/v1`` ``Scale``, as
k8s.io/kubernetes' ``pkg/registry/apps/*/storage`` (``ScaleREST``) serves it, so that ``kubectl scale`` and
autoscalers work.

``GET`` answers the Scale of the object: its name, namespace, uid, resourceVersion and creationTimestamp (nothing
else of its metadata), ``spec.replicas``, ``status.replicas`` (0 until a controller writes it) and
``status.selector``, the object's label selector as a string (``app=web,tier in (a,b)``). ``PUT`` and ``PATCH``
(merge, JSON and strategic: the patch applies to the Scale) change the object's ``spec.replicas`` only, recorded
in its ``managedFields`` under the subresource ``scale``; a resourceVersion in the Scale is a precondition (409
when stale). Refusals as the real server words them: 400 for another kind or a name that is not the URL's, or a
replicas that is no int32; 422 ``Scale.autoscaling`` for a negative one (a patch that makes it no int32: 422 on the
field ``patch``); 404 of the object; 405 for other verbs.

ReplicationControllers have one on a real server too; ``cluster serve`` serves them as an empty collection, so
there is nothing to scale.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubeflux.apiobjects.rules import int_decode_error
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.store import Store

__all__ = ["SCALED", "get_scale", "patch_scale", "selector_string", "update_scale"]

Object = dict[str, Any]
SCALED = frozenset({("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")})
"""(group, plural) of the served kinds with a ``scale`` subresource."""
API_VERSION = "autoscaling/v1"
_OPERATORS = {"In": "in", "NotIn": "notin"}


def selector_string(selector: object) -> str:
    """``metav1.LabelSelectorAsSelector(selector).String()``: one requirement per key, sorted by key (``k=v``,
    ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``), joined by commas."""
    if not isinstance(selector, dict):
        return ""
    parts: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        parts.append((str(key), f"{key}={value}"))
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, dict):
            continue
        key, operator = str(expression.get("key", "")), expression.get("operator")
        values = ",".join(sorted(str(v) for v in expression.get("values") or ()))
        if operator in _OPERATORS:
            parts.append((key, f"{key} {_OPERATORS[operator]} ({values})"))
        elif operator == "Exists":
            parts.append((key, key))
        elif operator == "DoesNotExist":
            parts.append((key, f"!{key}"))
    return ",".join(text for _, text in sorted(parts, key=lambda part: part[0]))


def _scale(obj: Object) -> Object:
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    replicas = spec.get("replicas", 1)
    kept = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    return {
        "kind": "Scale",
        "apiVersion": API_VERSION,
        "metadata": {key: meta[key] for key in kept if key in meta},
        "spec": {"replicas": replicas} if replicas else {},  # omitempty in autoscaling/v1
        "status": {"replicas": status.get("replicas", 0), "selector": selector_string(spec.get("selector"))},
    }


def get_scale(store: Store, resource: ResourceType, namespace: str, name: str) -> Object:
    """The Scale of ``namespace/name``; 404 when it does not exist."""
    return _scale(store.get(resource, namespace, name))


def _check(resource: ResourceType, name: str, body: Any) -> int:
    """The replicas ``body`` (a Scale) asks for; raises the real server's 400 and 422."""
    body = errors.check_kind(body, "Scale", API_VERSION, "autoscaling")
    meta = body.get("metadata") or {}
    given = meta.get("name") if isinstance(meta, dict) else None
    if given not in (None, "", name):
        raise errors.bad_request(f"the name of the object ({given}) does not match the name on the URL ({name})")
    spec = body.get("spec") or {}
    replicas = spec.get("replicas", 0) if isinstance(spec, dict) else 0
    problem = int_decode_error("ScaleSpec", "spec.replicas", replicas)
    if problem:
        raise errors.bad_request(f'Scale in version "v1" cannot be handled as a Scale: {problem}')
    if replicas is None:
        replicas = 0
    if replicas < 0:
        cause = Cause("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")
        raise errors.invalid("Scale", name, [cause], "autoscaling")
    return int(replicas)


def update_scale(store: Store, resource: ResourceType, namespace: str, name: str, body: Any) -> Object:
    """``PUT .../scale``: the object's ``spec.replicas`` set from the Scale ``body``; answers the new Scale."""
    replicas = _check(resource, name, body)
    current = store.get(resource, namespace, name)
    given = (body.get("metadata") or {}).get("resourceVersion")
    if given and given != current["metadata"]["resourceVersion"]:
        raise errors.conflict(resource.plural, name, errors.STALE_OBJECT, resource.group)
    meta = {**current["metadata"]}
    if given:
        meta["resourceVersion"] = given
    scaled = {**current, "metadata": meta, "spec": {**(current.get("spec") or {}), "replicas": replicas}}
    return _scale(store.update(resource, namespace, name, scaled, "scale"))


def patch_scale(
    store: Store, resource: ResourceType, namespace: str, name: str, apply: Callable[[Object], Any]
) -> Object:
    """``PATCH .../scale``: ``apply`` (the patch) on the current Scale, then as :func:`update_scale`."""
    current = get_scale(store, resource, namespace, name)
    patched = apply(json.loads(json.dumps(current)))
    spec = patched.get("spec") if isinstance(patched, dict) else None
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    problem = int_decode_error("ScaleSpec", "spec.replicas", replicas)
    if problem:
        shown = json.dumps(patched, separators=(",", ":"))
        raise errors.invalid("", "", [Cause("patch", f"Invalid value: {json.dumps(shown)}: {problem}")])
    return update_scale(store, resource, namespace, name, patched)
