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

Two sets of sums are kept for O(1) pre-checks: :attr:`NodeCapacity.total_cpu` … over open nodes (what a pod
without constraints can use) and :attr:`NodeCapacity.usable_cpu` … over every node not deleted (what a pod with
tolerations may use).
"""

from __future__ import annotations

from kubeflux.scheduler.constraints import static_filter
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node, Pod

_UNLIMITED_PODS = 1 << 40

_CLOSED = -1
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
        self.cpu: list[int] = []
        self.mem: list[int] = []
        self.gpu: list[int] = []
        self.ext: list[dict[str, int]] = []
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
        self._tc: list[int] = [_CLOSED, _CLOSED]
        self._tm: list[int] = [_CLOSED, _CLOSED]
        self._tg: list[int] = [_CLOSED, _CLOSED]

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
            self.cpu.append(alloc.get(CPU, 0))
            self.mem.append(alloc.get(MEMORY, 0))
            self.gpu.append(alloc.get(GPU, 0))
            self.ext.append({k: v for k, v in alloc.items() if k not in _BASIC})
            self.pods_free.append(alloc.get(PODS, _UNLIMITED_PODS))
            self.open.append(False)
            self.usable.append(False)
            self._set_usable(i, True)
            if i >= self._size:
                self._grow()
        else:
            old = self.nodes[i].allocatable
            self._set_open(i, False)
            self._set_usable(i, False)
            self.nodes[i] = node
            self.cpu[i] += alloc.get(CPU, 0) - old.get(CPU, 0)
            self.mem[i] += alloc.get(MEMORY, 0) - old.get(MEMORY, 0)
            self.gpu[i] += alloc.get(GPU, 0) - old.get(GPU, 0)
            self.pods_free[i] += alloc.get(PODS, _UNLIMITED_PODS) - old.get(PODS, _UNLIMITED_PODS)
            self._set_usable(i, True)
            ext = self.ext[i]
            for k in set(alloc) | set(old):
                if k not in _BASIC:
                    ext[k] = ext.get(k, 0) + alloc.get(k, 0) - old.get(k, 0)
        self.gone.discard(i)
        self._set_open(i, self._opens(node))
        self.released += 1
        self.shape_version += 1

    def remove_node(self, name: str) -> None:
        """A deleted node stays numbered (its pods may still be reported) but is closed for good."""
        i = self.index.get(name)
        if i is not None:
            self._set_open(i, False)
            self._set_usable(i, False)
            self.gone.add(i)
            self.shape_version += 1

    def _set_usable(self, i: int, usable: bool) -> None:
        if self.usable[i] == usable:
            return
        self.usable[i] = usable
        sign = 1 if usable else -1
        self.usable_cpu += sign * self.cpu[i]
        self.usable_mem += sign * self.mem[i]
        self.usable_gpu += sign * self.gpu[i]

    def _set_open(self, i: int, is_open: bool) -> None:
        if self.open[i] != is_open:
            sign = 1 if is_open else -1
            self.total_cpu += sign * self.cpu[i]
            self.total_mem += sign * self.mem[i]
            self.total_gpu += sign * self.gpu[i]
            self.open[i] = is_open
        self._update(i)

    def _grow(self) -> None:
        size = self._size
        while size <= len(self.nodes):
            size *= 2
        self._size = size
        self._tc = [_CLOSED] * (2 * size)
        self._tm = [_CLOSED] * (2 * size)
        self._tg = [_CLOSED] * (2 * size)
        for i in range(len(self.nodes) - 1):
            self._update(i)

    # -- the tree --------------------------------------------------------------------------------------------
    def _update(self, i: int) -> None:
        tc, tm, tg = self._tc, self._tm, self._tg
        j = i + self._size
        if self.open[i] and self.pods_free[i] > 0:
            tc[j], tm[j], tg[j] = self.cpu[i], self.mem[i], self.gpu[i]
        else:
            tc[j] = tm[j] = tg[j] = _CLOSED
        j >>= 1
        while j:
            a = 2 * j
            b = a + 1
            nc = tc[a] if tc[a] > tc[b] else tc[b]
            nm = tm[a] if tm[a] > tm[b] else tm[b]
            ng = tg[a] if tg[a] > tg[b] else tg[b]
            if nc == tc[j] and nm == tm[j] and ng == tg[j]:
                break
            tc[j], tm[j], tg[j] = nc, nm, ng
            j >>= 1
        self.version += 1

    def _update_cpu(self, i: int) -> None:
        """:meth:`_update` when only node ``i``'s free cpu changed (the usual pod): one tree, stopping as soon as
        a subtree's maximum is unchanged."""
        tc = self._tc
        j = i + self._size
        top = tc[j] = self.cpu[i] if self.open[i] and self.pods_free[i] > 0 else _CLOSED
        while j > 1:
            other = tc[j ^ 1]
            if other > top:
                top = other
            j >>= 1
            if tc[j] == top:
                break
            tc[j] = top
        self.version += 1

    def first_fit(self, cpu: int, mem: int, gpu: int, start: int = 0) -> int:
        """The lowest-numbered open node ``>= start`` with at least this much free; -1 when none."""
        tc, tm, tg, size = self._tc, self._tm, self._tg, self._size
        if tc[1] < cpu or tm[1] < mem or tg[1] < gpu:
            return -1
        if mem <= 0 and gpu <= 0:  # cpu decides alone: one tree, and the descent is exact
            j = 1
            if start > 0:  # climb from leaf ``start`` to the first subtree on its right with room
                if start >= size:
                    return -1
                j = start + size
                if tc[j] >= cpu:
                    return start
                while j & 1 or tc[j + 1] < cpu:
                    j >>= 1
                    if j <= 1:
                        return -1
                j += 1
            while j < size:
                j *= 2
                if tc[j] < cpu:
                    j += 1
            return j - size
        if start == 0:
            j = 1
            while j < size:  # greedy descent: exact when one resource decides, checked below
                j *= 2
                if tc[j] < cpu or tm[j] < mem or tg[j] < gpu:
                    j += 1
            if tc[j] >= cpu and tm[j] >= mem and tg[j] >= gpu:
                return j - size
        stack = [1]
        while stack:
            j = stack.pop()
            if tc[j] < cpu or tm[j] < mem or tg[j] < gpu:
                continue
            level = j.bit_length() - 1
            span = size >> level
            if (j - (1 << level) + 1) * span <= start:
                continue  # the subtree ends before ``start``
            if j >= size:
                return j - size
            stack.append(2 * j + 1)
            stack.append(2 * j)
        return -1

    def first_fit_scan(self, pod: Pod, start: int = 0) -> int:
        """First fit for a pod with constraints or extended resources: a linear scan with Kubernetes' filters."""
        req = pod.requests
        cpu, mem, gpu = req.get(CPU, 0), req.get(MEMORY, 0), req.get(GPU, 0)
        extra = [(k, v) for k, v in req.items() if k not in _BASIC]
        usable, pods_free = self.usable, self.pods_free
        for i in range(start, len(self.nodes)):
            if not usable[i] or pods_free[i] <= 0:
                continue
            node = self.nodes[i]
            if self.cpu[i] < cpu or self.mem[i] < mem or self.gpu[i] < gpu:
                continue
            ext = self.ext[i]
            if any(ext.get(k, 0) < v for k, v in extra):
                continue
            if static_filter(pod, node) is None:
                return i
        return -1

    def find(self, pod: Pod, special: bool, start: int = 0) -> int:
        if special:
            return self.first_fit_scan(pod, start)
        req = pod.requests
        return self.first_fit(req.get(CPU, 0), req.get(MEMORY, 0), req.get(GPU, 0), start)

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
                self.cpu[i] += c
                if self.open[i]:
                    self.total_cpu += c
                if self.usable[i]:
                    self.usable_cpu += c
                self._update_cpu(i)
                return
        c, m, g = sign * req.get(CPU, 0), sign * req.get(MEMORY, 0), sign * req.get(GPU, 0)
        self.cpu[i] += c
        self.mem[i] += m
        self.gpu[i] += g
        if self.open[i]:
            self.total_cpu += c
            self.total_mem += m
            self.total_gpu += g
        if self.usable[i]:
            self.usable_cpu += c
            self.usable_mem += m
            self.usable_gpu += g
        if len(req) > 1 or CPU not in req:
            ext = self.ext[i]
            for k, v in req.items():
                if k not in _BASIC:
                    ext[k] = ext.get(k, 0) + sign * v
        self._update(i)


__all__ = ["NodeCapacity", "is_special"]
