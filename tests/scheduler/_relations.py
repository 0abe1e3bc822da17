"""Gang members that constrain each other, for the core's and the simulator's tests: their constraints as manifest
fields, and an independent checker of a gang's placement in the order its members were bound (written from the API's
definitions, not from the scheduler's filters)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubeflux.scheduler.topology import ZONE_LEVEL

SPECS: dict[str, dict[str, Any]] = {}
"""Pod name → the constraints a test gave it (:func:`remember`), as the checker reads them."""


def spread(app: str = "mpi", skew: int = 1, key: str = ZONE_LEVEL, **more: Any) -> dict[str, Any]:
    """A pod spec's ``DoNotSchedule`` topology spread over ``key`` of the pods labelled ``app``."""
    constraint = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
        **more,
    }
    return {"topologySpreadConstraints": [constraint]}


def affinity(app: str = "mpi", key: str = ZONE_LEVEL) -> dict[str, Any]:
    """A pod spec's required pod affinity to the pods labelled ``app`` on ``key``."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def remember(name: str, spec: Mapping[str, Any]) -> None:
    """Keep the spread and pod affinity of pod ``name``'s ``spec`` for the checker."""
    kept: dict[str, Any] = {}
    if "topologySpreadConstraints" in spec:
        kept["topologySpreadConstraints"] = spec["topologySpreadConstraints"]
    if "affinity" in spec:
        kept["podAffinity"] = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    SPECS[name] = kept


def _selected(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def check_bind_order(
    node_labels: Mapping[str, Mapping[str, str]],
    pod_labels: Mapping[str, Mapping[str, str]],
    specs: Mapping[str, Mapping[str, Any]],
    order: Iterable[tuple[str, str]],
    before: Mapping[str, str],
) -> None:
    """Each pod of ``order`` (pod key, node), bound in that order beside the pods ``before`` (pod key → node), keeps
    its required pod affinity and its ``DoNotSchedule`` spread constraints (``specs``, by pod key), as kube-scheduler
    v1.36 checks them with the default node inclusion policies and nodes without taints: every node carrying the
    key counts, and the least count is 0 while fewer domains than ``minDomains`` exist."""
    placed = dict(before)
    for key, where in order:
        labels = node_labels[where]
        body = specs.get(key, {})
        for constraint in body.get("topologySpreadConstraints", []):
            topology = constraint["topologyKey"]
            assert topology in labels, f"{key} on {where}: no {topology}"
            counts = {n[topology]: 0 for n in node_labels.values() if topology in n}
            for other, other_node in placed.items():
                if _selected(constraint["labelSelector"], pod_labels[other]) and topology in node_labels[other_node]:
                    counts[node_labels[other_node][topology]] += 1
            least = min(counts.values()) if len(counts) >= constraint.get("minDomains", 1) else 0
            mine = counts[labels[topology]] + (1 if _selected(constraint["labelSelector"], pod_labels[key]) else 0)
            assert mine - least <= constraint["maxSkew"], f"{key} on {where}: skew {mine} - {least} ({counts})"
        for term in body.get("podAffinity", []):
            topology = term["topologyKey"]
            matching = [n for k, n in placed.items() if _selected(term["labelSelector"], pod_labels[k])]
            if not matching:
                assert _selected(term["labelSelector"], pod_labels[key]), f"{key}: affinity to no pod"
                continue
            domains = {node_labels[n].get(topology) for n in matching}
            assert labels.get(topology) in domains, f"{key} on {where}: no affine pod in its {topology}"
        placed[key] = where
