"""Scheduling gates on the served cluster, as a Kueue user meets them: every in-process scheduler leaves a pod with
``spec.schedulingGates`` Pending with the ``SchedulingGated`` condition the API server gave it, whatever room
there is, and places it once a controller narrowed its nodes and removed its last gate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._served import ORIGIN, PODS, call, eventually, gated_pod, scheduled

SCHEDULERS = ("kubeflux", "kube-default", "easy")


@pytest.fixture
def cluster() -> Iterator[tuple[ApiServer, list[Scheduler]]]:
    schedulers = [create(name) for name in SCHEDULERS]
    server = ApiServer(
        uniform_cluster(2, 8, "64Gi"), kubelet=True, schedulers=schedulers, clock=VirtualClock(ORIGIN)
    ).start()
    try:
        yield server, schedulers
    finally:
        server.stop()


def test_every_scheduler_waits_for_the_gates_then_places_the_pod_where_the_controller_narrowed_it(
    cluster: tuple[ApiServer, list[Scheduler]],
) -> None:
    server, schedulers = cluster
    for scheduler in schedulers:
        call(server, "POST", PODS, gated_pod(f"open-{scheduler.name}", scheduler.name, []))
        call(server, "POST", PODS, gated_pod(f"held-{scheduler.name}", scheduler.name, ["example.com/quota", "kueue"]))
    for scheduler in schedulers:  # the open pods are placed; the gated ones wait beside them
        eventually(lambda s=scheduler: scheduled(server, f"open-{s.name}")[0] != "", f"open-{scheduler.name} bound")
    for scheduler in schedulers:
        assert scheduled(server, f"held-{scheduler.name}") == ("", "False", "SchedulingGated")

    queue = call(server, "GET", "/kubeflux/queue")
    [kubeflux] = [s for s in queue["schedulers"] if s["name"] == "kubeflux"]
    assert [(job["job"], job["state"]) for job in kubeflux["jobs"]] == [("default/held-kubeflux", "gated")]

    node = sorted(n["metadata"]["name"] for n in call(server, "GET", "/api/v1/nodes")["items"])[-1]
    for scheduler in schedulers:  # Kueue's admission: a node selector added, one gate removed, then the other
        path = f"{PODS}/held-{scheduler.name}"
        selector = {"kubernetes.io/hostname": node}
        patch = {"spec": {"nodeSelector": selector, "schedulingGates": [{"name": "kueue"}]}}
        call(server, "PATCH", path, patch, "application/merge-patch+json")
    for scheduler in schedulers:
        assert scheduled(server, f"held-{scheduler.name}") == ("", "False", "SchedulingGated")
        call(
            server,
            "PATCH",
            f"{PODS}/held-{scheduler.name}",
            {"spec": {"schedulingGates": None}},
            "application/merge-patch+json",
        )
    for scheduler in schedulers:
        name = f"held-{scheduler.name}"
        eventually(lambda n=name: scheduled(server, n)[0] != "", f"{name} bound once ungated")
        assert scheduled(server, name) == (node, "True", "")
