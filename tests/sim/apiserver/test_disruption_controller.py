"""The served cluster's disruption controller keeps PodDisruptionBudgets' counts as kube-controller-manager's does,
and the Eviction API grants and refuses evictions from them (without it every guarded eviction is a 429)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.sim.apiserver.disruption import DisruptionController
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.eviction import evict
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store

Object = dict[str, Any]


class Cluster:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = Store(default_registry())
        self.controller = DisruptionController(self.store, self.loop)
        pods, budgets = (
            self.store.registry.find("", "v1", "pods"),
            self.store.registry.find("policy", "v1", "poddisruptionbudgets"),
        )
        assert pods is not None and budgets is not None
        self.pods, self.budgets = pods, budgets

    def settle(self) -> None:
        for _ in range(5):
            self.loop.run_until_complete(asyncio.sleep(0))

    def pod(self, name: str, *, ready: bool = True, owner: bool = False, **labels: str) -> None:
        meta: Object = {"name": name, "labels": labels or {"app": "web"}}
        if owner:
            meta["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}
            ]
        body = {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        created = self.store.create(self.pods, "default", body)
        condition = {"type": "Ready", "status": "True" if ready else "False"}
        status = {**created, "status": {"phase": "Running", "conditions": [condition]}}
        self.store.update(self.pods, "default", name, status, "status")
        self.settle()

    def budget(self, name: str, **spec: Any) -> None:
        body = {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
        self.store.create(self.budgets, "default", body)
        self.settle()

    def status(self, name: str) -> Object:
        status: Object = self.store.get(self.budgets, "default", name)["status"]
        return status

    def counts(self, name: str) -> tuple[int, int, int, int]:
        s = self.status(name)
        return (s["currentHealthy"], s["desiredHealthy"], s["expectedPods"], s["disruptionsAllowed"])


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    try:
        yield made
    finally:
        made.controller.stop()
        made.loop.close()


def test_the_counts_follow_the_pods_and_evictions_take_them(cluster: Cluster) -> None:
    cluster.pod("a")
    cluster.pod("b")
    cluster.pod("c", ready=False)
    cluster.pod("other", app="db")
    cluster.budget("web", minAvailable=1)
    assert cluster.counts("web") == (2, 1, 3, 1)  # healthy, desired, expected, allowed
    assert cluster.status("web")["observedGeneration"] == 1
    evict(cluster.store, cluster.pods, "default", "a", {})
    cluster.settle()
    assert cluster.counts("web") == (1, 1, 2, 0)
    assert "disruptedPods" not in cluster.status("web")  # the pod is gone
    with pytest.raises(ApiError) as refused:
        evict(cluster.store, cluster.pods, "default", "b", {})
    assert refused.value.code == 429
    assert [c.message for c in refused.value.causes] == [
        "The disruption budget web needs 1 healthy pods and has 1 currently"
    ]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in cluster.status("web")["conditions"]}
    assert conditions == {"DisruptionAllowed": ("False", "InsufficientPods")}


def test_a_percentage_over_pods_of_a_job_allows_nothing(cluster: Cluster) -> None:
    cluster.pod("a", owner=True)
    cluster.pod("b", owner=True)
    cluster.budget("web", maxUnavailable="50%")
    status = cluster.status("web")
    assert status["disruptionsAllowed"] == 0
    assert [(c["status"], c["reason"]) for c in status["conditions"]] == [("False", "SyncFailed")]


@pytest.mark.parametrize(
    ("spec", "counts"),
    [
        pytest.param({"maxUnavailable": 1}, (2, 0, 0, 0), id="max-unavailable-of-bare-pods"),
        pytest.param({"minAvailable": "50%"}, (2, 0, 0, 0), id="percentage-of-bare-pods"),
        pytest.param({"minAvailable": 0}, (2, 0, 2, 2), id="min-available-0"),
        pytest.param({"minAvailable": 3}, (2, 3, 2, 0), id="more-than-there-are"),
    ],
)
def test_what_each_budget_allows(cluster: Cluster, spec: Object, counts: tuple[int, int, int, int]) -> None:
    cluster.pod("a")
    cluster.pod("b")
    cluster.budget("web", **spec)
    assert cluster.counts("web") == counts
