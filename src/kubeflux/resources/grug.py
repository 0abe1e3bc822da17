"""GRUG reader: expand a GraphML *generation recipe* into a resource graph, exactly as Fluxion does.

A GRUG file (``resource/readers/resource_reader_grug.cpp`` and ``resource_spec_grug.cpp`` in flux-sched) is a
small GraphML graph whose vertices are resource pool templates (``type``, ``basename``, ``size``, ``unit``,
``subsystem``, ``root``) and whose edges say how to generate children (``gen_method``: ``MULTIPLY`` by
``multi_scale``, ``ASSOCIATE_IN`` or ``ASSOCIATE_BY_PATH_IN`` for auxiliary subsystems such as ``power``) and how
to number them (``id_scope``, ``id_start``, ``id_stride``).

Fluxion walks the recipe with Boost's ``depth_first_search`` (every recipe vertex in document order is a start
point; out-edges in document order) and generates on each *tree edge*:

* all vertices of one recipe edge are made before the walk descends, so uids (= ``uniq_id``) run level by level:
  ``tiny0``, ``rack0``, ``node0``, ``node1``, ``socket0..3``, then the cores of every socket, …;
* a root recipe vertex is emitted (once per subsystem, named ``basename + "0"``) when its first tree edge is seen;
* ids: ``id_scope < 0`` gives no id (the name is the bare basename, id -1); ``id_scope == 0`` gives
  ``id_start + i`` (the stride is ignored); ``id_scope = k > 0`` numbers across the k enclosing MULTIPLY levels:
  ``id_start + (j mod W) * multi_scale * id_stride + i * id_stride`` where j is the source's position among all
  vertices generated for the source recipe vertex and W the product of the k innermost enclosing ``multi_scale``.
  Fluxion keeps those scales on a deque pushed by every MULTIPLY tree edge and popped by *every* finished recipe
  vertex (an ASSOCIATE edge pushes nothing, yet its target's finish pops); this reader keeps that quirk.
* only the forward edge is created (current Fluxion has no reverse ``in`` edge); its subsystem is the recipe
  edge's ``e_subsystem`` and its relation the recipe's ``relation`` (``rrelation`` is read and ignored).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .graph import Graph, GraphFormatError, paused_gc

_MULTIPLY = "MULTIPLY"
_ASSOCIATE_IN = "ASSOCIATE_IN"
_ASSOCIATE_BY_PATH_IN = "ASSOCIATE_BY_PATH_IN"
_GEN_METHODS = (_MULTIPLY, _ASSOCIATE_IN, _ASSOCIATE_BY_PATH_IN)
_INTEGER = re.compile(r"[+-]?[0-9]+")

# The properties Fluxion registers with Boost's dynamic_properties, with their C++ member types. Any other
# property makes boost::read_graphml throw, so it is an error here too.
_VERTEX_INT = {"root", "size"}
_VERTEX_STR = {"type", "basename", "unit", "subsystem"}
_EDGE_INT = {"id_scope", "id_start", "id_stride", "multi_scale", "as_tgt_uplvl", "as_src_uplvl"}
_EDGE_STR = {"e_subsystem", "relation", "rrelation", "gen_method", "as_tgt_subsystem"}


@dataclass(slots=True)
class RecipeVertex:
    """A resource pool template; unset properties take the key's ``<default>`` or C++ zero values."""

    xml_id: str
    root: int = 0
    type: str = ""
    basename: str = ""
    size: int = 0
    unit: str = ""
    subsystem: str = ""


@dataclass(slots=True)
class RecipeEdge:
    """How to generate (or associate) the target pools from the source pools."""

    xml_id: str
    source: int
    target: int
    e_subsystem: str = ""
    relation: str = ""
    rrelation: str = ""
    gen_method: str = ""
    id_scope: int = 0
    id_start: int = 0
    id_stride: int = 0
    multi_scale: int = 0
    as_tgt_subsystem: str = ""
    as_tgt_uplvl: int = 0
    as_src_uplvl: int = 0


@dataclass(slots=True)
class Recipe:
    """A parsed GRUG recipe: vertices in document order, out-edges per vertex in document order."""

    source: str
    vertices: list[RecipeVertex]
    edges: list[RecipeEdge]
    out: list[list[int]]


def read_grug(path: str | Path, *, rank: int = -1) -> Graph:
    """Read a GRUG file and generate its graph; every vertex gets ``rank`` (resource-query uses -1)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise GraphFormatError(f"{path}: cannot read GRUG file: {error.strerror}") from error
    return generate(parse_recipe(data, source=str(path)), rank=rank)


def load_grug(text: str | bytes, *, source: str = "<string>", rank: int = -1) -> Graph:
    """Generate a graph from GRUG text; ``source`` names it in error messages."""
    return generate(parse_recipe(text, source=source), rank=rank)


def parse_recipe(text: str | bytes, *, source: str = "<string>") -> Recipe:
    """Parse GRUG GraphML into a :class:`Recipe` (the equivalent of Boost's ``read_graphml``)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        raise GraphFormatError(f"{source}: not well-formed XML: {error}") from error
    if _local(root.tag) != "graphml":
        raise GraphFormatError(f"{source}: root element is <{_local(root.tag)}>, expected <graphml>")

    keys: dict[str, tuple[str, str]] = {}  # key id -> (for, attr.name)
    defaults: dict[str, dict[str, str]] = {"node": {}, "edge": {}}
    for key in root:
        if _local(key.tag) != "key":
            continue
        key_id = key.get("id")
        if key_id is None:
            raise GraphFormatError(f"{source}: <key> without an id attribute")
        domain = key.get("for", "all")
        name = key.get("attr.name", key_id)
        keys[key_id] = (domain, name)
        for child in key:
            if _local(child.tag) == "default":
                for kind in ("node", "edge"):
                    if domain in (kind, "all"):
                        defaults[kind][name] = (child.text or "").strip()

    graphs = [child for child in root if _local(child.tag) == "graph"]
    if not graphs:
        raise GraphFormatError(f"{source}: no <graph> element")
    graph = graphs[0]
    if graph.get("edgedefault", "directed") != "directed":
        raise GraphFormatError(f'{source}: <graph id={graph.get("id")!r}> must have edgedefault="directed"')

    vertices: list[RecipeVertex] = []
    index: dict[str, int] = {}
    edge_elements: list[ET.Element] = []
    for element in graph:
        tag = _local(element.tag)
        if tag == "node":
            xml_id = element.get("id")
            if xml_id is None:
                raise GraphFormatError(f"{source}: <node> without an id attribute")
            if xml_id in index:
                raise GraphFormatError(f"{source}: duplicate <node id={xml_id!r}>")
            vertex = RecipeVertex(xml_id)
            _apply(vertex, _properties(element, keys, defaults["node"], "node", source), source, f"node {xml_id!r}")
            index[xml_id] = len(vertices)
            vertices.append(vertex)
        elif tag == "edge":
            edge_elements.append(element)

    edges: list[RecipeEdge] = []
    out: list[list[int]] = [[] for _ in vertices]
    for position, element in enumerate(edge_elements):
        xml_id = element.get("id") or f"#{position}"
        where = f"edge {xml_id!r}"
        if element.get("directed", "true") == "false":
            raise GraphFormatError(f"{source}: {where} is undirected; GRUG recipes are directed")
        ends = []
        for end in ("source", "target"):
            end_id = element.get(end)
            if end_id is None:
                raise GraphFormatError(f"{source}: {where} has no {end} attribute")
            if end_id not in index:
                raise GraphFormatError(f"{source}: {where} refers to unknown {end} node {end_id!r}")
            ends.append(index[end_id])
        edge = RecipeEdge(xml_id, ends[0], ends[1])
        _apply(edge, _properties(element, keys, defaults["edge"], "edge", source), source, where)
        out[edge.source].append(len(edges))
        edges.append(edge)
    return Recipe(source, vertices, edges, out)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _properties(
    element: ET.Element, keys: dict[str, tuple[str, str]], defaults: dict[str, str], kind: str, source: str
) -> dict[str, str]:
    values = dict(defaults)
    for data in element:
        if _local(data.tag) != "data":
            continue
        key_id = data.get("key")
        if key_id is None or key_id not in keys:
            raise GraphFormatError(
                f"{source}: {kind} {element.get('id')!r}: <data key={key_id!r}> refers to no declared <key>"
            )
        values[keys[key_id][1]] = (data.text or "").strip()
    return values


def _apply(target: RecipeVertex | RecipeEdge, values: dict[str, str], source: str, where: str) -> None:
    ints, strs = (_VERTEX_INT, _VERTEX_STR) if isinstance(target, RecipeVertex) else (_EDGE_INT, _EDGE_STR)
    for name, text in values.items():
        if name in strs:
            setattr(target, name, text)
        elif name in ints:
            setattr(target, name, _integer(name, text, f"{source}: {where}"))
        else:
            raise GraphFormatError(f"{source}: {where}: unknown GRUG property {name!r}")
    if isinstance(target, RecipeVertex) and target.size < 0:
        raise GraphFormatError(f"{source}: {where}: size={target.size} must not be negative")


def _integer(name: str, text: str, where: str) -> int:
    """``text`` read as Boost's ``lexical_cast`` reads the property's C++ type: ASCII digits with an optional sign
    (not Python's ``1_0`` or other scripts' digits), within ``long`` for ``size``, ``int`` for the rest."""
    if not _INTEGER.fullmatch(text):
        raise GraphFormatError(f"{where}: {name}={text!r} is not an integer")
    value = int(text)
    bits = 64 if name == "size" else 32
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise GraphFormatError(f"{where}: {name}={value} is out of range (a {bits}-bit integer)")
    return value


def generate(recipe: Recipe, *, rank: int = -1) -> Graph:
    """Expand a recipe into a new :class:`Graph` (Fluxion's ``dfs_emitter_t`` driven by a DFS)."""
    graph = Graph()
    with paused_gc():
        _Emitter(recipe, graph, rank).run()
    return graph


class _Emitter:
    def __init__(self, recipe: Recipe, graph: Graph, rank: int) -> None:
        self.recipe = recipe
        self.graph = graph
        self.rank = rank
        self.generated: dict[int, list[int]] = {}
        self.scales: list[int] = []  # innermost first, as Fluxion's deque (push_front / pop_front)

    def run(self) -> None:
        recipe = self.recipe
        color = [0] * len(recipe.vertices)  # 0 white, 1 gray, 2 black
        for start in range(len(recipe.vertices)):
            if color[start] != 0:
                continue
            # Iterative DFS with Boost's event order: tree_edge before descending, finish after all out-edges.
            color[start] = 1
            stack: list[tuple[int, int]] = [(start, 0)]
            while stack:
                u, position = stack.pop()
                out = recipe.out[u]
                while position < len(out):
                    edge = recipe.edges[out[position]]
                    position += 1
                    if color[edge.target] == 0:
                        self.tree_edge(edge)
                        stack.append((u, position))
                        color[edge.target] = 1
                        u, out, position = edge.target, recipe.out[edge.target], 0
                color[u] = 2
                if self.scales:
                    self.scales.pop(0)

    def tree_edge(self, edge: RecipeEdge) -> None:
        recipe = self.recipe
        source = recipe.vertices[edge.source]
        if source.root and not self.generated.get(edge.source):
            self.generated[edge.source] = [self.emit_root(source)]
        sources = self.generated.setdefault(edge.source, [])
        targets: list[int] = []
        self.generated[edge.target] = targets
        method = edge.gen_method
        if method == _MULTIPLY:
            self.multiply(edge, sources, targets)
            self.scales.insert(0, edge.multi_scale)
        elif method == _ASSOCIATE_IN:
            self.associate(edge, sources, targets, by_path=False)
        elif method == _ASSOCIATE_BY_PATH_IN:
            self.associate(edge, sources, targets, by_path=True)
        else:
            raise GraphFormatError(
                f"{recipe.source}: edge {edge.xml_id!r}: unknown gen_method {method!r} (expected one of "
                f"{', '.join(_GEN_METHODS)})"
            )

    def emit_root(self, template: RecipeVertex) -> int:
        graph = self.graph
        existing = graph.roots.get(template.subsystem)
        if existing is not None:
            return existing
        name = template.basename + "0"
        vertex = graph.add_vertex(
            template.type,
            template.basename,
            name,
            0,
            len(graph.vertices),
            size=template.size,
            unit=template.unit,
            rank=self.rank,
            paths={template.subsystem: "/" + name},
        )
        uid: int = vertex.uid
        graph.roots[template.subsystem] = uid
        return uid

    def multiply(self, edge: RecipeEdge, sources: list[int], targets: list[int]) -> None:
        """Make ``multi_scale`` children under every source."""
        graph = self.graph
        template = self.recipe.vertices[edge.target]
        scale = edge.multi_scale
        scope = edge.id_scope
        start = edge.id_start
        stride = edge.id_stride
        wrap = 1
        if scope > 0:
            for value in self.scales[:scope]:
                wrap *= value
            if wrap == 0:
                raise GraphFormatError(
                    f"{self.recipe.source}: edge {edge.xml_id!r}: id_scope={scope} spans a multi_scale of 0"
                )
            wrap = abs(wrap)

        for j, source_uid in enumerate(sources):
            if scope < 0:
                ids: Iterable[int] = [-1] * scale if scale > 0 else ()
            elif scope == 0:
                ids = range(start, start + scale)
            else:
                base = start + (j % wrap) * scale * stride
                ids = range(base, base + scale * stride, stride) if stride else [base] * max(scale, 0)
            targets.extend(
                graph.add_children(
                    source_uid,
                    template.type,
                    template.basename,
                    ids,
                    size=template.size,
                    unit=template.unit,
                    rank=self.rank,
                    subsystem=template.subsystem,
                    edge_subsystem=edge.e_subsystem,
                    relation=edge.relation,
                )
            )

    def associate(self, edge: RecipeEdge, sources: list[int], targets: list[int], *, by_path: bool) -> None:
        graph = self.graph
        vertices = graph.vertices
        template = self.recipe.vertices[edge.target]
        candidates = list(graph.by_type.get(template.type, ()))
        subsystem = edge.e_subsystem
        within = edge.as_tgt_subsystem
        for source_uid in sources:
            source = vertices[source_uid]
            source_prefix = _path_prefix(source.paths.get(within, ""), edge.as_src_uplvl) if by_path else ""
            for target_uid in candidates:
                target = vertices[target_uid]
                if by_path and _path_prefix(target.paths.get(within, ""), edge.as_tgt_uplvl) != source_prefix:
                    continue
                graph.set_path(target, subsystem, source.paths.get(subsystem, "") + "/" + target.name)
                # Fluxion's raw_edge reuses an existing source -> target edge instead of adding a second one.
                if graph.find_out_edge(source_uid, target_uid) is None:
                    graph.add_edge(source_uid, target_uid, subsystem, edge.relation)
                targets.append(target_uid)


def _path_prefix(path: str, uplevel: int) -> str:
    """The path cut ``uplevel`` components up, with a trailing slash; "" when it has too few components.

    ``/power0/rack0/pdu0`` with uplevel 1 gives ``/power0/rack0/``. As in Fluxion, a failed cut leaves ""
    and two failed cuts compare equal.
    """
    slashes = path.count("/")
    if uplevel >= slashes:
        return ""
    wanted = slashes - uplevel + 1
    position = 0
    found = 0
    prefix = path
    while found != wanted:
        hit = path.find("/", position)
        if hit == -1:
            prefix = path
            break
        position = hit + 1
        found += 1
    else:
        prefix = path[:position]
    if not prefix.endswith("/"):
        prefix += "/"
    return prefix
