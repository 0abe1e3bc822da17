"""The check a workload job passes before the cluster reads it: every field the simulator reads has its type.

The workload readers (SWF, Batsim JSON, manifests, the synthetic generator) only produce well-typed jobs, but a
:class:`~kubeflux.sim.workloads.model.WorkloadJob` is plain data that anyone can build through the Python API. The
pure sources would carry a float ``min_member`` or a ``None`` scheduler name along, and crash or not further on;
compiled (mypyc), every typed read of such a field fails as a bare ``TypeError: int object expected; got float``.
So :func:`check_job` reads each field untyped (``getattr``) and raises a ValueError naming the job and the field,
the same compiled and pure (:meth:`Cluster.submit <kubeflux.sim.cluster.Cluster.submit>` calls it first). It
costs about a microsecond per job compiled.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

from kubeflux.sim.workloads.model import JobKind, WorkloadJob

_NUMBER = "number"
_OPTIONAL_NUMBER = "number or None"
_OPTIONAL_DICT = "mapping or None"

_JOB_FIELDS: tuple[tuple[str, object], ...] = (
    ("id", str),
    ("submit_time", _NUMBER),
    ("kind", JobKind),
    ("name", str),
    ("namespace", str),
    ("pods", list),
    ("min_member", int),
    ("schedule_timeout_seconds", _OPTIONAL_NUMBER),
    ("completions", int),
    ("parallelism", int),
    ("indexed", bool),
    ("backoff_limit", int),
    ("requested_processors", int),
    ("requested_time", _NUMBER),
    ("run_time", _OPTIONAL_NUMBER),
    ("rejected", str),
    ("source", str),
    ("exit_code", int),
    ("active_deadline_seconds", _OPTIONAL_NUMBER),
    ("profile", str),
)
"""(field, its type): a class (exactly that class: no ``bool`` for an ``int``) or one of the number kinds above."""

_TEMPLATE_FIELDS: tuple[tuple[str, object], ...] = (
    ("name", str),
    ("requests", dict),
    ("run_time", _OPTIONAL_NUMBER),
    ("exit_code", int),
    ("scheduler_name", str),
    ("priority", int),
    ("labels", dict),
    ("annotations", dict),
    ("node_selector", dict),
    ("tolerations", tuple),
    ("required_node_affinity", tuple),
    ("active_deadline_seconds", _OPTIONAL_NUMBER),
    ("manifest", _OPTIONAL_DICT),
    ("run_time_jitter", _OPTIONAL_NUMBER),
)

_MAPPINGS = ("labels", "annotations", "node_selector")
"""A template's fields that map strings to strings (each key and value is checked)."""

_READ_JOB: Final = attrgetter(*(name for name, _ in _JOB_FIELDS))
_READ_TEMPLATE: Final = attrgetter(*(name for name, _ in _TEMPLATE_FIELDS))
"""Every field checked, read in one call (a tuple of values): a getattr per field cost most of the check."""
_READ_MAPPINGS: Final = attrgetter(*_MAPPINGS)

_WORDS = {str: "a string", int: "an integer", bool: "True or False", list: "a list", dict: "a mapping"}


def _problem(value: object, kind: object) -> str | None:
    """Why ``value`` is not of ``kind`` (see :data:`_JOB_FIELDS`), or None."""
    if type(value) is kind:
        return None
    if kind is _NUMBER or kind is _OPTIONAL_NUMBER:
        if type(value) is float or type(value) is int or (value is None and kind is _OPTIONAL_NUMBER):
            return None
        return f"must be a {kind} (seconds), got {value!r}"
    if kind is _OPTIONAL_DICT:
        return None if value is None or type(value) is dict else f"must be a mapping or None, got {value!r}"
    if kind is JobKind and isinstance(value, JobKind):
        return None
    words = _WORDS.get(kind) if isinstance(kind, type) else None
    return f"must be {words or getattr(kind, '__name__', kind)}, got {value!r}"


def _fields_problem(
    obj: object, fields: tuple[tuple[str, object], ...], read: Callable[[object], Any]
) -> tuple[str, str] | None:
    try:
        values: tuple[object, ...] = read(obj)
    except AttributeError:  # a field missing: read one at a time, a missing one is None (and named as such)
        values = tuple(getattr(obj, field, None) for field, _ in fields)
    for i, (field, kind) in enumerate(fields):
        value = values[i]
        if type(value) is not kind:
            problem = _problem(value, kind)
            if problem is not None:
                return field, problem
    return None


def job_problem(wjob: object) -> tuple[str, str] | None:
    """(field path, problem) of the first field of a workload job, or of one of its pod templates, that is not of
    its type (``pods[0].requests[cpu]``), else None."""
    found = _fields_problem(wjob, _JOB_FIELDS, _READ_JOB)
    if found is not None:
        return found
    pods: list[object] = getattr(wjob, "pods")  # noqa: B009  (an untyped read: the check above vouched for a list)
    for i, template in enumerate(pods):
        found = _fields_problem(template, _TEMPLATE_FIELDS, _READ_TEMPLATE)
        if found is not None:
            return f"pods[{i}].{found[0]}", found[1]
        mappings: tuple[dict[object, object], ...] = _READ_MAPPINGS(template)  # dicts: checked above
        for field, mapping in zip(_MAPPINGS, mappings, strict=True):
            for key, value in mapping.items():
                if type(key) is not str or type(value) is not str:
                    return f"pods[{i}].{field}[{key}]", f"must map strings to strings, got {key!r}: {value!r}"
    return None  # the amounts of ``requests``: :func:`kubeflux.sim.jobs.timing_of` rejects the job, naming them


def check_job(wjob: WorkloadJob) -> None:
    """Raise ValueError naming the job and the field when a field the simulator reads is not of its type."""
    found = job_problem(wjob)
    if found is not None:
        raise ValueError(f"workload job {getattr(wjob, 'id', '?')!r}: {found[0]}: {found[1]}")


__all__ = ["check_job", "job_problem"]
