"""The PodGroup controller's status rule, as a table, and a gang run through the served cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeflux.sim.apiserver.controllers import podgroup_status
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._client import kwok_pod, phase_of, watch_until

from .conftest import kubernetes

NOW = "2026-01-01T00:00:00Z"


def _group(phase: str = "", min_member: int = 2) -> dict[str, Any]:
    status = {"phase": phase} if phase else {}
    return {"metadata": {"name": "g"}, "spec": {"minMember": min_member}, "status": status}


def _pods(*states: tuple[str, bool]) -> list[dict[str, Any]]:
    return [{"spec": {"nodeName": "n" if bound else ""}, "status": {"phase": phase}} for phase, bound in states]


@pytest.mark.parametrize(
    ("phase", "pods", "expected"),
    [
        pytest.param("", _pods(), "Pending", id="new-group"),
        pytest.param("Pending", _pods(("Pending", False)), "Pending", id="too-few-pods"),
        pytest.param("Pending", _pods(("Pending", False), ("Pending", False)), "PreScheduling", id="enough-pods"),
        pytest.param("PreScheduling", _pods(("Pending", True), ("Pending", False)), "Scheduling", id="first-bound"),
        pytest.param("Scheduling", _pods(("Pending", True), ("Pending", True)), "Scheduled", id="all-bound"),
        pytest.param("Scheduled", _pods(("Running", True), ("Succeeded", True)), "Running", id="running"),
        pytest.param("Running", _pods(("Succeeded", True), ("Succeeded", True)), "Finished", id="finished"),
        pytest.param("Running", _pods(("Failed", True), ("Running", True)), "Failed", id="one-failed"),
        pytest.param("Running", _pods(), "Pending", id="pods-gone"),
    ],
)
def test_podgroup_phase(phase: str, pods: list[dict[str, Any]], expected: str) -> None:
    assert podgroup_status(_group(phase), pods, NOW)["phase"] == expected


def test_counts_are_kept_once_scheduling() -> None:
    status = podgroup_status(_group("Running"), _pods(("Running", True), ("Failed", True), ("Succeeded", True)), NOW)
    assert (status["running"], status["failed"], status["succeeded"], status["scheduled"]) == (1, 1, 1, 3)


def test_a_gang_runs_to_finished_through_the_api(tmp_path: Path) -> None:
    server = ApiServer(
        uniform_cluster(2, 16, "64Gi"), kubelet=True, controllers=True, schedulers=[create("kubeflux")]
    ).start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        custom = kubernetes.client.CustomObjectsApi(api)
        core = kubernetes.client.CoreV1Api(api)
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang"},
            "spec": {"minMember": 2},
        }
        custom.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", group)
        for index in range(2):
            pod = kwok_pod(f"gang-{index}", cpu="16", run="0s")
            pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "gang"}  # type: ignore[index]
            core.create_namespaced_pod("default", pod)
        pods = watch_until(
            core, lambda p: phase_of(p, "gang-0") == "Succeeded" and phase_of(p, "gang-1") == "Succeeded"
        )
        assert {pods[f"gang-{i}"]["spec"]["nodeName"] for i in range(2)} == {"node-0000", "node-0001"}

        def finished() -> bool:
            got = custom.get_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1", "default", "podgroups", "gang")
            return bool(got.get("status", {}).get("phase") == "Finished")

        watch = kubernetes.watch.Watch()
        if not finished():
            for _ in watch.stream(
                custom.list_namespaced_custom_object,
                "scheduling.x-k8s.io",
                "v1alpha1",
                "default",
                "podgroups",
                timeout_seconds=60,
            ):
                if finished():
                    watch.stop()
        assert finished()
    finally:
        api.close()
        server.stop()
