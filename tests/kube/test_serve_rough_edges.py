"""serve's rough edges of issue 30, each as a user meets it (message text and exit code): a kubeconfig that does not
exist, an operations port already taken, the PodGroup APIs a cluster does not serve, and retry logs while the API
server cannot be reached. (On the real control plane: tests/realkube/test_serve_queue.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from kubeflux.kube.command import api_client
from kubeflux.kube.operations import OperationsServer, ServeMetrics
from kubeflux.kube.reflector import Failures, watched_resources
from tests.kube.conftest import CEILING, Cluster, eventually, start_cluster
from tests.shared import REPO


def _kubeflux(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", *args], capture_output=True, text=True, timeout=CEILING, env=environment
    )


def test_a_kubeconfig_flag_naming_no_file_says_no_such_file() -> None:
    result = _kubeflux("serve", "--kubeconfig", "nope/kubeconfig")
    assert (result.returncode, result.stderr) == (2, "error: --kubeconfig nope/kubeconfig: no such file\n")


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_kubeconfig_that_is_no_regular_file_is_refused_not_waited_on(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "kubeconfig"
    if kind == "fifo":
        os.mkfifo(path)  # the client would block reading it until something writes
        says = "is a named pipe (FIFO), not a regular file; save the kubeconfig to a file first"
    else:
        path.mkdir()
        says = "is a directory, not a kubeconfig file"
    result = _kubeflux("serve", "--kubeconfig", str(path))
    assert (result.returncode, result.stderr) == (2, f"error: --kubeconfig {path}: {says}\n")


def test_a_kubeconfig_env_naming_no_file_says_no_such_file(tmp_path: Path) -> None:
    result = _kubeflux("serve", env={"KUBECONFIG": str(tmp_path / "gone"), "HOME": str(tmp_path)})
    assert (result.returncode, result.stderr) == (2, f"error: $KUBECONFIG ({tmp_path / 'gone'}): no such file\n")


def test_no_kubeconfig_at_all_says_where_it_looked_and_what_to_give(tmp_path: Path) -> None:
    result = _kubeflux("serve", env={"HOME": str(tmp_path)})
    assert result.returncode == 2
    assert result.stderr.startswith("error: ~/.kube/config: no such file; give --kubeconfig FILE")


def test_a_taken_operations_port_is_named_with_the_flag_that_changes_it() -> None:
    first = OperationsServer("127.0.0.1", 0, ServeMetrics(), lambda: True, lambda: "").start()
    try:
        with pytest.raises(OSError) as raised:
            OperationsServer("127.0.0.1", first.port, ServeMetrics(), lambda: True, lambda: "")
        message = str(raised.value)
        assert message.startswith(f"the operations port 127.0.0.1:{first.port} (/metrics, /readyz, /kubeflux/queue)")
        assert "--operations-port PORT" in message and "Errno" not in message
    finally:
        first.stop()


def test_the_podgroup_apis_say_which_they_are_and_how_to_get_them(cluster: Cluster) -> None:
    api = api_client(cluster.kubeconfig, None, False, 2)
    try:
        podgroups = {r.describe(): r.absent for r in watched_resources(api) if r.kind == "PodGroup"}
    finally:
        api.close()
    native = podgroups["PodGroup (scheduling.k8s.io/v1alpha2)"]
    assert native.startswith("Kubernetes' own gang scheduling API (1.36, alpha) is not enabled")
    assert "--runtime-config=scheduling.k8s.io/v1alpha2=true --feature-gates=GenericWorkload=true" in native
    assert "scheduler-plugins" in podgroups["PodGroup (scheduling.x-k8s.io/v1alpha1)"]


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_are_said_once_then_at_most_every_30_seconds_then_the_recovery() -> None:
    clock = _Clock()
    failures = Failures("Pod", clock, every=30.0)
    said = []
    for _ in range(45):  # 45 failed attempts in 25 s (the report)
        said.append(failures.failed("cannot reach the API server (refused)", 1.0))
        clock.now += 25 / 45
    lines = [line for line in said if line is not None]
    assert lines == ["Pod: cannot reach the API server (refused); retrying in 1 s (said again at most every 30 s)"]
    assert failures.for_longer_than(20.0) == pytest.approx(25.0) and failures.for_longer_than(30.0) is None
    clock.now += 10
    assert failures.failed("cannot reach the API server (refused)", 2.0) == (
        "Pod: still failing after 46 attempts in 35 s: cannot reach the API server (refused); retrying in 2 s"
    )
    assert failures.succeeded() == "Pod: the API server answers again, after 46 failed attempts in 35 s"
    assert failures.since is None and failures.for_longer_than(0.0) is None and failures.succeeded() is None


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_dead_api_server_is_said_once_per_informer_and_readyz_turns_503(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    config = tmp_path / "serve.yaml"
    settings = {"watch": {"retrySeconds": 0.05}, "operations": {"port": 0, "unreachableSeconds": 1}}
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    command = [sys.executable, "-m", "kubeflux.cli", "serve", "--kubeconfig", str(cluster.kubeconfig)]
    process = subprocess.Popen(
        [*command, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        eventually(lambda: any("caches synced" in line for line in lines))
        port = int(next(line for line in lines if "/metrics" in line).rsplit(":", 1)[1])
        assert _readyz(port) == (200, "ok")
        cluster.api.close()
        cluster.server.stop()
        eventually(lambda: _readyz(port)[0] == 503)
        _, why = _readyz(port)
        assert why.startswith("the API server has been unreachable for ") and "cannot reach the API server" in why
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(CEILING)
        reader.join(10)
    said = [line for line in lines if "cannot reach the API server" in line]
    # one line per informer (nodes, two PodGroup APIs, PodDisruptionBudgets, namespaces, StorageClasses,
    # PersistentVolumes and claims, CSINodes, DRA's DeviceClasses, ResourceSlices and ResourceClaims, pods) in the
    # first 30 s, however many attempts; none of urllib3's own retry lines
    assert 1 <= len(said) <= 13 and not [line for line in lines if "Retrying (Retry(" in line], lines
    assert sum("caches synced" in line for line in lines) == 1
