"""What the tests of the served cluster through the official client share: a pod for the simulated kubelet, and a
wait that follows the pods with a watch until a state holds."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson

from .conftest import kubernetes, pod_manifest

RUN_TIME = "pod-complete.stage.kwok.x-k8s.io/delay"
EXIT_CODE = "sim.kubeflux.io/exit-code"


def kwok_pod(name: str, cpu: str = "8", run: str | None = None, exit_code: int = 0) -> dict[str, Any]:
    """A pod of ``cpu`` cores for kubeflux that runs ``run`` (absent: until deleted) and exits with ``exit_code``."""
    manifest = pod_manifest(name, cpu=cpu, schedulerName="kubeflux", restartPolicy="Never")
    annotations: dict[str, str] = {}
    if run is not None:
        annotations[RUN_TIME] = run
    if exit_code:
        annotations[EXIT_CODE] = str(exit_code)
    manifest["metadata"]["annotations"] = annotations  # type: ignore[index]
    return manifest


def watch_until(core: Any, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Follow the pods until ``check`` holds for the map name → raw pod (a minute at most: a guard, not a timing)."""
    listed = core.list_namespaced_pod("default", _preload_content=False)
    state = orjson.loads(listed.data)
    pods = {p["metadata"]["name"]: p for p in state["items"]}
    if check(pods):
        return pods
    done = threading.Event()
    watch = kubernetes.watch.Watch()
    timer = threading.Timer(60, watch.stop)
    timer.start()
    try:
        for event in watch.stream(
            core.list_namespaced_pod,
            "default",
            deserialize=False,
            resource_version=state["metadata"]["resourceVersion"],
        ):
            obj = event["object"]
            if event["type"] == "DELETED":
                pods.pop(obj["metadata"]["name"], None)
            elif event["type"] in ("ADDED", "MODIFIED"):
                pods[obj["metadata"]["name"]] = obj
            if check(pods):
                done.set()
                watch.stop()
    finally:
        timer.cancel()
    assert done.is_set() or check(pods), f"pods never reached the expected state: {pods}"
    return pods


def phase_of(pods: dict[str, Any], name: str) -> str:
    return str(pods.get(name, {}).get("status", {}).get("phase", ""))
