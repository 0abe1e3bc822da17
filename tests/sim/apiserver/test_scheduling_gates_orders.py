"""Scheduling gates in odd orders of events, on the served cluster with every in-process scheduler: a pod ungated
while it is being deleted (a finalizer holds it) is never bound and holds up no pod behind it (easy's FCFS queue
waited for it for ever); a pod ungated with a node selector no node matches is told it is Unschedulable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver.test_scheduling_gates import _pod, _scheduled
from tests.sim.apiserver.test_virtual_time import ORIGIN, PODS, call, eventually

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
    manifest = _pod(name, scheduler, ["example.com/quota"])
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
    call(server, "POST", PODS, _pod("next", scheduler.name, []))
    eventually(lambda: _scheduled(server, "next")[0] != "", "the next pod bound")
    assert _scheduled(server, "leaving")[0] == ""
    call(server, "PATCH", f"{PODS}/leaving", {"metadata": {"finalizers": None}}, MERGE)


def test_a_pod_ungated_with_a_node_selector_no_node_matches_is_told_it_is_unschedulable(
    served: tuple[ApiServer, Scheduler],
) -> None:
    server, scheduler = served
    call(server, "POST", PODS, _held("nowhere", scheduler.name, "1"))
    patch = {"spec": {"schedulingGates": None, "nodeSelector": {"example.com/flavor": "gpu"}}}
    call(server, "PATCH", f"{PODS}/nowhere", patch, MERGE)
    eventually(lambda: _scheduled(server, "nowhere")[1:] == ("False", "Unschedulable"), "the pod told Unschedulable")
    assert _scheduled(server, "nowhere")[0] == ""
