"""Inter-pod anti-affinity by a namespace's own labels through ``cluster serve``'s in-process kubeflux scheduler: it
watches Namespaces, as ``kubeflux serve`` does (``tests/realkube/test_serve_namespaces.py``), so a
``namespaceSelector`` on a label given to a namespace created after the server started (not only the
``kubernetes.io/metadata.name`` the API server gives every one) keeps a pod away from that namespace's pods, and
follows the namespace as it is labelled anew."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.sim.apiserver.server import ApiServer
from tests.sim.apiserver._served import PODS, call, eventually, scheduled
from tests.sim.apiserver._served import served as served_cluster

HOST = "kubernetes.io/hostname"


@pytest.fixture
def server() -> Iterator[ApiServer]:
    served = served_cluster(2, 4, "16Gi", scheduler="kubeflux")
    try:
        yield served
    finally:
        served.stop()


def namespace(server: ApiServer, name: str, tier: str) -> None:
    call(server, "POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": {"tier": tier}}})


def web(server: ApiServer, namespace: str, node: str) -> None:
    """A ``web`` pod of ``namespace`` put on ``node`` by its ``nodeName`` (no scheduler)."""
    container = {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
    body = {
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"nodeName": node, "containers": [container]},
    }
    call(server, "POST", f"/api/v1/namespaces/{namespace}/pods", body)


def away_from_prod(name: str) -> dict[str, Any]:
    """A pod of kubeflux's that may not share a node with a ``web`` pod of a namespace labelled ``tier: prod``."""
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "namespaceSelector": {"matchLabels": {"tier": "prod"}},
        "topologyKey": HOST,
    }
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    spec = {
        "schedulerName": "kubeflux",
        "containers": [container],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_namespace_labelled_after_the_start_keeps_a_pod_from_its_pods_and_is_followed_as_labelled_anew(
    server: ApiServer,
) -> None:
    namespace(server, "prod", "prod")
    namespace(server, "dev", "dev")
    web(server, "prod", "node-0000")
    web(server, "dev", "node-0001")
    call(server, "POST", PODS, away_from_prod("db"))
    eventually(lambda: bool(scheduled(server, "db")[0]), "db's binding")
    assert scheduled(server, "db")[0] == "node-0001"  # beside dev's web, away from prod's
    patch = {"metadata": {"labels": {"tier": "prod"}}}
    call(server, "PATCH", "/api/v1/namespaces/dev", patch, "application/merge-patch+json")
    call(server, "POST", PODS, away_from_prod("db-2"))
    eventually(lambda: scheduled(server, "db-2")[1] == "False", "db-2's PodScheduled=False")
    pod = call(server, "GET", f"{PODS}/db-2")
    said = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "didn't match pod anti-affinity rules" in said, said
    assert not pod["spec"].get("nodeName")
