"""The placement filters kube-scheduler applies, as pure functions over :class:`Pod` and :class:`Node`.

Each filter returns None when the node passes, or the reason exactly as kube-scheduler words it, so that
:func:`fit_error_message` builds the same ``FailedScheduling`` message a user sees from ``kubectl describe pod``::

    0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s).

The filters, in the order of kube-scheduler's default profile (a node stops at its first failing plugin):

1. **NodeUnschedulable** — a cordoned node, unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``.
2. **TaintToleration** — every ``NoSchedule``/``NoExecute`` taint must be tolerated (``PreferNoSchedule`` only
   scores). A node whose ``Ready`` condition is not True carries the ``node.kubernetes.io/not-ready:NoSchedule``
   taint the node lifecycle controller adds (``TaintNodesByCondition``); kube-scheduler has no Ready check of its
   own, so a not-ready node is reported as that untolerated taint.
3. **NodeAffinity** — ``nodeSelector`` and required node affinity (terms ORed, requirements ANDed).
4. **NodeResourcesFit** — the pod count, then cpu, memory, ephemeral-storage and every other requested
   resource: request + already requested ≤ allocatable. One node may give several reasons.

``used`` maps a node name to the requests already placed on it (the sum of its pods' effective requests) and the
number of those pods under ``pods``. A node with no ``pods`` entry in ``allocatable`` is not limited in pod count
(Kubernetes nodes always report one, 110 by default; hand-built test nodes often do not).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from kubeflux.scheduler.objects import (
    CPU,
    MEMORY,
    PODS,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    ResourceList,
    Taint,
    Toleration,
)

__all__ = [
    "EPHEMERAL_STORAGE",
    "NOT_READY_TAINT",
    "NO_NODES_MESSAGE",
    "REASON_NODE_AFFINITY",
    "REASON_TOO_MANY_PODS",
    "REASON_UNSCHEDULABLE",
    "REASON_UNTOLERATED",
    "UNSCHEDULABLE_TAINT_KEY",
    "feasible_nodes",
    "filter_node",
    "fit_error_message",
    "insufficient_resources",
    "matches_node_selector",
    "matches_terms",
    "never_fits",
    "node_affinity",
    "node_resources_fit",
    "node_taints",
    "node_unschedulable",
    "static_filter",
    "taint_toleration",
    "toleration_tolerates",
    "untolerated_taint",
]

EPHEMERAL_STORAGE: Final = "ephemeral-storage"
UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = Taint(key="node.kubernetes.io/not-ready", value="", effect="NoSchedule")

REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
REASON_UNTOLERATED: Final = "node(s) had untolerated taint(s)"
REASON_NODE_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS: Final = "Too many pods"
NO_NODES_MESSAGE: Final = "no nodes available to schedule pods"
"""kube-scheduler's ``ErrNoNodesAvailable``, used when the cluster has no node at all."""

_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
_FIXED_ORDER = (CPU, MEMORY, EPHEMERAL_STORAGE)


# --- TaintToleration and NodeUnschedulable ----------------------------------------------------------------


def toleration_tolerates(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: empty effect matches every effect, empty key (with ``Exists``) every key."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], effects: Sequence[str] = _FILTERED_EFFECTS
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect in effects and not any(toleration_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_taints(node: Node) -> tuple[Taint, ...]:
    """The node's taints, plus the not-ready taint the node lifecycle controller adds to a node not Ready."""
    if node.ready or any(t.key == NOT_READY_TAINT.key and t.effect == "NoSchedule" for t in node.taints):
        return node.taints
    return (*node.taints, NOT_READY_TAINT)


def node_unschedulable(pod: Pod, node: Node) -> str | None:
    """NodeUnschedulable: a cordoned node takes only pods tolerating the ``unschedulable`` taint."""
    if not node.unschedulable:
        return None
    taint = Taint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule")
    if any(toleration_tolerates(t, taint) for t in pod.tolerations):
        return None
    return REASON_UNSCHEDULABLE


def taint_toleration(pod: Pod, node: Node) -> str | None:
    """TaintToleration filter: ``node(s) had untolerated taint(s)`` when a taint is not tolerated (kube-scheduler
    v1.36's words; before it named the first such taint, ``{key: value}``, which a user of the pod need not see)."""
    if untolerated_taint(node_taints(node), pod.tolerations) is None:
        return None
    return REASON_UNTOLERATED


# --- NodeAffinity -----------------------------------------------------------------------------------------


def _requirement_matches(requirement: NodeSelectorRequirement, value: str | None) -> bool:
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        if value is None or len(requirement.values) != 1:
            return False
        try:
            actual, bound = int(value), int(requirement.values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def _term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False  # an empty term matches no node
    for requirement in term.match_expressions:
        if not _requirement_matches(requirement, node.labels.get(requirement.key)):
            return False
    for requirement in term.match_fields:
        value = node.name if requirement.key == "metadata.name" else None
        if not _requirement_matches(requirement, value):
            return False
    return True


def matches_terms(terms: Iterable[NodeSelectorTerm], node: Node) -> bool:
    """Whether ``node`` matches any of ``terms`` (``MatchNodeSelectorTerms``: an empty term matches no node)."""
    return any(_term_matches(term, node) for term in terms)


def matches_node_selector(pod: Pod, node: Node) -> bool:
    """``nodeSelector`` (every label equal) and required node affinity (any term matches)."""
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    if pod.required_node_affinity:
        return matches_terms(pod.required_node_affinity, node)
    return True


def node_affinity(pod: Pod, node: Node) -> str | None:
    """NodeAffinity filter."""
    return None if matches_node_selector(pod, node) else REASON_NODE_AFFINITY


def static_filter(pod: Pod, node: Node) -> str | None:
    """The filters that do not depend on the node's usage, in kube-scheduler's order; the first reason."""
    return node_unschedulable(pod, node) or taint_toleration(pod, node) or node_affinity(pod, node)


# --- NodeResourcesFit -------------------------------------------------------------------------------------


def insufficient_resources(requests: ResourceList, allocatable: ResourceList, used: ResourceList) -> list[str]:
    """``fitsRequest``: the reasons ``requests`` does not fit beside ``used`` within ``allocatable``.

    Order as kube-scheduler reports them: ``Too many pods``, cpu, memory, ephemeral-storage, then the other
    (extended) resources sorted by name.
    """
    reasons: list[str] = []
    if PODS in allocatable and used.get(PODS, 0) + 1 > allocatable[PODS]:
        reasons.append(REASON_TOO_MANY_PODS)
    for name, reason in _checked_in_order(requests):
        amount = requests[name]
        if amount > 0 and amount > allocatable.get(name, 0) - used.get(name, 0):
            reasons.append(reason)
    return reasons


_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
"""The resources of a request, in :func:`insufficient_resources`' order with their reason, by the request's
names (asked for every node and pod a pass looks at; at most :data:`_ORDERS_KEPT` kept)."""
_ORDERS_KEPT = 1024


def _checked_in_order(requests: ResourceList) -> tuple[tuple[str, str], ...]:
    key = tuple(requests)
    order = _ORDERS.get(key)
    if order is None:
        names = [name for name in _FIXED_ORDER if name in requests]
        names += sorted(name for name in requests if name not in _FIXED_ORDER and name != PODS)
        order = tuple((name, f"Insufficient {name}") for name in names)
        if len(_ORDERS) >= _ORDERS_KEPT:
            _ORDERS.clear()
        _ORDERS[key] = order
    return order


def node_resources_fit(pod: Pod, node: Node, used: ResourceList) -> list[str]:
    """NodeResourcesFit filter for one node; an empty list when the pod fits."""
    return insufficient_resources(pod.requests, node.allocatable, used)


def filter_node(pod: Pod, node: Node, used: ResourceList | None = None) -> list[str]:
    """All filters for one node, stopping at the first failing plugin as kube-scheduler does; [] if it fits."""
    reason = static_filter(pod, node)
    if reason is not None:
        return [reason]
    return node_resources_fit(pod, node, used or {})


# --- messages and helpers ---------------------------------------------------------------------------------


def fit_error_message(
    num_nodes: int,
    reasons: Mapping[str, int] | Iterable[str],
    *,
    pre_filter_message: str = "",
    post_filter_message: str = "",
) -> str:
    """kube-scheduler's ``FitError.Error()``: ``0/N nodes are available: <count> <reason>, ….``

    ``reasons`` is either a count per reason or every node's reasons in any order (counted here). The entries
    are sorted as strings (``"10 X"`` before ``"2 Y"``), as Go's ``sort.Strings`` sorts them. A PreFilter
    failure replaces the per-node reasons; a PostFilter message is appended after them.
    """
    if num_nodes == 0 and not pre_filter_message:
        return NO_NODES_MESSAGE
    message = f"0/{num_nodes} nodes are available:"
    if pre_filter_message:
        message += f" {pre_filter_message}."
    else:
        counts = reasons if isinstance(reasons, Mapping) else Counter(reasons)
        histogram = sorted(f"{count} {reason}" for reason, count in counts.items() if count > 0)
        if histogram:
            message += f" {', '.join(histogram)}."
    if post_filter_message:
        message += f" {post_filter_message}"
    return message


def feasible_nodes(pod: Pod, nodes: Iterable[Node], used: Mapping[str, ResourceList] | None = None) -> list[Node]:
    """The nodes that pass every filter for ``pod``, in the given order."""
    used = used or {}
    return [node for node in nodes if not filter_node(pod, node, used.get(node.name, {}))]


def never_fits(pod: Pod, nodes: Sequence[Node]) -> str | None:
    """None when some node could host ``pod`` once empty; otherwise why no node ever can.

    The message is kube-scheduler's, computed against empty nodes, followed by a sentence saying so:
    ``0/2 nodes are available: 2 Insufficient nvidia.com/gpu. No node could ever host the pod, even empty.``
    """
    reasons: Counter[str] = Counter()
    for node in nodes:
        failed = filter_node(pod, node, {})
        if not failed:
            return None
        reasons.update(failed)
    return fit_error_message(len(nodes), reasons, post_filter_message="No node could ever host the pod, even empty.")
