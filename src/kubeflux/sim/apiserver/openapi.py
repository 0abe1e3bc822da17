"""``/openapi/v3``: the real server's OpenAPI v3 documents of the served groups, kept to the served resources.

``tools/kube/openapi_gen.py`` copies the documents Kubernetes publishes for its API server (``k8s.io/kubernetes``'s
``api/openapi-spec/v3``, at the pinned version) into ``build/kube/openapi`` (found at ``$KUBEFLUX_OPENAPI_DIR``,
else ``build/kube/openapi`` of this checkout, else ``openapi/`` of ``$KUBEFLUX_KUBE_DIR``, else under the working
directory). Each group/version document is served with the paths of the resources ``cluster serve`` does not serve
taken out (and, of an empty read-only collection, every operation but ``get``); the schemas stay whole. As the real
server, the index ``/openapi/v3`` lists each document with the SHA-512 of its bytes; a request naming that hash is
answered as immutable, one naming another is redirected (301) to the current one, a missing document is a 404
without a body. So ``kubectl explain`` works, and kubectl computes ``apply`` patches from the real schemas.

Without the build, and for the group/versions it does not hold (the PodGroup CRD), the documents are the minimal
ones kubectl reads to decide how to validate: per kind a PATCH operation with a ``fieldValidation`` parameter, so
kubectl leaves validation to the server (which accepts ``fieldValidation`` without detecting unknown fields; see
docs/apiserver.md) and computes ``kubectl apply`` patches from its built-in types (strategic merge for built-in
kinds, JSON merge for PodGroups). One log line says the build is missing.

A ``v1`` ``List`` is always validated client-side from ``/openapi/v2``; that document is served without definitions
(an empty protobuf message, or its JSON form), so kubectl finds no schema and skips validation, as it does for kinds
the server does not describe.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.kubebuild import find_kube_build
from kubeflux.sim.apiserver.registry import Registry, ResourceType

__all__ = ["BUILD_COMMAND", "OPENAPI_V2_PROTOBUF", "Document", "OpenApi", "find_build", "openapi_v2_json"]

log = logging.getLogger("kubeflux.apiserver")

OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""What kubectl asks ``/openapi/v2`` for; the empty message is a document without paths or definitions."""
BUILD_COMMAND = "python tools/kube/openapi_gen.py build/kube/openapi"
_YEAR = 365 * 24 * 3600


def openapi_v2_json() -> dict[str, Any]:
    return {"swagger": "2.0", "info": {"title": "kubeflux", "version": "v1.36.0"}, "paths": {}, "definitions": {}}


def find_build() -> Path:
    """The folder of the copied documents (see the module docstring); it may not exist."""
    return find_kube_build("openapi", "stamp.json", "KUBEFLUX_OPENAPI_DIR")


@dataclass(frozen=True, slots=True)
class Document:
    """One served document: its bytes and their hash (upper-case hex SHA-512, as the real server's)."""

    data: bytes
    hash: str


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _file_name(path: str) -> str:
    """``apis/batch/v1`` → ``apis__batch__v1_openapi.json`` (the names in ``api/openapi-spec/v3``)."""
    return path.replace("/", "__") + "_openapi.json"


class OpenApi:
    """The documents of ``/openapi/v3`` for ``registry``, built on first use and kept."""

    def __init__(self, registry: Registry, folder: Path | None = None) -> None:
        self.registry = registry
        self.folder = find_build() if folder is None else folder
        self._documents: dict[str, Document] | None = None

    def documents(self) -> dict[str, Document]:
        """Every served document by its path (``api/v1``, ``apis/batch/v1``, ``apis/batch`` ...)."""
        if self._documents is None:
            self._documents = self._build()
        return self._documents

    def _build(self) -> dict[str, Document]:
        built = (self.folder / "stamp.json").exists()
        if not built:
            log.info("no OpenAPI build at %s: /openapi/v3 serves minimal documents (%s)", self.folder, BUILD_COMMAND)
        documents: dict[str, Any] = {}
        group_versions = self.registry.group_versions()
        for path in ("api", "apis", "version"):
            if built and (self.folder / _file_name(path)).exists():
                documents[path] = orjson.loads((self.folder / _file_name(path)).read_bytes())
        for group, versions in group_versions.items():
            if group and built and (self.folder / _file_name(f"apis/{group}")).exists():
                documents[f"apis/{group}"] = orjson.loads((self.folder / _file_name(f"apis/{group}")).read_bytes())
            for version in versions:
                path = _gv_path(group, version)
                source = self.folder / _file_name(path)
                if built and source.exists():
                    documents[path] = self._served(orjson.loads(source.read_bytes()), group, version)
                else:
                    documents[path] = _minimal(self.registry, group, version)
        result = {}
        for path, document in sorted(documents.items()):
            data = orjson.dumps(document)
            result[path] = Document(data, hashlib.sha512(data).hexdigest().upper())
        return result

    def _served(self, document: dict[str, Any], group: str, version: str) -> dict[str, Any]:
        """``document`` with only the paths (and operations) of the resources served."""
        depth = len(_gv_path(group, version).split("/"))
        paths: dict[str, Any] = {}
        for path, item in (document.get("paths") or {}).items():
            resource = self._resource_of(path.strip("/").split("/")[depth:], group, version)
            if resource is None:
                continue
            if isinstance(resource, bool) or not resource.read_only_empty:
                paths[path] = item
            elif "get" in item:
                paths[path] = {k: v for k, v in item.items() if k in ("get", "parameters")}
        return {**document, "paths": paths}

    def _resource_of(self, segments: list[str], group: str, version: str) -> ResourceType | bool | None:
        """The served resource a path names (True: the group/version's resource list), or None."""
        if not segments:
            return True
        if segments[0] == "watch":
            segments = segments[1:]
        if len(segments) >= 3 and segments[:2] == ["namespaces", "{namespace}"]:
            segments = segments[2:]
        resource = self.registry.find(group, version, segments[0]) if segments else None
        if resource is None:
            return None
        if len(segments) > 2 and segments[2] not in resource.subresources:
            return None
        return resource

    def index(self) -> dict[str, Any]:
        return {
            "paths": {
                path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={document.hash}"}
                for path, document in self.documents().items()
            }
        }

    def answer(self, rest: list[str], query: dict[str, str]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """``GET /openapi/v3/<rest>``: (code, headers, body); raises the real server's empty 404."""
        document = self.documents().get("/".join(rest))
        if document is None:
            raise errors.page_not_found(b"")
        etag = (b"etag", f'"{document.hash}"'.encode())
        asked = query.get("hash")
        if asked is not None and asked != document.hash:
            location = f"/openapi/v3/{'/'.join(rest)}?hash={document.hash}".encode()
            return 301, [(b"location", location), (b"cache-control", b"no-cache, private"), etag], b""
        if asked is None:
            return 200, [(b"cache-control", b"no-cache, private"), etag], document.data
        expires = email.utils.formatdate(time.time() + _YEAR, usegmt=True).encode()
        return 200, [(b"cache-control", b"public, immutable"), (b"expires", expires), etag], document.data


_PARAMETERS = [
    {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
    for name in ("dryRun", "fieldManager", "fieldValidation")
]


def _minimal(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """A document of PATCH operations only (see the module docstring)."""
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
