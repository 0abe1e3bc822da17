"""``serve`` on nodes with sockets and AMD GPUs, through the simulated API server over HTTP.

The cluster's admins label each node with its socket count under a key of their choosing (``example.com/sockets``)
and its device plugin advertises ``amd.com/gpu``; serve's ``nodes`` section names both. Each pod's cores and gpus
come from one socket, as the allocation annotation on the pod says; a restarted serve recovers them from it; a node
whose label is not a number is reported by name and used as one socket.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeflux.kube.config import parse_config
from kubeflux.scheduler.objects import CPU, MEMORY, PODS, Node

from .conftest import Cluster, condition, eventually, phase, pod, start_cluster

LABEL = "example.com/sockets"
AMD = "amd.com/gpu"
CONFIG = {"watch": {"timeoutSeconds": 30}, "nodes": {"socketsLabel": LABEL, "socketsDefault": 1, "gpuResources": [AMD]}}


def _node(name: str, sockets: str) -> Node:
    allocatable = {CPU: 16_000, MEMORY: 64 * 2**30, PODS: 110, AMD: 4}
    return Node(
        name, uid=f"uid-{name}", allocatable=allocatable, labels={"kubernetes.io/hostname": name, LABEL: sockets}
    )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two 16-core nodes with 4 AMD GPUs: ``two-sockets`` labelled 2, ``bad-label`` labelled ``two``."""
    started = start_cluster(tmp_path, node_list=[_node("two-sockets", "2"), _node("bad-label", "two")])
    try:
        yield started
    finally:
        started.api.close()
        started.server.stop()


def _gpu_pod(name: str, cpu: str = "8", gpus: str = "2") -> dict[str, Any]:
    return pod(name, cpu, run=None, extra={AMD: gpus})


def _allocation(p: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    record = json.loads(p["metadata"]["annotations"]["kubeflux.io/allocation"])
    return p["spec"]["nodeName"], record["cores"], record["gpus"]


def _socket_of(core: str) -> int:
    return int(core.removeprefix("core")) // 8


def test_pods_take_one_socket_each_with_its_gpus_and_a_bad_label_is_reported(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubeflux.serve")
    names = [f"train-{i}" for i in range(5)]  # room for four: one socket's worth each
    for name in names:
        cluster.create(_gpu_pod(name))
    with cluster.serve(parse_config(CONFIG)) as serve:
        cluster.wait_for(lambda pods: sum(phase(pods[n]) == "Running" for n in names) == 4)
        cluster.wait_for(lambda pods: any((condition(p) or {}).get("reason") == "Unschedulable" for p in pods.values()))
        eventually(lambda: serve.bound == 4)
    pods = cluster.pods()
    placed = [_allocation(p) for p in pods.values() if phase(p) == "Running"]
    assert sorted(node for node, _, _ in placed) == ["bad-label", "bad-label", "two-sockets", "two-sockets"]
    on_two = sorted((cores, gpus) for node, cores, gpus in placed if node == "two-sockets")
    assert on_two == [
        ([f"core{i}" for i in range(8)], ["gpu0", "gpu1"]),
        ([f"core{i}" for i in range(8, 16)], ["gpu2", "gpu3"]),
    ]
    for node, cores, gpus in placed:
        assert len(cores) == 8 and len(gpus) == 2
        if node == "two-sockets":
            assert len({_socket_of(core) for core in cores}) == 1
    warnings = [r.getMessage() for r in caplog.records if "bad-label" in r.getMessage()]
    assert warnings == [
        f"Node bad-label: metadata.labels[{LABEL}]: must be a whole number of sockets from 1 to 1024, "
        "got 'two'; taken as 1 socket(s)"
    ]


def test_a_restarted_serve_recovers_the_socketed_allocations_and_fills_a_freed_socket(cluster: Cluster) -> None:
    first = ["a", "b", "c"]
    for name in first:
        cluster.create(_gpu_pod(name))
    with cluster.serve(parse_config(CONFIG)) as serve:
        cluster.wait_for(lambda pods: all(phase(pods[n]) == "Running" for n in first))
        eventually(lambda: serve.bound == 3)
    before = {n: _allocation(p) for n, p in cluster.pods().items()}
    # the cluster has one socket's worth left (8 cores, 2 gpus): of two such pods, one is bound, one waits
    cluster.create(_gpu_pod("d"))
    cluster.create(_gpu_pod("e"))
    with cluster.serve(parse_config(CONFIG)) as restarted:
        cluster.wait_for(lambda pods: any(phase(pods[n]) == "Running" for n in ("d", "e")))
        cluster.wait_for(lambda pods: any((condition(pods[n]) or {}).get("reason") == "Unschedulable" for n in "de"))
        eventually(lambda: restarted.bound == 1)
        pods = cluster.pods()
        bound, waiting = ("d", "e") if phase(pods["d"]) == "Running" else ("e", "d")
        taken = {(node, leaf) for node, cores, gpus in before.values() for leaf in (*cores, *gpus)}
        node, cores, gpus = _allocation(pods[bound])
        assert not taken & {(node, leaf) for leaf in (*cores, *gpus)}  # recovered: nothing double-booked
        # a pod on the two-socket node ends: the waiting pod takes its socket, cores and gpus
        victim = next(n for n, (where, _, _) in before.items() if where == "two-sockets")
        cluster.core.delete_namespaced_pod(victim, "default")
        cluster.wait_for(lambda pods: phase(pods[waiting]) == "Running")
        assert _allocation(cluster.pods()[waiting]) == before[victim]
        eventually(lambda: restarted.bound == 2)
