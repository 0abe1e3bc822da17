"""Build a resource graph from plain node descriptions (what a Kubernetes cluster tells us), and grow or shrink it.

Shape and names (after Fluence's JGF, ``flux-k8s/src/fluence/utils``, with Fluxion's naming rules)::

    cluster0                       type cluster, basename = the cluster name given (default "cluster")
      <zone>                       type zone, only for nodes with a zone label; name = the label value
        <rack>                     type rack, only for nodes with a rack label; name = the label value
          <domain>…                one vertex per entry of ``domains`` (type, name), top first: the levels a
                                   scheduler reads from node labels (``kubeflux.scheduler.topology``)
            <node name>            type node; name = the Kubernetes node name
            [socket0..]            type socket, only with ``sockets > 0``
              core0..coreN-1       type core, numbered per node (like a GRUG id_scope=1)
              gpu0..gpuG-1         type gpu
              memory0              type memory: ONE pool per node (per socket with sockets), unit "GB",
                                   size = memory bytes // 2**30 (GiB granules, rounded down; none if 0)

A node's ``id`` is the integer suffix of its name (``kind-worker2`` -> 2, as Fluxion's JGF reader infers it) or,
without one, its rank; its ``basename`` is the name without that suffix. Ranks are given in order of addition
(0, 1, …), so R (rv1) output can name them. ``uniq_id`` is the vertex uid. Children are added in the order
cores, gpus, memory, and nodes/zones/racks in order of first appearance, which is also the matcher's tie order.

:func:`add_node` appends a node (creating its zone/rack when new) and :func:`remove_node` detaches one with
:meth:`Graph.remove_subtree`: its vertices keep their uids but are marked ``removed`` and leave every index, so
allocation tables indexed by uid stay valid. Emptied zones and racks are kept (they hold no resources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .graph import CONTAINMENT, Graph, GraphFormatError, Vertex, id_from_name_suffix, paused_gc

GIB = 2**30
"""Bytes per memory granule: a node with 16 GiB gets a ``memory0`` pool of size 16, unit ``GB``."""


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One machine. ``memory`` is in bytes (Kubernetes' allocatable memory); ``properties`` become the node
    vertex's properties (Fluxion's RFC 31 ``properties`` constraints look at them)."""

    name: str
    cores: int
    memory: int = 0
    gpus: int = 0
    zone: str | None = None
    rack: str | None = None
    sockets: int = 0
    properties: Mapping[str, str] = field(default_factory=dict)
    domains: tuple[tuple[str, str], ...] = ()
    """The node's place above it, top first: (vertex type, vertex name) per level, below its zone and rack."""


def build_graph(nodes: Iterable[NodeSpec], *, cluster: str = "cluster", reserve: bool = False) -> Graph:
    """A new graph with a ``<cluster>0`` root and the given nodes in order; ``reserve``: the leaves of nodes
    without sockets reserved, made when first needed (:meth:`Graph.reserve_leaves`)."""
    graph = Graph()
    with paused_gc():
        _ensure_root(graph, cluster)
        for rank, spec in enumerate(nodes):
            add_node(graph, spec, rank=rank, reserve=reserve)
    return graph


def add_node(
    graph: Graph, spec: NodeSpec, *, cluster: str = "cluster", rank: int | None = None, reserve: bool = False
) -> Vertex:
    """Add one node (and its zone/rack if new) to a built graph; return the node vertex.

    ``rank`` defaults to one more than the highest rank in the graph. ``cluster`` names the root only when the
    graph is still empty. ``reserve``: a node without sockets gets its leaves reserved (:meth:`Graph.reserve_leaves`:
    the same uids, made when first needed). Raises :class:`GraphFormatError` for a bad spec or a node name already
    present.
    """
    _validate(spec)
    if any(graph.vertices[uid].type == "node" for uid in graph.by_name.get(spec.name, ())):
        raise GraphFormatError(f"node {spec.name!r}: a node with this name is already in the graph")
    parent = graph.vertices[_ensure_root(graph, cluster)]
    if spec.zone is not None:
        parent = _ensure_group(graph, parent, "zone", spec.zone)
    if spec.rack is not None:
        parent = _ensure_group(graph, parent, "rack", spec.rack)
    for type_, name in spec.domains:
        parent = _ensure_group(graph, parent, type_, name)

    if rank is None:
        rank = max((r for r in graph.by_rank if r >= 0), default=-1) + 1
    suffix = id_from_name_suffix(spec.name)
    if suffix is None:
        basename, node_id = spec.name, rank
    else:
        basename, node_id = spec.name.rstrip("0123456789") or spec.name, suffix
    node = _child(graph, parent, "node", basename, spec.name, node_id, rank=rank, properties=dict(spec.properties))

    with paused_gc():
        if spec.sockets > 0:
            core_id = gpu_id = 0
            for socket_id in range(spec.sockets):
                socket = _child(graph, node, "socket", "socket", f"socket{socket_id}", socket_id, rank=rank)
                cores = _share(spec.cores, spec.sockets, socket_id)
                gpus = _share(spec.gpus, spec.sockets, socket_id)
                memory = _share(spec.memory // GIB, spec.sockets, socket_id)
                _leaves(graph, socket, rank, range(core_id, core_id + cores), range(gpu_id, gpu_id + gpus))
                if memory > 0:
                    _child(graph, socket, "memory", "memory", f"memory{socket_id}", socket_id, rank=rank, size=memory)
                core_id += cores
                gpu_id += gpus
        elif reserve:
            graph.reserve_leaves(node.uid, spec.cores, spec.gpus, spec.memory // GIB, rank)
        else:
            _leaves(graph, node, rank, range(spec.cores), range(spec.gpus))
            if spec.memory // GIB > 0:
                _child(graph, node, "memory", "memory", "memory0", 0, rank=rank, size=spec.memory // GIB)
    return node


def node_path(spec: NodeSpec, cluster: str = "cluster") -> str:
    """The containment path :func:`add_node` gives ``spec``'s node vertex (``/cluster0/zone-a/rack-1/node-7``)."""
    parts = [cluster + "0"]
    parts += [value for value in (spec.zone, spec.rack) if value is not None]
    parts += [name for _, name in spec.domains]
    parts.append(spec.name)
    return "/" + "/".join(parts)


def remove_node(graph: Graph, name: str) -> list[int]:
    """Detach the node called ``name`` and everything under it; return the removed uids (node first).

    Raises KeyError when there is no such node (or it was already removed).
    """
    for uid in graph.by_name.get(name, ()):
        if graph.vertices[uid].type == "node":
            return graph.remove_subtree(uid)
    raise KeyError(f"no node named {name!r} in the graph")


def _validate(spec: NodeSpec) -> None:
    where = f"node {spec.name!r}"
    if not spec.name or "/" in spec.name:
        raise GraphFormatError(f"{where}: a node name must be non-empty and contain no '/'")
    for label, value in (("zone", spec.zone), ("rack", spec.rack)):
        if value is not None and (not value or "/" in value):
            raise GraphFormatError(f"{where}: {label} label {value!r} must be non-empty and contain no '/'")
    for type_, name in spec.domains:
        if not type_ or "/" in type_ or not name or "/" in name:
            raise GraphFormatError(f"{where}: domain {type_!r} {name!r}: both must be non-empty and contain no '/'")
    for count in ("cores", "memory", "gpus", "sockets"):
        if getattr(spec, count) < 0:
            raise GraphFormatError(f"{where}: {count}={getattr(spec, count)} must not be negative")


def _share(total: int, parts: int, index: int) -> int:
    """``total`` split as evenly as possible over ``parts``, the first ones taking the remainder."""
    return total // parts + (1 if index < total % parts else 0)


def _ensure_root(graph: Graph, cluster: str) -> int:
    root = graph.roots.get(CONTAINMENT)
    if root is not None:
        return root
    if not cluster or "/" in cluster:
        raise GraphFormatError(f"cluster name {cluster!r} must be non-empty and contain no '/'")
    name = cluster + "0"
    vertex = graph.add_vertex("cluster", cluster, name, 0, len(graph.vertices), paths={CONTAINMENT: "/" + name})
    uid: int = vertex.uid
    graph.roots[CONTAINMENT] = uid
    return uid


def _ensure_group(graph: Graph, parent: Vertex, type_: str, label: str) -> Vertex:
    existing = graph.vertex_at(parent.paths[CONTAINMENT] + "/" + label)
    if existing is not None and not existing.removed:
        return existing
    suffix = id_from_name_suffix(label)
    group_id = suffix if suffix is not None else len(graph.by_type.get(type_, ()))
    return _child(graph, parent, type_, label, label, group_id)


def _child(
    graph: Graph,
    parent: Vertex,
    type_: str,
    basename: str,
    name: str,
    id_: int,
    *,
    rank: int = -1,
    size: int = 1,
    properties: dict[str, str] | None = None,
) -> Vertex:
    unit = "GB" if type_ == "memory" else ""
    vertex = graph.add_vertex(
        type_,
        basename,
        name,
        id_,
        len(graph.vertices),
        size=size,
        unit=unit,
        rank=rank,
        properties=properties,
        paths={CONTAINMENT: parent.paths[CONTAINMENT] + "/" + name},
    )
    graph.add_edge(parent.uid, vertex.uid)
    return vertex


def _leaves(graph: Graph, parent: Vertex, rank: int, cores: range, gpus: range) -> None:
    graph.add_children(parent.uid, "core", "core", cores, rank=rank)
    graph.add_children(parent.uid, "gpu", "gpu", gpus, rank=rank)
