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
from typing import Any, Final, Protocol

from kubeflux.scheduler.objects import (
    AffinityTerm,
    HostPort,
    LabelSelector,
    PodTerms,
    SelectorRequirement,
    SpreadConstraint,
)


class _Reader(Protocol):
    """What is read of a manifest, each mismatch an error naming the field (``manifests``' reader)."""

    def fail(self, path: str, problem: str) -> Exception: ...
    def mapping(self, path: str, value: Any = None) -> Mapping[str, Any]: ...
    def sequence(self, path: str, value: Any = None) -> list[Any]: ...
    def entries(self, path: str, value: Any = None) -> list[tuple[str, Mapping[str, Any]]]: ...
    def field(self, path: str, item: Mapping[str, Any], name: str, default: str = "") -> str: ...
    def string(self, path: str, value: Any = None, default: str = "") -> str: ...
    def integer(self, path: str, value: Any = None) -> int | None: ...


__all__ = ["label_selector", "pod_terms", "selector_to_manifest", "terms_to_manifest"]

_PROTOCOLS: Final = ("TCP", "UDP", "SCTP")
_LABEL_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
_WHEN: Final = ("DoNotSchedule", "ScheduleAnyway")
_POLICIES: Final = ("Honor", "Ignore")
_MAX_PORT: Final = 65535


def label_selector(reader: _Reader, path: str, raw: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` at ``path`` (None when absent: it selects nothing)."""
    if raw is None:
        return None
    item = reader.mapping(path, raw)
    labels = []
    for key, value in reader.mapping(f"{path}.matchLabels", item.get("matchLabels") or {}).items():
        labels.append((reader.string(f"{path}.matchLabels", key), reader.string(f"{path}.matchLabels.{key}", value)))
    expressions = []
    for at, expression in reader.entries(f"{path}.matchExpressions", item.get("matchExpressions") or []):
        key = reader.field(at, expression, "key")
        operator = reader.field(at, expression, "operator")
        raw_values = reader.sequence(f"{at}.values", expression.get("values") or [])
        values = tuple(reader.string(f"{at}.values[{i}]", v) for i, v in enumerate(raw_values))
        if not key:
            raise reader.fail(f"{at}.key", "required")
        if operator not in _LABEL_OPERATORS:
            raise reader.fail(f"{at}.operator", f"must be one of {', '.join(_LABEL_OPERATORS)}, got {operator!r}")
        if operator in ("In", "NotIn") and not values:
            raise reader.fail(f"{at}.values", f"must be non-empty for operator {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise reader.fail(f"{at}.values", f"must be empty for operator {operator}")
        expressions.append(SelectorRequirement(key, operator, values))
    return LabelSelector(tuple(sorted(labels)), tuple(expressions))


def _merged(
    reader: _Reader, path: str, item: Mapping[str, Any], selector: LabelSelector | None, labels: Mapping[str, str]
) -> LabelSelector | None:
    """``selector`` with the pod's values of ``matchLabelKeys`` (``In``) and ``mismatchLabelKeys`` (``NotIn``)."""
    added = []
    for name, operator in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        for i, key in enumerate(reader.sequence(f"{path}.{name}", item.get(name) or [])):
            key = reader.string(f"{path}.{name}[{i}]", key)
            if selector is None:
                raise reader.fail(f"{path}.{name}", "must not be specified when labelSelector is not set")
            if key in labels:
                requirement = SelectorRequirement(key, operator, (labels[key],))
                if requirement not in selector.match_expressions:
                    added.append(requirement)
    if not added or selector is None:
        return selector
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *added))


def _affinity_terms(reader: _Reader, path: str, namespace: str, labels: Mapping[str, str]) -> tuple[AffinityTerm, ...]:
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


def _host_ports(reader: _Reader) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the sidecars (init containers with ``restartPolicy: Always``)."""
    found = []
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
                found.append(HostPort(host, protocol, reader.field(port_at, port, "hostIP", "0.0.0.0")))
    return tuple(found)


def _spread(reader: _Reader, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
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


def pod_terms(reader: _Reader, namespace: str, labels: Mapping[str, str]) -> PodTerms | None:
    """The pod's :class:`PodTerms`, or None when it asks none of them."""
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
