"""``serve`` as deployed: the operations endpoints, two replicas under leader election, and the command itself
(started as a process, stopped with SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubeflux.apiobjects.quantity import canonical_value
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.replica import Replica

from .conftest import CEILING, Cluster, eventually, pod, start_cluster


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _replica(cluster: Cluster, identity: str = "", **settings: Any) -> Replica:
    config = parse_config({"watch": {"timeoutSeconds": 30}, "operations": {"port": 0}, **settings})
    return Replica(config, api_client(cluster.kubeconfig, None, False, 16), identity=identity or None)


def test_metrics_and_health_endpoints(cluster: Cluster) -> None:
    replica = _replica(cluster).start()
    try:
        assert replica.operations is not None
        port = replica.operations.port
        assert _get(port, "/livez") == (200, "ok")
        eventually(lambda: _get(port, "/readyz") == (200, "ok"))
        cluster.create(pod("a", "4", run=None))
        cluster.create(pod("huge", "64", run=None))
        cluster.wait_for(lambda pods: bool(pods["a"]["spec"].get("nodeName")))
        eventually(lambda: 'kubeflux_binds_total{scheduler="kubeflux"} 1.0' in _get(port, "/metrics")[1])
        status, text = _get(port, "/metrics")
        assert status == 200
        for line in (
            'kubeflux_graph_nodes{scheduler="kubeflux"} 1.0',
            'kubeflux_graph_allocations{scheduler="kubeflux"} 1.0',
            "kubeflux_leader 1.0",
            'kubeflux_relists_total{resource="Pod"} 0.0',
            'kubeflux_pod_scheduling_duration_seconds_count{scheduler="kubeflux"} 1.0',
            'kubeflux_schedule_attempts_total{result="scheduled",scheduler="kubeflux"} 1.0',
        ):
            assert line in text, line
        assert 'kubeflux_schedule_attempts_total{result="rejected",scheduler="kubeflux"}' in text
        assert _get(port, "/nothing")[0] == 404
    finally:
        replica.stop()


def _cores_by_node(pods: dict[str, dict[str, Any]]) -> Counter[str]:
    held: Counter[str] = Counter()
    for p in pods.values():
        node = p["spec"].get("nodeName")
        if node:
            cpu = p["spec"]["containers"][0]["resources"]["requests"]["cpu"]
            held[node] += canonical_value("cpu", cpu)
    return held


def test_two_replicas_one_schedules_and_the_other_takes_over_when_it_dies(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, nodes=4)
    election = {
        "enabled": True,
        "resourceNamespace": "default",
        "leaseDurationSeconds": 3,
        "renewDeadlineSeconds": 2,
        "retryPeriodSeconds": 0.3,
    }
    first = _replica(cluster, "first", leaderElection=election).start()
    second: Replica | None = None
    try:
        eventually(first.serve.synced.is_set)  # the first leads
        second = _replica(cluster, "second", leaderElection=election).start()
        assert second.operations is not None
        assert _get(second.operations.port, "/readyz") == (200, "ok")  # a standby is ready
        assert "kubeflux_leader 0.0" in _get(second.operations.port, "/metrics")[1]
        names = [f"p-{index:03d}" for index in range(300)]
        creating = threading.Thread(target=lambda: [cluster.create(pod(n, "100m", run=None)) for n in names])
        creating.start()
        eventually(lambda: first.serve.bound >= 50)
        first.stop(release=False)  # the leader dies mid-run: its lease is left to expire
        creating.join()
        cluster.wait_for(lambda pods: len(pods) == 300 and all(p["spec"].get("nodeName") for p in pods.values()))
        elector = second.elector
        assert elector is not None
        # it takes over once the lease expires (the first may have bound every pod already: its binder's process
        # sends the Bindings it decided when it stops)
        eventually(elector.leading.is_set)
        # each pod bound once, by one of them (counted once its binder thread has the reply)
        eventually(lambda: first.serve.bound + second.serve.bound == 300)
        # the new leader's books equal the cluster: every pod counted once, on its node, nothing leaked
        pods = cluster.pods()
        core = second.serve.cores[0]
        eventually(lambda: len(core.books.allocations) == 300)
        assert {a.node for a in core.books.allocations.values()} <= {f"node-000{i}" for i in range(4)}
        by_uid = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods.values()}
        assert {uid: alloc.node for uid, alloc in core.books.allocations.items()} == by_uid
        assert all(held <= 16_000 for held in _cores_by_node(pods).values())  # millicores
        scheduled = Counter(e["regarding"]["name"] for e in cluster.events() if e.get("reason") == "Scheduled")
        # one Scheduled event at most per pod (the dead leader's last ones may be lost with it: events are notes)
        assert set(scheduled) <= set(names) and set(scheduled.values()) <= {1}
    finally:
        first.stop(release=False)
        if second is not None:
            second.stop()
        cluster.api.close()
        cluster.server.stop()


def test_the_command_schedules_and_drains_on_sigterm(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("operations:\n  port: 0\n", encoding="utf-8")
    command = [sys.executable, "-m", "kubeflux.cli", "serve", "--kubeconfig", str(cluster.kubeconfig)]
    process = subprocess.Popen(
        [*command, "--config", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert process.stdout is not None
        while "caches synced" not in (line := process.stdout.readline()):
            assert line, "serve ended before it synced"
        cluster.create(pod("a", "8", run=None))
        cluster.wait_for(lambda pods: bool(pods["a"]["spec"].get("nodeName")))
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=CEILING)
        assert process.returncode == 0, output
        assert "stopped after 1 binds" in output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_a_bad_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing-kubeconfig"
    result = subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", "serve", "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        timeout=CEILING,
    )
    assert result.returncode == 2
    assert result.stderr == f"error: --kubeconfig {missing}: no such file\n"  # not "Invalid kube-config file"
