"""Strategies of the ``apps/v1`` workloads (Deployments, ReplicaSets, StatefulSets, DaemonSets and their
ControllerRevisions), stored so that a real kube-controller-manager run against ``cluster serve`` finds them and
keeps them.

Defaults are k8s.io/kubernetes' ``pkg/apis/apps/v1/defaults.go``; validation is the part of
``pkg/apis/apps/validation`` a client meets first: a selector that is present, not empty and matches the template's
labels, a template whose pod spec is valid with ``restartPolicy: Always``, counts that are not negative, and a
selector that no update changes. One :class:`ReplicatedStrategy` serves the four workload kinds, told apart by
their defaults and by what an update may change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubeflux.sim.apiserver.core_strategies import condition_times, default_template_spec, pod_spec_causes
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import Strategy, fill_zeros, required

__all__ = [
    "ControllerRevisionStrategy",
    "DaemonSetStrategy",
    "ReplicatedStrategy",
    "daemonset_strategy",
    "deployment_strategy",
    "go_map",
    "replicaset_strategy",
    "selector_matches",
    "statefulset_strategy",
]

Object = dict[str, Any]
Defaults = Callable[[Object], None]


def selector_matches(selector: Object, labels: Object) -> bool:
    """Whether a ``metav1.LabelSelector`` (``matchLabels``, ``matchExpressions``) selects ``labels``."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        if not isinstance(expression, dict):
            return False
        key, operator, values = str(expression.get("key")), expression.get("operator"), expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def go_map(labels: Object) -> str:
    """A ``map[string]string`` as Go's ``%#v`` prints it in a cause's message."""
    return "map[string]string{" + ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items())) + "}"


def _count_causes(spec: Object, fields: tuple[str, ...]) -> list[Cause]:
    causes = []
    for name in fields:
        value = spec.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            causes.append(Cause(f"spec.{name}", f"Invalid value: {value!r}: must be greater than or equal to 0"))
    return causes


def _rolling(spec: Object, key: str, defaults: Object) -> None:
    """``spec[key]`` defaulted to type RollingUpdate with ``rollingUpdate`` fields ``defaults``."""
    strategy = spec.setdefault(key, {})
    if not isinstance(strategy, dict):
        return
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate" and defaults:
        rolling = strategy.setdefault("rollingUpdate", {})
        if isinstance(rolling, dict):
            for name, value in defaults.items():
                rolling.setdefault(name, value)


def _deployment_defaults(spec: Object) -> None:
    spec.setdefault("replicas", 1)
    _rolling(spec, "strategy", {"maxUnavailable": "25%", "maxSurge": "25%"})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _replicaset_defaults(spec: Object) -> None:
    spec.setdefault("replicas", 1)


def _statefulset_defaults(spec: Object) -> None:
    spec.setdefault("podManagementPolicy", "OrderedReady")
    _rolling(spec, "updateStrategy", {"partition": 0})
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    if isinstance(retention, dict):
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)


def _daemonset_defaults(spec: Object) -> None:
    _rolling(spec, "updateStrategy", {"maxUnavailable": 1, "maxSurge": 0})
    spec.setdefault("revisionHistoryLimit", 10)


_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


@dataclass(eq=False)
class ReplicatedStrategy(Strategy):
    """A workload that keeps pods of one template: a selector, a template, counts; status written by its
    controller through the status subresource."""

    has_status = True
    tracks_generation = True

    noun: str
    """What the real server's message calls it (``empty selector is invalid for deployment``)."""
    defaults: Defaults
    zero_status: Object
    """The status fields Go shows though zero (not ``omitempty``)."""
    mutable: tuple[str, ...] | None = None
    """The spec fields an update may change, refused together as ``spec`` (None: all but the selector, which is
    immutable)."""
    zero_spec: Object = field(default_factory=dict)

    def prepare_create(self, obj: Object, now: str) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            self.defaults(spec)
            _default_template(spec)
        obj["status"] = {}

    def canonicalize(self, obj: Object) -> None:
        fill_zeros(obj, "spec", self.zero_spec)
        fill_zeros(obj, "status", self.zero_status)
        spec = obj.get("spec")
        template = spec.get("template") if isinstance(spec, dict) else None
        if isinstance(template, dict) and template.get("metadata") is None:
            template["metadata"] = {}  # ObjectMeta is no pointer: Go shows it empty
        condition_times(obj, ("lastUpdateTime", "lastTransitionTime"))

    def validate(self, obj: Object) -> list[Cause]:
        """As ``ValidateDeploymentSpec`` and its kin: a missing selector selects nothing (so no template's labels
        match it), an empty one everything (so it is refused, and the labels are not compared)."""
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [required("spec")]
        causes = _count_causes(spec, ("replicas", "minReadySeconds", "revisionHistoryLimit"))
        selector = spec.get("selector")
        given = spec.get("template")
        template: Object = given if isinstance(given, dict) else {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not isinstance(selector, dict):
            causes.append(required("spec.selector"))
            matches = False
        elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(
                Cause("spec.selector", f"Invalid value: {selector}: empty selector is invalid for {self.noun}")
            )
            matches = True
        else:
            matches = isinstance(labels, dict) and selector_matches(selector, labels)
        if not matches:
            shown = go_map(labels) if isinstance(labels, dict) else repr(labels)
            message = f"Invalid value: {shown}: `selector` does not match template `labels`"
            causes.append(Cause("spec.template.metadata.labels", message))
        pod_spec = template.get("spec") if isinstance(template.get("spec"), dict) else {"restartPolicy": "Always"}
        return causes + pod_spec_causes(pod_spec, "spec.template.spec.", ("Always",))

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        new_spec, old_spec = new.get("spec"), old.get("spec") or {}
        if isinstance(new_spec, dict):
            _default_template(new_spec)
        causes = self.validate(new)
        if not isinstance(new_spec, dict):
            return causes
        if self.mutable is None:
            if new_spec.get("selector") != old_spec.get("selector"):
                message = f"Invalid value: {new_spec.get('selector')}: field is immutable"
                causes.append(Cause("spec.selector", message))
        else:  # a selector too is no field an update may change
            frozen = {k for k in set(new_spec) | set(old_spec) if k not in self.mutable}
            if any(new_spec.get(k) != old_spec.get(k) for k in frozen):
                allowed = ", ".join(f"'{name}'" for name in self.mutable[:-1])
                message = (
                    f"Forbidden: updates to {self.noun} spec for fields other than {allowed} and "
                    f"'{self.mutable[-1]}' are forbidden"
                )
                causes.append(Cause("spec", message, "FieldValueForbidden"))
        return causes


def _default_template(spec: Object) -> None:
    """The pod template's defaults (a missing template is an empty one, as Go decodes it)."""
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        template_spec = template.setdefault("spec", {})
        if isinstance(template_spec, dict):
            default_template_spec(template_spec)


_TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


class DaemonSetStrategy(ReplicatedStrategy):
    """A DaemonSet also counts its template's versions in an annotation (``templateGeneration``, which apps/v1
    no longer has as a field): 1 on create, one more on each update that changes the template."""

    def __init__(self) -> None:
        zeros = dict.fromkeys(
            ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady"), 0
        )
        super().__init__("daemonset", _daemonset_defaults, zeros)

    def prepare_create(self, obj: Object, now: str) -> None:
        super().prepare_create(obj, now)
        annotations = obj["metadata"].setdefault("annotations", {})
        if isinstance(annotations, dict):
            annotations[_TEMPLATE_GENERATION] = "1"

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = super().validate_update(new, old)
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if not causes and isinstance(new_spec, dict) and new_spec.get("template") != old_spec.get("template"):
            annotations = new["metadata"].setdefault("annotations", {})
            previous = (old["metadata"].get("annotations") or {}).get(_TEMPLATE_GENERATION, "0")
            if isinstance(annotations, dict) and str(previous).isdigit():
                annotations[_TEMPLATE_GENERATION] = str(int(previous) + 1)
        return causes


def deployment_strategy() -> ReplicatedStrategy:
    return ReplicatedStrategy("deployment", _deployment_defaults, {})


def replicaset_strategy() -> ReplicatedStrategy:
    # sic: the real server's message about an empty selector says deployment
    return ReplicatedStrategy("deployment", _replicaset_defaults, {"replicas": 0})


def statefulset_strategy() -> ReplicatedStrategy:
    zeros = {"replicas": 0, "availableReplicas": 0}
    return ReplicatedStrategy("statefulset", _statefulset_defaults, zeros, _STATEFULSET_MUTABLE, {"serviceName": ""})


def daemonset_strategy() -> ReplicatedStrategy:
    return DaemonSetStrategy()


class ControllerRevisionStrategy(Strategy):
    """A snapshot of a StatefulSet's or DaemonSet's template: ``revision`` (not negative) and ``data``, which no
    update may change."""

    def validate(self, obj: Object) -> list[Cause]:
        causes = [required("data")] if obj.get("data") is None else []
        revision = obj.get("revision")
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            causes.append(Cause("revision", f"Invalid value: {revision!r}: must be greater than or equal to 0"))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        if new.get("data") != old.get("data"):
            causes.append(Cause("data", "Invalid value: field is immutable"))
        return causes
