"""PriorityClasses and the Priority admission plugin, as kube-apiserver v1.36 applies them to a pod it creates
(``plugin/pkg/admission/priority``): one reading for ``simulate``'s workload files and the served cluster.

On create, a pod naming no class gets the global default one (the lowest value among classes marked
``globalDefault``; none: priority 0, ``PreemptLowerPriority``) and its name; a pod naming a class that does not
exist is forbidden; ``spec.priority`` becomes the class's value, and ``spec.preemptionPolicy`` the class's policy.
A pod that gives its own ``spec.priority`` or ``spec.preemptionPolicy`` differing from what the class gives is
forbidden, with the real server's words.

A PriorityClass itself is held to what the real server takes (``ValidatePriorityClass`` in
``k8s.io/kubernetes/pkg/apis/scheduling/validation``, and the Priority plugin's admission of classes), one check for
``simulate``'s workload files and ``cluster serve``'s store: ``value`` an ``int32``, ``globalDefault`` a boolean
(else a 400: :func:`class_decode_error`); a name that is a DNS-1123 subdomain, a ``system-`` name only for the
system classes as they are, a value of at most 1,000,000,000, ``preemptionPolicy`` ``PreemptLowerPriority`` or
``Never`` (a 422: :func:`class_problems`); one ``globalDefault`` class only (a 403: :func:`second_default`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from kubeflux.apiobjects.batchjob import FieldProblem
from kubeflux.apiobjects.rules import (
    DNS_SUBDOMAIN_EXAMPLES,
    DNS_SUBDOMAIN_RULE,
    dns_subdomain_problem,
    int_decode_error,
    unmarshal_error,
)
from kubeflux.scheduler.objects import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER

__all__ = [
    "PREEMPT_LOWER_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "PriorityClass",
    "PriorityRefused",
    "admit_priority",
    "class_decode_error",
    "class_problems",
    "default_class",
    "second_default",
]

HIGHEST_USER_DEFINABLE_PRIORITY: Final = 1_000_000_000


class PriorityRefused(ValueError):
    """The Priority admission plugin forbids the pod; the message is the real server's reason (after
    ``pods "<name>" is forbidden: ``)."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A ``scheduling.k8s.io/v1`` PriorityClass."""

    name: str
    value: int
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    global_default: bool = False

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> PriorityClass:
        """From a stored or a file's PriorityClass (validated by its reader: ``value`` an int32)."""
        return cls(
            obj["metadata"]["name"],
            obj.get("value", 0),
            obj.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY,
            bool(obj.get("globalDefault", False)),
        )

    def to_object(self) -> dict[str, Any]:
        """The ``scheduling.k8s.io/v1`` PriorityClass it is (:meth:`from_object`'s inverse)."""
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": self.name},
            "value": self.value,
            "preemptionPolicy": self.preemption_policy,
            "globalDefault": self.global_default,
        }


SYSTEM_PRIORITY_CLASSES: Final = (
    PriorityClass("system-node-critical", 2_000_001_000),
    PriorityClass("system-cluster-critical", 2_000_000_000),
)
"""What every cluster has from its start."""


def class_decode_error(obj: dict[str, Any]) -> str | None:
    """Why a PriorityClass cannot be decoded (the 400's text after ``cannot be handled as a PriorityClass:``), or
    None."""
    problem = int_decode_error("PriorityClass", "value", obj.get("value"))
    if problem is not None:
        return problem
    for name, go_type, valid in (
        ("globalDefault", "bool", bool),
        ("preemptionPolicy", "v1.PreemptionPolicy", str),
        ("description", "string", str),
    ):
        value = obj.get(name)
        if value is not None and not isinstance(value, valid):
            return unmarshal_error(value, f"PriorityClass.{name}", go_type)
    return None


def class_problems(obj: dict[str, Any]) -> list[FieldProblem]:
    """Every cause of a 422 for a decodable PriorityClass with its defaults (``value`` 0, ``preemptionPolicy``
    ``PreemptLowerPriority``), in the real server's order and words."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    value = obj.get("value") or 0
    problems: list[FieldProblem] = []
    if dns_subdomain_problem(name) is not None:
        rule = DNS_SUBDOMAIN_RULE + DNS_SUBDOMAIN_EXAMPLES
        problems.append(FieldProblem("metadata.name", f'Invalid value: "{name}": {rule}'))
    if name.startswith("system-"):
        known = next((pc for pc in SYSTEM_PRIORITY_CLASSES if pc.name == name), None)
        if known is None:
            error = f"{name} is not a known system priority class"
        elif known.value != value:
            error = f"value of {name} PriorityClass must be {known.value}"
        elif bool(obj.get("globalDefault")):
            error = f"globalDefault of {name} PriorityClass must be false"
        else:
            error = ""
        if error:
            message = (
                "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: "
                + error
            )
            problems.append(FieldProblem("metadata.name", message, "FieldValueForbidden"))
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        message = f"Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
        problems.append(FieldProblem("value", message, "FieldValueForbidden"))
    policy = obj.get("preemptionPolicy")
    if policy == "":
        problems.append(FieldProblem("preemptionPolicy", "Required value", "FieldValueRequired"))
    elif policy is not None and policy not in (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER):
        message = f'Unsupported value: "{policy}": supported values: "{PREEMPT_LOWER_PRIORITY}", "{PREEMPT_NEVER}"'
        problems.append(FieldProblem("preemptionPolicy", message, "FieldValueNotSupported"))
    return problems


def second_default(pc: PriorityClass, classes: Iterable[PriorityClass]) -> str | None:
    """Why the Priority plugin forbids creating ``pc`` beside ``classes`` (another one already ``globalDefault``),
    or None."""
    if not pc.global_default:
        return None
    found = default_class(c for c in classes if c.name != pc.name)
    if found is None:
        return None
    return f"PriorityClass {found.name} is already marked as default. Only one default can exist"


def default_class(classes: Iterable[PriorityClass]) -> PriorityClass | None:
    """``getDefaultPriorityClass``: of the ``globalDefault`` classes (two can exist after a race), the lowest."""
    found: PriorityClass | None = None
    for pc in classes:
        if pc.global_default and (found is None or found.value > pc.value):
            found = pc
    return found


def admit_priority(
    spec: dict[str, Any], find: Callable[[str], PriorityClass | None], default: PriorityClass | None
) -> None:
    """The Priority admission of a pod being created: fills ``spec.priorityClassName`` (from ``default`` when it
    names none), ``spec.priority`` and ``spec.preemptionPolicy``. ``find`` looks a class up by name. Raises
    :class:`PriorityRefused` as the real plugin forbids."""
    name = spec.get("priorityClassName") or ""
    if name:
        pc = find(name) if isinstance(name, str) else None
        if pc is None:
            raise PriorityRefused(f"no PriorityClass with name {name} was found")
        priority, policy = pc.value, pc.preemption_policy
    elif default is not None:
        name, priority, policy = default.name, default.value, default.preemption_policy
    else:
        priority, policy = 0, PREEMPT_LOWER_PRIORITY
    given = spec.get("priority")
    if given is not None and given != priority:
        raise PriorityRefused(
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {priority} from the given PriorityClass name"
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise PriorityRefused(
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority "
            f"admission controller computed {policy} from the given PriorityClass name"
        )
    if name:
        spec["priorityClassName"] = name
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy
