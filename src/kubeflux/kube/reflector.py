"""Informers on raw JSON: list, then watch from the list's resourceVersion, relist and diff on 410 Gone.

One :class:`Reflector` (client-go's name for the part of an informer that lists and watches) per resource, each on
its own thread, feeding one bounded :class:`EventQueue` that the scheduling loop drains. Objects stay the
server's JSON (``_preload_content=False``, decoded with orjson): the official client's typed models cost several
times more per pod, and the scheduler core reads manifests anyway (:mod:`kubeflux.apiobjects.manifests`).

What a reflector guarantees to the loop:

* the objects of its resource as a stream of ``ADDED``/``MODIFIED``/``DELETED`` :class:`RawEvent` in the order the
  server changed them, then a ``SYNCED`` marker after the first complete list (the loop schedules nothing before
  every reflector is synced: a scheduler that binds before it has seen the cluster double-books it);
* a list is paginated (``limit``/``continue``; an expired continue token restarts the list) and each page is
  delivered as it comes, so the loop reads one page while the server sends the next; the watch starts from the
  list's resourceVersion with bookmarks, so a quiet collection's version stays fresh;
* a watch the server ended (its timeout) is opened again from the last version seen. One that *failed* (the
  connection dropped or refused, an error status, an ``ERROR`` event: the API server may have restarted, perhaps on
  another etcd) is replaced by a relist *from the last version seen* (``resourceVersionMatch=NotOlderThan``, as
  client-go's reflector relists after a failed watch): a real v1.36 server answers a watch from a version it never
  had (its etcd was wiped or restored: its history restarted lower) by waiting silently, and only a *list* says
  504 "Too large resource version". A list answered so, or 410 Gone (the version was compacted), is made again
  from scratch (a consistent read). Every relist is *diffed* against what was known: objects that appeared are
  ADDED, changed ones MODIFIED, and those deleted during the gap (or lost with the old etcd) are delivered as
  DELETED with their last known state (a tombstone), so their allocations are released;
* a resource the server does not serve (no PodGroup CRD: 404) is not an error: it is synced empty and looked for
  again every minute;
* errors back off (doubling up to 30 s) and never end the thread; :meth:`Reflector.stop` ends it promptly, even
  in the middle of a watch (the response is shut down) or while the queue is full;
* while the API server cannot be reached (or fails every request), :attr:`Reflector.failures` says since when and
  why (``/readyz`` turns false beyond a stated time), and the log says so once, then at most once every
  :data:`LOG_EVERY` seconds with the count of attempts, and once more when the server answers again.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
from kubernetes import client

from kubeflux.apiobjects.manifests import NATIVE_GANG_GROUP
from kubeflux.kube.keepalive import chunked_body
from kubeflux.kube.rest import RawApi

__all__ = ["LOG_EVERY", "SYNCED", "EventQueue", "Failures", "RawEvent", "Reflector", "Resource", "watched_resources"]

log = logging.getLogger("kubeflux.serve")
Object = dict[str, Any]
SYNCED = "SYNCED"
_MAX_BACKOFF = 30.0
_ABSENT_RETRY = 60.0
LOG_EVERY = 30.0
"""Seconds between two log lines about one reflector's failures that go on (the first is said at once)."""


@dataclass(frozen=True, slots=True)
class RawEvent:
    """A change of one object of ``kind`` (``Pod``, ``Node``, ``PodGroup``, ``PodDisruptionBudget``, ``Namespace``, a
    storage kind);
    ``type`` is a watch event type or :data:`SYNCED` (then ``obj`` is empty)."""

    kind: str
    type: str
    obj: Object


class EventQueue:
    """The reflectors' events for the scheduling loop, in order, at most ``capacity`` waiting for the reflectors
    (back-pressure: :meth:`put` waits while it is full; :meth:`offer` does not wait).

    A :class:`queue.SimpleQueue` underneath (C): a put and a get cost ~0.2 µs where :class:`queue.Queue`'s
    conditions cost ~4-5 µs, and serve takes two or three events a pod (issue 28). A full queue is looked at again
    every few milliseconds, which only a loop behind by ``capacity`` events makes a reflector do."""

    _FULL_WAIT = 0.005
    """Seconds a reflector waits before looking again at a full queue."""

    def __init__(self, capacity: int = 1_000_000) -> None:
        self.capacity = capacity
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def qsize(self) -> int:
        return self._events.qsize()

    def put(self, event: Any, stop: threading.Event) -> bool:
        """Queue ``event`` once fewer than ``capacity`` wait; False (not queued) if ``stop`` is set meanwhile."""
        while self._events.qsize() >= self.capacity:
            if stop.wait(self._FULL_WAIT):
                return False
        self._events.put(event)
        return True

    def offer(self, event: Any) -> None:
        """Queue ``event`` unless the queue is full."""
        if self._events.qsize() < self.capacity:
            self._events.put(event)

    def get(self, timeout: float | None = None) -> Any:
        """The next event; raises :class:`queue.Empty` if none came within ``timeout`` seconds."""
        return self._events.get(timeout=timeout)

    def get_nowait(self) -> Any:
        """The next event; raises :class:`queue.Empty` if none waits."""
        return self._events.get_nowait()


@dataclass(frozen=True, slots=True)
class Resource:
    """A collection to list and watch: ``call(**query)`` is its list function, the official client's or
    :class:`~kubeflux.kube.rest.RawApi`'s (the same keywords; ``_preload_content=False``)."""

    kind: str
    call: Callable[..., Any]
    optional: bool = False
    """A server without it (404) is not an error."""
    api_version: str = ""
    """Stamped on listed objects that lack it (a list of a built-in type carries no apiVersion on its items), for
    readers that tell two APIs of one kind apart."""
    absent: str = ""
    """What to say when an optional resource is not served: which API it is and how to get it."""

    def describe(self) -> str:
        """``kind (apiVersion)``, or the kind alone."""
        return f"{self.kind} ({self.api_version})" if self.api_version else self.kind


def watched_resources(api: client.ApiClient) -> list[Resource]:
    """What ``serve`` watches, in the order it syncs them: nodes, PodGroups, PodDisruptionBudgets (what preemption
    may not take), namespaces (their labels, which inter-pod affinity's ``namespaceSelector`` selects on), the
    storage objects the volume filters read (StorageClasses, PersistentVolumes and claims, CSINodes), Dynamic
    Resource Allocation's DeviceClasses, ResourceSlices and ResourceClaims (the devices pods' claims are given), then
    pods of every scheduler and namespace (others' pods are counted)."""
    raw = RawApi(api)

    def podgroups(**query: Any) -> Any:
        return raw.list_cluster_custom_object("scheduling.x-k8s.io", "v1alpha1", "podgroups", **query)

    def native_podgroups(**query: Any) -> Any:  # Kubernetes' own gang API (1.36: v1alpha2), where it is enabled
        return raw.list_cluster_custom_object(NATIVE_GANG_GROUP, "v1alpha2", "podgroups", **query)

    return [
        Resource("Node", raw.list_node),
        Resource(
            "PodGroup",
            podgroups,
            optional=True,
            api_version="scheduling.x-k8s.io/v1alpha1",
            absent="the coscheduling CRD of kubernetes-sigs/scheduler-plugins is not installed; install it "
            "(config/crd/bases/scheduling.x-k8s.io_podgroups.yaml of scheduler-plugins) for pods labelled "
            "scheduling.x-k8s.io/pod-group",
        ),
        Resource(
            "PodGroup",
            native_podgroups,
            optional=True,
            api_version=f"{NATIVE_GANG_GROUP}/v1alpha2",
            absent="Kubernetes' own gang scheduling API (1.36, alpha) is not enabled; to use it (pods naming a "
            "PodGroup in spec.schedulingGroup), start kube-apiserver with "
            f"--runtime-config={NATIVE_GANG_GROUP}/v1alpha2=true --feature-gates=GenericWorkload=true",
        ),
        Resource(
            "PodDisruptionBudget",
            raw.list_pod_disruption_budget_for_all_namespaces,
            optional=True,
            api_version="policy/v1",
            absent="the API server serves no policy/v1 PodDisruptionBudgets; preemption evicts without them",
        ),
        Resource("Namespace", raw.list_namespace),
        Resource("StorageClass", raw.list_storage_class),
        Resource("PersistentVolume", raw.list_persistent_volume),
        Resource("PersistentVolumeClaim", raw.list_persistent_volume_claim_for_all_namespaces),
        Resource("CSINode", raw.list_csi_node),
        *(
            Resource(
                kind,
                functools.partial(raw.list_cluster_custom_object, "resource.k8s.io", "v1", plural),
                optional=True,
                api_version="resource.k8s.io/v1",
                absent="the API server serves no resource.k8s.io/v1 (Dynamic Resource Allocation, GA in 1.34); pods "
                "with ResourceClaims wait",
            )
            for kind, plural in (
                ("DeviceClass", "deviceclasses"),
                ("ResourceSlice", "resourceslices"),
                ("ResourceClaim", "resourceclaims"),
            )
        ),
        Resource("Pod", raw.list_pod_for_all_namespaces),
    ]


def _key(obj: Object) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _uid(obj: Object) -> object:
    return (obj.get("metadata") or {}).get("uid")


def _connection_reader(response: Any) -> Callable[[int], bytes] | None:
    """The ``read1`` of the buffered reader of ``response``'s connection when the response is a chunked, unencoded
    body of which nothing was read yet (a watch stream, status line and headers read): the stream is then read from
    it by :func:`~kubeflux.kube.keepalive.chunked_body`, whole chunks at a time. urllib3 reads one chunk (one watch
    event) a call through several layers: ~30 µs of the pods' reflector's CPU a pod event, 0.3 s of a burst of
    10,000 pods (issue 28). None otherwise (another client or urllib3 version, a proxy, gzip): urllib3 reads it."""
    inner = getattr(response, "_fp", None)
    read1 = getattr(getattr(inner, "fp", None), "read1", None)
    headers = getattr(response, "headers", None) or {}
    if (
        not getattr(response, "chunked", False)
        or headers.get("content-encoding")
        or getattr(inner, "chunked", False) is not True
        or getattr(inner, "chunk_left", 0) is not None
        or not callable(read1)
    ):
        return None
    return read1  # type: ignore[no-any-return]


def _lines(response: Any, read: Callable[[int], bytes] | None = None) -> Iterator[Object]:
    """The JSON objects of a watch stream, one a line; read through ``read`` (see :func:`_connection_reader`)
    when given, else through urllib3."""
    buffer = b""
    for chunk in chunked_body(read) if read is not None else response.stream(65536):
        if b"\n" not in chunk:
            buffer += chunk
            continue
        lines = (buffer + chunk).split(b"\n")
        buffer = lines.pop()  # (the part of a line after the last newline)
        for line in lines:
            if line.strip():
                yield orjson.loads(line)
    if buffer.strip():
        yield orjson.loads(buffer)


def _strip(obj: Object) -> None:
    """Drop ``obj``'s ``metadata.managedFields``, as kube-scheduler's informers do (client-go's
    ``TransformStripManagedFields``): the server's record of who wrote which field, which no reader here looks at,
    is most of a pod's dicts and lists (29 of 42 for a plain pod); dropped as soon as it is read, it is neither kept
    nor scanned by the garbage collector while the pod is known."""
    meta = obj.get("metadata")
    if type(meta) is dict:
        meta.pop("managedFields", None)


def _network_reason(exc: Exception) -> str:
    """The cause of a failed request in a few words: urllib3 wraps it (``Max retries exceeded with url: … (Caused by
    NewConnectionError("HTTPConnection(host=…, port=…): Failed to establish a new connection: [Errno 111] Connection
    refused"))``); the innermost reason is what a reader needs."""
    reason: object = exc
    while isinstance(getattr(reason, "reason", None), Exception):
        reason = reason.reason  # type: ignore[attr-defined]
    text = str(reason)
    if isinstance(reason, urllib3.exceptions.NewConnectionError) and "): " in text:
        text = text.split("): ", 1)[1]
    return text


class Failures:
    """A run of failed requests of one reflector: since when (``clock`` seconds, monotonic), how many, the last
    error, and which of them to log (the first, then one every ``every`` seconds)."""

    def __init__(self, kind: str, clock: Callable[[], float] = time.monotonic, every: float = LOG_EVERY) -> None:
        self.kind, self.clock, self.every = kind, clock, every
        self.since: float | None = None
        """When the run began; None while requests succeed."""
        self.count = 0
        self.last_error = ""
        self._logged = 0.0
        self._unlogged = 0

    def failed(self, error: str, retry: float) -> str | None:
        """Count a failure (``retry``: seconds until the next attempt); the line to log, or None (rate-limited)."""
        now = self.clock()
        self.count += 1
        self.last_error = error
        if self.since is None:
            self.since, self._logged, self._unlogged = now, now, 0
            return f"{self.kind}: {error}; retrying in {retry:g} s (said again at most every {self.every:g} s)"
        if now - self._logged < self.every:
            self._unlogged += 1
            return None
        self._logged, self._unlogged = now, 0
        return (
            f"{self.kind}: still failing after {self.count} attempts in {now - self.since:.0f} s: {error}; "
            f"retrying in {retry:g} s"
        )

    def succeeded(self) -> str | None:
        """A request went through: the run ends; the line to log when there was one."""
        if self.since is None:
            return None
        line = f"{self.kind}: the API server answers again, after {self.count} failed attempts in " + (
            f"{self.clock() - self.since:.0f} s"
        )
        self.since, self.count, self.last_error = None, 0, ""
        return line

    def for_longer_than(self, seconds: float) -> float | None:
        """How long the run has lasted, when longer than ``seconds``; else None."""
        if self.since is None:
            return None
        lasted = self.clock() - self.since
        return lasted if lasted > seconds else None


class _NotServed(Exception):
    """The resource is not served by this cluster (404 of an optional one)."""


class _Expired(Exception):
    """The server no longer has the history asked for (410 Gone), or never had it (504 too large resource
    version: it restarted with an older history): relist."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.why = "expired (410 Gone)" if code == 410 else "is ahead of the server's (504 Too large resource version)"


def _version_unavailable(exc: client.ApiException) -> bool:
    """Whether a list from a resourceVersion was refused because the server has no such version: compacted (410
    Expired) or from its future (504 with the cause ``ResourceVersionTooLarge``: its history restarted lower)."""
    if exc.status == 410:
        return True
    if exc.status != 504:
        return False
    try:
        body = orjson.loads(exc.body or b"{}")
    except (orjson.JSONDecodeError, TypeError):
        return False
    causes = ((body.get("details") or {}).get("causes") or []) if isinstance(body, dict) else []
    return any(c.get("reason") == "ResourceVersionTooLarge" for c in causes if isinstance(c, dict))


class Reflector:
    """Lists and watches ``resource`` into ``out`` on a thread (see the module docstring)."""

    def __init__(
        self,
        resource: Resource,
        out: EventQueue,
        *,
        page_size: int = 10_000,
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
        self._listed = ""
        """The resourceVersion of the list just read."""
        self.relists = 0
        self.watches = 0
        self.synced = threading.Event()
        self.failures = Failures(resource.describe())
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
        return not self._stop.is_set() and self.out.put(event, self._stop)

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
                need_list = True  # a failed watch: the server may not be the one it was (client-go relists too)
                if exc.status in (410, 504) or (exc.status == 404 and self.resource.optional):
                    continue  # history gone or never had (504), or the resource itself gone: list again now
                self._failed(f"the API server answered {exc.status} {exc.reason}", backoff)
                if not self._wait(backoff):
                    break
                backoff = min(backoff * 2, _MAX_BACKOFF)
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    break
                need_list = True
                self._failed(f"cannot reach the API server ({_network_reason(exc)})", backoff)
                if not self._wait(backoff):
                    break
                backoff = min(backoff * 2, _MAX_BACKOFF)

    def _failed(self, error: str, retry: float) -> None:
        line = self.failures.failed(error, retry)
        if line is not None:
            log.warning("%s", line)

    def _reached(self) -> None:
        line = self.failures.succeeded()
        if line is not None:
            log.warning("%s", line)

    def _list_pages(self) -> Iterator[list[Object] | None]:
        """The pages of a list, each as it comes (the loop reads one while the next is fetched): lists of objects,
        or None when the list starts again from scratch (the pages before are void). The list is at least as new
        as the last version seen; when the server has no such version (see :func:`_version_unavailable`), it is
        the server's newest state (a consistent read). The list's resourceVersion is left in :attr:`_listed`.
        Raises :class:`_NotServed` when the resource is not served."""
        token: str | None = None
        since = self.version
        while True:
            query: dict[str, Any] = {"limit": self.page_size, "_preload_content": False, "_request_timeout": (10, 300)}
            if token:
                query["_continue"] = token
            elif since:
                query["resource_version"] = since
                query["resource_version_match"] = "NotOlderThan"
            try:
                response = self.resource.call(**query)
            except client.ApiException as exc:
                if exc.status < 500:
                    self._reached()  # the server answered; what it said is handled below
                if exc.status == 404 and self.resource.optional:
                    raise _NotServed from exc
                if exc.status == 410 and token:  # the continue token expired: a consistent list starts again
                    token, since = None, ""
                    yield None
                    continue
                if since and not token and _version_unavailable(exc):
                    log.warning(
                        "%s: the API server has no version %s (%s): its history restarted (etcd wiped or restored) "
                        "or was compacted; listing its newest state",
                        self.resource.kind,
                        since,
                        "410 Gone" if exc.status == 410 else "504 Too large resource version",
                    )
                    since = ""
                    continue
                raise
            self._reached()
            body = orjson.loads(response.data)
            response.release_conn()
            page = body.get("items") or []
            for item in page:
                _strip(item)
                if self.resource.api_version:
                    item.setdefault("apiVersion", self.resource.api_version)
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                self._listed = str(meta.get("resourceVersion", ""))
            yield page
            if not token:
                return

    def _relist(self) -> bool:
        """List and deliver the difference with what was known, page by page; whether the watch may start.

        An object listed and known with another uid (deleted and made again under its name during the gap) is
        delivered DELETED (its last known state) then ADDED; the known objects the whole list lacks (deleted
        during the gap, or lost with the old etcd) are delivered DELETED at the end, with their last known state
        (tombstones), so their allocations are released."""
        kind = self.resource.kind
        fresh: set[str] = set()
        try:
            for page in self._list_pages():
                if page is None:
                    fresh = set()
                    continue
                for obj in page:
                    key = _key(obj)
                    fresh.add(key)
                    last = self.known.get(key)
                    if last is not None and _version(last) == _version(obj):
                        continue
                    if last is not None and _uid(last) != _uid(obj):
                        if not self._put(RawEvent(kind, "DELETED", last)):
                            return False
                        last = None
                    self.known[key] = obj
                    if not self._put(RawEvent(kind, "ADDED" if last is None else "MODIFIED", obj)):
                        return False
        except _NotServed:
            if not self.synced.is_set():
                resource = self.resource
                why = f": {resource.absent}" if resource.absent else ""
                log.info("%s: not served by this cluster%s; looked for again every minute", resource.describe(), why)
                if not self._put(RawEvent(self.resource.kind, SYNCED, {})):
                    return False
                self.synced.set()
            self._wait(_ABSENT_RETRY)
            return False
        self.relists += 1
        for key in [key for key in self.known if key not in fresh]:
            if not self._put(RawEvent(kind, "DELETED", self.known.pop(key))):
                return False
        self.version = self._listed
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
        self._reached()
        with self._lock:
            if self._stop.is_set():  # stopped while the watch was opened: stop() found no response to shut down
                response.close()
                return
            self._response = response
        self.watches += 1
        kind = self.resource.kind
        complete = False
        read = _connection_reader(response)
        try:
            for event in _lines(response, read):
                type_, obj = event.get("type"), event.get("object") or {}
                if type_ == "ERROR":
                    if obj.get("code") in (410, 504):
                        raise _Expired(obj["code"])
                    code = obj.get("code")
                    raise client.ApiException(status=code if isinstance(code, int) else 500, reason=obj.get("message"))
                version = _version(obj)
                if version:
                    self.version = version
                if type_ == "BOOKMARK":
                    continue
                key = _key(obj)
                _strip(obj)
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
            if complete and read is None:  # the server ended the stream: the connection can serve again
                response.release_conn()
            else:  # left mid-stream (unread events would be the next request's answer), or read past urllib3
                response.close()
