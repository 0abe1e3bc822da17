"""``cluster serve``'s Job controller creates a wide Job's pods at the pace of the real kube-controller-manager
v1.36's (:mod:`kubeflux.sim.clientrate`): the same 1,200-pod Job on both, each pod's creation timed by a watch.

What is compared is the shape, from what the servers wrote (the pods' ``creationTimestamp``, whole seconds, and the
Job's ``status.active``: a stalled client cannot move them), with bounds a slow machine cannot break (it can only
slow a side down, and 20 creations a second leave both servers idle most of the time): no more than the client's
burst of 30 and a second's 20 (and a few) in the first second, at least the burst in the first two, a steady 20 a
second (±25 %), all 1,200 in about a minute, and syncs of 500: the Job's ``status.active`` goes through 500 and
1,000 (``MaxPodCreateDeletePerSync``; each sync writes the status after its creations). The pause between two syncs
(``cluster serve``: a second, ``syncJobBatchPeriod``; the real controller: anything from none to 1.1 s, measured 0.85
s and none, 0.3 s and 1.1 s, none and none, as its next sync finds the last pods already seen or not) is below what
whole seconds show; the simulator's timeline of the same Job, exact in virtual time, is in
tests/sim/test_jobcontroller.py, and ``cluster serve``'s in virtual time in
tests/sim/apiserver/test_served_job_controller.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.command import api_client
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.clientrate import KCM_CLIENT_RATE

from .conftest import CEILING, eventually

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


def creation_timeline(kubeconfig: Path) -> tuple[list[float], list[int]]:
    """Run the Job; its pods' ``creationTimestamp`` (whole seconds, written by the server: no client's stall moves
    them), sorted, and the successive values of its ``status.active`` (a watch: one per sync's status write)."""
    api = api_client(kubeconfig, None, False, 8)
    core, batch = kubernetes.client.CoreV1Api(api), kubernetes.client.BatchV1Api(api)
    actives: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        stream = kubernetes.watch.Watch()
        version = orjson.loads(batch.list_namespaced_job("default", _preload_content=False).data)["metadata"]
        watching.set()
        for event in stream.stream(
            batch.list_namespaced_job,
            "default",
            resource_version=version["resourceVersion"],
            _request_timeout=CEILING + 60,
        ):
            status = event["raw_object"].get("status") or {}
            active = int(status.get("active") or 0)
            if active and (not actives or actives[-1] != active):
                actives.append(active)
            if active >= PODS:
                stream.stop()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert watching.wait(CEILING)
        eventually(lambda: _has_default_account(core))  # the real server refuses pods until the namespace has it
        batch.create_namespaced_job("default", JOB, _preload_content=False)
        deadline = time.monotonic() + CEILING
        while (made := _all_made(core)) is None:  # listed once a second: 1,200 pods are a megabyte
            assert time.monotonic() < deadline, "never all the pods"
            time.sleep(1.0)
        thread.join(CEILING)
        return made, actives
    finally:
        api.close()


def _has_default_account(core: Any) -> bool:
    try:
        core.read_namespaced_service_account("default", "default", _preload_content=False)
    except kubernetes.client.ApiException:
        return False
    return True


def _all_made(core: Any) -> list[float] | None:
    """The pods' creation times, sorted, once all are made."""
    pods = orjson.loads(core.list_namespaced_pod("default", _preload_content=False).data)["items"]
    return sorted(parse_timestamp(p["metadata"]["creationTimestamp"]) for p in pods) if len(pods) >= PODS else None


def check_shape(made: list[float], actives: list[int], side: str) -> None:
    rate = KCM_CLIENT_RATE
    assert len(made) == PODS, f"{side}: {len(made)} pods"
    first = made[0]
    in_first_second = made.count(first)
    assert in_first_second <= rate.burst + rate.qps + 5, f"{side}: {in_first_second} pods in the first second"
    assert sum(1 for at in made if at <= first + 1) >= rate.burst, f"{side}: no burst"
    steady = (made[450] - made[50]) / 400  # seconds per pod inside the first sync, after its burst (±1 s of 20 s)
    assert 0.75 / rate.qps <= steady <= 1.25 / rate.qps, f"{side}: {1 / steady:.1f} pods a second"
    total = made[-1] - first
    assert 0.75 * PODS / rate.qps - 1 <= total <= 1.25 * PODS / rate.qps + 3, f"{side}: {total:.0f} s"
    assert 500 in actives and 1000 in actives and actives[-1] == PODS, f"{side}: status.active {actives}"


def test_cluster_serve_creates_a_wide_jobs_pods_at_the_real_controllers_pace(
    binaries: Binaries, tmp_path: Path
) -> None:
    plane = ControlPlane(tmp_path / "real", binaries).start()
    try:
        plane.start_controller_manager("--controllers=job,serviceaccount,namespace")
        real = creation_timeline(plane.kubeconfig)
    finally:
        plane.stop()
    served = ApiServer([], controllers=True).start()
    try:
        served_timeline = creation_timeline(served.write_kubeconfig(tmp_path / "served.kubeconfig"))
    finally:
        served.stop()
    check_shape(*real, "real kube-controller-manager")
    check_shape(*served_timeline, "cluster serve")
