"""The graph view's nodes as a match hides them: each node's vertex and slot, and the levels above them.

A :class:`~kubeflux.scheduler.graphview.GraphView` holds one :class:`NodeLevels`. Each admitted node keeps a slot (the
index of its flag in a :class:`~kubeflux.scheduler.hiding.HiddenNodes` mask) for as long as the view lives; its
vertex uid may change when it is attached again. Every attach starts a new *node generation*: the masks (with the
vertices a walk may enter), the levels' arrays (:class:`~kubeflux.scheduler.hiding.Levels`) and the domains of a
level type (:meth:`NodeLevels.domains`) are made again for it the first time they are read.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import numpy.typing as npt

from kubeflux.resources.graph import Graph, Vertex
from kubeflux.scheduler.hiding import Arrays, ExcludedNames, HiddenNodes, Levels, domain_of

__all__ = ["NodeLevels"]


class NodeLevels:
    """The nodes' vertices and slots, and the topology levels (zones, racks) above them (see the module docstring)."""

    def __init__(self, uid_of: dict[str, int], levelled: bool) -> None:
        self.uid_of = uid_of
        """Node name → its node vertex's uid (a new dict whenever a node is attached: see :meth:`excluded`)."""
        self.slot_of = {name: slot for slot, name in enumerate(uid_of)}
        """Node name → its slot in the hidden nodes' masks (a name keeps its slot; a new name takes the next one)."""
        self.levelled = levelled
        """Whether some node sits below levels (zones, racks): a match then tells the engine the domains' hidden."""
        self.generation = 0
        self._levels = Levels()
        self._domains: dict[str, tuple[int, dict[str, int | None]]] = {}
        """:meth:`domains` by level type, with the node generation they were found for."""

    def attach(self, name: str, uid: int | None, levelled: bool) -> None:
        """Node ``name`` was attached (at vertex ``uid``; None: not in the graph), below levels if ``levelled``: a
        new node generation."""
        self.uid_of = {**self.uid_of, name: uid} if uid is not None else dict(self.uid_of)
        if name not in self.slot_of:
            self.slot_of = {**self.slot_of, name: len(self.slot_of)}
        self.generation += 1
        self.levelled = self.levelled or levelled

    def excluded(
        self, names: Collection[str], hide: Collection[str] | HiddenNodes, vertices: list[Vertex]
    ) -> ExcludedNames:
        """The engine's ``excluded`` for the nodes ``names`` (those of ``hide``, or more): with the mask of
        ``hide``'s nodes when they are all, and with each domain's count of them on a graph with levels."""
        excluded = ExcludedNames(names, vertices)
        hidden = hide if isinstance(hide, HiddenNodes) and names is hide.names else None
        if hidden is not None:
            self._mask(hidden, vertices)
            excluded.open = hidden.open
        if self.levelled:
            kept = hidden.counts if hidden is not None else None
            self._levels.exclude(excluded, kept, self._arrays(vertices), self.slot_of)
        return excluded

    def _mask(self, hidden: HiddenNodes, vertices: list[Vertex]) -> npt.NDArray[np.bool_]:
        """``hidden``'s flags by node slot on this view (one more, always False, for vertices that are not nodes),
        made with its :attr:`~kubeflux.scheduler.hiding.HiddenNodes.open` when it has none for the view's current
        nodes (they change when a node is attached)."""
        owner = (id(self), self.generation)
        if hidden.owner != owner or hidden.mask is None or hidden.open is None:
            slot_of = self.slot_of
            mask = np.zeros(len(slot_of) + 1, dtype=bool)
            mask[[slot_of[name] for name in hidden.names if name in slot_of]] = True
            hidden.mask, hidden.slot_of, hidden.uid_of, hidden.owner = mask, slot_of, self.uid_of, owner
            self._levels.keep_counts(hidden, self._arrays(vertices) if self.levelled else None, len(vertices))
        return hidden.mask

    def domains(self, kind: str, graph: Graph, paths: dict[str, str]) -> dict[str, int | None]:
        """Each node's (by its ``paths``) domain vertex of type ``kind`` (None: none above it), kept until a node is
        attached."""
        kept = self._domains.get(kind)
        if kept is None or kept[0] != self.generation:
            found = {name: graph.vertex_at(path) for name, path in paths.items()}
            domains = {name: None if v is None else domain_of(graph.vertices, v, kind) for name, v in found.items()}
            kept = self._domains[kind] = (self.generation, domains)
        return kept[1]

    def _arrays(self, vertices: list[Vertex]) -> Arrays:
        return self._levels.arrays(self.generation, vertices, self.uid_of, self.slot_of)
