"""The HPC baselines' first-fit index answers exactly what a scan over the nodes answers."""

from __future__ import annotations

import random

import pytest

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node, Pod, Taint, Toleration
from kubeflux.sim.baselines.capacity import NodeCapacity


def scan(cap: NodeCapacity, cpu: int, mem: int, gpu: int, start: int) -> int:
    return next(
        (
            i
            for i in range(start, len(cap.nodes))
            if cap.open[i]
            and cap.pods_free[i] > 0
            and cap.free.cpu[i] >= cpu
            and cap.free.mem[i] >= mem
            and cap.free.gpu[i] >= gpu
        ),
        -1,
    )


@pytest.mark.parametrize("seed", range(6))
def test_first_fit_from_any_start_is_the_first_node_with_room(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        nodes = rng.randint(1, 40)
        cap = NodeCapacity()
        for i in range(nodes):
            alloc = {CPU: rng.choice([1000, 2000, 4000]), MEMORY: rng.choice([2**30, 2**31]), GPU: rng.choice([0, 2])}
            if rng.random() < 0.3:
                alloc[PODS] = rng.choice([1, 2, 3])  # a pod limit: the node closes once it holds that many
            cap.set_node(Node(f"n{i}", allocatable=alloc, unschedulable=rng.random() < 0.1))
        for k in range(rng.randint(0, 3 * nodes)):
            i = rng.randrange(nodes)
            request = {CPU: rng.choice([0, 1000, 2000])}
            if rng.random() < 0.3:
                request[MEMORY] = 2**29
            pod = Pod("default", f"p{k}", requests=request)
            if cap.free.cpu[i] >= request[CPU] and cap.free.mem[i] >= request.get(MEMORY, 0) and cap.pods_free[i] > 0:
                cap.take(i, pod)
                if rng.random() < 0.2:
                    cap.give(i, pod)  # the pod ended
        for _ in range(30):
            cpu = rng.choice([0, 500, 1000, 2000, 3000, 4000, 5000])
            mem = rng.choice([0, 0, 2**29, 2**31])
            gpu = rng.choice([0, 0, 1])
            start = rng.randint(0, nodes + 2)
            assert cap.first_fit(cpu, mem, gpu, start) == scan(cap, cpu, mem, gpu, start)


@pytest.mark.parametrize("seed", range(4))
def test_a_constrained_pod_finds_through_its_view_what_the_scan_finds(seed: int) -> None:
    # Nodes tainted, cordoned, NotReady, labelled and with pod limits at random, changed and removed as the run
    # goes; pods with tolerations or selectors: the view's first fit equals the linear scan's.
    rng = random.Random(seed)
    cap = NodeCapacity()
    taint = Taint("kwok.x-k8s.io/node", "fake")
    shapes = [
        {"tolerations": (Toleration(key="kwok.x-k8s.io/node", operator="Exists"),)},
        {"node_selector": {"zone": "a"}},
        {"tolerations": (Toleration(operator="Exists"),), "node_selector": {"zone": "b"}},
    ]

    def random_node(name: str) -> Node:
        alloc = {CPU: rng.choice([1000, 2000]), MEMORY: 2**31, GPU: rng.choice([0, 4])}
        if rng.random() < 0.3:
            alloc[PODS] = rng.choice([1, 2])
        return Node(
            name,
            allocatable=alloc,
            labels={"zone": rng.choice("ab")},
            taints=(taint,) if rng.random() < 0.6 else (),
            unschedulable=rng.random() < 0.1,
            ready=rng.random() > 0.1,
        )

    for i in range(30):
        cap.set_node(random_node(f"n{i}"))
    placed: list[tuple[int, Pod]] = []
    for step in range(300):
        fields = rng.choice(shapes)
        pod = Pod("default", f"p{step}", requests={CPU: rng.choice([500, 1000]), GPU: rng.choice([0, 0, 2])}, **fields)  # type: ignore[arg-type]
        start = rng.randint(0, 32)
        expected = cap.first_fit_scan(pod, start)
        assert cap.find(pod, True, start) == expected
        if expected >= 0 and rng.random() < 0.7:
            cap.take(expected, pod)
            placed.append((expected, pod))
        if placed and rng.random() < 0.3:
            node, gone = placed.pop(rng.randrange(len(placed)))
            cap.give(node, gone)
        if rng.random() < 0.05:
            cap.set_node(random_node(f"n{rng.randrange(30)}"))  # a node changes: taints, labels, readiness
        if rng.random() < 0.02:
            cap.remove_node(f"n{rng.randrange(30)}")
