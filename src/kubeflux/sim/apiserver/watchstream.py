"""Watch streams of the HTTP shell: an open watch written as one long chunked response.

A watch sends its initial state (``ADDED`` events, and the initial-events-end bookmark to a client that allows
bookmarks), then the events its :class:`~kubeflux.sim.apiserver.watch.Watcher` queues, in batches, with a bookmark
now and then to an idle client that allows them, until its timeout, its client's disconnection or the server's
shutdown. A watch from a version the history no longer holds (410) or has not reached (504, when it does not wait)
is one ``ERROR`` event, as the real watch cache sends it. Each event's line is encoded once per view and form and
shared by every watcher; kubectl's ``--watch`` gets table rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.media import JSON_OUTPUT, Output, Renderer
from kubeflux.sim.apiserver.options import check_list_options, flag, integer, list_selectors
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.tables import table
from kubeflux.sim.apiserver.watch import Watcher

if TYPE_CHECKING:
    from kubeflux.sim.apiserver.store import Store

__all__ = ["Message", "Receive", "Scope", "Send", "StreamSettings", "WatchStreams"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class StreamSettings(Protocol):
    """What watch streams read of the server's settings (:class:`~kubeflux.sim.apiserver.app.ServerSettings`)."""

    bookmark_seconds: float
    default_watch_seconds: float
    watch_future_waits: bool


@dataclass(frozen=True, slots=True)
class _StreamOptions:
    start_rv: int
    """The version the watch started at: the initial-events-end bookmark carries it."""
    initial_events: bool
    bookmarks: bool
    seconds: float
    as_table: bool
    output: Output = JSON_OUTPUT


class WatchStreams:
    """The open watches of the HTTP shell serving ``store`` (see the module docstring)."""

    def __init__(self, store: Store, settings: StreamSettings, media: Renderer) -> None:
        self.store = store
        self.settings = settings
        self.media = media
        self.open: set[Watcher] = set()
        self.watches = 0
        """How many watches are being served."""
        self.closing = False

    def shutdown(self) -> None:
        """End every open watch now (their clients re-watch elsewhere)."""
        self.closing = True
        for watcher in list(self.open):
            watcher.close()

    def unsent(self) -> bool:
        """Some open watch holds events it has not written yet."""
        return any(watcher.pending for watcher in self.open)

    async def serve(
        self,
        resource: ResourceType,
        namespace: str,
        query: dict[str, str],
        receive: Receive,
        send: Send,
        as_table: bool = False,
        output: Output = JSON_OUTPUT,
    ) -> None:
        """A watch of ``resource`` in ``namespace`` by the ``query``'s options, streamed until its timeout, its
        client's disconnection or the server's shutdown."""
        labels, fields = list_selectors(resource, query)
        initial_events = flag(query, "sendInitialEvents")
        bookmarks = flag(query, "allowWatchBookmarks")
        check_list_options(query, watch=True)
        timeout = integer(query, "timeoutSeconds")
        seconds = float(timeout) if timeout is not None and timeout > 0 else self.settings.default_watch_seconds
        try:
            watcher, initial = self.store.listwatch.watch(
                resource,
                namespace,
                labels,
                fields,
                query.get("resourceVersion", ""),
                initial_events=initial_events,
                future_waits=self.settings.watch_future_waits,
            )
        except ApiError as exc:
            if exc.code not in (410, 504):  # history gone or not reached: one ERROR event, as the watch cache does
                raise
            await self._start_stream(send, output)
            await self._write(send, self.media.event("ERROR", exc.status(), output), more=False)
            return
        start_rv = self.store.rv
        self.watches += 1
        self.open.add(watcher)
        try:
            if output.metadata and output.metadata != "PartialObjectMetadata":
                raise errors.not_acceptable(f"you requested {output.metadata}, but a watch sends single objects")
            options = _StreamOptions(start_rv, initial_events, bookmarks, seconds, as_table, output)
            await self._stream(watcher, initial, options, receive, send)
        finally:
            self.watches -= 1
            self.open.discard(watcher)
            self.store.stop_watch(resource, watcher)

    async def _start_stream(self, send: Send, output: Output = JSON_OUTPUT) -> None:
        content_type = output.stream_content_type.encode()
        headers = [(b"content-type", content_type), (b"cache-control", b"no-cache, private")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    @staticmethod
    async def _write(send: Send, data: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    def _table_line(self, resource: ResourceType, type_: str, obj: dict[str, Any], headers: bool) -> bytes:
        metadata = {"resourceVersion": obj["metadata"]["resourceVersion"]}
        view = resource.to_view(obj) if resource.to_view else obj
        rows = table(resource, [view], self.store.clock(), metadata, headers=headers)
        return orjson.dumps({"type": type_, "object": rows}) + b"\n"

    async def _stream(
        self,
        watcher: Watcher,
        initial: list[dict[str, Any]],
        options: _StreamOptions,
        receive: Receive,
        send: Send,
    ) -> None:
        resource = watcher.resource
        start_rv, initial_events, bookmarks, seconds = (
            options.start_rv,
            options.initial_events,
            options.bookmarks,
            options.seconds,
        )
        first = True
        wake = asyncio.Event()
        watcher.wake = wake.set
        gone = False

        async def disconnected() -> None:
            nonlocal gone
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone = True
                    wake.set()
                    return

        listener = asyncio.ensure_future(disconnected())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        output = options.output
        try:
            await self._start_stream(send, output)
            view = resource.to_view
            batch: list[bytes] = []
            for obj in initial:
                if options.as_table:
                    batch.append(self._table_line(resource, "ADDED", obj, first))
                    first = False
                    continue
                shown = view(obj) if view else obj
                if output is JSON_OUTPUT:
                    batch.append(orjson.dumps({"type": "ADDED", "object": shown}) + b"\n")
                else:
                    batch.append(self.media.event("ADDED", self.media.shape(shown, output, False), output))
                if len(batch) >= 256:
                    await self._write(send, b"".join(batch))
                    batch = []
            if initial_events and bookmarks:  # the real server sends it only to a client that allows bookmarks
                batch.append(self.media.bookmark(resource, start_rv, output, initial_end=True))
            if batch:
                await self._write(send, b"".join(batch))
            next_bookmark = loop.time() + self.settings.bookmark_seconds
            while not gone and not watcher.closed and not self.closing:
                if watcher.pending:
                    lines: list[bytes] = []
                    while watcher.pending and len(lines) < 1024:
                        type_, event = watcher.pending.popleft()
                        if options.as_table:
                            lines.append(self._table_line(resource, type_, event.obj, first))
                            first = False
                        elif output is JSON_OUTPUT:
                            lines.append(event.line(resource, type_))
                        else:
                            lines.append(self.media.watch_event(resource, type_, event, output))
                    await self._write(send, b"".join(lines))
                    continue
                now = loop.time()
                if now >= deadline:
                    break
                if bookmarks and now >= next_bookmark:
                    await self._write(send, self.media.bookmark(resource, self.store.rv, output))
                    next_bookmark = now + self.settings.bookmark_seconds
                wake.clear()
                if watcher.pending or watcher.closed or gone:
                    continue
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=max(wait, 0.0))
            if not gone:
                await self._write(send, b"", more=False)
        except OSError:
            return
        finally:
            listener.cancel()
