"""serve's writes framed by hand (kubeflux.kube.keepalive) against a server that answers as HTTP/1.1 servers may:
whole bodies, chunks with trailers, interim 100s, ``Connection: close``, errors, a connection dropped mid-answer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
import urllib3
from kubernetes import client

from kubeflux.kube.rest import RawApi


class ScriptedServer:
    """Answers each request (read up to its body's end) with the next scripted bytes; counts connections and
    keeps the requests' heads."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.connections = 0
        self.heads: list[str] = []
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
            with conn:
                while self._one(conn):
                    pass

    def _one(self, conn: socket.socket) -> bool:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        self.heads.append(head.decode())
        answer = self.answers.pop(0) if self.answers else b"HTTP/1.1 500 Unscripted\r\nContent-Length: 0\r\n\r\n"
        conn.sendall(answer)
        return b"Connection: close" not in answer and not answer.endswith(b"<drop>")


@pytest.fixture
def served() -> Iterator[tuple[RawApi, list[bytes], ScriptedServer]]:
    answers: list[bytes] = []
    server = ScriptedServer(answers)
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{server.port}"))
    raw = RawApi(api, (2.0, 5.0))
    yield raw, answers, server
    raw.close()
    server.listener.close()


def test_writes_share_one_connection_whatever_the_body_framing(
    served: tuple[RawApi, list[bytes], ScriptedServer],
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
    served: tuple[RawApi, list[bytes], ScriptedServer],
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
    served: tuple[RawApi, list[bytes], ScriptedServer],
) -> None:
    raw, answers, _ = served
    answers.append(b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{<drop>")
    with pytest.raises(urllib3.exceptions.HTTPError):
        raw.create_namespaced_pod_binding("p", "default", {})
