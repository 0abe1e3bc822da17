"""The harness itself (:class:`kubeflux.controlplane.ControlPlane`): the real components start on loopback, work
together as a cluster (KWOK's nodes Ready, a Job's pods scheduled by the real kube-scheduler and completed), report
the versions pinned in tools/kube, and leave no process behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kubeflux.controlplane import Binaries, ControlPlane, ControlPlaneError

from .conftest import Api, eventually, phase, ready


def test_the_built_binaries_report_the_pinned_versions(binaries: Binaries) -> None:
    assert binaries.versions["kubernetes"].startswith("v1.36.")
    assert binaries.versions["kwok"] == "v0.8.0"
    version = json.loads(os.popen(f"{binaries.path('kubectl')} version --client -o json").read())
    assert version["clientVersion"]["gitVersion"] == binaries.versions["kubernetes"]


def test_a_job_runs_on_kwok_nodes_scheduled_by_the_real_kube_scheduler(binaries: Binaries, tmp_path: Path) -> None:
    with ControlPlane(tmp_path, binaries).start() as plane:
        plane.start_controller_manager()
        plane.start_scheduler()
        plane.start_kwok()
        assert plane.add_kwok_nodes(2, cpu="4") == ["kwok-node-0", "kwok-node-1"]
        api = Api(plane.kubeconfig)
        try:
            eventually(lambda: all(ready(n) for n in api.nodes().values()) and len(api.nodes()) == 2)
            plane.kubectl("create", "job", "pi", "--image=perl:5.34", "--", "perl", "-e", "1")
            eventually(lambda: plane.kubectl("get", "job", "pi", "-o", "jsonpath={.status.succeeded}") == "1")
            pods = api.pods("default")
            assert len(pods) == 1 and phase(next(iter(pods.values()))) == "Succeeded"
            assert next(iter(pods.values()))["spec"]["nodeName"].startswith("kwok-node-")
        finally:
            api.close()
        processes = [component.process for component in plane.components.values()]
        assert all(p is not None and p.poll() is None for p in processes)
    assert all(p is not None and p.poll() is not None for p in processes)  # all stopped and reaped


def test_rbac_is_on_and_a_user_without_a_role_is_refused(plane: ControlPlane) -> None:
    stranger = plane.kubeconfig_for("stranger")
    denied = plane.kubectl("--kubeconfig", str(stranger), "get", "pods", check=False)
    assert denied == ""
    assert plane.kubectl("auth", "can-i", "list", "pods", "--as", "stranger", check=False).strip() == "no"


def test_a_component_that_cannot_start_fails_with_its_log(binaries: Binaries, tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path, binaries, apiserver_args=["--no-such-flag"])
    with pytest.raises(
        ControlPlaneError, match=r"(?s)kube-apiserver: exited before it was ready.*unknown flag: --no-such-flag"
    ):
        plane.start()
    assert all(not c.running for c in plane.components.values())


def test_the_api_server_comes_back_on_an_empty_etcd(binaries: Binaries, tmp_path: Path) -> None:
    with ControlPlane(tmp_path, binaries).start() as plane:
        plane.kubectl("create", "namespace", "before")
        plane.restart_apiserver(empty_etcd=True)
        assert "before" not in plane.kubectl("get", "namespaces")
        plane.kill("kube-apiserver")
        assert not plane.components["kube-apiserver"].running


def test_kubeflux_kube_up_runs_a_cluster_with_kwok_nodes_until_ctrl_c(binaries: Binaries, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "kubeflux.cli", "kube", "up", "--folder", str(tmp_path), "--kwok-nodes", "3"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("export KUBECONFIG="):
                break
        kubeconfig = lines[-1].strip().partition("=")[2]
        assert lines[0].startswith(f"Kubernetes {binaries.versions['kubernetes']}"), lines
        api = Api(Path(kubeconfig))
        try:
            eventually(lambda: len(api.nodes()) == 3 and all(ready(n) for n in api.nodes().values()))
        finally:
            api.close()
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
    finally:
        process.kill()
        process.wait()
    for name in ("kube-apiserver", "etcd", "kwok"):  # nothing left running from that folder
        assert str(tmp_path) not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout, name


def test_kubeflux_kube_up_without_a_build_says_how_to_make_one(tmp_path: Path) -> None:
    environment = {**os.environ, "KUBEFLUX_KUBE_DIR": str(tmp_path / "nothing")}
    result = subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", "kube", "up"], capture_output=True, text=True, env=environment
    )
    assert result.returncode == 2
    assert "no real control plane built in" in result.stderr and "run `make`" in result.stderr


def test_a_port_taken_before_the_api_server_binds_it_is_replaced_by_another(binaries: Binaries, tmp_path: Path) -> None:
    """Another test's server may draw the same free port first: the start tries again on a new one."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with ControlPlane(tmp_path, binaries, ports={"kube-apiserver": port}).start() as plane:
            assert plane.ports["kube-apiserver"] != port
            assert "default" in plane.kubectl("get", "namespaces")
