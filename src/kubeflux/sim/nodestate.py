"""The simulated cluster's nodes and what is free on each: the kubelet's admission and the resource ids.

:class:`NodeState` is the part of :class:`kubeflux.sim.cluster.Cluster` that owns node state: every node that
joined, by index (a removed one keeps its place, so indices stay valid), the free CPU (millicores), memory
(bytes), GPUs and extended resources of each, and the resource ids (:mod:`kubeflux.sim.resourceids`). It admits a
pod (takes its requests and ids, or names the resource that is short) and releases it; it emits nothing and keeps
no time: the cluster tells the observers and counts the usage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Final

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node, Taint
from kubeflux.scheduler.validation import check_node
from kubeflux.sim.pods import SimPod
from kubeflux.sim.resourceids import ResourceIds, has_ids

__all__ = ["FreeAmounts", "NodeState"]

_NAMED: Final = (CPU, MEMORY, GPU, PODS)
"""The resources not kept in :attr:`FreeAmounts.ext`: the three with lists of their own, and ``pods``, a count of
pods (whoever limits pods per node keeps it)."""


class FreeAmounts:
    """What is free on each node, by node index: cpu (millicores), memory (bytes), gpus, and every other extended
    resource, from the allocatable a node joined with or changed to (the simulated kubelet's
    :class:`NodeState`, and the HPC baselines' :class:`~kubeflux.sim.baselines.capacity.NodeCapacity`)."""

    def __init__(self) -> None:
        self.cpu: list[int] = []
        self.mem: list[int] = []
        self.gpu: list[int] = []
        self.ext: list[dict[str, int]] = []

    def append(self, allocatable: Mapping[str, int]) -> None:
        """The next node, all of its ``allocatable`` free."""
        self.cpu.append(allocatable.get(CPU, 0))
        self.mem.append(allocatable.get(MEMORY, 0))
        self.gpu.append(allocatable.get(GPU, 0))
        self.ext.append({k: v for k, v in allocatable.items() if k not in _NAMED})

    def resize(self, index: int, was: Mapping[str, int], now: Mapping[str, int]) -> None:
        """Node ``index``'s allocatable changed from ``was`` to ``now``: what is free changes by as much (what its
        pods use stays used, so a shrink may leave less than nothing free)."""
        self.cpu[index] += now.get(CPU, 0) - was.get(CPU, 0)
        self.mem[index] += now.get(MEMORY, 0) - was.get(MEMORY, 0)
        self.gpu[index] += now.get(GPU, 0) - was.get(GPU, 0)
        ext = self.ext[index]
        for k in {*was, *now}:
            if k not in _NAMED:
                ext[k] = ext.get(k, 0) + now.get(k, 0) - was.get(k, 0)


class NodeState:
    """Nodes by index and their free amounts (see the module docstring)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        """Every node that joined, by index (a removed one keeps its place); :attr:`node_index` names the current."""
        self.node_index: dict[str, int] = {}
        self.amounts = FreeAmounts()
        """What is free on each node."""
        self.ids = ResourceIds()
        """Resource ids per kind (:mod:`kubeflux.sim.resourceids`)."""
        self.total_cores = 0

    def add(self, node: Node) -> None:
        """A node joins. Raises ValueError on a duplicate name or a bad allocatable."""
        check_node(node)  # before any typed read: compiled, a float amount would fail as a bare TypeError
        if node.name in self.node_index:
            raise ValueError(f"node {node.name!r}: duplicate name")
        self.node_index[node.name] = len(self.nodes)
        self.nodes.append(node)
        alloc = node.allocatable
        self.amounts.append(alloc)
        self.ids.add_node(alloc)
        self.total_cores += alloc.get(CPU, 0) // 1000

    def node(self, name: str) -> Node:
        """The current node ``name``. Raises KeyError naming it when there is none."""
        try:
            return self.nodes[self.node_index[name]]
        except KeyError:
            raise KeyError(f"node {name!r} does not exist") from None

    def update(
        self,
        name: str,
        allocatable: dict[str, int] | None,
        labels: dict[str, str] | None,
        taints: tuple[Taint, ...] | None,
    ) -> Node:
        """Replace node ``name`` by a copy with new allocatable, labels or taints (None: unchanged) and return it.
        Allocatable may drop below what bound pods use: they keep it, only new pods are refused. Core ids added by
        growth are new ids; a shrink drops free ones. Raises KeyError (no such node) or ValueError (a bad field)."""
        old = self.node(name)
        index = self.node_index[name]
        node = dataclasses.replace(old, labels=dict(old.labels if labels is None else labels))
        node.taints = old.taints if taints is None else taints
        if allocatable is not None:
            node.allocatable = dict(allocatable)
        check_node(node)  # names the bad field (compiled, a typed read of it would fail as a bare TypeError)
        if allocatable is not None:
            was = old.allocatable
            self.amounts.resize(index, was, allocatable)
            self.ids.resize(index, was, allocatable)
            self.total_cores += max(allocatable.get(CPU, 0) // 1000 - was.get(CPU, 0) // 1000, 0)
        self.nodes[index] = node
        return node

    def current(self) -> list[Node]:
        """The nodes now (not those removed), in the order they joined."""
        return [self.nodes[index] for index in self.node_index.values()]

    def admit(self, sp: SimPod, index: int) -> str:
        """The kubelet's admission: take the pod's requests (and ids) from node ``index``, or name the resource
        that is short (then nothing is taken)."""
        amounts = self.amounts
        fc, fm, fg = amounts.cpu, amounts.mem, amounts.gpu
        if sp.cpu > fc[index]:
            return "cpu"
        if sp.mem > fm[index]:
            return "memory"
        if sp.gpu > fg[index]:
            return GPU
        ext = sp.ext
        if ext:
            free = amounts.ext[index]
            for res, amount in ext.items():
                if amount > free.get(res, 0):
                    return res
            for res, amount in ext.items():
                free[res] = free.get(res, 0) - amount
        fc[index] -= sp.cpu
        fm[index] -= sp.mem
        fg[index] -= sp.gpu
        if sp.cpu >= 1000:
            sp.cores = self.ids.cores.take(index, sp.cpu // 1000)
        others = sp.timing.others
        if others is not None:
            sp.ids = self._take_ids(others, index)
        return ""

    def _take_ids(self, requests: dict[str, int], index: int) -> dict[str, list[int]] | None:
        """Ids on node ``index`` for the requests of kinds that have ids (GPUs, extended resources)."""
        taken: dict[str, list[int]] = {}
        for res, amount in requests.items():
            if has_ids(res):
                ids = self.ids.take(res, index, amount)
                if ids:
                    taken[res] = ids
        return taken or None

    def release(self, sp: SimPod) -> None:
        """Give back what :meth:`admit` took for ``sp`` on its node."""
        index = sp.node_index
        amounts = self.amounts
        amounts.cpu[index] += sp.cpu
        amounts.mem[index] += sp.mem
        amounts.gpu[index] += sp.gpu
        if sp.ext:
            free = amounts.ext[index]
            for res, amount in sp.ext.items():
                free[res] = free.get(res, 0) + amount
        if sp.cores:
            self.ids.cores.give(index, sp.cores)
        if sp.ids:
            for res, ids in sp.ids.items():
                self.ids.give(res, index, ids)

    def fits_somewhere(self, pods: Iterable[SimPod]) -> bool:
        """Whether one of ``pods`` fits the free resources of a ready, schedulable node."""
        nodes = [i for i in self.node_index.values() if self.nodes[i].ready and not self.nodes[i].unschedulable]
        amounts = self.amounts
        fc, fm, fg, fx = amounts.cpu, amounts.mem, amounts.gpu, amounts.ext
        for sp in pods:
            for i in nodes:
                if (
                    sp.cpu <= fc[i]
                    and sp.mem <= fm[i]
                    and sp.gpu <= fg[i]
                    and (not sp.ext or all(amount <= fx[i].get(res, 0) for res, amount in sp.ext.items()))
                ):
                    return True
        return False

    def free(self, name: str) -> dict[str, int]:
        """What is left on node ``name`` (allocatable minus the requests of its bound, unfinished pods). Raises
        KeyError when there is no such node."""
        self.node(name)
        i = self.node_index[name]
        amounts = self.amounts
        return {CPU: amounts.cpu[i], MEMORY: amounts.mem[i], GPU: amounts.gpu[i], **amounts.ext[i]}
