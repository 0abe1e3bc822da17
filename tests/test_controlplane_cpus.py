"""A control-plane component started on given CPUs (``ControlPlane.cpus``, e.g. ``benchmarks/serve.py --real --pin``)
runs every thread there from its start, threads made later included; the process that starts it is left as it was."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kubeflux.controlplane.harness import Component

THREADS = "import threading, time; [threading.Thread(target=time.sleep, args=(60,)).start() for _ in range(3)]"


def _started(component: Component) -> int:
    component.start()
    assert component.process is not None
    deadline = time.monotonic() + 30
    while b"up" not in component.log.read_bytes():
        assert component.running, component.tail()
        assert time.monotonic() < deadline, "the component never said it was up"
        time.sleep(0.02)
    return component.process.pid


def _masks(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(task.name)) for task in Path(f"/proc/{pid}/task").iterdir()]


def test_every_thread_of_a_pinned_component_runs_on_its_cpus(tmp_path: Path) -> None:
    mine = os.sched_getaffinity(0)
    if len(mine) < 2:
        pytest.skip("one CPU: nothing to pin a component apart from")
    last = frozenset({max(mine)})
    argv = [sys.executable, "-c", f"{THREADS}; print('up', flush=True); time.sleep(60)"]
    component = Component("pinned", argv, tmp_path / "pinned.log", cpus=last)
    try:
        masks = _masks(_started(component))
    finally:
        component.stop()
    assert len(masks) == 4  # its main thread and the three it made after it started
    assert all(mask == last for mask in masks), masks
    assert os.sched_getaffinity(0) == mine


def test_a_component_without_cpus_runs_where_its_starter_may(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('up', flush=True); import time; time.sleep(60)"]
    component = Component("free", argv, tmp_path / "free.log")
    try:
        masks = _masks(_started(component))
    finally:
        component.stop()
    assert masks == [os.sched_getaffinity(0)]
