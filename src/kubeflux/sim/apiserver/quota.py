"""What an object uses of a ResourceQuota: the *evaluators*, as ``pkg/quota/v1/evaluator/core`` of k8s.io/kubernetes
v1.36 and ``k8s.io/apiserver/pkg/quota/v1/generic`` say it (the quota object itself: :mod:`.quota_strategy`).

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

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from kubeflux.apiobjects.rules import qualified_name_problems
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.resourcelists import Amount, ResourceList, add, parse_list

__all__ = [
    "IGNORED",
    "CountEvaluator",
    "Evaluator",
    "PodEvaluator",
    "best_effort",
    "count_name",
    "evaluator_for",
    "extended_resource",
    "hugepages",
    "native",
    "scope_selectors",
    "terminating",
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


def hugepages(name: str) -> bool:
    return name.startswith("hugepages-") or name.startswith("requests.hugepages-")


def native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def extended_resource(name: str) -> bool:
    """``IsExtendedResourceName``: not native, no ``requests.`` prefix, and a qualified name once prefixed."""
    if native(name) or name.startswith("requests."):
        return False
    return not qualified_name_problems(f"requests.{name}")


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
        elif extended_resource(name):
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
            or (n.startswith("requests.") and not native(n))
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
