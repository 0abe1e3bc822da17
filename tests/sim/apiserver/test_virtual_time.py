"""Virtual time on the served cluster (``cluster serve --clock virtual``), as a client over HTTP sees it.

Time stands still while the cluster works and jumps to the next event (a pod's end, a scheduler's wake-up) once it
is quiescent; objects carry simulated timestamps and every answer carries ``X-Kubeflux-Time``. A pending pod that
no scheduler has answered holds the clock, however long its scheduler takes. Waits here poll for a state, never
for an amount of time; the only sleeps check that something did *not* happen, which a slow machine cannot break.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.clock import Priority
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.wallclock import WallClock
from tests.sim.apiserver._served import ORIGIN, PODS, binding, call, eventually, now, phases, pi


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """One node of 16 cores in virtual time; the test's parameter names the in-process schedulers."""
    names: list[str] = getattr(request, "param", [])
    server = ApiServer(
        uniform_cluster(1, 16, "64Gi"),
        kubelet=True,
        controllers=True,
        schedulers=[create(name) for name in names],
        clock=VirtualClock(ORIGIN),
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("cluster", [["kubeflux"]], indirect=True)
def test_time_jumps_to_each_pods_end_and_objects_carry_simulated_time(cluster: ApiServer) -> None:
    for name in ("pi-0", "pi-1", "pi-2"):
        created = call(cluster, "POST", PODS, pi(name, 60))
        assert parse_timestamp(created["metadata"]["creationTimestamp"]) == ORIGIN
    eventually(lambda: set(phases(cluster).values()) == {"Succeeded"}, "every pod succeeding")
    pods = {p["metadata"]["name"]: p["status"] for p in call(cluster, "GET", PODS)["items"]}
    starts = sorted(parse_timestamp(status["startTime"]) - ORIGIN for status in pods.values())
    assert starts == [0.0, 0.0, 60.0]  # two 8-core pods at once on 16 cores, the third when one ends
    ends = sorted(
        parse_timestamp(status["containerStatuses"][0]["state"]["terminated"]["finishedAt"]) - ORIGIN
        for status in pods.values()
    )
    assert ends == [60.0, 60.0, 120.0]
    assert now(cluster) == ORIGIN + 120
    time.sleep(0.5)  # ten settle periods: lease heartbeats never make time jump, and nothing else is left
    assert now(cluster) == ORIGIN + 120
    answer = call(cluster, "GET", "/kubeflux/time")
    assert answer["clock"] == "virtual" and answer["time"] == "2023-11-14T22:15:20Z"


def test_a_pod_no_scheduler_has_answered_holds_the_clock(cluster: ApiServer) -> None:
    # The test is the (external) scheduler: nothing runs in the process.
    call(cluster, "POST", PODS, pi("first", 30, scheduler="external"))
    call(cluster, "POST", "/api/v1/namespaces/default/pods/first/binding", binding("first"))
    eventually(lambda: phases(cluster)["first"] == "Running", "the bound pod running")
    call(cluster, "POST", PODS, pi("second", 30, scheduler="external"))
    time.sleep(0.5)  # ten settle periods: without the rule, time would jump to the first pod's end
    assert now(cluster) == ORIGIN
    assert phases(cluster)["first"] == "Running"
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    patch = {"status": {"conditions": [condition]}}
    call(cluster, "PATCH", f"{PODS}/second/status", patch, "application/strategic-merge-patch+json")
    eventually(lambda: phases(cluster)["first"] == "Succeeded", "the first pod's end, once the second is answered")
    assert now(cluster) == ORIGIN + 30
    call(cluster, "POST", "/api/v1/namespaces/default/pods/second/binding", binding("second"))
    eventually(lambda: phases(cluster)["second"] == "Succeeded", "the second pod's end")
    assert now(cluster) == ORIGIN + 60


def test_polling_the_time_does_not_hold_the_clock(cluster: ApiServer) -> None:
    call(cluster, "POST", PODS, pi("solo", 45, scheduler="external"))
    call(cluster, "POST", "/api/v1/namespaces/default/pods/solo/binding", binding("solo"))
    eventually(lambda: now(cluster) == ORIGIN + 45, "the jump to the pod's end while the time is polled")


def test_virtual_timers_run_in_the_simulators_tie_order() -> None:
    clock = VirtualClock(100.0)
    ran: list[str] = []
    clock.call_at(105, Priority.ARRIVAL, ran.append, "arrival at 105")
    clock.call_at(105, Priority.RELEASE, ran.append, "release at 105")
    clock.call_at(101, Priority.WAKEUP, ran.append, "wake-up at 101")
    cancelled = clock.call_at(103, Priority.STAGE, ran.append, "cancelled")
    cancelled.cancel()
    assert clock.advance() == 101 and ran == ["wake-up at 101"]
    assert clock.advance() == 105 and ran[1:] == ["release at 105", "arrival at 105"]
    assert clock.advance() is None and clock() == 105


def test_the_wall_clocks_refuse_a_speed_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="speed must be positive"):
        WallClock(0)
    assert WallClock(10).wall(60) == 6


def test_cluster_serve_refuses_speed_in_virtual_time_and_until_done_without_a_workload() -> None:
    import subprocess
    import sys

    base = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "1", "--cores-per-node", "4"]
    both = subprocess.run([*base, "--clock", "virtual", "--speed", "5"], capture_output=True, text=True, timeout=120)
    assert both.returncode != 0 and "--speed is for the wall clock" in both.stderr + both.stdout
    alone = subprocess.run([*base, "--until-done"], capture_output=True, text=True, timeout=120)
    assert alone.returncode != 0 and "--until-done needs a --workload" in alone.stderr + alone.stdout


def test_nodes_report_a_ready_heartbeat_every_five_simulated_minutes() -> None:
    server = ApiServer(uniform_cluster(1, 16, "64Gi"), kubelet=True, clock=WallClock(speed=600)).start()
    try:

        def heartbeat() -> float:
            node = call(server, "GET", "/api/v1/nodes/node-0000")
            ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
            assert ready["status"] == "True"
            return parse_timestamp(ready["lastHeartbeatTime"]) - parse_timestamp(node["metadata"]["creationTimestamp"])

        eventually(lambda: heartbeat() >= 300, "a node status heartbeat (300 simulated s: 0.5 s of wall time)")
        lease = call(server, "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-0000")
        assert lease["spec"]["holderIdentity"] == "node-0000"
    finally:
        server.stop()
