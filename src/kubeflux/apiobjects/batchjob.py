"""What the API server refuses in a ``batch/v1`` Job's spec, in its words: one validation for ``simulate``'s reader
and ``cluster serve``'s Job strategy, so the same Job gets the same verdict from both; a CronJob's ``jobTemplate``
is held to the same (at its own path, ``spec.jobTemplate.spec.completions``).

Two stages, as the real kube-apiserver v1.36 has them:

* **decoding** (a 400 ``BadRequest``, the whole object refused): ``parallelism``, ``completions``,
  ``backoffLimit``, ``ttlSecondsAfterFinished``, ``backoffLimitPerIndex`` and ``maxFailedIndexes`` are Go ``int32``
  and ``activeDeadlineSeconds`` ``int64``: a string, a fraction or a number beyond the type is
  ``json: cannot unmarshal number 2147483648 into Go struct field JobSpec.spec.completions of type int32``
  (:func:`kubeflux.apiobjects.rules.int_decode_error`);
* **validation** (a 422 ``Invalid`` with one cause per field; ``validateJobSpec`` and ``ValidateJob`` in
  ``k8s.io/kubernetes/pkg/apis/batch/validation``): every count at least 0 (``completions: 0`` and
  ``parallelism: 0`` are valid: the first Job completes at once, the second creates no pod until it is raised);
  ``completionMode`` NonIndexed or Indexed; an Indexed Job needs ``completions``, at most 100,000 ``parallelism``
  and a name that still makes a DNS label with its last index (``<name>-<completions - 1>``, 63 characters);
  ``podFailurePolicy`` (``validatePodFailurePolicy``: at most 20 rules, each with a supported action — ``FailIndex``
  only with ``backoffLimitPerIndex`` — and exactly one of ``onExitCodes`` (an operator ``In`` or ``NotIn``, a
  container of the template if named, 1 to 255 values, ordered, unique, no 0 for ``In``) and ``onPodConditions``
  (at most 20, each a qualified condition type and a status ``True``, ``False`` or ``Unknown``)), which also wants
  ``podReplacementPolicy: Failed`` and the template's ``restartPolicy: Never``. Its values are ``int32``: decoded
  as the counts are. What the policy does is :mod:`kubeflux.apiobjects.podfailure`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubeflux.apiobjects.rules import (
    MAX_INT32,
    dns_label_problem,
    go_value,
    int_decode_error,
    qualified_name_problems,
    unmarshal_error,
)

__all__ = [
    "INT32_FIELDS",
    "INT64_FIELDS",
    "MAX_INDEXED_PARALLELISM",
    "MAX_INT32",
    "FieldProblem",
    "count_defaults",
    "job_decode_error",
    "job_problems",
    "pod_failure_policy_problems",
    "template_restart_problem",
]

MAX_INDEXED_PARALLELISM: Final = 100_000
"""``maxParallelismForIndexedJob``: the most pods an Indexed Job may run at once."""
INT32_FIELDS: Final = (
    "parallelism",
    "completions",
    "backoffLimit",
    "ttlSecondsAfterFinished",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)
INT64_FIELDS: Final = ("activeDeadlineSeconds",)
_MODES: Final = ("NonIndexed", "Indexed")
POD_FAILURE_ACTIONS: Final = ("Count", "FailIndex", "FailJob", "Ignore")
_OPERATORS: Final = ("In", "NotIn")
_CONDITION_STATUSES: Final = ("False", "True", "Unknown")
_REPLACEMENT_POLICIES: Final = ("Failed", "TerminatingOrFailed")
MAX_POD_FAILURE_RULES: Final = 20
MAX_EXIT_CODE_VALUES: Final = 255
MAX_CONDITION_PATTERNS: Final = 20


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One cause of a 422: the field path and the message the API server writes (``Invalid value: -1: must be
    greater than or equal to 0``), and its ``reason`` (``FieldValueInvalid``, ``FieldValueRequired``, …)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


def job_decode_error(spec: Any, prefix: str = "spec.") -> FieldProblem | None:
    """Why a Job whose ``spec`` is this cannot be decoded (the message is the 400's text after ``cannot be handled
    as a Job:``), or None. ``null`` fields are fine (Go leaves the pointer nil). ``prefix``: where the spec is
    (``spec.jobTemplate.spec.`` in a CronJob)."""
    if not isinstance(spec, Mapping):
        return None
    for name in INT32_FIELDS + INT64_FIELDS:
        go_type = "int64" if name in INT64_FIELDS else "int32"
        message = int_decode_error("JobSpec", f"{prefix}{name}", spec.get(name), go_type)
        if message is not None:
            return FieldProblem(f"{prefix}{name}", message, "BadRequest")
    return _policy_decode_error(spec.get("podFailurePolicy"), f"{prefix}podFailurePolicy")


def _not_decoded(value: Any, go_struct: str, path: str, go_type: str) -> FieldProblem:
    return FieldProblem(path, unmarshal_error(value, f"{go_struct}.{path}", go_type), "BadRequest")


def _policy_decode_error(policy: Any, path: str) -> FieldProblem | None:
    """Why a ``podFailurePolicy`` cannot be decoded (its lists and objects of the wrong JSON kind, exit codes that
    are no ``int32``), or None."""
    if policy is None:
        return None
    if not isinstance(policy, Mapping):
        return _not_decoded(policy, "JobSpec", path, "v1.PodFailurePolicy")
    rules = policy.get("rules")
    if rules is not None and not isinstance(rules, list):
        return _not_decoded(rules, "PodFailurePolicy", f"{path}.rules", "[]v1.PodFailurePolicyRule")
    for rule in rules or ():
        if not isinstance(rule, Mapping):
            return _not_decoded(rule, "PodFailurePolicy", f"{path}.rules", "v1.PodFailurePolicyRule")
        codes, patterns = rule.get("onExitCodes"), rule.get("onPodConditions")
        where = "PodFailurePolicyOnExitCodesRequirement"
        if codes is not None and not isinstance(codes, Mapping):
            go_type = "v1.PodFailurePolicyOnExitCodesRequirement"
            return _not_decoded(codes, "PodFailurePolicyRule", f"{path}.rules.onExitCodes", go_type)
        values = (codes or {}).get("values")
        if values is not None and not isinstance(values, list):
            return _not_decoded(values, where, f"{path}.rules.onExitCodes.values", "[]int32")
        for value in values or ():
            message = int_decode_error(where, f"{path}.rules.onExitCodes.values", value)
            if message is not None or value is None:
                return _not_decoded(value, where, f"{path}.rules.onExitCodes.values", "int32")
        if patterns is not None and not isinstance(patterns, list):
            go_type = "[]v1.PodFailurePolicyOnPodConditionsPattern"
            return _not_decoded(patterns, "PodFailurePolicyRule", f"{path}.rules.onPodConditions", go_type)
        for pattern in patterns or ():
            if not isinstance(pattern, Mapping):
                go_type = "v1.PodFailurePolicyOnPodConditionsPattern"
                return _not_decoded(pattern, "PodFailurePolicyRule", f"{path}.rules.onPodConditions", go_type)
    return None


def count_defaults(spec: Mapping[str, Any]) -> dict[str, int]:
    """The counts the server defaults on create (``SetDefaults_Job``): ``completions`` and ``parallelism`` 1 when
    both are unset, else ``parallelism`` 1 when it is; validation sees the Job with them."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        return {"completions": 1, "parallelism": 1}
    return {"parallelism": 1} if spec.get("parallelism") is None else {}


def job_problems(name: str | None, spec: Mapping[str, Any], prefix: str = "spec.") -> list[FieldProblem]:
    """What validation refuses in a decoded Job called ``name`` (see the module docstring), in the server's order;
    ``spec`` after :func:`count_defaults`. A CronJob's ``jobTemplate`` is checked as a Job's spec at its ``prefix``
    (``spec.jobTemplate.spec.``), with no ``name`` (``ValidateJobTemplateSpec``: its Jobs are named later)."""
    problems: list[FieldProblem] = []
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            problems.append(
                FieldProblem(f"{prefix}{field}", f"Invalid value: {value}: must be greater than or equal to 0")
            )
    mode = spec.get("completionMode")
    completions = spec.get("completions")
    parallelism = spec.get("parallelism")
    if mode is not None and mode not in _MODES:
        supported = ", ".join(f'"{m}"' for m in _MODES)
        message = f'Unsupported value: "{mode}": supported values: {supported}'
        problems.append(FieldProblem(f"{prefix}completionMode", message, "FieldValueNotSupported"))
    if mode == "Indexed":
        if completions is None:
            message = "Required value: when completion mode is Indexed"
            problems.append(FieldProblem(f"{prefix}completions", message, "FieldValueRequired"))
        if isinstance(parallelism, int) and parallelism > MAX_INDEXED_PARALLELISM:
            why = f"must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed"
            problems.append(FieldProblem(f"{prefix}parallelism", f"Invalid value: {parallelism}: {why}"))
        if name is not None and isinstance(completions, int) and completions > 0:
            hostname = f"{name}-{completions - 1}"
            if dns_label_problem(hostname) is not None:
                why = f"will not able to create pod with invalid DNS label: {hostname}"
                problems.append(FieldProblem("metadata.name", f'Invalid value: "{name}": {why}'))
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, Mapping):
        problems.extend(pod_failure_policy_problems(spec, f"{prefix}podFailurePolicy"))
    replacement = spec.get("podReplacementPolicy")
    allowed = ("Failed",) if isinstance(policy, Mapping) else _REPLACEMENT_POLICIES
    if replacement is not None and replacement not in allowed:
        listed = ", ".join(f'"{a}"' for a in allowed)
        message = f"Unsupported value: {go_value(replacement)}: supported values: {listed}"
        problems.append(FieldProblem(f"{prefix}podReplacementPolicy", message, "FieldValueNotSupported"))
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if isinstance(policy, Mapping) and restart == "OnFailure":
        why = 'only "Never" is supported when podFailurePolicy is specified'
        problems.append(FieldProblem(f"{prefix}template.spec.restartPolicy", f'Invalid value: "OnFailure": {why}'))
    return problems


def _valid_values(allowed: tuple[str, ...]) -> str:
    """Go's ``%q`` of a sorted string slice: ``["In" "NotIn"]``."""
    return "[" + " ".join(f'"{a}"' for a in allowed) + "]"


def _choice(path: str, value: Any, allowed: tuple[str, ...]) -> FieldProblem | None:
    """A required field among ``allowed`` (``Required value: valid values: [...]``, ``Unsupported value``)."""
    if value in (None, ""):
        return FieldProblem(path, f"Required value: valid values: {_valid_values(allowed)}", "FieldValueRequired")
    if value not in allowed:
        listed = ", ".join(f'"{a}"' for a in allowed)
        message = f"Unsupported value: {go_value(value)}: supported values: {listed}"
        return FieldProblem(path, message, "FieldValueNotSupported")
    return None


def _too_many(path: str, count: int, limit: int) -> FieldProblem:
    return FieldProblem(path, f"Too many: {count}: must have at most {limit} items", "FieldValueTooMany")


def pod_failure_policy_problems(spec: Mapping[str, Any], path: str) -> list[FieldProblem]:
    """``validatePodFailurePolicy``: what is wrong with ``spec``'s (decoded) ``podFailurePolicy``, at ``path``."""
    rules = spec["podFailurePolicy"].get("rules") or []
    problems: list[FieldProblem] = []
    if len(rules) > MAX_POD_FAILURE_RULES:
        problems.append(_too_many(f"{path}.rules", len(rules), MAX_POD_FAILURE_RULES))
    template = (spec.get("template") or {}).get("spec") or {}
    names = {
        c.get("name")
        for key in ("containers", "initContainers")
        for c in template.get(key) or ()
        if isinstance(c, Mapping)
    }
    per_index = spec.get("backoffLimitPerIndex") is not None
    for index, rule in enumerate(rules):
        problems.extend(_rule_problems(rule, f"{path}.rules[{index}]", names, per_index))
    return problems


def _rule_problems(rule: Mapping[str, Any], path: str, names: set[Any], per_index: bool) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    action = rule.get("action")
    if action == "FailIndex":
        if not per_index:
            message = 'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set'
            problems.append(FieldProblem(f"{path}.action", message))
    else:
        problem = _choice(f"{path}.action", action, POD_FAILURE_ACTIONS)
        if problem is not None:
            problems.append(problem)
    codes, patterns = rule.get("onExitCodes"), rule.get("onPodConditions") or []
    if codes is not None:
        problems.extend(_exit_code_problems(codes, f"{path}.onExitCodes", names))
    if patterns:
        if len(patterns) > MAX_CONDITION_PATTERNS:
            problems.append(_too_many(f"{path}.onPodConditions", len(patterns), MAX_CONDITION_PATTERNS))
        for index, pattern in enumerate(patterns):
            where = f"{path}.onPodConditions[{index}]"
            kind = pattern.get("type")
            kind = kind if isinstance(kind, str) else ""
            problems.extend(
                FieldProblem(f"{where}.type", f"Invalid value: {go_value(kind)}: {rule_broken}")
                for rule_broken in qualified_name_problems(kind)
            )
            problem = _choice(f"{where}.status", pattern.get("status", "True"), _CONDITION_STATUSES)
            if problem is not None:
                problems.append(problem)
    if codes is not None and patterns:
        message = "Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"
        problems.append(FieldProblem(path, message))
    if codes is None and not patterns:
        problems.append(
            FieldProblem(path, "Invalid value: specifying one of OnExitCodes and OnPodConditions is required")
        )
    return problems


def _exit_code_problems(codes: Mapping[str, Any], path: str, names: set[Any]) -> list[FieldProblem]:
    problems: list[FieldProblem] = []
    operator = codes.get("operator")
    problem = _choice(f"{path}.operator", operator, _OPERATORS)
    if problem is not None:
        problems.append(problem)
    container = codes.get("containerName")
    if container is not None and container not in names:
        why = "must be one of the container or initContainer names in the pod template"
        problems.append(FieldProblem(f"{path}.containerName", f"Invalid value: {go_value(container)}: {why}"))
    values: list[int] = list(codes.get("values") or ())
    if not values:
        problems.append(FieldProblem(f"{path}.values", "Invalid value: []: at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        problems.append(_too_many(f"{path}.values", len(values), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    for index, value in enumerate(values):
        if operator == "In" and value == 0:
            problems.append(
                FieldProblem(f"{path}.values[{index}]", "Invalid value: 0: must not be 0 for the In operator")
            )
        if value in seen:
            problems.append(FieldProblem(f"{path}.values[{index}]", f"Duplicate value: {value}", "FieldValueDuplicate"))
        seen.add(value)
    if any(a > b for a, b in itertools.pairwise(values)):
        problems.append(FieldProblem(f"{path}.values", f"Invalid value: {go_value(values)}: must be ordered"))
    return problems


JOB_RESTART_POLICIES: Final = ("OnFailure", "Never")
"""A Job's pods' restart policies: its template's is not defaulted (no ``Always``)."""


def template_restart_problem(
    template_spec: Mapping[str, Any], prefix: str = "spec.template.spec."
) -> FieldProblem | None:
    """A Job template's ``restartPolicy`` in the real server's words (``ValidateJobSpec``): ``OnFailure`` or
    ``Never``. A missing one is defaulted to ``Always`` first, as for any pod template, so both are told the valid
    values as a required value (``Required value: valid values: "OnFailure", "Never"``); any other is unsupported
    (the pod template's own validation refuses it too, naming a pod's three policies)."""
    policy = template_spec.get("restartPolicy")
    allowed = ", ".join(f'"{p}"' for p in JOB_RESTART_POLICIES)
    if policy in (None, "", "Always"):
        return FieldProblem(f"{prefix}restartPolicy", f"Required value: valid values: {allowed}", "FieldValueRequired")
    if policy not in JOB_RESTART_POLICIES:
        message = f'Unsupported value: "{policy}": supported values: {allowed}'
        return FieldProblem(f"{prefix}restartPolicy", message, "FieldValueNotSupported")
    return None
