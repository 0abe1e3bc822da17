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
from typing import Any, Final, cast

from kubeflux.apiobjects.podfailure import PodFailurePolicy
from kubeflux.sim.workloads.model import JobKind, WorkloadJob

_NUMBER = "number"
_OPTIONAL_NUMBER = "number or None"
_OPTIONAL_DICT = "mapping or None"
_OPTIONAL_POLICY = "PodFailurePolicy or None"

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
    ("pod_failure_policy", _OPTIONAL_POLICY),
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
    ("preemption_policy", str),
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

_WORDS = {str: "a string", int: "an integer", bool: "True or False", list: "a list", dict: "a mapping"}


def _accepted(kind: object) -> tuple[object, ...]:
    """The exact types of a field of ``kind`` that need no further look (the others go to :func:`_problem`)."""
    if kind is _NUMBER:
        return (float, int)
    if kind is _OPTIONAL_NUMBER:
        return (float, int, type(None))
    if kind is _OPTIONAL_DICT:
        return (dict, type(None))
    if kind is _OPTIONAL_POLICY:
        return (PodFailurePolicy, type(None))
    return (kind,)  # a class (a JobKind's members are of the class itself)


class _Fields:
    """One table of fields, ready to check: all read in one call (a tuple of values; a getattr per field cost most
    of the check) and each accepted at once when its value is of an exact type it takes."""

    __slots__ = ("accepted", "fields", "read")

    def __init__(self, fields: tuple[tuple[str, object], ...]) -> None:
        self.fields = fields
        self.read: Callable[[object], Any] = attrgetter(*(name for name, _ in fields))
        self.accepted = tuple(_accepted(kind) for _, kind in fields)

    def values(self, obj: object) -> tuple[object, ...]:
        """The fields' values; a missing field reads as None (and is named as such)."""
        try:
            values: tuple[object, ...] = self.read(obj)
        except AttributeError:
            values = tuple(getattr(obj, field, None) for field, _ in self.fields)
        return values

    def problem(self, values: tuple[object, ...]) -> tuple[str, str] | None:
        """(field, problem) of the first value not of its field's type, else None."""
        accepted = self.accepted
        for i in range(len(values)):
            value = values[i]
            if type(value) not in accepted[i]:
                field, kind = self.fields[i]
                problem = _problem(value, kind)
                if problem is not None:
                    return field, problem
        return None


_JOB: Final = _Fields(_JOB_FIELDS)
_TEMPLATE: Final = _Fields(_TEMPLATE_FIELDS)
_MAPPING_AT: Final = tuple(i for i, (name, _) in enumerate(_TEMPLATE_FIELDS) if name in _MAPPINGS)
"""Where the string maps are among a template's values (in the order of :data:`_MAPPINGS`)."""


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
    if kind is _OPTIONAL_POLICY:
        return None if value is None or type(value) is PodFailurePolicy else f"must be a {kind}, got {value!r}"
    if kind is JobKind and isinstance(value, JobKind):
        return None
    words = _WORDS.get(kind) if isinstance(kind, type) else None
    return f"must be {words or getattr(kind, '__name__', kind)}, got {value!r}"


def job_problem(wjob: object) -> tuple[str, str] | None:
    """(field path, problem) of the first field of a workload job, or of one of its pod templates, that is not of
    its type (``pods[0].requests[cpu]``), else None."""
    found = _JOB.problem(_JOB.values(wjob))
    if found is not None:
        return found
    pods: list[object] = getattr(wjob, "pods")  # noqa: B009  (an untyped read: the check above vouched for a list)
    for i, template in enumerate(pods):
        values = _TEMPLATE.values(template)
        found = _TEMPLATE.problem(values)
        if found is not None:
            return f"pods[{i}].{found[0]}", found[1]
        for at in _MAPPING_AT:
            mapping = cast(dict[object, object], values[at])  # a dict: checked above
            for key, value in mapping.items():
                if type(key) is not str or type(value) is not str:
                    field = _TEMPLATE_FIELDS[at][0]
                    return f"pods[{i}].{field}[{key}]", f"must map strings to strings, got {key!r}: {value!r}"
    return None  # the amounts of ``requests``: :func:`kubeflux.sim.jobs.timing_of` rejects the job, naming them


def check_job(wjob: WorkloadJob) -> None:
    """Raise ValueError naming the job and the field when a field the simulator reads is not of its type."""
    found = job_problem(wjob)
    if found is not None:
        raise ValueError(f"workload job {getattr(wjob, 'id', '?')!r}: {found[0]}: {found[1]}")


__all__ = ["check_job", "job_problem"]
