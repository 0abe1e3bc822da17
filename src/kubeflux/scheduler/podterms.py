"""kube-scheduler's filters that look at the pods already on the nodes: NodePorts, PodTopologySpread (its
``DoNotSchedule`` constraints) and InterPodAffinity (required affinity and anti-affinity, the incoming pod's and, by
symmetry, every existing pod's anti-affinity against the incoming pod).

Shared by the scheduler core (:mod:`kubeflux.scheduler.filtering`) and the simulator's kube-default baseline, as pure
functions over :class:`~kubeflux.scheduler.objects.Pod`, :class:`~kubeflux.scheduler.objects.Node` and a
:class:`PodsByNode` (every bound pod of every scheduler, by node). Semantics as kube-scheduler v1.36 defines them
(``pkg/scheduler/framework/plugins/{nodeports,podtopologyspread,interpodaffinity}``):

* **NodePorts**: a wanted ``hostPort`` conflicts with one in use on the node with the same protocol and port, on
  the same host IP or where either is ``0.0.0.0``;
* **PodTopologySpread**: per constraint, the node must carry the topology key (else ``… (missing required
  label)``); the matching pods of the pod's namespace (not terminating) are counted per domain over the nodes that
  carry every constraint's key and pass the inclusion policies (node affinity honoured, taints ignored, by default);
  ``count(domain) + self − min(count) > maxSkew`` fails, with ``min`` taken as 0 when fewer domains than
  ``minDomains`` exist. The cluster default constraints of v1.36 are ``ScheduleAnyway`` only: they never filter;
* **InterPodAffinity**: the node must lie, for every affinity term, in a domain with a pod matching *all* the terms
  (unless no such pod exists anywhere and the pod matches its own terms: the first of a set), in no domain of a pod
  matching an anti-affinity term, and in no domain of an existing pod whose anti-affinity term matches the pod.

Order, as in kube-scheduler's default profile (a node reports its first failing plugin): NodePorts before
NodeResourcesFit, PodTopologySpread and InterPodAffinity after it (:func:`early_reasons`, :func:`late_reasons`).
kube-scheduler's NodeName filter has no counterpart: a pod that names its node (``spec.nodeName``) is bound, and
no scheduler is given it (the shells and the simulator count it on its node).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple, TypeVar

from kubeflux.scheduler.constraints import matches_node_selector, untolerated_taint
from kubeflux.scheduler.objects import AffinityTerm, HostPort, Node, Pod, PodTerms, SpreadConstraint

__all__ = [
    "ANY_IP",
    "HOSTNAME_LABEL",
    "NAMESPACE_NAME_LABEL",
    "REASON_AFFINITY",
    "REASON_ANTI_AFFINITY",
    "REASON_EXISTING_ANTI_AFFINITY",
    "REASON_PORTS",
    "REASON_SPREAD",
    "REASON_SPREAD_LABEL",
    "LabelledPods",
    "PodsByNode",
    "affinity_held",
    "constrained",
    "early_reasons",
    "late_reasons",
    "node_counted",
    "ports_conflict",
    "spread_counts",
]

REASON_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"
REASON_SPREAD: Final = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL: Final = REASON_SPREAD + " (missing required label)"
REASON_AFFINITY: Final = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY: Final = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
"""The label the API server sets on every namespace, its name as value."""
_K = TypeVar("_K")
_LOG_LIMIT: Final = 100_000
ANY_IP: Final = "0.0.0.0"
"""kube-scheduler's DefaultBindAllHostIP: a port on it conflicts with the same port on any address."""


@dataclass(slots=True)
class LabelledPods:
    """The bound pods of one namespace with the same labels (and terminating or not): where they are, counted per
    node. Pods of a workload share their labels, so a filter matches a selector once per group, not once per pod."""

    namespace: str
    labels: dict[str, str]
    deleted: bool
    nodes: dict[str, int] = field(default_factory=dict)


class PodsByNode:
    """Every bound pod of every scheduler, by node (kube-scheduler's ``NodeInfo.Pods``), grouped by namespace and
    labels, with the required anti-affinity terms of the pods that carry them (they apply to every incoming pod), and
    the namespaces' labels.

    Kept lazily: :meth:`add` and :meth:`remove` note the pod (a pod placed costs a dict write, whatever the cluster:
    :data:`_LOG_LIMIT`), and the groups are brought up to date by :meth:`settle` when a filter reads them."""

    def __init__(self) -> None:
        self.bound: dict[str, Pod] = {}
        """Pod uid → the pod, for every bound pod (kept at once; a scheduler's one record of them)."""
        self.node_of: dict[str, str] = {}
        """Pod uid → its node (kept at once)."""
        self.holders: set[str] = set()
        """The uids of the bound pods with required anti-affinity (kept at once: it says whether any pod needs the
        filters)."""
        self.ports: dict[str, dict[HostPort, int]] = {}
        """Node name → the host ports its pods use, counted (settled)."""
        self.groups: dict[tuple[str, frozenset[tuple[str, str]], bool], LabelledPods] = {}
        """(namespace, labels, terminating) → the group of such pods (settled)."""
        self.anti: dict[AffinityTerm, dict[str, int]] = {}
        """Each required anti-affinity term of a bound pod → the nodes of the pods that carry it, counted (settled)."""
        self._held: dict[str, _Counted] = {}
        self._log: list[str] = []
        self._stale = False
        self.namespace_labels: dict[str, dict[str, str]] = {}
        """Namespace → its labels, for namespace selectors (:meth:`labels_of`)."""
        self.version = 0
        """Changes whenever a pod is added or removed."""

    def labels_of(self, namespace: str) -> Mapping[str, str]:
        """``namespace``'s labels for a namespace selector: those known (:meth:`namespace`), else the one the API
        server gives every namespace (``kubernetes.io/metadata.name: <name>``: a shell that watches no Namespaces)."""
        known = self.namespace_labels.get(namespace)
        return known if known is not None else {NAMESPACE_NAME_LABEL: namespace}

    def namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        """Namespace ``name`` is labelled ``labels`` (None: it is gone)."""
        if labels is None:
            self.namespace_labels.pop(name, None)
        else:
            self.namespace_labels[name] = dict(labels)
        self.version += 1

    def add(self, uid: str, pod: Pod, node: str) -> None:
        """Pod ``uid`` is bound to ``node`` (again, or as a new object)."""
        self.bound[uid] = pod
        self.node_of[uid] = node
        terms = pod.terms
        if terms is not None and terms.anti_affinity:
            self.holders.add(uid)
        elif self.holders:
            self.holders.discard(uid)
        self.version += 1
        log = self._log
        log.append(uid)
        if len(log) > _LOG_LIMIT:  # nothing read them for long: rebuilt whole when something does
            self._log = []
            self._stale = True

    def remove(self, uid: str) -> None:
        if self.bound.pop(uid, None) is not None:
            del self.node_of[uid]
            if self.holders:
                self.holders.discard(uid)
            self.version += 1
            self._log.append(uid)

    def settle(self) -> None:
        """Bring :attr:`ports`, :attr:`groups` and :attr:`anti` up to date with the pods noted since."""
        if self._stale:
            self._stale = False
            self._log = []
            self.ports, self.groups, self.anti, self._held = {}, {}, {}, {}
            for uid, pod in self.bound.items():
                self._count(uid, pod, self.node_of[uid])
            return
        log = self._log
        if not log:
            return
        self._log = []
        for uid in dict.fromkeys(log):
            self._uncount(uid)
            found = self.bound.get(uid)
            if found is not None:
                self._count(uid, found, self.node_of[uid])

    def _count(self, uid: str, pod: Pod, node: str) -> None:
        key = (pod.namespace, frozenset(pod.labels.items()), pod.deleted)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = LabelledPods(pod.namespace, dict(pod.labels), pod.deleted)
        group.nodes[node] = group.nodes.get(node, 0) + 1
        terms = pod.terms
        anti = terms.anti_affinity if terms is not None else ()
        for term in anti:
            holders = self.anti.setdefault(term, {})
            holders[node] = holders.get(node, 0) + 1
        ports = terms.host_ports if terms is not None else ()
        if ports:
            used = self.ports.setdefault(node, {})
            for port in ports:
                used[port] = used.get(port, 0) + 1
        self._held[uid] = _Counted(node, key, anti, ports)

    def _uncount(self, uid: str) -> None:
        held = self._held.pop(uid, None)
        if held is None:
            return
        node, key, anti, ports = held
        if ports:
            used = self.ports[node]
            for port in ports:
                _uncount(used, port)
            if not used:
                del self.ports[node]
        group = self.groups[key]
        _uncount(group.nodes, node)
        if not group.nodes:
            del self.groups[key]
        for term in anti:
            holders = self.anti[term]
            _uncount(holders, node)
            if not holders:
                del self.anti[term]


class _Counted(NamedTuple):
    """Where a bound pod is counted in :class:`PodsByNode`'s settled maps."""

    node: str
    group: tuple[str, frozenset[tuple[str, str]], bool]
    anti: tuple[AffinityTerm, ...]
    ports: tuple[HostPort, ...]


def _uncount(counts: dict[_K, int], key: _K) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def constrained(pod: Pod, pods: PodsByNode) -> bool:
    """Whether any of these filters may fail a node for ``pod``: it asks something of the pods around it, or some
    bound pod has anti-affinity (which may be against it). False for most pods: nothing to do."""
    return pod.terms is not None or bool(pods.holders)


# --- NodePorts -------------------------------------------------------------------------------------------------


def ports_conflict(wanted: Iterable[HostPort], used: Iterable[HostPort]) -> bool:
    """Whether a wanted host port is in use: same protocol and port, on the same address or where either is
    ``0.0.0.0`` (``HostPortInfo.CheckConflict``)."""
    taken = list(used)
    for want in wanted:
        for have in taken:
            if (
                want.port == have.port
                and want.protocol == have.protocol
                and (want.host_ip == have.host_ip or ANY_IP in (want.host_ip, have.host_ip))
            ):
                return True
    return False


def early_reasons(pod: Pod, candidates: Iterable[str], nodes: Mapping[str, Node], pods: PodsByNode) -> dict[str, str]:
    """NodePorts' reason for each of ``candidates`` (nodes that passed the filters before them) that fails it."""
    terms = pod.terms
    wanted = terms.host_ports if terms is not None else ()
    failed: dict[str, str] = {}
    if not wanted:
        return failed
    pods.settle()
    for name in candidates:
        if name in nodes and ports_conflict(wanted, pods.ports.get(name, ())):
            failed[name] = REASON_PORTS
    return failed


# --- PodTopologySpread ------------------------------------------------------------------------------------------


def node_counted(constraint: SpreadConstraint, pod: Pod, node: Node) -> bool:
    """Whether ``node``'s pods count for ``constraint`` of ``pod`` (the node inclusion policies)."""
    if constraint.honor_affinity and not matches_node_selector(pod, node):
        return False
    return not (constraint.honor_taints and untolerated_taint(node.taints, pod.tolerations) is not None)


def _spread_counts(
    pod: Pod, spread: tuple[SpreadConstraint, ...], nodes: Mapping[str, Node], pods: PodsByNode
) -> list[dict[str, int]]:
    """Per constraint, the matching pods of ``pod``'s namespace (not terminating) per domain of the nodes that
    count."""
    per_node: list[dict[str, int]] = []
    for constraint in spread:
        found: dict[str, int] = {}
        selector = constraint.selector
        if selector is not None and not selector.empty:  # an empty selector counts no pod (countPodsMatchSelector)
            for group in pods.groups.values():
                if group.namespace == pod.namespace and not group.deleted and selector.matches(group.labels):
                    for name, count in group.nodes.items():
                        found[name] = found.get(name, 0) + count
        per_node.append(found)
    counts: list[dict[str, int]] = [{} for _ in spread]
    keys = [constraint.topology_key for constraint in spread]
    for name, node in nodes.items():
        labels = node.labels
        if any(key not in labels for key in keys):
            continue
        for i, constraint in enumerate(spread):
            if node_counted(constraint, pod, node):
                domain = labels[constraint.topology_key]
                counts[i][domain] = counts[i].get(domain, 0) + per_node[i].get(name, 0)
    return counts


def spread_counts(pod: Pod, nodes: Mapping[str, Node], pods: PodsByNode) -> list[dict[str, int]]:
    """Per ``DoNotSchedule`` constraint of ``pod``, the matching pods per domain of the nodes that count (every such
    domain, those with none at 0), as PodTopologySpread's PreFilter counts them."""
    pods.settle()
    terms = pod.terms
    return _spread_counts(pod, terms.spread, nodes, pods) if terms is not None and terms.spread else []


def affinity_held(members: Iterable[Pod], nodes: Mapping[str, Node], pods: PodsByNode) -> set[bool]:
    """For each of ``members`` with required pod affinity (alike ones asked once), whether a pod matching all its
    terms runs on a node carrying their keys: then kube-scheduler's first-pod rule no longer applies, and the member
    may go to any domain holding one (and only there), whatever the pods bound beside it add. ``{True}``: so for
    every such member; empty when none has affinity."""
    asked = {
        (pod.namespace, pod.terms.affinity): pod for pod in members if pod.terms is not None and pod.terms.affinity
    }
    if not asked:
        return set()
    pods.settle()
    return {bool(_AffinityCounts(pod, pod.terms, nodes, pods).affinity) for pod in asked.values()}


def _spread_reason(
    pod: Pod, node: Node, spread: tuple[SpreadConstraint, ...], counts: list[dict[str, int]]
) -> str | None:
    for i, constraint in enumerate(spread):
        domain = node.labels.get(constraint.topology_key)
        if domain is None:
            return REASON_SPREAD_LABEL
        domains = counts[i]
        least = min(domains.values()) if domains else 1 << 31
        if len(domains) < constraint.min_domains:
            least = 0
        selector = constraint.selector
        self_match = 1 if selector is not None and selector.matches(pod.labels) else 0
        if domains.get(domain, 0) + self_match - least > constraint.max_skew:
            return REASON_SPREAD
    return None


# --- InterPodAffinity -------------------------------------------------------------------------------------------


def _pairs(key: str, where: Iterable[str], nodes: Mapping[str, Node], into: set[tuple[str, str]]) -> None:
    """Add the (``key``, value) pair of each node of ``where`` that carries ``key``."""
    for name in where:
        node = nodes.get(name)
        if node is not None:
            value = node.labels.get(key)
            if value is not None:
                into.add((key, value))


class _AffinityCounts:
    """kube-scheduler's PreFilter state of InterPodAffinity for one incoming pod: the topology pairs (key, value)
    holding a pod that matches all its affinity terms, one matching an anti-affinity term, and one whose own
    anti-affinity matches it."""

    def __init__(self, pod: Pod, terms: PodTerms | None, nodes: Mapping[str, Node], pods: PodsByNode) -> None:
        self.affinity: set[tuple[str, str]] = set()
        self.anti: set[tuple[str, str]] = set()
        self.existing: set[tuple[str, str]] = set()
        own_labels = self.own_labels = pods.labels_of(pod.namespace)
        for term, holders in pods.anti.items():
            if term.matches(pod, own_labels):
                _pairs(term.topology_key, holders, nodes, self.existing)
        affinity = terms.affinity if terms is not None else ()
        anti = terms.anti_affinity if terms is not None else ()
        if not affinity and not anti:
            return
        for group in pods.groups.values():
            group_ns = pods.labels_of(group.namespace)
            if affinity and all(_own_term_selects(term, group.namespace, group.labels, group_ns) for term in affinity):
                for term in affinity:
                    _pairs(term.topology_key, group.nodes, nodes, self.affinity)
            for term in anti:
                if _own_term_selects(term, group.namespace, group.labels, group_ns):
                    _pairs(term.topology_key, group.nodes, nodes, self.anti)

    def reason(self, pod: Pod, terms: PodTerms | None, node: Node) -> str | None:
        labels = node.labels
        if terms is not None and terms.affinity:
            every = True
            for term in terms.affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    return REASON_AFFINITY
                if (term.topology_key, value) not in self.affinity:
                    every = False
            if not every and (self.affinity or not _matches_all(terms.affinity, pod, self.own_labels)):
                return REASON_AFFINITY
        if terms is not None and self.anti:
            for term in terms.anti_affinity:
                value = labels.get(term.topology_key)
                if value is not None and (term.topology_key, value) in self.anti:
                    return REASON_ANTI_AFFINITY
        if self.existing and any(pair in self.existing for pair in labels.items()):
            return REASON_EXISTING_ANTI_AFFINITY
        return None


def _matches_all(terms: tuple[AffinityTerm, ...], pod: Pod, namespace_labels: Mapping[str, str] | None) -> bool:
    return bool(terms) and all(_own_term_selects(term, pod.namespace, pod.labels, namespace_labels) for term in terms)


_UNLABELLED: Final[Mapping[str, str]] = {}


def _own_term_selects(
    term: AffinityTerm, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str] | None
) -> bool:
    """:meth:`AffinityTerm.selects` as kube-scheduler v1.36 reads the incoming pod's own terms: as the API defines
    it, except that a ``namespaceSelector`` an unlabelled namespace passes (``NotIn``, ``DoesNotExist``) selects
    every namespace, whatever its labels (kube-scheduler matches the existing pods against the term with no
    namespace labels, beside the namespaces its selector lists). Measured against the real kube-scheduler: a pod
    whose affinity selects ``team NotIn [x]`` is put beside a pod of a namespace labelled ``team: x``
    (tests/realkube/test_filter_differential.py). Existing pods' anti-affinity is read as the API defines it."""
    selector = term.namespace_selector
    if selector is not None and selector.matches(_UNLABELLED):
        return term.selector is not None and term.selector.matches(labels)
    return term.selects(namespace, labels, namespace_labels)


def late_reasons(
    pod: Pod,
    candidates: Collection[str],
    nodes: Mapping[str, Node],
    pods: PodsByNode,
    by_label: Mapping[tuple[str, str], Iterable[str]] | None = None,
) -> dict[str, str]:
    """PodTopologySpread's and InterPodAffinity's reason for each of ``candidates`` (nodes that passed every filter
    before them) that fails them. ``by_label``: the nodes by (label, value), when the caller keeps them: a pod with
    anti-affinity alone (the common case: one per node), or beside bound pods with anti-affinity, then costs the
    nodes it rules out, not a look at each candidate (``candidates`` is asked whether it holds them: a set, or a
    view that answers without being built)."""
    pods.settle()
    terms = pod.terms
    spread = terms.spread if terms is not None else ()
    counts = _spread_counts(pod, spread, nodes, pods) if spread else []
    affinity = _AffinityCounts(pod, terms, nodes, pods)
    failed: dict[str, str] = {}
    if by_label is not None and not spread and (terms is None or not terms.affinity):
        open_ = candidates if not isinstance(candidates, (list, tuple)) else set(candidates)
        ruled = ((affinity.anti, REASON_ANTI_AFFINITY), (affinity.existing, REASON_EXISTING_ANTI_AFFINITY))
        for pairs, because in ruled:
            for pair in pairs:
                for name in by_label.get(pair, ()):
                    if name in open_ and name not in failed:
                        failed[name] = because
        return failed
    for name in candidates:
        node = nodes.get(name)
        if node is None:
            continue
        why = _spread_reason(pod, node, spread, counts) if spread else None
        if why is None:
            why = affinity.reason(pod, terms, node)
        if why is not None:
            failed[name] = why
    return failed
