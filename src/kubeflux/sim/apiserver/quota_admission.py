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

What it leaves out: updates (a pod gaining ``activeDeadlineSeconds`` moves between the Terminating scopes on a real
server, and the ``resize`` subresource), ``LimitedResources`` of an admission configuration, and a create refused
after admission (an ``AlreadyExists``) still counted, which the real plugin also counts until the controller's
next recount: here the store checks the name first, so it is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.quota import Evaluator, evaluator_for
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
)

if TYPE_CHECKING:
    from kubeflux.sim.apiserver.store import Store

__all__ = ["QUOTAS", "admit_create"]

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


def _quotas(store: Store, namespace: str) -> list[Object]:
    collection = store.collections.get(QUOTAS)
    if collection is None or not collection.objects:
        return []
    prefix = f"{namespace}/"
    return [obj for key, obj in sorted(collection.objects.items()) if key.startswith(prefix)]


def admit_create(store: Store, resource: ResourceType, obj: Object) -> None:
    """Admit the create of ``obj`` (named, defaulted, validated) of ``resource``: raise the real plugin's 403, or
    count it in its namespace's quotas (see the module docstring)."""
    if not resource.namespaced:
        return
    meta = obj["metadata"]
    quotas = _quotas(store, meta.get("namespace", ""))
    if not quotas:
        return
    evaluator = evaluator_for(resource)
    if evaluator is None:
        return
    changed = _check(resource, evaluator, quotas, obj)
    if not changed or store.dry:
        return
    quota_resource = store.registry.find("", "v1", "resourcequotas")
    assert quota_resource is not None
    with store.request(ADMISSION_MANAGER):
        for quota, used in changed:
            status = {**(quota.get("status") or {}), "used": as_json(used)}
            qmeta = quota["metadata"]
            store.update(
                quota_resource, qmeta["namespace"], qmeta["name"], {**quota, "status": status}, "status", trusted=True
            )


def _check(
    resource: ResourceType, evaluator: Evaluator, quotas: list[Object], obj: Object
) -> list[tuple[Object, ResourceList]]:
    """The quotas ``obj`` matches with their ``used`` after it; raises the 403s."""
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
    delta = remove_zeros(usage)
    if not delta:
        return []
    changed = []
    for quota, _ in interesting:
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
