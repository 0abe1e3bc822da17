"""The served cluster's disruption controller: every PodDisruptionBudget's status, as kube-controller-manager's
(``pkg/controller/disruption``) keeps it, so that the Eviction API (:mod:`kubeflux.sim.apiserver.eviction`) grants
or refuses evictions from it, as the real server does (without it every guarded eviction is a 429: the budget is
"still being processed").

For each budget, from the pods of its namespace its selector selects (``policy/v1``: an empty selector selects
all, an absent one none): ``currentHealthy``, the Ready ones not being deleted nor listed in ``disruptedPods``;
``desiredHealthy`` and ``expectedPods`` (:func:`~kubeflux.apiobjects.disruption.desired_healthy`: a count of
``minAvailable`` against every selected pod; a percentage or ``maxUnavailable`` against the scale of their
controllers, unknown when one has a controller, a Job having no scale: then the sync fails and nothing is allowed,
as the real controller's ``failSafe``); ``disruptionsAllowed``, the healthy beyond the desired (0 without expected
pods); ``disruptedPods`` kept for the pods that still exist and are not yet being deleted; ``observedGeneration``;
the ``DisruptionAllowed`` condition. An unchanged status is not written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kubeflux.apiobjects.disruption import budget_from_manifest, desired_healthy
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.follow import Reconciler, served
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["DisruptionController", "budget_status"]

Object = dict[str, Any]


def _ready(pod: Object) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _controlled(pod: Object) -> bool:
    return any(isinstance(r, dict) and r.get("controller") for r in pod["metadata"].get("ownerReferences") or ())


def _condition(old: Object, allowed: bool, reason: str, generation: int, now: str) -> list[Object]:
    """``DisruptionAllowed``, its transition time kept while its status holds."""
    conditions = [c for c in old.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    status = "True" if allowed else "False"
    changed = current is None or current.get("status") != status
    condition = {
        "type": "DisruptionAllowed",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": now if changed or current is None else current.get("lastTransitionTime"),
        "reason": reason,
        "message": "",
    }
    return [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [condition]


def _status_only(obj: Object, prev: Object) -> bool:
    same_generation = obj["metadata"].get("generation") == prev["metadata"].get("generation")
    return same_generation and obj.get("spec") == prev.get("spec")


def budget_status(pdb: Object, pods: Iterable[Object], now: str) -> Object:
    """The status the disruption controller writes for ``pdb`` given every pod of its namespace (see the module
    docstring); ``now``: RFC 3339, for a condition's transition."""
    budget = budget_from_manifest(pdb)
    old = pdb.get("status") or {}
    generation = int(pdb["metadata"].get("generation") or 1)
    selected = [p for p in pods if budget.selects(budget.namespace, p["metadata"].get("labels") or {})]
    listed = old.get("disruptedPods") or {}
    disrupted = {
        p["metadata"]["name"]: listed[p["metadata"]["name"]]
        for p in selected
        if p["metadata"]["name"] in listed and not p["metadata"].get("deletionTimestamp")
    }
    healthy = sum(
        1
        for p in selected
        if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in disrupted and _ready(p)
    )
    counted = budget.max_unavailable is None and isinstance(budget.min_available, int)
    expected: int | None = len(selected) if counted else (None if any(_controlled(p) for p in selected) else 0)
    desired = desired_healthy(budget, expected)
    status: Object = {**old, "observedGeneration": generation}
    if desired is None or expected is None:  # failSafe: the sync failed
        status["disruptionsAllowed"] = 0
        status["conditions"] = _condition(old, False, "SyncFailed", generation, now)
        return status
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status.update(currentHealthy=healthy, desiredHealthy=desired, expectedPods=expected, disruptionsAllowed=allowed)
    if disrupted:
        status["disruptedPods"] = disrupted
    else:
        status.pop("disruptedPods", None)
    reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
    status["conditions"] = _condition(old, allowed > 0, reason, generation, now)
    return status


class DisruptionController:
    """Keeps every PodDisruptionBudget's status in step with the pods, on the server's loop."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        pods, budgets = served(store, ("", "v1", "pods"), ("policy", "v1", "poddisruptionbudgets"))
        self.store, self.pods, self.budgets = store, pods, budgets
        self._in: dict[str, dict[str, Object]] = {}
        """Namespace → uid → the latest version of each of its pods."""
        self.reconciler: Reconciler[str] = Reconciler(
            store, loop, [(pods, self._pod_event), (budgets, self._budget_event)], self._sync
        )
        """Follows pods and budgets; recounts the budgets of each namespace their events touched."""
        self.reconciler.start()

    def stop(self) -> None:
        self.reconciler.stop()

    def _pod_event(self, type_: str, event: WatchEvent) -> None:
        meta = event.obj["metadata"]
        namespace = meta["namespace"]
        pods = self._in.setdefault(namespace, {})
        if type_ == "DELETED":
            pods.pop(meta["uid"], None)
        else:
            pods[meta["uid"]] = event.obj
        self.reconciler.add(namespace)

    def _budget_event(self, type_: str, event: WatchEvent) -> None:
        prev = event.prev
        if type_ == "MODIFIED" and prev is not None and _status_only(event.obj, prev):
            return  # a status write (this controller's, or an eviction's): nothing to recount
        if type_ != "DELETED":
            self.reconciler.add(event.obj["metadata"]["namespace"])

    def _sync(self, namespace: str) -> None:
        """Recount the budgets of ``namespace``."""
        prefix = f"{namespace}/"
        collection = self.store.collection_of(self.budgets).objects
        for key, pdb in sorted(collection.items()):
            if key.startswith(prefix):
                self._update(pdb, self._in.get(namespace, {}).values())

    def _update(self, pdb: Object, pods: Iterable[Object]) -> None:
        status = budget_status(pdb, pods, self.store.now())
        if status == pdb.get("status"):
            return
        meta = pdb["metadata"]
        try:
            self.store.update(
                self.budgets, meta["namespace"], meta["name"], {**pdb, "status": status}, "status", trusted=True
            )
        except ApiError:
            return
