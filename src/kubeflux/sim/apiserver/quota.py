"""ResourceQuotas: the object (its strategy, validated as ``ValidateResourceQuota`` of k8s.io/kubernetes v1.36
validates it) and the *evaluators* that say what an object of a kind uses of a quota, as
``pkg/quota/v1/evaluator/core`` and ``k8s.io/apiserver/pkg/quota/v1/generic`` say it.

Two evaluators serve every kind:

* :class:`PodEvaluator`: a pod uses ``pods``, ``count/pods``, ``cpu``/``requests.cpu``, ``limits.cpu``, the same of
  ``memory`` and ``ephemeral-storage``, ``hugepages-*`` and ``requests.<extended resource>`` (its requests as the
  scheduler sums them: containers and sidecars, or the largest init container); a pod that has ended
  (``Succeeded``/``Failed``) uses only ``count/pods``. It answers the scopes ``Terminating``/``NotTerminating``
  (``activeDeadlineSeconds``), ``BestEffort``/``NotBestEffort`` (no cpu or memory asked or limited),
  ``PriorityClass`` (``Exists`` or a selector on the class name) and ``CrossNamespacePodAffinity``; a quota on
  ``cpu`` or ``memory`` (requests or limits) refuses a container that does not state it ("must specify").
* :class:`CountEvaluator`: any other kind uses one ``count/<plural>.<group>`` (``count/<plural>`` in the core
  group) and, for ConfigMaps, Secrets, ResourceQuotas and ReplicationControllers, their old names
  (``configmaps`` ...). It matches no scope: a quota with scopes counts none of them.

Events, bindings and the access reviews are never counted (``DefaultIgnoredResources``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubeflux.apiobjects.rules import qualified_name_problems
from kubeflux.sim.apiserver.data_strategies import quantity_error
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType, Strategy
from kubeflux.sim.apiserver.resourcelists import Amount, ResourceList, add, parse_amount, parse_list

__all__ = [
    "IGNORED",
    "CountEvaluator",
    "Evaluator",
    "PodEvaluator",
    "ResourceQuotaStrategy",
    "count_name",
    "evaluator_for",
    "scope_selectors",
]

Object = dict[str, Any]
IGNORED = frozenset(
    {
        ("", "bindings"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("", "componentstatuses"),
        ("authentication.k8s.io", "tokenreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "localsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
    }
)
"""(group, plural) of what quota never counts (``install.DefaultIgnoredResources``)."""
_ALIASES = {
    ("", "configmaps"): "configmaps",
    ("", "resourcequotas"): "resourcequotas",
    ("", "replicationcontrollers"): "replicationcontrollers",
    ("", "secrets"): "secrets",
}
"""The old object-count names (``legacyObjectCountAliases``)."""
_SERVICE_NAMES = frozenset({"services", "count/services", "services.loadbalancers", "services.nodeports"})
_CLAIM_NAMES = frozenset({"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"})
QUIET_NAMES = _SERVICE_NAMES | _CLAIM_NAMES
"""What the Service and PersistentVolumeClaim evaluators count: objects ``cluster serve`` holds none of (their
collections are empty), so their use is always 0."""

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


def _hugepages(name: str) -> bool:
    return name.startswith("hugepages-") or name.startswith("requests.hugepages-")


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``: not native, no ``requests.`` prefix, and a qualified name once prefixed."""
    if _native(name) or name.startswith("requests."):
        return False
    return not qualified_name_problems(f"requests.{name}")


def _integer(name: str) -> bool:
    return name in _INTEGER or _extended(name)


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
        if not causes and name not in _STANDARD and not _hugepages(name):
            causes.append(
                Cause(path, f"Invalid value: {_go(name)}: must be a standard resource type or fully qualified")
            )
        if name not in _STANDARD_QUOTA and not _hugepages(name):
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
            if (name in _STANDARD_QUOTA or _hugepages(name)) and not _scope_valid_for(str(scope), name):
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
            if (name in _STANDARD_QUOTA or _hugepages(name)) and not _scope_valid_for(str(scope), name):
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


# -- evaluators -------------------------------------------------------------------------------------------------
def scope_selectors(quota: Object) -> list[Object]:
    """The quota's ``scopes`` (each as ``Exists``) and ``scopeSelector`` expressions."""
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or ()]
    selector = spec.get("scopeSelector") or {}
    selectors += [e for e in selector.get("matchExpressions") or () if isinstance(e, dict)]
    return selectors


def count_name(resource: ResourceType) -> str:
    """``count/<plural>.<group>`` (``count/<plural>`` in the core group)."""
    return f"count/{resource.plural}.{resource.group}" if resource.group else f"count/{resource.plural}"


class Evaluator:
    """What objects of one kind use of a quota (k8s.io/apiserver's ``quota.Evaluator``)."""

    def matching(self, names: Iterable[str]) -> list[str]:
        """The quota resource names, of ``names``, that objects of this kind use."""
        raise NotImplementedError

    def matches_scope(self, selector: Object, obj: Object) -> bool:
        return False

    def constraints(self, required: Iterable[str], obj: Object) -> str:
        """Why ``obj`` may not be admitted under a quota on ``required`` (``""``: it may)."""
        return ""

    def usage(self, obj: Object) -> ResourceList:
        raise NotImplementedError

    def matches(self, quota: Object, obj: Object) -> bool:
        """``generic.Matches``: the quota limits something of this kind and each of its scopes holds for ``obj``."""
        hard = (quota.get("status") or {}).get("hard") or {}
        return bool(self.matching(hard)) and all(self.matches_scope(s, obj) for s in scope_selectors(quota))


class CountEvaluator(Evaluator):
    """One object of the kind is one ``count/...`` (and its old name, if it has one)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def matching(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in self.names]

    def usage(self, obj: Object) -> ResourceList:
        return {name: Amount(Fraction(1)) for name in self.names}


_POD_RESOURCES = frozenset(
    {
        "count/pods",
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
    }
)
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})


def _container_lists(container: Object) -> tuple[ResourceList, ResourceList]:
    """A container's requests (a limit standing in for a missing request, as the API's defaults make it) and
    limits."""
    resources = container.get("resources") or {}
    limits = parse_list(resources.get("limits"))
    requests = {**limits, **parse_list(resources.get("requests"))}
    return requests, limits


def _container_usage(requests: Mapping[str, Amount], limits: Mapping[str, Amount]) -> ResourceList:
    """``podComputeUsageHelper``."""
    result: ResourceList = {"pods": Amount(Fraction(1))}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            result[name] = result[f"requests.{name}"] = amount
        elif _extended(name):
            result[f"requests.{name}"] = amount
    return result


def _pod_lists(pod: Object) -> tuple[ResourceList, ResourceList]:
    """The pod's requests and limits as ``resourcehelper.PodRequests`` / ``PodLimits`` sum them: the containers
    and restartable (sidecar) init containers, or an init container's with the sidecars before it where larger;
    the pod's own ``spec.resources`` where given; plus ``spec.overhead``."""
    spec = pod.get("spec") or {}
    totals: list[ResourceList] = []
    for index in (0, 1):
        running: ResourceList = {}
        for container in spec.get("containers") or ():
            if isinstance(container, dict):
                running = add(running, _container_lists(container)[index])
        sidecars: ResourceList = {}
        peak: ResourceList = {}
        for container in spec.get("initContainers") or ():
            if not isinstance(container, dict):
                continue
            own = _container_lists(container)[index]
            if container.get("restartPolicy") == "Always":
                sidecars = add(sidecars, own)
                candidate = sidecars
            else:
                candidate = add(own, sidecars)
            for name, amount in candidate.items():
                if name not in peak or amount.value > peak[name].value:
                    peak[name] = amount
        total = add(running, sidecars)
        for name, amount in peak.items():
            if name not in total or amount.value > total[name].value:
                total[name] = amount
        pod_level = parse_list((spec.get("resources") or {}).get("requests" if index == 0 else "limits"))
        total.update({k: v for k, v in pod_level.items() if k in ("cpu", "memory")})
        totals.append(add(total, parse_list(spec.get("overhead"))))
    return totals[0], totals[1]


def terminating(pod: Object) -> bool:
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0


def best_effort(pod: Object) -> bool:
    """``qos.GetPodQOS`` is BestEffort: no container asks for or limits cpu or memory."""
    spec = pod.get("spec") or {}
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or ():
            if isinstance(container, dict):
                requests, limits = _container_lists(container)
                if any(n in ("cpu", "memory") and a.value != 0 for part in (requests, limits) for n, a in part.items()):
                    return False
    return True


def _cross_namespace_affinity(pod: Object) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        part = affinity.get(kind) or {}
        terms = list(part.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        terms += [
            w.get("podAffinityTerm") or {} for w in part.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        ]
        if any(isinstance(t, dict) and (t.get("namespaces") or t.get("namespaceSelector") is not None) for t in terms):
            return True
    return False


def _priority_matches(selector: Object, pod: Object) -> bool:
    name = (pod.get("spec") or {}).get("priorityClassName") or ""
    operator, values = selector.get("operator"), selector.get("values") or []
    if operator == "Exists":
        return bool(name)
    if operator == "DoesNotExist":
        return not name
    if operator == "In":
        return bool(name) and name in values
    if operator == "NotIn":
        return not name or name not in values
    return False


class PodEvaluator(Evaluator):
    """Pods (see the module docstring)."""

    def matching(self, names: Iterable[str]) -> list[str]:
        return [
            n
            for n in names
            if n in _POD_RESOURCES
            or n.startswith("hugepages-")
            or n.startswith("requests.hugepages-")
            or (n.startswith("requests.") and not _native(n))
        ]

    def matches_scope(self, selector: Object, obj: Object) -> bool:
        scope = selector.get("scopeName")
        if scope == "Terminating":
            return terminating(obj)
        if scope == "NotTerminating":
            return not terminating(obj)
        if scope == "BestEffort":
            return best_effort(obj)
        if scope == "NotBestEffort":
            return not best_effort(obj)
        if scope == "PriorityClass":
            return _priority_matches(selector, obj)
        if scope == "CrossNamespacePodAffinity":
            return _cross_namespace_affinity(obj)
        return False

    def constraints(self, required: Iterable[str], obj: Object) -> str:
        """``podEvaluator.Constraints``: each container states every cpu and memory figure the quota limits."""
        spec = obj.get("spec") or {}
        if any(k in ("cpu", "memory") for k in ((spec.get("resources") or {}).get("requests") or {})):
            return ""  # pod-level resources (on by default since v1.34) stand for the containers'
        wanted = set(required) & _MUST_SPECIFY
        missing: dict[str, set[str]] = {}
        for field in ("containers", "initContainers"):
            for container in spec.get(field) or ():
                if not isinstance(container, dict):
                    continue
                has = set(_container_usage(*_container_lists(container)))
                for name in wanted - has:
                    missing.setdefault(name, set()).add(str(container.get("name", "")))
        if not missing:
            return ""
        parts = [f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing)]
        return "must specify " + "; ".join(parts)

    def usage(self, obj: Object) -> ResourceList:
        """``PodUsageFunc``: ``count/pods`` always; the rest only while the pod has not ended."""
        result: ResourceList = {"count/pods": Amount(Fraction(1))}
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return result
        requests, limits = _pod_lists(obj)
        return add(result, _container_usage(requests, limits))


_PODS = PodEvaluator()


def evaluator_for(resource: ResourceType) -> Evaluator | None:
    """The evaluator of ``resource``'s objects; None for what quota never counts (and cluster-scoped kinds)."""
    if (resource.group, resource.plural) in IGNORED or not resource.namespaced or resource.create_only:
        return None
    if resource.group == "" and resource.plural == "pods":
        return _PODS
    alias = _ALIASES.get((resource.group, resource.plural))
    return CountEvaluator((count_name(resource), alias) if alias else (count_name(resource),))
