"""The resource graph: vertices (resource pools) joined by subsystem edges, as Fluxion models a machine.

A vertex is a *resource pool*: a typed unit (``core``) or a pool of units (``memory`` of size 16, unit ``GB``).
Edges belong to a *subsystem* (``containment`` is the one every graph has; ``power``, ``ib`` … are others) and
carry a relation (``contains``/``in`` in containment). The order in which vertices and out-edges are added is
significant: Fluxion breaks ties between equally scored candidates in that order, so readers must add them in
exactly the order Fluxion's readers do.

This module holds only the structure. Scheduling state (planners, allocations) lives in :mod:`kubeflux.match`,
in tables indexed by :attr:`Vertex.uid`, so the graph can be shared, copied and rebuilt without touching it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

CONTAINMENT = "containment"


class Status(IntEnum):
    """A vertex's status; DOWN vertices (and everything below them) are skipped by the matcher."""

    UP = 0
    DOWN = 1


@dataclass(slots=True)
class Edge:
    """A directed edge of one subsystem, e.g. ``cluster0 -contains-> rack0`` in ``containment``."""

    source: int
    target: int
    subsystem: str = CONTAINMENT
    relation: str = "contains"


@dataclass(slots=True, eq=False)
class Vertex:
    """One resource pool.

    ``uid`` is the vertex's index in :attr:`Graph.vertices` (Fluxion's vertex descriptor); ``uniq_id`` is the
    id Fluxion prints and keys jobs by; ``id`` is the (per-scope) number in the name, e.g. 17 in ``core17``.
    ``paths`` maps a subsystem name to the vertex's path in it (``/tiny0/rack0/node1/socket0/core17``).
    """

    uid: int
    type: str
    basename: str
    name: str
    id: int
    uniq_id: int
    size: int = 1
    unit: str = ""
    rank: int = -1
    status: Status = Status.UP
    properties: dict[str, str] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    out: list[int] = field(default_factory=list)
    """Indices into :attr:`Graph.edges` of this vertex's out-edges, all subsystems, in insertion order."""
    parent: int = -1
    """The containment parent's uid, -1 for the containment root (or a vertex not in containment)."""
    children: list[int] = field(default_factory=list)
    """The containment children's uids, in out-edge order (a cache of the ``contains`` out-edges)."""


class Graph:
    """A resource graph with Fluxion's metadata indexes (by type, name, path, rank; roots per subsystem)."""

    def __init__(self) -> None:
        self.vertices: list[Vertex] = []
        self.edges: list[Edge] = []
        self.roots: dict[str, int] = {}
        self.by_type: dict[str, list[int]] = {}
        self.by_name: dict[str, list[int]] = {}
        self.by_path: dict[str, int] = {}
        self.by_rank: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.vertices)

    def add_vertex(
        self,
        type: str,
        basename: str,
        name: str,
        id: int,
        uniq_id: int,
        *,
        size: int = 1,
        unit: str = "",
        rank: int = -1,
        status: Status = Status.UP,
        properties: dict[str, str] | None = None,
        paths: dict[str, str] | None = None,
    ) -> Vertex:
        """Add a vertex and index it; paths may also be set later with :meth:`set_path`."""
        vertex = Vertex(
            uid=len(self.vertices),
            type=type,
            basename=basename,
            name=name,
            id=id,
            uniq_id=uniq_id,
            size=size,
            unit=unit,
            rank=rank,
            status=status,
            properties=properties if properties is not None else {},
        )
        self.vertices.append(vertex)
        self.by_type.setdefault(type, []).append(vertex.uid)
        self.by_name.setdefault(name, []).append(vertex.uid)
        self.by_rank.setdefault(rank, []).append(vertex.uid)
        for subsystem, path in (paths or {}).items():
            self.set_path(vertex, subsystem, path)
        return vertex

    def set_path(self, vertex: Vertex, subsystem: str, path: str) -> None:
        vertex.paths[subsystem] = path
        self.by_path[path] = vertex.uid

    def add_edge(self, source: int, target: int, subsystem: str = CONTAINMENT, relation: str = "contains") -> Edge:
        """Add an out-edge; a containment ``contains`` edge also sets the child's parent."""
        edge = Edge(source, target, subsystem, relation)
        self.vertices[source].out.append(len(self.edges))
        self.edges.append(edge)
        if subsystem == CONTAINMENT and relation == "contains":
            self.vertices[source].children.append(target)
            self.vertices[target].parent = source
        return edge

    def out_vertices(self, uid: int, subsystem: str, relation: str | None = None) -> list[int]:
        """The targets of a vertex's out-edges in one subsystem (and relation), in insertion order."""
        result = []
        for index in self.vertices[uid].out:
            edge = self.edges[index]
            if edge.subsystem == subsystem and (relation is None or edge.relation == relation):
                result.append(edge.target)
        return result

    def root(self, subsystem: str = CONTAINMENT) -> Vertex:
        return self.vertices[self.roots[subsystem]]

    def vertex_at(self, path: str) -> Vertex | None:
        uid = self.by_path.get(path)
        return None if uid is None else self.vertices[uid]

    def depth(self, uid: int) -> int:
        """Containment depth: the root is at depth 1 (as in the ``---`` prefixes of the simple writer)."""
        depth = 1
        parent = self.vertices[uid].parent
        while parent != -1:
            depth += 1
            parent = self.vertices[parent].parent
        return depth


class GraphFormatError(ValueError):
    """A graph file that cannot be read; the message names the file and the offending element."""
