"""``POST pods/NAME/eviction``: a delete that a PodDisruptionBudget may refuse, as k8s.io/kubernetes'
``pkg/registry/core/pod/storage/eviction.go`` decides.

A pod that has finished, has not started (``Pending``) or is already being deleted goes at once. Otherwise the
budgets of its namespace whose selector matches its labels are found: none, and it goes; more than one is a 500, as
the real server answers. With one, a pod that is not Ready goes without counting when the budget's healthy pods are
enough (or its ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``); else the budget must have been processed by its
controller (``status.observedGeneration``: without kube-controller-manager's disruption controller it never is, and
every such eviction is 429 as on a real server without it) and allow a disruption, which the eviction takes:
``disruptionsAllowed`` one less, the pod in ``disruptedPods``, written to the budget's status before the pod is
deleted. Every eviction that goes ahead first writes the pod's ``DisruptionTarget`` condition (reason
``EvictionByEvictionAPI``, message ``Eviction API: evicting``) through its status, as the real eviction registry
does, then deletes it (with ``deleteOptions``' grace period and preconditions).
"""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.decisions import disruption_condition
from kubeflux.apiobjects.disruption import EVICTION_REFUSED
from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.apps_strategies import selector_matches
from kubeflux.sim.apiserver.errors import ApiError, Cause
from kubeflux.sim.apiserver.jobpods import ready
from kubeflux.sim.apiserver.metadata import clone
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.store import Store

__all__ = ["EVICTION_REASON", "evict", "mark_disrupted"]

Object = dict[str, Any]
_REFUSED = EVICTION_REFUSED
EVICTION_REASON = "EvictionByEvictionAPI"


def evict(store: Store, pods: ResourceType, namespace: str, name: str, body: Any) -> None:
    """Evict pod ``namespace/name`` (``body``: the ``Eviction``, whose ``deleteOptions`` may give a grace period);
    raises the real server's refusals."""
    options = body.get("deleteOptions") if isinstance(body, dict) else None
    options = options if isinstance(options, dict) else {}
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int)):
        raise errors.bad_request(f"deleteOptions.gracePeriodSeconds: must be an integer, got {grace!r}")
    preconditions = options.get("preconditions")
    preconditions = preconditions if isinstance(preconditions, dict) else {}
    uid, version = str(preconditions.get("uid") or ""), str(preconditions.get("resourceVersion") or "")
    pod = store.get(pods, namespace, name)
    if not _ignores_budgets(pod):
        budgets = store.registry.find("policy", "v1", "poddisruptionbudgets")
        if budgets is not None:
            _take_disruption(store, budgets, namespace, pod)
    store.deletion.check_preconditions(pods, namespace, name, uid=uid, resource_version=version)
    mark_disrupted(store, pods, store.get(pods, namespace, name), EVICTION_REASON, "Eviction API: evicting")
    store.delete(pods, namespace, name, grace=grace, uid=uid)


def mark_disrupted(store: Store, pods: ResourceType, pod: Object, reason: str, message: str) -> Object:
    """The ``DisruptionTarget`` condition with ``reason`` and ``message`` written through the stored ``pod``'s
    status (``UpdatePodCondition``: its transition time kept when it was already true), before it is deleted."""
    condition = disruption_condition(reason, message, store.now())
    status = pod.get("status") or {}
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == condition["type"]), None)
    if current is not None and current.get("status") == condition["status"]:
        condition["lastTransitionTime"] = current.get("lastTransitionTime")
    if current is not None and all(current.get(k) == v for k, v in condition.items()):
        return pod
    kept = [condition if c is current else c for c in conditions] if current is not None else [*conditions, condition]
    meta = pod["metadata"]
    marked = {**pod, "status": {**status, "conditions": kept}}
    return store.update(pods, meta["namespace"], meta["name"], marked, "status", trusted=True)


def _ignores_budgets(pod: Object) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _take_disruption(store: Store, budgets: ResourceType, namespace: str, pod: Object) -> None:
    labels = pod["metadata"].get("labels") or {}
    prefix = f"{namespace}/"
    matching = [
        budget
        for key, budget in sorted(store.collection_of(budgets).objects.items())
        if key.startswith(prefix) and _selects(budget, labels)
    ]
    if not matching:
        return
    if len(matching) > 1:
        message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        raise ApiError(500, "", message)  # the real handler's own Status: no reason, no cause
    budget = matching[0]
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if not ready(pod) and (
        spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or (healthy >= desired and desired > 0)
    ):
        return
    budget_name = budget["metadata"]["name"]
    if int(status.get("observedGeneration") or 0) < int(budget["metadata"].get("generation") or 1):
        why = f"The disruption budget {budget_name} is still being processed by the server."
        raise ApiError(429, "TooManyRequests", _REFUSED, causes=[Cause("", why, "DisruptionBudget")], retry_after=10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        message = f'poddisruptionbudgets.policy "{budget_name}" is forbidden: pdb disruptions allowed is negative'
        raise ApiError(403, "Forbidden", message, "poddisruptionbudgets", budget_name, "policy")
    if allowed == 0:
        why = _why_not(budget_name, status, desired, healthy)
        raise ApiError(429, "TooManyRequests", _REFUSED, causes=[Cause("", why, "DisruptionBudget")])
    taken = clone(budget)
    taken_status = taken.setdefault("status", {})
    taken_status["disruptionsAllowed"] = allowed - 1
    taken_status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod["metadata"]["name"]: store.now()}
    if allowed == 1:
        _insufficient(taken_status, store.now())
    store.update(budgets, namespace, budget_name, taken, "status", trusted=True)


def _why_not(name: str, status: Object, desired: int, healthy: int) -> str:
    """Why a budget that allows no disruption refuses (``checkAndDecrement``): a failed sync first, since its
    counts are not to be trusted; then the counts; then its condition's reason and message."""
    condition = next(
        (c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "DisruptionAllowed"),
        {},
    )
    reason, message = condition.get("reason"), condition.get("message")
    failed = condition.get("status") == "False" and bool(message)
    if failed and reason == "SyncFailed":
        return f"The disruption budget {name} does not allow evicting pods currently because it failed sync: {message}"
    if healthy <= desired:
        return f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
    if failed:
        return f"The disruption budget {name} does not allow evicting pods currently ({reason}): {message}"
    return f"The disruption budget {name} does not allow evicting pods currently"


def _selects(budget: Object, labels: Object) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none."""
    selector = (budget.get("spec") or {}).get("selector")
    return isinstance(selector, dict) and selector_matches(selector, labels)


def _insufficient(status: Object, now: str) -> None:
    """The ``DisruptionAllowed`` condition once no disruption is left (as
    ``pdbhelper.UpdateDisruptionAllowedCondition`` writes it)."""
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    current = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    if current is not None and current.get("status") == "False" and current.get("reason") == "InsufficientPods":
        return
    condition = {
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": status.get("observedGeneration", 0),
        "lastTransitionTime": now,
        "reason": "InsufficientPods",
        "message": "",
    }
    status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [condition]
