"""The real kube-scheduler, kube-controller-manager and KWOK on ``cluster serve``, at their default content type
(protobuf bodies, protobuf preferred in answers; the garbage collector's metadata informers): a Job made by
kubectl gets its pods from the real Job controller, the real scheduler binds them and records events, KWOK runs and
completes them and keeps the node Leases, and the Job completes; the garbage collector, whose informers are
metadata-only (``as=PartialObjectMetadata``), deletes an object whose owner does not exist.

The binaries are the ones ``tools/kube/build.py`` built (``$KUBEFLUX_KUBE_DIR`` or ``build/kube``); without them,
or without the protobuf build, the test skips saying so. Every process it starts is stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.sim.apiserver.protobuf import ProtobufUnavailable, codec
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.shared import unavailable

BUILT = Path(os.environ.get("KUBEFLUX_KUBE_DIR") or Path(__file__).resolve().parents[3] / "build" / "kube")
COMPONENTS = ("kube-scheduler", "kube-controller-manager", "kwok", "kubectl")
CEILING = 120.0
"""Seconds after which a wait is a hang; a working run takes a fraction of it."""


def _missing() -> str:
    absent = [name for name in COMPONENTS if not os.access(BUILT / "bin" / name, os.X_OK)]
    if absent:
        return f"no {', '.join(absent)} in {BUILT / 'bin'} (make builds them: tools/kube/build.py)"
    try:
        codec()
    except ProtobufUnavailable as exc:
        return str(exc)
    return ""


@pytest.fixture(autouse=True)
def _built() -> None:
    missing = _missing()
    if missing:
        unavailable(missing)


class Components:
    """The processes started against one server; :meth:`stop` ends every one."""

    def __init__(self, kubeconfig: Path, logs: Path) -> None:
        self.kubeconfig = kubeconfig
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> None:
        log = (self.logs / f"{name}.log").open("wb")
        command = [str(BUILT / "bin" / name), f"--kubeconfig={self.kubeconfig}", *args]
        self.processes[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def kubectl(self, *args: str) -> Any:
        command = [str(BUILT / "bin" / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return orjson.loads(result.stdout) if "json" in args else result.stdout

    def alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"{name} exited with {process.returncode}:\n{tail}")

    def wait_for(self, what: Callable[[], bool], doing: str) -> None:
        deadline = time.monotonic() + CEILING
        while not what():
            self.alive()
            assert time.monotonic() < deadline, f"never {doing}"
            time.sleep(0.2)


@pytest.fixture
def components(tmp_path: Path) -> Iterator[Components]:
    server = ApiServer(uniform_cluster(2, 4, "16Gi"), kubelet=False, controllers=False).start()
    started = Components(server.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    try:
        stages = [f"--config={stage}" for stage in sorted((BUILT / "stages").glob("*.yaml"))]
        started.start(
            "kwok",
            "--manage-all-nodes=true",
            "--node-lease-duration-seconds=40",
            "--server-address=127.0.0.1:0",
            *stages,
        )
        started.start("kube-scheduler", "--leader-elect=false", "--secure-port=0")
        started.start("kube-controller-manager", "--leader-elect=false", "--secure-port=0")
        yield started
    finally:
        started.stop()
        server.stop()


def test_a_job_runs_to_completion_and_is_collected(components: Components) -> None:
    components.kubectl("create", "job", "pi", "--image=busybox:1.36", "--", "true")  # protobuf, too

    def job() -> Any:
        return components.kubectl("get", "job", "pi", "-o", "json")

    def pods() -> list[Any]:
        return list(components.kubectl("get", "pods", "-o", "json")["items"])

    components.wait_for(
        lambda: any(c["type"] == "Complete" for c in job().get("status", {}).get("conditions") or []),
        "completed the Job",
    )
    [done] = pods()
    assert done["metadata"]["generateName"] == "pi-"  # made by the real Job controller
    assert done["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert done["spec"]["nodeName"] in ("node-0000", "node-0001")  # bound by the real scheduler
    assert done["status"]["phase"] == "Succeeded"  # run and completed by KWOK
    events = components.kubectl("get", "events.events.k8s.io", "-o", "json")["items"]
    assert any(e["reason"] == "Scheduled" and e["reportingController"] == "default-scheduler" for e in events)
    leases = components.kubectl("get", "leases", "-n", "kube-node-lease", "-o", "json")["items"]
    assert sorted(lease["metadata"]["name"] for lease in leases) == ["node-0000", "node-0001"]
    assert all(lease["spec"]["renewTime"].endswith("Z") for lease in leases)


def test_the_garbage_collector_deletes_an_orphan(components: Components, tmp_path: Path) -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "6d1c1d2e-0000-4000-8000-00000000dead"}
    orphan = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan", "ownerReferences": [owner]}}
    manifest = tmp_path / "orphan.json"
    manifest.write_bytes(orjson.dumps(orphan))
    components.kubectl("create", "-f", str(manifest))

    def present() -> bool:
        names = [c["metadata"]["name"] for c in components.kubectl("get", "configmaps", "-o", "json")["items"]]
        return "orphan" in names

    components.wait_for(lambda: not present(), "collected the orphan")
    log = (tmp_path / "kube-controller-manager.log").read_text(errors="replace")
    assert "all resource monitors have synced" in log


def test_with_no_controllers_job_the_real_job_controller_runs_jobs_the_served_kubelet_completes(tmp_path: Path) -> None:
    """``cluster serve --no-controllers job`` with the real kube-controller-manager at its default flags: the
    Job's pods are the real Job controller's (none of the served cluster's), the served cluster's simulated kubelet
    runs and completes them, and the real controller counts them and completes the Job."""
    server = ApiServer(
        uniform_cluster(2, 4, "16Gi"), kubelet=True, controllers=True, disabled_controllers=["job"]
    ).start()
    started = Components(server.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    try:
        assert server.job_controller is None
        started.start("kube-scheduler", "--leader-elect=false", "--secure-port=0")
        started.start("kube-controller-manager", "--leader-elect=false", "--secure-port=0")
        started.kubectl("create", "job", "pi", "--image=busybox:1.36", "--", "true")
        started.kubectl("patch", "job", "pi", "--type=merge", "-p", '{"spec":{"parallelism":2}}')

        def status() -> Any:
            return started.kubectl("get", "job", "pi", "-o", "json").get("status", {})

        started.wait_for(lambda: any(c["type"] == "Complete" for c in status().get("conditions") or []), "completed")
        assert status()["succeeded"] == 1  # parallelism 2 of completions 1: one pod
        pods = started.kubectl("get", "pods", "-o", "json")["items"]
        assert [p["metadata"]["generateName"] for p in pods] == ["pi-"]
        assert all(p["status"]["phase"] == "Succeeded" and not p["metadata"].get("finalizers") for p in pods), pods
        events = started.kubectl("get", "events", "-o", "json")["items"]
        created = [e for e in events if e["reason"] == "SuccessfulCreate"]
        assert created and all("job-controller" in json.dumps(e) for e in created), created
    finally:
        started.stop()
        server.stop()
