"""Discovery: ``/version``, ``/api``, ``/apis``, group and group/version resource lists.

``/api`` and ``/apis`` answer in the aggregated form (``APIGroupDiscoveryList``, every group's resources in one
document) to the clients that ask for it, as kubectl and client-go do first; otherwise, and for the group and
group/version paths, in the legacy form (``APIVersions``, ``APIGroupList``, ``APIResourceList``).
"""

from __future__ import annotations

from typing import Any

from kubeflux import __version__
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.registry import Registry, ResourceType

__all__ = ["AGGREGATED", "KUBERNETES_VERSION", "aggregated_discovery", "discovery_document", "wants_aggregated"]

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
"""The content type of aggregated discovery (``apidiscovery.k8s.io/v2``), which kubectl and client-go ask first."""

KUBERNETES_VERSION = ("1", "36")
"""The version served: the one whose behaviour the anchors observed."""


def discovery_document(registry: Registry, parts: list[str], address: str) -> Any:
    """The discovery document at ``/``-split ``parts`` of the path, or None when the path is not discovery."""
    if parts == ["version"]:
        return {
            "major": KUBERNETES_VERSION[0],
            "minor": KUBERNETES_VERSION[1],
            "gitVersion": f"v{'.'.join(KUBERNETES_VERSION)}.0-kubeflux.{__version__}",
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": "",
            "compiler": "kubeflux",
            "platform": "python",
        }
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
        }
    if parts == ["apis"]:
        groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
    if len(parts) in (2, 3) and parts[0] == "apis" and parts[1] not in registry.group_versions():
        raise errors.page_not_found()
    if len(parts) == 2 and parts[0] == "apis":
        versions = registry.group_versions()[parts[1]]
        return {"kind": "APIGroup", "apiVersion": "v1"} | _group(parts[1], versions)
    if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
        group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
        resources = registry.in_group_version(group, version)
        if not resources:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _resource_list(group, version, resources)
    return None


_SUBRESOURCES: dict[str, tuple[str, list[str]]] = {
    "binding": ("Binding", ["create"]),
    "eviction": ("Eviction", ["create"]),
    "log": ("", ["get"]),
    "finalize": ("", ["update"]),
    "scale": ("Scale", ["get", "patch", "update"]),
    "token": ("TokenRequest", ["create"]),
}
"""Subresources whose kind or verbs are not their resource's ``get``/``patch``/``update`` (``""``: the resource's
kind)."""


def _group(group: str, versions: list[str]) -> dict[str, Any]:
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def _resource_list(group: str, version: str, resources: list[ResourceType]) -> dict[str, Any]:
    listed: list[dict[str, Any]] = []
    for r in resources:
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        }
        listed.append(_with_names(entry, r))
        for sub in r.subresources:
            kind, verbs = _SUBRESOURCES.get(sub, (r.kind, ["get", "patch", "update"]))
            entry = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced}
            if sub in _RESPONSE_KINDS:  # a kind of another group (policy/v1 Eviction, autoscaling/v1 Scale ...)
                entry["group"], entry["version"], _ = _RESPONSE_KINDS[sub]
            listed.append({**entry, "kind": kind or r.kind, "verbs": verbs})
    group_version = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": listed}


_RESPONSE_KINDS = {
    "eviction": ("policy", "v1", "Eviction"),
    "scale": ("autoscaling", "v1", "Scale"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
}


def wants_aggregated(accept: str) -> bool:
    return "as=APIGroupDiscoveryList" in accept and "v=v2;" in accept.replace(" ", "") + ";"


def aggregated_discovery(registry: Registry, core: bool) -> dict[str, Any]:
    """``/api`` (``core``) or ``/apis`` as an ``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``."""
    items = []
    for group, versions in registry.group_versions().items():
        if (group == "") != core:
            continue
        listed = []
        for version in versions:
            resources = sorted(registry.in_group_version(group, version), key=lambda r: r.plural)
            listed.append(
                {"version": version, "resources": [_aggregated(r) for r in resources], "freshness": "Current"}
            )
        items.append({"metadata": {"name": group} if group else {}, "versions": listed})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def _with_names(entry: dict[str, Any], resource: ResourceType) -> dict[str, Any]:
    """``entry`` with the other names of ``resource`` (``shortNames``, ``categories``), those it has."""
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def _aggregated(resource: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "resource": resource.plural,
        "responseKind": {"group": "", "version": "", "kind": resource.kind},
        "scope": "Namespaced" if resource.namespaced else "Cluster",
        "singularResource": resource.singular,
        "verbs": resource.verbs(),
    }
    _with_names(entry, resource)
    subresources = []
    for sub in sorted(resource.subresources):
        kind, verbs = _SUBRESOURCES.get(sub, (resource.kind, ["get", "patch", "update"]))
        group, version, kind = _RESPONSE_KINDS.get(sub, ("", "", kind or resource.kind))
        response_kind = {"group": group, "version": version, "kind": kind}
        subresources.append({"subresource": sub, "responseKind": response_kind, "verbs": verbs})
    if subresources:
        entry["subresources"] = subresources
    return entry
