"""What the tests of the served cluster (``cluster serve``) over plain HTTP share: requests that check the
simulated-time header, waits that poll for a state, the objects they post (pods, Bindings, Jobs, gated pods), a
served cluster in virtual time, and a workload run both in the simulator and through the API (:func:`both`)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from typing import Any

import orjson

from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.clock import Clock, VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.command import schedulers_for
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import JobRecord, RunRecord
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.model import Workload

ORIGIN = 1_700_000_000.0
"""The virtual clock's start (2023-11-14T22:13:20Z)."""
PODS = "/api/v1/namespaces/default/pods"


def call(server: ApiServer, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
    data = None if body is None else orjson.dumps(body)
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["X-Kubeflux-Time"], "every answer carries the simulated time"
        return orjson.loads(response.read())


def now(server: ApiServer) -> float:
    return float(call(server, "GET", "/kubeflux/time")["now"])


def pi(name: str, seconds: int, scheduler: str = "kubeflux") -> dict[str, Any]:
    """One of the seed demo's pods: 8 cores, done after ``seconds``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "pi", "image": "perl:5.34", "resources": {"requests": {"cpu": "8"}}}],
        },
    }


def eventually(check: Callable[[], bool], what: str) -> None:
    """Poll until ``check()`` holds (the limit only stops a broken server from hanging the suite). Every request
    restarts the settle period (50 ms), so a client polling faster would hold the clock: poll every 250 ms."""
    give_up = time.monotonic() + 300
    while not check():
        assert time.monotonic() < give_up, f"{what} never happened"
        time.sleep(0.25)


def phases(server: ApiServer) -> dict[str, str]:
    return {p["metadata"]["name"]: p["status"].get("phase", "") for p in call(server, "GET", PODS)["items"]}


def binding(name: str) -> dict[str, Any]:
    """A Binding of pod ``name`` to ``node-0000``."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"kind": "Node", "name": "node-0000"},
    }


JOBS = "/apis/batch/v1/namespaces/default/jobs"


def served(nodes: int = 2, cores: int = 8, memory: str = "64Gi", scheduler: str = "kube-default") -> ApiServer:
    """A served cluster of ``nodes`` alike in virtual time, with its kubelet and Job controller; ``scheduler``
    (kube-default: ``default-scheduler``) schedules the pods. The caller stops it."""
    return ApiServer(
        uniform_cluster(nodes, cores, memory),
        kubelet=True,
        controllers=True,
        schedulers=[create(scheduler)],
        clock=VirtualClock(ORIGIN),
    ).start()


def job(name: str, run: str, *, exit_code: int = 0, **spec: Any) -> dict[str, Any]:
    """A ``batch/v1`` Job whose pods (4 cores) run ``run`` (e.g. ``"30s"``) and exit with ``exit_code``."""
    annotations = {"pod-complete.stage.kwok.x-k8s.io/delay": run, "sim.kubeflux.io/exit-code": str(exit_code)}
    container = {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "4"}}}
    template = {"metadata": {"annotations": annotations}, "spec": {"restartPolicy": "Never", "containers": [container]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {**spec, "template": template}}


def conditions(server: ApiServer, name: str) -> list[tuple[str, str]]:
    status = call(server, "GET", f"{JOBS}/{name}").get("status") or {}
    return [(c["type"], c.get("reason", "")) for c in status.get("conditions") or ()]


def both(
    workload: Workload, nodes: list[Node], scheduler: str = "kubeflux", after: Callable[[ApiServer], None] | None = None
) -> tuple[RunRecord, RunRecord]:
    """The run in the simulator, and the run through the API in virtual time (fresh schedulers for each); ``after``
    looks at the served cluster once its run is done."""
    schedulers, primary = schedulers_for(scheduler, workload)
    simulated = simulate(workload, nodes, schedulers, primary=primary, label=scheduler)
    return simulated, replayed(workload, nodes, scheduler, VirtualClock(), after, settle=0.0)


def replayed(
    workload: Workload,
    nodes: list[Node],
    scheduler: str,
    clock: Clock,
    after: Callable[[ApiServer], None] | None = None,
    serving: Callable[[ApiServer], None] | None = None,
    **server: Any,
) -> RunRecord:
    """The run of ``workload`` through the API on ``clock`` to its end (``cluster serve --until-done``), with fresh
    schedulers; ``after`` looks at the served cluster once its run is done; ``serving`` does so while it still
    serves (``cluster serve`` without ``--until-done``: its API answers requests); ``server``: more of
    :class:`ApiServer`'s settings."""
    schedulers, primary = schedulers_for(scheduler, workload)
    api = ApiServer(
        nodes,
        kubelet=True,
        controllers=True,
        schedulers=list(schedulers.values()),
        clock=clock,
        workload=workload,
        primary=primary,
        until_done=serving is None,
        **server,
    ).start()
    try:
        if serving is None:
            assert api.join(timeout=900), "the replay never finished"
        else:
            eventually(lambda: api.replay is not None and api.replay.done, "the replay's end")
            serving(api)
        assert api.replay is not None
        run = api.replay.run_record(scheduler, 0.0)
        if after is not None:
            after(api)
    finally:
        api.stop()
    return run


def schedule(run: RunRecord) -> list[tuple[object, ...]]:
    def row(job: JobRecord) -> tuple[object, ...]:
        times = (job.first_bind_time, job.starting_time, job.finish_time)
        return (job.job_id, job.final_state.value, *times, tuple(job.allocated_resources))

    return [row(job) for job in run.jobs]


def gated_pod(name: str, scheduler: str, gates: list[str]) -> dict[str, Any]:
    """A pod of 2 cores for ``scheduler`` with the scheduling ``gates`` named."""
    container = {"name": "main", "image": "busybox:1.36", "resources": {"requests": {"cpu": "2"}}}
    spec = {"schedulerName": scheduler, "containers": [container], "schedulingGates": [{"name": g} for g in gates]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def scheduled(server: ApiServer, name: str) -> tuple[str, str, str]:
    """Pod ``name``'s node, and its ``PodScheduled`` condition's status and reason (empty when absent)."""
    pod = call(server, "GET", f"{PODS}/{name}")
    found = [c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"]
    return pod["spec"].get("nodeName", ""), *((found[0]["status"], found[0].get("reason", "")) if found else ("", ""))
