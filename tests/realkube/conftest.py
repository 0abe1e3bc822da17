"""Tests against the real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
KWOK) that ``make`` builds from their Go modules (``tools/kube/build.py``) and :mod:`kubeflux.controlplane` starts
on loopback.

Where the binaries are missing (no Go on a user's machine) these tests are skipped with the reason in one line;
under ``CI=true`` they fail instead, so CI never passes without them. Each module gets its own control plane (its
tests share it, each in namespaces or on nodes of its own), stopped when the module is done.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.controlplane import Binaries, ControlPlane, find_binaries
from kubeflux.kube.command import api_client
from tests.shared import unavailable

kubernetes = pytest.importorskip("kubernetes")
client = kubernetes.client

CEILING = 120.0
"""Seconds after which a wait is a hang (a failure), never reached by a slow machine that works."""


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    found = find_binaries()
    if isinstance(found, str):
        unavailable(found)
    return found


@contextlib.contextmanager
def running_plane(binaries: Binaries, folder: Path, *, crds: bool = False, **options: Any) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver (``options``: :class:`ControlPlane`'s), kube-controller-manager and KWOK, with the
    CustomResourceDefinitions kubeflux reads when ``crds``; no kube-scheduler (a test starts it if it needs it).
    Stopped on leaving."""
    started = ControlPlane(folder, binaries, **options).start()
    try:
        if crds:
            started.install_crds()
        started.start_controller_manager()
        started.start_kwok()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane (:func:`running_plane`) shared by a module's tests."""
    with running_plane(binaries, tmp_path_factory.mktemp("plane")) as started:
        yield started


def eventually(what: Callable[[], Any], message: Callable[[], str] = lambda: "") -> Any:
    """``what()``'s first true value; fails after :data:`CEILING` seconds (a hang)."""
    deadline = time.monotonic() + CEILING
    while True:
        value = what()
        if value:
            return value
        assert time.monotonic() < deadline, f"never reached {message()}"
        time.sleep(0.05)


class Api:
    """The admin's view of a real API server through the official client (raw JSON)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.client = api_client(kubeconfig, None, False, 8)
        self.core = client.CoreV1Api(self.client)

    def close(self) -> None:
        self.client.close()

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        response = self.core.list_namespaced_pod(namespace, _preload_content=False)
        return {p["metadata"]["name"]: p for p in orjson.loads(response.data)["items"]}

    def nodes(self) -> dict[str, dict[str, Any]]:
        response = self.core.list_node(_preload_content=False)
        return {n["metadata"]["name"]: n for n in orjson.loads(response.data)["items"]}

    def create_pod(self, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
        response = self.core.create_namespaced_pod(namespace, manifest, _preload_content=False)
        created: dict[str, Any] = orjson.loads(response.data)
        return created

    def events(self, namespace: str) -> list[dict[str, Any]]:
        response = client.EventsV1Api(self.client).list_namespaced_event(namespace, _preload_content=False)
        items: list[dict[str, Any]] = orjson.loads(response.data)["items"]
        return items

    def namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        self.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}}, _preload_content=False)
        return name


@pytest.fixture
def api(plane: ControlPlane) -> Iterator[Api]:
    made = Api(plane.kubeconfig)
    try:
        yield made
    finally:
        made.close()


def ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions") or []
    )


def schedulable(node: dict[str, Any]) -> bool:
    """Ready and free of the node lifecycle's taints: the real TaintNodesByCondition admission taints a new node
    ``node.kubernetes.io/not-ready:NoSchedule``, which kube-controller-manager removes a moment after the node is Ready;
    a scheduler started in between sees a node no pod without the toleration may use."""
    return ready(node) and not any(t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints") or [])


def phase(p: dict[str, Any]) -> str:
    return str(p.get("status", {}).get("phase", ""))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A module's tests run on one worker (``pytest -n 2 --dist loadgroup``), so its control plane starts once."""
    for item in items:
        if "realkube" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
