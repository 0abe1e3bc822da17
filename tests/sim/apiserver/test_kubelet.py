"""The served cluster's simulated kubelet and in-process scheduler, seen through the official client.

No test depends on the machine's speed: stage delays are 0 s or absent, and tests wait for states (with a guard
of a minute), never for durations."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.wallclock import WallClock
from tests.sim.apiserver._client import kwok_pod, phase_of, watch_until

from .conftest import kubernetes

client = kubernetes.client


def _serve(tmp_path: Path, nodes: int, schedulers: list[str]) -> ApiServer:
    server = ApiServer(
        uniform_cluster(nodes, 16, "64Gi"),
        settings=ServerSettings(bookmark_seconds=0.2),
        kubelet=True,
        schedulers=[create(name) for name in schedulers],
    ).start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    return server


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    server = _serve(tmp_path, 1, ["kubeflux"])
    api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        yield client.CoreV1Api(api)
    finally:
        api.close()
        server.stop()


def test_a_bound_pod_runs_then_succeeds_or_fails_with_its_exit_code(cluster: Any) -> None:
    cluster.create_namespaced_pod("default", kwok_pod("ok", cpu="4", run="0s"))
    cluster.create_namespaced_pod("default", kwok_pod("segv", cpu="4", run="0s", exit_code=139))
    pods = watch_until(cluster, lambda p: phase_of(p, "ok") == "Succeeded" and phase_of(p, "segv") == "Failed")
    ok, segv = pods["ok"], pods["segv"]
    assert ok["spec"]["nodeName"] == "node-0000"
    assert [c["type"] for c in ok["status"]["conditions"]] == [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
    ]
    terminated = segv["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (139, "Error")
    assert ok["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert "startTime" in ok["status"]


def test_the_seed_demo_through_the_api(cluster: Any) -> None:
    """One node of 16 cores; pods of 8 cores: one runs on, one segfaults, the third waits for its room."""
    cluster.create_namespaced_pod("default", kwok_pod("long"))
    cluster.create_namespaced_pod("default", kwok_pod("segv", run="0s", exit_code=139))
    cluster.create_namespaced_pod("default", kwok_pod("next"))
    pods = watch_until(cluster, lambda p: phase_of(p, "next") == "Running" and phase_of(p, "segv") == "Failed")
    assert phase_of(pods, "long") == "Running"
    assert {pods[n]["spec"]["nodeName"] for n in ("long", "segv", "next")} == {"node-0000"}
    events = cluster.list_namespaced_event("default", field_selector="reason=Scheduled").items
    assert sorted(e.involved_object.name for e in events) == ["long", "next", "segv"]


def test_a_pod_larger_than_any_node_is_marked_unschedulable(cluster: Any) -> None:
    cluster.create_namespaced_pod("default", kwok_pod("huge", cpu="32"))
    pods = watch_until(
        cluster,
        lambda p: any(
            c.get("reason") == "Unschedulable" for c in p.get("huge", {}).get("status", {}).get("conditions", [])
        ),
    )
    condition = pods["huge"]["status"]["conditions"][0]
    assert condition["type"] == "PodScheduled" and condition["status"] == "False"
    assert not pods["huge"]["spec"].get("nodeName")


def test_a_running_pod_deleted_gracefully_is_confirmed_by_its_kubelet(cluster: Any) -> None:
    cluster.create_namespaced_pod("default", kwok_pod("forever"))
    watch_until(cluster, lambda p: phase_of(p, "forever") == "Running")
    cluster.delete_namespaced_pod("forever", "default")
    watch_until(cluster, lambda p: "forever" not in p)


def test_with_speed_stage_delays_and_timestamps_are_in_simulated_time(tmp_path: Path) -> None:
    """At x3600, a pod of one simulated hour ends after about a wall second, an hour after it started."""
    server = ApiServer(
        uniform_cluster(1, 16, "64Gi"),
        kubelet=True,
        schedulers=[create("kubeflux")],
        clock=WallClock(speed=3600.0),
    ).start()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", kwok_pod("hour", run="1h"))
        pods = watch_until(core, lambda p: phase_of(p, "hour") == "Succeeded")
        state = pods["hour"]["status"]["containerStatuses"][0]["state"]["terminated"]
        ran = parse_timestamp(state["finishedAt"]) - parse_timestamp(state["startedAt"])
        assert ran >= 3600 - 1, "one simulated hour (timestamps are whole seconds)"
        with urllib.request.urlopen(f"{server.url}/kubeflux/time", timeout=60) as response:
            assert orjson.loads(response.read())["speed"] == 3600.0
    finally:
        api.close()
        server.stop()


def test_each_node_renews_its_lease_in_kube_node_lease(cluster: Any, tmp_path: Path) -> None:
    api = kubernetes.config.new_client_from_config(config_file=str(tmp_path / "kubeconfig"))
    try:
        leases = client.CoordinationV1Api(api).list_namespaced_lease("kube-node-lease").items
    finally:
        api.close()
    assert [(lease.metadata.name, lease.spec.holder_identity) for lease in leases] == [("node-0000", "node-0000")]
    assert leases[0].spec.renew_time is not None
    assert leases[0].metadata.owner_references[0].kind == "Node"


def test_the_cluster_knows_a_pod_from_its_creation_and_binds_it_with_its_binding() -> None:
    from tests.sim.apiserver._served import PODS, call, eventually

    nodes = uniform_cluster(3, 4, "8Gi")
    with ApiServer(nodes, kubelet=True) as server:
        assert server.kubelet is not None
        cluster = server.kubelet.cluster
        # every node from the start, in the API's order: the core ids are those simulate gives the same nodes
        assert [node.name for node in cluster.nodes] == [node.name for node in nodes]
        manifest = kwok_pod("p", cpu="2", run="10ms")
        manifest["spec"]["schedulerName"] = "nobody"  # type: ignore[index]
        call(server, "POST", PODS, manifest)
        eventually(lambda: "default/p" in cluster.pods, "the pod in the cluster")
        sp = cluster.pods["default/p"]
        assert sp.bound_at is None and cluster.jobs[sp.job_index].first_bind is None
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}}
        call(server, "POST", f"{PODS}/p/binding", {**binding, "target": {"kind": "Node", "name": nodes[2].name}})
        eventually(lambda: call(server, "GET", f"{PODS}/p")["status"]["phase"] == "Succeeded", "the pod succeeded")
        assert sp.pod.node_name == nodes[2].name and sorted(sp.cores) == [8, 9]  # the third node's first cores
