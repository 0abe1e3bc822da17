"""The checks every input object passes, whether it came from a manifest or was built through the Python API.

A :class:`Pod`, :class:`Node` or :class:`PodGroup` is plain data that anyone can build; one with a NaN, infinite,
negative or fractional quantity, a NaN deadline or a ``min_member`` of 0 must never reach the engine (a NaN
compares false with everything, so it would pass every fit test and corrupt the books). The same rules serve
both doors:

* :mod:`kubeflux.apiobjects.manifests` applies the ``*_problem`` functions to the values it reads from a
  manifest and reports them at the manifest's field path (``spec.containers[0].resources.requests.cpu``);
* the scheduler core applies :func:`check_pod`, :func:`check_node` and :func:`check_group` to every object handed
  to ``observe``, which report them at the object's attribute (``requests[cpu]``, ``active_deadline_seconds``).

A ``*_problem`` function returns None for a good value, else what is wrong in words (``must be non-negative,
got -1``); a ``check_*`` function raises :class:`InvalidObject` naming the object and the field.

How a pod runs once bound, as KWOK's stage annotations and the simulator's exit code say it (:func:`pod_run`:
``pod-complete.stage.kwok.x-k8s.io/delay`` and ``jitter-delay``, Go durations, ``sim.kubeflux.io/exit-code``), is
read by one function for every path: ``simulate``'s reader rejects a pod whose annotations it cannot read, and so
does kubeflux's scheduler before binding it (in ``cluster serve``, whose simulated kubelets read them with the same
function): a pod no kubelet could run is never bound, so it never holds resources.

The allocation annotation kubeflux writes on the pods it binds is read back and checked in
:mod:`kubeflux.scheduler.allocation`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kubeflux.scheduler.objects import (
    CPU,
    GPU,
    POD_GROUP_LABEL,
    AffinityTerm,
    HostPort,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PodPhase,
    PodTerms,
    SpreadConstraint,
    Taint,
    Toleration,
)
from kubeflux.scheduler.units import DurationError, clip, echo, format_quantity, parse_duration

__all__ = [
    "EXIT_CODE_ANNOTATION",
    "JITTER_ANNOTATION",
    "MAX_MIN_MEMBER",
    "MAX_SECONDS",
    "NODE_VERTICES_LIMIT",
    "RUN_TIME_ANNOTATION",
    "InvalidObject",
    "InvalidRunTime",
    "PodRequestError",
    "PodRun",
    "check_group",
    "check_node",
    "check_pod",
    "min_member_problem",
    "node_size_problem",
    "pod_fields_problem",
    "pod_run",
    "quantity_problem",
    "seconds_problem",
]


_POD_MAPPINGS = ("labels", "annotations", "node_selector")

NODE_VERTICES_LIMIT: Final = 65_536
"""The most whole cores, and the most gpus, a node may have: each is a vertex of the engine's graph, so a node
claiming ``cpu: 1e30`` would otherwise make the scheduler build vertices for ever. A pod asking more can never run
(and its jobspec could not even say how many it asks)."""
_CPU_LIMIT = (NODE_VERTICES_LIMIT + 1) * 1000
_FLOAT_MAX = sys.float_info.max
"""The largest finite float: an ``int`` of seconds beyond it is no time a float can hold (``math.isfinite`` raises
OverflowError on it, and the scheduler's arithmetic on times would too)."""


class PodRequestError(ValueError):
    """A pod whose scheduling inputs kubeflux cannot use; the message names the pod and the field."""


class InvalidObject(ValueError):
    """An object kubeflux must not use; names the object (``Pod default/web-0``) and the field."""

    def __init__(self, obj: str, path: str, problem: str) -> None:
        self.obj = obj
        self.path = path
        self.problem = problem
        super().__init__(f"{obj}: {path}: {problem}" if path else f"{obj}: {problem}")


def quantity_problem(amount: object, shown: object = None) -> str | None:
    """A resource amount in canonical units (:mod:`kubeflux.scheduler.objects`) must be a whole, non-negative
    number. ``shown`` is the value as the user wrote it (a manifest's ``"-500m"``), for the message."""
    if isinstance(amount, bool) or not isinstance(amount, int):
        return f"must be a whole number of canonical units (millicores, bytes, units), got {amount!r}"
    if amount < 0:
        return f"must be non-negative, got {amount if shown is None else shown!r}"
    return None


def seconds_problem(value: object, *, positive: bool = True) -> str | None:
    """A time or a duration in seconds must be a finite number; a duration (``positive``) more than 0, a time
    not before 0 (the epoch, or the start of a simulation)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of seconds, got {value!r}"
    if not -_FLOAT_MAX <= value <= _FLOAT_MAX:  # NaN and infinities, and an int past any float
        return f"must be a finite number of seconds, got {value!r}"
    if positive and value <= 0:
        return f"must be positive, got {value!r}"
    if not positive and value < 0:
        return f"must not be negative, got {value!r}"
    return None


MAX_MIN_MEMBER: Final = 2**31 - 1
"""A PodGroup's ``minMember`` (and a ``scheduling.k8s.io`` one's ``minCount``) is an ``int32`` in every API that
has one: the API server refuses more."""


def min_member_problem(value: object) -> str | None:
    """A PodGroup's ``minMember`` is a positive integer of at most :data:`MAX_MIN_MEMBER`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"must be a positive integer, got {echo(value)}"
    if value > MAX_MIN_MEMBER:
        return f"must be at most {MAX_MIN_MEMBER} (an int32), got {echo(value)}"
    return None


def _resources_problem(field: str, resources: object) -> tuple[str, str] | None:
    """(field path, problem) of the first bad entry of a resource list, or None."""
    if not isinstance(resources, dict):
        return field, f"expected a mapping of resource names to amounts, got {resources!r}"
    for name, amount in resources.items():
        if not isinstance(name, str) or not name:
            return field, f"resource names must be non-empty strings, got {name!r}"
        if type(amount) is not int or amount < 0:  # the common case costs one test; the message comes after
            problem = quantity_problem(amount)
            if problem is not None:
                return f"{field}[{name}]", problem
    return None


def _mappings_problem(obj: Pod | Node, fields: tuple[str, ...]) -> tuple[str, str] | None:
    """Labels, annotations and node selectors map strings to strings (as in Kubernetes): the scheduler compares
    their values with strings, and its compiled build (mypyc) checks each value read against ``str``."""
    for field in fields:
        value = getattr(obj, field)
        if not isinstance(value, dict):
            return field, f"expected a mapping, got {value!r}"
        for key, item in value.items():
            if type(key) is not str or type(item) is not str:
                return f"{field}[{key}]", f"must map strings to strings, got {key!r}: {item!r}"
    return None


_POD_FIELDS: tuple[tuple[str, type, str], ...] = (
    ("uid", str, "a string"),
    ("node_name", str, "a string (empty while unbound)"),
    ("scheduler_name", str, "a string"),
    ("deleted", bool, "True or False"),
    ("phase", PodPhase, "a PodPhase"),
)
"""What :meth:`KubefluxScheduler.observe` reads of every pod before the other checks (``uid``, ``node_name``,
``deleted`` …): (attribute, its exact type, that type in words)."""


def pod_fields_problem(pod: Pod) -> tuple[str, str] | None:
    """(field, problem) when a pod's uid, node name, scheduler name, deleted flag or phase is not of its type."""
    for field, kind, words in _POD_FIELDS:
        value = getattr(pod, field)
        if type(value) is not kind:
            return field, f"must be {words}, got {value!r}"
    return None


def _constraints_problem(pod: Pod) -> tuple[str, str] | None:
    """(field, problem) when a pod's tolerations or required node affinity are not tuples of their dataclasses
    holding strings (a list is no key of the placement caches, a number compares with no label)."""
    tolerations = pod.tolerations
    if type(tolerations) is not tuple or not all(_toleration_ok(toleration) for toleration in tolerations):
        return "tolerations", f"must be a tuple of Tolerations of strings, got {tolerations!r}"
    terms = pod.required_node_affinity
    if type(terms) is not tuple or not all(type(term) is NodeSelectorTerm and _term_ok(term) for term in terms):
        why = "must be a tuple of NodeSelectorTerms of tuples of NodeSelectorRequirements (values a tuple of strings)"
        return "required_node_affinity", f"{why}, got {terms!r}"
    return None


def _terms_problem(pod: Pod) -> tuple[str, str] | None:
    """(field, problem) when a pod's :attr:`~Pod.terms` (built through the Python API) is not a :class:`PodTerms` of
    tuples of its dataclasses (host ports, affinity terms with a topology key, spread constraints of a positive skew
    and minimum of domains)."""
    terms = pod.terms
    if terms is None:
        return None
    why = "must be None or a PodTerms of tuples of HostPorts, AffinityTerms and SpreadConstraints"
    if type(terms) is not PodTerms or not all(
        type(part) is tuple for part in (terms.host_ports, terms.affinity, terms.anti_affinity, terms.spread)
    ):
        return "terms", f"{why}, got {terms!r}"
    if not all(
        type(port) is HostPort and type(port.port) is int and 0 < port.port < 65536 for port in terms.host_ports
    ):
        return "terms.host_ports", f"must be HostPorts of a port from 1 to 65535, got {terms.host_ports!r}"
    for term in (*terms.affinity, *terms.anti_affinity):
        if type(term) is not AffinityTerm or type(term.topology_key) is not str or not term.topology_key:
            return "terms.affinity", f"must be AffinityTerms with a topology key, got {term!r}"
    for constraint in terms.spread:
        if (
            type(constraint) is not SpreadConstraint
            or type(constraint.max_skew) is not int
            or constraint.max_skew < 1
            or type(constraint.min_domains) is not int
            or constraint.min_domains < 1
            or type(constraint.topology_key) is not str
            or not constraint.topology_key
        ):
            return "terms.spread", f"must be SpreadConstraints of a positive skew and topology key, got {constraint!r}"
    return None


def _toleration_ok(toleration: object) -> bool:
    """(Every pod event of a pod with tolerations asks it: plain tests, no generator, ~2x faster pure.)"""
    return (
        type(toleration) is Toleration
        and type(toleration.key) is str
        and type(toleration.operator) is str
        and type(toleration.value) is str
        and type(toleration.effect) is str
    )


def _term_ok(term: NodeSelectorTerm) -> bool:
    for requirements in (term.match_expressions, term.match_fields):
        if type(requirements) is not tuple:
            return False
        for requirement in requirements:
            if (
                type(requirement) is not NodeSelectorRequirement
                or type(requirement.key) is not str
                or type(requirement.operator) is not str
                or type(requirement.values) is not tuple
                or not all(type(value) is str for value in requirement.values)
            ):
                return False
    return True


def _node_fields_problem(node: Node) -> tuple[str, str] | None:
    if type(node.taints) is not tuple or any(
        type(taint) is not Taint or not all(type(part) is str for part in (taint.key, taint.value, taint.effect))
        for taint in node.taints
    ):
        return "taints", f"must be a tuple of Taints of strings, got {node.taints!r}"
    for field in ("unschedulable", "ready"):
        value = getattr(node, field)
        if type(value) is not bool:
            return field, f"must be True or False, got {value!r}"
    return None


_NUMBER = (int, float)


def _pod_looks_right(pod: Pod) -> bool:
    """The common case in one pass of exact type tests (every pod event of a busy cluster pays it); False sends
    the pod to the slower checks that say what is wrong."""
    requests = pod.requests
    if (
        type(requests) is not dict
        or type(pod.labels) is not dict
        or type(pod.annotations) is not dict
        or type(pod.node_selector) is not dict
        or type(pod.priority) is not int
        or type(pod.uid) is not str
        or type(pod.node_name) is not str
        or type(pod.scheduler_name) is not str
        or type(pod.deleted) is not bool
        or type(pod.phase) is not PodPhase
        or type(pod.tolerations) is not tuple
        or type(pod.required_node_affinity) is not tuple
        or type(pod.creation_time) not in _NUMBER
        or not 0.0 <= pod.creation_time <= _FLOAT_MAX
    ):
        return False
    deadline = pod.active_deadline_seconds
    if deadline is not None and (type(deadline) not in _NUMBER or not 0.0 < deadline <= _FLOAT_MAX):
        return False
    for name, amount in requests.items():
        if type(amount) is not int or amount < 0 or type(name) is not str or not name:
            return False
    for mapping in (pod.labels, pod.annotations, pod.node_selector):
        for key, value in mapping.items():
            if type(key) is not str or type(value) is not str:
                return False
    if pod.scheduling_group and POD_GROUP_LABEL in pod.labels:
        return False
    if (pod.tolerations or pod.required_node_affinity) and _constraints_problem(pod) is not None:
        return False
    if pod.terms is not None and _terms_problem(pod) is not None:
        return False
    return requests.get(CPU, 0) < _CPU_LIMIT and requests.get(GPU, 0) <= NODE_VERTICES_LIMIT


def _pod_problem(pod: Pod) -> tuple[str, str] | None:
    if _pod_looks_right(pod):
        return None
    found = (
        pod_fields_problem(pod)
        or _resources_problem("requests", pod.requests)
        or _mappings_problem(pod, _POD_MAPPINGS)
        or _constraints_problem(pod)
        or _terms_problem(pod)
    )
    if found is not None:
        return found
    size = node_size_problem(pod.requests)
    if size is not None:
        return f"requests[{size[0]}]", f"{size[1]}: no node can ever hold it"
    if isinstance(pod.priority, bool) or not isinstance(pod.priority, int):
        return "priority", f"must be an integer, got {pod.priority!r}"
    problem = seconds_problem(pod.creation_time, positive=False)
    if problem is not None:
        return "creation_time", problem
    if pod.active_deadline_seconds is not None:
        problem = seconds_problem(pod.active_deadline_seconds)
        if problem is not None:
            return "active_deadline_seconds", problem
    if pod.scheduling_group and POD_GROUP_LABEL in pod.labels:
        why = (
            f"names pod group {pod.scheduling_group!r} (Kubernetes' own) while its label {POD_GROUP_LABEL} names "
            f"{pod.labels[POD_GROUP_LABEL]!r} (coscheduling's): a pod belongs to one group"
        )
        return "spec.schedulingGroup.podGroupName", why
    return None


def check_pod(pod: Pod) -> None:
    """Raise :class:`InvalidObject` when the pod's requests, priority, creation time or deadline are unusable."""
    found = _pod_problem(pod)
    if found is not None:
        raise InvalidObject(f"Pod {pod.key}", *found)


def node_size_problem(allocatable: dict[str, int]) -> tuple[str, str] | None:
    """(resource, problem) when a node has (or a pod asks) more whole cores or gpus than a graph node takes
    (:data:`NODE_VERTICES_LIMIT`), else None."""
    for name, unit in ((CPU, 1000), (GPU, 1)):
        if allocatable.get(name, 0) // unit > NODE_VERTICES_LIMIT:
            amount = format_quantity(name, allocatable[name])  # as written: 100000000000, not its millicores
            return name, f"more than {NODE_VERTICES_LIMIT} whole units, got {clip(amount)}"
    return None


def check_node(node: Node) -> None:
    """Raise :class:`InvalidObject` when the node's allocatable, labels, taints or flags are unusable."""
    name = node.name
    found = (
        (None if type(name) is str and name else ("name", f"must be a non-empty string, got {name!r}"))
        or _resources_problem("allocatable", node.allocatable)
        or _mappings_problem(node, ("labels",))
        or _node_fields_problem(node)
    )
    if found is None:
        size = node_size_problem(node.allocatable)
        found = None if size is None else (f"allocatable[{size[0]}]", size[1])
    if found is not None:
        raise InvalidObject(f"Node {node.name}", *found)


def check_group(group: PodGroup) -> None:
    """Raise :class:`InvalidObject` when the group's ``min_member``, timeout or creation time are unusable."""
    found: tuple[str, str | None] = ("min_member", min_member_problem(group.min_member))
    if found[1] is None and group.schedule_timeout_seconds is not None:
        found = ("schedule_timeout_seconds", seconds_problem(group.schedule_timeout_seconds))
    if found[1] is None:
        found = ("creation_time", seconds_problem(group.creation_time, positive=False))
    field, problem = found
    if problem is not None:
        raise InvalidObject(f"PodGroup {group.key}", field, problem)


# --- how a pod runs -------------------------------------------------------------------------------------------

RUN_TIME_ANNOTATION: Final = "pod-complete.stage.kwok.x-k8s.io/delay"
"""A pod's run time: a Go duration from Running to its end (KWOK's ``pod-complete`` stage)."""
JITTER_ANNOTATION: Final = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
"""The upper bound of a random run time (KWOK: delay + random(jitter − delay)); not below the delay."""
EXIT_CODE_ANNOTATION: Final = "sim.kubeflux.io/exit-code"
"""The exit code a simulated pod ends with (0–255; non-zero ends it ``Failed``)."""
MAX_SECONDS: Final = 100 * 365 * 86_400
"""3,153,600,000 s (100 years): the longest time or duration a pod's annotations (or any simulator input) may
state; beyond it a float no longer tells a second from the next at the scale of a run."""


class InvalidRunTime(InvalidObject):
    """A pod the API accepts but no simulated kubelet can run: its run-time annotations are unreadable
    (:func:`pod_run`). It is rejected, never bound."""


@dataclass(frozen=True, slots=True)
class PodRun:
    """How a pod runs, as its annotations say: run time and its jitter bound (seconds, None when not said) and
    exit code."""

    run_time: float | None = None
    jitter: float | None = None
    exit_code: int = 0


_NO_RUN: Final = PodRun()
_RUN_ANNOTATIONS: Final = (RUN_TIME_ANNOTATION, JITTER_ANNOTATION, EXIT_CODE_ANNOTATION)
_DURATIONS: dict[str, float | str] = {}
"""Seconds of each duration text read, or why it is no duration (one parse per text, not per pod event)."""
_DURATIONS_KEPT = 4096


def _duration(text: str) -> float | str:
    """Seconds in a run-time annotation's text, or what is wrong with it."""
    found = _DURATIONS.get(text)
    if found is not None:
        return found
    value: float | str
    try:
        seconds = parse_duration(text)
    except DurationError as exc:
        value = f"{exc} (a Go duration such as 60s or 1m30s)"
    else:
        value = seconds
        if seconds < 0:
            value = f"must not be negative, got {echo(text)}"
        elif seconds > MAX_SECONDS:
            value = f"must be at most {MAX_SECONDS:,} s (100 years), got {echo(text)}"
    if len(_DURATIONS) >= _DURATIONS_KEPT:
        _DURATIONS.clear()
    _DURATIONS[text] = value
    return value


def pod_run(obj: str, annotations: Mapping[str, str], path: str = "metadata", default: float | None = None) -> PodRun:
    """How the pod ``obj`` (``Pod default/web-0``) runs, from its annotations (:data:`RUN_TIME_ANNOTATION`,
    :data:`JITTER_ANNOTATION`, :data:`EXIT_CODE_ANNOTATION`) under ``path`` (``spec.template.metadata`` in a Job);
    ``default``: the run time when the annotation does not say one.

    Raises :class:`InvalidRunTime` naming the annotation: not a Go duration, negative or beyond
    :data:`MAX_SECONDS`; a jitter below the run time; an exit code that is not an integer from 0 to 255."""
    if not any(key in annotations for key in _RUN_ANNOTATIONS):
        return _NO_RUN if default is None else PodRun(default)
    seconds: list[float | None] = []
    for key in (RUN_TIME_ANNOTATION, JITTER_ANNOTATION):
        text = annotations.get(key)
        value = None if text is None else _duration(text)
        if isinstance(value, str):
            raise InvalidRunTime(obj, f"{path}.annotations.{key}", value)
        seconds.append(value)
    run_time, jitter = seconds
    if run_time is None:
        run_time = default
    if jitter is not None and run_time is not None and jitter < run_time:
        why = f"must not be below the delay ({run_time:g}s)"
        raise InvalidRunTime(obj, f"{path}.annotations.{JITTER_ANNOTATION}", why)
    exit_text = annotations.get(EXIT_CODE_ANNOTATION, "0")
    exit_code = int(exit_text) if exit_text.isascii() and exit_text.isdigit() and len(exit_text) <= 3 else -1
    if not 0 <= exit_code <= 255:
        why = f"must be an integer from 0 to 255, got {echo(exit_text)}"
        raise InvalidRunTime(obj, f"{path}.annotations.{EXIT_CODE_ANNOTATION}", why)
    return PodRun(run_time, jitter, exit_code)
