"""The watch mechanism behind every resource: a bounded cache of recent events keyed by resourceVersion.

Each collection keeps its last ``capacity`` events. A watch from version ``R`` replays the cached events after
``R`` and then follows live ones; when ``R`` is older than the oldest event the cache still holds (the version of
the last event it evicted), the watch is refused with 410 ``Expired`` and the client relists, as with a compacted
etcd. List, get and watch read the same objects and versions, so a list's version is always a valid start.

A :class:`Watcher` filters by namespace, labels and fields; an object that stops matching a filtered watch arrives
as ``DELETED`` and one that starts matching as ``ADDED``, as the real watch cache does. Events are queued in the
watcher (references, not copies: a stored object version is never changed) and written by the HTTP shell; each
event's JSON line is encoded once per view and shared by every watcher. A watcher that falls more than
``backlog`` events behind is closed (the real server closes unresponsive watchers too); its client re-watches.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector

__all__ = ["Collection", "WatchEvent", "Watcher"]

Object = dict[str, Any]


class WatchEvent:
    """One change of one object: ``ADDED``, ``MODIFIED`` or ``DELETED`` at global version ``rv``."""

    __slots__ = ("_lines", "obj", "prev", "rv", "type")

    def __init__(self, rv: int, type_: str, obj: Object, prev: Object | None) -> None:
        self.rv = rv
        self.type = type_
        self.obj = obj
        self.prev = prev
        self._lines: dict[tuple[Any, ...], bytes] = {}

    def line(self, resource: ResourceType, type_: str) -> bytes:
        """``{"type": ..., "object": ...}\\n`` in ``resource``'s view, encoded once and shared by every watcher."""
        key = (resource.collection + resource.api_version, type_)
        line = self._lines.get(key)
        if line is None:
            obj = resource.to_view(self.obj) if resource.to_view else self.obj
            line = orjson.dumps({"type": type_, "object": obj}) + b"\n"
            self._lines[key] = line
        return line

    def encoded(self, resource: ResourceType, type_: str, form: object, make: Callable[[Object], bytes]) -> bytes:
        """The event in another form (protobuf, metadata only): ``make(object in resource's view)``, made once per
        view and ``form`` and shared by every watcher."""
        key = (resource.collection + resource.api_version, type_, form)
        data = self._lines.get(key)
        if data is None:
            data = make(resource.to_view(self.obj) if resource.to_view else self.obj)
            self._lines[key] = data
        return data


class Watcher:
    """One open watch: its filters and the events waiting to be written."""

    def __init__(
        self,
        resource: ResourceType,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        backlog: int,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.backlog = backlog
        self.pending: deque[tuple[str, WatchEvent]] = deque()
        self.closed = False
        self.wake: Callable[[], None] | None = None
        """Called after an event is queued (the HTTP shell sets it to wake its writer)."""
        self.everything = not namespace and labels.empty and fields.empty
        """Whether every object matches (most watchers: the in-process components, informers)."""
        self.after = 0
        """Events up to this version are not this watch's (one opened from a version the server had not reached)."""

    def matches(self, obj: Object | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata", {})
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.get("labels")):
            return False
        if self.fields.empty:
            return True
        view = self.resource.to_view(obj) if self.resource.to_view else obj
        return self.fields.matches(view, self.resource.strategy.field_value)

    def offer(self, event: WatchEvent) -> None:
        if self.closed or event.rv <= self.after:
            return
        if self.everything:
            if len(self.pending) >= self.backlog:
                self.close()
                return
            self.pending.append((event.type, event))
            if self.wake is not None:
                self.wake()
            return
        now = self.matches(event.obj)
        before = self.matches(event.prev) if event.type == "MODIFIED" else now
        if event.type == "MODIFIED" and now != before:
            type_ = "ADDED" if now else "DELETED"
        elif now:
            type_ = event.type
        else:
            return
        if len(self.pending) >= self.backlog:
            self.close()
            return
        self.pending.append((type_, event))
        if self.wake is not None:
            self.wake()

    def close(self) -> None:
        self.closed = True
        self.pending.clear()
        if self.wake is not None:
            self.wake()


class Collection:
    """The objects of one storage collection, keyed ``namespace/name``, with its event cache and watchers."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.objects: dict[str, Object] = {}
        self.events: deque[WatchEvent] = deque()
        self.capacity = capacity
        self.compacted = 0
        """Version of the newest event evicted from the cache: a watch must start at or after it."""
        self.watchers: set[Watcher] = set()

    def record(self, event: WatchEvent) -> None:
        if len(self.events) >= self.capacity:
            self.compacted = self.events.popleft().rv
        self.events.append(event)
        for watcher in list(self.watchers):
            watcher.offer(event)
            if watcher.closed:
                self.watchers.discard(watcher)

    def since(self, rv: int) -> list[WatchEvent]:
        """Cached events after ``rv`` (the caller checked ``rv >= compacted``)."""
        newer: list[WatchEvent] = []
        for event in reversed(self.events):
            if event.rv <= rv:
                break
            newer.append(event)
        newer.reverse()
        return newer
