"""What ``serve`` watches and owns: PodGroup gangs through the API, a cluster without the PodGroup CRD, the
namespaces it schedules, several scheduler names, and the clock it takes from the simulated cluster."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubeflux.kube.config import parse_config
from kubeflux.kube.reflector import SYNCED, RawEvent, Resource, watched_resources
from kubeflux.kube.serve import Serve, choose_clock

from .conftest import CEILING, Cluster, client, condition, create_podgroup, eventually, pod, start_cluster


def _podgroup(cluster: Cluster, name: str, size: int) -> None:
    create_podgroup(cluster, "scheduling.x-k8s.io/v1alpha1", name, {"minMember": size})


def _member(name: str, group: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu, run=None, labels={"scheduling.x-k8s.io/pod-group": group})


def test_a_gang_is_placed_all_at_once_and_one_too_big_waits_whole(two_nodes: Cluster) -> None:
    cluster = two_nodes
    _podgroup(cluster, "fits", 4)
    _podgroup(cluster, "too-big", 3)
    with cluster.serve() as serve:
        for index in range(4):
            cluster.create(_member(f"fits-{index}", "fits", "8"))
        cluster.wait_for(lambda pods: all(pods[f"fits-{i}"]["spec"].get("nodeName") for i in range(4)))
        for index in range(3):  # 3 x 16 cores on 2 x 16, 32 of them taken: none of it may run
            cluster.create(_member(f"big-{index}", "too-big", "16"))
        cluster.wait_for(
            lambda pods: all((condition(pods[f"big-{i}"]) or {}).get("reason") == "Unschedulable" for i in range(3))
        )
        pods = cluster.pods()
        assert not any(pods[f"big-{i}"]["spec"].get("nodeName") for i in range(3))
        eventually(lambda: serve.bound == 4)  # counted once its binder thread has the reply


def _native_member(name: str, group: str, cpu: str) -> dict[str, Any]:
    member = pod(name, cpu, run=None)
    member["spec"]["schedulingGroup"] = {"podGroupName": group}
    return member


def test_kubernetes_own_gang_api_a_podgroup_with_a_gang_policy_waits_for_min_count_then_binds_at_once(
    tmp_path: Path,
) -> None:
    """Kubernetes 1.35+'s PodGroup (scheduling.k8s.io, v1alpha2 in 1.36, behind the GenericWorkload gate): pods
    name it in ``spec.schedulingGroup``; ``gang.minCount`` of them are placed together or none; ``basic`` places
    each alone."""
    cluster = start_cluster(tmp_path, nodes=2, generic_workload=True)
    try:
        _native_gangs(cluster)
    finally:
        cluster.api.close()
        cluster.server.stop()


def _native_gangs(cluster: Cluster) -> None:
    for name, policy in (("ranks", {"gang": {"minCount": 3}}), ("loose", {"basic": {}})):
        create_podgroup(cluster, "scheduling.k8s.io/v1alpha2", name, {"schedulingPolicy": policy})
    with cluster.serve() as serve:
        for index in range(2):
            cluster.create(_native_member(f"rank-{index}", "ranks", "8"))
        cluster.create(_native_member("loose-0", "loose", "8"))  # basic: bound alone, the gang still short of 3
        cluster.wait_for(lambda pods: bool(pods["loose-0"]["spec"].get("nodeName")))
        eventually(lambda: serve.binder.pending == 0)
        pods = cluster.pods()
        assert not any(pods[f"rank-{i}"]["spec"].get("nodeName") for i in range(2))
        cluster.create(_native_member("rank-2", "ranks", "8"))
        cluster.wait_for(lambda pods: all(pods[f"rank-{i}"]["spec"].get("nodeName") for i in range(3)))
        eventually(lambda: serve.bound == 4)  # counted once its binder thread has the reply
    with pytest.raises(client.ApiException) as refused:  # the served cluster validates the policy
        create_podgroup(
            cluster, "scheduling.k8s.io/v1alpha2", "neither", {"schedulingPolicy": {"gang": {"minCount": 0}}}
        )
    assert refused.value.status == 422 and "spec.schedulingPolicy.gang.minCount" in str(refused.value.body)


def test_a_cluster_without_the_podgroup_crd_is_served_all_the_same(cluster: Cluster) -> None:
    custom = client.CustomObjectsApi(cluster.api)

    def missing_group(**query: Any) -> Any:
        return custom.list_cluster_custom_object("scheduling.example.com", "v1", "nothings", **query)

    resources = watched_resources(cluster.api)
    assert [r.kind for r in resources[1:3]] == ["PodGroup", "PodGroup"]  # coscheduling's and Kubernetes' own
    resources[1] = resources[2] = Resource("PodGroup", missing_group, optional=True)
    config = parse_config({"watch": {"timeoutSeconds": 30}})
    serve = Serve(config, cluster.api, resources=resources).start()
    try:
        cluster.create(pod("a", "8", run=None))
        cluster.wait_for(lambda pods: bool(pods["a"]["spec"].get("nodeName")))
        assert serve.reflectors[1].relists == serve.reflectors[2].relists == 0  # never listed: not served
    finally:
        serve.stop()


def test_every_kind_is_listed_at_once_but_the_pods_which_wait_for_the_others(cluster: Cluster) -> None:
    """A slow list (the namespaces', answered 1 s late) delays no other kind's, and the pods' list begins only once
    every other kind is in: the core never reads a pod before the nodes, groups or claims it may name."""
    cluster.create(pod("a", "8", run=None))
    lists: list[tuple[str, str, float]] = []

    def noted(resource: Resource) -> Resource:
        def call(**query: Any) -> Any:
            if query.get("watch"):
                return resource.call(**query)
            lists.append((resource.describe(), "asked", time.monotonic()))
            if resource.kind == "Namespace":
                time.sleep(1.0)
            try:
                return resource.call(**query)
            finally:  # (an optional kind not served is answered 404)
                lists.append((resource.describe(), "answered", time.monotonic()))

        return dataclasses.replace(resource, call=call)

    resources = [noted(resource) for resource in watched_resources(cluster.api)]
    serve = Serve(parse_config({"watch": {"timeoutSeconds": 30}}), cluster.api, resources=resources).start()
    try:
        cluster.wait_for(lambda pods: bool(pods["a"]["spec"].get("nodeName")))
    finally:
        serve.stop()
    first = {(kind, what): when for kind, what, when in reversed(lists)}
    namespaces = first["Namespace", "answered"]
    others = {kind for kind, _, _ in lists} - {"Pod", "Namespace"}
    assert len(others) >= 10  # nodes, both PodGroups, budgets, storage and device kinds
    assert all(first[kind, "answered"] < namespaces for kind in others)  # none waited for the slow one
    assert first["Pod", "asked"] > namespaces


def test_serve_is_synced_once_the_loop_has_taken_every_lists_end_whatever_the_reflectors_flags_say(
    cluster: Cluster,
) -> None:
    """A reflector says SYNCED on the queue, then sets its own flag: the loop may take the word before the flag is
    set. Here the pods' reflector never gets that far (its list is held), and the words are given to the loop as it
    would take them: serve is synced on the words it took, the pods' list having begun after the nodes'."""
    held = threading.Event()
    resources = watched_resources(cluster.api)
    nodes, pods = (next(r for r in resources if r.kind == kind) for kind in ("Node", "Pod"))

    def held_list(**query: Any) -> Any:
        held.wait(CEILING)
        return pods.call(**query)

    serve = Serve(
        parse_config({"watch": {"timeoutSeconds": 30}}),
        cluster.api,
        resources=[nodes, dataclasses.replace(pods, call=held_list)],
    )
    try:
        now = time.time()
        serve._observe(RawEvent("Node", SYNCED, {}), now)
        assert serve.reflectors[1].relists == 0 and not serve.synced.is_set()
        serve._observe(RawEvent("Pod", SYNCED, {}), now)
        assert not serve.reflectors[1].synced.is_set()  # its list is still held
        assert serve.synced.is_set()
    finally:
        held.set()
        serve.stop()


def test_only_the_configured_namespaces_are_scheduled_but_every_pod_is_counted(cluster: Cluster) -> None:
    client.CoreV1Api(cluster.api).create_namespace({"metadata": {"name": "hpc"}})
    cluster.create(pod("elsewhere", "8", run=None), namespace="default")
    config = parse_config({"namespaces": ["hpc"], "watch": {"timeoutSeconds": 30}})
    with cluster.serve(config) as serve:
        cluster.create(pod("mine", "8", run=None), namespace="hpc")
        cluster.wait_for(lambda pods: bool(pods["mine"]["spec"].get("nodeName")), namespace="hpc")
        cluster.bind("elsewhere", "node-0000")  # bound by someone else: its 8 cores are counted
        cluster.create(pod("third", "8", run=None), namespace="hpc")
        cluster.wait_for(lambda pods: (condition(pods["third"]) or {}).get("reason") == "Unschedulable", "hpc")
        eventually(lambda: serve.bound == 1)  # counted once its binder thread has the reply
        elsewhere = condition(cluster.pods()["elsewhere"])  # serve never wrote to a pod outside its namespaces
        assert elsewhere is not None and elsewhere["status"] == "True"


def test_two_scheduler_names_each_own_their_pods(cluster: Cluster) -> None:
    config = parse_config({"schedulers": [{"name": "kubeflux"}, {"name": "kubeflux-fcfs", "queuePolicy": "fcfs"}]})
    with cluster.serve(config) as serve:
        cluster.create(pod("a", "8", run=None))
        cluster.create(pod("b", "8", run=None, scheduler="kubeflux-fcfs"))
        cluster.wait_for(lambda pods: all(p["spec"].get("nodeName") for p in pods.values()))
        eventually(lambda: serve.bound == 2)  # counted once its binder thread has the reply
        assert serve.binder.drain(CEILING)  # the Scheduled events follow the Bindings once they are all sent
        events = {
            e["regarding"]["name"]: e["reportingController"] for e in cluster.events() if e["reason"] == "Scheduled"
        }
        assert events == {"a": "kubeflux", "b": "kubeflux-fcfs"}


def test_the_clock_is_the_simulated_clusters_when_it_publishes_one(cluster: Cluster) -> None:
    clock = choose_clock(cluster.api, "auto")
    assert clock.speed == cluster.server.clock.speed
    assert abs(clock() - cluster.server.clock()) < 60 * clock.speed  # the same time, give or take a request
    assert choose_clock(cluster.api, "wall").speed == 1.0
    assert abs(choose_clock(cluster.api, "wall")() - time.time()) < 60


def test_a_gang_waiting_for_its_members_is_told_the_newest_reason_without_an_event_storm(cluster: Cluster) -> None:
    _podgroup(cluster, "wide", 10)
    config = parse_config({"binding": {"unschedulableIntervalSeconds": 3}})
    names = [f"wide-{index}" for index in range(9)]  # 9 of its 10 members: it waits for the tenth
    with cluster.serve(config):
        for name in names:
            cluster.create(_member(name, "wide", "1"))

        def newest(pods: dict[str, dict[str, Any]]) -> bool:
            messages = [(condition(pods[name]) or {}).get("message", "") for name in names]
            return all("has 9 of its minMember 10 pods" in m for m in messages)

        cluster.wait_for(newest)

        def told() -> Counter[str]:
            return Counter(e["regarding"]["name"] for e in cluster.events() if e["reason"] == "FailedScheduling")

        # each pod's event follows its condition from the same binder thread: it may still be on its way
        eventually(lambda: set(told()) == set(names))
        counts = told()
        # told each time a member arrived, the first would hear 9 times and all of them 45 times
        assert sum(counts.values()) < 45
