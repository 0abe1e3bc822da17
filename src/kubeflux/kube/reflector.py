"""Informers on raw JSON: list, then watch from the list's resourceVersion, relist and diff on 410 Gone.

One :class:`Reflector` (client-go's name for the part of an informer that lists and watches) per resource, each on
its own thread, feeding one bounded :class:`queue.Queue` that the scheduling loop drains. Objects stay the
server's JSON (``_preload_content=False``, decoded with orjson): the official client's typed models cost several
times more per pod, and the scheduler core reads manifests anyway (:mod:`kubeflux.scheduler.kube_objects`).

What a reflector guarantees to the loop:

* the objects of its resource as a stream of ``ADDED``/``MODIFIED``/``DELETED`` :class:`RawEvent` in the order the
  server changed them, then a ``SYNCED`` marker after the first complete list (the loop schedules nothing before
  every reflector is synced: a scheduler that binds before it has seen the cluster double-books it);
* a list is paginated (``limit``/``continue``; an expired continue token restarts the list); the watch starts from
  the list's resourceVersion with bookmarks, so a quiet collection's version stays fresh;
* a watch that ends (server timeout, dropped connection) is opened again from the last version seen; one that
  answers 410 Gone (the version fell out of the server's cache) or 504 (a version from the server's future: it
  restarted with a new history) is replaced by a relist, *diffed* against what was known: objects that appeared
  are ADDED, changed ones MODIFIED, and those deleted during the gap are delivered as DELETED with their last
  known state (a tombstone), so their allocations are released;
* a resource the server does not serve (no PodGroup CRD: 404) is not an error: it is synced empty and looked for
  again every minute;
* errors back off (doubling up to 30 s) and never end the thread; :meth:`Reflector.stop` ends it promptly, even
  in the middle of a watch (the response is shut down) or while the queue is full.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
from kubernetes import client

from kubeflux.scheduler.kube_objects import NATIVE_GANG_GROUP

__all__ = ["SYNCED", "RawEvent", "Reflector", "Resource", "watched_resources"]

log = logging.getLogger("kubeflux.serve")
Object = dict[str, Any]
SYNCED = "SYNCED"
_MAX_BACKOFF = 30.0
_ABSENT_RETRY = 60.0


@dataclass(frozen=True, slots=True)
class RawEvent:
    """A change of one object of ``kind`` (``Pod``, ``Node``, ``PodGroup``); ``type`` is a watch event type or
    :data:`SYNCED` (then ``obj`` is empty)."""

    kind: str
    type: str
    obj: Object


@dataclass(frozen=True, slots=True)
class Resource:
    """A collection to list and watch: ``call(**query)`` is the official client's list function for it."""

    kind: str
    call: Callable[..., Any]
    optional: bool = False
    """A server without it (404) is not an error."""
    api_version: str = ""
    """Stamped on listed objects that lack it (a list of a built-in type carries no apiVersion on its items), for
    readers that tell two APIs of one kind apart."""


def watched_resources(api: client.ApiClient) -> list[Resource]:
    """What ``serve`` watches, in the order it syncs them: nodes, PodGroups, then pods of every scheduler and
    namespace (others' pods are counted)."""
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)

    def podgroups(**query: Any) -> Any:
        return custom.list_cluster_custom_object("scheduling.x-k8s.io", "v1alpha1", "podgroups", **query)

    def native_podgroups(**query: Any) -> Any:  # Kubernetes' own gang API (1.36: v1alpha2), where it is enabled
        return custom.list_cluster_custom_object(NATIVE_GANG_GROUP, "v1alpha2", "podgroups", **query)

    return [
        Resource("Node", core.list_node),
        Resource("PodGroup", podgroups, optional=True, api_version="scheduling.x-k8s.io/v1alpha1"),
        Resource("PodGroup", native_podgroups, optional=True, api_version=f"{NATIVE_GANG_GROUP}/v1alpha2"),
        Resource("Pod", core.list_pod_for_all_namespaces),
    ]


def _key(obj: Object) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _lines(response: Any) -> Iterator[Object]:
    """The JSON objects of a watch stream, one a line."""
    buffer = b""
    for chunk in response.stream(65536):
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            line, buffer = buffer[:end], buffer[end + 1 :]
            if line.strip():
                yield orjson.loads(line)
    if buffer.strip():
        yield orjson.loads(buffer)


class _Expired(Exception):
    """The server no longer has the history asked for (410 Gone), or never had it (504 too large resource
    version: it restarted with an older history): relist."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.why = "expired (410 Gone)" if code == 410 else "is ahead of the server's (504 Too large resource version)"


class Reflector:
    """Lists and watches ``resource`` into ``out`` on a thread (see the module docstring)."""

    def __init__(
        self,
        resource: Resource,
        out: queue.Queue[Any],
        *,
        page_size: int = 500,
        timeout_seconds: int = 300,
        retry_seconds: float = 1.0,
    ) -> None:
        self.resource = resource
        self.out = out
        self.page_size = page_size
        self.timeout_seconds = timeout_seconds
        self.retry_seconds = retry_seconds
        self.known: dict[str, Object] = {}
        """Key → the object as last delivered: what a relist is diffed against."""
        self.version = ""
        self.relists = 0
        self.watches = 0
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._response: Any = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"reflector-{resource.kind}")

    # ------------------------------------------------------------------ life cycle

    def start(self) -> Reflector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to end
                response.shutdown()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopped; whether to go on."""
        return not self._stop.wait(seconds)

    def _put(self, event: RawEvent) -> bool:
        while not self._stop.is_set():
            try:
                self.out.put(event, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        backoff = self.retry_seconds
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    if not self._relist():
                        continue
                    need_list = False
                self._watch()
                backoff = self.retry_seconds
            except _Expired as exc:
                log.info("%s: watch from version %s %s: relisting", self.resource.kind, self.version, exc.why)
                need_list = True
            except client.ApiException as exc:
                if self._stop.is_set():
                    break
                if exc.status in (410, 504) or (exc.status == 404 and self.resource.optional):
                    # history gone (410), a version the server never had (504: it restarted with a new history,
                    # as client-go's "too large resource version"), or the resource itself gone: list again
                    need_list = True
                    continue
                log.warning("%s: the API server answered %s %s; retrying", self.resource.kind, exc.status, exc.reason)
                need_list = need_list or exc.status is None
                if not self._wait(backoff):
                    break
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    break
                log.warning("%s: watch failed (%s); retrying from version %s", self.resource.kind, exc, self.version)
                if not self._wait(backoff):
                    break
                backoff = min(backoff * 2, _MAX_BACKOFF)

    def _list_pages(self) -> tuple[list[Object], str] | None:
        """Every object and the list's resourceVersion; None when the resource is not served."""
        items: list[Object] = []
        token: str | None = None
        while True:
            query: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, 300)}
            if token:
                query["_continue"] = token
            try:
                response = self.resource.call(**query)
            except client.ApiException as exc:
                if exc.status == 404 and self.resource.optional:
                    return None
                if exc.status == 410 and token:  # the continue token expired: a consistent list starts again
                    items, token = [], None
                    continue
                raise
            body = orjson.loads(response.data)
            response.release_conn()
            page = body.get("items") or []
            if self.resource.api_version:
                for item in page:
                    item.setdefault("apiVersion", self.resource.api_version)
            items.extend(page)
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    def _relist(self) -> bool:
        """List and deliver the difference with what was known; whether the watch may start."""
        listed = self._list_pages()
        if listed is None:
            if not self.synced.is_set():
                log.info("%s: not served by this cluster; looked for again every minute", self.resource.kind)
                if not self._put(RawEvent(self.resource.kind, SYNCED, {})):
                    return False
                self.synced.set()
            self._wait(_ABSENT_RETRY)
            return False
        items, version = listed
        self.relists += 1
        fresh = {_key(obj): obj for obj in items}
        kind = self.resource.kind
        for key, old in list(self.known.items()):
            new: Object | None = fresh.get(key)
            if new is None or (new.get("metadata") or {}).get("uid") != (old.get("metadata") or {}).get("uid"):
                del self.known[key]  # deleted during the gap (or re-created under its name): a tombstone
                if not self._put(RawEvent(kind, "DELETED", old)):
                    return False
        for key, obj in fresh.items():
            last = self.known.get(key)
            if last is not None and _version(last) == _version(obj):
                continue
            self.known[key] = obj
            if not self._put(RawEvent(kind, "ADDED" if last is None else "MODIFIED", obj)):
                return False
        self.version = version
        if not self.synced.is_set():
            if not self._put(RawEvent(kind, SYNCED, {})):
                return False
            self.synced.set()
        return True

    def _watch(self) -> None:
        response = self.resource.call(
            watch=True,
            resource_version=self.version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.timeout_seconds,
            _preload_content=False,
            _request_timeout=(10, self.timeout_seconds + 30),
        )
        with self._lock:
            self._response = response
        self.watches += 1
        kind = self.resource.kind
        complete = False
        try:
            for event in _lines(response):
                type_, obj = event.get("type"), event.get("object") or {}
                if type_ == "ERROR":
                    if obj.get("code") in (410, 504):
                        raise _Expired(obj["code"])
                    log.warning("%s: watch error %s: %s", kind, obj.get("code"), obj.get("message"))
                    return
                version = _version(obj)
                if version:
                    self.version = version
                if type_ == "BOOKMARK":
                    continue
                key = _key(obj)
                if self.resource.api_version:
                    obj.setdefault("apiVersion", self.resource.api_version)
                if type_ == "DELETED":
                    self.known.pop(key, None)
                elif type_ in ("ADDED", "MODIFIED"):
                    type_ = "MODIFIED" if key in self.known else "ADDED"
                    self.known[key] = obj
                else:
                    continue
                if not self._put(RawEvent(kind, type_, obj)):
                    return
            complete = True
        finally:
            with self._lock:
                self._response = None
            if complete:  # the server ended the stream: the connection can serve again
                response.release_conn()
            else:  # left mid-stream: unread events would be the next request's answer
                response.close()
