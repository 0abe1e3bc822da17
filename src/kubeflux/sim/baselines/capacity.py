"""Free capacity per node for the HPC baselines, with first fit in O(log nodes).

Nodes are numbered in the order they were added. ``free`` is allocatable minus the requests of every bound,
unfinished pod (whichever scheduler bound it). A max-segment-tree over the nodes holds, per subtree, the largest
free cpu (millicores), memory (bytes) and ``nvidia.com/gpu``; :meth:`NodeCapacity.first_fit` descends it to the
lowest-numbered node with room, so placing a pod costs about ``2·log2(nodes)`` list reads instead of a scan.

A node that is NotReady, cordoned, deleted or carries a ``NoSchedule``/``NoExecute`` taint is *closed*: the tree
sees it as full, as it does a node holding as many pods as its ``pods`` allocatable allows. Pods that need more
than cpu/memory/gpu (other extended resources, a node selector, required node affinity, tolerations) are placed
by :meth:`NodeCapacity.first_fit_scan`, a linear scan that applies kube-default's filters from
:mod:`kubeflux.scheduler.constraints` (NodeUnschedulable, TaintToleration with the not-ready taint of a NotReady
node, NodeAffinity, NodeResourcesFit with the pod limit), so a tolerating pod may use a tainted node.

A pod with constraints but only cpu, memory and gpu requests (the KWOK pods that tolerate their nodes' taint, a
node selector) gets a tree of its own, a *view* admitting just the nodes its constraints allow, built the first
time such a pod is placed and kept up to date with the main one (at most :data:`MAX_VIEWS` of them; beyond, or
for pods asking other extended resources, the linear scan).

Two sets of sums are kept for O(1) pre-checks: :attr:`NodeCapacity.total_cpu` … over open nodes (what a pod
without constraints can use) and :attr:`NodeCapacity.usable_cpu` … over every node not deleted (what a pod with
tolerations may use).
"""

from __future__ import annotations

from collections.abc import Hashable

from kubeflux.scheduler.constraints import static_filter
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node, Pod
from kubeflux.sim.baselines.free_tree import FreeTree
from kubeflux.sim.nodestate import FreeAmounts

_UNLIMITED_PODS = 1 << 40
MAX_VIEWS = 8
"""Constraint signatures (tolerations, selector, affinity) given a first-fit tree of their own."""

_BASIC = (CPU, MEMORY, GPU, PODS)
_BASIC_SET = frozenset(_BASIC)


def is_special(pod: Pod) -> bool:
    """True when placing ``pod`` needs more than its cpu, memory and gpu (the linear-scan path)."""
    if pod.node_selector or pod.required_node_affinity or pod.tolerations:
        return True
    req = pod.requests
    return not (len(req) == 1 and CPU in req) and not _BASIC_SET.issuperset(req)


class NodeCapacity:
    """Per-node free resources and a first-fit index over them. See the module docstring."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.index: dict[str, int] = {}
        self.free = FreeAmounts()
        """What is free on each node (allocatable minus the requests of its bound, unfinished pods)."""
        self.open: list[bool] = []
        self.pods_free: list[int] = []
        """How many more pods each node's ``pods`` allocatable allows (a huge number when it states none)."""
        self.usable: list[bool] = []
        """Not deleted: counted in the ``usable_*`` sums."""
        self.gone: set[int] = set()
        """Numbers of deleted nodes."""
        self.total_cpu = self.total_mem = self.total_gpu = 0
        """Sums of free cpu, memory and gpu over open nodes (a job asking more cannot fit: O(1) pre-check)."""
        self.usable_cpu = self.usable_mem = self.usable_gpu = 0
        """The same sums over every node not deleted, open or not (the pre-check for pods with tolerations)."""
        self.version = 0
        """Incremented on every change; :attr:`released` only when capacity grew (something may fit now)."""
        self.released = 0
        self.shape_version = 0
        """Incremented when a node is added, changed or removed (cached cluster-wide figures are then stale)."""
        self._size = 1
        self._base = FreeTree(self.open)
        self._trees: list[FreeTree] = [self._base]
        self._views: dict[Hashable, tuple[Pod, FreeTree]] = {}
        """Constraint signature → (a pod with those constraints, its tree)."""

    # -- nodes ------------------------------------------------------------------------------------------------
    @staticmethod
    def _opens(node: Node) -> bool:
        if not node.ready or node.unschedulable:
            return False
        return not any(t.effect in ("NoSchedule", "NoExecute") for t in node.taints)

    def set_node(self, node: Node) -> None:
        """A node was added or changed: new allocatable (keeping what its pods use), labels, taints, state."""
        i = self.index.get(node.name)
        alloc = node.allocatable
        if i is None:
            i = len(self.nodes)
            self.index[node.name] = i
            self.nodes.append(node)
            self.free.append(alloc)
            self.pods_free.append(alloc.get(PODS, _UNLIMITED_PODS))
            self.open.append(False)
            self.usable.append(False)
            for _, view in self._views.values():
                view.admits.append(False)
            self._set_usable(i, True)
            if i >= self._size:
                self._grow()
        else:
            old = self.nodes[i].allocatable
            self._set_open(i, False)
            self._set_usable(i, False)
            self.nodes[i] = node
            self.free.resize(i, old, alloc)
            self.pods_free[i] += alloc.get(PODS, _UNLIMITED_PODS) - old.get(PODS, _UNLIMITED_PODS)
            self._set_usable(i, True)
        self.gone.discard(i)
        for pod, view in self._views.values():
            view.admits[i] = static_filter(pod, node) is None
        self._set_open(i, self._opens(node))
        self.released += 1
        self.shape_version += 1

    def remove_node(self, name: str) -> None:
        """A deleted node stays numbered (its pods may still be reported) but is closed for good."""
        i = self.index.get(name)
        if i is not None:
            for _, view in self._views.values():
                view.admits[i] = False
            self._set_open(i, False)
            self._set_usable(i, False)
            self.gone.add(i)
            self.shape_version += 1

    def _set_usable(self, i: int, usable: bool) -> None:
        if self.usable[i] == usable:
            return
        self.usable[i] = usable
        sign = 1 if usable else -1
        self.usable_cpu += sign * self.free.cpu[i]
        self.usable_mem += sign * self.free.mem[i]
        self.usable_gpu += sign * self.free.gpu[i]

    def _set_open(self, i: int, is_open: bool) -> None:
        if self.open[i] != is_open:
            sign = 1 if is_open else -1
            self.total_cpu += sign * self.free.cpu[i]
            self.total_mem += sign * self.free.mem[i]
            self.total_gpu += sign * self.free.gpu[i]
            self.open[i] = is_open
        self._update(i)

    def _grow(self) -> None:
        size = self._size
        while size <= len(self.nodes):
            size *= 2
        self._size = size
        for tree in self._trees:
            tree.resize(size)
        for i in range(len(self.nodes) - 1):
            self._update(i)

    # -- the trees -------------------------------------------------------------------------------------------
    def _update(self, i: int) -> None:
        free = self.free
        cpu, mem, gpu, room = free.cpu[i], free.mem[i], free.gpu[i], self.pods_free[i] > 0
        for tree in self._trees:
            tree.set(i, cpu, mem, gpu, room)
        self.version += 1

    def _update_cpu(self, i: int) -> None:
        """:meth:`_update` when only node ``i``'s free cpu changed (the usual pod)."""
        cpu, room = self.free.cpu[i], self.pods_free[i] > 0
        for tree in self._trees:
            tree.set_cpu(i, cpu, room)
        self.version += 1

    def first_fit(self, cpu: int, mem: int, gpu: int, start: int = 0) -> int:
        """The lowest-numbered open node ``>= start`` with at least this much free; -1 when none."""
        return self._base.first_fit(cpu, mem, gpu, start)

    def _view(self, pod: Pod) -> FreeTree | None:
        """The tree of the nodes ``pod``'s constraints admit, made on first use; None for a pod asking extended
        resources (the scan checks those) or when :data:`MAX_VIEWS` trees exist already."""
        if not _BASIC_SET.issuperset(pod.requests):
            return None
        signature = (pod.tolerations, tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)
        known = self._views.get(signature)
        if known is not None:
            return known[1]
        if len(self._views) >= MAX_VIEWS:
            return None
        admits = [self.usable[i] and static_filter(pod, node) is None for i, node in enumerate(self.nodes)]
        tree = FreeTree(admits, self._size)
        self._views[signature] = (pod, tree)
        self._trees.append(tree)
        free, pods_free = self.free, self.pods_free
        for i in range(len(self.nodes)):
            tree.set(i, free.cpu[i], free.mem[i], free.gpu[i], pods_free[i] > 0)
        return tree

    def first_fit_scan(self, pod: Pod, start: int = 0) -> int:
        """First fit for a pod with constraints or extended resources: a linear scan with Kubernetes' filters."""
        req = pod.requests
        cpu, mem, gpu = req.get(CPU, 0), req.get(MEMORY, 0), req.get(GPU, 0)
        extra = [(k, v) for k, v in req.items() if k not in _BASIC]
        usable, pods_free, free = self.usable, self.pods_free, self.free
        for i in range(start, len(self.nodes)):
            if not usable[i] or pods_free[i] <= 0:
                continue
            node = self.nodes[i]
            if free.cpu[i] < cpu or free.mem[i] < mem or free.gpu[i] < gpu:
                continue
            ext = free.ext[i]
            if any(ext.get(k, 0) < v for k, v in extra):
                continue
            if static_filter(pod, node) is None:
                return i
        return -1

    def find(self, pod: Pod, special: bool, start: int = 0) -> int:
        """First fit for ``pod`` from node ``start``: the main tree, the pod's view, or the scan."""
        req = pod.requests
        if special:
            view = self._view(pod) if pod.node_selector or pod.required_node_affinity or pod.tolerations else None
            if view is None:
                return self.first_fit_scan(pod, start)
            return view.first_fit(req.get(CPU, 0), req.get(MEMORY, 0), req.get(GPU, 0), start)
        return self._base.first_fit(req.get(CPU, 0), req.get(MEMORY, 0), req.get(GPU, 0), start)

    # -- usage -----------------------------------------------------------------------------------------------
    def take(self, i: int, pod: Pod) -> None:
        """Count ``pod``'s requests as used on node ``i``."""
        self._add(i, pod, -1)

    def give(self, i: int, pod: Pod) -> None:
        """Return ``pod``'s requests to node ``i``."""
        self._add(i, pod, 1)
        self.released += 1

    def untake(self, i: int, pod: Pod) -> None:
        """Undo a tentative :meth:`take` (not a release: :attr:`released` is unchanged)."""
        self._add(i, pod, 1)

    def _add(self, i: int, pod: Pod, sign: int) -> None:
        req = pod.requests
        pods_free = self.pods_free[i] + sign
        self.pods_free[i] = pods_free
        full_changed = pods_free <= 0 or (pods_free == 1 and sign > 0)  # the pod limit closes or reopens it
        if len(req) == 1 and not full_changed:
            c = req.get(CPU)
            if c is not None:  # cpu only: memory, gpu and the other trees stay as they are
                c *= sign
                self.free.cpu[i] += c
                if self.open[i]:
                    self.total_cpu += c
                if self.usable[i]:
                    self.usable_cpu += c
                self._update_cpu(i)
                return
        c, m, g = sign * req.get(CPU, 0), sign * req.get(MEMORY, 0), sign * req.get(GPU, 0)
        free = self.free
        free.cpu[i] += c
        free.mem[i] += m
        free.gpu[i] += g
        if self.open[i]:
            self.total_cpu += c
            self.total_mem += m
            self.total_gpu += g
        if self.usable[i]:
            self.usable_cpu += c
            self.usable_mem += m
            self.usable_gpu += g
        if len(req) > 1 or CPU not in req:
            ext = free.ext[i]
            for k, v in req.items():
                if k not in _BASIC:
                    ext[k] = ext.get(k, 0) + sign * v
        self._update(i)


__all__ = ["NodeCapacity", "is_special"]
