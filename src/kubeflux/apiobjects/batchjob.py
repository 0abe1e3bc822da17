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
  and a name that still makes a DNS label with its last index (``<name>-<completions - 1>``, 63 characters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubeflux.apiobjects.rules import MAX_INT32, dns_label_problem, int_decode_error

__all__ = [
    "INT32_FIELDS",
    "INT64_FIELDS",
    "MAX_INDEXED_PARALLELISM",
    "MAX_INT32",
    "FieldProblem",
    "count_defaults",
    "job_decode_error",
    "job_problems",
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
    return problems


JOB_RESTART_POLICIES = ("OnFailure", "Never")
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
