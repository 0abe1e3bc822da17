"""What the differential tests against the real kube-scheduler share (test_filter_differential.py,
test_volume_differential.py, test_dra_differential.py): random KWOK nodes with zones, racks and taints
(:func:`node_docs`), the real control plane as they drive it (:class:`Real`: nodes applied, pods created,
kube-scheduler's verdict on each), a scheduler core's verdict on a pending pod (:func:`decide`), and the per-reason
node counts of a ``FailedScheduling`` message (:func:`counts`)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from kubeflux.apiobjects.manifests import pod_from_manifest
from kubeflux.controlplane import ControlPlane
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind, Reject, Unschedulable

from .conftest import CEILING, Api, schedulable

__all__ = ["HOST", "RACK", "ZONE", "Real", "counts", "decide", "node_docs"]


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
        self.until(lambda: self.usable(names))

    def usable(self, names: set[str]) -> bool:
        """Whether the nodes ``names`` are all there, Ready and free of the node lifecycle's taints."""
        nodes = {name: node for name, node in self.api.nodes().items() if name in names}
        return len(nodes) == len(names) and all(schedulable(node) for node in nodes.values())

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


def decide(scheduler: Any, pending: dict[str, Any], now: float) -> tuple[str | None, str]:
    """Where ``scheduler`` binds the pending pod (given to it as its own), or its message."""
    mine = replace(pod_from_manifest(pending), scheduler_name="kubeflux")
    scheduler.observe(ClusterEvent(EventKind.ADDED, mine), now)
    for decision in scheduler.schedule(now + 1.0):
        if isinstance(decision, Bind) and decision.pod == mine.key:
            return decision.node, ""
        if isinstance(decision, (Unschedulable, Reject)) and decision.pod == mine.key:  # Reject: it never fits
            return None, decision.message
    raise AssertionError(f"{scheduler.name} decided nothing for {mine.key}")


def counts(message: str) -> Counter[str]:
    """The per-reason node counts of ``0/N nodes are available: 2 X, 3 Y.`` (the first part, before any
    preemption verdict or kubeflux's own tail)."""
    assert message.startswith("0/"), message
    total, _, body = message.partition(" nodes are available: ")
    found: Counter[str] = Counter({"total": int(total[2:])})
    reasons = body.split(". ")[0].removesuffix(".")
    for part in reasons.split(", "):
        count, _, reason = part.partition(" ")
        found[reason] += int(count)
    return found
