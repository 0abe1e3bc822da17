"""A Job's ``spec.podFailurePolicy`` and what it makes of a failed pod, as kube-controller-manager v1.36's Job
controller matches it (``pkg/controller/job/pod_failure_policy.go``, ``matchPodFailurePolicy``): one model for both
of kubeflux's Job controllers (the simulator's and ``cluster serve``'s); the spec's validation, in the server's
words, is :func:`kubeflux.apiobjects.batchjob.job_problems`.

The rules are tried in order on a pod that failed; the first that matches decides:

* ``onExitCodes``: a terminated container (of ``containerName``, if given; init containers after the others) whose
  exit code is not 0 and is ``In`` (``NotIn``) ``values``;
* ``onPodConditions``: a condition of the pod whose ``type`` and ``status`` (``True`` by default) are a pattern's.

``FailJob`` fails the Job (reason ``PodFailurePolicy``, the message naming the pod and what matched), ``Ignore``
does not count the failure towards ``backoffLimit``, ``Count`` (and no match) counts it. ``FailIndex`` counts it
too: it fails the pod's index under ``backoffLimitPerIndex``, which kubeflux does not model. An ignored failure
still counts in the pod-failure back-off (the real controller's back-off record takes every new failed pod).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FailedPod", "PodFailurePolicy", "PodFailureRule", "Verdict", "failed_pod_of"]


@dataclass(frozen=True, slots=True)
class PodFailureRule:
    """One rule: its action, and either its exit codes (``operator``, ``values``, ``container``: "" for any) or its
    condition patterns ((type, status) pairs)."""

    action: str
    operator: str = ""
    values: tuple[int, ...] = ()
    container: str = ""
    conditions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class FailedPod:
    """What a rule looks at in a failed pod: its namespace and name (for the message), its terminated containers'
    (name, exit code) in the status's order (init containers after the others), its conditions' (type, status)."""

    namespace: str
    name: str
    containers: tuple[tuple[str, int], ...]
    init_containers: tuple[tuple[str, int], ...]
    conditions: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a policy makes of a failed pod: whether it counts towards ``backoffLimit``; the ``FailJob`` message
    ("" when the Job goes on)."""

    counts: bool = True
    fail_job: str = ""


_COUNT = Verdict()


@dataclass(frozen=True, slots=True)
class PodFailurePolicy:
    """A Job's ``podFailurePolicy`` (see the module docstring)."""

    rules: tuple[PodFailureRule, ...]

    @classmethod
    def from_spec(cls, policy: Any) -> PodFailurePolicy | None:
        """The policy of a validated Job's ``spec.podFailurePolicy`` (None when it has none)."""
        if not isinstance(policy, Mapping):
            return None
        rules = []
        for rule in policy.get("rules") or ():
            codes = rule.get("onExitCodes")
            if isinstance(codes, Mapping):
                values = tuple(int(v) for v in codes.get("values") or ())
                container = str(codes.get("containerName") or "")
                rules.append(PodFailureRule(str(rule["action"]), str(codes["operator"]), values, container))
            else:
                patterns = tuple(
                    (str(p["type"]), str(p.get("status") or "True")) for p in rule.get("onPodConditions") or ()
                )
                rules.append(PodFailureRule(str(rule["action"]), conditions=patterns))
        return cls(tuple(rules))

    def judge(self, pod: FailedPod) -> Verdict:
        """The verdict on ``pod``, which failed (``matchPodFailurePolicy``)."""
        for index, rule in enumerate(self.rules):
            if rule.operator:
                container = _matching_container(pod.containers, rule) or _matching_container(pod.init_containers, rule)
                if container is None:
                    continue
                what = (
                    f"Container {container[0]} for pod {pod.namespace}/{pod.name} failed with exit code {container[1]}"
                )
            else:
                condition = next((c for c in pod.conditions if c in rule.conditions), None)
                if condition is None:
                    continue
                what = f"Pod {pod.namespace}/{pod.name} has condition {condition[0]}"
            if rule.action == "Ignore":
                return Verdict(counts=False)
            if rule.action == "FailJob":
                return Verdict(fail_job=f"{what} matching FailJob rule at index {index}")
            return _COUNT  # Count; FailIndex (without backoffLimitPerIndex: counted)
        return _COUNT


def _matching_container(containers: Sequence[tuple[str, int]], rule: PodFailureRule) -> tuple[str, int] | None:
    for name, code in containers:
        named = not rule.container or rule.container == name
        if code != 0 and named and (code in rule.values) == (rule.operator == "In"):
            return name, code
    return None


def _terminated(statuses: Iterable[Any]) -> tuple[tuple[str, int], ...]:
    found = []
    for status in statuses:
        terminated = ((status or {}).get("state") or {}).get("terminated") if isinstance(status, Mapping) else None
        if isinstance(terminated, Mapping) and isinstance(terminated.get("exitCode"), int):
            found.append((str(status.get("name") or ""), int(terminated["exitCode"])))
    return tuple(found)


def failed_pod_of(pod: Mapping[str, Any]) -> FailedPod:
    """The :class:`FailedPod` view of a pod object (``metadata``, ``status``)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    conditions = tuple(
        (str(c.get("type")), str(c.get("status"))) for c in status.get("conditions") or () if isinstance(c, Mapping)
    )
    return FailedPod(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        _terminated(status.get("containerStatuses") or ()),
        _terminated(status.get("initContainerStatuses") or ()),
        conditions,
    )
