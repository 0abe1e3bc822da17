"""Every test server runs on a free 127.0.0.1 port and is always stopped (these fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.workloads.cluster_file import uniform_cluster

kubernetes = pytest.importorskip("kubernetes", reason="the official kubernetes client is a test dependency")


def start_server(
    tmp_path: Path, *, cache_size: int = 10_000, token: str = "", nodes: int = 4, fresh_wait: float = 0.2
) -> ApiServer:
    store = Store(default_registry(), cache_size=cache_size)
    settings = ServerSettings(token=token, bookmark_seconds=0.2, fresh_wait_seconds=fresh_wait)
    server = ApiServer(uniform_cluster(nodes, 16, "64Gi"), settings=settings, store=store).start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    return server


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServer]:
    server = start_server(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kube(apiserver: ApiServer, tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    """The official client configured from the kubeconfig the server wrote."""
    client = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        yield client
    finally:
        client.close()


def pod_manifest(name: str, cpu: str = "1", labels: dict[str, str] | None = None, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }
