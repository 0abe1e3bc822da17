"""The real ``kubectl`` at its default flags against ``cluster serve``: the commands that write protobuf bodies
(``create namespace|configmap|job|priorityclass``, ``drain``) work, and what they stored reads back in
JSON as kubectl meant it.

kubectl is the one ``tools/kube/build.py`` built (``$KUBEFLUX_KUBE_DIR/bin`` or ``build/kube/bin``), else the one on
the PATH; protobuf needs its build (``python tools/kube/protobuf_gen.py build/kube/proto``).
"""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.sim.apiserver.server import ApiServer
from tests.sim.apiserver._built import KUBECTL, require_kubectl

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(apiserver: ApiServer, tmp_path: Path) -> Kubectl:
    require_kubectl()
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(KUBECTL), "--cache-dir", str(tmp_path / "cache"), *args]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr[-3000:]}"
        return result

    return run


def get(kubectl: Kubectl, *what: str) -> Any:
    return orjson.loads(kubectl("get", *what, "-o", "json").stdout)


def test_create_commands_write_protobuf_and_it_is_stored_as_json(kubectl: Kubectl, tmp_path: Path) -> None:
    created = kubectl("create", "namespace", "team", "-v=8")
    assert "Content-Type: application/vnd.kubernetes.protobuf" in created.stderr  # the body really was protobuf
    assert "namespace/team created" in created.stdout
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    kubectl("create", "configmap", "settings", "-n", "team", "--from-literal=mode=fast", f"--from-file={binary}")
    kubectl("create", "job", "pi", "-n", "team", "--image=busybox:1.36", "--", "sh", "-c", "true")
    kubectl("create", "priorityclass", "high", "--value=1000", "--description=urgent")

    assert get(kubectl, "namespace", "team")["metadata"]["name"] == "team"
    settings = get(kubectl, "configmap", "settings", "-n", "team")
    assert settings["data"] == {"mode": "fast"}
    assert settings["binaryData"]["blob.bin"] == base64.b64encode(bytes(range(256))).decode()
    job = get(kubectl, "job", "pi", "-n", "team")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "busybox:1.36" and container["command"] == ["sh", "-c", "true"]
    assert "namespace" not in job["spec"]["template"]["metadata"]  # Go wrote "", which means absent
    high = get(kubectl, "priorityclass", "high")
    assert (high["value"], high["description"]) == (1000, "urgent")


def test_drain_evicts_in_protobuf(kubectl: Kubectl, apiserver: ApiServer, tmp_path: Path) -> None:
    kubectl("run", "idle", "--image=busybox:1.36", "--overrides", '{"spec": {"nodeName": "node-0001"}}')
    # this server runs no kubelet to confirm a graceful delete: the eviction asks for none
    drained = kubectl(
        "drain", "node-0001", "--force", "--ignore-daemonsets", "--grace-period=0", "--timeout=60s", "-v=8"
    )
    assert "node/node-0001 drained" in drained.stdout
    assert "Content-Type: application/vnd.kubernetes.protobuf" in drained.stderr
    assert get(kubectl, "node", "node-0001")["spec"]["unschedulable"] is True
    assert get(kubectl, "pods")["items"] == []
