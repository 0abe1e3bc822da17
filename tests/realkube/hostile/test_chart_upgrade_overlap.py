"""Hostile review: the Helm chart at its defaults (one replica, no leader election) runs two schedulers at once on
every ``helm upgrade`` that changes the config.

The config checksum annotation rolls the pods on a config change ("a new config rolls the pods") and the Deployment
has no ``strategy``, so Kubernetes' default applies: RollingUpdate, maxSurge 25% (1 of 1), maxUnavailable 25% (0 of
1). The Deployment controller starts the new replica and only deletes the old one once the new one is available;
serve's readiness (``/readyz``) is "informers synced", i.e. already scheduling. Without a Lease both replicas bind
the same pods meanwhile: two serve replicas without leader election over-commit a node within seconds on the real
control plane (a node of 4000m held 7000m; ~80 Bindings refused each). The chart refuses ``replicas: 2`` without
leader election for exactly this reason, yet its default upgrade path makes two.

Measured here on the real kube-controller-manager (KWOK runs the pods): the new replica is Running while the old one
is Running and not yet terminating.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import watch

from kubeflux.controlplane import Binaries, ControlPlane
from tests.kube._deploy import CHART

from ..conftest import Api, eventually

NAMESPACE = "kf-roll"


def _helm(binaries: Binaries, home: Path, *args: str) -> None:
    env = {**os.environ, **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}}
    subprocess.run([str(binaries.path("helm")), *args], env=env, check=True, capture_output=True, timeout=120)


def _scheduling(p: dict[str, Any]) -> bool:
    return p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")


def test_a_config_change_never_runs_two_replicas_without_leader_election(
    plane: ControlPlane, api: Api, binaries: Binaries, tmp_path: Path
) -> None:
    plane.start_scheduler()  # the chart's own pod is kube-scheduler's
    names = plane.add_kwok_nodes(1, cpu="4", prefix="roll-")
    common = ["-n", NAMESPACE, "--kubeconfig", str(plane.kubeconfig)]
    _helm(binaries, tmp_path, "install", "kf", str(CHART), "--create-namespace", *common)
    eventually(lambda: any(_scheduling(p) for p in api.pods(NAMESPACE).values()), lambda: "the first replica runs")
    live: dict[str, bool] = {}
    most = [0]

    def follow() -> None:
        for event in watch.Watch().stream(api.core.list_namespaced_pod, NAMESPACE, timeout_seconds=20):
            p = event["raw_object"]
            if event["type"] != "DELETED" and _scheduling(p):
                live[p["metadata"]["name"]] = True
            else:
                live.pop(p["metadata"]["name"], None)
            most[0] = max(most[0], len(live))

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    time.sleep(1.0)  # the watch's initial list
    try:
        _helm(binaries, tmp_path, "upgrade", "kf", str(CHART), *common, "--set", "config.namespaces={team-a}")
        watcher.join(30)
        assert most[0] <= 1, f"{most[0]} kubeflux replicas ran at once, neither holding a Lease"
    finally:
        _helm(binaries, tmp_path, "uninstall", "kf", *common)
        plane.kubectl("delete", "node", "--wait=false", *names, check=False)
