"""serve's requests as raw JSON on the official client's own connection pool.

The official client's typed calls cost about a millisecond of CPU each, most of it around the request (the call
validated by pydantic, the model sanitised to a dict, encoded with :mod:`json`, the response wrapped), and
importing its ``CoreV1Api`` alone takes 0.3-0.7 s; serve sends a Binding and an Event per pod, so it sends its
requests itself: a body encoded once with orjson, on the same urllib3 pool (so the same host, proxy, TLS and
client certificate), with the same bearer token (read through the configuration, whose refresh hook renews an
exec plugin's or a service account's token) and user agent. A write costs about a third of the CPU it did
(benchmarks/serve.py --real). The writes go further: on keep-alive connections of that pool, each request and
response framed by :mod:`kubeflux.kube.keepalive` (a fifth of urllib3's CPU per write), unless the client goes
through an HTTP proxy.

:class:`RawApi` has one method per call serve makes, named and taking keywords as the official client's call does
(the RBAC test in tests/kube/test_deploy.py reads those names; a :class:`~kubeflux.kube.reflector.Resource` may be
either's). A refusal raises the client's own :class:`~kubernetes.client.ApiException` (status, reason and the
server's ``Status`` body), a failure to send raises urllib3's errors, as the typed calls do: callers handle both
alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3
from kubernetes import client

from kubeflux.kube.keepalive import Connections, Reply, Request

__all__ = ["RawApi"]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_QUERY = {
    "limit": "limit",
    "_continue": "continue",
    "resource_version": "resourceVersion",
    "resource_version_match": "resourceVersionMatch",
    "watch": "watch",
    "allow_watch_bookmarks": "allowWatchBookmarks",
    "timeout_seconds": "timeoutSeconds",
    "field_selector": "fieldSelector",
    "label_selector": "labelSelector",
}
"""The official client's list keywords → the API's query parameters."""


def _pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


def _timeout(seconds: float | tuple[float, float]) -> urllib3.Timeout:
    if isinstance(seconds, tuple):
        return urllib3.Timeout(connect=seconds[0], read=seconds[1])
    return urllib3.Timeout(total=seconds)


class RawApi:
    """serve's calls through ``api``'s pool; thread-safe (urllib3's pool is). A write returns the response's body,
    waiting at most ``timeout`` seconds (connect, read; or one number for both) — a dead API server fails it
    instead of holding a thread; a list returns the unread response (``_preload_content=False``, as serve calls
    the official client)."""

    def __init__(self, api: client.ApiClient, timeout: float | tuple[float, float] = (5.0, 30.0)) -> None:
        self.api = api
        self.host = api.configuration.host.rstrip("/")
        self.pool: urllib3.PoolManager = api.rest_client.pool_manager
        self.timeout = _timeout(timeout)
        self._writes: Connections | None = None
        """Where the writes go (None: through the pool, for a client behind an HTTP proxy)."""
        if not isinstance(self.pool, urllib3.ProxyManager):
            url = urllib3.util.parse_url(self.host)
            pool = self.pool.connection_from_url(self.host)
            self._writes = Connections(pool, url.netloc or "", (url.path or "").rstrip("/"), self.timeout)

    def close(self) -> None:
        """Close the writes' idle connections (the pool's are the client's)."""
        if self._writes is not None:
            self._writes.close()

    def _headers(self, method: str, path: str, content_type: str | None) -> dict[str, str]:
        headers = {**self.api.default_headers, "Accept": JSON}
        if content_type is not None:
            headers["Content-Type"] = content_type
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
        return headers

    def write(self, method: str, path: str, body: Any, content_type: str = JSON) -> bytes:
        """The response's body to ``method path`` with ``body`` (a JSON-able object, or bytes sent as they are).
        Raises :class:`~kubernetes.client.ApiException` for a status other than 2xx, and the failure to send."""
        (answer,) = self.write_all(method, [(path, body)], content_type)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def write_all(
        self, method: str, writes: list[tuple[str, Any]], content_type: str = JSON
    ) -> Iterator[bytes | Exception]:
        """Each write's answer (as :meth:`write` returns it) or failure (as :meth:`write` raises it: a refusal,
        or a failure to send that leaves its outcome unknown), in order and as each is read: ``writes`` (path,
        body) sent back to back on one connection (:meth:`~kubeflux.kube.keepalive.Connections.send_all`), one
        at a time through urllib3 for a client behind an HTTP proxy. Read the iterator to its end."""
        bodies = [(path, body if isinstance(body, bytes) else orjson.dumps(body)) for path, body in writes]
        connections = self._writes
        replies = None
        if connections is not None and bodies:
            headers = self._headers(method, bodies[0][0], content_type)  # the same for every path (a bearer token)
            try:
                replies = connections.send_all([Request(method, path, headers, data) for path, data in bodies])
            except (urllib3.exceptions.HTTPError, OSError) as exc:  # no connection: nothing was sent
                return iter([exc] * len(bodies))
            if replies is None:  # the server chose another protocol than HTTP/1.1 (ALPN): urllib3 from now on
                self._writes = None
                connections.close()
        if replies is None:
            return self._one_by_one(method, bodies, content_type)
        return (reply if isinstance(reply, Exception) else _checked(reply) for reply in replies)

    def _one_by_one(
        self, method: str, bodies: list[tuple[str, bytes]], content_type: str
    ) -> Iterator[bytes | Exception]:
        for path, data in bodies:
            try:
                yield bytes(self.request(method, path, data, content_type).data)
            except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                yield exc

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = JSON,
        *,
        timeout: urllib3.Timeout | None = None,
        preload: bool = True,
    ) -> urllib3.BaseHTTPResponse:
        """The response of ``method path`` with ``body`` (a JSON-able object, or bytes sent as they are; None: no
        body). Raises :class:`~kubernetes.client.ApiException` for a status other than 2xx."""
        headers = self._headers(method, path, None if body is None else content_type)
        if body is not None:
            body = body if isinstance(body, bytes) else orjson.dumps(body)
        response = self.pool.request(
            method,
            self.host + path,
            body=body,
            headers=headers,
            timeout=timeout or self.timeout,
            preload_content=preload,
        )
        if not 200 <= response.status <= 299:
            text = response.data.decode("utf-8", "replace")  # read whole, the connection goes back to the pool
            raise client.ApiException(status=response.status, reason=response.reason, body=text)
        return response

    def _list(self, path: str, query: dict[str, Any]) -> urllib3.BaseHTTPResponse:
        timeout = _timeout(query.pop("_request_timeout", (10.0, 300.0)))
        if query.pop("_preload_content", False):
            raise ValueError("serve reads lists raw: _preload_content=False")
        params = {_QUERY[key]: str(value).lower() if isinstance(value, bool) else value for key, value in query.items()}
        return self.request("GET", f"{path}?{urlencode(params)}" if params else path, timeout=timeout, preload=False)

    # ------------------------------------------------------------------ the calls

    def list_node(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/api/v1/nodes", query)

    def list_pod_for_all_namespaces(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/api/v1/pods", query)

    def list_namespace(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/api/v1/namespaces", query)

    def list_persistent_volume(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/api/v1/persistentvolumes", query)

    def list_persistent_volume_claim_for_all_namespaces(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/api/v1/persistentvolumeclaims", query)

    def list_storage_class(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/apis/storage.k8s.io/v1/storageclasses", query)

    def list_csi_node(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/apis/storage.k8s.io/v1/csinodes", query)

    def patch_namespaced_persistent_volume_claim(self, name: str, namespace: str, patch: Any) -> bytes:
        """A JSON merge patch of a claim (a scheduler's ``volume.kubernetes.io/selected-node``)."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/persistentvolumeclaims/{quote(name, safe='')}"
        return self.write("PATCH", path, patch, MERGE_PATCH)

    def patch_persistent_volume(self, name: str, patch: Any) -> bytes:
        """A JSON merge patch of a PersistentVolume (its ``claimRef``, binding it to a claim)."""
        return self.write("PATCH", f"/api/v1/persistentvolumes/{quote(name, safe='')}", patch, MERGE_PATCH)

    def list_pod_disruption_budget_for_all_namespaces(self, **query: Any) -> urllib3.BaseHTTPResponse:
        return self._list("/apis/policy/v1/poddisruptionbudgets", query)

    def list_cluster_custom_object(
        self, group: str, version: str, plural: str, **query: Any
    ) -> urllib3.BaseHTTPResponse:
        return self._list(f"/apis/{quote(group, safe='')}/{quote(version, safe='')}/{quote(plural, safe='')}", query)

    def create_namespaced_pod_binding(self, name: str, namespace: str, binding: Any) -> bytes:
        return self.write("POST", f"{_pod(namespace, name)}/binding", binding)

    def create_namespaced_pod_bindings(self, bindings: list[tuple[str, str, Any]]) -> Iterator[bytes | Exception]:
        """Several ``(name, namespace, binding)`` pipelined (:meth:`write_all`): each one's answer or failure."""
        return self.write_all(
            "POST", [(f"{_pod(namespace, name)}/binding", body) for name, namespace, body in bindings]
        )

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any) -> bytes:
        """A ``policy/v1`` Eviction (429 when a PodDisruptionBudget refuses it)."""
        return self.write("POST", f"{_pod(namespace, name)}/eviction", body)

    def patch_namespaced_pod_status(self, name: str, namespace: str, patch: Any) -> bytes:
        """A strategic merge patch (conditions merge by type), as the official client sends a dict."""
        return self.write("PATCH", f"{_pod(namespace, name)}/status", patch, STRATEGIC_MERGE_PATCH)

    def patch_namespaced_resource_claim_status(
        self, name: str, namespace: str, patch: Any, content_type: str = MERGE_PATCH
    ) -> bytes:
        """A patch of a ResourceClaim's ``status`` (``resource.k8s.io/v1``), a JSON merge patch by default."""
        return self.write("PATCH", f"{_claim(namespace, name)}/status", patch, content_type)

    def read_namespaced_resource_claim(self, name: str, namespace: str) -> bytes:
        """A ResourceClaim as the server has it now (a scheduler refreshing its copy after a 409)."""
        return bytes(self.request("GET", _claim(namespace, name)).data)

    def patch_namespaced_resource_claim(self, name: str, namespace: str, patch: Any) -> bytes:
        """A JSON merge patch of a ResourceClaim (its finalizers)."""
        return self.write("PATCH", _claim(namespace, name), patch, MERGE_PATCH)

    def patch_namespaced_pod(self, name: str, namespace: str, patch: Any) -> bytes:
        """A JSON merge patch (``null`` removes a key)."""
        return self.write("PATCH", _pod(namespace, name), patch, MERGE_PATCH)

    def create_namespaced_event(self, namespace: str, event: Any) -> bytes:
        """An ``events.k8s.io/v1`` Event."""
        return self.write("POST", _events(namespace), event)

    def create_namespaced_events(self, events: list[tuple[str, Any]]) -> Iterator[bytes | Exception]:
        """Several ``(namespace, event)`` pipelined (:meth:`write_all`): each one's answer or failure."""
        return self.write_all("POST", [(_events(namespace), event) for namespace, event in events])


def _checked(reply: Reply) -> bytes | Exception:
    """The body of a 2xx answer; :class:`~kubernetes.client.ApiException` for any other."""
    if not 200 <= reply.status <= 299:
        text = reply.data.decode("utf-8", "replace")
        return client.ApiException(status=reply.status, reason=reply.reason, body=text)
    return reply.data


def _events(namespace: str) -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe='')}/events"


def _claim(namespace: str, name: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{quote(namespace, safe='')}/resourceclaims/{quote(name, safe='')}"
