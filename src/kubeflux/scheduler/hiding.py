"""Nodes hidden from a pod's matches, and the levels above the nodes they sit in (zones, racks).

Hiding is how per-pod filters reach the matcher (:mod:`kubeflux.scheduler.graphview`): a match is given the nodes that
may not take the pod (a :class:`HiddenNodes`, the fit of one pod shape) as the engine's ``excluded`` nodes
(:class:`ExcludedNames`), which it treats exactly as nodes marked down. On a graph with levels above the nodes the
engine is also told, by vertex uid, how many hidden nodes each domain holds (:class:`Levels`): a domain with none is
walked, and its evaluation kept, as if nothing were hidden; a domain with nothing but hidden nodes is skipped whole.

A :class:`HiddenNodes` also keeps, by vertex uid, which vertices a walk may enter (:attr:`HiddenNodes.open`: not a
hidden node, not a domain of hidden nodes only), so that the engine asks about a wide vertex's children with one
lookup of their uids (:meth:`ExcludedNames.allowed`) at every level of the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import numpy.typing as npt

from kubeflux.resources.graph import Vertex

__all__ = ["ExcludedNames", "HiddenNodes", "Levels", "count_hidden", "domain_key", "domain_of"]

Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
"""(each node slot's domain vertices, -1 padded; by vertex uid, how many nodes each domain holds)."""


class HiddenNodes:
    """A set of node names to hide from a pod's matches, changed in place by its owner (the fit of one pod shape).

    The graph view it is matched on keeps a mask of the hidden nodes on it, one flag per node
    (:meth:`~kubeflux.scheduler.graphview.GraphView.match`), which every change keeps true from then on."""

    __slots__ = ("above", "counts", "mask", "names", "open", "owner", "sizes", "slot_of", "uid_of")

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.mask: npt.NDArray[np.bool_] | None = None
        self.slot_of: dict[str, int] = {}
        self.owner: tuple[int, int] = (0, 0)
        """(id of the graph view's :class:`~kubeflux.scheduler.nodelevels.NodeLevels`, its node generation) the mask
        was made for."""
        self.above: npt.NDArray[np.int64] | None = None
        """On a graph with levels: each node slot's domain vertices (:meth:`Levels.arrays`)."""
        self.counts: npt.NDArray[np.int64] | None = None
        """On a graph with levels: by vertex uid, how many hidden nodes each domain holds, kept with the mask."""
        self.sizes: npt.NDArray[np.int64] | None = None
        """On a graph with levels: by vertex uid, how many nodes each domain holds."""
        self.uid_of: dict[str, int] = {}
        """Node name → its node vertex's uid, on the view the mask was made for."""
        self.open: npt.NDArray[np.bool_] | None = None
        """By vertex uid, on the view the mask was made for: False for a hidden node and for a domain whose nodes are
        all hidden (the walk never enters them), True for any other vertex; kept with the mask."""

    def add(self, name: str) -> None:
        self.names.add(name)
        mask = self.mask
        if mask is not None and (slot := self.slot_of.get(name)) is not None and not mask[slot]:
            mask[slot] = True
            self._count(name, slot, 1)

    def discard(self, name: str) -> None:
        self.names.discard(name)
        mask = self.mask
        if mask is not None and (slot := self.slot_of.get(name)) is not None and mask[slot]:
            mask[slot] = False
            self._count(name, slot, -1)

    def _count(self, name: str, slot: int, change: int) -> None:
        opened = self.open
        uid = self.uid_of.get(name)
        if opened is not None and uid is not None and uid < len(opened):
            opened[uid] = change < 0
        counts, above, sizes = self.counts, self.above, self.sizes
        if counts is not None and above is not None and slot < len(above):
            row = above[slot]
            domains = row[row >= 0]
            counts[domains] += change
            if opened is not None and sizes is not None:
                opened[domains] = counts[domains] < sizes[domains]


class ExcludedNames:
    """Node names as the engine's ``excluded`` uids: a uid is excluded when its vertex is a node vertex of one of
    those names (the graph's node vertices are named after their Kubernetes nodes, and the root's children are all
    nodes). The walk may ask about any vertex below the root too: a core or gpu named like a hidden node (the gpu
    ``gpu0`` of every node, when a server is named ``gpu0``) is not excluded. With ``open`` (a
    :attr:`HiddenNodes.open`), the engine asks many uids at once."""

    __slots__ = ("counts", "covers", "names", "open", "sizes", "vertices")

    def __init__(
        self,
        names: Collection[str],
        vertices: list[Vertex],
        opened: npt.NDArray[np.bool_] | None = None,
        covered: Collection[int] | None = None,
    ) -> None:
        self.names = names
        self.vertices = vertices
        self.open = opened
        """By vertex uid, whether the walk may enter it (:attr:`HiddenNodes.open`); None: asked name by name."""
        self.covers: Callable[[int], object] | None = None if covered is None else covered.__contains__
        """On a graph with levels above the nodes: whether a domain vertex has a hidden node below it (the
        engine's :attr:`~kubeflux.match.traverser.Traverser.covers`); None when the nodes are the root's children."""
        self.counts: npt.NDArray[np.int64] | None = None
        self.sizes: npt.NDArray[np.int64] | None = None
        """On a graph with levels, by vertex uid: how many hidden nodes each domain holds, and how many nodes; a
        domain with nothing but hidden nodes is excluded whole, so the walk never enters it."""

    def __contains__(self, uid: object) -> bool:
        assert isinstance(uid, int)
        vertex = self.vertices[uid]
        if vertex.type == "node":
            return vertex.name in self.names
        counts, sizes = self.counts, self.sizes
        return counts is not None and sizes is not None and 0 < sizes.item(uid) <= counts.item(uid)

    def __len__(self) -> int:
        return len(self.names)

    def allowed(self, uids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of ``uids`` are not excluded, at once."""
        opened = self.open
        if opened is not None:
            return opened[uids]
        names, vertices = self.names, self.vertices
        allowed = np.fromiter(
            (vertices[uid].type != "node" or vertices[uid].name not in names for uid in uids.tolist()),
            dtype=bool,
            count=len(uids),
        )
        counts, sizes = self.counts, self.sizes
        if counts is not None and sizes is not None:
            size = sizes[uids]
            allowed &= (size == 0) | (counts[uids] < size)
        return allowed


class Levels:
    """Each node slot's domain vertices and each domain's size (:data:`Arrays`), made again for each node generation of
    the graph view (they change when a node is attached)."""

    def __init__(self) -> None:
        self._kept: tuple[int, npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    def arrays(
        self, generation: int, vertices: list[Vertex], uid_of: dict[str, int], slot_of: dict[str, int]
    ) -> Arrays:
        """The :data:`Arrays` of the nodes ``uid_of`` names (gone ones too: hidden as any), by their ``slot_of``."""
        kept = self._kept
        if kept is None or kept[0] != generation:
            chains: dict[int, list[int]] = {}
            for name, uid in uid_of.items():
                chain: list[int] = []
                parent = vertices[uid].parent
                while parent != -1 and vertices[parent].parent != -1:
                    chain.append(parent)
                    parent = vertices[parent].parent
                chains[slot_of[name]] = chain
            depth = max((len(chain) for chain in chains.values()), default=0)
            above = np.full((len(slot_of), max(depth, 1)), -1, dtype=np.int64)
            for slot, chain in chains.items():
                above[slot, : len(chain)] = chain
            present = above[above >= 0]
            sizes = np.bincount(present, minlength=len(vertices)) if len(present) else np.zeros(len(vertices), np.int64)
            kept = self._kept = (generation, above, sizes)
        return kept[1], kept[2]

    def keep_counts(self, hidden: HiddenNodes, arrays: Arrays | None, size: int) -> None:
        """Count ``hidden``'s nodes by domain (its mask is new) and flag the vertices a walk may enter among ``size``
        (:attr:`HiddenNodes.open`), to be kept by its changes; ``arrays`` None: no levels."""
        hidden.above = hidden.counts = hidden.sizes = None
        opened = np.ones(size, dtype=bool)
        uid_of = hidden.uid_of
        opened[[uid for name in hidden.names if (uid := uid_of.get(name, size)) < size]] = False
        if arrays is not None and hidden.mask is not None:
            hidden.above, hidden.sizes = arrays
            counts = hidden.counts = count_hidden(arrays, hidden.names, hidden.slot_of, hidden.mask)
            sizes = arrays[1][:size]
            opened[(sizes > 0) & (counts[:size] >= sizes)] = False
        hidden.open = opened

    def exclude(
        self, excluded: ExcludedNames, kept: npt.NDArray[np.int64] | None, arrays: Arrays, slot_of: dict[str, int]
    ) -> None:
        """Tell ``excluded`` how many hidden nodes each domain holds (``kept``: counted already, by its
        :class:`HiddenNodes`)."""
        counts = kept if kept is not None else count_hidden(arrays, excluded.names, slot_of, None)
        excluded.counts, excluded.sizes = counts, arrays[1]
        excluded.covers = counts.item  # a count, true when some (an int: compiled, a bool return would be checked)


def count_hidden(
    arrays: Arrays, names: Collection[str], slot_of: dict[str, int], mask: npt.NDArray[np.bool_] | None
) -> npt.NDArray[np.int64]:
    """By vertex uid, how many of the ``names`` nodes each domain vertex (zone, rack) holds (``mask``: the same nodes
    as flags by slot, when the caller has it)."""
    above, sizes = arrays
    if mask is None:
        mask = np.zeros(len(above) + 1, dtype=bool)
        mask[[slot_of[name] for name in names if name in slot_of and slot_of[name] < len(above)]] = True
    rows = above[: len(mask)][mask[: len(above)]]
    return np.bincount(rows[rows >= 0], minlength=len(sizes))


def domain_of(vertices: list[Vertex], node: Vertex, kind: str) -> int | None:
    """The uid of ``node``'s domain vertex of type ``kind`` (``rack``), None when it has none."""
    vertex = node
    while vertex.parent != -1:
        vertex = vertices[vertex.parent]
        if vertex.type == kind:
            uid: int = vertex.uid
            return uid
    return None


def domain_key(vertices: list[Vertex], node: Vertex) -> tuple[int, ...]:
    """(id, uniq id) of each of ``node``'s domains, top first: the walk picks a domain before a node in it."""
    key: list[int] = []
    parent = node.parent
    while parent != -1 and vertices[parent].parent != -1:
        key[:0] = (vertices[parent].id, vertices[parent].uniq_id)
        parent = vertices[parent].parent
    return tuple(key)
