"""A gang's alike ranks placed by one engine match (one shared engine job) in ``kubeflux serve``, against the served
cluster over real HTTP: ranks deleted one by one with the official client free their own cores at once, and the
last one frees the rest."""

from __future__ import annotations

import json
from typing import Any

from .conftest import Cluster, create_podgroup, eventually, no_allocations, pod

COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"


def _where(p: dict[str, Any]) -> tuple[str, list[str]]:
    record = json.loads(p["metadata"]["annotations"]["kubeflux.io/allocation"])
    return record["node"], record["cores"]


def _bound(pods: dict[str, dict[str, Any]], *names: str) -> bool:
    return all(name in pods and bool(pods[name]["spec"].get("nodeName")) for name in names)


def test_ranks_deleted_one_by_one_free_their_cores_to_the_next_pods(two_nodes: Cluster) -> None:
    cluster = two_nodes
    ranks = [f"rank-{k}" for k in range(6)]
    create_podgroup(cluster, "scheduling.x-k8s.io/v1alpha1", "mpi", {"minMember": 6})
    with cluster.serve() as serve:
        for name in ranks:
            cluster.create(pod(name, "4", run=None, labels={COSCHEDULING_LABEL: "mpi"}))
        cluster.wait_for(lambda pods: _bound(pods, *ranks))
        pods = cluster.pods()
        placed = {name: _where(p) for name, p in pods.items()}
        jobs = {json.loads(p["metadata"]["annotations"]["kubeflux.io/allocation"])["jobid"] for p in pods.values()}
        assert len(jobs) == 1  # one engine match placed them
        assert [node for node, _ in placed.values()].count(placed["rank-0"][0]) == 4  # four on the first node
        eventually(lambda: not serve.cores[0].queue.by_pod)
        cluster.core.delete_namespaced_pod("rank-0", "default", grace_period_seconds=0)
        eventually(lambda: len(serve.cores[0].books.allocations) == 5)
        cluster.create(pod("after", "4", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "after"))
        assert _where(cluster.pods()["after"]) == placed["rank-0"]  # the deleted rank's cores, as one by one
        for name in [*ranks[1:], "after"]:
            cluster.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
        eventually(no_allocations(serve))
        cluster.create(pod("whole-a", "16", run=None))
        cluster.create(pod("whole-b", "16", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "whole-a", "whole-b"))
        assert serve.cores[0].books.shared == {}
