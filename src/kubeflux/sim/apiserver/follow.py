"""How the served cluster's in-process components (the kubelet, the Job and PodGroup controllers, a workload
replay) follow the store: one watch per collection, read in batches on the server's loop, as an informer reads
its watch.

A :class:`Follower` opens an unfiltered watch of each collection it is given (with an unbounded backlog: nothing
in the process may miss an event), and when an event is queued it asks the loop to drain them soon
(``call_soon``): every queued event is handed, in order, to its collection's handler, collection after collection,
then ``after`` runs once (a controller syncing what the batch made dirty). :meth:`Follower.list_existing` first
hands over what the store already holds, as an informer's first list does. :attr:`Follower.busy` is what the
virtual clock's pacer asks before it jumps: an event is queued or a drain is due.

A controller *has* a :class:`Reconciler`, the part every served controller shares (kube-controller-manager's informers
and work queue in one): its handlers mark the keys an event touched (:meth:`Reconciler.add`), and after each batch
each marked key is synced once, in a stable order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import FieldSelector, LabelSelector
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import Watcher, WatchEvent

__all__ = ["Follower", "Handler", "Reconciler", "served"]

Handler = Callable[[str, WatchEvent], None]
"""Called with each event's type (``ADDED``, ``MODIFIED``, ``DELETED``) and the event."""
K = TypeVar("K", bound=Hashable)


def served(store: Store, *paths: tuple[str, str, str]) -> list[ResourceType]:
    """The resources a component follows, each by (group, version, plural); each must be registered."""
    found = [store.registry.find(*path) for path in paths]
    missing = [path for path, resource in zip(paths, found, strict=True) if resource is None]
    assert not missing, f"not served: {missing}"
    return [resource for resource in found if resource is not None]


class Follower:
    """Watches each ``(resource, handler)`` of ``store`` and drains the events on ``loop`` (see the module
    docstring); :meth:`stop` closes the watches."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        follow: Sequence[tuple[ResourceType, Handler]],
        after: Callable[[], None] | None = None,
    ) -> None:
        self.store, self.loop, self.after = store, loop, after
        self._scheduled = False
        self._watches: list[tuple[ResourceType, Watcher, Handler]] = []
        for resource, handler in follow:
            watcher = Watcher(resource, "", LabelSelector(), FieldSelector(), backlog=10**9)
            watcher.wake = self.wake
            store.collections[resource.collection].watchers.add(watcher)
            self._watches.append((resource, watcher, handler))

    @property
    def busy(self) -> bool:
        """Watch events wait to be handled, or a drain is due (the virtual clock must not jump)."""
        return self._scheduled or any(watcher.pending for _, watcher, _ in self._watches)

    def list_existing(self) -> None:
        """Hand every object the store holds now to its collection's handler as ``ADDED`` (an informer's first
        list), collection after collection, then drain soon (``after`` runs then, even with no event)."""
        for resource, _, handler in self._watches:
            for obj in list(self.store.objects(resource)):
                handler("ADDED", WatchEvent(0, "ADDED", obj, None))
        self.wake()

    def wake(self) -> None:
        """Drain soon (once, however often it is called before)."""
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._scheduled = False
        for _, watcher, handler in self._watches:
            pending = watcher.pending
            while pending:
                type_, event = pending.popleft()
                handler(type_, event)
        if self.after is not None:
            self.after()

    def stop(self) -> None:
        for resource, watcher, _ in self._watches:
            self.store.stop_watch(resource, watcher)


class Reconciler(Generic[K]):
    """A controller's informers and work queue: follows each ``(resource, handler)`` of ``store`` (a
    :class:`Follower`); the handlers :meth:`add` the keys (a namespace and name, a uid ...) an event makes stale, and
    after each batch of events ``sync`` is called once for each key added since the last batch, ordered by ``order``
    (default: the keys themselves). The existing objects are handed over (as ``ADDED``) by :meth:`start`, which the
    controller calls once its own state is ready."""

    def __init__(
        self,
        store: Store,
        loop: asyncio.AbstractEventLoop,
        follow: Sequence[tuple[ResourceType, Handler]],
        sync: Callable[[K], None],
        order: Callable[[K], Any] = lambda key: key,
    ) -> None:
        self.sync, self.order = sync, order
        self._dirty: set[K] = set()
        self._follower = Follower(store, loop, follow, self._sync_dirty)

    def start(self) -> None:
        """Hand over what the store holds now (an informer's first list); the sync follows soon."""
        self._follower.list_existing()

    def add(self, key: K) -> None:
        """``key`` is synced after the batch of events being handled (:meth:`wake` when no batch is)."""
        self._dirty.add(key)

    def discard(self, key: K) -> None:
        """``key`` needs no sync any more (its object went)."""
        self._dirty.discard(key)

    def wake(self) -> None:
        """Sync what was added soon, without waiting for an event (a timer came)."""
        self._follower.wake()

    @property
    def busy(self) -> bool:
        """Watch events wait to be handled, or keys to be synced (the virtual clock must not jump)."""
        return self._follower.busy

    def stop(self) -> None:
        """Close the watches; nothing is synced any more."""
        self._follower.stop()

    def _sync_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=self.order):
            self.sync(key)
