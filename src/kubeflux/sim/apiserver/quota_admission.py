"""The ResourceQuota admission plugin, as k8s.io/apiserver's ``pkg/admission/plugin/resourcequota`` decides (its
``CheckRequest``), run by the store on every create of a namespaced object.

The quotas of the object's namespace that its evaluator (:func:`~.quota.evaluator_for`) matches — a resource the
quota's ``status.hard`` names, and every scope of the quota holding for the object — are each checked in name
order:

* the object must state what the quota limits (pods: "must specify"): 403 ``failed quota: <name>: <why>``;
* the quota's ``status.used`` must have each such resource (the quota controller has counted it): else 403
  ``status unknown for quota: <name>, resources: <names>``;
* the object's use must not be negative (403 ``quota usage is negative for resource(s): ...``), nor take any
  quota beyond ``status.hard``: 403 ``exceeded quota: <name>, requested: ..., used: ..., limited: ...``.

A create that passes adds its use to each matching quota's ``status.used``, written through ``resourcequotas/status``
as ``kube-apiserver`` *before* the object is stored, as the real plugin's quota evaluator writes it (so a quota's
``used`` is right at once, where the controller's recount comes later; a dry run writes nothing). A quota whose
``status.hard`` is empty (the controller has not seen it: on a real server without kube-controller-manager, for
ever) limits nothing.

An update is admitted only where the real plugin looks at one: a pod whose ``activeDeadlineSeconds`` moves it between
the ``Terminating`` and ``NotTerminating`` scopes (:func:`admit_update`) is charged its use in the quotas it now
matches and did not before (and, as on the real server, nothing is given back to those it left until the controller
recounts). What it leaves out: the ``resize`` subresource (not served), ``LimitedResources`` of an admission
configuration, and a create refused after admission (an ``AlreadyExists``) still counted, which the real plugin
also counts until the controller's next recount: here the store checks the name first, so it is not.
"""

from __future__ import annotations

from typing import Any

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.quota import Evaluator, evaluator_for, terminating
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.resourcelists import (
    ResourceList,
    add,
    as_json,
    less_or_equal,
    mask,
    negative,
    parse_list,
    pretty,
    remove_zeros,
    subtract_non_negative,
)
from kubeflux.sim.apiserver.watch import Collection

__all__ = ["ADMISSION_MANAGER", "QUOTAS", "admit_create", "admit_update"]

Object = dict[str, Any]
QUOTAS = "/resourcequotas"
"""The collection of ResourceQuotas."""
ADMISSION_MANAGER = "kube-apiserver"
"""Who the quota's ``status.used`` writes are recorded as (``managedFields``), as on the real server."""


def _forbidden(resource: ResourceType, name: str, why: str) -> ApiError:
    qualified = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    return ApiError(
        403, "Forbidden", f'{qualified} "{name}" is forbidden: {why}', resource.plural, name, resource.group
    )


def _quotas(collection: Collection | None, namespace: str) -> list[Object]:
    if collection is None or not collection.objects:
        return []
    prefix = f"{namespace}/"
    return [obj for key, obj in sorted(collection.objects.items()) if key.startswith(prefix)]


def admit_create(quotas: Collection | None, resource: ResourceType, obj: Object) -> list[Object]:
    """Admit the create of ``obj`` (named, defaulted, validated) of ``resource`` under the ResourceQuotas
    ``quotas`` (the store's collection, if any): raise the real plugin's 403, or the quotas it is counted in, each
    with its new ``status.used``, for the store to write as :data:`ADMISSION_MANAGER` (see the module docstring)."""
    if not resource.namespaced:
        return []
    return _charged(quotas, resource, obj, None)


def admit_update(quotas: Collection | None, resource: ResourceType, new: Object, old: Object) -> list[Object]:
    """Admit the update of a pod (the main resource, not a subresource) whose Terminating scope it changes, as
    :func:`admit_create`; nothing else is an update the real plugin looks at."""
    if resource.plural != "pods" or resource.group or terminating(new) == terminating(old):
        return []
    return _charged(quotas, resource, new, old)


def _charged(quotas: Collection | None, resource: ResourceType, obj: Object, old: Object | None) -> list[Object]:
    matching = _quotas(quotas, obj["metadata"].get("namespace", ""))
    evaluator = evaluator_for(resource) if matching else None
    if evaluator is None:
        return []
    charged = []
    for quota, used in _check(resource, evaluator, matching, obj, old):
        charged.append({**quota, "status": {**(quota.get("status") or {}), "used": as_json(used)}})
    return charged


def _check(
    resource: ResourceType, evaluator: Evaluator, quotas: list[Object], obj: Object, old: Object | None
) -> list[tuple[Object, ResourceList]]:
    """The quotas ``obj`` (replacing ``old`` in an update) matches with their ``used`` after it; raises the 403s.
    An update is charged the growth of its use in the quotas ``old`` matched too, its whole use in the others."""
    name = obj["metadata"].get("name", "")
    interesting: list[tuple[Object, list[str]]] = []
    for quota in quotas:
        if not evaluator.matches(quota, obj):
            continue
        status = quota.get("status") or {}
        restricted = evaluator.matching(status.get("hard") or {})
        why = evaluator.constraints(restricted, obj)
        if why:
            raise _forbidden(resource, name, f"failed quota: {quota['metadata']['name']}: {why}")
        used = status.get("used") or {}
        if any(r not in used for r in restricted):
            listed = ",".join(sorted(restricted))
            raise _forbidden(
                resource, name, f"status unknown for quota: {quota['metadata']['name']}, resources: {listed}"
            )
        interesting.append((quota, restricted))
    if not interesting:
        return []
    usage = evaluator.usage(obj)
    below = negative(usage)
    if below:
        raise _forbidden(resource, name, f"quota usage is negative for resource(s): {','.join(below)}")
    growth = usage if old is None else subtract_non_negative(usage, evaluator.usage(old))
    changed = []
    for quota, _ in interesting:
        delta = remove_zeros(growth if old is not None and evaluator.matches(quota, old) else usage)
        status = quota.get("status") or {}
        hard, used = parse_list(status.get("hard")), parse_list(status.get("used"))
        requested = mask(delta, hard)
        if not requested:
            continue
        new_used = add(used, requested)
        fits, exceeded = less_or_equal(mask(new_used, requested), hard)
        if not fits:
            why = (
                f"exceeded quota: {quota['metadata']['name']}, requested: {pretty(mask(requested, exceeded))}, "
                f"used: {pretty(mask(used, exceeded))}, limited: {pretty(mask(hard, exceeded))}"
            )
            raise _forbidden(resource, name, why)
        changed.append((quota, new_used))
    return changed
