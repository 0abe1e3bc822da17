"""The baselines' scheduler cache: every node's allocatable and requested resources as NumPy arrays.

Filtering a pod against 5,000 nodes is then a handful of vector comparisons instead of 5,000 Python calls:

* the **resource** part (NodeResourcesFit) compares ``allocatable − requested`` with the pod's request, one array
  per resource;
* the **static** part (NodeUnschedulable, TaintToleration, NodeAffinity) depends only on the nodes and on the
  pod's tolerations, node selector and affinity, so it is computed once per distinct combination and cached until
  a node changes. Label matching is vectorised over one array per label key.

Nodes and usage are kept in plain dicts as the truth; the arrays are derived from them and rebuilt lazily
(:meth:`NodeTable.refresh`) after a node is added, removed or changed, so that adding 5,000 nodes costs one
rebuild. Usage changes between rebuilds update the arrays in place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from kubeflux.scheduler.constraints import (
    EPHEMERAL_STORAGE,
    REASON_NODE_AFFINITY,
    REASON_TOO_MANY_PODS,
    node_unschedulable,
    taint_toleration,
)
from kubeflux.scheduler.objects import CPU, MEMORY, PODS, Node, NodeSelectorRequirement, Pod, ResourceList

__all__ = ["NodeTable", "least_requested", "nonzero_requests", "num_feasible_nodes_to_find"]

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
_CACHE_LIMIT = 4096
_NO_LIMIT = np.iinfo(np.int64).max // 4

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
MAX_NODE_SCORE = 100

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def num_feasible_nodes_to_find(num_all_nodes: int, percentage_of_nodes_to_score: int = 0) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: how many feasible nodes a cycle looks for before scoring.

    Under 100 nodes, all. Otherwise ``percentage_of_nodes_to_score`` percent (0 = adaptive:
    ``50 − nodes/125``, at least 5 %), and never fewer than 100 nodes.
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    percentage = percentage_of_nodes_to_score
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return num_all_nodes
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def least_requested(requested: npt.NDArray[np.int64], capacity: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """NodeResourcesFit ``LeastAllocated`` for one resource: ``(capacity − requested) × 100 // capacity`` per node,
    0 where over or where the node has none."""
    safe = np.where(capacity == 0, 1, capacity)
    score = (capacity - requested) * MAX_NODE_SCORE // safe
    result: npt.NDArray[np.int64] = np.where((capacity == 0) | (requested > capacity), 0, score)
    return result


def nonzero_requests(requests: ResourceList) -> tuple[int, int]:
    """cpu and memory as kube-scheduler counts them for scoring: 100m and 200Mi when a pod requests none."""
    return requests.get(CPU, 0) or DEFAULT_MILLI_CPU_REQUEST, requests.get(MEMORY, 0) or DEFAULT_MEMORY_REQUEST


def _zone_key(node: Node) -> tuple[str, str]:
    zone = next((node.labels[k] for k in ZONE_LABELS if k in node.labels), "")
    region = next((node.labels[k] for k in REGION_LABELS if k in node.labels), "")
    return region, zone


def _resource_order(names: Iterator[str] | set[str]) -> list[str]:
    """cpu, memory, ephemeral-storage, then the rest by name: the order kube-scheduler reports shortages in."""
    present = set(names)
    fixed = [name for name in (CPU, MEMORY, EPHEMERAL_STORAGE) if name in present]
    return fixed + sorted(present - {CPU, MEMORY, EPHEMERAL_STORAGE, PODS})


class NodeTable:
    """Nodes in kube-scheduler's listing order with their allocatable and requested resources."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._used: dict[str, ResourceList] = {}
        self._pods: dict[str, int] = {}
        self._nonzero: dict[str, list[int]] = {}
        self._dirty = True
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self._allocatable: dict[str, IntArray] = {}
        self._requested: dict[str, IntArray] = {}
        self.nonzero_cpu: IntArray = np.zeros(0, dtype=np.int64)
        self.nonzero_memory: IntArray = np.zeros(0, dtype=np.int64)
        self.pod_count: IntArray = np.zeros(0, dtype=np.int64)
        self.pod_limit: IntArray = np.zeros(0, dtype=np.int64)
        self.has_pod_limit = False
        self._labels: dict[str, npt.NDArray[np.object_]] = {}
        self._taint_cache: dict[Hashable, tuple[npt.NDArray[np.int16], list[str]]] = {}
        self._static_cache: dict[Hashable, tuple[npt.NDArray[np.int16], list[str], BoolArray]] = {}
        self._zero = np.zeros(0, dtype=np.int64)
        self._allocatable_total: dict[str, int] = {}
        self._requested_total: dict[str, int] = {}
        """Summed over the nodes present (not those only heard of through a pod), ``pods`` counted as a resource."""
        self.layout = 0
        """Bumped whenever the arrays are rebuilt (nodes changed), so answers keyed by :meth:`usage_key` expire."""

    # --- updates ------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        self.refresh()
        return len(self.names)

    def set_node(self, node: Node) -> None:
        self._nodes[node.name] = node
        self._dirty = True

    def remove_node(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._dirty = True

    @property
    def by_name(self) -> Mapping[str, Node]:
        """Every node by name (read only)."""
        return self._nodes

    def node_list(self) -> list[Node]:
        self.refresh()
        return [self._nodes[name] for name in self.names]

    def add_usage(self, node: str, requests: ResourceList, sign: int) -> None:
        """Count (``sign`` +1) or release (−1) one pod's requests on ``node``, known or not yet known."""
        used = self._used.setdefault(node, {})
        for name, amount in requests.items():
            if amount:
                used[name] = used.get(name, 0) + sign * amount
        self._pods[node] = self._pods.get(node, 0) + sign
        if node in self._nodes and not self._dirty:
            totals = self._requested_total
            for name, amount in requests.items():
                if amount and name != PODS:
                    totals[name] = totals.get(name, 0) + sign * amount
            totals[PODS] = totals.get(PODS, 0) + sign
        cpu, memory = nonzero_requests(requests)
        nonzero = self._nonzero.setdefault(node, [0, 0])
        nonzero[0] += sign * cpu
        nonzero[1] += sign * memory
        index = self.index.get(node)
        if self._dirty or index is None:
            return
        for name, amount in requests.items():
            if amount:
                column = self._requested.get(name)
                if column is None:
                    self._dirty = True
                    return
                column[index] += sign * amount
        self.pod_count[index] += sign
        self.nonzero_cpu[index] += sign * cpu
        self.nonzero_memory[index] += sign * memory

    # --- the derived arrays -------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the arrays if nodes changed since the last rebuild."""
        if not self._dirty:
            return
        self._dirty = False
        self.names = self._listing_order()
        self.index = {name: i for i, name in enumerate(self.names)}
        nodes = [self._nodes[name] for name in self.names]
        count = len(nodes)
        resources: set[str] = set()
        for node in nodes:
            resources.update(node.allocatable)
        for name in self.names:
            resources.update(self._used.get(name, {}))
        resources.discard(PODS)
        self._allocatable = {
            r: np.fromiter((n.allocatable.get(r, 0) for n in nodes), dtype=np.int64, count=count) for r in resources
        }
        self._requested = {
            r: np.fromiter((self._used.get(n, {}).get(r, 0) for n in self.names), dtype=np.int64, count=count)
            for r in resources
        }
        self.has_pod_limit = any(PODS in n.allocatable for n in nodes)
        self.pod_limit = np.fromiter((n.allocatable.get(PODS, _NO_LIMIT) for n in nodes), dtype=np.int64, count=count)
        self.pod_count = np.fromiter((self._pods.get(n, 0) for n in self.names), dtype=np.int64, count=count)
        nonzero = [self._nonzero.get(n, [0, 0]) for n in self.names]
        self.nonzero_cpu = np.fromiter((v[0] for v in nonzero), dtype=np.int64, count=count)
        self.nonzero_memory = np.fromiter((v[1] for v in nonzero), dtype=np.int64, count=count)
        self._zero = np.zeros(count, dtype=np.int64)
        self._allocatable_total = {r: int(column.sum()) for r, column in self._allocatable.items()}
        self._allocatable_total[PODS] = int(np.minimum(self.pod_limit, _NO_LIMIT // (count + 1)).sum())
        self._requested_total = {r: int(column.sum()) for r, column in self._requested.items()}
        self._requested_total[PODS] = int(self.pod_count.sum())
        self.layout += 1
        self._labels = {}
        self._taint_cache = {}
        self._static_cache = {}

    def _listing_order(self) -> list[str]:
        """kube-scheduler's node tree listing: one node from each zone in turn, zones in order of appearance."""
        zones: dict[tuple[str, str], list[str]] = {}
        for node in self._nodes.values():
            zones.setdefault(_zone_key(node), []).append(node.name)
        if len(zones) <= 1:
            return list(self._nodes)
        order: list[str] = []
        columns = list(zones.values())
        for depth in range(max(len(c) for c in columns)):
            order.extend(column[depth] for column in columns if depth < len(column))
        return order

    def usage_key(self) -> tuple[int, bytes]:
        """What the fit and score arrays hold now (the layout, and a 128-bit digest of every requested amount, pod
        count and non-zero request per node): equal keys give equal filter and score answers for a pod. A digest,
        not the bytes, so that thousands of remembered answers on a large cluster stay small."""
        self.refresh()
        digest = hashlib.blake2b(self.pod_count.tobytes(), digest_size=16)
        digest.update(self.nonzero_cpu.tobytes())
        digest.update(self.nonzero_memory.tobytes())
        for column in self._requested.values():
            digest.update(column.tobytes())
        return self.layout, digest.digest()

    def free_total(self, resource: str) -> int:
        """Allocatable minus requested ``resource`` summed over every node, whatever its state (``pods``: how
        many more pods the nodes' pod limits allow). What the coscheduling plugin's ``CheckClusterResource`` sums."""
        self.refresh()
        return self._allocatable_total.get(resource, 0) - self._requested_total.get(resource, 0)

    def allocatable(self, resource: str) -> IntArray:
        self.refresh()
        return self._allocatable.get(resource, self._zero)

    # --- NodeResourcesFit ---------------------------------------------------------------------------------

    def fit_mask(self, requests: ResourceList) -> BoolArray:
        """Nodes where ``requests`` fits beside what is already requested (and the pod count allows one more)."""
        self.refresh()
        mask: BoolArray = self.pod_count < self.pod_limit
        for name, amount in requests.items():
            if amount <= 0 or name == PODS:
                continue
            column = self._allocatable.get(name)
            if column is None:
                return np.zeros(len(self.names), dtype=np.bool_)
            mask &= column - self._requested[name] >= amount
        return mask

    def insufficient(self, requests: ResourceList) -> Iterator[tuple[str, BoolArray]]:
        """Per requested resource, in kube-scheduler's order, the nodes short of it."""
        self.refresh()
        for name in _resource_order(set(requests)):
            amount = requests[name]
            if amount <= 0:
                continue
            column = self._allocatable.get(name)
            if column is None:
                yield name, np.ones(len(self.names), dtype=np.bool_)
            else:
                yield name, column - self._requested[name] < amount

    def resolvable_mask(self, pod: Pod) -> BoolArray:
        """The nodes where removing pods could let ``pod`` pass the filters (kube-scheduler's ``Unschedulable``, not
        ``UnschedulableAndUnresolvable``): the static filters pass and no request exceeds the node's allocatable."""
        mask = self.static_mask(pod).copy()
        for name, amount in pod.requests.items():
            if amount <= 0 or name == PODS:
                continue
            column = self._allocatable.get(name)
            if column is None:
                return np.zeros(len(self.names), dtype=np.bool_)
            mask &= column >= amount
        return mask

    def shortfalls(self, node: str, requests: ResourceList, freed: ResourceList, freed_pods: int) -> list[str]:
        """NodeResourcesFit's reasons on ``node`` (empty: the pod fits) once pods requesting ``freed`` in all,
        ``freed_pods`` of them, are gone: ``Too many pods`` first, then ``Insufficient <resource>`` in
        kube-scheduler's order. For preemption's dry run, one node at a time."""
        allocatable = self._nodes[node].allocatable
        used = self._used.get(node, {})
        reasons: list[str] = []
        limit = allocatable.get(PODS)
        if limit is not None and self._pods.get(node, 0) - freed_pods + 1 > limit:
            reasons.append(REASON_TOO_MANY_PODS)
        for name in _resource_order(set(requests)):
            amount = requests[name]
            if amount > 0 and allocatable.get(name, 0) - used.get(name, 0) + freed.get(name, 0) < amount:
                reasons.append(f"Insufficient {name}")
        return reasons

    # --- NodeUnschedulable, TaintToleration, NodeAffinity ---------------------------------------------------

    @staticmethod
    def static_signature(pod: Pod) -> Hashable:
        """What the static filters read from a pod; pods with equal signatures get the same answer."""
        return (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)

    def static_reasons(self, pod: Pod) -> tuple[npt.NDArray[np.int16], list[str]]:
        """Per node, 0 when the static filters pass, else an index into the returned reasons."""
        codes, reasons, _ = self._static(pod)
        return codes, reasons

    def static_mask(self, pod: Pod) -> BoolArray:
        return self._static(pod)[2]

    def _static(self, pod: Pod) -> tuple[npt.NDArray[np.int16], list[str], BoolArray]:
        self.refresh()
        signature = self.static_signature(pod)
        cached = self._static_cache.get(signature)
        if cached is not None:
            return cached
        taint_codes, reasons = self._taint_codes(pod)
        codes = taint_codes.copy()
        if pod.node_selector or pod.required_node_affinity:
            reasons = [*reasons, REASON_NODE_AFFINITY]
            codes[(codes == 0) & ~self._affinity_mask(pod)] = len(reasons) - 1
        mask: BoolArray = codes == 0
        if len(self._static_cache) >= _CACHE_LIMIT:
            self._static_cache.clear()
        self._static_cache[signature] = (codes, reasons, mask)
        return codes, reasons, mask

    def _taint_codes(self, pod: Pod) -> tuple[npt.NDArray[np.int16], list[str]]:
        cached = self._taint_cache.get(pod.tolerations)
        if cached is not None:
            return cached
        reasons = [""]
        lookup: dict[str, int] = {}
        codes = np.zeros(len(self.names), dtype=np.int16)
        for i, name in enumerate(self.names):
            node = self._nodes[name]
            if not node.unschedulable and not node.taints and node.ready:
                continue
            reason = node_unschedulable(pod, node) or taint_toleration(pod, node)
            if reason is not None:
                if reason not in lookup:
                    lookup[reason] = len(reasons)
                    reasons.append(reason)
                codes[i] = lookup[reason]
        if len(self._taint_cache) >= _CACHE_LIMIT:
            self._taint_cache.clear()
        self._taint_cache[pod.tolerations] = (codes, reasons)
        return codes, reasons

    def _label(self, key: str) -> npt.NDArray[np.object_]:
        column = self._labels.get(key)
        if column is None:
            column = np.array([self._nodes[name].labels.get(key) for name in self.names], dtype=object)
            self._labels[key] = column
        return column

    def _affinity_mask(self, pod: Pod) -> BoolArray:
        count = len(self.names)
        mask = np.ones(count, dtype=np.bool_)
        for key, value in pod.node_selector.items():
            mask &= self._label(key) == value
        if pod.required_node_affinity:
            any_term = np.zeros(count, dtype=np.bool_)
            for term in pod.required_node_affinity:
                if not term.match_expressions and not term.match_fields:
                    continue  # an empty term matches no node
                term_mask = np.ones(count, dtype=np.bool_)
                for requirement in term.match_expressions:
                    term_mask &= self._requirement_mask(requirement, self._label(requirement.key))
                for requirement in term.match_fields:
                    names = np.array(self.names, dtype=object)
                    column = names if requirement.key == "metadata.name" else np.full(count, None, dtype=object)
                    term_mask &= self._requirement_mask(requirement, column)
                any_term |= term_mask
            mask &= any_term
        return mask

    @staticmethod
    def _requirement_mask(requirement: NodeSelectorRequirement, column: npt.NDArray[np.object_]) -> BoolArray:
        present: BoolArray = np.array([value is not None for value in column], dtype=np.bool_)
        operator = requirement.operator
        if operator in ("In", "NotIn"):
            inside = np.zeros(len(column), dtype=np.bool_)
            for value in requirement.values:
                inside |= column == value
            return inside if operator == "In" else ~inside
        if operator == "Exists":
            return present
        if operator == "DoesNotExist":
            return ~present
        if operator in ("Gt", "Lt") and len(requirement.values) == 1:
            try:
                bound = int(requirement.values[0])
            except ValueError:
                return np.zeros(len(column), dtype=np.bool_)
            result = np.zeros(len(column), dtype=np.bool_)
            for i, value in enumerate(column):
                if value is None:
                    continue
                try:
                    number = int(value)
                except ValueError:
                    continue
                result[i] = number > bound if operator == "Gt" else number < bound
            return result
        return np.zeros(len(column), dtype=np.bool_)
