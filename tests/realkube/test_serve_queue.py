"""``kubeflux queue`` against a real ``kubeflux serve`` process on the real control plane (over HTTP, its
operations port), and serve's rough edges of issue 30 as a user meets them: the PodGroup APIs the cluster does not
serve named with how to get them, "caches synced" said once, a second instance on a taken operations port, and
``/readyz`` while the API server cannot be reached (with rate-limited retry logs).

One control plane for the module (no PodGroup CRD, Kubernetes' own gang API off); each test in a namespace of its
own. Waits are for conditions (never for a duration), up to a ceiling only a hang reaches.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.controlplane import ControlPlane
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.replica import Replica
from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, EXPECTED_START_TIME_ANNOTATION, rfc3339
from tests.realkube._serving import Partition, ServeProcess, kwok_nodes, manifest, namespace
from tests.shared import REPO

from .conftest import CEILING, Api, eventually

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "220"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeflux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", *args], capture_output=True, text=True, timeout=CEILING, env=ENV
    )


@pytest.fixture(scope="module")
def served(plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, int, str]]:
    """A ``kubeflux serve -v`` process scheduling namespace ``queue`` on one 4-core KWOK node; its operations port."""
    api = Api(plane.kubeconfig)
    port = _free_port()
    config = tmp_path_factory.mktemp("serve") / "serve.yaml"
    settings = {"clock": "wall", "namespaces": ["queue"], "watch": {"timeoutSeconds": 30}, "operations": {"port": port}}
    config.write_text(yaml.safe_dump(settings))
    try:
        with namespace(api, "queue") as ns, kwok_nodes(plane, api, "queue", 1, "4"):
            process = ServeProcess(plane.kubeconfig, config)
            try:
                eventually(lambda: process.said("caches synced"), lambda: "\n".join(process.lines))
                yield process, port, ns
            finally:
                process.end(signal.SIGTERM)
    finally:
        api.close()


def test_kubeflux_queue_shows_serves_queue_in_order_with_the_start_written_on_the_pods(
    plane: ControlPlane, served: tuple[ServeProcess, int, str]
) -> None:
    process, port, ns = served
    server = f"http://127.0.0.1:{port}"
    api = Api(plane.kubeconfig)
    try:
        api.create_pod(ns, manifest("long", "4", walltime="3600s"))
        eventually(lambda: api.pods(ns)["long"]["spec"].get("nodeName"), lambda: "long bound")
        api.create_pod(ns, manifest("next", "2", walltime="60s"))
        api.create_pod(ns, manifest("after", "4", walltime="60s"))

        def listed() -> list[dict[str, Any]] | None:
            result = kubeflux("queue", "--server", server, "-o", "json")
            assert result.returncode == 0, result.stderr
            document = json.loads(result.stdout)
            assert document["source"] == "serve"
            (scheduler,) = document["schedulers"]
            jobs: list[dict[str, Any]] = scheduler["jobs"]
            order = [j["job"] for j in jobs]
            return jobs if order == [f"{ns}/next", f"{ns}/after"] and jobs[0]["state"] == "reserved" else None

        first, second = eventually(listed, lambda: "\n".join(process.lines[-20:]))
        assert "Insufficient cpu" in first["reason"] and first["reserved"] == {"cpu": "2"}
        start = first["expectedStart"]
        assert first["expectedStartTime"] == rfc3339(start) and second["expectedStart"] is None

        def annotated() -> dict[str, str] | None:
            notes: dict[str, str] = api.pods(ns)["next"]["metadata"].get("annotations") or {}
            return notes if EXPECTED_START_ANNOTATION in notes else None

        notes = eventually(annotated, lambda: "the expected start on the pod")
        assert float(notes[EXPECTED_START_ANNOTATION]) == start  # seconds, for programs
        assert notes[EXPECTED_START_TIME_ANNOTATION] == rfc3339(start)  # and its readable twin

        table = kubeflux("queue", "--server", server)
        assert table.returncode == 0, table.stderr
        assert "kubeflux: 2 jobs waiting" in table.stdout and f"{ns}/next" in table.stdout
        assert rfc3339(start).replace("T", " ") in table.stdout

        watched = kubeflux("queue", "--server", server, "-o", "json", "--watch", "-i", "0.2", "--iterations", "2")
        assert watched.returncode == 0 and len(watched.stdout.splitlines()) == 2

        # once bound, both annotations go (in one patch)
        for name in ("long",):
            api.core.delete_namespaced_pod(name, ns, grace_period_seconds=0, _preload_content=False)
        eventually(lambda: api.pods(ns)["next"]["spec"].get("nodeName"), lambda: "next bound")
        eventually(
            lambda: (
                not {EXPECTED_START_ANNOTATION, EXPECTED_START_TIME_ANNOTATION}
                & set(api.pods(ns)["next"]["metadata"].get("annotations") or {})
            )
        )
    finally:
        api.close()


def test_a_gated_pod_waits_listed_and_counted_as_gated_then_starts_once_its_gate_is_removed(
    plane: ControlPlane, served: tuple[ServeProcess, int, str]
) -> None:
    """How Kueue holds a pod back: serve never binds a pod with ``spec.schedulingGates`` (room or not), shows it as
    ``gated`` in ``kubeflux queue`` and ``kubeflux_gated_pods``, keeps the real server's ``SchedulingGated``
    condition on it, and binds it once the gate is removed."""
    process, port, ns = served
    api = Api(plane.kubeconfig)

    def gated_metric() -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("kubeflux_gated_pods{"):
                    return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no kubeflux_gated_pods in /metrics")

    try:
        api.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)  # what the tests before left
        eventually(lambda: not api.pods(ns), lambda: "the namespace emptied")
        held = manifest("held", "1")
        held["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
        api.create_pod(ns, held)
        api.create_pod(ns, manifest("open", "1"))
        eventually(lambda: api.pods(ns)["open"]["spec"].get("nodeName"), lambda: "\n".join(process.lines[-20:]))

        def listed() -> list[dict[str, Any]] | None:
            result = kubeflux("queue", "--server", f"http://127.0.0.1:{port}", "-o", "json")
            assert result.returncode == 0, result.stderr
            jobs: list[dict[str, Any]] = json.loads(result.stdout)["schedulers"][0]["jobs"]
            return jobs if [(j["job"], j["state"]) for j in jobs] == [(f"{ns}/held", "gated")] else None

        [row] = eventually(listed, lambda: "\n".join(process.lines[-20:]))
        assert "example.com/quota" in row["reason"] and gated_metric() == 1.0
        pod = api.pods(ns)["held"]
        assert not pod["spec"].get("nodeName")
        [scheduled] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert (scheduled["status"], scheduled["reason"]) == ("False", "SchedulingGated")

        api.core.patch_namespaced_pod("held", ns, [{"op": "remove", "path": "/spec/schedulingGates"}])
        eventually(lambda: api.pods(ns)["held"]["spec"].get("nodeName"), lambda: "\n".join(process.lines[-20:]))
        eventually(lambda: gated_metric() == 0.0, lambda: "kubeflux_gated_pods back to 0")
    finally:
        api.close()


def test_serve_says_which_podgroup_api_is_missing_and_how_to_enable_it_and_synced_once(
    served: tuple[ServeProcess, int, str],
) -> None:
    process, _, _ = served
    native = [line for line in process.lines if "PodGroup (scheduling.k8s.io/v1alpha2): not served" in line]
    assert native and "Kubernetes' own gang scheduling API" in native[0]
    assert "--runtime-config=scheduling.k8s.io/v1alpha2=true --feature-gates=GenericWorkload=true" in native[0]
    coscheduling = [line for line in process.lines if "PodGroup (scheduling.x-k8s.io/v1alpha1): not served" in line]
    assert coscheduling and "scheduler-plugins" in coscheduling[0]
    assert sum("caches synced" in line for line in process.lines) == 1


def test_a_second_serve_on_the_same_operations_port_names_it_and_the_flag(
    plane: ControlPlane, served: tuple[ServeProcess, int, str]
) -> None:
    _, port, _ = served
    result = kubeflux("serve", "--kubeconfig", str(plane.kubeconfig), "--operations-port", str(port))
    assert result.returncode == 2
    assert f"the operations port 127.0.0.1:{port}" in result.stderr and "is in use" in result.stderr
    assert "--operations-port PORT" in result.stderr and "Errno" not in result.stderr


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readyz_is_false_while_the_api_server_is_unreachable_and_retries_are_logged_sparingly(
    plane: ControlPlane, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = Api(plane.kubeconfig)
    partition = Partition(plane.ports["kube-apiserver"])
    config = parse_config(
        {
            "clock": "wall",
            "namespaces": ["unreachable"],
            "watch": {"timeoutSeconds": 30, "retrySeconds": 0.05},
            "operations": {"port": 0, "unreachableSeconds": 1},
        }
    )
    replica = Replica(config, api_client(partition.kubeconfig(plane, tmp_path / "kubeconfig"), None, False, 16))
    assert replica.operations is not None
    port = replica.operations.port
    caplog.set_level(logging.WARNING, logger="kubeflux.serve")
    try:
        replica.start()
        eventually(lambda: _readyz(port) == (200, "ok"), lambda: str(_readyz(port)))
        partition.cut()
        _, why = eventually(lambda: (found := _readyz(port))[0] == 503 and found, lambda: str(_readyz(port)))
        assert "the API server has been unreachable for" in why and "operations.unreachableSeconds" in why
        reflectors = len(replica.serve.reflectors)
        eventually(lambda: sum(r.failures.count for r in replica.serve.reflectors) >= 5 * reflectors)
        tried = sum(r.failures.count for r in replica.serve.reflectors)
        partition.heal()
        eventually(lambda: _readyz(port) == (200, "ok"), lambda: str(_readyz(port)))
    finally:
        replica.stop()
        replica.api.close()
        partition.close()
        api.close()
    # each reflector said its failures once, then at most once every LOG_EVERY seconds, however many retries
    said = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(said) <= reflectors * 3 < tried, said
    assert any("the API server answers again" in r.getMessage() for r in caplog.records)
