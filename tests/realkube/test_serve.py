"""``kubeflux serve`` on the real control plane (etcd, kube-apiserver, kube-controller-manager, KWOK nodes), as a user
runs it: the seed's demos, pods with run times that hold reservations, and kube-scheduler's pods beside kubeflux's on
shared nodes.

Every test watches its namespace and checks after every event (:class:`~tests.realkube.watching.PodWatch`) that no node
holds more cpu than it has, that no bound pod is told it waits and that no Binding of serve's is refused; at the end,
that serve holds no allocation once every pod has ended. Each test has a control plane of its own (a few seconds to
start), so its nodes are the only ones serve sees.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.binderprocess import BinderProcess
from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from tests.realkube._serving import COMPLETE_AFTER, nodes, pod, serve

from .conftest import Api, eventually, phase, running_plane
from .watching import PodWatch

EXIT_CODE = "sim.kubeflux.io/exit-code"


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """A control plane of the test's own (:func:`~tests.realkube.conftest.running_plane`)."""
    with running_plane(binaries, tmp_path / "plane") as started:
        yield started


def end(plane: ControlPlane, name: str, exit_code: int) -> None:
    """The pod's container exits with ``exit_code`` (as its kubelet would report it; KWOK leaves it so)."""
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
    status = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": "pi",
                "image": "perl:5.34",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {**terminated, "finishedAt": "2026-01-01T00:00:00Z"}},
            }
        ],
    }
    patch = json.dumps({"status": status})
    plane.kubectl("patch", "pod", name, "--subresource=status", "--type=merge", "-p", patch)


def waits(p: dict[str, Any]) -> bool:
    """Told it waits, as kube-scheduler tells it: ``PodScheduled=False/Unschedulable``, no node."""
    conditions = p.get("status", {}).get("conditions") or []
    told = any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions)
    return told and not p["spec"].get("nodeName")


def failed_scheduling(api: Api, namespace: str) -> set[str]:
    return {e["regarding"]["name"] for e in api.events(namespace) if e.get("reason") == "FailedScheduling"}


@pytest.mark.parametrize("exit_code", [0, 139], ids=["complete", "segfault"])
def test_the_seed_demo_two_run_two_wait_then_run_when_the_first_end(
    plane: ControlPlane, api: Api, exit_code: int
) -> None:
    """Fluence's informer demo (seed 000) on a real API server: four 8-core pods on one 16-core node."""
    capacity = nodes(plane, api, 1, 16)
    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        for name in ("pi-0", "pi-1"):
            api.create_pod("default", pod(name, "8"))
        eventually(lambda: all(phase(p) == "Running" for p in api.pods("default").values()))
        for name in ("pi-2", "pi-3"):
            api.create_pod("default", pod(name, "8"))
        eventually(lambda: all(waits(api.pods("default")[n]) for n in ("pi-2", "pi-3")))
        eventually(lambda: {"pi-2", "pi-3"} <= failed_scheduling(api, "default"))
        for name in ("pi-0", "pi-1"):
            end(plane, name, exit_code)
        eventually(lambda: all(phase(api.pods("default")[n]) == "Running" for n in ("pi-2", "pi-3")))
        for name in ("pi-2", "pi-3"):
            end(plane, name, 0)
        eventually(lambda: not any(core.books.allocations for core in scheduler.cores), lambda: "allocations released")
        w.check()
        assert scheduler.bound == 4
    pods = api.pods("default")
    assert [phase(pods[n]) for n in sorted(pods)] == ["Failed" if exit_code else "Succeeded"] * 2 + ["Succeeded"] * 2


def test_pods_with_run_times_hold_reservations_and_are_bound_once_each(plane: ControlPlane, api: Api) -> None:
    """Twelve 8-core pods with run times on one 16-core node, arriving at once: two run, the others are told when
    they start (the expected-start annotation: a reservation) and each is bound once when its turn comes — the
    annotation taken off before its Binding, which the watch shows while the Binding is in flight (it was queued
    again, bound twice and refused with 409, and its cores leaked)."""
    capacity = nodes(plane, api, 1, 16)
    names = [f"job-{i:02d}" for i in range(12)]
    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        for index, name in enumerate(names):
            run = 2 + index % 3
            notes = {COMPLETE_AFTER: f"{run}s", DURATION_ANNOTATION: str(run + 2)}
            api.create_pod("default", pod(name, "8", annotations=notes, deadline=60 if index % 2 else None))
        eventually(
            lambda: any(
                EXPECTED_START_ANNOTATION in (p["metadata"].get("annotations") or {})
                for p in api.pods("default").values()
            )
        )
        eventually(lambda: all(phase(p) == "Succeeded" for p in api.pods("default").values()) and w.events > 0)
        eventually(lambda: not any(core.books.allocations for core in scheduler.cores), lambda: "allocations released")
        w.check()
        assert scheduler.bound == len(names)
        assert not any(core.queue.by_pod for core in scheduler.cores)
    for p in api.pods("default").values():
        assert EXPECTED_START_ANNOTATION not in (p["metadata"].get("annotations") or {}), p["metadata"]["name"]


def test_kube_schedulers_pods_and_kubefluxs_share_nodes_and_none_is_over_committed(
    plane: ControlPlane, api: Api
) -> None:
    """The real kube-scheduler and serve place pods on the same two 8-core nodes, each counting the other's pods.
    (Two schedulers deciding at the same instant can both take the last cores of a node, as with any two schedulers
    on shared nodes: a kubelet refuses the later pod, KWOK does not; so each batch here waits for the other's
    binds, as ``sharing: exclusive`` would make sure of.)"""
    plane.start_scheduler()
    capacity = nodes(plane, api, 2, 8)
    with serve(plane) as scheduler, PodWatch(api.client, "default", capacity, lambda: scheduler.binder.refused) as w:
        for index, node in enumerate(sorted(capacity)):  # one on each node (kube-scheduler's choice by selector)
            placed = pod(f"default-{index}", "3", scheduler="default-scheduler")
            placed["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
            api.create_pod("default", placed)
        eventually(lambda: all(phase(p) == "Running" for p in api.pods("default").values()))
        for index in range(4):
            api.create_pod("default", pod(f"flux-{index}", "3"))
        # one more pod of 3 fits on each node (3 + 3 + 3 > 8): two of kubeflux's run, two wait, saying why
        eventually(lambda: sum(phase(p) == "Running" for p in api.pods("default").values()) == 4)
        eventually(lambda: sum(waits(p) for p in api.pods("default").values()) == 2)
        waiting = {n for n, p in api.pods("default").items() if waits(p)}
        assert all(n.startswith("flux-") for n in waiting)
        message = api.pods("default")[min(waiting)]["status"]["conditions"][0]["message"]
        assert message == "0/2 nodes are available: 2 Insufficient cpu."
        for index in range(2):  # kube-scheduler's pods end: kubeflux's waiting pods take their cores
            end(plane, f"default-{index}", 0)
        eventually(lambda: all(phase(api.pods("default")[n]) == "Running" for n in waiting))
        api.create_pod("default", pod("default-late", "3", scheduler="default-scheduler"))  # no room: it waits
        eventually(
            lambda: (
                "FailedScheduling"
                in {e.get("reason") for e in api.events("default") if e["regarding"].get("name") == "default-late"}
            )
        )
        assert not api.pods("default")["default-late"]["spec"].get("nodeName")
        w.check()


def test_a_binding_lost_while_in_the_writer_process_is_refused_by_the_api_server_and_unreserved(
    plane: ControlPlane, api: Api
) -> None:
    """serve's writes go through a process of their own (``binding.process``). Paused (SIGSTOP) while serve's
    Binding for a pod waits in its pipe, the pod is bound by another client; resumed, the API server refuses
    serve's Binding (409) and the refusal reaches the core, which releases the pod's cores and counts it where it
    runs: on the 32 cores, three more 8-core pods are bound and a fourth waits, and every allocation is released
    once the pods are deleted. Stopping serve ends the writer's process."""
    capacity = nodes(plane, api, 2, 16)
    other = sorted(capacity)[1]
    scheduler = serve(plane)
    try:
        writer = scheduler.binder
        assert isinstance(writer, BinderProcess)
        eventually(scheduler.synced.is_set)
        os.kill(writer.process.pid, signal.SIGSTOP)
        try:
            api.create_pod("default", pod("race", "8"))
            eventually(lambda: writer.pending >= 1)  # decided: its Binding is in the pipe
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "race"}, "target": {"name": other}}
            api.core.create_namespaced_pod_binding("race", "default", binding, _preload_content=False)
        finally:
            os.kill(writer.process.pid, signal.SIGCONT)
        eventually(lambda: writer.refused >= 1)
        names = ["p1", "p2", "p3", "p4"]
        for name in names:
            api.create_pod("default", pod(name, "8"))
        eventually(lambda: sum(bool(api.pods("default")[n]["spec"].get("nodeName")) for n in names) == 3)
        eventually(
            lambda: any(waits(api.pods("default")[n]) for n in names),
            lambda: str(
                {
                    n: (p["spec"].get("nodeName"), p.get("status", {}).get("conditions"))
                    for n, p in api.pods("default").items()
                }
            ),
        )
        assert scheduler.bound == 3 and scheduler.alive
        for name in ["race", *names]:
            api.core.delete_namespaced_pod(name, "default", grace_period_seconds=0, _preload_content=False)
        eventually(lambda: not any(core.books.allocations for core in scheduler.cores), lambda: "allocations released")
    finally:
        scheduler.stop()
    assert writer.process.exitcode == 0 and not writer.failed
