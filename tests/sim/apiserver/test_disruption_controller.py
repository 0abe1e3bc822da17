"""The served cluster's disruption controller keeps PodDisruptionBudgets' counts as kube-controller-manager's does,
and the Eviction API grants and refuses evictions from them (without it every guarded eviction is a 429)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from functools import partial
from typing import Any

import pytest

from kubeflux.apiobjects.decisions import disruption_condition
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.disruption import DELETION_TIMEOUT, DisruptionController
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.eviction import evict
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store
from tests.sim.apiserver._loop import ControllerLoop

Object = dict[str, Any]


class Cluster(ControllerLoop):
    def __init__(self, clock: VirtualClock | None = None) -> None:
        store = Store(default_registry(), clock=clock or time.time)
        super().__init__(store, partial(DisruptionController, timers=clock))
        pods, budgets = (
            self.store.registry.find("", "v1", "pods"),
            self.store.registry.find("policy", "v1", "poddisruptionbudgets"),
        )
        assert pods is not None and budgets is not None
        self.pods, self.budgets = pods, budgets

    def pod(self, name: str, *, ready: bool = True, owner: bool = False, marked: bool = False, **labels: str) -> None:
        meta: Object = {"name": name, "labels": labels or {"app": "web"}}
        if owner:
            meta["ownerReferences"] = [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1", "controller": True}
            ]
        body = {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        created = self.store.create(self.pods, "default", body)
        conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
        if marked:  # an eviction's or a preemption's mark
            conditions.append(disruption_condition("EvictionByEvictionAPI", "Eviction API: evicting", self.store.now()))
        status = {**created, "status": {"phase": "Running", "conditions": conditions}}
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
    with closing(Cluster()) as made:
        yield made


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


def test_an_eviction_not_followed_by_a_deletion_expires_and_a_stale_mark_is_cleared() -> None:
    """In virtual time: a ``disruptedPods`` entry whose pod is still there two minutes later is dropped (the pod is
    healthy again) at that time, without any other event; a ``DisruptionTarget`` mark on a pod nobody deleted is
    set ``False`` two minutes after it was made."""
    clock = VirtualClock(origin=1_000_000.0)
    cluster = Cluster(clock)
    try:
        cluster.pod("a")
        cluster.pod("b", marked=True)
        cluster.budget("web", minAvailable=1)
        pdb = cluster.store.get(cluster.budgets, "default", "web")
        evicting = {**pdb["status"], "disruptedPods": {"a": cluster.store.now()}}  # as the Eviction API writes it
        cluster.store.update(cluster.budgets, "default", "web", {**pdb, "status": evicting}, "status")
        cluster.settle()
        assert cluster.counts("web") == (1, 1, 2, 0)  # a is being evicted
        assert clock.advance() == 1_000_000.0 + DELETION_TIMEOUT
        cluster.settle()
        assert cluster.counts("web") == (2, 1, 2, 1) and "disruptedPods" not in cluster.status("web")
        conditions = cluster.store.get(cluster.pods, "default", "b")["status"]["conditions"]
        marks = [(c["status"], c.get("reason")) for c in conditions if c["type"] == "DisruptionTarget"]
        assert marks == [("False", None)]
    finally:
        cluster.close()
