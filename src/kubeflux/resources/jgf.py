"""JSON Graph Format (JGF): Fluxion's reader (``resource/readers/resource_reader_jgf.cpp``) and writers.

Reading follows Fluxion's rules:

* the document is ``{"graph": {"nodes": [...], "edges": [...]}}`` plus an optional ``free_ranks`` idset;
* a node is ``{"id": "<string>", "metadata": {...}}``; ``metadata.type`` and ``metadata.paths`` are required;
  defaults: ``uniq_id`` = int(outer id), ``id`` = ``uniq_id`` (for a ``node`` with a name ending in digits,
  those digits), ``basename`` = type, ``name`` = basename + id, ``size`` 1, ``unit`` "", ``rank`` -1,
  ``status`` 0 (up), ``exclusive`` false, ``properties`` {};
* a path with exactly one ``/`` makes the vertex the root of that subsystem (a second root is an error);
* a node whose path (in any subsystem) and rank are already in the graph is not added again: the existing vertex
  stands for it (this is what makes ``attach`` of a subgraph work, and it also applies to a fresh load);
* edges (``source``, ``target`` = outer ids, ``metadata.subsystem`` default ``containment``) are added in file
  order, but only when one end was newly added.

Older JGF (Fluence, flux-sched < 0.30) names the relation as ``metadata.name = {"containment": "contains"}``
and lists reverse ``in`` edges too. Fluxion now ignores ``name`` (and would add a reverse edge as one more
containment edge); this reader takes the subsystem and relation from ``name`` when ``subsystem`` is absent, so a
reverse edge is kept with relation ``in`` and does not become a child link.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .graph import CONTAINMENT, Graph, GraphFormatError, Status, Vertex, id_from_name_suffix, paused_gc

_INT64_MAX = 2**63 - 1


@dataclass(slots=True)
class JgfVertex:
    """One JGF node with Fluxion's defaults applied; ``key`` is the outer ``id`` string."""

    key: str
    type: str
    basename: str
    name: str
    id: int
    uniq_id: int
    rank: int = -1
    status: Status = Status.UP
    exclusive: bool = False
    unit: str = ""
    size: int = 1
    properties: dict[str, str] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class JgfEdge:
    source: str
    target: str
    subsystem: str = CONTAINMENT
    relation: str = "contains"


@dataclass(slots=True)
class JgfDocument:
    """A validated JGF document; ``free_ranks`` is None when the key is absent."""

    source: str
    vertices: list[JgfVertex]
    edges: list[JgfEdge]
    free_ranks: frozenset[int] | None = None


# ---------------------------------------------------------------------------------------------------- reading


def read_jgf(path: str | Path) -> Graph:
    """Read a JGF file into a new graph."""
    return load_jgf(_read_text(path), source=str(path))


def load_jgf(text: str | bytes, *, source: str = "<string>") -> Graph:
    """Read JGF text into a new graph; ``source`` names it in error messages."""
    graph = Graph()
    with paused_gc():
        add_jgf(graph, parse_jgf(text, source=source))
    return graph


def attach_jgf(graph: Graph, jgf: str | bytes | JgfDocument, *, source: str = "<string>") -> list[int]:
    """Attach a JGF subgraph to ``graph`` (resource-query's ``attach``); return the uids of the added vertices.

    Vertices already present (same path in some subsystem and same rank) are reused; the others are appended,
    and the subgraph's edges that touch an added vertex are appended to their source's out-edges.
    """
    with paused_gc():
        document = jgf if isinstance(jgf, JgfDocument) else parse_jgf(jgf, source=source)
        return add_jgf(graph, document)


def add_jgf(graph: Graph, document: JgfDocument) -> list[int]:
    """Add a parsed document to ``graph`` with Fluxion's unpack rules; return the uids of the added vertices.

    The graph is only changed when the whole document is consistent: errors are detected before any change.
    """
    src = document.source
    by_key: dict[str, int] = {}
    pending_paths: dict[str, int] = {}  # path -> index in ``document.vertices`` of a vertex to be added
    added: list[JgfVertex] = []
    new_roots: dict[str, str] = {}
    first_new = len(graph.vertices)
    for record in document.vertices:
        if record.key in by_key:
            raise GraphFormatError(f"{src}: duplicate JGF node id {record.key!r}")
        existing = _vertex_in_graph(graph, record)
        if existing is None:
            for path in record.paths.values():
                uid = pending_paths.get(path)
                if uid is not None and added[uid - first_new].rank == record.rank:
                    existing = uid
                    break
        if existing is not None:
            by_key[record.key] = existing
            continue
        for subsystem, path in record.paths.items():
            if path.count("/") == 1:
                if subsystem in graph.roots or subsystem in new_roots:
                    raise GraphFormatError(
                        f"{src}: node {record.key!r}: second root {path!r} for subsystem {subsystem!r} "
                        f"(first: {new_roots.get(subsystem) or graph.root(subsystem).paths.get(subsystem)!r})"
                    )
                new_roots[subsystem] = path
        uid = first_new + len(added)
        by_key[record.key] = uid
        for path in record.paths.values():
            pending_paths.setdefault(path, uid)
        added.append(record)

    new_keys = {record.key for record in added}
    for position, edge in enumerate(document.edges):
        for end in (edge.source, edge.target):
            if end not in by_key:
                raise GraphFormatError(
                    f"{src}: edges[{position}] ({edge.source} -> {edge.target}): no node with id {end!r}"
                )
    _check_containment_tree(graph, document, by_key, new_keys, added, new_roots)

    for record in added:
        graph.add_vertex(
            record.type,
            record.basename,
            record.name,
            record.id,
            record.uniq_id,
            size=record.size,
            unit=record.unit,
            rank=record.rank,
            status=record.status,
            properties=record.properties,
            paths=record.paths,
        )
    for subsystem, path in new_roots.items():
        graph.roots[subsystem] = graph.by_path[path]
    for edge in document.edges:
        if edge.source in new_keys or edge.target in new_keys:
            source, target = by_key[edge.source], by_key[edge.target]
            relation = edge.relation
            if edge.subsystem == CONTAINMENT and relation == "contains" and graph.vertices[source].parent == target:
                relation = "in"  # a reverse edge listed as containment: keep it, but not as a child link
            graph.add_edge(source, target, edge.subsystem, relation)
    return list(range(first_new, first_new + len(added)))


def _check_containment_tree(
    graph: Graph,
    document: JgfDocument,
    by_key: dict[str, int],
    new_keys: set[str],
    added: list[JgfVertex],
    new_roots: dict[str, str],
) -> None:
    """Refuse a containment edge that would give a vertex a second containment parent, or give the root or the
    vertex itself one.

    Containment is a tree: a vertex has one containment path, every walk and aggregate filter counts it under one
    parent. Fluxion checks this after loading (``resource_graph_db_t::load`` walks the graph breadth first from
    the containment root) and resource-query exits with "Invalid containment edge detected". Edges are taken as
    :func:`add_jgf` adds them: only those touching an added vertex, and a reverse edge (to the source's own
    parent) is no child link.
    """
    src = document.source
    first_new = len(graph.vertices)
    parents: dict[int, tuple[int, int]] = {}  # child -> (parent, position of its edge; -1: already in the graph)
    root = graph.roots.get(CONTAINMENT)
    if root is None and CONTAINMENT in new_roots:
        root = next(
            first_new + index
            for index, record in enumerate(added)
            if record.paths.get(CONTAINMENT) == new_roots[CONTAINMENT]
        )

    def parent_of(uid: int) -> tuple[int, int]:
        known = parents.get(uid)
        if known is not None:
            return known
        return (graph.vertices[uid].parent if uid < first_new else -1), -1

    for position, edge in enumerate(document.edges):
        if edge.subsystem != CONTAINMENT or edge.relation != "contains":
            continue
        if edge.source not in new_keys and edge.target not in new_keys:
            continue
        source, target = by_key[edge.source], by_key[edge.target]
        if parent_of(source)[0] == target:
            continue  # a reverse edge: kept with relation "in"
        where = f"{src}: edges[{position}] ({edge.source} -> {edge.target})"
        name = _name(graph, added, first_new, target)
        if target == source:
            raise GraphFormatError(f"{where}: invalid containment edge: {name} would contain itself")
        if target == root:
            raise GraphFormatError(f"{where}: invalid containment edge: {name} is the containment root")
        parent, at = parent_of(target)
        first = "already in the graph" if at == -1 else f"edges[{at}]"
        if parent == source:
            raise GraphFormatError(
                f"{where}: invalid containment edge: {name} is in {_name(graph, added, first_new, source)} already "
                f"({first})"
            )
        if parent != -1:
            raise GraphFormatError(
                f"{where}: invalid containment edge: {name} would have two containment parents, "
                f"{_name(graph, added, first_new, parent)} ({first}) and {_name(graph, added, first_new, source)}"
            )
        parents[target] = (source, position)


def _name(graph: Graph, added: list[JgfVertex], first_new: int, uid: int) -> str:
    return graph.vertices[uid].name if uid < first_new else added[uid - first_new].name


def _vertex_in_graph(graph: Graph, record: JgfVertex) -> int | None:
    for path in record.paths.values():
        uid = graph.uid_at(path)
        if uid is not None and graph.vertices[uid].rank == record.rank:
            return uid
    return None


def parse_jgf(text: str | bytes, *, source: str = "<string>") -> JgfDocument:
    """Parse and validate JGF text; every error names ``source`` and the offending node, edge or key."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise GraphFormatError(f"{source}: not valid JSON: {error}") from error
    except UnicodeDecodeError as error:
        raise GraphFormatError(f"{source}: not UTF-8 text: {error}") from error
    return jgf_document(data, source=source)


def jgf_document(data: Any, *, source: str = "<object>") -> JgfDocument:
    """Validate an already decoded JGF object (e.g. a ``dict`` built in memory), as :func:`parse_jgf` does."""
    if not isinstance(data, dict):
        raise GraphFormatError(f"{source}: a JGF document must be a JSON object")
    graph = data.get("graph")
    if not isinstance(graph, dict):
        raise GraphFormatError(f"{source}: JGF does not contain a required key (graph) holding an object")
    free_ranks = None
    if "free_ranks" in data:
        free_ranks = decode_idset(data["free_ranks"], f"{source}: free_ranks")
    nodes = graph.get("nodes")
    edges = graph.get("edges")
    if not isinstance(nodes, list):
        raise GraphFormatError(f"{source}: JGF does not contain a required key (graph.nodes) holding an array")
    if not isinstance(edges, list):
        raise GraphFormatError(f"{source}: JGF does not contain a required key (graph.edges) holding an array")
    vertices = [_parse_node(node, position, source) for position, node in enumerate(nodes)]
    return JgfDocument(
        source, vertices, [_parse_edge(edge, position, source) for position, edge in enumerate(edges)], free_ranks
    )


def _parse_node(node: Any, position: int, source: str) -> JgfVertex:
    where = f"{source}: nodes[{position}]"
    if not isinstance(node, dict):
        raise GraphFormatError(f"{where}: a node must be an object")
    key = node.get("id")
    if not isinstance(key, str):
        raise GraphFormatError(f"{where}: the node id must be a string, got {key!r}")
    where = f"{source}: node {key!r}"
    meta = node.get("metadata")
    if not isinstance(meta, dict):
        raise GraphFormatError(f"{where}: key (metadata) is missing or not an object")
    type_ = _get_str(meta, "type", where)
    if type_ is None:
        raise GraphFormatError(f"{where}: metadata lacks the required key (type)")
    basename = _get_str(meta, "basename", where)
    name = _get_str(meta, "name", where)
    id_ = _get_int(meta, "id", where)
    uniq_id = _get_int(meta, "uniq_id", where)
    rank = _get_int(meta, "rank", where)
    status = _get_int(meta, "status", where)
    exclusive = _get_bool(meta, "exclusive", where)
    unit = _get_str(meta, "unit", where)
    size = _get_int(meta, "size", where)
    if "paths" not in meta:
        raise GraphFormatError(f"{where}: metadata lacks the required key (paths)")
    paths = _string_map(meta["paths"], "paths", where)
    properties = _string_map(meta.get("properties"), "properties", where)

    if uniq_id is None:
        try:
            uniq_id = int(key)
        except ValueError:
            raise GraphFormatError(
                f"{where}: value for key (uniq_id) could not be inferred from the outer id {key!r}"
            ) from None
    if id_ is None:
        id_ = uniq_id
        if type_ == "node" and name is not None:
            suffix = id_from_name_suffix(name)
            if suffix is not None:
                if suffix > _INT64_MAX:
                    raise GraphFormatError(f"{where}: could not extract an id from host name {name!r}")
                id_ = suffix
    if status not in (None, 0, 1):
        raise GraphFormatError(f"{where}: status={status!r}; expected 0 (up) or 1 (down)")
    if size is not None and size < 0:
        raise GraphFormatError(f"{where}: size={size!r} must not be negative")
    if basename is None:
        basename = type_
    if name is None:
        name = basename + str(id_)
    # Fluxion keeps paths in a map ordered by subsystem interning: containment (interned first) leads.
    if CONTAINMENT in paths and next(iter(paths)) != CONTAINMENT:
        paths = {CONTAINMENT: paths.pop(CONTAINMENT), **paths}
    return JgfVertex(
        key=key,
        type=type_,
        basename=basename,
        name=name,
        id=id_,
        uniq_id=uniq_id,
        rank=-1 if rank is None else rank,
        status=Status.UP if status is None else Status(status),
        exclusive=bool(exclusive),
        unit="" if unit is None else unit,
        size=1 if size is None else size,
        properties=properties,
        paths=paths,
    )


def _parse_edge(edge: Any, position: int, source: str) -> JgfEdge:
    where = f"{source}: edges[{position}]"
    if not isinstance(edge, dict):
        raise GraphFormatError(f"{where}: an edge must be an object")
    ends = [edge.get("source"), edge.get("target")]
    if not all(isinstance(end, str) for end in ends):
        raise GraphFormatError(f"{where}: malformed edge: source and target must be node id strings, got {ends!r}")
    meta = edge.get("metadata")
    subsystem: Any = CONTAINMENT
    relation: Any = "contains"
    if meta is not None:
        if not isinstance(meta, dict):
            raise GraphFormatError(f"{where}: edge metadata must be an object")
        if "subsystem" in meta:
            subsystem = meta["subsystem"]
        elif isinstance(meta.get("name"), dict) and meta["name"]:
            subsystem, relation = next(iter(meta["name"].items()))
        if not isinstance(subsystem, str) or not isinstance(relation, str):
            raise GraphFormatError(f"{where}: edge subsystem and relation must be strings")
    return JgfEdge(str(ends[0]), str(ends[1]), subsystem, relation)


def _get_str(meta: Mapping[str, Any], key: str, where: str) -> str | None:
    value = meta.get(key)
    if value is None or isinstance(value, str):
        return value
    raise GraphFormatError(f"{where}: metadata key ({key}) must be a string, got {value!r}")


def _get_int(meta: Mapping[str, Any], key: str, where: str) -> int | None:
    value = meta.get(key)
    if value is None:
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise GraphFormatError(f"{where}: metadata key ({key}) must be an integer, got {value!r}")
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:  # Fluxion's json_int_t: jansson refuses to read the file
        raise GraphFormatError(f"{where}: metadata key ({key}) is out of range (a 64-bit integer), got {value}")
    return value


def _get_bool(meta: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = meta.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise GraphFormatError(f"{where}: metadata key ({key}) must be true or false, got {value!r}")


def _string_map(value: Any, key: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}: key ({key}) must be an object or null")
    for name, item in value.items():
        if not isinstance(item, str):
            raise GraphFormatError(f"{where}: {key}.{name} must be a string, got {item!r}")
    return dict(value)


def decode_idset(value: Any, where: str) -> frozenset[int]:
    """Decode an RFC 22 idset (``"0-3,7"``, ``"[1]"``, or JSON such as ``free_ranks``) as Fluxion does: dump it as
    compact JSON, drop quotes, parse; errors name ``where`` (e.g. ``"R.json: free_ranks"``)."""
    text = json.dumps(value, separators=(",", ":")).replace('"', "")
    body = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    ranks: set[int] = set()
    try:
        for part in body.split(","):
            if not part:
                if body:
                    raise ValueError
                continue
            low, _, high = part.partition("-")
            first, last = int(low), int(high) if high else int(low)
            if first < 0 or last < first:
                raise ValueError
            ranks.update(range(first, last + 1))
    except ValueError:
        raise GraphFormatError(f'{where}={value!r} is not a valid idset (e.g. "0-3,7")') from None
    return frozenset(ranks)


def _read_text(path: str | Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise GraphFormatError(f"{path}: cannot read JGF file: {error.strerror}") from error


# ---------------------------------------------------------------------------------------------------- writing


def vertex_metadata(
    vertex: Vertex,
    *,
    needs: int | None = None,
    exclusive: bool = False,
    agfilter: Mapping[str, str] | None = None,
    ephemeral: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``metadata`` of one vertex as Fluxion's JGF *match* writer emits it (``emit_vtx_base``).

    Keys in order: ``type``; ``basename`` if it differs from the type; ``name`` if it differs from basename +
    id; ``id``; ``rank``; ``properties`` if any (sorted by key); ``unit`` if not ""; ``exclusive: true`` if
    exclusive; ``size`` = ``needs`` (the allocated amount; default the vertex size) if not 1; ``paths``;
    ``ephemeral`` and ``agfilter`` if given and not empty.
    """
    meta: dict[str, Any] = {"type": vertex.type}
    if vertex.basename != vertex.type:
        meta["basename"] = vertex.basename
    if vertex.name != vertex.basename + str(vertex.id):
        meta["name"] = vertex.name
    meta["id"] = vertex.id
    meta["rank"] = vertex.rank
    if vertex.properties:
        meta["properties"] = dict(sorted(vertex.properties.items()))
    if vertex.unit:
        meta["unit"] = vertex.unit
    if exclusive:
        meta["exclusive"] = True
    amount = vertex.size if needs is None else needs
    if amount != 1:
        meta["size"] = amount
    if vertex.paths:
        meta["paths"] = dict(vertex.paths)
    if ephemeral:
        meta["ephemeral"] = dict(ephemeral)
    if agfilter:
        meta["agfilter"] = dict(agfilter)
    return meta


def full_vertex_metadata(vertex: Vertex, *, exclusive: bool = False) -> dict[str, Any]:
    """Every field, in the order of the JGF files Fluxion ships (``type, basename, name, id, uniq_id, rank,
    exclusive, unit, size``, then ``status`` if down, ``properties`` if any, ``paths``); reads back identically.
    """
    meta: dict[str, Any] = {
        "type": vertex.type,
        "basename": vertex.basename,
        "name": vertex.name,
        "id": vertex.id,
        "uniq_id": vertex.uniq_id,
        "rank": vertex.rank,
        "exclusive": exclusive,
        "unit": vertex.unit,
        "size": vertex.size,
    }
    if vertex.status != Status.UP:
        meta["status"] = int(vertex.status)
    if vertex.properties:
        meta["properties"] = dict(sorted(vertex.properties.items()))
    meta["paths"] = dict(vertex.paths)
    return meta


FEW_EDGES = 64
"""Out-degree above which :func:`graph_to_jgf` looks edges up from their targets."""


def graph_to_jgf(graph: Graph, uids: Iterable[int] | None = None) -> dict[str, Any]:
    """The whole graph (or the given vertices) as a JGF document with full metadata.

    Nodes are in uid order with outer id = ``uniq_id``; edges are those between chosen vertices, grouped by
    source in uid order and in out-edge order within a source (the order of Fluxion's own JGF dumps).
    Removed vertices are left out; reserved leaves are made first.
    """
    graph.make_all_leaves()
    vertices = graph.vertices
    chosen = sorted(set(range(len(vertices)) if uids is None else uids))
    chosen = [uid for uid in chosen if not vertices[uid].removed]
    inside = set(chosen)
    nodes = [{"id": str(vertices[uid].uniq_id), "metadata": full_vertex_metadata(vertices[uid])} for uid in chosen]
    edges = []
    for uid in chosen:
        out = vertices[uid].out
        if len(out) > FEW_EDGES and len(out) > len(inside):
            # A wide source (a cluster of thousands of nodes): find its edges from the few chosen targets.
            out = sorted(i for target in inside for i in graph.in_edges(target) if graph.edges[i].source == uid)
        for index in out:
            edge = graph.edges[index]
            if edge.target in inside:
                edges.append(
                    {
                        "source": str(vertices[uid].uniq_id),
                        "target": str(vertices[edge.target].uniq_id),
                        "metadata": {"subsystem": edge.subsystem},
                    }
                )
    return {"graph": {"nodes": nodes, "edges": edges}}


def dumps_jgf(graph: Graph, uids: Iterable[int] | None = None, *, indent: int | None = None) -> str:
    """JGF text; compact by default (``indent`` switches json to its much slower pure-Python encoder)."""
    with paused_gc():
        return json.dumps(graph_to_jgf(graph, uids), indent=indent)


def write_jgf(graph: Graph, path: str | Path, uids: Iterable[int] | None = None, *, indent: int | None = None) -> None:
    Path(path).write_text(dumps_jgf(graph, uids, indent=indent) + "\n")
