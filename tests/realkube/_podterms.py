"""Random pods with inter-pod terms and an independent checker of them, for the differential tests against the real
kube-scheduler (test_filter_differential.py, test_gang_differential.py): random selectors, affinity terms, spread
constraints and host ports (:func:`pod_doc`), a scheduler core told of a cluster as read from the API server
(:func:`informed`), and every constraint a placement breaks, checked from the API objects as the API reference and
the Kubernetes documentation define them (:func:`violations`)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from kubeflux.apiobjects.manifests import namespace_from_manifest, node_from_manifest, pod_from_manifest
from kubeflux.scheduler.interface import ClusterEvent, EventKind

from ._verdicts import HOST, RACK, ZONE

__all__ = [
    "APPS",
    "KEYS",
    "NAME_LABEL",
    "TEAMS",
    "host_ports",
    "informed",
    "millicores",
    "pod_doc",
    "scene",
    "violations",
]

KEYS = (HOST, ZONE, RACK)
APPS = ("a", "b", "c")
NAME_LABEL = "kubernetes.io/metadata.name"
TEAMS = ("x", "y")

# --- random clusters and pods -----------------------------------------------------------------------------------


def selector(rng: random.Random) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.6:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    if roll < 0.8:
        return {"matchExpressions": [{"key": "app", "operator": "In", "values": rng.sample(APPS, 2)}]}
    if roll < 0.9:
        return {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    return {}


def namespace_selector(rng: random.Random, namespaces: list[str]) -> dict[str, Any]:
    """Every namespace, one by the name label the API server gives it, or some by the labels the test gives."""
    return rng.choice(
        (
            {},
            {"matchLabels": {NAME_LABEL: rng.choice(namespaces)}},
            {"matchLabels": {"team": rng.choice(TEAMS)}},
            {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "team", "operator": "NotIn", "values": [rng.choice(TEAMS)]}]},
        )
    )


def affinity_term(rng: random.Random, namespaces: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": selector(rng), "topologyKey": rng.choice(KEYS)}
    roll = rng.random()
    if roll < 0.15:
        term["namespaces"] = [rng.choice(namespaces)]
    elif roll < 0.35:
        term["namespaceSelector"] = namespace_selector(rng, namespaces)
    elif roll < 0.4:  # both: the pods of either
        term["namespaces"] = [rng.choice(namespaces)]
        term["namespaceSelector"] = namespace_selector(rng, namespaces)
    if rng.random() < 0.1 and term["labelSelector"]:
        term["matchLabelKeys"] = ["rev"]
    return term


def container(rng: random.Random, cpu: str, ports: bool) -> dict[str, Any]:
    made: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.9"}
    if cpu != "0":
        made["resources"] = {"requests": {"cpu": cpu}}
    if ports:
        port: dict[str, Any] = {"containerPort": 80, "hostPort": rng.choice((8080, 9090))}
        if rng.random() < 0.3:
            port["hostIP"] = rng.choice(("10.0.0.1", "10.0.0.2"))
        if rng.random() < 0.2:
            port["protocol"] = "UDP"
        made["ports"] = [port]
    return made


def labels(rng: random.Random) -> dict[str, str]:
    made = {"app": rng.choice(APPS), "rev": rng.choice(("1", "2"))}
    if rng.random() < 0.4:
        made["tier"] = "t"
    return made


def pod_doc(
    rng: random.Random, name: str, namespaces: list[str], node: str | None, *, pending: bool
) -> tuple[str, dict[str, Any]]:
    """A pod in one of ``namespaces``: bound to ``node`` (existing) or pending with random constraints."""
    namespace = rng.choice(namespaces)
    cpu = rng.choice(("0", "0", "500m", "1", "1500m", "2", "3")) if pending else rng.choice(("0", "100m", "500m", "1"))
    spec: dict[str, Any] = {"containers": [container(rng, cpu, rng.random() < 0.25)]}
    affinity: dict[str, Any] = {}
    if node is not None:
        spec["nodeName"] = node
        if rng.random() < 0.3:
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(rng, namespaces)]
            }
    if pending:
        if rng.random() < 0.4:
            terms = [affinity_term(rng, namespaces) for _ in range(rng.choice((1, 1, 2)))]
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        if rng.random() < 0.4:
            terms = [affinity_term(rng, namespaces) for _ in range(rng.choice((1, 1, 2)))]
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        if rng.random() < 0.4:
            made = [spread(rng) for _ in range(rng.choice((1, 1, 2)))]
            unique = {(c["topologyKey"], c["whenUnsatisfiable"]): c for c in made}  # the API refuses a pair twice
            spec["topologySpreadConstraints"] = list(unique.values())
        if rng.random() < 0.2:
            spec["nodeSelector"] = {ZONE: rng.choice(("z0", "z1"))}
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    if affinity:
        spec["affinity"] = affinity
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels(rng)}, "spec": spec}
    return namespace, doc


def spread(rng: random.Random) -> dict[str, Any]:
    made: dict[str, Any] = {
        "maxSkew": rng.choice((1, 1, 2)),
        "topologyKey": rng.choice(KEYS),
        "whenUnsatisfiable": rng.choice(("DoNotSchedule", "DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
        "labelSelector": selector(rng),
    }
    if made["whenUnsatisfiable"] == "DoNotSchedule" and rng.random() < 0.2:
        made["minDomains"] = rng.choice((2, 3, 4))
    if rng.random() < 0.2:
        made["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.2:
        made["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.1 and made["labelSelector"]:
        made["matchLabelKeys"] = ["rev"]
    return made


def informed(
    scheduler: Any, nodes: list[dict[str, Any]], namespaces: list[dict[str, Any]], bound: list[dict[str, Any]]
) -> Any:
    """``scheduler`` told of the nodes, the namespaces and the bound pods, as read from the API server."""
    for node in nodes:
        scheduler.observe(ClusterEvent(EventKind.ADDED, node_from_manifest(node)), 0.0)
    for namespace in namespaces:
        scheduler.observe(ClusterEvent(EventKind.ADDED, namespace_from_manifest(namespace)), 0.0)
    for pod in bound:
        scheduler.observe(ClusterEvent(EventKind.ADDED, pod_from_manifest(pod)), 0.0)
    return scheduler


# --- the independent checker ------------------------------------------------------------------------------------


def _matches(selector_: dict[str, Any] | None, pod_labels: dict[str, str]) -> bool:
    if selector_ is None:
        return False
    for key, value in (selector_.get("matchLabels") or {}).items():
        if pod_labels.get(key) != value:
            return False
    for expression in selector_.get("matchExpressions") or []:
        value = pod_labels.get(expression["key"])
        operator, values = expression["operator"], expression.get("values") or []
        ok = {
            "In": value is not None and value in values,
            "NotIn": value is None or value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }[operator]
        if not ok:
            return False
    return True


def _term_pods(
    term: dict[str, Any],
    owner_ns: str,
    owner_labels: dict[str, str],
    pod: dict[str, Any],
    ns_labels: dict[str, dict[str, str]],
    incoming: bool = True,
) -> bool:
    """Whether ``pod`` is one of the pods ``term`` (of a pod in ``owner_ns``) names: the API reference's "a static
    list of namespace names [namespaces] … unioned with the namespaces selected by namespaceSelector … null
    namespaceSelector and null or empty namespaces list means 'this pod's namespace'; an empty selector ({})
    matches all namespaces" (``ns_labels``: each namespace's labels as the API server keeps them).

    One deviation of kube-scheduler v1.36 from that definition, measured on the real binary and followed here so
    that its own choices are not faulted: for the ``incoming`` pod's terms (not an existing pod's), a
    namespaceSelector that an unlabelled namespace passes (``NotIn``, ``DoesNotExist``) selects every namespace."""
    selector_ = term.get("labelSelector")
    if selector_ is not None and term.get("matchLabelKeys"):
        extra = [
            {"key": k, "operator": "In", "values": [owner_labels[k]]}
            for k in term["matchLabelKeys"]
            if k in owner_labels
        ]
        selector_ = {**selector_, "matchExpressions": [*(selector_.get("matchExpressions") or []), *extra]}
    namespace = pod["metadata"]["namespace"]
    names = term.get("namespaces") or []
    by_labels = term.get("namespaceSelector")
    if not names and by_labels is None:
        names = [owner_ns]
    selected = by_labels is not None and (
        _matches(by_labels, ns_labels[namespace]) or (incoming and _matches(by_labels, {}))
    )
    return (namespace in names or selected) and _matches(selector_, pod["metadata"].get("labels") or {})


def violations(
    node: dict[str, Any],
    nodes: list[dict[str, Any]],
    bound: list[dict[str, Any]],
    pending: dict[str, Any],
    ns_labels: dict[str, dict[str, str]],
) -> list[str]:
    """Every constraint of ``pending`` that placing it on ``node`` breaks, checked from the API objects."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    labels_of = {name: n["metadata"].get("labels") or {} for name, n in by_name.items()}
    here = node["metadata"]["name"]
    spec = pending["spec"]
    ns = pending["metadata"]["namespace"]
    own_labels = pending["metadata"].get("labels") or {}
    broken = []
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels_of[here].get(key) != value:
            broken.append("nodeSelector")
    tolerated = any(t.get("key") == "dedicated" for t in spec.get("tolerations") or [])
    if node["spec"].get("taints") and not tolerated:
        broken.append("taint")
    on_node = [p for p in bound if p["spec"]["nodeName"] == here]
    used = sum(millicores(p) for p in on_node)
    if used + millicores(pending) > int(node["status"]["allocatable"]["cpu"]) * 1000:
        broken.append("cpu")
    for want in host_ports(pending):
        for have in (port for p in on_node for port in host_ports(p)):
            if want[:2] == have[:2] and (want[2] == have[2] or "0.0.0.0" in (want[2], have[2])):
                broken.append(f"port {want}")
    affinity = spec.get("affinity") or {}
    required = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
    if required:

        def all_terms(p: dict[str, Any]) -> bool:
            return all(_term_pods(t, ns, own_labels, p, ns_labels) for t in required)

        anywhere = [
            p
            for p in bound
            if all_terms(p) and any(t["topologyKey"] in labels_of[p["spec"]["nodeName"]] for t in required)
        ]
        for term in required:
            key = term["topologyKey"]
            if key not in labels_of[here]:
                broken.append("affinity: no topology key")
                continue
            near = [
                p for p in bound if all_terms(p) and labels_of[p["spec"]["nodeName"]].get(key) == labels_of[here][key]
            ]
            if not near and (anywhere or not all_terms(pending)):
                broken.append(f"affinity {key}")
    for term in (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []:
        key = term["topologyKey"]
        if key in labels_of[here] and any(
            _term_pods(term, ns, own_labels, p, ns_labels)
            and labels_of[p["spec"]["nodeName"]].get(key) == labels_of[here][key]
            for p in bound
        ):
            broken.append(f"anti-affinity {key}")
    for p in bound:
        theirs = ((p["spec"].get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        where = labels_of[p["spec"]["nodeName"]]
        for term in theirs:
            key = term["topologyKey"]
            if (
                key in where
                and where.get(key) == labels_of[here].get(key)
                and _term_pods(
                    term, p["metadata"]["namespace"], p["metadata"].get("labels") or {}, pending, ns_labels, False
                )
            ):
                broken.append(f"existing anti-affinity {key}")
    for constraint in spec.get("topologySpreadConstraints") or []:
        if constraint["whenUnsatisfiable"] != "DoNotSchedule":
            continue
        broken += _spread_broken(constraint, spec, here, by_name, labels_of, bound, ns, own_labels)
    return broken


def _spread_broken(
    constraint: dict[str, Any],
    spec: dict[str, Any],
    here: str,
    by_name: dict[str, dict[str, Any]],
    labels_of: dict[str, dict[str, str]],
    bound: list[dict[str, Any]],
    ns: str,
    own_labels: dict[str, str],
) -> list[str]:
    """One ``whenUnsatisfiable: DoNotSchedule`` constraint as the Kubernetes documentation ("Pod Topology Spread
    Constraints" and the API reference of ``TopologySpreadConstraint``) states it, read from there and not from
    kube-scheduler's code:

    * "Nodes without any topologySpreadConstraints[*].topologyKey present will be bypassed": their pods do not count,
      and "the incoming Pod will not be scheduled into this kind of nodes";
    * ``nodeAffinityPolicy`` (Honor by default): "only nodes matching nodeAffinity/nodeSelector are included in the
      calculations"; ``nodeTaintsPolicy`` (Ignore by default), with Honor: "nodes without taints, along with tainted
      nodes for which the incoming pod has a toleration, are included";
    * ``labelSelector`` "is used to find matching Pods … counted to determine the number of Pods in their
      corresponding topology domain" (pods of the incoming pod's namespace), ``matchLabelKeys`` adding the incoming
      pod's values ("ANDed with labelSelector");
    * ``maxSkew`` is "the maximum permitted difference between the number of matching pods in the target topology and
      the global minimum (the minimum number of matching pods in an eligible domain or zero if the number of
      eligible domains is less than minDomains)"; the target counts the incoming pod when it matches (the
      documentation's example: "if the incoming Pod is placed in zoneA … the skew becomes 3-0=3").

    One rule is not in the documentation: an empty ``labelSelector`` ({}) counts no existing pod in kube-scheduler
    (kept, so that the checker does not fault kube-scheduler's own choices)."""
    key = constraint["topologyKey"]
    own_keys = {
        c["topologyKey"] for c in spec["topologySpreadConstraints"] if c["whenUnsatisfiable"] == "DoNotSchedule"
    }
    if not own_keys <= labels_of[here].keys():
        return ["spread: no topology key"]
    wanted = constraint.get("labelSelector")
    counts_none = wanted == {}  # see above
    pinned = [k for k in constraint.get("matchLabelKeys") or [] if k in own_labels]
    if wanted is not None and pinned:
        wanted = {
            **wanted,
            "matchExpressions": [
                *(wanted.get("matchExpressions") or []),
                *({"key": k, "operator": "In", "values": [own_labels[k]]} for k in pinned),
            ],
        }
    tolerates = {t.get("key") for t in spec.get("tolerations") or []}

    def eligible(name: str) -> bool:
        node_labels = labels_of[name]
        if not own_keys <= node_labels.keys():
            return False
        if constraint.get("nodeAffinityPolicy") in (None, "Honor") and any(
            node_labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()
        ):
            return False
        taints = by_name[name]["spec"].get("taints") or []
        return not (constraint.get("nodeTaintsPolicy") == "Honor" and any(t["key"] not in tolerates for t in taints))

    matching_pods: Counter[str] = Counter({labels_of[name][key]: 0 for name in by_name if eligible(name)})
    if wanted is not None and not counts_none:
        for p in bound:
            where = p["spec"]["nodeName"]
            if (
                p["metadata"]["namespace"] == ns
                and eligible(where)
                and _matches(wanted, p["metadata"].get("labels") or {})
            ):
                matching_pods[labels_of[where][key]] += 1
    eligible_domains = len(matching_pods)
    global_minimum = min(matching_pods.values(), default=0)
    if eligible_domains < constraint.get("minDomains", 1):
        global_minimum = 0
    target = matching_pods[labels_of[here][key]] + (1 if _matches(wanted, own_labels) else 0)
    return [f"spread {key}"] if target - global_minimum > constraint["maxSkew"] else []


def scene(
    nodes: list[dict[str, Any]], bound: list[dict[str, Any]], ns_labels: dict[str, dict[str, str]], pod: dict[str, Any]
) -> str:
    """What a disagreement was about: the nodes, the bound pods, the namespaces and the pod's labels, in short."""
    shown = [f"pod labels {pod['metadata'].get('labels')}", f"namespaces {ns_labels}"]
    for node in nodes:
        name = node["metadata"]["name"]
        here = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']} {p['metadata'].get('labels')}"
            for p in bound
            if p["spec"]["nodeName"] == name
        ]
        shown.append(f"{name} {node['metadata'].get('labels')} taints {node['spec'].get('taints')}: {here}")
    return "\n  ".join(shown)


def millicores(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod["spec"]["containers"]:
        cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")
        total += int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return total


def host_ports(pod: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [
        (p["hostPort"], p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0")
        for c in pod["spec"]["containers"]
        for p in c.get("ports") or []
        if p.get("hostPort")
    ]
