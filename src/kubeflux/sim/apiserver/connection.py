"""uvicorn's HTTP/1.1 protocol (httptools), writing each response in one system call instead of two.

uvicorn writes a response's status line and headers when the application sends ``http.response.start``, and the
body when it sends ``http.response.body``: two ``send`` calls, two TCP segments and two wake-ups of the client
per request. On loopback the sender's ``send`` does the receiver's TCP work too, so for the small JSON answers
of creates and binds those calls were the largest cost of the server (a profile of the create benchmark: about
60% of its time in ``send``). :class:`CoalescingTransport` gathers the writes made within one turn of the event
loop and sends them together at the end of it; a large write (a list of 100,000 pods) goes out at once, after
what was gathered before it, so it is never copied to be joined, and what is gathered goes out as soon as it is
large too: the real transport's buffer, which is what tells uvicorn to stop writing until the client reads
(flow control), still sees every large stream as it is written. Nothing waits longer than the turn of the loop it
was written in, so watch streams are as prompt as before.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["CoalescingHttpProtocol", "CoalescingTransport"]

LARGE_WRITE = 64 * 1024
"""Writes of this many bytes or more are not gathered (joining them would copy them)."""


class CoalescingTransport:
    """A transport passing every call to ``transport`` except :meth:`write`, whose data it gathers until the end
    of the event loop's turn (see the module docstring), and :meth:`close`, which sends what was gathered first."""

    __slots__ = ("_loop", "_pending", "_scheduled", "_size", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []
        self._size = 0
        """Bytes in ``_pending``."""
        self._scheduled = False

    def write(self, data: bytes) -> None:
        if not data:
            return
        if len(data) >= LARGE_WRITE:
            self.flush()
            if not self._transport.is_closing():
                self._transport.write(data)
            return
        self._pending.append(data)
        self._size += len(data)
        if self._size >= LARGE_WRITE:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Send what was gathered (nothing once the connection is closing: its client has gone)."""
        self._scheduled = False
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._size = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a :class:`CoalescingTransport` (``uvicorn.Config(http=...)``)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing: Any = CoalescingTransport(transport, self.loop)
        super().connection_made(coalescing)

    def shutdown(self) -> None:
        """The server stops: an idle TLS connection is dropped at once (closing it politely waits for a client that
        keeps it open to answer the TLS close, until uvicorn's graceful timeout logs an error)."""
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.transport.get_extra_info("sslcontext") is not None:
            transport: Any = self.transport  # the CoalescingTransport: what it holds goes first
            transport.flush()
            transport.abort()
            return
        super().shutdown()
