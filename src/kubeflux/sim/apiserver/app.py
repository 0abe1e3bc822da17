"""The HTTP shell: a plain ASGI application mapping Kubernetes REST paths onto the :class:`Store`.

It holds no semantics of its own: it parses the path (``/api/v1/namespaces/NS/pods/NAME/status``, the ``/apis``
groups, legacy ``/watch/`` paths), the query (selectors, paging, watch options, delete options) and the body
(JSON, YAML for hand-made requests, protobuf for built-in kinds: see :mod:`.media`; server-side apply is 415),
calls the store, and writes JSON (orjson), or protobuf to the clients that prefer it. Discovery (``/version``,
``/api``, ``/apis``, group/version resource lists) is answered in the legacy form, which kubectl and client-go
accept when they ask for aggregated discovery. Open watches are streamed by the app's
:class:`~.watchstream.WatchStreams`. Every refused request is a ``Status``; an unexpected exception is logged and
answered as a 500 ``Status`` without taking the server down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import orjson
import yaml

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.authentication import AuthenticationReview
from kubeflux.sim.apiserver.authorization import ReviewStrategy
from kubeflux.sim.apiserver.clock import Clock, time_document
from kubeflux.sim.apiserver.discovery import AGGREGATED, aggregated_discovery, discovery_document, wants_aggregated
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.eviction import evict
from kubeflux.sim.apiserver.fields import managed_after
from kubeflux.sim.apiserver.media import JSON_OUTPUT, PROTOBUF, Output, Renderer
from kubeflux.sim.apiserver.metadata import MAX_DEPTH, parse_resource_version, too_deep
from kubeflux.sim.apiserver.openapi import OPENAPI_V2_PROTOBUF, OpenApi, openapi_v2_json
from kubeflux.sim.apiserver.options import check_list_options, dry_run, field_manager, flag, integer, list_selectors
from kubeflux.sim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from kubeflux.sim.apiserver.queue_route import QUEUE_PATH, QueueRoute
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.scale import get_scale, patch_scale, update_scale
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.tokens import ADMIN, TokenIssuer
from kubeflux.wallclock import WallClock

if TYPE_CHECKING:
    from kubeflux.sim.apiserver.pacer import Activity
from kubeflux.sim.apiserver.tables import table, wants_table
from kubeflux.sim.apiserver.watchstream import Receive, Scope, Send, WatchStreams

__all__ = ["ApiApp", "ServerSettings"]

log = logging.getLogger("kubeflux.apiserver")


MAX_BODY_BYTES = 3 * 1024 * 1024
"""The real server's request body limit (3 MiB)."""
_JSON = "application/json"
_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"
_STRATEGIC = "application/strategic-merge-patch+json"
_APPLY = "application/apply-patch+yaml"
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_OPTIONS_KINDS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions", "DELETE": "DeleteOptions"}
_SUBRESOURCE_METHODS = {"scale": ("GET", "PUT", "PATCH"), "token": ("POST",)}
"""Subresources that serve only some methods (the real server answers 405 to the others)."""


@dataclass(slots=True)
class ServerSettings:
    token: str = ""
    """A static bearer token every request must carry; empty: no authentication."""
    max_body_bytes: int = MAX_BODY_BYTES
    bookmark_seconds: float = 30.0
    """How often an idle watch that allows bookmarks gets one."""
    default_watch_seconds: float = 1800.0
    fresh_wait_seconds: float = 3.0
    """How long a list from a version the server has not reached waits for it before the 504 (the real watch cache
    waits 3 s)."""
    watch_future_waits: bool = True
    """A watch from a version the server has not reached waits for it silently, as the real server's does (only a
    list says 504). False: it waits :attr:`fresh_wait_seconds`, then ends with an ``ERROR`` event of that 504, as
    this server answered before; for a client that relies on it (kubeflux serve's reflector until it relists after
    a failed watch, as client-go's does)."""
    address: str = "127.0.0.1:0"


@dataclass(slots=True)
class Target:
    """What a resource path names."""

    resource: ResourceType
    namespace: str = ""
    name: str = ""
    subresource: str = ""


class _YamlLoader(yaml.SafeLoader):
    """The safe loader without aliases: an alias bomb of a few kilobytes would expand to gigabytes of JSON."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not allowed in a request body")
        return super().compose_node(parent, index)


def _yaml_load(text: bytes) -> Any:
    return yaml.load(text, Loader=_YamlLoader)


def _list_item(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as a list shows it: without ``kind`` and ``apiVersion`` (the list's kind says them), as the real
    server's lists. A shallow copy (the stored version is shared), two keys taken out: C-level dict work."""
    item = dict(obj)
    item.pop("kind", None)
    item.pop("apiVersion", None)
    return item


class ApiApp:
    """The ASGI application serving ``store``."""

    def __init__(self, store: Store, settings: ServerSettings | None = None, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock
        self.registry = store.registry
        self.settings = settings or ServerSettings()
        self.requests = 0
        self.activity: Activity | None = None
        """The requests in flight that virtual time waits for (set by the server in virtual time)."""
        self.openapi = OpenApi(self.registry)
        self.tokens = TokenIssuer()
        """The ServiceAccount tokens issued (``serviceaccounts/NAME/token``), accepted as bearer tokens."""
        self.queue = QueueRoute()
        """``GET /kubeflux/queue``: the in-process schedulers' queues (given once they run)."""
        self.streams = WatchStreams(store, self.settings, Renderer())
        """The open watches (see :mod:`.watchstream`)."""

    @property
    def media(self) -> Renderer:
        """How answers are encoded (JSON or protobuf), in plain answers and watch streams alike."""
        return self.streams.media

    @media.setter
    def media(self, media: Renderer) -> None:
        self.streams.media = media

    def shutdown(self) -> None:
        """End every open watch now (their clients re-watch elsewhere), so that the server stops at once."""
        self.streams.shutdown()

    def unsent(self) -> bool:
        """Some open watch holds events it has not written yet."""
        return self.streams.unsent()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        self.requests += 1
        try:
            await self._handle(scope, receive, send)
        except ApiError as exc:
            if exc.plain is not None:
                await self._respond(send, exc.code, exc.plain, "text/plain; charset=utf-8" if exc.plain else "")
            else:
                await self._respond(send, exc.code, exc.status(), output=self._error_output(scope))
        except RecursionError:
            body = errors.bad_request("the request body is nested too deeply").status()
            await self._respond(send, 400, body, output=self._error_output(scope))
        except Exception as exc:  # a bug must not take the server down; the client gets a Status
            log.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            body = ApiError(500, "InternalError", f"an error on the server ({type(exc).__name__}: {exc})").status()
            await self._respond(send, 500, body)

    def _error_output(self, scope: Scope) -> Output:
        """A ``Status`` in protobuf to the clients that prefer it, as the real server answers them."""
        for key, value in scope.get("headers", []):
            if key.lower() == b"accept":
                return self.media.error_output(value.decode("latin-1"))
        return JSON_OUTPUT

    # -- plumbing --------------------------------------------------------------------------------------------
    async def _respond(
        self,
        send: Send,
        code: int,
        body: Any,
        content_type: str = _JSON,
        output: Output = JSON_OUTPUT,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        if output is JSON_OUTPUT:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
        else:
            data, content_type = self.media.encode(body, output)
        headers = [(b"content-length", str(len(data)).encode())]
        if content_type:
            headers.append((b"content-type", content_type.encode()))
        if extra:
            headers.extend(extra)
        try:
            await send({"type": "http.response.start", "status": code, "headers": headers})
            await send({"type": "http.response.body", "body": data})
        except OSError:  # the client went away
            return

    async def _body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise errors.bad_request("the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.settings.max_body_bytes:
                raise errors.too_large(self.settings.max_body_bytes)
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    def _decode(self, data: bytes, content_type: str, api_version: str = "") -> Any:
        """The body in its content type; protobuf only for a resource of a built-in ``api_version``."""
        media = content_type.split(";")[0].strip().lower()
        if media in ("", _JSON, _MERGE, _JSON_PATCH, _STRATEGIC, "*/*"):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
        if media in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                return _yaml_load(data)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"yaml parse error: {exc}") from exc
        if media == PROTOBUF and api_version:
            return self.media.decode(data, api_version)
        raise errors.unsupported_media_type(media, "application/json, application/yaml")

    def _authorize(self, headers: dict[str, str]) -> dict[str, Any]:
        """Who sends the request: the admin (:data:`~.tokens.ADMIN`) with the token (anyone, without one), or the
        ServiceAccount of a token this server issued; 401 otherwise."""
        given = headers.get("authorization", "")
        if not self.settings.token or given == f"Bearer {self.settings.token}":
            return ADMIN
        user = self.tokens.identity(given[7:], self.store) if given.startswith("Bearer ") else None
        if user is None:
            raise errors.unauthorized()
        return user

    # -- routing ---------------------------------------------------------------------------------------------
    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path: str = scope["path"]
        if path in ("/healthz", "/livez", "/readyz"):
            await self._respond(send, 200, b"ok", "text/plain")
            return
        if path == "/kubeflux/time":  # the simulated time, for clients that want it
            await self._respond(send, 200, time_document(self.clock or WallClock(), self.store.clock()))
            return
        user = self._authorize(headers)
        method: str = scope["method"]
        if path == QUEUE_PATH:  # pod names: for authorized clients only
            await self._respond(send, *self.queue.answer(method, self.store.clock()))
            return
        raw_query = scope.get("query_string", b"").decode("latin-1")
        query = {k: v[-1] for k, v in parse_qs(raw_query, keep_blank_values=True).items()}
        parts = [p for p in path.split("/") if p]
        if parts == ["openapi", "v2"] and method == "GET":
            if "protobuf" in headers.get("accept", ""):
                await self._respond(send, 200, b"", OPENAPI_V2_PROTOBUF)
            else:
                await self._respond(send, 200, openapi_v2_json())
            return
        if parts[:2] == ["openapi", "v3"] and method == "GET":
            if len(parts) == 2:  # the index, in the real server's content type
                await self._respond(send, 200, self.openapi.index(), "text/plain; charset=utf-8")
                return
            code, extra, data = self.openapi.answer(parts[2:], query)
            await self._respond(send, code, data, _JSON if data else "", extra=extra)
            return
        if parts in (["api"], ["apis"]) and method == "GET" and wants_aggregated(headers.get("accept", "")):
            await self._respond(send, 200, aggregated_discovery(self.registry, parts == ["api"]), AGGREGATED)
            return
        discovery = self._discovery(parts, scope)
        if discovery is not None:
            if method != "GET":
                raise errors.method_not_allowed(f"{method} is not allowed on {path}")
            await self._respond(send, 200, discovery)
            return
        target, watch_path = self._target(parts)
        if target is None:
            if parts[:1] == ["apis"] and len(parts) > 1 and parts[1] not in self.registry.group_versions():
                raise errors.page_not_found()
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        content_type = headers.get("content-type", "")
        accept = headers.get("accept", "")
        output = self.media.output(accept, target.resource.api_version)
        if target.subresource == "finalize" and method != "PUT":
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        if method not in _SUBRESOURCE_METHODS.get(target.subresource, (method,)):
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        if target.subresource == "log":
            if method != "GET":
                raise errors.method_not_allowed(f"{method} is not allowed on pods/log")
            await self._respond(send, 200, self._log(target, query), "text/plain")
            return
        if method == "GET":
            as_table = wants_table(accept)
            watching = watch_path or (not target.name and flag(query, "watch"))
            waits = watching and self.settings.watch_future_waits and not flag(query, "sendInitialEvents")
            if (watch_path or not target.name) and not waits:  # a watch that waits needs no head start
                await self._wait_for_version(query.get("resourceVersion", ""))
            if watching:
                await self.streams.serve(target.resource, target.namespace, query, receive, send, as_table, output)
                return
            body = self._get(target, query, as_table)
            if output is not JSON_OUTPUT:
                body = self.media.shape(body, output, is_list=not target.name)
            await self._respond(send, 200, body, output=output)
            return
        options_kind = _OPTIONS_KINDS.get(method)
        if options_kind is None:
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        dry = dry_run(query, options_kind)
        body_bytes = await self._body(receive)
        manager = field_manager(query, headers.get("user-agent", "")) if method != "DELETE" else ""
        with self.store.request(manager, dry=dry):
            if method == "POST":
                code, body = self._post(target, body_bytes, content_type, manager, user)
            elif method == "PUT":
                code, body = 200, self._put(target, body_bytes, content_type)
            elif method == "PATCH":
                code, body = self._patch(target, body_bytes, content_type, query)
            else:
                code, body = self._delete(target, body_bytes, content_type, query)
        if output is not JSON_OUTPUT:
            body = self.media.shape(body, output, is_list=isinstance(body, dict) and "items" in body)
        await self._respond(send, code, body, output=output)

    async def _wait_for_version(self, version: str) -> None:
        """A version ahead of the store's: wait up to :attr:`ServerSettings.fresh_wait_seconds` for the writes to
        reach it (the store then answers 504 if they have not)."""
        try:
            requested = parse_resource_version(version)
        except ApiError:
            return  # the store answers it with the same 400
        if requested <= self.store.rv:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.fresh_wait_seconds
        activity = self.activity
        if activity is not None:  # waiting for writes, not working: virtual time may go on to them
            activity.in_flight -= 1
        try:
            while requested > self.store.rv and loop.time() < deadline:
                await asyncio.sleep(0.05)
        finally:
            if activity is not None:
                activity.in_flight += 1

    def _target(self, parts: list[str]) -> tuple[Target | None, bool]:
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None, False
        watch = rest[:1] == ["watch"]
        if watch:
            rest = rest[1:]
        namespace = ""
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in _NAMESPACE_SUBRESOURCES and group == "")
        ):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None, watch
        resource = self.registry.find(group, version, rest[0])
        if resource is None:
            return None, watch
        if namespace and not resource.namespaced:
            return None, watch
        target = Target(resource, namespace, rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")
        if target.subresource and target.subresource not in resource.subresources:
            return None, watch
        return target, watch

    def _discovery(self, parts: list[str], scope: Scope) -> Any:
        server = scope.get("server") or ("127.0.0.1", 0)
        return discovery_document(self.registry, parts, f"{server[0]}:{server[1]}")

    # -- verbs -----------------------------------------------------------------------------------------------
    def _get(self, target: Target, query: dict[str, str], as_table: bool = False) -> Any:
        resource = target.resource
        if resource.create_only:
            raise errors.method_not_allowed(f"{resource.plural} can only be created")
        if target.subresource == "scale":
            return get_scale(self.store, resource, target.namespace, target.name)
        if target.name:
            obj = self.store.get(resource, target.namespace, target.name)
            if as_table:
                version = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return table(resource, [obj], self.store.clock(), version, objects_as=query.get("includeObject", ""))
            return obj
        labels, fields = list_selectors(resource, query)
        limit = integer(query, "limit") or 0
        if limit < 0:
            raise errors.bad_request(f"limit: must not be negative, got {limit}")
        check_list_options(query, watch=False)
        match = query.get("resourceVersionMatch", "")
        result = self.store.listwatch.list_objects(
            resource,
            target.namespace,
            labels,
            fields,
            limit=limit,
            continue_token=query.get("continue", ""),
            resource_version=query.get("resourceVersion", ""),
            exact=match == "Exact",
        )
        metadata: dict[str, Any] = {"resourceVersion": str(result.rv)}
        if result.continue_token:
            metadata["continue"] = result.continue_token
            if labels.empty and fields.empty:  # the real server cannot count what a selector would leave
                metadata["remainingItemCount"] = result.remaining
        if as_table:
            rows = query.get("includeObject", "")
            return table(resource, result.items, self.store.clock(), metadata, objects_as=rows)
        return {
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": metadata,
            "items": [_list_item(item) for item in result.items],
        }

    def _log(self, target: Target, query: dict[str, str]) -> bytes:
        """``pods/NAME/log``: the container is checked as the real server checks it; the simulated containers
        write nothing, and a pod not yet bound has no kubelet to ask (the real server answers it empty too)."""
        pod = self.store.get(target.resource, target.namespace, target.name)
        spec = pod.get("spec") or {}
        names = [c.get("name") for c in spec.get("containers") or () if isinstance(c, dict)]
        others = [c.get("name") for f in ("initContainers", "ephemeralContainers") for c in spec.get(f) or ()]
        container = query.get("container", "")
        if not container and len(names) != 1:
            if not names:
                raise errors.bad_request(f"a container name must be specified for pod {target.name}")
            listed = " ".join(str(n) for n in [*names, *others])
            why = f"a container name must be specified for pod {target.name}, choose one of: [{listed}]"
            raise errors.bad_request(why)
        if container and container not in names and container not in others:
            raise errors.bad_request(f"container {container} is not valid for pod {target.name}")
        return b""

    def _post(
        self, target: Target, data: bytes, content_type: str, manager: str = "", user: dict[str, Any] = ADMIN
    ) -> tuple[int, Any]:
        resource = target.resource
        if target.subresource == "token":
            body = self._decode(data, content_type, "authentication.k8s.io/v1")
            return 201, self.tokens.request(self.store, resource, target.namespace, target.name, body, manager)
        body = self._decode(data, content_type, resource.api_version)
        if isinstance(resource.strategy, AuthenticationReview):
            return 201, resource.strategy.answer(body, user, self.tokens, self.store, manager)
        if isinstance(resource.strategy, ReviewStrategy):
            answer = resource.strategy.answer(body, target.namespace)
            if manager and answer["spec"]:  # the request's fields are the client's, as the real server records
                asked = {"apiVersion": answer["apiVersion"], "metadata": {}, "spec": answer["spec"]}
                answer["metadata"]["managedFields"] = managed_after(None, asked, manager, "Update", self.store.now())
            return 201, answer
        if resource.create_only:
            pods = self.registry.find("", "v1", "pods")
            meta = body.get("metadata") if isinstance(body, dict) else None
            name = meta.get("name") if isinstance(meta, dict) else None
            if pods is None or not isinstance(name, str) or not name:
                raise errors.bad_request("a Binding needs metadata.name (the pod's name)")
            self.store.bind(pods, target.namespace, name, body)
            return 201, errors.status_success(201)
        if target.subresource == "binding":
            meta = body.get("metadata") if isinstance(body, dict) else None
            named = meta.get("name") if isinstance(meta, dict) else None
            if named not in (None, "", target.name):
                raise errors.bad_request("name in URL does not match name in Binding object")
            self.store.bind(resource, target.namespace, target.name, body)
            return 201, errors.status_success(201)
        if target.subresource == "eviction":
            evict(self.store, resource, target.namespace, target.name, body)
            return 201, errors.status_success(201)
        if target.name:
            raise errors.method_not_allowed(f"POST is not allowed on a named {resource.singular}; use PUT or PATCH")
        return 201, self.store.create(resource, target.namespace, body)

    def _put(self, target: Target, data: bytes, content_type: str) -> Any:
        if not target.name:
            raise errors.method_not_allowed("PUT needs an object name")
        if target.subresource == "scale":
            body = self._decode(data, content_type, "autoscaling/v1")
            return update_scale(self.store, target.resource, target.namespace, target.name, body)
        body = self._decode(data, content_type, target.resource.api_version)
        return self.store.update(target.resource, target.namespace, target.name, body, target.subresource)

    def _patch(self, target: Target, data: bytes, content_type: str, query: dict[str, str]) -> tuple[int, Any]:
        if not target.name:
            raise errors.method_not_allowed("PATCH needs an object name")
        media = content_type.split(";")[0].strip().lower()
        if media == _APPLY:
            return self._apply(target, data, query)
        appliers: dict[str, Callable[[Any, Any], Any]] = {
            _MERGE: merge_patch,
            _JSON_PATCH: json_patch,
            _STRATEGIC: strategic_merge_patch,
        }
        applier = appliers.get(media)
        if applier is None:
            raise errors.unsupported_media_type(media, f"{_JSON_PATCH}, {_MERGE}, {_STRATEGIC}, {_APPLY}")
        patch = self._decode(data, _JSON)
        if too_deep(patch):
            raise errors.bad_request(f"the patch is nested more than {MAX_DEPTH} levels deep")
        if media != _JSON_PATCH and not isinstance(patch, dict):
            raise errors.bad_request("the patch must be a JSON object")
        if target.subresource == "scale":
            scaled = patch_scale(
                self.store, target.resource, target.namespace, target.name, lambda current: applier(current, patch)
            )
            return 200, scaled
        return 200, self.store.patch(
            target.resource, target.namespace, target.name, lambda current: applier(current, patch), target.subresource
        )

    def _apply(self, target: Target, data: bytes, query: dict[str, str]) -> tuple[int, Any]:
        """Server-side apply (``application/apply-patch+yaml``)."""
        manager = query.get("fieldManager", "")
        if not manager:
            cause = errors.Cause("fieldManager", "Required value: is required for apply patch", "FieldValueRequired")
            raise errors.invalid("PatchOptions.meta.k8s.io", "", [cause])
        try:
            applied = _yaml_load(data)
        except yaml.YAMLError as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from exc
        if not isinstance(applied, dict):
            raise errors.bad_request("error decoding YAML: the applied configuration must be an object")
        return self.store.apply(
            target.resource,
            target.namespace,
            target.name,
            applied,
            manager,
            force=flag(query, "force"),
            subresource=target.subresource,
        )

    def _delete(self, target: Target, data: bytes, content_type: str, query: dict[str, str]) -> tuple[int, Any]:
        options: dict[str, Any] = {}
        if data.strip():
            decoded = self._decode(data, content_type, target.resource.api_version)
            if not isinstance(decoded, dict):
                raise errors.bad_request("the body of a DELETE must be DeleteOptions")
            options = decoded
        grace = options.get("gracePeriodSeconds", integer(query, "gracePeriodSeconds"))
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
            raise errors.bad_request(f"gracePeriodSeconds: must be an integer, got {grace!r}")
        propagation = options.get("propagationPolicy") or query.get("propagationPolicy", "")
        if options.get("orphanDependents") is True or query.get("orphanDependents") == "true":
            propagation = propagation or "Orphan"
        preconditions = options.get("preconditions") or {}
        if not isinstance(preconditions, dict) or not isinstance(propagation, str):
            raise errors.bad_request("preconditions must be an object and propagationPolicy a string")
        resource = target.resource
        if target.name:
            self.store.deletion.check_preconditions(
                resource,
                target.namespace,
                target.name,
                uid=str(preconditions.get("uid") or ""),
                resource_version=str(preconditions.get("resourceVersion") or ""),
            )
            obj, gone = self.store.deletion.delete_outcome(
                resource, target.namespace, target.name, grace=grace, propagation=propagation
            )
            if gone and not resource.strategy.returns_deleted_object:
                meta = obj["metadata"]
                details = {"name": meta["name"], "group": resource.group, "kind": resource.plural, "uid": meta["uid"]}
                return 200, errors.status_success(200, **{k: v for k, v in details.items() if v})
            return 200, obj
        if not resource.verbs_allow("deletecollection"):
            raise errors.method_not_allowed("the server does not allow this method on the requested resource")
        labels, fields = list_selectors(resource, query)
        listed = self.store.listwatch.list_objects(resource, target.namespace, labels, fields)
        for item in listed.items:
            meta = item["metadata"]
            with contextlib.suppress(ApiError):
                namespace = meta.get("namespace", "")
                self.store.delete(resource, namespace, meta["name"], grace=grace, propagation=propagation)
        return 200, {  # the objects as listed before their deletion, as the real server answers
            "kind": resource.list_kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": [_list_item(item) for item in listed.items],
        }
