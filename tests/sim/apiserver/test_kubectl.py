"""Scenarios with ``kubectl`` against the simulated API server: apply, get, get -w, describe, events, delete, wait."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kubeflux.sim.apiserver.server import ApiServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}

    def run(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [str(KUBECTL), "--cache-dir", str(tmp_path / "cache"), *args]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, input=input)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


def test_apply_the_examples_then_get_them_back(kubectl: Kubectl) -> None:
    applied = kubectl("apply", "-f", str(EXAMPLES / "apiserver"))
    assert "pod/hello created" in applied.stdout
    assert "job.batch/pi created" in applied.stdout
    assert "podgroup.scheduling.x-k8s.io/gang created" in applied.stdout
    again = kubectl("apply", "-f", str(EXAMPLES / "apiserver"))
    assert "pod/hello unchanged" in again.stdout
    assert "job.batch/pi unchanged" in again.stdout
    workload = kubectl("apply", "-f", str(EXAMPLES / "workloads" / "mixed-jobs.yaml"))
    assert "podgroup.scheduling.x-k8s.io/lammps created" in workload.stdout
    names = kubectl("get", "pods", "-o", "name").stdout.split()
    assert "pod/hello" in names and "pod/lammps-0" in names
    assert kubectl("get", "podgroup", "gang", "-o", "jsonpath={.spec.minMember}").stdout == "3"
    assert kubectl("get", "nodes", "-o", "name").stdout.split() == [f"node/node-000{i}" for i in range(4)]
    table = kubectl("get", "pods").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert any(line.split()[:3] == ["hello", "0/1", "Pending"] for line in table[1:])


def test_apply_changes_are_patched_and_kept(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = (EXAMPLES / "apiserver" / "pod.yaml").read_text()
    kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "pod.yaml"))
    changed = tmp_path / "pod.yaml"
    changed.write_text(manifest.replace("app: hello", "app: hello-2"))
    assert "pod/hello configured" in kubectl("apply", "-f", str(changed)).stdout
    assert kubectl("get", "pod", "hello", "-o", "jsonpath={.metadata.labels.app}").stdout == "hello-2"
    immutable = tmp_path / "immutable.yaml"
    immutable.write_text(manifest.replace("restartPolicy: Never", "restartPolicy: OnFailure"))
    refused = kubectl("apply", "-f", str(immutable), check=False)
    assert refused.returncode != 0
    assert "pod updates may not change fields" in refused.stderr


def test_server_side_apply_creates_and_a_second_manager_conflicts(kubectl: Kubectl) -> None:
    """As on the real server (it was a 415 before issue 28)."""
    pod = EXAMPLES / "apiserver" / "pod.yaml"
    kubectl("apply", "--server-side", "-f", str(pod))
    managers = kubectl("get", "pod", "hello", "-o", "jsonpath={.metadata.managedFields[*].manager}").stdout
    assert managers == "kubectl"
    other = kubectl(
        "apply", "--server-side", "--field-manager=other", "-f", "-", input=_with_image(pod.read_text()), check=False
    )
    assert other.returncode != 0 and "conflict" in other.stderr


def test_describe_and_events(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "pod.yaml"))
    uid = kubectl("get", "pod", "hello", "-o", "jsonpath={.metadata.uid}").stdout
    event = tmp_path / "event.yaml"
    event.write_text(
        "apiVersion: v1\nkind: Event\nmetadata: {name: hello.1}\n"
        f"involvedObject: {{kind: Pod, namespace: default, name: hello, uid: {uid}}}\n"
        "reason: FailedScheduling\nmessage: '0/4 nodes are available: 4 Insufficient cpu.'\ntype: Warning\n"
        "source: {component: default-scheduler}\n"
    )
    kubectl("create", "-f", str(event))
    described = kubectl("describe", "pod", "hello").stdout
    assert "Name:" in described and "hello" in described
    assert "FailedScheduling" in described
    events = kubectl("get", "events", "-o", "jsonpath={.items[*].reason}").stdout
    assert events == "FailedScheduling"
    assert "FailedScheduling" in kubectl("get", "events").stdout


def test_get_watch_streams_changes(apiserver: ApiServer, kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "pod.yaml"))
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
    command = [str(KUBECTL), "--cache-dir", str(tmp_path / "cache"), "get", "pods", "-w", "-o", "name"]
    watcher = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        assert watcher.stdout.readline().strip() == "pod/hello"
        kubectl("label", "pod", "hello", "seen=yes")
        assert watcher.stdout.readline().strip() == "pod/hello"
    finally:
        watcher.kill()
        watcher.wait()


def test_delete_and_wait(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "pod.yaml"))
    kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "job.yaml"))
    assert "pod/hello condition met" in kubectl("wait", "--for=jsonpath={.status.phase}=Pending", "pod/hello").stdout
    assert 'pod "hello" deleted' in kubectl("delete", "pod", "hello").stdout
    kubectl("wait", "--for=delete", "pod/hello", "--timeout=60s")
    kubectl("delete", "-f", str(EXAMPLES / "apiserver" / "job.yaml"))
    assert kubectl("get", "jobs", "-o", "name").stdout == ""
    missing = kubectl("delete", "pod", "hello", check=False)
    assert missing.returncode != 0
    assert 'pods "hello" not found' in missing.stderr


def test_server_side_apply_of_an_invalid_object_creates_nothing(kubectl: Kubectl) -> None:
    bad = _with_image((EXAMPLES / "apiserver" / "pod.yaml").read_text()).replace("name: hello", "name: Bad_Name", 1)
    refused = kubectl("apply", "--server-side", "-f", "-", input=bad, check=False)
    assert refused.returncode != 0 and "is invalid" in refused.stderr
    assert kubectl("get", "pods", "-o", "name").stdout.strip() == ""


def _with_image(manifest: str) -> str:
    """``manifest`` with its first container's image changed (a value another manager owns)."""
    return re.sub(r"image: \S+", "image: busybox:9.99", manifest, count=1)
