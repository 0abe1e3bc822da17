"""serve's writes as raw JSON requests on the official client's own connection pool.

The official client's typed calls cost about a millisecond of CPU each, most of it around the request (the call
validated by pydantic, the model sanitised to a dict, encoded with :mod:`json`, the response wrapped); serve sends
a Binding and an Event per pod, so it sends them itself: the body encoded once with orjson, on the same urllib3
pool (so the same host, proxy, TLS and client certificate), with the same bearer token (read through the
configuration, whose refresh hook renews an exec plugin's or a service account's token) and user agent. About
a third of the CPU per write (benchmarks/serve.py --real).

:class:`RawWriter` has one method per write serve makes, named as the official client names the call (the RBAC
test in tests/kube/test_deploy.py reads those names). A refusal raises the client's own
:class:`~kubernetes.client.ApiException` (status, reason and the server's ``Status`` body), a failure to send
raises urllib3's errors, as the typed calls do: callers handle both alike.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client

__all__ = ["RawWriter"]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


def _pod(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


class RawWriter:
    """Sends serve's writes with JSON bodies through ``api``'s pool; thread-safe (urllib3's pool is). Each method
    returns the response's body.

    ``timeout`` is (connect, read) seconds: a dead API server fails a write instead of holding a thread."""

    def __init__(self, api: client.ApiClient, timeout: tuple[float, float]) -> None:
        self.api = api
        self.host = api.configuration.host.rstrip("/")
        self.pool: urllib3.PoolManager = api.rest_client.pool_manager
        self.timeout = urllib3.Timeout(connect=timeout[0], read=timeout[1])

    def send(self, method: str, path: str, body: Any, content_type: str = JSON) -> bytes:
        """The response body of ``method path`` with ``body`` (a JSON-able object, or bytes sent as they are).
        Raises :class:`~kubernetes.client.ApiException` for a status other than 2xx."""
        headers = {**self.api.default_headers, "Content-Type": content_type, "Accept": JSON}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        response = self.pool.request(
            method, self.host + path, body=data, headers=headers, timeout=self.timeout, preload_content=True
        )
        if not 200 <= response.status <= 299:
            text = response.data.decode("utf-8", "replace")
            raise client.ApiException(status=response.status, reason=response.reason, body=text)
        return bytes(response.data)

    def create_namespaced_pod_binding(self, name: str, namespace: str, binding: Any) -> bytes:
        return self.send("POST", f"{_pod(namespace, name)}/binding", binding)

    def patch_namespaced_pod_status(self, name: str, namespace: str, patch: Any) -> bytes:
        """A strategic merge patch (conditions merge by type), as the official client sends a dict."""
        return self.send("PATCH", f"{_pod(namespace, name)}/status", patch, STRATEGIC_MERGE_PATCH)

    def patch_namespaced_pod(self, name: str, namespace: str, patch: Any) -> bytes:
        """A JSON merge patch (``null`` removes a key)."""
        return self.send("PATCH", _pod(namespace, name), patch, MERGE_PATCH)

    def create_namespaced_event(self, namespace: str, event: Any) -> bytes:
        """An ``events.k8s.io/v1`` Event."""
        return self.send("POST", f"/apis/events.k8s.io/v1/namespaces/{quote(namespace, safe='')}/events", event)
