"""Short constructors of :class:`Step` and the manifests the sequence uses, so that it reads as a script."""

from __future__ import annotations

from typing import Any

from .runner import APPLY, JSON_PATCH, MERGE, STRATEGIC, TABLE, Json, Step

__all__ = [
    "NS",
    "configmap",
    "delete",
    "get",
    "gone",
    "kubectl",
    "patch",
    "pod",
    "post",
    "put",
    "table",
]

NS = "/api/v1/namespaces/diff"
"""The namespace most steps work in."""
_PATCH_TYPES = {"merge": MERGE, "strategic": STRATEGIC, "json": JSON_PATCH, "apply": APPLY}


def get(name: str, path: str, **options: Any) -> Step:
    return Step(name, "GET", path, **options)


def table(name: str, path: str, **options: Any) -> Step:
    return Step(name, "GET", path, accept=TABLE, **options)


def post(name: str, path: str, body: Json, **options: Any) -> Step:
    return Step(name, "POST", path, body, **options)


def put(name: str, path: str, body: Json, **options: Any) -> Step:
    return Step(name, "PUT", path, body, **options)


def patch(name: str, path: str, body: Json, kind: str = "merge", **options: Any) -> Step:
    return Step(name, "PATCH", path, body, content_type=_PATCH_TYPES.get(kind, kind), **options)


def delete(name: str, path: str, body: Json = None, **options: Any) -> Step:
    return Step(name, "DELETE", path, body, **options)


def gone(name: str, path: str) -> Step:
    """Wait until ``path`` is 404 (a controller's work: the garbage collector, the namespace controller)."""
    return Step(name, "GET", path, until=lambda code, body: code == 404)


def kubectl(name: str, *args: str, stdin: str | None = None, **options: Any) -> Step:
    return Step(name, kubectl=args, stdin=stdin, **options)


def pod(name: str = "", *, generate: str = "", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A one-container pod (no service-account token: the simulated cluster has no ServiceAccounts)."""
    meta: dict[str, Any] = {"name": name} if name else {"generateName": generate}
    if labels:
        meta["labels"] = labels
    body_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}],
    }
    body_spec.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec}


def configmap(name: str, data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data or {"a": "1"}}
