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
is reused only after a whole response was read, when it is still open (urllib3's test: not readable) and when it
waited idle less than 30 s (the servers close one idle for 75-90 s). A request is never sent twice — not even
when a reused connection turns out closed by the server as it was sent (nor does urllib3 for a POST): the
write's outcome is then unknown and serve's callers read it from the watch; only making a connection, when
nothing was sent, is tried three times (as urllib3's default retries did). A server that chose a protocol other
than HTTP/1.1 through ALPN gets its requests from urllib3 (:meth:`Connections.send_all` returns None).

Requests go back to back on one connection before their answers are read (HTTP/1.1 pipelining, at most
:data:`PIPELINE` at a time; one request is a pipeline of one): the answers come in order, each yielded as it is
read. A request whose answer was never read has an unknown outcome: its failure is yielded — :class:`OSError`
(socket and TLS errors, timeouts) or urllib3's :class:`~urllib3.exceptions.ProtocolError` (an answer that is not
HTTP, a malformed size included), which serve's callers handle as they handled urllib3's. The requests after an
answer saying ``Connection: close`` with nothing after it were read by no server (RFC 9112, 9.6): they go again on
a new connection. After an answer that ends the connection otherwise (an HTTP/1.0 answer without ``keep-alive``, a
body ended by closing), whether the server read the next requests is unknown: they are not sent again. Making a
connection raises urllib3's connect errors (:class:`~urllib3.exceptions.NewConnectionError`): nothing was sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from time import monotonic
from typing import NamedTuple

import urllib3
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ProtocolError

__all__ = ["PIPELINE", "Connections", "Reply", "Request", "chunked_body"]

PIPELINE = 32
"""Requests at most sent back to back on one connection before their answers are read (HTTP/1.1 pipelining:
:meth:`Connections.send_all`; more go as several rounds). On the real API server, a Binding cost the writing process
108-130 µs of CPU sent one at a time and 61-67 µs pipelined by 32, and one connection carried 432-522 Bindings a
second against 558-629; the API server's CPU a Binding did not change. A bound keeps a round's requests and answers
within what the sockets buffer: a client writing thousands before reading and a server writing answers it does not
read wait for each other (issue 28)."""

_CHUNK = 65536
_MAX_HEAD = 1 << 20
"""Bytes of a response's status line and headers beyond which the answer is not HTTP."""


_DECIMAL = "0123456789"
_HEX = "0123456789abcdefABCDEF"
_IDLE_LIMIT = 30.0
"""Seconds a connection may wait idle and still be reused: below the servers' own idle close (kube-apiserver's 90 s,
nginx's 75 s), so a write seldom goes out on a connection the server is closing."""
_CONNECT_TRIES = 3
"""Tries at making a connection (nothing was sent before it is made): urllib3's default retried one three times."""


def _size(text: str, base: int, what: str) -> int:
    """``text`` (blanks around it allowed) as a size in ``base`` (10: ``Content-Length``, 16: a chunk's size) of
    plain digits; anything else — a sign, ``_``, a list ("2, 2"), nothing — is not HTTP: a ProtocolError, never the
    ValueError ``int`` raises (which serve's callers do not handle) nor a negative size (which would desync)."""
    text = text.strip(" \t")
    if not text or len(text) > 16 or text.strip(_DECIMAL if base == 10 else _HEX):
        raise ProtocolError(f"bad {what} {text[:40]!r}")
    return int(text, base)


class Request(NamedTuple):
    """A request to send (``body`` None: none)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None


class Reply(NamedTuple):
    """A response read whole."""

    status: int
    reason: str
    data: bytes


class _Reader:
    """The bytes of one response as ``recv`` (a socket's, or a buffered reader's ``read1``) gives them."""

    __slots__ = ("buffer", "recv")

    def __init__(self, recv: Callable[[int], bytes]) -> None:
        self.recv = recv
        self.buffer = bytearray()

    def more(self) -> None:
        chunk = self.recv(_CHUNK)
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
            chunk = self.recv(_CHUNK)
            if not chunk:
                taken = bytes(self.buffer)
                self.buffer.clear()
                return taken
            self.buffer += chunk

    def chunks(self) -> Iterator[bytes]:
        """Each chunk's data of a chunked body, as it arrives; the trailer read at the end."""
        while True:
            line = self.until(b"\r\n")
            size = _size(line.split(b";", 1)[0].decode("latin-1"), 16, "chunk size")
            if size == 0:
                while self.until(b"\r\n"):  # trailer fields, then the empty line
                    pass
                return
            yield self.exactly(size)
            if self.exactly(2) != b"\r\n":
                raise ProtocolError("a chunk not followed by CRLF")


def chunked_body(recv: Callable[[int], bytes]) -> Iterator[bytes]:
    """Each chunk's data of a chunked response body read through ``recv`` (its status line and headers read
    already), as it arrives: a watch stream read straight from its connection (:mod:`kubeflux.kube.reflector`).
    A malformed size or a connection closed mid-body raises :class:`~urllib3.exceptions.ProtocolError`."""
    return _Reader(recv).chunks()


OPEN, CLOSES, ENDED = "open", "closes", "ended"
"""What the server does after an answer (:func:`_read`): keeps the connection open; says it closes it
(``Connection: close``: it reads no further request, RFC 9112 9.6); ends it otherwise (an HTTP/1.0 answer without
``keep-alive``, a body ended by closing: whether it read further requests is unknown)."""


def _read(reader: _Reader, method: str) -> tuple[Reply, str]:
    """The response and what the server does after it (:data:`OPEN`, :data:`CLOSES`, :data:`ENDED`); more may be
    buffered in ``reader`` already: the next answer to pipelined requests."""
    while True:
        head = reader.until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        version, _, rest = head[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or len(code) != 3 or code.strip(_DECIMAL):  # (isdigit() takes "²")
            raise ProtocolError(f"not an HTTP response: {head[0][:80]!r}")
        status = int(code)
        if not 100 <= status < 200:
            break
    fields: dict[str, str] = {}
    connection: set[str] = set()
    for line in head[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        fields[name] = value.strip()
        if name == "connection":  # a list of options, maybe over several lines
            connection.update(option.strip().lower() for option in value.split(","))
    persistent = version == "HTTP/1.1" or "keep-alive" in connection  # (HTTP/1.0's persistent connections)
    after = CLOSES if "close" in connection else OPEN if persistent else ENDED
    if method == "HEAD" or status in (204, 304):
        data = b""
    elif "chunked" in fields.get("transfer-encoding", "").lower():
        data = b"".join(reader.chunks())
    elif "content-length" in fields:
        data = reader.exactly(_size(fields["content-length"], 10, "Content-Length"))
    else:
        data = reader.to_end()
        after = CLOSES if after == CLOSES else ENDED
    return Reply(status, reason.strip(), data), after


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
        clock = timeout.clone()  # a total timeout's parts are read off a started clock (urllib3 raises otherwise)
        clock.start_connect()
        self.connect_timeout = _seconds(clock.connect_timeout)
        self.read_timeout = _seconds(clock.read_timeout)
        self._idle: list[tuple[HTTPConnection, float]] = []
        """Connections that may serve again, each with when it last answered (``monotonic``)."""
        self._lock = threading.Lock()
        self._closed = False

    def _take(self) -> HTTPConnection | None:
        """A connection to send on (None: the server chose a protocol other than HTTP/1.1)."""
        while True:
            with self._lock:
                if not self._idle:
                    break
                idle, used = self._idle.pop()
            if monotonic() - used < _IDLE_LIMIT and idle.is_connected:  # not closed by the server while idle
                return idle
            idle.close()
        for tries_left in range(_CONNECT_TRIES - 1, -1, -1):
            # a connection exactly as the client's pool makes it (its TLS, certificates, socket options)
            connection = self.pool._new_conn()
            assert isinstance(connection, HTTPConnection)  # urllib3's, SOCKS' included: a socket in ``sock``
            connection.timeout = self.connect_timeout
            try:
                connection.connect()
            except (OSError, urllib3.exceptions.HTTPError):  # refused, unreachable, timed out: nothing was sent
                connection.close()
                if not tries_left:
                    raise
                continue
            sock = connection.sock
            assert sock is not None
            if getattr(sock, "selected_alpn_protocol", lambda: None)() not in (None, "http/1.1"):
                connection.close()
                return None
            sock.settimeout(self.read_timeout)
            return connection
        raise AssertionError("unreachable")

    def _frame(self, request: Request) -> bytes:
        lines = [f"{request.method} {self.prefix}{request.path} HTTP/1.1", f"Host: {self.authority}"]
        lines += [f"{name}: {value}" for name, value in request.headers.items()]
        if request.body is not None:
            lines.append(f"Content-Length: {len(request.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (request.body or b"")

    def _done(self, connection: HTTPConnection, reusable: bool) -> None:
        """``connection`` answered whole: kept for the next request (``reusable``: the server keeps it open and
        nothing more was read from it) or closed."""
        with self._lock:
            if reusable and not self._closed:
                self._idle.append((connection, monotonic()))
                return
        connection.close()

    def send_all(self, requests: list[Request]) -> Iterator[Reply | Exception] | None:
        """Each request's response, or the failure that left it without one (its outcome unknown), in order and
        as each is read: the requests sent back to back on one connection (pipelined). None when the server chose a
        protocol other than HTTP/1.1 (ALPN) and nothing was sent. Making the connection raises as :meth:`send`
        does (nothing was sent). More than :data:`PIPELINE` requests go in rounds, each once the answers before it
        were read. The caller reads the iterator to its end (the connection is closed otherwise)."""
        connection = self._take()
        if connection is None:
            return None
        return self._rounds(connection, requests)

    def _rounds(self, connection: HTTPConnection, requests: list[Request]) -> Iterator[Reply | Exception]:
        yield from self._pipelined(connection, requests[:PIPELINE])
        for start in range(PIPELINE, len(requests), PIPELINE):
            yield from self._again(requests[start : start + PIPELINE])

    def _again(self, requests: list[Request]) -> Iterator[Reply | Exception]:
        """:meth:`send_all` of ``requests`` on a connection of their own, its failures yielded; none once the
        connections are closed (the writer stopped)."""
        if self._closed:
            return iter([ProtocolError("not sent: the connections are closed")] * len(requests))
        try:
            again = self.send_all(requests)
        except Exception as exc:  # (urllib3's and the sockets' errors) nothing was sent
            again = iter([exc] * len(requests))
        if again is None:  # the server changed protocol meanwhile: nothing sent
            reason = ProtocolError("the server stopped speaking HTTP/1.1 between two connections")
            again = iter([reason] * len(requests))
        return again

    def _pipelined(self, connection: HTTPConnection, requests: list[Request]) -> Iterator[Reply | Exception]:
        answered = 0
        after = ENDED
        try:
            sock = connection.sock
            assert sock is not None
            sock.sendall(b"".join(map(self._frame, requests)))
            reader = _Reader(sock.recv)
            for request in requests:
                reply, after = _read(reader, request.method)
                answered += 1
                yield reply
                if after != OPEN:
                    break
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # the rest's outcome is unknown: each is told why
            connection.close()
            yield from [exc] * (len(requests) - answered)
            return
        except Exception as exc:  # not expected: said as a failure to send all the same (never raised mid-way)
            connection.close()
            yield from [ProtocolError(f"answers not read: {exc!r}")] * (len(requests) - answered)
            return
        except BaseException:  # the caller stopped reading (GeneratorExit) or was interrupted
            connection.close()
            raise
        rest = requests[answered:]
        self._done(connection, after == OPEN and not reader.buffer and not rest)
        if not rest:
            return
        if after == ENDED or reader.buffer:  # it may have read them: never sent twice
            why = "more answers after" if after == CLOSES else "an answer ending the connection without"
            yield from [ProtocolError(f"{why} Connection: close: outcome unknown")] * len(rest)
            return
        # the server said it closes with the last answer read (Connection: close): it read none of the rest
        yield from self._again(rest)

    def close(self) -> None:
        """Close the idle connections; one in use is closed when its request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection, _ in idle:
            connection.close()
