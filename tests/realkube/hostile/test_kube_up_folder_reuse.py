"""Hostile review: ``kubeflux kube up --folder DIR`` starts again on the folder of a cluster it stopped (it could not).

``--folder`` is "where the kubeconfig, data and logs go"; the etcd data (and the CA) are kept, so the second start
finds the first run's KWOK nodes in etcd and ``kubectl create`` of the same nodes fails with AlreadyExists: the
command exits 1 after starting every component (``kubeflux kube up: kubectl create -f -: exit 1: ... nodes
"kwok-node-0" already exists``). kwokctl's ``start cluster`` on a stopped cluster starts it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kubeflux.controlplane import Binaries

from ..conftest import CEILING

UP = "Ctrl-C stops it."


def _up(folder: Path) -> subprocess.Popen[str]:
    argv = [str(Path(sys.executable).with_name("kubeflux")), "kube", "up", "--folder", str(folder)]
    argv += ["--kwok-nodes", "1", "--no-scheduler", "--no-controller-manager"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))


def _wait_up(process: subprocess.Popen[str]) -> str:
    """Its output until it says it is up (then it keeps running) or exits."""
    assert process.stdout is not None
    seen = []
    deadline = time.monotonic() + CEILING
    for line in process.stdout:
        seen.append(line)
        if UP in line or time.monotonic() > deadline:
            break
    return "".join(seen)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    process.wait(CEILING)  # its components stop in turn, each given 10 s before SIGKILL: slow on a loaded machine


def test_kube_up_starts_again_on_the_folder_of_a_stopped_cluster(binaries: Binaries, tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    first = _up(folder)
    try:
        assert UP in _wait_up(first)
    finally:
        _stop(first)
    second = _up(folder)
    try:
        said = _wait_up(second)
        assert UP in said and second.poll() is None, said
    finally:
        _stop(second)
