"""serve's writes framed by hand (kubeflux.kube.keepalive) against a server that answers as HTTP/1.1 servers may:
whole bodies, chunks with trailers, interim 100s, ``Connection: close``, errors, a connection dropped mid-answer."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import orjson
import pytest
import urllib3
from kubernetes import client

from kubeflux.kube import keepalive
from kubeflux.kube.binder import Binder, BindOutcome, PodRef
from kubeflux.kube.config import ConfigError, parse_config
from kubeflux.kube.rest import RawApi
from kubeflux.scheduler.messages import Bind
from tests.kube.conftest import eventually


class ScriptedServer:
    """Answers each request (read up to its body's end) with the next scripted bytes; counts connections and
    keeps the requests' heads."""

    def __init__(self, answers: list[bytes | Callable[[], bytes]]) -> None:
        self.answers = answers
        self.connections = 0
        self.closed = threading.Event()
        """Set once the server closed a connection."""
        self.heads: list[str] = []
        self.bodies: list[bytes] = []
        self.ahead = 0
        self.buffered: list[int] = []
        """Requests already arrived when each connection's first answer was sent."""
        self.behind: list[int] = []
        """Whole requests already arrived behind each request as it was answered."""
        """Requests that must have arrived after a new connection's first one before it is answered: a client that
        waits for each answer before sending the next request (not pipelining) gets no answer and times out."""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:  # until the listener is closed
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            received = bytearray()  # what the client sent ahead (pipelined requests)
            # a client that closed its end (after an answer it could not read) ends this connection, not the server
            with conn, contextlib.suppress(OSError):
                while self.ahead and received.count(b"\r\n\r\n") < self.ahead + 1:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    received += chunk
                self.buffered.append(received.count(b"\r\n\r\n"))
                while self._one(conn, received):
                    pass
            self.closed.set()

    def _one(self, conn: socket.socket, data: bytearray) -> bool:
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, rest = bytes(data).partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
            0,
        )
        while len(rest) < length:
            rest += conn.recv(65536)
        data[:] = rest[length:]
        self.heads.append(head.decode())
        self.bodies.append(rest[:length])
        self.behind.append(data.count(b"\r\n\r\n"))
        answer = self.answers.pop(0) if self.answers else b"HTTP/1.1 500 Unscripted\r\nContent-Length: 0\r\n\r\n"
        if callable(answer):  # something done as the request is being answered
            answer = answer()
        conn.sendall(answer)
        return b"Connection: close" not in answer and not answer.endswith(b"<drop>")


@pytest.fixture
def served() -> Iterator[tuple[RawApi, list[bytes | Callable[[], bytes]], ScriptedServer]]:
    answers: list[bytes | Callable[[], bytes]] = []
    server = ScriptedServer(answers)
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    raw = RawApi(api, (2.0, 5.0))
    yield raw, answers, server
    raw.close()
    server.listener.close()


def test_writes_share_one_connection_whatever_the_body_framing(
    served: tuple[RawApi, list[bytes | Callable[[], bytes]], ScriptedServer],
) -> None:
    raw, answers, server = served
    answers += [
        b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{"kind":"Status"}',
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'7\r\n{"kind"\r\n8;ext=1\r\n:"Event"\r\n1\r\n}\r\n0\r\nX-Trailer: 1\r\n\r\n',
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
    ]
    assert raw.create_namespaced_pod_binding("p", "default", {"target": {"name": "n"}}) == b'{"kind":"Status"}'
    assert raw.create_namespaced_event("default", {"note": "x"}) == b'{"kind":"Event"}'
    assert raw.patch_namespaced_pod("p", "default", {"metadata": {}}) == b"{}"
    assert server.connections == 1
    first = server.heads[0].split("\r\n")
    assert first[0] == "POST /api/v1/namespaces/default/pods/p/binding HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}" in first and "Content-Type: application/json" in first
    assert "Content-Type: application/merge-patch+json" in server.heads[2]


def test_a_refusal_raises_the_clients_exception_and_a_closing_server_gets_a_new_connection(
    served: tuple[RawApi, list[bytes | Callable[[], bytes]], ScriptedServer],
) -> None:
    raw, answers, server = served
    status = b'{"kind":"Status","code":409,"message":"already bound"}'
    answers += [
        b"HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status),
        b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    ]
    with pytest.raises(client.ApiException) as refused:
        raw.create_namespaced_pod_binding("p", "default", {})
    assert refused.value.status == 409 and refused.value.reason == "Conflict"
    assert "already bound" in str(refused.value.body)
    assert raw.create_namespaced_event("default", {}) == b""
    assert server.connections == 2


def test_a_connection_dropped_mid_answer_is_an_error_the_binder_handles(
    served: tuple[RawApi, list[bytes | Callable[[], bytes]], ScriptedServer],
) -> None:
    raw, answers, _ = served
    answers.append(b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{<drop>")
    with pytest.raises(urllib3.exceptions.HTTPError):
        raw.create_namespaced_pod_binding("p", "default", {})


Served = tuple[RawApi, list[bytes | Callable[[], bytes]], ScriptedServer]
OK = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 201 Created\r\nContent-Length: 2, 2\r\n\r\n{}",
        b"HTTP/1.1 201 Created\r\nContent-Length: 1_0\r\n\r\n{}",
        b"HTTP/1.1 201 Created\r\nContent-Length: two\r\n\r\n{}",
        b"HTTP/1.1 201 Created\r\nContent-Length: -2\r\n\r\n{}",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n{}\r\n0\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n",
    ],
    ids=["list", "underscore", "words", "negative-length", "negative-chunk", "signed-chunk"],
)
def test_a_malformed_size_is_a_protocol_error_the_binder_handles_and_the_connection_is_dropped(
    served: Served, answer: bytes
) -> None:
    raw, answers, server = served
    answers += [answer, OK]
    with pytest.raises(urllib3.exceptions.ProtocolError, match="bad"):
        raw.create_namespaced_pod_binding("p", "default", {})
    assert raw.create_namespaced_pod_binding("p", "default", {}) == b"{}"
    assert server.connections == 2


def test_a_connection_the_server_closed_while_idle_is_not_reused(served: Served) -> None:
    raw, answers, server = served
    # answered whole, without Connection: close, then closed (a server's idle close)
    answers += [b"HTTP/1.1 201 Created\r\nContent-Length: 6\r\n\r\n<drop>", OK]
    assert raw.create_namespaced_event("default", {}) == b"<drop>"
    assert server.closed.wait(10)
    assert raw.create_namespaced_pod_binding("p", "default", {}) == b"{}"
    assert server.connections == 2 and len(server.heads) == 2


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}", OK + b"junk"],
    ids=["http/1.0", "bytes-after-the-body"],
)
def test_a_connection_that_cannot_serve_again_is_not_reused(served: Served, answer: bytes) -> None:
    raw, answers, server = served
    answers += [answer, OK]
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert server.connections == 2


def test_a_timeout_given_as_one_number_for_connect_and_read() -> None:
    server = ScriptedServer([OK])
    raw = RawApi(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}")), 5.0)
    try:
        assert raw.create_namespaced_event("default", {}) == b"{}"
    finally:
        raw.close()
        server.listener.close()


def test_a_connection_idle_longer_than_30_s_is_not_reused(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, answers, server = served
    answers += [OK, OK, OK]
    now = [1000.0]
    monkeypatch.setattr(keepalive, "monotonic", lambda: now[0])
    raw.create_namespaced_event("default", {})
    now[0] += 29.0
    raw.create_namespaced_event("default", {})
    assert server.connections == 1
    now[0] += 31.0
    raw.create_namespaced_event("default", {})
    assert server.connections == 2


def test_a_connection_in_use_when_closed_is_closed_when_its_request_ends(served: Served) -> None:
    raw, answers, server = served
    answers += [lambda: (raw.close(), OK)[1], OK]
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert raw._writes is not None and not raw._writes._idle
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert server.connections == 2


def test_a_refused_connection_is_tried_three_times_and_raises_urllib3s_error() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens: every connect is refused
    raw = RawApi(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")), (2.0, 2.0))
    assert raw._writes is not None
    pool = raw._writes.pool
    made = []
    new_conn = pool._new_conn

    def counted() -> object:
        made.append(1)
        return new_conn()

    pool._new_conn = counted  # type: ignore[method-assign,assignment]
    with pytest.raises(urllib3.exceptions.NewConnectionError):
        raw.create_namespaced_pod_binding("p", "default", {})
    assert len(made) == 3


class _Alpn:
    """A socket that says the TLS handshake chose ``protocol`` (ALPN)."""

    def __init__(self, sock: socket.socket, protocol: str) -> None:
        self.sock = sock
        self.protocol = protocol

    def selected_alpn_protocol(self) -> str:
        return self.protocol

    def __getattr__(self, name: str) -> object:
        return getattr(self.sock, name)


def test_a_server_that_chose_another_protocol_than_http11_gets_the_write_through_urllib3(served: Served) -> None:
    raw, answers, server = served
    answers += [OK, OK]
    assert raw._writes is not None
    pool = raw._writes.pool
    new_conn = pool._new_conn

    def h2() -> object:
        connection = new_conn()
        connect = connection.connect

        def connect_h2() -> None:
            connect()
            connection.sock = _Alpn(connection.sock, "h2")  # type: ignore[assignment]

        connection.connect = connect_h2  # type: ignore[method-assign]
        return connection

    pool._new_conn = h2  # type: ignore[method-assign,assignment]
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert raw._writes is None  # urllib3 from now on
    pool._new_conn = new_conn  # type: ignore[method-assign]
    assert raw.create_namespaced_event("default", {}) == b"{}"
    assert len(server.heads) == 2


def test_a_binding_answered_with_a_malformed_length_is_refused_by_the_binder_not_lost(served: Served) -> None:
    _, answers, server = served
    answers.append(b"HTTP/1.1 201 Created\r\nContent-Length: 2, 2\r\n\r\n{}")
    refused: list[str] = []
    told = threading.Event()

    def on_refused(outcome: BindOutcome) -> None:
        refused.append(outcome.reason)
        told.set()

    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    binder = Binder(api, workers=1, on_refused=on_refused)
    try:
        binder.bind("kubeflux", Bind("default/p", "u1", "n1"), PodRef("default", "p", "u1"))
        assert told.wait(10)
    finally:
        binder.stop()
    assert refused == ["bind not sent: bad Content-Length '2, 2'"]


def _pipelined(raw: RawApi, count: int) -> list[bytes | Exception]:
    return list(raw.create_namespaced_pod_bindings([(f"p{i}", "default", {"n": i}) for i in range(count)]))


def _queued_binds(binder: Binder, count: int) -> threading.Event:
    """``count`` Binds (pods p0, p1 …) queued behind a write holding the binder's one thread; setting the gate
    returned lets them go, one after the other in its lane."""
    gate = threading.Event()
    binder._submit(PodRef("default", "gate", "g"), gate.wait, "bind")
    for i in range(count):
        binder.bind("kubeflux", Bind(f"default/p{i}", f"u{i}", "n1"), PodRef("default", f"p{i}", f"u{i}"))
    return gate


def test_bindings_go_back_to_back_on_one_connection_and_each_answer_comes_in_order(served: Served) -> None:
    raw, answers, server = served
    server.ahead = 3  # the first is answered only once all four arrived: sent before any answer was read
    status = b'{"kind":"Status","code":409}'
    answers += [
        OK,
        b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status),
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        OK,
        OK,
    ]
    first, refused, chunked, last = _pipelined(raw, 4)
    server.ahead = 0
    assert first == chunked == last == b"{}"
    assert isinstance(refused, client.ApiException) and refused.status == 409
    assert [head.split("\r\n")[0] for head in server.heads] == [
        f"POST /api/v1/namespaces/default/pods/p{i}/binding HTTP/1.1" for i in range(4)
    ]
    assert server.bodies == [b'{"n":%d}' % i for i in range(4)]
    assert raw.create_namespaced_event("default", {}) == b"{}"  # the connection serves again
    assert server.connections == 1


def test_the_requests_after_an_answer_that_ends_the_connection_go_again_on_a_new_one(served: Served) -> None:
    raw, answers, server = served
    # the server read all three but processed only the first: it said it closes (RFC 9112 9.6)
    answers += [b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", OK, OK]
    assert _pipelined(raw, 3) == [b"{}"] * 3
    assert server.connections == 2
    names = [head.split("\r\n")[0].split("/")[6] for head in server.heads]
    assert names == ["p0", "p1", "p2"]  # each processed once


def test_requests_whose_answers_never_came_have_an_unknown_outcome_and_are_not_sent_again(served: Served) -> None:
    raw, answers, server = served
    answers += [OK, b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{<drop>", OK, OK]
    outcomes = _pipelined(raw, 4)
    assert outcomes[0] == b"{}"
    assert all(isinstance(outcome, urllib3.exceptions.ProtocolError) for outcome in outcomes[1:])
    assert len(server.heads) == 2 and server.connections == 1  # the last two were never read again nor resent
    assert raw.create_namespaced_event("default", {}) == b"{}"  # a new connection for the next write
    assert server.connections == 2


def test_pipelined_bindings_without_a_connection_fail_each_without_raising() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    raw = RawApi(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")), (2.0, 2.0))
    outcomes = _pipelined(raw, 2)
    assert len(outcomes) == 2
    assert all(isinstance(outcome, urllib3.exceptions.NewConnectionError) for outcome in outcomes)


def test_a_binder_pipelines_a_threads_queued_bindings_and_their_events_and_tells_each_outcome(
    served: Served,
) -> None:
    _, answers, server = served
    status = b'{"kind":"Status","code":409,"message":"pod p2 is already assigned"}'
    conflict = b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status)
    answers += [OK, OK, conflict, OK, b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{<drop>"]
    bound: list[str] = []
    refused: list[str] = []
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    binder = Binder(api, workers=1, on_bound=lambda s, d, pod: bound.append(pod.name))
    binder.on_refused = lambda outcome: refused.append(f"{outcome.decision.pod}: {outcome.reason}")
    gate = _queued_binds(binder, 6)
    server.ahead = 2  # on each connection: the Bindings' and, after them, the three Scheduled events'
    gate.set()
    assert binder.drain(10)
    binder.stop()
    assert bound == ["p0", "p1", "p3"]
    assert refused[0] == "default/p2: 409: pod p2 is already assigned"
    assert [line.split(":")[0] for line in refused[1:]] == ["default/p4", "default/p5"]
    assert all("bind not sent" in line for line in refused[1:])
    bindings = [head.split("\r\n")[0].split("/")[6] for head in server.heads if "/binding " in head]
    assert bindings == ["p0", "p1", "p2", "p3", "p4"]  # p5 went in the pipeline, was never answered nor sent again
    events = [head.split("\r\n")[0] for head in server.heads[5:]]
    assert events == ["POST /apis/events.k8s.io/v1/namespaces/default/events HTTP/1.1"] * 3  # after the burst
    assert server.connections == 2 and [orjson.loads(body)["reason"] for body in server.bodies[5:]] == ["Scheduled"] * 3


CLOSE = b"HTTP/1.1 201 Created\r\nConnection: close, TE\r\nContent-Length: 2\r\n\r\n{}"
"""An answer after which the server reads no further request (the scripted server closes the connection)."""


def _bound_names(server: ScriptedServer) -> list[str]:
    return [head.split("\r\n")[0].split("/")[6] for head in server.heads if "/binding " in head]


def test_close_among_the_connection_options_sends_the_rest_again_once(served: Served) -> None:
    raw, answers, server = served
    answers += [OK, CLOSE, OK, OK]
    assert _pipelined(raw, 4) == [b"{}"] * 4
    assert _bound_names(server) == ["p0", "p1", "p2", "p3"] and server.connections == 2


@pytest.mark.parametrize(
    "ending",
    [
        b"HTTP/1.0 201 Created\r\nContent-Length: 2\r\n\r\n{}",  # HTTP/1.0 and not keep-alive
        CLOSE + OK,  # answers after saying it closes: it did read further
    ],
    ids=["http/1.0", "answers-after-close"],
)
def test_requests_the_server_may_have_read_are_never_sent_again(served: Served, ending: bytes) -> None:
    raw, answers, server = served
    server.ahead = 2  # all three sent before the first answer
    answers += [OK, ending + b"<drop>", OK, OK]
    first, second, third = _pipelined(raw, 3)
    assert first == second == b"{}"
    assert isinstance(third, urllib3.exceptions.ProtocolError) and "outcome unknown" in str(third)
    assert _bound_names(server) == ["p0", "p1"]  # the third was read by nobody and is not sent again


def test_an_http10_keep_alive_answer_keeps_the_pipeline_going(served: Served) -> None:
    raw, answers, server = served
    answers += [b"HTTP/1.0 201 Created\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}", OK]
    assert _pipelined(raw, 2) == [b"{}"] * 2
    assert server.connections == 1


def test_more_requests_than_a_pipeline_holds_go_in_rounds(served: Served) -> None:
    raw, answers, server = served
    server.ahead = keepalive.PIPELINE - 1
    answers += [OK] * 40
    assert _pipelined(raw, 40) == [b"{}"] * 40
    assert server.buffered == [keepalive.PIPELINE]  # the next round only once the first was answered
    assert _bound_names(server) == [f"p{i}" for i in range(40)]


def test_a_status_that_is_not_three_ascii_digits_refuses_the_rest_of_the_pipeline(served: Served) -> None:
    _, answers, server = served
    answers += [OK, "HTTP/1.1 2\u00b2 Created\r\nContent-Length: 2\r\n\r\n{}".encode("latin-1")]
    outcomes: dict[str, str] = {}
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    binder = Binder(api, workers=1, on_bound=lambda s, d, pod: outcomes.setdefault(pod.name, "bound"))
    binder.on_refused = lambda outcome: outcomes.setdefault(outcome.decision.pod, outcome.reason)
    gate = _queued_binds(binder, 3)
    gate.set()
    assert binder.drain(10)
    binder.stop()
    assert outcomes["p0"] == "bound"
    assert [outcomes[f"default/p{i}"].split(":")[0] for i in (1, 2)] == ["bind not sent"] * 2


def test_a_failure_to_make_the_requests_refuses_every_bind_of_the_pipeline(served: Served) -> None:
    _, _, server = served
    refused: list[str] = []
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    binder = Binder(api, workers=1, on_refused=lambda outcome: refused.append(outcome.decision.pod))

    def no_token(*args: object) -> dict[str, str]:
        raise RuntimeError("the token refresh hook failed")

    binder.writer._headers = no_token  # type: ignore[method-assign,assignment]
    gate = _queued_binds(binder, 3)
    gate.set()
    assert binder.drain(10)
    binder.stop()
    assert refused == [f"default/p{i}" for i in range(3)] and not server.heads


@pytest.mark.parametrize("pipeline", [1, 3])
def test_binding_pipeline_says_how_many_bindings_go_before_their_answers_are_read(
    served: Served, pipeline: int
) -> None:
    _, answers, server = served
    answers += [OK] * 3
    config = parse_config({"binding": {"pipeline": pipeline}})
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    binder = Binder(api, workers=1, pipeline=config.binding.pipeline, events_quiet=3600.0)
    gate = _queued_binds(binder, 3)
    if pipeline > 1:
        server.ahead = 2  # answered only once all three arrived
    gate.set()
    eventually(lambda: binder.binds == 3)  # (their Scheduled events wait for a quiet hour)
    binder.stop(grace=0.0)
    assert _bound_names(server) == ["p0", "p1", "p2"]
    assert server.behind[:3] == ([0, 0, 0] if pipeline == 1 else [2, 1, 0])  # one at a time, or all sent at once


def test_binding_pipeline_is_between_1_and_what_a_pipeline_holds() -> None:
    for wrong in (0, keepalive.PIPELINE + 1):
        with pytest.raises(ConfigError, match="pipeline"):
            parse_config({"binding": {"pipeline": wrong}})
