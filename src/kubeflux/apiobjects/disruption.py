"""``policy/v1`` PodDisruptionBudgets as the real kube-apiserver v1.36 takes them, and the Eviction API's words when
one refuses an eviction: one reading for ``simulate``'s workload files, ``cluster serve``'s store and ``serve``.

Two stages, as the real server has them:

* **decoding** (a 400 ``BadRequest``, the whole object refused): ``spec`` and ``spec.selector`` are objects,
  ``minAvailable`` and ``maxUnavailable`` an ``int32`` or a string (``intstr``), the selector's labels strings
  (:func:`budget_decode_error`);
* **validation** (a 422 ``Invalid``, one cause per field; ``ValidatePodDisruptionBudgetSpec`` in
  ``k8s.io/kubernetes/pkg/apis/policy/validation``): not both ``minAvailable`` and ``maxUnavailable``; each a count
  of at least 0 or a percentage (``"50%"``) of at most 100 %; the selector's keys, values and operators valid
  (``metav1.LabelSelector``); ``unhealthyPodEvictionPolicy`` ``IfHealthyBudget`` or ``AlwaysAllow``
  (:func:`budget_problems`). A budget's name is no DNS name (the real server takes ``A``): only a path segment.

:func:`budget_from_manifest` reads a valid one into the schedulers' :class:`~kubeflux.scheduler.objects.
DisruptionBudget`; :func:`eviction_refusal` words a 429 as the Eviction API does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from kubeflux.apiobjects.batchjob import FieldProblem
from kubeflux.apiobjects.manifests import ManifestReader
from kubeflux.apiobjects.podterms import label_selector, selector_problems, selector_to_manifest
from kubeflux.apiobjects.rules import int_decode_error, unmarshal_error
from kubeflux.scheduler.objects import DisruptionBudget

__all__ = [
    "EVICTION_REFUSED",
    "UNHEALTHY_POD_EVICTION_POLICIES",
    "budget_decode_error",
    "budget_from_manifest",
    "budget_problems",
    "budget_to_manifest",
    "desired_healthy",
    "eviction_refusal",
]

EVICTION_REFUSED: Final = "Cannot evict pod as it would violate the pod's disruption budget."
"""The message of the Eviction API's 429 when a budget allows no disruption (its cause says which budget)."""
UNHEALTHY_POD_EVICTION_POLICIES: Final = ("AlwaysAllow", "IfHealthyBudget")
_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
_PERCENT = re.compile(r"[0-9]+%\Z")
_PERCENT_RULE: Final = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for "
    "validation is '[0-9]+%')"
)
_BOUNDS: Final = ("minAvailable", "maxUnavailable")


def desired_healthy(budget: DisruptionBudget, expected: int | None) -> int | None:
    """``status.desiredHealthy`` as the disruption controller computes it (``getExpectedPodCount``): ``minAvailable``
    as a count; else from ``expected``, the scale of the selected pods' controllers (a percentage rounded up,
    ``maxUnavailable`` taken from it); None when that is needed and unknown (a pod's controller without a scale, a
    Job's: the controller's sync fails)."""
    if budget.max_unavailable is None and budget.min_available is None:
        return 0
    if budget.max_unavailable is None and isinstance(budget.min_available, int):
        return budget.min_available
    if expected is None:
        return None
    bound = budget.max_unavailable if budget.max_unavailable is not None else budget.min_available
    scaled = bound if isinstance(bound, int) else -(-int(str(bound)[:-1]) * expected // 100)
    return max(expected - scaled, 0) if budget.max_unavailable is not None else scaled


def eviction_refusal(budget: str, desired: int | None = None, healthy: int = 0) -> str:
    """The 429 an eviction gets from ``budget`` that allows no disruption now, with its cause: the healthy pods it
    needs (``desired``) and has, or (``desired`` None, or more healthy than needed) that it allows none."""
    if desired is None or healthy > desired:
        cause = f"The disruption budget {budget} does not allow evicting pods currently"
    else:
        cause = f"The disruption budget {budget} needs {desired} healthy pods and has {healthy} currently"
    return f"{EVICTION_REFUSED} {cause}"


def budget_decode_error(obj: Mapping[str, Any]) -> str | None:
    """Why a PodDisruptionBudget cannot be decoded (the 400's text after ``cannot be handled as a
    PodDisruptionBudget:``), or None. ``null`` fields are fine (Go leaves them empty)."""
    spec = obj.get("spec")
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        return unmarshal_error(spec, "PodDisruptionBudget.spec", "v1.PodDisruptionBudgetSpec")
    for name in _BOUNDS:
        value = spec.get(name)
        if not isinstance(value, str):
            problem = int_decode_error("PodDisruptionBudgetSpec", f"spec.{name}", value)
            if problem is not None:
                return problem
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and not isinstance(policy, str):
        return unmarshal_error(
            policy, "PodDisruptionBudgetSpec.spec.unhealthyPodEvictionPolicy", "v1.UnhealthyPodEvictionPolicyType"
        )
    selector = spec.get("selector")
    if selector is None:
        return None
    if not isinstance(selector, Mapping):
        return unmarshal_error(selector, "PodDisruptionBudgetSpec.spec.selector", "v1.LabelSelector")
    return _selector_decode_error(selector)


def _selector_decode_error(selector: Mapping[str, Any]) -> str | None:
    labels = selector.get("matchLabels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            return unmarshal_error(labels, "LabelSelector.spec.selector.matchLabels", "map[string]string")
        for value in labels.values():
            if value is not None and not isinstance(value, str):
                return unmarshal_error(value, "LabelSelector.spec.selector.matchLabels", "string")
    expressions = selector.get("matchExpressions")
    if expressions is None:
        return None
    if not isinstance(expressions, list):
        return unmarshal_error(
            expressions, "LabelSelector.spec.selector.matchExpressions", "[]v1.LabelSelectorRequirement"
        )
    for expression in expressions:
        if not isinstance(expression, Mapping):
            return unmarshal_error(
                expression, "LabelSelector.spec.selector.matchExpressions", "v1.LabelSelectorRequirement"
            )
        for name, go_type in (("key", "string"), ("operator", "v1.LabelSelectorOperator")):
            value = expression.get(name)
            if value is not None and not isinstance(value, str):
                return unmarshal_error(
                    value, f"LabelSelectorRequirement.spec.selector.matchExpressions.{name}", go_type
                )
        values = expression.get("values")
        if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
            return unmarshal_error(values, "LabelSelectorRequirement.spec.selector.matchExpressions.values", "[]string")
    return None


def _go_value(value: Any) -> str:
    """A value as Go's ``%v`` of a field error shows it: a string quoted, a number bare."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def _bound_problems(value: Any, path: str) -> list[FieldProblem]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [FieldProblem(path, f"Invalid value: {_go_value(value)}: {_PERCENT_RULE}")]
        if int(value[:-1]) > 100:
            return [FieldProblem(path, f"Invalid value: {_go_value(value)}: must not be greater than 100%")]
        return []
    if value < 0:
        return [FieldProblem(path, f"Invalid value: {value}: must be greater than or equal to 0")]
    return []


def _go_spec(spec: Mapping[str, Any]) -> str:
    """The internal ``PodDisruptionBudgetSpec`` as ``field.Invalid`` prints it (its Go field names, JSON values)."""
    shown = {
        "MinAvailable": spec.get("minAvailable"),
        "Selector": _go_selector(spec.get("selector")),
        "MaxUnavailable": spec.get("maxUnavailable"),
        "UnhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
    }
    return json.dumps(shown, separators=(",", ":"))


def _go_selector(selector: Any) -> Any:
    if not isinstance(selector, Mapping):
        return None
    shown: dict[str, Any] = {}
    if selector.get("matchLabels"):
        shown["matchLabels"] = dict(sorted(selector["matchLabels"].items()))
    if selector.get("matchExpressions"):
        shown["matchExpressions"] = [
            {k: e[k] for k in ("key", "operator", "values") if e.get(k) not in (None, [])}
            for e in selector["matchExpressions"]
        ]
    return shown


def budget_problems(obj: Mapping[str, Any]) -> list[FieldProblem]:
    """Every cause of a 422 for a decodable PodDisruptionBudget (see :func:`budget_decode_error`), in the real
    server's order and words."""
    spec = obj.get("spec") or {}
    problems: list[FieldProblem] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        message = f"Invalid value: {_go_spec(spec)}: minAvailable and maxUnavailable cannot be both set"
        problems.append(FieldProblem("spec", message))
    for name in _BOUNDS:
        if spec.get(name) is not None:
            problems += _bound_problems(spec[name], f"spec.{name}")
    selector = spec.get("selector")
    if isinstance(selector, Mapping):
        problems += selector_problems(selector, "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in UNHEALTHY_POD_EVICTION_POLICIES)
        message = f"Unsupported value: {_go_value(policy)}: supported values: {supported}"
        problems.append(FieldProblem("spec.unhealthyPodEvictionPolicy", message, "FieldValueNotSupported"))
    return problems


def budget_from_manifest(obj: Mapping[str, Any]) -> DisruptionBudget:
    """The budget a valid (decoded and validated) ``policy/v1`` PodDisruptionBudget is, with the pods its status
    says are being disrupted."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    disrupted = status.get("disruptedPods") if isinstance(status, Mapping) else None
    reader = ManifestReader("PodDisruptionBudget", obj, ("PodDisruptionBudget",))
    return DisruptionBudget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        selector=label_selector(reader, "spec.selector", spec.get("selector")),
        min_available=spec.get("minAvailable"),
        max_unavailable=spec.get("maxUnavailable"),
        disrupted=frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
    )


def budget_to_manifest(budget: DisruptionBudget) -> dict[str, Any]:
    """The ``policy/v1`` PodDisruptionBudget ``budget`` is (its spec; no status): :func:`budget_from_manifest`'s
    inverse."""
    spec: dict[str, Any] = {}
    if budget.min_available is not None:
        spec["minAvailable"] = budget.min_available
    if budget.max_unavailable is not None:
        spec["maxUnavailable"] = budget.max_unavailable
    if budget.selector is not None:
        spec["selector"] = selector_to_manifest(budget.selector)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": budget.name, "namespace": budget.namespace},
        "spec": spec,
    }
