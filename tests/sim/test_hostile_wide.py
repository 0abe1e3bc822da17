"""Hostile churn on a cluster wide enough for the matcher's shortcuts (more than 64 nodes: the early stop of the
root's walk, the nodes a pod may not use passed as a vertex mask, span caches): nodes removed, re-added with other
sizes, cordoned, NotReady and relabelled while pods with and without node selectors queue, and kubeflux restarted
mid-run. Every policy binds exactly as the plain walk (no shortcut, nothing cached) does, and no core is ever
held by two running pods."""

from __future__ import annotations

import json
import random
from contextlib import ExitStack
from typing import Any
from unittest import mock

import pytest

from kubeflux.match import evaluation, traverser, wide
from kubeflux.scheduler import hiding
from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.translate import DURATION_ANNOTATION, NodeShape

ADDED, MODIFIED, DELETED = EventKind.ADDED, EventKind.MODIFIED, EventKind.DELETED
POLICIES = ("first", "lonode", "hinode", "low", "high", "lonodex", "variation")


class World:
    """A cluster of ``width`` nodes told to one kubeflux, changed step by step by a seeded random hostile user."""

    def __init__(self, policy: str, seed: int, width: int = 72, *, sockets: int = 0, gpus: int = 0) -> None:
        self.policy = policy
        self.shape = NodeShape(default_sockets=sockets)
        self.gpus = gpus
        self.rng = random.Random(seed)
        self.nodes: dict[str, Node] = {}
        self.pods: dict[str, Pod] = {}
        self.gone: dict[str, Node] = {}
        self.now = 0.0
        self.serial = 0
        self.binds: list[tuple[float, str, str, str]] = []
        self.groups: list[PodGroup] = []
        self.scheduler = KubefluxScheduler(policy=policy, shape=self.shape)
        for i in range(width):
            self.put(Node(f"n{i:03d}", allocatable=self.room(8, i), labels={"pool": "ab"[i % 2]}), ADDED)

    def room(self, cores: int, serial: int) -> dict[str, int]:
        """A node's allocatable: every other node has :attr:`gpus` gpus."""
        gpus = {GPU: self.gpus} if self.gpus and serial % 2 == 0 else {}
        return {CPU: cores * 1000, MEMORY: 2**36, **gpus}

    def pod(self, requests: dict[str, int], **kwargs: Any) -> Pod:
        self.serial += 1
        duration = self.rng.choice([20, 60, 200])
        pod = Pod(
            "default",
            f"p{self.serial}",
            f"u{self.serial}",
            "kubeflux",
            0,
            self.now,
            requests,
            annotations={DURATION_ANNOTATION: str(duration)},
            **kwargs,
        )
        self.pods[pod.key] = pod
        return pod

    def put(self, node: Node, kind: EventKind) -> None:
        self.nodes[node.name] = node
        self.scheduler.observe(ClusterEvent(kind, node), self.now)

    def step(self) -> None:
        rng = self.rng
        self.now += 7.0
        what = rng.choice(["pod"] * 6 + ["end"] * 3 + ["gang", "node-", "node+", "cordon", "ready", "label", "restart"])
        if what == "pod":
            selector = {"pool": rng.choice("ab")} if rng.random() < 0.4 else {}
            requests = {CPU: rng.choice([1, 2, 3, 4, 8]) * 1000}
            if self.gpus and rng.random() < 0.3:
                requests[GPU] = rng.randint(1, self.gpus)
            pod = self.pod(requests, node_selector=selector)
            self.scheduler.observe(ClusterEvent(ADDED, pod), self.now)
        elif what == "gang":
            size = rng.choice([2, 4, 8])
            group = PodGroup("default", f"g{self.serial}", size, creation_time=self.now, uid=f"g{self.serial}")
            self.groups.append(group)
            self.scheduler.observe(ClusterEvent(ADDED, group), self.now)
            selector = {"pool": rng.choice("ab")} if rng.random() < 0.3 else {}
            cpu = rng.choice([2, 4, 8]) * 1000
            for pod in [
                self.pod({CPU: cpu}, labels={POD_GROUP_LABEL: group.name}, node_selector=selector) for _ in range(size)
            ]:
                self.scheduler.observe(ClusterEvent(ADDED, pod), self.now)
        elif what == "end":
            live = [p for p in self.pods.values() if p.node_name and not p.phase.terminal]
            if live:
                pod = rng.choice(live)
                pod.phase = PodPhase.SUCCEEDED
                self.scheduler.observe(ClusterEvent(MODIFIED, pod), self.now)
        elif what == "node-" and self.nodes:
            node = self.nodes.pop(rng.choice(sorted(self.nodes)))
            self.gone[node.name] = node
            self.scheduler.observe(ClusterEvent(DELETED, node), self.now)
            for pod in [p for p in self.pods.values() if p.node_name == node.name]:
                del self.pods[pod.key]
                self.scheduler.observe(ClusterEvent(DELETED, pod), self.now)
        elif what == "node+" and self.gone:
            old = self.gone.pop(rng.choice(sorted(self.gone)))
            cores = rng.choice([4, 8, 16])
            room = self.room(cores, rng.randint(0, 1))
            self.put(Node(old.name, allocatable=room, labels={"pool": rng.choice("ab")}), ADDED)
        elif what in ("cordon", "ready", "label") and self.nodes:
            node = self.nodes[rng.choice(sorted(self.nodes))]
            if what == "cordon":
                node.unschedulable = not node.unschedulable
            elif what == "ready":
                node.ready = not node.ready
            else:
                node.labels = {"pool": "b" if node.labels.get("pool") == "a" else "a"}
            self.put(node, MODIFIED)
        elif what == "restart":
            self.restart()
        self.schedule()

    def restart(self) -> None:
        fresh = KubefluxScheduler(policy=self.policy, shape=self.shape)
        for node in self.nodes.values():
            fresh.observe(ClusterEvent(ADDED, node), self.now)
        for group in self.groups:
            fresh.observe(ClusterEvent(ADDED, group), self.now)
        for pod in self.pods.values():
            if not pod.phase.terminal:
                fresh.observe(ClusterEvent(ADDED, pod), self.now)
        self.scheduler = fresh

    def schedule(self) -> None:
        for decision in self.scheduler.schedule(self.now):
            if isinstance(decision, Bind):
                pod = self.pods[decision.pod]
                pod.node_name, pod.phase = decision.node, PodPhase.RUNNING
                pod.annotations = {**pod.annotations, **decision.annotations}
                self.binds.append(
                    (self.now, pod.key, decision.node, decision.annotations.get(ALLOCATION_ANNOTATION, ""))
                )
                self.scheduler.observe(ClusterEvent(MODIFIED, pod), self.now)
        self.check()

    def check(self) -> None:
        """No node over-committed by kubeflux's running pods, and no core held by two of them."""
        held: dict[str, set[str]] = {}
        for pod in self.pods.values():
            if not pod.node_name or pod.phase.terminal:
                continue
            cores = held.setdefault(pod.node_name, set())
            record = json.loads(pod.annotations[ALLOCATION_ANNOTATION])
            for leaf in [*record["cores"], *record["gpus"]]:
                assert leaf not in cores, (self.now, pod.key, pod.node_name, leaf)
                cores.add(leaf)
        for name, node in self.nodes.items():
            used = sum(p.requests[CPU] for p in self.pods.values() if p.node_name == name and not p.phase.terminal)
            assert used <= node.allocatable[CPU], (self.now, name)
            gpus = sum(
                p.requests.get(GPU, 0) for p in self.pods.values() if p.node_name == name and not p.phase.terminal
            )
            assert gpus <= node.allocatable.get(GPU, 0), (self.now, name)


def _run(
    policy: str, seed: int, *, shortcuts: bool, steps: int = 160, sockets: int = 0, gpus: int = 0
) -> list[tuple[float, str, str, str]]:
    with ExitStack() as stack:
        if not shortcuts:
            stack.enter_context(mock.patch.object(wide, "early_count", return_value=(0, None)))
            stack.enter_context(mock.patch.object(hiding.ExcludedNames, "allowed", new=None))
            stack.enter_context(mock.patch.object(evaluation, "CACHE_PER_VERTEX", 0))
            stack.enter_context(mock.patch.object(traverser, "CACHE_PER_VERTEX", 0))
        world = World(policy, seed, sockets=sockets, gpus=gpus)
        world.schedule()
        for _ in range(steps):
            world.step()
        return world.binds


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_churning_wide_cluster_is_scheduled_as_the_plain_walk_schedules_it(policy: str, seed: int) -> None:
    fast = _run(policy, seed, shortcuts=True)
    assert len(fast) > 40
    assert fast == _run(policy, seed, shortcuts=False)


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize("policy", ["lonode", "hinode", "low", "high", "first"])
@pytest.mark.parametrize(("sockets", "gpus"), [(2, 0), (0, 2), (2, 4)])
def test_a_churning_wide_cluster_of_sockets_and_gpus_is_scheduled_as_the_plain_walk_schedules_it(
    policy: str, sockets: int, gpus: int
) -> None:
    fast = _run(policy, 3, shortcuts=True, sockets=sockets, gpus=gpus)
    assert len(fast) > 40
    assert fast == _run(policy, 3, shortcuts=False, sockets=sockets, gpus=gpus)


@pytest.mark.parametrize("policy", ["lonode", "first", "lonodex"])
@pytest.mark.parametrize("width", [4, 72])
def test_cordoning_gpu_servers_named_gpu0_and_gpu1_leaves_the_other_servers_gpus_usable(
    policy: str, width: int
) -> None:
    """A lab names its GPU servers ``gpu0``, ``gpu1`` …, as the graph names each node's gpus: hiding node ``gpu0``
    from a pod hides that node, not the gpu named ``gpu0`` on every other node."""
    scheduler = KubefluxScheduler(policy=policy)
    for i in range(width):
        node = Node(f"gpu{i}", allocatable={CPU: 4000, MEMORY: 2**34, GPU: 2}, unschedulable=i < 2)
        scheduler.observe(ClusterEvent(ADDED, node), 0.0)
    pod = Pod("default", "train", "u1", "kubeflux", 0, 0.0, {CPU: 4000, GPU: 2})
    scheduler.observe(ClusterEvent(ADDED, pod), 0.0)
    (bind,) = scheduler.schedule(0.0)
    assert isinstance(bind, Bind)
    assert bind.node not in ("gpu0", "gpu1")
    record = json.loads(bind.annotations[ALLOCATION_ANNOTATION])
    assert sorted(record["gpus"]) == ["gpu0", "gpu1"]
    assert len(record["cores"]) == 4
