"""The choice of clock: a real API server is asked only its ``/version`` (a stand-in answers as kube-apiserver
v1.36 does), the simulated one its time as well (the audit on the real control plane:
tests/realkube/test_serve_resilience.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kubeflux.kube.command import api_client
from kubeflux.kube.serve import choose_clock

from .conftest import Cluster


class _RealLookingServer:
    """Answers ``GET /version`` as kube-apiserver v1.36 does and every other path 403, recording the paths asked."""

    def __init__(self) -> None:
        owner = self
        self.paths: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.paths.append(self.path)
                if self.path.rstrip("/") == "/version":
                    body, code = json.dumps({"major": "1", "minor": "36", "gitVersion": "v1.36.2"}).encode(), 200
                else:
                    body, code = b'{"kind":"Status","code":403,"reason":"Forbidden"}', 403
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def kubeconfig(self, folder: Path) -> Path:
        path = folder / "kubeconfig"
        server = f"http://127.0.0.1:{self.server.server_address[1]}"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        return path


@pytest.fixture
def real_looking(tmp_path: Path) -> Iterator[tuple[_RealLookingServer, Any]]:
    server = _RealLookingServer()
    server.thread.start()
    api = api_client(server.kubeconfig(tmp_path), None, False, 2)
    try:
        yield server, api
    finally:
        api.close()
        server.server.shutdown()
        server.server.server_close()


def test_auto_clock_asks_a_real_cluster_only_its_version(real_looking: tuple[_RealLookingServer, Any]) -> None:
    server, api = real_looking
    assert choose_clock(api, "auto").speed == 1.0  # wall time
    with pytest.raises(RuntimeError, match="publishes no time"):
        choose_clock(api, "server")
    assert [p.rstrip("/") for p in server.paths] == ["/version", "/version"]  # never /kubeflux/time: a 403


def test_auto_clock_reads_the_simulated_servers_time(cluster: Cluster) -> None:
    assert choose_clock(cluster.api, "auto").speed == cluster.server.clock.speed != 1.0
