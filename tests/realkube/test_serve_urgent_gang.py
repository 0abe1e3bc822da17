"""Issue 31's acceptance on the real control plane: ``kubeflux serve`` (its own core, preemption on by default) with
two low-priority gangs filling four KWOK nodes, one of them guarded by a PodDisruptionBudget, and an urgent gang
arriving. kubeflux evicts the unguarded gang whole through the Eviction API (each victim gets the real server's
``DisruptionTarget`` condition and kubeflux's ``Preempted`` event), leaves the guarded one running, and binds the
urgent gang whole on the freed nodes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.scheduler.objects import POD_GROUP_LABEL
from tests.realkube._serving import kwok_nodes, manifest, namespace, start_serve, stop_serve

from .conftest import Api, eventually, phase, running_plane


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    """The control plane with coscheduling's PodGroup CRD."""
    with running_plane(binaries, tmp_path / "plane", crds=True) as started:
        yield started


def _priority_class(api: Api, name: str, value: int) -> None:
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    client.SchedulingV1Api(api.client).create_priority_class(body, _preload_content=False)


def _gang(api: Api, ns: str, name: str, size: int, priority_class: str) -> list[dict[str, Any]]:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": size},
    }
    client.CustomObjectsApi(api.client).create_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", ns, "podgroups", body, _preload_content=False
    )
    members = []
    for index in range(size):
        pod = manifest(f"{name}-{index}", "8")
        pod["metadata"]["labels"] = {POD_GROUP_LABEL: name, "app": name}
        pod["spec"]["priorityClassName"] = priority_class
        pod["spec"]["terminationGracePeriodSeconds"] = 0  # KWOK would wait out the 30 s default
        members.append(api.create_pod(ns, pod))
    return members


def _running(api: Api, ns: str, *names: str) -> bool:
    pods = api.pods(ns)
    return all(name in pods and phase(pods[name]) == "Running" for name in names)


def test_an_urgent_gang_evicts_the_unguarded_gang_whole_through_the_eviction_api(plane: ControlPlane, api: Api) -> None:
    suffix = "urgent-gang"
    _priority_class(api, f"low-{suffix}", 0)
    _priority_class(api, f"urgent-{suffix}", 1000)
    try:
        with namespace(api, "urgent") as ns, kwok_nodes(plane, api, "gang", 4, "8"):
            budget = {"metadata": {"name": "guard"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {}}}}
            budget["spec"]["selector"]["matchLabels"] = {"app": "guarded"}
            client.PolicyV1Api(api.client).create_namespaced_pod_disruption_budget(ns, budget, _preload_content=False)
            serve = start_serve(plane.kubeconfig, ns)
            try:
                _gang(api, ns, "plain", 2, f"low-{suffix}")
                eventually(lambda: _running(api, ns, "plain-0", "plain-1"), lambda: "the plain gang runs")
                _gang(api, ns, "guarded", 2, f"low-{suffix}")  # started last: it would lose least, but its budget
                eventually(lambda: _running(api, ns, "guarded-0", "guarded-1"), lambda: "the guarded gang runs")
                freed = {api.pods(ns)[name]["spec"]["nodeName"] for name in ("plain-0", "plain-1")}
                urgent = _gang(api, ns, "urgent", 2, f"urgent-{suffix}")
                eventually(lambda: _running(api, ns, "urgent-0", "urgent-1"), lambda: "the urgent gang runs")
                pods = api.pods(ns)
                assert "plain-0" not in pods and "plain-1" not in pods  # evicted whole
                assert _running(api, ns, "guarded-0", "guarded-1")  # its budget allows no disruption
                assert {pods[p["metadata"]["name"]]["spec"]["nodeName"] for p in urgent} == freed

                def preempted() -> list[str]:  # events are written after the evictions, by serve's event sink
                    return sorted(e["regarding"]["name"] for e in api.events(ns) if e.get("reason") == "Preempted")

                eventually(lambda: preempted() == ["plain-0", "plain-1"], lambda: f"Preempted events: {preempted()}")
                evictions = serve.metrics.registry.get_sample_value(
                    "kubeflux_evictions_total", {"scheduler": "kubeflux", "result": "evicted"}
                )
                assert evictions == 2
            finally:
                stop_serve(serve)
    finally:
        for name in (f"low-{suffix}", f"urgent-{suffix}"):
            client.SchedulingV1Api(api.client).delete_priority_class(name, _preload_content=False)
