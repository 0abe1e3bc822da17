"""What a ``v1`` Pod asks of the pods around it, read from its manifest
(:class:`~kubeflux.scheduler.objects.PodTerms`): container ``hostPort`` values, required
``podAffinity``/``podAntiAffinity`` terms and ``topologySpreadConstraints``.

Validated as the API server validates them, each problem naming the field
(``spec.topologySpreadConstraints[0].maxSkew``). ``matchLabelKeys`` (and an affinity term's ``mismatchLabelKeys``) are
merged into the label selector with the pod's own label values (``In``, or ``NotIn``), as the API server does at
creation (merging again what it merged already changes nothing). A spread constraint with ``whenUnsatisfiable:
ScheduleAnyway`` only scores, so it is checked and not kept. Preferred (``preferredDuringScheduling…``) terms only
score too, and are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from kubeflux.apiobjects.batchjob import FieldProblem
from kubeflux.apiobjects.rules import go_value, label_key_problems, label_value_problems
from kubeflux.scheduler.objects import (
    AffinityTerm,
    HostPort,
    LabelSelector,
    PodTerms,
    SelectorRequirement,
    SpreadConstraint,
)

if TYPE_CHECKING:
    from kubeflux.apiobjects.reader import ManifestReader


class Failing(Protocol):
    """Whatever reads an object's fields and words a problem with one as an error naming it (a
    :class:`~kubeflux.apiobjects.reader.ManifestReader`, or a reader of custom resources): all :func:`label_selector`
    needs."""

    def fail(self, path: str, problem: str) -> Exception: ...


__all__ = ["Failing", "label_selector", "pod_terms", "selector_problems", "selector_to_manifest", "terms_to_manifest"]

_PROTOCOLS: Final = ("TCP", "UDP", "SCTP")
_WHEN: Final = ("DoNotSchedule", "ScheduleAnyway")
_POLICIES: Final = ("Honor", "Ignore")
_MAX_PORT: Final = 65535
_MAX_WEIGHT: Final = 100
_PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"


def label_selector(reader: Failing, path: str, raw: Any) -> LabelSelector | None:
    """The ``metav1.LabelSelector`` at ``path`` (None when absent: it selects nothing), as the API server takes it:
    decoded (a mapping; ``matchLabels`` strings; each requirement's ``key``, ``operator`` and ``values`` strings) and
    valid (:func:`selector_problems`), else ``reader.fail`` names the first field at fault
    (``spec.affinity….labelSelector.matchExpressions[0].values``). The one reading of a label selector: pods' terms,
    PodDisruptionBudgets, custom resources."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise reader.fail(path, f"expected a mapping, got {type(raw).__name__}")
    labels = raw.get("matchLabels") or {}
    if not isinstance(labels, Mapping):
        raise reader.fail(f"{path}.matchLabels", f"expected a mapping, got {type(labels).__name__}")
    for key, value in labels.items():
        if not isinstance(value, str):
            raise reader.fail(f"{path}.matchLabels.{key}", f"expected a string, got {value!r}")
    expressions = raw.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise reader.fail(f"{path}.matchExpressions", f"expected a list, got {type(expressions).__name__}")
    requirements = []
    for i, expression in enumerate(expressions):
        at = f"{path}.matchExpressions[{i}]"
        if not isinstance(expression, Mapping):
            raise reader.fail(at, f"expected a mapping, got {type(expression).__name__}")
        for name in ("key", "operator"):
            if not isinstance(expression.get(name) or "", str):
                raise reader.fail(f"{at}.{name}", f"expected a string, got {expression[name]!r}")
        values = expression.get("values") or []
        if not isinstance(values, list):
            raise reader.fail(f"{at}.values", f"expected a list, got {type(values).__name__}")
        for n, value in enumerate(values):
            if not isinstance(value, str):
                raise reader.fail(f"{at}.values[{n}]", f"expected a string, got {value!r}")
        requirements.append(SelectorRequirement(expression.get("key") or "", expression["operator"], tuple(values)))
    problems = selector_problems(raw, path)
    if problems:
        raise reader.fail(problems[0].field, problems[0].message)
    return LabelSelector(tuple(sorted((str(k), v) for k, v in labels.items())), tuple(requirements))


def selector_problems(selector: Mapping[str, Any], path: str) -> list[FieldProblem]:
    """``ValidateLabelSelector`` of a decoded selector: every label of ``matchLabels``, every requirement's operator,
    values and key, in the real server's words."""
    problems: list[FieldProblem] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        problems += [
            FieldProblem(f"{path}.matchLabels", f"Invalid value: {go_value(key)}: {p}") for p in label_key_problems(key)
        ]
        problems += [
            FieldProblem(f"{path}.matchLabels", f"Invalid value: {go_value(value)}: {p}")
            for p in label_value_problems(value or "")
        ]
    for index, expression in enumerate(selector.get("matchExpressions") or ()):
        at = f"{path}.matchExpressions[{index}]"
        operator, values = expression.get("operator") or "", expression.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                message = "Required value: must be specified when `operator` is 'In' or 'NotIn'"
                problems.append(FieldProblem(f"{at}.values", message, "FieldValueRequired"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                message = "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                problems.append(FieldProblem(f"{at}.values", message, "FieldValueForbidden"))
        else:
            problems.append(
                FieldProblem(f"{at}.operator", f"Invalid value: {go_value(operator)}: not a valid selector operator")
            )
        key = expression.get("key") or ""
        problems += [FieldProblem(f"{at}.key", f"Invalid value: {go_value(key)}: {p}") for p in label_key_problems(key)]
        for number, value in enumerate(values):
            problems += [
                FieldProblem(f"{at}.values[{number}]", f"Invalid value: {go_value(value)}: {p}")
                for p in label_value_problems(value)
            ]
    return problems


def _selects_on(selector: LabelSelector, key: str, labels: Mapping[str, str]) -> bool:
    """Whether ``selector`` names ``key`` itself, which the server refuses at creation beside ``matchLabelKeys``
    naming it: in ``matchLabels`` or in a requirement, but the ``key In (the pod's value)`` that its merge of
    ``matchLabelKeys`` adds (a pod read back from the server has it; one written so in a file is taken, where the
    server refuses it)."""
    if any(key == k for k, _ in selector.match_labels):
        return True
    merged = (labels[key],) if key in labels else None
    return any(r.key == key and (r.operator != "In" or r.values != merged) for r in selector.match_expressions)


def _merged(
    reader: ManifestReader,
    path: str,
    item: Mapping[str, Any],
    selector: LabelSelector | None,
    labels: Mapping[str, str],
) -> LabelSelector | None:
    """``selector`` with the pod's values of ``matchLabelKeys`` (``In``) and ``mismatchLabelKeys`` (``NotIn``)."""
    added = []
    for name, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for i, key in enumerate(reader.sequence(f"{path}.{name}", item.get(name) or [])):
            key = reader.string(f"{path}.{name}[{i}]", key)
            if selector is None:
                raise reader.fail(f"{path}.{name}", "must not be specified when labelSelector is not set")
            if name == "matchLabelKeys" and _selects_on(selector, key, labels):
                raise reader.fail(
                    f"{path}[{i}]", f"Invalid value: {go_value(key)}: exists in both {name} and labelSelector"
                )
            if key in labels:
                requirement = SelectorRequirement(key, operator, (labels[key],))
                if requirement not in selector.match_expressions:
                    added.append(requirement)
    if not added or selector is None:
        return selector
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *added))


def _affinity_terms(
    reader: ManifestReader, path: str, namespace: str, labels: Mapping[str, str]
) -> tuple[AffinityTerm, ...]:
    terms = []
    for at, item in reader.entries(path):
        topology = reader.field(at, item, "topologyKey")
        if not topology:
            raise reader.fail(f"{at}.topologyKey", "required: can not be empty")
        selector = label_selector(reader, f"{at}.labelSelector", item.get("labelSelector"))
        selector = _merged(reader, at, item, selector, labels)
        raw_namespaces = reader.sequence(f"{at}.namespaces", item.get("namespaces") or [])
        namespaces = frozenset(reader.string(f"{at}.namespaces[{i}]", n) for i, n in enumerate(raw_namespaces))
        namespace_selector = label_selector(reader, f"{at}.namespaceSelector", item.get("namespaceSelector"))
        if not namespaces and namespace_selector is None:
            namespaces = frozenset((namespace,))
        terms.append(AffinityTerm(selector, namespaces, namespace_selector, topology))
    return tuple(terms)


def _host_ports(reader: ManifestReader) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the sidecars (init containers with ``restartPolicy: Always``)."""
    found = []
    seen = set()
    for kind in ("containers", "initContainers"):
        for at, container in reader.entries(f"spec.{kind}"):
            if kind == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            for port_at, port in reader.entries(f"{at}.ports", container.get("ports") or []):
                host = reader.integer(f"{port_at}.hostPort", port.get("hostPort"))
                if not host:
                    continue
                if not 0 < host <= _MAX_PORT:
                    raise reader.fail(
                        f"{port_at}.hostPort", f"must be between 1 and {_MAX_PORT}, inclusive, got {host}"
                    )
                protocol = reader.field(port_at, port, "protocol", "TCP")
                if protocol not in _PROTOCOLS:
                    raise reader.fail(
                        f"{port_at}.protocol", f"must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}"
                    )
                if kind == "containers":  # AccumulateUniqueHostPorts over the regular containers
                    written = f"{protocol}/{reader.field(port_at, port, 'hostIP')}/{host}"
                    if written in seen:
                        raise reader.fail(f"{port_at}.hostPort", f"Duplicate value: {go_value(written)}")
                    seen.add(written)
                found.append(HostPort(host, protocol, reader.field(port_at, port, "hostIP", "0.0.0.0")))
    return tuple(found)


def _spread(reader: ManifestReader, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    kept = []
    pairs = set()
    for at, item in reader.entries("spec.topologySpreadConstraints"):
        skew = reader.integer(f"{at}.maxSkew", item.get("maxSkew"))
        if skew is None or skew < 1:
            raise reader.fail(f"{at}.maxSkew", f"must be greater than zero, got {skew!r}")
        topology = reader.field(at, item, "topologyKey")
        if not topology:
            raise reader.fail(f"{at}.topologyKey", "required: can not be empty")
        when = reader.field(at, item, "whenUnsatisfiable")
        if when not in _WHEN:
            raise reader.fail(f"{at}.whenUnsatisfiable", f"must be one of {', '.join(_WHEN)}, got {when!r}")
        if (topology, when) in pairs:
            raise reader.fail(f"{at}.{{topologyKey, whenUnsatisfiable}}", f'Duplicate value: "{{{topology}, {when}}}"')
        pairs.add((topology, when))
        minimum = reader.integer(f"{at}.minDomains", item.get("minDomains"))
        if minimum is not None and (minimum < 1 or when != "DoNotSchedule"):
            why = (
                "must be greater than zero"
                if minimum < 1
                else "can only be set when whenUnsatisfiable is DoNotSchedule"
            )
            raise reader.fail(f"{at}.minDomains", f"{why}, got {minimum}")
        policies = []
        for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
            policy = reader.field(at, item, name, default)
            if policy not in _POLICIES:
                raise reader.fail(f"{at}.{name}", f"must be Honor or Ignore, got {policy!r}")
            policies.append(policy == "Honor")
        selector = label_selector(reader, f"{at}.labelSelector", item.get("labelSelector"))
        selector = _merged(reader, at, {"matchLabelKeys": item.get("matchLabelKeys")}, selector, labels)
        if when == "DoNotSchedule":
            kept.append(SpreadConstraint(skew, topology, selector, minimum or 1, policies[0], policies[1]))
    return tuple(kept)


def _check_weights(reader: ManifestReader, affinity: Any) -> None:
    """Each preferred term's ``weight`` (node, pod and anti affinity) is 1 to 100, as the server requires (the terms
    only score, and are not read further)."""
    for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
        part = affinity.get(kind) if isinstance(affinity, Mapping) else None
        if not isinstance(part, Mapping) or not part.get(_PREFERRED):
            continue
        for at, term in reader.entries(f"spec.affinity.{kind}.{_PREFERRED}", part[_PREFERRED]):
            weight = reader.integer(f"{at}.weight", term.get("weight")) or 0
            if not 0 < weight <= _MAX_WEIGHT:
                raise reader.fail(f"{at}.weight", f"Invalid value: {weight}: must be in the range 1-{_MAX_WEIGHT}")


def pod_terms(reader: ManifestReader, namespace: str, labels: Mapping[str, str]) -> PodTerms | None:
    """The pod's :class:`PodTerms`, or None when it asks none of them."""
    affinity = reader.get("spec.affinity")
    if affinity:
        _check_weights(reader, affinity)
    affinity = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    anti = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms = PodTerms(
        _host_ports(reader),
        _affinity_terms(reader, affinity, namespace, labels),
        _affinity_terms(reader, anti, namespace, labels),
        _spread(reader, labels),
    )
    return None if terms.empty else terms


def selector_to_manifest(selector: LabelSelector) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    if selector.match_labels:
        raw["matchLabels"] = dict(selector.match_labels)
    if selector.match_expressions:
        raw["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in selector.match_expressions
        ]
    return raw


def _term_to_manifest(term: AffinityTerm) -> dict[str, Any]:
    raw: dict[str, Any] = {"topologyKey": term.topology_key}
    if term.selector is not None:
        raw["labelSelector"] = selector_to_manifest(term.selector)
    if term.namespaces:
        raw["namespaces"] = sorted(term.namespaces)
    if term.namespace_selector is not None:
        raw["namespaceSelector"] = selector_to_manifest(term.namespace_selector)
    return raw


def terms_to_manifest(terms: PodTerms, spec: dict[str, Any]) -> None:
    """Write ``terms`` into a pod's ``spec`` (its first container's ports, its affinity, its spread constraints), so
    that :func:`pod_terms` reads them back equal."""
    if terms.host_ports:
        spec["containers"][0]["ports"] = [
            {"containerPort": p.port, "hostPort": p.port, "protocol": p.protocol, "hostIP": p.host_ip}
            for p in terms.host_ports
        ]
    affinity = spec.setdefault("affinity", {})
    for name, kept in (("podAffinity", terms.affinity), ("podAntiAffinity", terms.anti_affinity)):
        if kept:
            required = [_term_to_manifest(term) for term in kept]
            affinity[name] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if not affinity:
        del spec["affinity"]
    if terms.spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": c.max_skew,
                "topologyKey": c.topology_key,
                "whenUnsatisfiable": "DoNotSchedule",
                "minDomains": c.min_domains,
                "nodeAffinityPolicy": "Honor" if c.honor_affinity else "Ignore",
                "nodeTaintsPolicy": "Honor" if c.honor_taints else "Ignore",
                **({"labelSelector": selector_to_manifest(c.selector)} if c.selector is not None else {}),
            }
            for c in terms.spread
        ]
