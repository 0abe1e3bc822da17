"""serve's writes on keep-alive HTTP/1.1 connections, each request and response framed here.

Why: a write (an Event, a Binding) through urllib3 cost 500-640 µs of CPU on the real API server, through
:mod:`http.client` alone 240-310 µs — most of it parsing the response's headers with the :mod:`email` package
(``email.feedparser``) and urllib3's wrapping of them — and framed here 100-135 µs, TLS included (2,000 Events
each way, load 15). serve writes a Binding and an Event per pod, and on a 2-core machine its CPU is CPU the API
server needs (issue 28).

Only the bytes are handled here: the connections are made by the client's own urllib3 pool
(``HTTPConnectionPool._new_conn``), so TLS, the CA, the client certificate, SNI and socket options are exactly
what the kubeconfig configured. A client that goes through an HTTP proxy keeps urllib3 for everything
(:meth:`~kubeflux.kube.rest.RawApi.request`). What is read: the status line, the headers (``Content-Length``,
``Transfer-Encoding: chunked``, ``Connection: close``), the body; interim 1xx answers are skipped. A connection
is reused only after a whole response was read and when it is still open (urllib3's test: not readable); a
request is never sent twice (as urllib3 does not retry a POST once sent). Failures raise :class:`OSError` (socket
and TLS errors, timeouts) or urllib3's :class:`~urllib3.exceptions.ProtocolError`, which serve's callers handle as
they handled urllib3's.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import urllib3
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ProtocolError

__all__ = ["Connections", "Reply"]

_CHUNK = 65536
_MAX_HEAD = 1 << 20
"""Bytes of a response's status line and headers beyond which the answer is not HTTP."""


class Reply(NamedTuple):
    """A response read whole."""

    status: int
    reason: str
    data: bytes


class _Reader:
    """The bytes of one response as they arrive on ``sock``."""

    __slots__ = ("buffer", "sock")

    def __init__(self, sock: object) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def more(self) -> None:
        chunk: bytes = self.sock.recv(_CHUNK)  # type: ignore[attr-defined]
        if not chunk:
            raise ProtocolError("Connection aborted.", ConnectionError("the server closed the connection mid-response"))
        self.buffer += chunk

    def until(self, mark: bytes, limit: int = _MAX_HEAD) -> bytes:
        """The bytes before ``mark`` (consumed with it)."""
        start = 0
        while True:
            end = self.buffer.find(mark, start)
            if end >= 0:
                taken = bytes(self.buffer[:end])
                del self.buffer[: end + len(mark)]
                return taken
            if len(self.buffer) > limit:
                raise ProtocolError(f"no {mark!r} within {limit} bytes of the response")
            start = max(0, len(self.buffer) - len(mark) + 1)
            self.more()

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self.more()
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken

    def to_end(self) -> bytes:
        while True:
            chunk: bytes = self.sock.recv(_CHUNK)  # type: ignore[attr-defined]
            if not chunk:
                taken = bytes(self.buffer)
                self.buffer.clear()
                return taken
            self.buffer += chunk

    def chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.until(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {line[:40]!r}") from None
            if size == 0:
                while self.until(b"\r\n"):  # trailer fields, then the empty line
                    pass
                return b"".join(parts)
            parts.append(self.exactly(size))
            if self.exactly(2) != b"\r\n":
                raise ProtocolError("a chunk not followed by CRLF")


def _read(reader: _Reader, method: str) -> tuple[Reply, bool]:
    """The response and whether the connection may serve again."""
    while True:
        head = reader.until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        version, _, rest = head[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not code.isdigit():
            raise ProtocolError(f"not an HTTP response: {head[0][:80]!r}")
        status = int(code)
        if not 100 <= status < 200:
            break
    fields: dict[str, str] = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    reusable = version == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
    if method == "HEAD" or status in (204, 304):
        data = b""
    elif "chunked" in fields.get("transfer-encoding", "").lower():
        data = reader.chunked()
    elif "content-length" in fields:
        data = reader.exactly(int(fields["content-length"]))
    else:
        data, reusable = reader.to_end(), False
    return Reply(status, reason.strip(), data), reusable and not reader.buffer


def _seconds(value: object) -> float | None:
    """A urllib3 timeout's seconds (None: no limit, as for its default)."""
    return float(value) if isinstance(value, int | float) else None


class Connections:
    """Keep-alive connections of ``pool`` (a urllib3 pool for one host), each used by one request at a time;
    thread-safe. ``prefix``: the path of the client's host URL (a proxying front's path), put before every
    request's path."""

    def __init__(self, pool: urllib3.HTTPConnectionPool, authority: str, prefix: str, timeout: urllib3.Timeout):
        self.pool = pool
        self.authority = authority
        self.prefix = prefix
        self.connect_timeout = _seconds(timeout.connect_timeout)
        self.read_timeout = _seconds(timeout.read_timeout)
        self._idle: list[HTTPConnection] = []
        self._lock = threading.Lock()

    def _take(self) -> HTTPConnection:
        while True:
            with self._lock:
                if not self._idle:
                    break
                idle = self._idle.pop()
            if idle.is_connected:  # not closed by the server while idle
                return idle
            idle.close()
        # a connection exactly as the client's pool makes it (its TLS, certificates, socket options)
        connection = self.pool._new_conn()
        assert isinstance(connection, HTTPConnection)  # urllib3's, SOCKS' included: a socket in ``sock``
        connection.timeout = self.connect_timeout
        connection.connect()
        assert connection.sock is not None
        connection.sock.settimeout(self.read_timeout)
        return connection

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Reply:
        """The response to ``method path`` with ``headers`` and ``body`` (None: no body)."""
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.authority}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")
        connection = self._take()
        try:
            sock = connection.sock
            assert sock is not None
            sock.sendall(request)
            reply, reusable = _read(_Reader(sock), method)
        except BaseException:
            connection.close()
            raise
        if reusable:
            with self._lock:
                self._idle.append(connection)
        else:
            connection.close()
        return reply

    def close(self) -> None:
        """Close the idle connections (one in use is closed when its request ends, if it cannot serve again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
