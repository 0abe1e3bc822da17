"""What the API server refuses in a ``batch/v1`` Job's spec, in its words: one validation for ``simulate``'s reader
and ``cluster serve``'s Job strategy, so the same Job gets the same verdict from both.

Two stages, as the real kube-apiserver v1.36 has them:

* **decoding** (a 400 ``BadRequest``, the whole object refused): ``parallelism``, ``completions``,
  ``backoffLimit``, ``ttlSecondsAfterFinished``, ``backoffLimitPerIndex`` and ``maxFailedIndexes`` are Go ``int32``
  and ``activeDeadlineSeconds`` ``int64``: a string, a fraction or a number beyond the type is
  ``json: cannot unmarshal number 2147483648 into Go struct field JobSpec.spec.completions of type int32``;
* **validation** (a 422 ``Invalid`` with one cause per field; ``validateJobSpec`` and ``ValidateJob`` in
  ``k8s.io/kubernetes/pkg/apis/batch/validation``): every count at least 0 (``completions: 0`` and
  ``parallelism: 0`` are valid: the first Job completes at once, the second creates no pod until it is raised);
  ``completionMode`` NonIndexed or Indexed; an Indexed Job needs ``completions``, at most 100,000 ``parallelism``
  and a name that still makes a DNS label with its last index (``<name>-<completions - 1>``, 63 characters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "INT32_FIELDS",
    "INT64_FIELDS",
    "MAX_INDEXED_PARALLELISM",
    "MAX_INT32",
    "FieldProblem",
    "count_defaults",
    "job_decode_error",
    "job_problems",
]

MAX_INT32: Final = 2**31 - 1
MAX_INT64: Final = 2**63 - 1
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
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_MODES: Final = ("NonIndexed", "Indexed")


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One cause of a 422: the field path and the message the API server writes (``Invalid value: -1: must be
    greater than or equal to 0``), and its ``reason`` (``FieldValueInvalid``, ``FieldValueRequired``, …)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


def _json_number(value: float) -> str:
    """A JSON number as Go's decoder echoes it (``1.5``, ``3000000000``), at most 40 characters."""
    text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {_json_number(value)}"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string"


def job_decode_error(spec: Any) -> FieldProblem | None:
    """Why a Job whose ``spec`` is this cannot be decoded (the message is the 400's text after ``cannot be handled
    as a Job:``), or None. ``null`` fields are fine (Go leaves the pointer nil)."""
    if not isinstance(spec, Mapping):
        return None
    for name in INT32_FIELDS + INT64_FIELDS:
        value = spec.get(name)
        if value is None:
            continue
        limit, go_type = (MAX_INT64, "int64") if name in INT64_FIELDS else (MAX_INT32, "int32")
        if not isinstance(value, bool) and isinstance(value, int) and -limit - 1 <= value <= limit:
            continue
        text = f"json: cannot unmarshal {_json_kind(value)} into Go struct field JobSpec.spec.{name} of type {go_type}"
        return FieldProblem(f"spec.{name}", text, "BadRequest")
    return None


def count_defaults(spec: Mapping[str, Any]) -> dict[str, int]:
    """The counts the server defaults on create (``SetDefaults_Job``): ``completions`` and ``parallelism`` 1 when
    both are unset, else ``parallelism`` 1 when it is; validation sees the Job with them."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        return {"completions": 1, "parallelism": 1}
    return {"parallelism": 1} if spec.get("parallelism") is None else {}


def job_problems(name: str, spec: Mapping[str, Any]) -> list[FieldProblem]:
    """What validation refuses in a decoded Job called ``name`` (see the module docstring), in the server's order;
    ``spec`` after :func:`count_defaults`."""
    problems: list[FieldProblem] = []
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            problems.append(
                FieldProblem(f"spec.{field}", f"Invalid value: {value}: must be greater than or equal to 0")
            )
    mode = spec.get("completionMode")
    completions = spec.get("completions")
    parallelism = spec.get("parallelism")
    if mode is not None and mode not in _MODES:
        supported = ", ".join(f'"{m}"' for m in _MODES)
        message = f'Unsupported value: "{mode}": supported values: {supported}'
        problems.append(FieldProblem("spec.completionMode", message, "FieldValueNotSupported"))
    if mode == "Indexed":
        if completions is None:
            message = "Required value: when completion mode is Indexed"
            problems.append(FieldProblem("spec.completions", message, "FieldValueRequired"))
        if isinstance(parallelism, int) and parallelism > MAX_INDEXED_PARALLELISM:
            why = f"must be less than or equal to {MAX_INDEXED_PARALLELISM} when completion mode is Indexed"
            problems.append(FieldProblem("spec.parallelism", f"Invalid value: {parallelism}: {why}"))
        if isinstance(completions, int) and completions > 0:
            hostname = f"{name}-{completions - 1}"
            if len(hostname) > 63 or not _DNS_LABEL.match(hostname):
                why = f"will not able to create pod with invalid DNS label: {hostname}"
                problems.append(FieldProblem("metadata.name", f'Invalid value: "{name}": {why}'))
    return problems
