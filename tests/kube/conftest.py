"""``kubeflux serve`` against the simulated cluster over real HTTP, in the test process.

The cluster is ``kubeflux cluster serve``'s server (:class:`ApiServer`) on a free 127.0.0.1 port with no scheduler
of its own, its simulated kubelet on and its time running fast, so that pods complete in a blink; it is always
stopped. ``serve`` talks to it only over HTTP, with a client made from the kubeconfig the server wrote. Waits are
for a condition to hold (never for a duration), with a generous ceiling that only a hang reaches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.kube.command import api_client
from kubeflux.kube.config import ServeConfig, parse_config
from kubeflux.kube.serve import Serve
from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.wallclock import WallClock

kubernetes = pytest.importorskip("kubernetes")
client = kubernetes.client

CEILING = 120.0
"""Seconds after which a wait is a hang (a failure), never reached by a slow machine that works."""


@dataclass
class Cluster:
    server: ApiServer
    kubeconfig: Path
    api: Any

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    def serve(self, config: ServeConfig | None = None, **settings: Any) -> Serve:
        """A started :class:`Serve` with ``config`` (or the defaults with ``settings`` merged in)."""
        if config is None:
            config = parse_config({"watch": {"timeoutSeconds": 30}, **settings})
        api = api_client(self.kubeconfig, None, False, 16)
        return Serve(config, api).start()

    def create(self, manifest: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
        response = self.core.create_namespaced_pod(namespace, manifest, _preload_content=False)
        created: dict[str, Any] = orjson.loads(response.data)
        return created

    def pods(self, namespace: str = "default") -> dict[str, dict[str, Any]]:
        response = self.core.list_namespaced_pod(namespace, _preload_content=False)
        return {p["metadata"]["name"]: p for p in orjson.loads(response.data)["items"]}

    def events(self, namespace: str = "default") -> list[dict[str, Any]]:
        response = client.EventsV1Api(self.api).list_namespaced_event(namespace, _preload_content=False)
        items: list[dict[str, Any]] = orjson.loads(response.data)["items"]
        return items

    def bind(self, name: str, node: str, namespace: str = "default") -> None:
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": node}}
        self.core.create_namespaced_pod_binding(name, namespace, binding, _preload_content=False)

    def wait_for(self, what: Callable[[dict[str, dict[str, Any]]], bool], namespace: str = "default") -> None:
        """Until ``what(pods)`` holds; fails after :data:`CEILING` seconds (a hang)."""
        deadline = time.monotonic() + CEILING
        while not what(self.pods(namespace)):
            assert time.monotonic() < deadline, f"never reached: {self.pods(namespace)}"
            threading.Event().wait(0.05)


def eventually(what: Callable[[], bool]) -> None:
    """Until ``what()`` holds (serve has caught up with the cluster); fails after :data:`CEILING` seconds."""
    deadline = time.monotonic() + CEILING
    while not what():
        assert time.monotonic() < deadline, "never reached"
        threading.Event().wait(0.02)


def no_allocations(serve: Serve) -> Callable[[], bool]:
    """Whether every core has released every allocation (each pod it placed has ended and been seen to)."""
    return lambda: not any(core.books.allocations for core in serve.cores)


def start_cluster(
    tmp_path: Path,
    *,
    nodes: int = 1,
    cores: int = 16,
    speed: float = 200.0,
    cache_size: int = 10_000,
    port: int = 0,
    fresh_wait: float = 3.0,
    generic_workload: bool = False,
    node_list: list[Node] | None = None,
) -> Cluster:
    """A started cluster of ``nodes`` uniform nodes of ``cores`` cores, or of ``node_list`` (``fresh_wait``: see
    :class:`ServerSettings`)."""
    clock = WallClock(speed)
    store = Store(default_registry(generic_workload=generic_workload), clock=clock, cache_size=cache_size)
    server = ApiServer(
        node_list if node_list is not None else uniform_cluster(nodes, cores, "64Gi"),
        port=port,
        settings=ServerSettings(bookmark_seconds=0.2, fresh_wait_seconds=fresh_wait),
        store=store,
        kubelet=True,
        lifecycle=Lifecycle(),
        clock=clock,
        controllers=True,
    ).start()
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    return Cluster(server, path, api_client(path, None, False, 8))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """One 16-core node (the seed's demo cluster)."""
    started = start_cluster(tmp_path)
    try:
        yield started
    finally:
        started.api.close()
        started.server.stop()


def create_podgroup(cluster: Cluster, api_version: str, name: str, spec: dict[str, Any]) -> None:
    """A PodGroup of ``api_version`` (coscheduling's ``scheduling.x-k8s.io/v1alpha1`` or Kubernetes' own
    ``scheduling.k8s.io/v1alpha2``) in ``default``, through the official client."""
    group, version = api_version.split("/")
    body = {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(group, version, "default", "podgroups", body)


def pod(
    name: str,
    cpu: str = "8",
    *,
    scheduler: str = "kubeflux",
    run: str | None = "60s",
    exit_code: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod asking ``cpu`` (and the ``extra`` resources) that runs ``run`` (simulated; None: until deleted) and
    exits with ``exit_code``."""
    notes = dict(annotations or {})
    if run is not None:
        notes["pod-complete.stage.kwok.x-k8s.io/delay"] = run
    if exit_code is not None:
        notes["sim.kubeflux.io/exit-code"] = str(exit_code)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": notes, "labels": labels or {}},
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "containers": [
                {"name": "pi", "image": "perl:5.34", "resources": {"requests": {"cpu": cpu, **(extra or {})}}}
            ],
        },
    }


def phase(p: dict[str, Any]) -> str:
    return str(p.get("status", {}).get("phase", ""))


def condition(p: dict[str, Any], type_: str = "PodScheduled") -> dict[str, Any] | None:
    found = [c for c in p.get("status", {}).get("conditions") or [] if c.get("type") == type_]
    return found[0] if found else None


def ended(pods: dict[str, dict[str, Any]]) -> bool:
    return all(phase(p) in ("Succeeded", "Failed") for p in pods.values())


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[Cluster]:
    """A served cluster of two nodes, stopped after the test."""
    started = start_cluster(tmp_path, nodes=2)
    try:
        yield started
    finally:
        started.api.close()
        started.server.stop()
