"""Hostile review: ``kubeflux kube up --folder DIR`` starts again on the folder of a cluster it stopped (it could not).

``--folder`` is "where the kubeconfig, data and logs go"; the etcd data (and the CA) are kept, so the second start
finds the first run's KWOK nodes in etcd and ``kubectl create`` of the same nodes fails with AlreadyExists: the
command exits 1 after starting every component (``kubeflux kube up: kubectl create -f -: exit 1: ... nodes
"kwok-node-0" already exists``). kwokctl's ``start cluster`` on a stopped cluster starts it again.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
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
    """Its output until it says it is up (then it keeps running), exits, or :data:`CEILING` passes (a thread reads
    the pipe: a text pipe's buffer holds lines that ``select`` on its descriptor would not see)."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    stream = process.stdout

    def read() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + CEILING
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if process.poll() is not None and lines.empty():
                break
            continue
        seen.append(line)
        if UP in line:
            break
    return "".join(seen)


def _stop(process: subprocess.Popen[str], folder: Path) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(CEILING)  # its components stop in turn, each given 10 s before SIGKILL: slow on a loaded machine
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        logs = sorted(str(path.relative_to(folder)) for path in (folder / "logs").glob("*"))
        raise AssertionError(f"kube up did not stop {CEILING:.0f} s after SIGTERM; logs: {logs}") from None


def test_kube_up_starts_again_on_the_folder_of_a_stopped_cluster(binaries: Binaries, tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    first = _up(folder)
    try:
        assert UP in _wait_up(first)
    finally:
        _stop(first, folder)
    second = _up(folder)
    try:
        said = _wait_up(second)
        assert UP in said and second.poll() is None, said
    finally:
        _stop(second, folder)
