"""What the real API server and kubeflux say of a ResourceClaim's device selectors (shared by the selector tests)."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubeflux.apiobjects.reader import ManifestError
from kubeflux.apiobjects.resourceclaims import claim_from_manifest

from .conftest import Api


def server_says(api: Api, body: dict[str, Any]) -> tuple[str, str] | None:
    try:
        client.CustomObjectsApi(api.client).create_namespaced_custom_object(
            "resource.k8s.io", "v1", "default", "resourceclaims", body
        )
    except ApiException as exc:
        (cause,) = orjson.loads(exc.body)["details"]["causes"]
        return str(cause["field"]), str(cause["message"])
    return None


def kubeflux_says(body: dict[str, Any]) -> tuple[str, str] | None:
    try:
        claim_from_manifest(body)
    except ManifestError as exc:
        return exc.path, exc.problem
    return None


def words(message: str) -> str:
    """The message without its quoted value (``Invalid value: "…": ``) and the server's caret lines."""
    first = message.split("\n")[0]
    if first.startswith("Invalid value: "):
        first = first.rsplit('": ', 1)[-1] if first[15] == '"' else first.rsplit("': ", 1)[-1]
    return first
