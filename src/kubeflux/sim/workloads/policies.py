"""The cluster-wide objects of a Kubernetes workload file: ``scheduling.k8s.io/v1`` PriorityClasses and
``policy/v1`` PodDisruptionBudgets.

Both are in the cluster from the start of the workload, wherever the file puts them, unless they give times as
jobs do: ``sim.kubeflux.io/submit-time`` creates one that many seconds after the file is applied, and
``sim.kubeflux.io/delete-time`` deletes it then (after its creation; a name is still one object: it is not made
again). The file's PriorityClasses are read before its pods, as a user creates the classes before the jobs that
name them; a pod is admitted with the classes that exist at its submit time (:meth:`ClusterPolicies.admit`'s
``at``): one naming a class created later, or deleted already, is forbidden as the real server forbids it, and the
``globalDefault`` class is the one that exists then.
Each is held to what the real kube-apiserver takes, by the same checks as ``cluster serve``'s store
(:mod:`kubeflux.apiobjects.priority`, :mod:`kubeflux.apiobjects.disruption`); one it refuses is reported with its
words and the field, and skipped. A second class marked ``globalDefault`` is refused, as the Priority admission
plugin refuses it.

Pods and Jobs' pod templates are then admitted as the served cluster's Priority admission admits them
(:func:`~kubeflux.apiobjects.priority.admit_priority`): a pod naming a class gets its ``spec.priority`` and
``spec.preemptionPolicy``, a pod naming none the global default class's (if any), and a pod naming a class the
file does not define is forbidden, in the real server's words (``pods "x" is forbidden: no PriorityClass with
name urgent was found``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubeflux.apiobjects.batchjob import FieldProblem
from kubeflux.apiobjects.disruption import budget_decode_error, budget_from_manifest, budget_problems
from kubeflux.apiobjects.manifests import ManifestError
from kubeflux.apiobjects.priority import (
    SYSTEM_PRIORITY_CLASSES,
    PriorityClass,
    PriorityRefused,
    admit_priority,
    class_decode_error,
    class_problems,
    default_class,
    second_default,
)
from kubeflux.apiobjects.rules import dns_label_problem
from kubeflux.scheduler.objects import DisruptionBudget
from kubeflux.sim.workloads.limits import echo
from kubeflux.sim.workloads.model import ALWAYS, Lifetime, policy_key

__all__ = ["POLICY_KINDS", "ClusterPolicies"]

POLICY_KINDS = {"PriorityClass": "scheduling.k8s.io/v1", "PodDisruptionBudget": "policy/v1"}
"""The kinds read here, and the ``apiVersion`` each must have."""


def _refused(label: str, problems: list[FieldProblem]) -> ManifestError:
    """The 422 of ``problems`` (every cause, the first one's field named first)."""
    also = "".join(f"; {p.field}: {p.message}" for p in problems[1:])
    return ManifestError(label, problems[0].field, problems[0].message + also)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


@dataclass(slots=True)
class ClusterPolicies:
    """The PriorityClasses and PodDisruptionBudgets read so far (see the module docstring)."""

    classes: dict[str, PriorityClass] = field(default_factory=lambda: {pc.name: pc for pc in SYSTEM_PRIORITY_CLASSES})
    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)
    defined: dict[str, str] = field(default_factory=dict)
    """``Kind name`` → where it was first read (a second one of the name is refused: 409 AlreadyExists)."""
    lifetimes: dict[str, Lifetime] = field(default_factory=dict)
    """:func:`~kubeflux.sim.workloads.model.policy_key` → when it exists, for the objects that give times."""

    def add(self, where: str, obj: dict[str, Any], lifetime: Lifetime = ALWAYS) -> None:
        """Read a PriorityClass or a PodDisruptionBudget found at ``where``, which exists for ``lifetime``; raises
        :class:`ManifestError` naming the field the real server refuses."""
        kind = str(obj.get("kind"))
        meta = _meta(obj)
        name, namespace = meta.get("name"), meta.get("namespace") or "default"
        label = f"{kind} {name}" if kind == "PriorityClass" else f"{kind} {namespace}/{name}"
        version = POLICY_KINDS[kind]
        if obj.get("apiVersion") != version:
            raise ManifestError(label, "apiVersion", f"expected {version!r}, got {obj.get('apiVersion')!r}")
        if not isinstance(name, str) or not name:
            raise ManifestError(label, "metadata.name", "Required value: name or generateName is required")
        first = self.defined.get(label)
        if first is not None:
            raise ManifestError(label, "metadata.name", f"defined twice (first in {first})")
        if kind == "PriorityClass":
            self._add_class(label, obj, lifetime)
        else:
            if not isinstance(namespace, str) or dns_label_problem(namespace) is not None:
                raise ManifestError(
                    label, "metadata.namespace", f"{echo(namespace)}: {dns_label_problem(str(namespace))}"
                )
            self._add_budget(label, obj)
        self.defined[label] = where
        if lifetime != ALWAYS:
            self.lifetimes[label] = lifetime

    def _add_class(self, label: str, obj: dict[str, Any], lifetime: Lifetime) -> None:
        problem = class_decode_error(obj)
        if problem is not None:
            raise ManifestError(label, "", f"cannot be handled as a PriorityClass: {problem}")
        given = {"value": 0, "preemptionPolicy": "PreemptLowerPriority", **obj}
        problems = class_problems(given)
        if problems:
            raise _refused(label, problems)
        pc = PriorityClass.from_object(given)
        if pc.name in self.classes:  # a system class
            raise ManifestError(label, "metadata.name", f'priorityclasses.scheduling.k8s.io "{pc.name}" already exists')
        refused = second_default(pc, [c for c in self.classes.values() if self._overlap(c, lifetime)])
        if refused is not None:
            raise ManifestError(label, "globalDefault", f"forbidden: {refused}")
        self.classes[pc.name] = pc

    def _add_budget(self, label: str, obj: dict[str, Any]) -> None:
        problem = budget_decode_error(obj)
        if problem is not None:
            raise ManifestError(label, "", f"cannot be handled as a PodDisruptionBudget: {problem}")
        problems = budget_problems(obj)
        if problems:
            raise _refused(label, problems)
        meta = _meta(obj)
        budget = budget_from_manifest({**obj, "metadata": {**meta, "namespace": meta.get("namespace") or "default"}})
        self.budgets[budget.key] = budget

    def _overlap(self, pc: PriorityClass, lifetime: Lifetime) -> bool:
        """Whether ``pc`` exists at some moment of ``lifetime`` (two ``globalDefault`` classes may follow one
        another, not overlap)."""
        other = self.lifetimes.get(policy_key(pc), ALWAYS)
        ends, other_ends = lifetime.deleted, other.deleted
        return (other_ends is None or lifetime.created < other_ends) and (ends is None or other.created < ends)

    def _class_at(self, name: str, at: float) -> PriorityClass | None:
        pc = self.classes.get(name)
        return pc if pc is not None and self.lifetimes.get(policy_key(pc), ALWAYS).alive(at) else None

    def admit(self, label: str, name: str, spec: Any, path: str = "spec", at: float = 0.0) -> Any:
        """The pod spec ``spec`` of pod ``name`` (``label``: the object it is read from, for the message) as the
        Priority admission leaves it when the pod is created ``at`` seconds after the file is applied (the classes
        that exist then): a copy, or ``spec`` itself when it is no mapping (for the pod's reader to refuse) or
        gives its own ``priority`` and no class (``simulate``'s way of giving a trace's priority, which ``cluster
        serve``'s replay turns into a class). Raises :class:`ManifestError` at ``path``'s ``priorityClassName``
        when the admission forbids the pod."""
        if not isinstance(spec, dict):
            return spec
        named = spec.get("priorityClassName")
        if not named and spec.get("priority") is not None:
            return spec
        admitted = dict(spec)
        alive = [pc for pc in self.classes.values() if self.lifetimes.get(policy_key(pc), ALWAYS).alive(at)]
        default = None if named else default_class(alive)
        try:
            admit_priority(admitted, lambda wanted: self._class_at(wanted, at), default)
        except PriorityRefused as refused:
            field_name = "priorityClassName" if named else "preemptionPolicy"
            raise ManifestError(label, f"{path}.{field_name}", f'pods "{name}" is forbidden: {refused}') from None
        return admitted

    @property
    def user_classes(self) -> list[PriorityClass]:
        """The classes the file defines (not the system ones)."""
        system = {pc.name for pc in SYSTEM_PRIORITY_CLASSES}
        return [pc for pc in self.classes.values() if pc.name not in system]
