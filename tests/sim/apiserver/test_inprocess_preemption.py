"""The served cluster's part of preemption for its in-process schedulers: PodDisruptionBudgets heard as cluster
events, ``status.nominatedNodeName`` written with ``Unschedulable`` (and cleared by the binding), evictions through
the Eviction API (the ``DisruptionTarget`` condition, a budget's refusal) or as kube-scheduler's plain delete, with a
``Preempted`` event. A scripted scheduler sends the decisions (the choices are the schedulers' own)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, Evict, Unschedulable
from kubeflux.scheduler.objects import DisruptionBudget
from kubeflux.sim.apiserver.inprocess import InProcessSchedulers
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.store import Store

Object = dict[str, Any]


@dataclass
class Scripted:
    """Sends ``next`` at its next cycle; keeps what it heard."""

    name: str = "scripted"
    next: list[Decision] = field(default_factory=list)
    heard: list[ClusterEvent] = field(default_factory=list)

    def observe(self, event: ClusterEvent, now: float) -> None:
        self.heard.append(event)

    def schedule(self, now: float) -> list[Decision]:
        decisions, self.next = self.next, []
        return decisions

    def next_wakeup(self, now: float) -> float | None:
        return None


@dataclass
class Served:
    store: Store
    shell: InProcessSchedulers
    scheduler: Scripted

    def resource(self, group: str, plural: str) -> Any:
        found = self.store.registry.find(group, "v1", plural)
        assert found is not None
        return found

    def pod(self, name: str, **labels: str) -> Object:
        body = {
            "metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": {"schedulerName": "scripted", "containers": [{"name": "c", "image": "busybox"}]},
        }
        return self.store.create(self.resource("", "pods"), "default", body)

    def get(self, name: str) -> Object:
        return self.store.get(self.resource("", "pods"), "default", name)

    def run(self, *decisions: Decision) -> None:
        self.scheduler.next = list(decisions)
        self.shell.time_point(0.0)
        assert self.shell.run_cycle()

    def events(self, reason: str) -> list[str]:
        return [e["message"] for e in self.store.objects(self.resource("", "events")) if e.get("reason") == reason]


@pytest.fixture
def served() -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    store = Store(default_registry())
    scheduler = Scripted()
    shell = InProcessSchedulers(store, loop, [scheduler], paced=True)
    try:
        yield Served(store, shell, scheduler)
    finally:
        shell.stop()
        loop.close()


def _running(served: Served, name: str) -> None:
    pods = served.resource("", "pods")
    pod = served.get(name)
    ready = {"type": "Ready", "status": "True"}
    served.store.update(pods, "default", name, {**pod, "status": {"phase": "Running", "conditions": [ready]}}, "status")


def test_budgets_are_heard_as_cluster_events(served: Served) -> None:
    budgets = served.resource("policy", "poddisruptionbudgets")
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    served.store.create(budgets, "default", {"metadata": {"name": "web"}, "spec": spec})
    served.run()
    heard = [(e.kind.value, e.obj) for e in served.scheduler.heard if isinstance(e.obj, DisruptionBudget)]
    assert [(kind, budget.key, budget.min_available) for kind, budget in heard] == [("ADDED", "default/web", 1)]
    served.store.delete(budgets, "default", "web")
    served.run()
    assert [e.kind.value for e in served.scheduler.heard if isinstance(e.obj, DisruptionBudget)] == ["ADDED", "DELETED"]


def test_the_nominated_node_is_written_with_the_condition_and_the_binding_clears_it(served: Served) -> None:
    uid = served.pod("urgent")["metadata"]["uid"]
    served.run(Unschedulable("default/urgent", uid, "0/1 nodes are available", nominated_node="n1"))
    status = served.get("urgent")["status"]
    assert status["nominatedNodeName"] == "n1"
    assert [c["reason"] for c in status["conditions"] if c["type"] == "PodScheduled"] == ["Unschedulable"]
    served.run(Unschedulable("default/urgent", uid, "0/1 nodes are available"))  # same message, nomination gone
    assert "nominatedNodeName" not in served.get("urgent")["status"]
    served.run(Unschedulable("default/urgent", uid, "0/1 nodes are available", nominated_node="n1"))
    served.run(Bind("default/urgent", uid, "n1"))
    assert "nominatedNodeName" not in served.get("urgent")["status"]
    assert len(served.events("FailedScheduling")) == 1  # the condition was written once


def test_an_eviction_through_the_api_marks_the_pod_and_deletes_it(served: Served) -> None:
    uid = served.pod("victim")["metadata"]["uid"]
    served.run(Evict("default/victim", uid, "default/urgent", "Preempted by pod u1 on node n1"))
    with pytest.raises(Exception, match="not found"):
        served.get("victim")
    assert served.events("Preempted") == ["Preempted by pod u1 on node n1"]


def test_a_bound_victim_keeps_its_disruption_condition_while_it_terminates(served: Served) -> None:
    uid = served.pod("victim")["metadata"]["uid"]
    served.run(Bind("default/victim", uid, "n1"))
    _running(served, "victim")
    served.run(Evict("default/victim", uid, "default/urgent", "Preempted", budgets=False))
    pod = served.get("victim")
    assert pod["metadata"]["deletionTimestamp"]
    disruption = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["reason"], c["message"]) for c in disruption] == [
        ("PreemptionByScheduler", "scripted: preempting to accommodate a higher priority pod")
    ]


def test_a_budget_refuses_an_eviction_and_another_uid_is_not_evicted(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    budgets = served.resource("policy", "poddisruptionbudgets")
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    served.store.create(budgets, "default", {"metadata": {"name": "web"}, "spec": spec})
    uid = served.pod("guarded")["metadata"]["uid"]
    served.run(Bind("default/guarded", uid, "n1"))
    _running(served, "guarded")
    served.run(Evict("default/guarded", uid, "default/urgent", "Preempted"))
    served.run(Evict("default/guarded", "another-uid", "default/urgent", "Preempted", budgets=False))
    assert not served.get("guarded")["metadata"].get("deletionTimestamp")
    assert served.events("Preempted") == []
    refusals = [r.getMessage() for r in caplog.records if "could not evict" in r.getMessage()]
    assert len(refusals) == 2
    assert "Cannot evict pod as it would violate the pod's disruption budget." in refusals[0]
    assert "The disruption budget web is still being processed by the server." in refusals[0]


def test_a_workload_with_classes_and_budgets_replays_as_simulate_runs_it(tmp_path: Path) -> None:
    from kubeflux.sim.workloads.cluster_file import uniform_cluster
    from kubeflux.sim.workloads.manifests import read_manifests
    from tests.sim.apiserver._served import both, schedule

    def pod(name: str, cls: str) -> dict[str, Any]:
        annotations = {"pod-complete.stage.kwok.x-k8s.io/delay": "30s"}
        containers = [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]
        spec = {"priorityClassName": cls, "containers": containers}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations}, "spec": spec}

    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in (("urgent", 100), ("batch", 1))
    ]
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "all"},
        "spec": {"minAvailable": 1, "selector": {}},
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all([pod("a", "batch"), pod("b", "batch"), pod("c", "urgent"), *classes, budget]))
    workload = read_manifests(path)
    assert workload.problems == []
    seen: dict[str, Any] = {}

    def after(server: Any) -> None:
        store = server.store
        seen["classes"] = sorted(
            (pc["metadata"]["name"], pc["value"])
            for pc in store.objects(store.registry.find("scheduling.k8s.io", "v1", "priorityclasses"))
            if not pc["metadata"]["name"].startswith("system-")
        )
        seen["budgets"] = [
            b["metadata"]["name"] for b in store.objects(store.registry.find("policy", "v1", "poddisruptionbudgets"))
        ]

    simulated, served = both(workload, uniform_cluster(1, 4, "64Gi"), "fcfs", after)
    assert schedule(served) == schedule(simulated)
    assert [job.final_state.value for job in served.jobs] == ["COMPLETED_SUCCESSFULLY"] * 3
    assert seen == {"classes": [("batch", 1), ("urgent", 100)], "budgets": ["all"]}
