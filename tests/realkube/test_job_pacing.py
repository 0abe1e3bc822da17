"""``cluster serve``'s Job controller creates a wide Job's pods at the pace of the real kube-controller-manager
v1.36's (:mod:`kubeflux.sim.clientrate`): the same 1,200-pod Job on both, each pod's creation timed by a watch.

What is compared is the shape, with bounds a slow machine cannot break (it can only slow a side down, and 20
creations a second leave both servers idle most of the time): a first burst of no more than the client's 30 (plus
the second's 20 and a few), a steady 20 a second (±25 %), no pause of half a second or more but right after a
sync's 500th pod (``MaxPodCreateDeletePerSync``), and all 1,200 in about a minute. ``cluster serve`` pauses a second
after each 500 (``syncJobBatchPeriod``); the real controller's pause there is anything from none to 1.1 s (measured:
0.85 s and none, 0.3 s and 1.1 s, none and none), as its next sync finds the last pods already seen or not. The
simulator's timeline of the same Job, exact in virtual time, is in tests/sim/test_jobcontroller.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.command import api_client
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.clientrate import KCM_CLIENT_RATE

from .conftest import CEILING

kubernetes = pytest.importorskip("kubernetes")

PODS = 1200
JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "wide"},
    "spec": {
        "completions": PODS,
        "parallelism": PODS,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
    },
}


def creation_times(kubeconfig: Path) -> list[float]:
    """Seconds from the Job's creation to each of its pods' (a watch's ADDED events, in order)."""
    api = api_client(kubeconfig, None, False, 8)
    core, batch = kubernetes.client.CoreV1Api(api), kubernetes.client.BatchV1Api(api)
    seen: list[float] = []
    watching = threading.Event()

    def watch() -> None:
        stream = kubernetes.watch.Watch()
        listed = core.list_namespaced_pod("default")
        version = listed.metadata.resource_version
        watching.set()
        for event in stream.stream(
            core.list_namespaced_pod, "default", resource_version=version, _request_timeout=CEILING + 60
        ):
            if event["type"] == "ADDED":
                seen.append(time.monotonic())
            if len(seen) >= PODS:
                stream.stop()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert watching.wait(CEILING)
        deadline = time.monotonic() + CEILING
        while True:  # the real server refuses pods until the namespace has its default ServiceAccount
            try:
                core.read_namespaced_service_account("default", "default")
                break
            except kubernetes.client.ApiException:
                assert time.monotonic() < deadline, "no default ServiceAccount"
                time.sleep(0.1)
        start = time.monotonic()
        batch.create_namespaced_job("default", JOB)
        thread.join(CEILING + 60)
        return [at - start for at in seen]
    finally:
        api.close()


def check_shape(times: list[float], side: str) -> None:
    rate = KCM_CLIENT_RATE
    assert len(times) == PODS, f"{side}: {len(times)} pods"
    first = times[0]
    in_first_second = sum(1 for at in times if at - first <= 1.0)
    assert in_first_second <= rate.burst + rate.qps + 5, f"{side}: {in_first_second} pods in the first second"
    steady = (times[450] - times[50]) / 400  # seconds per pod inside the first sync, after its burst
    assert 0.75 / rate.qps <= steady <= 1.25 / rate.qps, f"{side}: {1 / steady:.1f} pods a second"
    pauses = [n for n in range(1, PODS) if times[n] - times[n - 1] >= 0.5]
    assert set(pauses) <= {500, 1000}, f"{side}: pauses before pods {pauses}"
    total = times[-1] - first
    assert 0.75 * PODS / rate.qps <= total <= 1.25 * PODS / rate.qps + 2.0, f"{side}: {total:.1f} s"


def test_cluster_serve_creates_a_wide_jobs_pods_at_the_real_controllers_pace(
    binaries: Binaries, tmp_path: Path
) -> None:
    plane = ControlPlane(tmp_path / "real", binaries).start()
    try:
        plane.start_controller_manager("--controllers=job,serviceaccount,namespace")
        real = creation_times(plane.kubeconfig)
    finally:
        plane.stop()
    served = ApiServer([], controllers=True).start()
    try:
        served_times = creation_times(served.write_kubeconfig(tmp_path / "served.kubeconfig"))
    finally:
        served.stop()
    check_shape(real, "real kube-controller-manager")
    check_shape(served_times, "cluster serve")
    assert {n for n in range(1, PODS) if served_times[n] - served_times[n - 1] >= 0.5} == {500, 1000}
