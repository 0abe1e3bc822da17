"""PriorityClasses and the Priority admission plugin, as kube-apiserver v1.36 applies them to a pod it creates
(``plugin/pkg/admission/priority``): one reading for ``simulate``'s workload files and the served cluster.

On create, a pod naming no class gets the global default one (the lowest value among classes marked
``globalDefault``; none: priority 0, ``PreemptLowerPriority``) and its name; a pod naming a class that does not
exist is forbidden; ``spec.priority`` becomes the class's value, and ``spec.preemptionPolicy`` the class's policy.
A pod that gives its own ``spec.priority`` or ``spec.preemptionPolicy`` differing from what the class gives is
forbidden, with the real server's words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubeflux.scheduler.objects import PREEMPT_LOWER_PRIORITY

__all__ = [
    "PREEMPT_LOWER_PRIORITY",
    "SYSTEM_PRIORITY_CLASSES",
    "PriorityClass",
    "PriorityRefused",
    "admit_priority",
    "default_class",
]

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000


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


SYSTEM_PRIORITY_CLASSES = (
    PriorityClass("system-node-critical", 2_000_001_000),
    PriorityClass("system-cluster-critical", 2_000_000_000),
)
"""What every cluster has from its start."""


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
