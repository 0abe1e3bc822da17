"""Pod scheduling gates (``spec.schedulingGates``) as kube-apiserver v1.36 keeps them: how Kueue and other
controllers hold a pod back from every scheduler, then let it go.

* On create, a gated pod gets ``PodScheduled=False`` with reason ``SchedulingGated`` (the pod strategy's
  ``applySchedulingGatedCondition``); gates are qualified names, no two alike, and a pod may not name its node
  while gated.
* On update, gates may only be removed. While the old pod is gated, its node selector may gain keys (never lose or
  change one) and its node affinity may be narrowed (a required term gains expressions; terms are never added
  or removed once there are some): how Kueue puts an admitted flavor's nodes on the pod before ungating it.
* A Binding to a gated pod is refused (:func:`binding_refusal`).
"""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.rules import go_value, qualified_name_problems, unmarshal_error
from kubeflux.scheduler.messages import GATED_MESSAGE, GATED_REASON
from kubeflux.sim.apiserver.errors import Cause

Object = dict[str, Any]

_FORBIDDEN = "FieldValueForbidden"


def gates_of(spec: Any) -> list[Any]:
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    return gates if isinstance(gates, list) else []


def gates_decode_error(spec: Any) -> str:
    """The error of Go's JSON decoder on ``spec.schedulingGates`` (a 400, before any validation): a list of objects
    whose ``name`` is a string (``null`` for either is the zero value: no error here)."""
    gates = spec.get("schedulingGates") if isinstance(spec, dict) else None
    if gates is None:
        return ""
    field = "PodSpec.spec.schedulingGates"
    if not isinstance(gates, list):
        return unmarshal_error(gates, field, "[]v1.PodSchedulingGate")
    for gate in gates:
        if gate is not None and not isinstance(gate, dict):
            return unmarshal_error(gate, field, "v1.PodSchedulingGate")
        name = gate.get("name") if isinstance(gate, dict) else None
        if name is not None and not isinstance(name, str):
            return unmarshal_error(name, "PodSchedulingGate.spec.schedulingGates.name", "string")
    return ""


def gated_condition(obj: Object, now: str) -> None:
    """On create: a gated pod without a ``PodScheduled`` condition gets ``False``/``SchedulingGated``."""
    if not gates_of(obj.get("spec")):
        return
    status = obj.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    if any(isinstance(c, dict) and c.get("type") == "PodScheduled" for c in conditions):
        return
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": now,
            "reason": GATED_REASON,
            "message": GATED_MESSAGE,
        }
    )


def gate_causes(spec: Any, *, create: bool, prefix: str = "spec.") -> list[Cause]:
    """``validateSchedulingGates`` (qualified names, no duplicates) of the pod spec at ``prefix`` (a Job's template's
    too) and, on a pod's create, no ``nodeName`` while gated."""
    causes: list[Cause] = []
    seen: set[str] = set()
    gates = gates_of(spec)
    for index, gate in enumerate(gates):
        path = f"{prefix}schedulingGates[{index}]"
        name = gate.get("name") if isinstance(gate, dict) else None
        name = "" if name is None else name  # null: Go's zero value
        if not isinstance(name, str):  # (a decoding error first: :func:`gates_decode_error`)
            causes.append(Cause(f"{path}.name", "Invalid value: must be a string"))
            continue
        causes.extend(
            Cause(path, f"Invalid value: {go_value(name)}: {problem}") for problem in qualified_name_problems(name)
        )
        if name in seen:
            causes.append(Cause(path, f"Duplicate value: {go_value(name)}", "FieldValueDuplicate"))
        seen.add(name)
    if create and gates and isinstance(spec, dict) and spec.get("nodeName"):
        message = "Forbidden: cannot be set until all schedulingGates have been cleared"
        causes.append(Cause("spec.nodeName", message, _FORBIDDEN))
    return causes


def _names(spec: Object) -> list[str]:
    return [str(g["name"]) for g in gates_of(spec) if isinstance(g, dict) and isinstance(g.get("name"), str)]


def gated_update(new_spec: Object, old_spec: Object) -> tuple[list[Cause], Object]:
    """``validateOnlyDeletedSchedulingGates`` and, for a gated old pod, the node selector and node affinity
    mutations it allows: the causes, and ``new_spec`` with what was allowed to change set back to the old values
    (for the check that nothing else changed, as the real validation munges the spec)."""
    causes: list[Cause] = []
    old_names = set(_names(old_spec))
    for index, name in enumerate(_names(new_spec)):
        if name not in old_names:
            message = f"Forbidden: only deletion is allowed, but found new scheduling gate '{name}'"
            causes.append(Cause(f"spec.schedulingGates[{index}].name", message, _FORBIDDEN))
    if not old_names:
        return causes, new_spec
    munged = dict(new_spec)
    old_selector = old_spec.get("nodeSelector") or {}
    new_selector = new_spec.get("nodeSelector") or {}
    if new_selector != old_selector:
        if any(new_selector.get(key) != value for key, value in old_selector.items()):
            message = "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
            shown = go_value(new_spec.get("nodeSelector"))  # a selector taken away is Go's nil map: null
            causes.append(Cause("spec.nodeSelector", f"Invalid value: {shown}: {message}"))
        _set(munged, "nodeSelector", old_spec.get("nodeSelector"))
    old_affinity = (old_spec.get("affinity") or {}).get("nodeAffinity")
    new_affinity = (new_spec.get("affinity") or {}).get("nodeAffinity")
    if new_affinity != old_affinity:
        causes.extend(_affinity_causes(new_affinity, old_affinity))
        _set(munged, "affinity", _affinity_munged(new_spec.get("affinity"), old_spec.get("affinity"), old_affinity))
    return causes, munged


def _affinity_munged(new: Any, old: Any, old_node_affinity: Any) -> Any:
    """The new ``spec.affinity`` with its node affinity set back to the old one, as ``ValidatePodUpdate`` munges it
    (so that a change of the pod (anti-)affinity beside it is still caught): the old node affinity alone when the
    new pod has no affinity, none when neither pod had more than a node affinity."""
    if not isinstance(new, dict):
        return None if old_node_affinity is None else {"nodeAffinity": old_node_affinity}
    if old is None and new.get("podAffinity") is None and new.get("podAntiAffinity") is None:
        return None
    munged = {k: v for k, v in new.items() if k != "nodeAffinity"}
    if old_node_affinity is not None:
        munged["nodeAffinity"] = old_node_affinity
    return munged


def _set(spec: Object, key: str, value: Any) -> None:
    if value is None:
        spec.pop(key, None)
    else:
        spec[key] = value


_TERMS = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def _terms(affinity: Any) -> list[Any] | None:
    required_terms = (
        affinity.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(affinity, dict) else None
    )
    if not isinstance(required_terms, dict):
        return None
    terms = required_terms.get("nodeSelectorTerms")
    return terms if isinstance(terms, list) else []


def _affinity_causes(new: Any, old: Any) -> list[Cause]:
    """``validateNodeAffinityMutation``: with required terms there, none added or removed, and each term only
    gains expressions and fields after those it had."""
    old_terms = _terms(old)
    if not old_terms:
        return []
    new_terms = _terms(new) or []
    if len(new_terms) != len(old_terms):
        message = "no additions/deletions to non-empty NodeSelectorTerms list are allowed"
        return [Cause(_TERMS, f"Invalid value: {go_value([_go_term(term) for term in new_terms])}: {message}")]
    causes = []
    for index, (new_term, old_term) in enumerate(zip(new_terms, old_terms, strict=True)):
        if not _only_additions(new_term, old_term):
            message = "only additions are allowed (no mutations or deletions)"
            causes.append(Cause(f"{_TERMS}[{index}]", f"Invalid value: {go_value(_go_term(new_term))}: {message}"))
    return causes


def _go_term(term: Any) -> dict[str, Any]:
    """A node selector term as the server echoes it: the internal type, whose JSON has Go's field names."""
    term = term if isinstance(term, dict) else {}

    def requirements(kind: str) -> list[Any] | None:
        found = term.get(kind)
        if not found:
            return None
        return [
            {"Key": r.get("key"), "Operator": r.get("operator"), "Values": r.get("values")}
            if isinstance(r, dict)
            else r
            for r in found
        ]

    return {"MatchExpressions": requirements("matchExpressions"), "MatchFields": requirements("matchFields")}


def _only_additions(new: Any, old: Any) -> bool:
    new = new if isinstance(new, dict) else {}
    old = old if isinstance(old, dict) else {}
    kinds = ("matchExpressions", "matchFields")
    if not any(old.get(kind) for kind in kinds) and any(new.get(kind) for kind in kinds):
        return False
    for kind in kinds:
        before = old.get(kind) or []
        after = new.get(kind) or []
        if before and (len(after) < len(before) or after[: len(before)] != before):
            return False
    return True


def binding_refusal(pod: Object, name: str) -> str:
    """Why a Binding to ``pod`` is refused (its gates), or empty."""
    return f"pod {name} has non-empty .spec.schedulingGates" if gates_of(pod.get("spec")) else ""
