"""List and watch for the generic store: every read of a collection at the store's resourceVersion.

What k8s.io/apiserver's cacher answers for every resource alike: a list (filtered by namespace, labels and fields,
sorted by namespace and name, paged by ``limit`` and ``continue``) and a watch (the initial state, or the cached
events after a version, then the live ones; see :mod:`.watch`). Both read the same versions the writes stamp, so a
list's version is always a valid start for a watch. :class:`ListWatch` reads its
:class:`~kubeflux.sim.apiserver.store.Store`'s collections (composition: the store has one).
"""

from __future__ import annotations

from typing import Any, Protocol

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.metadata import decode_continue, encode_continue, parse_resource_version
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.watch import Collection, Watcher

__all__ = ["ListResult", "ListWatch", "Versioned"]

Object = dict[str, Any]


class Versioned(Protocol):
    """What lists and watches need of the :class:`~kubeflux.sim.apiserver.store.Store` that has them."""

    rv: int
    """The store's current resourceVersion."""

    def collection_of(self, resource: ResourceType) -> Collection: ...


class ListResult:
    """The objects of a list call (in the resource's view), the version they were read at, and the next page."""

    __slots__ = ("continue_token", "items", "remaining", "rv")

    def __init__(self, items: list[Object], rv: int, continue_token: str = "", remaining: int | None = None) -> None:
        self.items = items
        self.rv = rv
        self.continue_token = continue_token
        self.remaining = remaining


class ListWatch:
    """The read side of ``store`` (see the module docstring); ``watch_backlog``: how many events an open watch may
    fall behind before it is closed."""

    def __init__(self, store: Versioned, watch_backlog: int) -> None:
        self.store = store
        self.watch_backlog = watch_backlog

    def _check_reached(self, resource_version: str) -> int:
        """The version asked for; 504 when the store has not reached it."""
        requested = parse_resource_version(resource_version)
        if requested > self.store.rv:
            raise errors.future_version(requested, self.store.rv)
        return requested

    def list_objects(
        self,
        resource: ResourceType,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        limit: int = 0,
        continue_token: str = "",
        resource_version: str = "",
        exact: bool = False,
    ) -> ListResult:
        """Objects matching the selectors, sorted by namespace and name, at the current version.

        ``limit``/``continue_token`` page through the live state (pages are not a snapshot). ``exact`` with an
        older ``resource_version`` is 410 ``Expired`` when the collection changed since (no snapshots are kept).
        """
        rv = self.store.rv
        collection = self.store.collection_of(resource)
        if resource_version not in ("", "0"):
            requested = self._check_reached(resource_version)
            if exact and requested != rv and (requested < collection.compacted or collection.since(requested)):
                raise errors.expired()
        start = ""
        if continue_token:
            start = decode_continue(continue_token)
        watcher = Watcher(resource, namespace if resource.namespaced else "", labels, fields, backlog=0)
        trivial = not watcher.namespace and labels.empty and fields.empty
        objects = collection.objects
        keys = [] if resource.read_only_empty else sorted(k for k in objects if k > start) if start else sorted(objects)
        items: list[Object] = []
        remaining = 0
        last = ""
        view = resource.to_view
        for key in keys:
            obj = objects[key]
            if not trivial and not watcher.matches(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(view(obj) if view else obj)
            last = key
        token = encode_continue(last, rv) if remaining else ""
        return ListResult(items, rv, token, remaining if remaining else None)

    def watch(
        self,
        resource: ResourceType,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: str,
        *,
        initial_events: bool,
        future_waits: bool = True,
    ) -> tuple[Watcher, list[Object]]:
        """Open a watch; returns it with the objects to send first as ``ADDED`` (the initial state).

        With ``initial_events`` (or no version, or ``"0"``) the initial state is every matching object; else the
        watch replays the cached events after ``resource_version`` (410 ``Expired`` if the cache no longer holds
        them all). A version the store has not reached is waited for silently, as the real watch cache does (the
        watch sends the events after it, if the history ever gets there); without ``future_waits`` it is 504.
        """
        collection = self.store.collection_of(resource)
        watcher = Watcher(
            resource, namespace if resource.namespaced else "", labels, fields, backlog=self.watch_backlog
        )
        initial: list[Object] = []
        if initial_events and resource_version not in ("", "0"):  # NotOlderThan: never a state older than asked
            self._check_reached(resource_version)
        if initial_events or resource_version in ("", "0"):
            if not resource.read_only_empty:
                initial = [o for o in collection.objects.values() if watcher.matches(o)]
        else:
            requested = parse_resource_version(resource_version)
            if requested > self.store.rv:
                if not future_waits:
                    raise errors.future_version(requested, self.store.rv)
                watcher.after = requested
            elif requested < collection.compacted:
                raise errors.expired(f"too old resource version: {requested} ({collection.compacted})")
            for event in collection.since(requested):
                watcher.offer(event)
        collection.watchers.add(watcher)
        return watcher, initial

    def stop_watch(self, resource: ResourceType, watcher: Watcher) -> None:
        watcher.closed = True
        self.store.collection_of(resource).watchers.discard(watcher)
