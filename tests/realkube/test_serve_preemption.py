"""``kubeflux serve``'s part of preemption on the real control plane (kube-controller-manager's disruption controller
keeps the PodDisruptionBudgets' counts): its cores hear the budgets; an :class:`Evict` goes through the Eviction API,
which evicts a pod whose budget allows it (a ``Preempted`` event on it, the real server's ``DisruptionTarget``
condition) and refuses one whose ``minAvailable`` it would break (429: logged, counted, the pod keeps running); an
``Unschedulable`` with a nominated node writes ``status.nominatedNodeName``; a victim gang's evictions go one after
the other, and the first refused stops the rest of that gang's (another gang's still go).

The preemption choices are the core's own (tested with it); here a wrapper around serve's core adds the decisions
a preempting core would send, so that what is tested is the shell: the requests, the events and the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes import client

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.serve import Serve
from kubeflux.scheduler.interface import ClusterEvent, Decision, Evict, Unschedulable
from kubeflux.scheduler.objects import DisruptionBudget
from tests.realkube._serving import kwok_nodes, manifest, namespace

from .conftest import Api, eventually, phase, running_plane


@pytest.fixture
def plane(binaries: Binaries, tmp_path: Path) -> Iterator[ControlPlane]:
    with running_plane(binaries, tmp_path / "plane") as started:
        yield started


class Preempting:
    """serve's core, and the decisions a preempting core would add: each Evict of :attr:`evictions` once, at the
    next pass; each of its Unschedulable for a pod of :attr:`nominate` with that nominated node."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.evictions: list[Evict] = []
        self.nominate: dict[str, str] = {}
        self.budgets: dict[str, DisruptionBudget] = {}
        self.unevicted: list[tuple[str, str]] = []
        """(pod, why) of each eviction told back to the core (``unevict``)."""
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)

    def unevict(self, pod: str, uid: str, reason: str, now: float) -> None:
        with self.lock:
            self.unevicted.append((pod, reason))
        self.core.unevict(pod, uid, reason, now)

    def observe(self, event: ClusterEvent, now: float) -> None:
        if isinstance(event.obj, DisruptionBudget):
            self.budgets[event.obj.key] = event.obj
        self.core.observe(event, now)

    def schedule(self, now: float) -> list[Decision]:
        decisions: list[Decision] = []
        for decision in self.core.schedule(now):
            node = self.nominate.get(decision.pod) if isinstance(decision, Unschedulable) else None
            if node:
                decision = Unschedulable(decision.pod, decision.uid, decision.message, None, node)
            decisions.append(decision)
        with self.lock:
            decisions += self.evictions
            self.evictions = []
        return decisions


def _budget(api: Api, ns: str, name: str, app: str, min_available: int) -> None:
    body = {
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    }
    client.PolicyV1Api(api.client).create_namespaced_pod_disruption_budget(ns, body, _preload_content=False)


def _budget_status(api: Api, ns: str, name: str) -> dict[str, Any]:
    response = client.PolicyV1Api(api.client).read_namespaced_pod_disruption_budget(name, ns, _preload_content=False)
    budget: dict[str, Any] = orjson.loads(response.data)
    status: dict[str, Any] = budget.get("status") or {}
    return status if status.get("observedGeneration") == budget["metadata"]["generation"] else {}


def _labelled(name: str, app: str, cpu: str = "1") -> dict[str, Any]:
    pod = manifest(name, cpu)
    pod["metadata"]["labels"] = {"app": app}
    return pod


def _metric(serve: Serve, result: str) -> float:
    value = serve.metrics.registry.get_sample_value(
        "kubeflux_evictions_total", {"scheduler": "kubeflux", "result": result}
    )
    return value or 0.0


def test_serve_evicts_through_the_eviction_api_and_a_budget_blocks_it(
    plane: ControlPlane, api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    with namespace(api, "preempt") as ns, kwok_nodes(plane, api, "preempt", 1, "4") as (node,):
        _budget(api, ns, "allow", "a", 0)
        _budget(api, ns, "guard", "b", 1)
        config = parse_config({"clock": "wall", "watch": {"timeoutSeconds": 30}, "namespaces": [ns]})
        serve = Serve(config, api_client(plane.kubeconfig, None, False, 16))
        core = serve.cores[0] = Preempting(serve.cores[0])  # type: ignore[assignment]
        with serve:
            victim = api.create_pod(ns, _labelled("victim", "a"))
            guarded = api.create_pod(ns, _labelled("guarded", "b"))
            eventually(lambda: all(phase(p) == "Running" for p in api.pods(ns).values()), lambda: "pods Running")
            eventually(lambda: _budget_status(api, ns, "guard").get("currentHealthy") == 1, lambda: "guard counted")
            eventually(lambda: _budget_status(api, ns, "allow").get("disruptionsAllowed") == 1, lambda: "allow counted")
            assert {key: b.min_available for key, b in core.budgets.items()} == {f"{ns}/allow": 0, f"{ns}/guard": 1}
            core.nominate[f"{ns}/urgent"] = node
            api.create_pod(ns, _labelled("urgent", "u", "4"))  # waits for the node: Unschedulable, nominated
            with core.lock:
                core.evictions += [
                    Evict(f"{ns}/victim", victim["metadata"]["uid"], f"{ns}/urgent", f"Preempted by {ns}/urgent"),
                    Evict(f"{ns}/guarded", guarded["metadata"]["uid"], f"{ns}/urgent", f"Preempted by {ns}/urgent"),
                ]
            serve._wake()
            eventually(lambda: "victim" not in api.pods(ns), lambda: "the victim evicted")
            eventually(lambda: _metric(serve, "refused") == 1, lambda: "the refusal counted")
            assert _metric(serve, "evicted") == 1
            eventually(
                lambda: api.pods(ns)["urgent"].get("status", {}).get("nominatedNodeName") == node,
                lambda: "the nominated node written",
            )
            kept = api.pods(ns)["guarded"]
            assert phase(kept) == "Running" and not kept["metadata"].get("deletionTimestamp")
            preempted = [e for e in api.events(ns) if e.get("reason") == "Preempted"]
            assert [(e["regarding"]["name"], e["note"], e["reportingController"], e["type"]) for e in preempted] == [
                ("victim", f"Preempted by {ns}/urgent", "kubeflux", "Normal")
            ]
            refusals = [r.getMessage() for r in caplog.records if "not evicted" in r.getMessage()]
            assert any(
                "429" in m
                and "Cannot evict pod as it would violate the pod's disruption budget." in m
                and "The disruption budget guard needs 1 healthy pods and has 1 currently" in m
                for m in refusals
            ), refusals


def test_a_refusal_within_a_victim_gang_stops_the_rest_of_its_evictions_and_the_core_hears_of_each(
    plane: ControlPlane, api: Api
) -> None:
    """The core decided to evict gang ``g`` (three pods) and gang ``h`` (two) whole; a PodDisruptionBudget made after
    that decision guards ``g``'s second pod. ``g-0`` goes, ``g-1`` is refused (429), ``g-2`` is never sent; ``h``
    goes whole. The metric counts each result, and the core is told of ``g-1`` and ``g-2``."""
    with namespace(api, "wholegang") as ns, kwok_nodes(plane, api, "wholegang", 1, "8") as _:
        config = parse_config({"clock": "wall", "watch": {"timeoutSeconds": 30}, "namespaces": [ns]})
        serve = Serve(config, api_client(plane.kubeconfig, None, False, 16))
        core = serve.cores[0] = Preempting(serve.cores[0])  # type: ignore[assignment]
        with serve:
            pods = {name: api.create_pod(ns, _labelled(name, name)) for name in ("g-0", "g-1", "g-2", "h-0", "h-1")}
            eventually(lambda: all(phase(p) == "Running" for p in api.pods(ns).values()), lambda: "pods Running")
            decided = [
                Evict(f"{ns}/{name}", pod["metadata"]["uid"], f"{ns}/urgent", "Preempted", victim=f"{ns}/{name[0]}")
                for name, pod in pods.items()
            ]
            _budget(api, ns, "late", "g-1", 1)  # made after the core decided
            eventually(lambda: _budget_status(api, ns, "late").get("currentHealthy") == 1, lambda: "late counted")
            with core.lock:
                core.evictions += decided
            serve._wake()
            eventually(lambda: _metric(serve, "spared") == 1, lambda: "g-2 spared")
            eventually(lambda: not {"h-0", "h-1"} & set(api.pods(ns)), lambda: "h evicted")
            assert (_metric(serve, "evicted"), _metric(serve, "refused")) == (3, 1)
            left = api.pods(ns)
            assert sorted(left) == ["g-1", "g-2"]
            assert not any(p["metadata"].get("deletionTimestamp") for p in left.values())
            eventually(lambda: len(core.unevicted) == 2, lambda: "the core told of g-1 and g-2")
            told = dict(core.unevicted)
            assert "429" in told[f"{ns}/g-1"]
            assert told[f"{ns}/g-2"].startswith(f"another pod of {ns}/g was not evicted")
            assert f"pod {ns}/g-1: 429" in told[f"{ns}/g-2"]
            preempted = {e["regarding"]["name"] for e in api.events(ns) if e.get("reason") == "Preempted"}
            assert preempted == {"g-0", "h-0", "h-1"}
