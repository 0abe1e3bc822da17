"""The OpenAPI v3 documents kubectl reads, and no more: kubeflux does not carry the Kubernetes schemas.

kubectl (1.27+) reads ``/openapi/v3`` and, for the group/version of each object it applies, the PATCH operation
tagged with that kind, to learn whether the server validates fields itself (a ``fieldValidation`` query
parameter of that operation). Finding it, kubectl skips its client-side validation (which needs the schemas of
``/openapi/v2``), and, the operation not offering strategic merge, computes ``kubectl apply`` patches from its
built-in types (strategic merge for built-in kinds, JSON merge for PodGroups). The server accepts
``fieldValidation`` but does not detect unknown fields (it has no schemas): see docs/apiserver.md.

A ``v1`` ``List`` is always validated client-side from ``/openapi/v2``; that document is served without
definitions (an empty protobuf message, or its JSON form), so kubectl finds no schema and skips validation, as it
does for kinds the server does not describe.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.registry import Registry, ResourceType

__all__ = ["OPENAPI_V2_PROTOBUF", "openapi_v2_json", "openapi_v3_paths"]

OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""What kubectl asks ``/openapi/v2`` for; the empty message is a document without paths or definitions."""


def openapi_v2_json() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "kubeflux", "version": "v1.36.0"}, "paths": {}, "definitions": {}}


_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation")
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _document(registry: Registry, group: str, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for resource in registry.in_group_version(group, version):
        if resource.read_only_empty or resource.create_only:
            continue
        paths[_object_path(resource)] = {
            "patch": {
                "operationId": f"patch{resource.kind}",
                "parameters": _PARAMETERS,
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": resource.kind},
                "x-kubernetes-action": "patch",
                "requestBody": {
                    "content": {
                        "application/json-patch+json": {"schema": {"type": "object"}},
                        "application/merge-patch+json": {"schema": {"type": "object"}},
                    }
                },
                "responses": {"200": {"description": "OK"}},
            },
        }
    return {"openapi": "3.0.0", "info": {"title": "kubeflux", "version": "v1.36.0"}, "paths": paths}


def _object_path(resource: ResourceType) -> str:
    base = "/" + _gv_path(resource.group, resource.version)
    if resource.namespaced:
        return f"{base}/namespaces/{{namespace}}/{resource.plural}/{{name}}"
    return f"{base}/{resource.plural}/{{name}}"


def openapi_v3_paths(registry: Registry, rest: list[str]) -> dict[str, Any]:
    """``/openapi/v3`` (the index) or ``/openapi/v3/<group-version path>`` (one document)."""
    if not rest:
        paths = {}
        for group, versions in registry.group_versions().items():
            for version in versions:
                path = _gv_path(group, version)
                digest = hashlib.sha256(orjson.dumps(_document(registry, group, version))).hexdigest()[:32].upper()
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
        return {"paths": paths}
    if rest[0] == "api" and len(rest) == 2:
        group, version = "", rest[1]
    elif rest[0] == "apis" and len(rest) == 3:
        group, version = rest[1], rest[2]
    else:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    if version not in registry.group_versions().get(group, []):
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return _document(registry, group, version)
