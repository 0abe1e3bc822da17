"""What the differential tests against the real kube-scheduler share (test_filter_differential.py,
test_volume_differential.py): random KWOK nodes with zones, racks and taints, and the real control plane through the
admin's client (nodes applied and ready, pods created, kube-scheduler's verdict on each)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

import orjson

from kubeflux.controlplane import ControlPlane

from .conftest import CEILING, Api, ready

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
RACK = "example.com/rack"


def node_docs(rng: random.Random, round_: int) -> list[dict[str, Any]]:
    docs = []
    for i in range(rng.randint(3, 6)):
        name = f"r{round_}-n{i}"
        cpu = str(rng.choice((2, 4, 4, 8)))
        capacity = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
        labels = {HOST: name, "type": "kwok"}
        if rng.random() < 0.9:
            labels[ZONE] = rng.choice(("z0", "z1", "z2"))
        if rng.random() < 0.8:
            labels[RACK] = f"k{rng.randint(0, 3)}"
        spec: dict[str, Any] = {}
        if rng.random() < 0.2:
            spec["taints"] = [{"key": "dedicated", "value": rng.choice(("x", "y")), "effect": "NoSchedule"}]
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": labels,
                },
                "spec": spec,
                "status": {"allocatable": capacity, "capacity": capacity},
            }
        )
    return docs


class Real:
    """The real control plane, through the admin's client (raw JSON)."""

    def __init__(self, plane: ControlPlane, api: Api) -> None:
        self.plane = plane
        self.api = api
        self.core = api.core

    def apply_nodes(self, docs: list[dict[str, Any]]) -> None:
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
        self.plane.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=test", "-f", "-", input=listed
        )
        names = {doc["metadata"]["name"] for doc in docs}
        self.until(lambda: self._usable(names))

    def _usable(self, names: set[str]) -> bool:
        nodes = {name: node for name, node in self.api.nodes().items() if name in names}
        return len(nodes) == len(names) and all(
            ready(node) and not any(t["key"].startswith("node.kubernetes.io/") for t in node["spec"].get("taints", []))
            for node in nodes.values()
        )

    def nodes(self, names: set[str]) -> list[dict[str, Any]]:
        return [node for name, node in sorted(self.api.nodes().items()) if name in names]

    def create(self, namespace: str, doc: dict[str, Any]) -> dict[str, Any]:
        return self.api.create_pod(namespace, doc)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        response = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        found: dict[str, Any] = orjson.loads(response.data)
        return found

    def namespace(self, name: str) -> dict[str, Any]:
        response = self.core.read_namespace(name, _preload_content=False)
        found: dict[str, Any] = orjson.loads(response.data)
        return found

    def delete(self, namespace: str, name: str) -> None:
        self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0, _preload_content=False)

    def verdict(
        self, namespace: str, name: str, meanwhile: Callable[[], object] = lambda: None
    ) -> tuple[str | None, str]:
        """Where kube-scheduler bound the pod (None: it waits) and its FailedScheduling message; ``meanwhile`` is
        called while it decides (what a controller the test plays does)."""
        found: list[tuple[str | None, str]] = []

        def decided() -> bool:
            pod = self.get(namespace, name)
            if pod["spec"].get("nodeName"):
                found.append((pod["spec"]["nodeName"], ""))
                return True
            for condition in pod.get("status", {}).get("conditions") or []:
                if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                    found.append((None, condition["message"]))
                    return True
            meanwhile()
            return False

        self.until(decided)
        return found[0]

    def clear(self, namespaces: list[str], nodes: set[str]) -> None:
        for namespace in namespaces:
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0, _preload_content=False)
        self.until(lambda: all(not self.api.pods(namespace) for namespace in namespaces))
        for name in nodes:
            self.core.delete_node(name, _preload_content=False)

    @staticmethod
    def until(what: Any) -> None:
        deadline = time.monotonic() + CEILING
        while not what():
            assert time.monotonic() < deadline, "kube-scheduler never answered"
            time.sleep(0.005)
