"""``cluster serve``'s disruption controller keeps PodDisruptionBudget status as the real kube-controller-manager
v1.36's does, and the Eviction API answers from it as the real kube-apiserver's does.

Both servers get the same objects, each scenario in a namespace of its own: pods bound to a node that does not
exist (no kubelet or KWOK on either side: their status is written here, alike on both, so a pod is Ready, not
Ready or, once deleted with its grace period, terminating for good), Jobs (suspended; no Job controller on either
side) and a ReplicaSet (no ReplicaSet controller) that own pods, and budgets. After every step the budgets' status
(``expectedPods``, ``desiredHealthy``, ``currentHealthy``, ``disruptionsAllowed``, ``observedGeneration``, the
names in ``disruptedPods`` and the conditions' type, status, reason, message and ``observedGeneration``) must
become the same on both; an eviction must get the same status code, message and causes.

The real side runs kube-controller-manager with its ServiceAccount controller (pods need their namespace's
``default`` ServiceAccount) and its disruption controller only; ``cluster serve`` runs its disruption controller
(and no Job or PodGroup controller, no kubelet).

A difference that stays (not exercised, by construction): when a pod changes, the real controller syncs only one
of the budgets that select it (``getPdbForPod`` takes the first the lister gives, in no fixed order), so with two
budgets over one pod the other keeps its old status until something else syncs it; ``cluster serve`` syncs both.
The scenario with two budgets therefore changes no pod after they exist.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.sim.apiserver.server import ApiServer

from .conftest import CEILING
from .differential.runner import Server

Json = Any
MERGE = "application/merge-patch+json"
GHOST = "pdb-ghost"
"""The node every pod is bound to: no node of that name exists, so nothing runs or ends the pods."""
SETTLE = CEILING
"""Seconds both sides have to agree after a step (a hang, not a slow machine, when reached)."""


@dataclass
class Side:
    """One API server, as the admin, in one scenario's namespace; ``uids``: the objects' uids on it by name."""

    server: Server
    namespace: str = ""
    uids: dict[str, str] = field(default_factory=dict)

    def call(
        self, method: str, path: str, body: Json = None, content_type: str = "application/json"
    ) -> tuple[int, Json]:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        data = json.dumps(body).encode() if body is not None else None
        response = self.server.pool.request(method, self.server.url + path, body=data, headers=headers)
        return response.status, json.loads(response.data) if response.data else None

    def must(self, method: str, path: str, body: Json = None, content_type: str = "application/json") -> Json:
        code, answer = self.call(method, path, body, content_type)
        assert code < 300, f"{self.server.name}: {method} {path}: {code} {answer}"
        return answer

    @property
    def core(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}"

    @property
    def budgets(self) -> str:
        return f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets"


def _eventually(what: Callable[[], bool], message: Callable[[], str]) -> None:
    deadline = time.monotonic() + SETTLE
    while not what():
        assert time.monotonic() < deadline, message()
        time.sleep(0.05)


def _status_view(budget: Json) -> Json:
    """What is compared of a budget's status."""
    status = budget.get("status") or {}
    conditions = [
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration", 0))
        for c in status.get("conditions") or ()
    ]
    return {
        "expectedPods": status.get("expectedPods"),
        "desiredHealthy": status.get("desiredHealthy"),
        "currentHealthy": status.get("currentHealthy"),
        "disruptionsAllowed": status.get("disruptionsAllowed"),
        "observedGeneration": status.get("observedGeneration", 0),
        "disruptedPods": sorted(status.get("disruptedPods") or {}),
        "conditions": conditions,
    }


def _answer_view(code: int, answer: Json) -> Json:
    """What is compared of an eviction's answer: the code, a Status's message and causes."""
    if not isinstance(answer, dict) or answer.get("kind") != "Status":
        return {"code": code}
    causes = sorted(
        (c.get("reason", ""), c.get("message", "")) for c in (answer.get("details") or {}).get("causes") or ()
    )
    message = answer.get("message", "") if code >= 300 else ""
    retry = (answer.get("details") or {}).get("retryAfterSeconds", 0)
    return {"code": code, "reason": answer.get("reason", ""), "message": message, "causes": causes, "retry": retry}


class Both:
    """Each step done alike on the real server and on ``cluster serve``, then the budgets compared once settled."""

    def __init__(self, real: Side, served: Side, namespace: str) -> None:
        self.sides = (real, served)
        for side in self.sides:
            side.namespace, side.uids = namespace, {}
            side.must("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        account = f"{real.core}/serviceaccounts/default"  # pods need it: the real ServiceAccount controller's
        _eventually(lambda: real.call("GET", account)[0] == 200, lambda: f"no ServiceAccount {account}")

    def pod(self, name: str, *, ready: bool = True, owner: str = "", **labels: str) -> None:
        """A pod bound to :data:`GHOST`, Running, Ready or not; ``owner``: the kind/name of its controller."""
        for side in self.sides:
            meta: Json = {"name": name, "labels": labels or {"app": "web"}}
            if owner:
                kind, owner_name = owner.split("/")
                api_version = {"Job": "batch/v1", "ReplicaSet": "apps/v1"}[kind]
                meta["ownerReferences"] = [
                    {
                        "apiVersion": api_version,
                        "kind": kind,
                        "name": owner_name,
                        "uid": side.uids[owner_name],
                        "controller": True,
                    }
                ]
            spec = {
                "nodeName": GHOST,
                "automountServiceAccountToken": False,
                "containers": [{"name": "main", "image": "busybox:1.36"}],
            }
            side.must("POST", f"{side.core}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
        self.ready(name, ready)

    def ready(self, name: str, ready: bool) -> None:
        condition = {"type": "Ready", "status": "True" if ready else "False"}
        body = {"status": {"phase": "Running", "conditions": [condition]}}
        for side in self.sides:
            side.must("PATCH", f"{side.core}/pods/{name}/status", body, MERGE)
        self.settled()

    def delete(self, name: str) -> None:
        """Delete a pod with its grace period: it stays, terminating (no kubelet ends it)."""
        for side in self.sides:
            side.must("DELETE", f"{side.core}/pods/{name}")
        self.settled()

    def owner(self, kind: str, name: str, **spec: Any) -> None:
        """A suspended Job or a ReplicaSet over ``app=web`` pods, which nothing runs."""
        template = {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "restartPolicy": "Never" if kind == "Job" else "Always",
                "automountServiceAccountToken": False,
                "containers": [{"name": "main", "image": "busybox:1.36"}],
            },
        }
        if kind == "Job":
            path, body_spec = "/apis/batch/v1/namespaces/{}/jobs", {"suspend": True, "template": template, **spec}
        else:
            path = "/apis/apps/v1/namespaces/{}/replicasets"
            body_spec = {"selector": {"matchLabels": {"app": "web"}}, "template": template, **spec}
        api_version = "batch/v1" if kind == "Job" else "apps/v1"
        for side in self.sides:
            body = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": body_spec}
            created = side.must("POST", path.format(side.namespace), body)
            side.uids[name] = created["metadata"]["uid"]

    def budget(self, name: str, selector: Json = None, **spec: Any) -> None:
        """A budget (``selector`` None: ``app=web``; ``{}``: every pod; ``"none"``: no selector)."""
        chosen = {"matchLabels": {"app": "web"}} if selector is None else selector
        body_spec = {**({} if chosen == "none" else {"selector": chosen}), **spec}
        for side in self.sides:
            body = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}}
            side.must("POST", side.budgets, {**body, "spec": body_spec})
        self.settled()

    def change(self, name: str, spec: Json) -> None:
        """A new generation of a budget (a merge patch of its spec)."""
        for side in self.sides:
            side.must("PATCH", f"{side.budgets}/{name}", {"spec": spec}, MERGE)
        self.settled()

    def disrupted(self, name: str, pods: dict[str, str]) -> None:
        """Write ``disruptedPods`` (pod → RFC 3339 time) into a budget's status, as the Eviction API does."""
        for side in self.sides:
            side.must("PATCH", f"{side.budgets}/{name}/status", {"status": {"disruptedPods": pods}}, MERGE)
        self.settled()

    def evict(self, name: str) -> Json:
        """Evict a pod on both sides; the answers must be the same. Returns the real one's view."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
        real, served = (
            _answer_view(*side.call("POST", f"{side.core}/pods/{name}/eviction", body)) for side in self.sides
        )
        assert served == real, f"eviction of {name}: served {served} != real {real}"
        self.settled()
        return real

    def views(self, side: Side) -> dict[str, Json]:
        listed = side.must("GET", side.budgets)
        return {b["metadata"]["name"]: _status_view(b) for b in listed["items"]}

    def settled(self) -> dict[str, Json]:
        """Wait until both sides' budgets agree; returns the real side's views."""
        real, served = self.sides
        seen: dict[str, dict[str, Json]] = {}

        def same() -> bool:
            seen["real"], seen["served"] = self.views(real), self.views(served)
            return seen["real"] == seen["served"]

        def message() -> str:
            lines = [f"budgets of {real.namespace} never agreed:"]
            for budget in sorted(set(seen["real"]) | set(seen["served"])):
                a, b = seen["real"].get(budget), seen["served"].get(budget)
                if a != b:
                    lines.append(f"  {budget}: real {a}\n  {' ' * len(budget)}  served {b}")
            return "\n".join(lines)

        _eventually(same, message)
        return seen["real"]


@pytest.fixture(scope="module")
def sides(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Side, Side]]:
    plane = ControlPlane(tmp_path_factory.mktemp("real"), binaries).start()
    served = ApiServer([], controllers=True, disabled_controllers=("job", "podgroup")).start()
    try:
        plane.start_controller_manager("--controllers=serviceaccount,disruption")
        kubeconfig = served.write_kubeconfig(Path(tmp_path_factory.mktemp("served")) / "kubeconfig")
        cert = (plane.pki / "admin.crt", plane.pki / "admin.key")
        real = Server("real", plane.server, binaries.path("kubectl"), plane.kubeconfig, cert=cert, ca=plane.ca)
        yield Side(real), Side(Server("served", served.url, binaries.path("kubectl"), kubeconfig))
    finally:
        served.stop()
        plane.stop()


def _status(views: dict[str, Json], name: str) -> tuple[int, int, int, int]:
    v = views[name]
    return (v["currentHealthy"], v["desiredHealthy"], v["expectedPods"], v["disruptionsAllowed"])


def _now(offset: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + offset, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def bare_pods(both: Both) -> None:
    """Pods of no controller: an integer ``minAvailable`` counts them; a percentage and ``maxUnavailable`` are
    taken of their controllers' scale, 0 (kube-controller-manager's unmanaged pods). Readiness and deletion."""
    both.pod("a")
    both.pod("b")
    both.pod("c", ready=False)
    both.pod("p1", app="pct")
    both.pod("p2", app="pct")
    both.pod("m1", app="max")
    both.budget("count", minAvailable=1)
    both.budget("percent", minAvailable="50%", selector={"matchLabels": {"app": "pct"}})
    both.budget(
        "max", maxUnavailable=1, selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["max"]}]}
    )
    views = both.settled()
    assert _status(views, "count") == (2, 1, 3, 1)
    assert _status(views, "percent") == (2, 0, 0, 0)
    assert _status(views, "max") == (1, 0, 0, 0)
    both.ready("c", True)
    both.ready("a", False)
    both.delete("b")  # terminating: not healthy, still expected
    assert _status(both.settled(), "count") == (1, 1, 3, 0)
    both.change("count", {"minAvailable": 0})
    assert both.settled()["count"]["observedGeneration"] == 2
    both.ready("p1", False)
    both.delete("m1")


def everything(both: Both) -> None:
    """An empty selector selects every pod of the namespace, whatever its labels."""
    both.pod("a")
    both.pod("b", app="db")
    both.budget("all", minAvailable=1, selector={})
    assert _status(both.settled(), "all") == (2, 1, 2, 1)
    both.ready("b", False)
    assert both.evict("a")["code"] == 429


def job_pods(both: Both) -> None:
    """Pods of a Job: a Job has no scale, so a percentage or ``maxUnavailable`` fails the sync (``failSafe``), a
    count or no bound at all does not."""
    both.owner("Job", "train")
    both.pod("w0", owner="Job/train")
    both.pod("w1", owner="Job/train")
    both.budget("percent", maxUnavailable="50%")
    both.budget("count", minAvailable=1)
    both.budget("no-bound")  # nothing to take a scale of: no failure
    views = both.settled()
    assert views["percent"]["conditions"][0][2:4] == (
        "SyncFailed",
        "jobs.batch does not implement the scale subresource",
    )
    assert _status(views, "count") == (2, 1, 2, 1)
    assert _status(views, "no-bound") == (2, 0, 0, 0)


def job_budget_evictions(both: Both) -> None:
    """Evictions under a budget over Job pods that never synced, and one that synced before its pods came."""
    both.owner("Job", "train")
    both.budget("early", minAvailable="50%")  # no pods yet: synced (nothing expected)
    both.pod("w0", owner="Job/train")  # now the sync fails, the old observedGeneration kept
    assert both.evict("w0")["code"] == 429
    both.budget("late", minAvailable="50%", selector={"matchLabels": {"app": "other"}})
    both.pod("x0", owner="Job/train", app="other")
    assert both.evict("x0")["code"] == 429


def replica_set_pods(both: Both) -> None:
    """Pods of a ReplicaSet: a percentage is taken of its ``spec.replicas``, not of the pods there are; a bare pod
    beside them adds nothing."""
    both.owner("ReplicaSet", "web", replicas=4)
    both.owner("ReplicaSet", "db", replicas=3)
    for name in ("r0", "r1", "r2"):
        both.pod(name, owner="ReplicaSet/web")
    both.pod("bare")
    both.pod("d0", owner="ReplicaSet/db", app="db")
    both.pod("d1", owner="ReplicaSet/db", app="db")
    both.budget("half", minAvailable="50%")
    both.budget("one-down", maxUnavailable=1, selector={"matchLabels": {"app": "db"}})
    views = both.settled()
    assert _status(views, "half") == (4, 2, 4, 2)
    assert _status(views, "one-down") == (2, 2, 3, 0)
    assert both.evict("r0")["code"] == 201
    assert both.evict("r1")["code"] == 201
    assert both.evict("r2")["code"] == 429
    assert both.evict("d0")["code"] == 429


def above_and_nothing(both: Both) -> None:
    """``minAvailable`` above the pods there are; a selector matching nothing; no selector at all; no bound."""
    both.pod("a")
    both.pod("b")
    both.pod("o", app="other")
    both.budget("above", minAvailable=5)
    both.budget("nothing", minAvailable=1, selector={"matchLabels": {"app": "none"}})
    both.budget("no-selector", maxUnavailable=0, selector="none")
    both.budget("no-bound", selector={"matchLabels": {"app": "other"}})
    views = both.settled()
    assert _status(views, "above") == (2, 5, 2, 0)
    assert _status(views, "nothing") == (0, 1, 0, 0)
    assert _status(views, "no-bound") == (1, 0, 0, 0)
    assert both.evict("a")["code"] == 429
    assert both.evict("o")["code"] == 429


def two_budgets(both: Both) -> None:
    """Two budgets over one pod: both counted; the Eviction API refuses to choose (a 500)."""
    both.pod("a")
    both.pod("b", app="web", tier="front")
    both.budget("all", minAvailable=1)
    both.budget("front", maxUnavailable=0, selector={"matchLabels": {"tier": "front"}})
    assert both.evict("b")["code"] == 500
    assert both.evict("a")["code"] == 201


def evictions(both: Both) -> None:
    """The Eviction API after the status settles: a disruption taken, a refusal that says the counts, an unready
    pod evicted while the budget is healthy and refused once it is not."""
    for name in ("a", "b", "c"):
        both.pod(name)
    both.budget("guard", minAvailable=2)
    assert both.evict("a")["code"] == 201  # terminating now: not healthy
    assert both.evict("b")["code"] == 429
    both.pod("d", ready=False)
    assert both.evict("d")["code"] == 201  # unready, and the budget is healthy: not counted
    both.ready("c", False)
    assert both.evict("c")["code"] == 429  # unready, but the budget is not healthy


def unhealthy_policy(both: Both) -> None:
    """``unhealthyPodEvictionPolicy``: ``AlwaysAllow`` evicts an unready pod whatever the budget's health,
    ``IfHealthyBudget`` only while it is healthy."""
    both.pod("a")
    both.pod("u1", ready=False, app="web", kind="always")
    both.pod("u2", ready=False, app="web", kind="if-healthy")
    both.budget(
        "always", minAvailable=2, unhealthyPodEvictionPolicy="AlwaysAllow", selector={"matchLabels": {"kind": "always"}}
    )
    both.budget(
        "if-healthy",
        minAvailable=2,
        unhealthyPodEvictionPolicy="IfHealthyBudget",
        selector={"matchLabels": {"kind": "if-healthy"}},
    )
    assert both.evict("u1")["code"] == 201
    assert both.evict("u2")["code"] == 429


def disrupted_pods(both: Both) -> None:
    """``disruptedPods``: an entry whose pod was not deleted within two minutes is dropped (the pod is healthy
    again), a recent one kept (the pod not counted), one of a pod that does not exist dropped."""
    for name in ("a", "b", "c"):
        both.pod(name)
    both.budget("guard", minAvailable=1)
    both.disrupted("guard", {"a": "2020-01-01T00:00:00Z", "b": _now(), "ghost": _now()})
    views = both.settled()
    assert views["guard"]["disruptedPods"] == ["b"]
    assert _status(views, "guard") == (2, 1, 3, 1)


def stale_disruption(both: Both) -> None:
    """A pod marked ``DisruptionTarget`` two minutes ago and still not deleted gets the condition ``False``; one
    the kubelet marked, or one that finished, keeps it."""
    old = {"type": "DisruptionTarget", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    cases = {
        "evicted": ("Running", {**old, "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}),
        "kubelet": ("Running", {**old, "reason": "TerminationByKubelet", "message": "node shutdown"}),
        "done": ("Succeeded", {**old, "reason": "PreemptionByScheduler", "message": "preempted"}),
    }
    for name, (phase, condition) in cases.items():
        both.pod(name)
        body = {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}, condition]}}
        for side in both.sides:
            side.must("PATCH", f"{side.core}/pods/{name}/status", body, MERGE)

    def marks(side: Side) -> dict[str, Json]:
        pods = side.must("GET", f"{side.core}/pods")["items"]
        return {
            p["metadata"]["name"]: [
                {k: v for k, v in c.items() if k != "lastTransitionTime"}
                for c in p["status"].get("conditions") or ()
                if c.get("type") == "DisruptionTarget"
            ]
            for p in pods
        }

    real, served = both.sides
    _eventually(
        lambda: marks(real)["evicted"][0]["status"] == "False" and marks(served) == marks(real),
        lambda: f"DisruptionTarget conditions: real {marks(real)}, served {marks(served)}",
    )
    assert marks(real)["kubelet"][0]["status"] == "True"


SCENARIOS = [
    bare_pods,
    everything,
    job_pods,
    job_budget_evictions,
    replica_set_pods,
    above_and_nothing,
    two_budgets,
    evictions,
]
SCENARIOS += [unhealthy_policy, disrupted_pods, stale_disruption]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__.replace("_", "-") for s in SCENARIOS])
def test_budget_status_and_evictions_as_the_real_controller_keeps_them(
    sides: tuple[Side, Side], scenario: Callable[[Both], None]
) -> None:
    scenario(Both(*sides, namespace=f"pdb-{scenario.__name__.replace('_', '-')}"))
