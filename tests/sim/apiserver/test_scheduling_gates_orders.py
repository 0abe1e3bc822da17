"""Scheduling gates in odd orders of events, on the served cluster with every in-process scheduler: a pod ungated
while it is being deleted (a finalizer holds it) is never bound and holds up no pod behind it (easy's FCFS queue
waited for it for ever); a pod ungated with a node selector no node matches is told it is Unschedulable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._served import ORIGIN, PODS, binding, call, eventually, gated_pod, now, phases, pi, scheduled

SCHEDULERS = ("kubeflux", "kube-default", "easy")
MERGE = "application/merge-patch+json"


@pytest.fixture(params=SCHEDULERS)
def served(request: pytest.FixtureRequest) -> Iterator[tuple[ApiServer, Scheduler]]:
    scheduler = create(request.param)
    server = ApiServer(
        uniform_cluster(1, 8, "64Gi"), kubelet=True, schedulers=[scheduler], clock=VirtualClock(ORIGIN)
    ).start()
    try:
        yield server, scheduler
    finally:
        server.stop()


def _held(name: str, scheduler: str, cpu: str, **meta: Any) -> dict[str, Any]:
    manifest = gated_pod(name, scheduler, ["example.com/quota"])
    manifest["metadata"].update(meta)
    manifest["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return manifest


def test_a_pod_ungated_while_being_deleted_is_never_bound_and_holds_up_no_other(
    served: tuple[ApiServer, Scheduler],
) -> None:
    server, scheduler = served
    call(server, "POST", PODS, _held("leaving", scheduler.name, "8", finalizers=["example.com/hold"]))
    call(server, "DELETE", f"{PODS}/leaving")  # a finalizer keeps it, marked for deletion
    call(server, "PATCH", f"{PODS}/leaving", {"spec": {"schedulingGates": None}}, MERGE)
    call(server, "POST", PODS, gated_pod("next", scheduler.name, []))
    eventually(lambda: scheduled(server, "next")[0] != "", "the next pod bound")
    assert scheduled(server, "leaving")[0] == ""
    call(server, "PATCH", f"{PODS}/leaving", {"metadata": {"finalizers": None}}, MERGE)


def test_a_pod_ungated_with_a_node_selector_no_node_matches_is_told_it_is_unschedulable(
    served: tuple[ApiServer, Scheduler],
) -> None:
    server, scheduler = served
    call(server, "POST", PODS, _held("nowhere", scheduler.name, "1"))
    patch = {"spec": {"schedulingGates": None, "nodeSelector": {"example.com/flavor": "gpu"}}}
    call(server, "PATCH", f"{PODS}/nowhere", patch, MERGE)
    eventually(lambda: scheduled(server, "nowhere")[1:] == ("False", "Unschedulable"), "the pod told Unschedulable")
    assert scheduled(server, "nowhere")[0] == ""


def test_virtual_time_goes_on_while_a_pod_waits_for_its_gates_and_waits_for_its_scheduler_once_ungated() -> None:
    """``--clock virtual`` holds time until an external scheduler answered each new pod; a gated pod is the
    controller's to release, not the scheduler's to answer (neither kube-scheduler nor kubeflux writes on it), so it
    must not hold time, or the pods whose ends would free the quota that releases it never end. Once ungated, it
    is new to its scheduler and holds time until answered, though it still carries ``SchedulingGated``."""
    server = ApiServer(uniform_cluster(1, 16, "64Gi"), kubelet=True, clock=VirtualClock(ORIGIN)).start()
    try:
        held = pi("held", 30, scheduler="external")
        held["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
        call(server, "POST", PODS, held)
        call(server, "POST", PODS, pi("first", 30, scheduler="external"))
        call(server, "POST", f"{PODS}/first/binding", binding("first"))
        eventually(lambda: phases(server)["first"] == "Succeeded", "the first pod's end beside the gated one")
        assert now(server) == ORIGIN + 30
        call(server, "POST", PODS, pi("third", 30, scheduler="external"))
        call(server, "POST", f"{PODS}/third/binding", binding("third"))
        eventually(lambda: phases(server)["third"] == "Running", "the third pod running")
        call(server, "PATCH", f"{PODS}/held", {"spec": {"schedulingGates": None}}, MERGE)
        time.sleep(0.5)  # ten settle periods: were the ungated pod not waited for, time would jump to the third's end
        assert now(server) == ORIGIN + 30
        call(server, "POST", f"{PODS}/held/binding", binding("held"))
        eventually(lambda: phases(server)["held"] == "Succeeded", "the ungated pod's end")
        assert now(server) == ORIGIN + 60
    finally:
        server.stop()
