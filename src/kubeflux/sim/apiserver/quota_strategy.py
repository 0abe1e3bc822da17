"""ResourceQuota objects: their strategy, validated as ``ValidateResourceQuota`` of k8s.io/kubernetes v1.36 validates
them (resource names, quantities, integers, scopes and the resources they apply to, scope selectors; scopes never
change), quantities written back as the real server writes them. Their ``status`` is the quota controller's and the
quota admission's (:mod:`.quota_controller`, :mod:`.quota_admission`)."""

from __future__ import annotations

import json
from typing import Any

from kubeflux.apiobjects.rules import qualified_name_problems
from kubeflux.sim.apiserver.data_strategies import quantity_error
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.quota import extended_resource, hugepages
from kubeflux.sim.apiserver.registry import Strategy
from kubeflux.sim.apiserver.resourcelists import parse_amount

__all__ = ["ResourceQuotaStrategy"]

Object = dict[str, Any]
_STANDARD_QUOTA = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD = (_STANDARD_QUOTA - {"requests.storage"}) | {"storage", "requests.storage"}
_INTEGER = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_SCOPES = frozenset(
    {
        "Terminating",
        "NotTerminating",
        "BestEffort",
        "NotBestEffort",
        "PriorityClass",
        "VolumeAttributesClass",
        "CrossNamespacePodAffinity",
    }
)
_POD_COUNT = frozenset({"pods"})
_POD_COMPUTE = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"})
_EXISTS_ONLY = ("BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity")
_CONFLICTS = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))


def _go(value: object) -> str:
    """A value as the real server's messages show it (Go's ``%#v``-like JSON)."""
    return json.dumps(value, separators=(",", ":"))


def _integer(name: str) -> bool:
    return name in _INTEGER or extended_resource(name)


def _scope_valid_for(scope: str, name: str) -> bool:
    """``IsResourceQuotaScopeValidForResource``."""
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return name in _POD_COUNT or name in _POD_COMPUTE
    if scope == "BestEffort":
        return name in _POD_COUNT
    if scope == "VolumeAttributesClass":
        return name in ("persistentvolumeclaims", "requests.storage")
    return True


def _name_causes(name: str, path: str) -> list[Cause]:
    """``ValidateResourceQuotaResourceName``."""
    causes = [Cause(path, f"Invalid value: {_go(name)}: {p}") for p in qualified_name_problems(name)]
    if "/" not in name:
        if not causes and name not in _STANDARD and not hugepages(name):
            causes.append(
                Cause(path, f"Invalid value: {_go(name)}: must be a standard resource type or fully qualified")
            )
        if name not in _STANDARD_QUOTA and not hugepages(name):
            causes.append(Cause(path, f"Invalid value: {_go(name)}: must be a standard resource for quota"))
    return causes


def _list_causes(values: object, path: str) -> list[Cause]:
    """Each name and quantity of a quota's ``hard`` or ``used``."""
    if values is None:
        return []
    if not isinstance(values, dict):
        return [Cause(path, "Invalid value: must be an object")]
    causes = []
    for name, value in values.items():
        where = f"{path}[{name}]"
        causes += _name_causes(str(name), where)
        try:
            amount = parse_amount(value)
        except ValueError:
            continue  # a decoding error, answered 400 before validation
        if amount.value < 0:
            causes.append(Cause(where, f'Invalid value: "{amount}": must be greater than or equal to 0'))
        if _integer(str(name)) and (amount.value * 1000).denominator == 1 and (amount.value * 1000) % 1000:
            causes.append(Cause(where, f'Invalid value: "{amount}": must be an integer'))
    return causes


def _scope_causes(spec: Object) -> list[Cause]:
    scopes = spec.get("scopes") or []
    if not isinstance(scopes, list):
        return [Cause("spec.scopes", "Invalid value: must be a list of scopes")]
    hard = sorted((spec.get("hard") or {}) if isinstance(spec.get("hard"), dict) else {})
    causes = []
    for scope in scopes:
        if scope not in _SCOPES:
            causes.append(Cause("spec.scopes", f"Invalid value: {_go(scopes)}: unsupported scope"))
        for name in hard:
            if (name in _STANDARD_QUOTA or hugepages(name)) and not _scope_valid_for(str(scope), name):
                causes.append(
                    Cause("spec.scopes", f"Invalid value: {_go(scopes)}: unsupported scope applied to resource")
                )
    for pair in _CONFLICTS:
        if all(s in scopes for s in pair):
            causes.append(Cause("spec.scopes", f"Invalid value: {_go(scopes)}: conflicting scopes"))
    return causes


def _selector_causes(spec: Object) -> list[Cause]:
    selector = spec.get("scopeSelector")
    if selector is None:
        return []
    expressions = selector.get("matchExpressions") if isinstance(selector, dict) else None
    if not isinstance(expressions, list) or not all(isinstance(e, dict) for e in expressions):
        return [Cause("spec.scopeSelector.matchExpressions", "Invalid value: must be a list of objects")]
    path = "spec.scopeSelector.matchExpressions"
    hard = sorted(spec.get("hard") or {}) if isinstance(spec.get("hard"), dict) else []
    causes, seen = [], set()
    for req in expressions:
        scope, operator, values = req.get("scopeName"), req.get("operator"), req.get("values") or []
        if scope not in _SCOPES:
            causes.append(Cause(f"{path}.scopeName", f"Invalid value: {_go(scope)}: unsupported scope"))
        for name in hard:
            if (name in _STANDARD_QUOTA or hugepages(name)) and not _scope_valid_for(str(scope), name):
                causes.append(Cause(path, f"Invalid value: {_go(selector)}: unsupported scope applied to resource"))
        if scope in _EXISTS_ONLY and operator != "Exists":
            message = (
                f"Invalid value: {_go(operator)}: must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
                "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or "
                "ResourceQuotaScopeCrossNamespacePodAffinity"
            )
            causes.append(Cause(f"{path}.operator", message))
        if operator in ("In", "NotIn"):
            if not values:
                message = (
                    "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"
                )
                causes.append(Cause(f"{path}.values", message, "FieldValueRequired"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                message = (
                    f"Invalid value: {_go(values)}: must be no value when `operator` is 'Exist' or 'DoesNotExist' for "
                    "scope selector"
                )
                causes.append(Cause(f"{path}.values", message))
        else:
            causes.append(Cause(f"{path}.operator", f"Invalid value: {_go(operator)}: not a valid selector operator"))
        seen.add(scope)
    for pair in _CONFLICTS:
        if all(s in seen for s in pair):
            causes.append(Cause(path, f"Invalid value: {_go(spec.get('scopes'))}: conflicting scopes"))
    return causes


def _canonical(values: object) -> object:
    """Quantities written back as the real server writes them (``1.5`` → ``1500m``); left as they are when one
    does not parse (validation answers it)."""
    if not isinstance(values, dict):
        return values
    try:
        return {name: str(parse_amount(value)) for name, value in values.items()}
    except ValueError:
        return values


class ResourceQuotaStrategy(Strategy):
    """``v1`` ResourceQuotas: ``spec.hard`` names and quantities, scopes and scope selectors validated as the real
    server validates them (its ``status`` is the quota controller's and the admission's: see :mod:`.quota_admission`
    and :mod:`.quota_controller`); scopes never change."""

    has_status = True
    returns_deleted_object = True

    def decode_error(self, obj: Object) -> str:
        spec, status = obj.get("spec"), obj.get("status")
        for part, key in ((spec, "hard"), (status, "hard"), (status, "used")):
            if isinstance(part, dict):
                problem = quantity_error(part.get(key))
                if problem:
                    return problem
        return ""

    def canonicalize(self, obj: Object) -> None:
        if obj.get("spec") is None:
            obj["spec"] = {}
        if obj.get("status") is None:
            obj["status"] = {}
        for part, key in ((obj["spec"], "hard"), (obj["status"], "hard"), (obj["status"], "used")):
            if isinstance(part, dict) and key in part:
                part[key] = _canonical(part[key])

    def validate(self, obj: Object) -> list[Cause]:
        spec, status = obj.get("spec"), obj.get("status")
        if not isinstance(spec, dict):
            return [Cause("spec", "Invalid value: must be an object")]
        causes = _list_causes(spec.get("hard"), "spec.hard") + _scope_causes(spec) + _selector_causes(spec)
        if isinstance(status, dict):
            causes += _list_causes(status.get("hard"), "status.hard") + _list_causes(status.get("used"), "status.used")
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        before = set((old.get("spec") or {}).get("scopes") or ())
        scopes = (new.get("spec") or {}).get("scopes") if isinstance(new.get("spec"), dict) else None
        if set(scopes or ()) != before:
            causes.append(Cause("spec.scopes", f"Invalid value: {_go(scopes)}: field is immutable"))
        return causes
