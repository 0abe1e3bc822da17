"""Writers for matched resource sets (``-F``), byte-compatible with Fluxion's match writers.

The update walk calls :meth:`Writer.vertex` in post-order (children before their parent) and
:meth:`Writer.edge` for each edge it followed; :meth:`Writer.render` returns the text for one match. A writer
answers the calls its format needs: the base class ignores edges and intervals and emits a run of leaves vertex
by vertex.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from kubeflux.resources.graph import CONTAINMENT, Graph, Vertex, id_from_name_suffix
from kubeflux.resources.jgf import vertex_metadata

AgFilter = Mapping[str, str] | None
"""``find``'s per-type use of an aggregate filter, on the vertices it emits (only JGF shows it)."""
Memo = dict[object, str] | None
"""The caller's store of text for one run of leaves, kept across matches (see :meth:`Writer.leaves`)."""


@dataclass(frozen=True, slots=True, init=False)
class Placement:
    """What a match took on one node: the node and the core/gpu vertex names it took there. (Its own
    ``__init__``: compiled, the one :mod:`dataclasses` generates stays interpreted; one per match and bound pod.)"""

    node: str
    cores: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()

    def __init__(self, node: str, cores: tuple[str, ...] = (), gpus: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "cores", cores)
        object.__setattr__(self, "gpus", gpus)

    def __reduce__(self) -> tuple[Any, ...]:  # compiled, a class with its own __init__ is not rebuilt field by field
        return (Placement, (self.node, self.cores, self.gpus))


@mypyc_attr(allow_interpreted_subclasses=True)
class Writer:
    """What the update walk emits a match to. A base class rather than a Protocol: compiled (mypyc), the walk's
    calls of a subclass's methods are then native calls instead of Python attribute lookups and calls."""

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        """Emit one vertex; ``agfilter`` is ``find``'s per-type aggregate-filter use (only JGF shows it)."""
        raise NotImplementedError

    def edge(self, graph: Graph, edge: int) -> None:
        """Emit the edge followed to the vertex emitted last (only JGF shows edges; the others ignore them)."""
        return None

    def leaves(self, level: int, graph: Graph, leaves: list[tuple[int, int, int]], memo: Memo = None) -> None:
        """Emit exclusive leaves (edge, vertex uid, needs) at ``level``, each with the edge to it from its parent
        (as :meth:`vertex` then :meth:`edge` for each, in order, unless a writer has a faster way; the update walk
        records a socket's cores so). ``memo`` is the caller's store for these very leaves: a writer may keep its
        text for them there."""
        vertices = graph.vertices
        for edge, uid, needs in leaves:
            self.vertex(level, vertices[uid], needs, True)
            self.edge(graph, edge)

    def interval(self, start: int, end: int) -> None:
        """The emitted set is held during ``[start, end)`` (only R formats show it; the others ignore it)."""
        return None

    def render(self) -> str:
        """The text emitted so far (ending with a newline if not empty); clears the writer. WriterError when the
        format cannot express it."""
        raise NotImplementedError

    def placements(self) -> tuple[Placement, ...]:
        """The nodes, cores and gpus of what :meth:`render` rendered last, for a writer that keeps them
        (:class:`PlacementWriter`); empty for the text formats."""
        return ()


class WriterError(Exception):
    """What was emitted cannot be written in this format (Fluxion's writer ``emit`` fails; the text is empty)."""


_PREFIXES = ["      " + "---" * level for level in range(32)]


def _prefix(level: int) -> str:
    return _PREFIXES[level] if level < 32 else "      " + "---" * level


class SimpleWriter(Writer):
    """``-F simple``: one line per vertex, ``name[count:x|s]`` indented by containment depth."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        prefix = _PREFIXES[level] if level < 32 else _prefix(level)
        self._lines.append(f"{prefix}{vertex.name}[{needs}:{'x' if exclusive else 's'}]\n")

    def leaves(self, level: int, graph: Graph, leaves: list[tuple[int, int, int]], memo: Memo = None) -> None:
        text = None if memo is None else memo.get(("simple", level))
        if text is None:
            prefix, vertices = _prefix(level), graph.vertices
            if len(leaves) == 1:  # (a one-core job)
                _, uid, count = leaves[0]
                text = f"{prefix}{vertices[uid].name}[{count}:x]\n"
            else:
                needs = [needs for _, _, needs in leaves]
                if needs and needs.count(needs[0]) == len(needs):  # (a socket's cores): the names joined
                    tail = f"[{needs[0]}:x]\n"
                    text = prefix + (tail + prefix).join([vertices[uid].name for _, uid, _ in leaves]) + tail
                else:
                    text = "".join([f"{prefix}{vertices[uid].name}[{count}:x]\n" for _, uid, count in leaves])
            if memo is not None:
                memo["simple", level] = text
        self._lines.append(text)

    def render(self) -> str:
        text = "".join(self._lines)
        self._lines.clear()
        return text


class PrettySimpleWriter(SimpleWriter):
    """``-F pretty_simple``: the same tree, parents before children, with the access mode spelled out."""

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        mode = "exclusive" if exclusive else "shared"
        self._lines.append(f"{_prefix(level)}{vertex.name}[{needs}:{mode}]\n")

    def leaves(self, level: int, graph: Graph, leaves: list[tuple[int, int, int]], memo: Memo = None) -> None:
        Writer.leaves(self, level, graph, leaves)  # vertex by vertex, as the base emits them (not simple's text)

    def render(self) -> str:
        self._lines.reverse()
        return super().render()


class JgfWriter(Writer):
    """``-F jgf``: the selected sub-graph as one line of JSON Graph Format (Fluxion's ``jgf_match_writers_t``).

    Vertices in emission order (post-order) with :func:`~kubeflux.resources.jgf.vertex_metadata`, then the
    edges followed; a containment edge carries no metadata, another one its ``subsystem``.
    """

    def __init__(self) -> None:
        self._nodes: list[dict[str, Any]] = []
        self._edges: list[dict[str, Any]] = []

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        metadata = vertex_metadata(vertex, needs=needs, exclusive=exclusive, agfilter=agfilter)
        self._nodes.append({"id": str(vertex.uniq_id), "metadata": metadata})

    def edge(self, graph: Graph, edge: int) -> None:
        record = graph.edges[edge]
        item: dict[str, Any] = {
            "source": str(graph.vertices[record.source].uniq_id),
            "target": str(graph.vertices[record.target].uniq_id),
        }
        if record.subsystem != CONTAINMENT:
            item["metadata"] = {"subsystem": record.subsystem}
        self._edges.append(item)

    def render(self) -> str:
        """The JGF line; empty when nothing was emitted. WriterError (Fluxion: ENOENT) when vertices came without
        edges or edges without vertices: a JGF sub-graph of a single vertex cannot be written."""
        nodes, edges = self._nodes, self._edges
        self._nodes, self._edges = [], []
        if not nodes and not edges:
            return ""
        if not nodes or not edges:
            raise WriterError("a JGF needs both vertices and edges (No such file or directory)")
        return json.dumps({"graph": {"nodes": nodes, "edges": edges}}) + "\n"


def compress_ids(ids: list[int]) -> str:
    """RFC 22 idset text of ``ids`` in the given order: runs of consecutive ids become ``a-b`` (``0-3,5``)."""
    parts: list[str] = []
    start = previous = None
    for value in ids:
        if previous is not None and value == previous + 1:
            previous = value
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = value
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def compress_hosts(hosts: list[str]) -> str:
    """RFC 29 hostlist of ``hosts`` in the given order (``node[3,0-2]``), as flux's ``hostlist_encode`` builds it."""
    ranges: list[tuple[str, int, int, int] | str] = []  # (prefix, low, high, width) or a name without a number
    for host in hosts:
        suffix = id_from_name_suffix(host)
        if suffix is None:
            ranges.append(host)
            continue
        digits = len(host) - len(host.rstrip("0123456789"))
        prefix, width = host[: len(host) - digits], digits
        last = ranges[-1] if ranges else None
        if isinstance(last, tuple) and last[0] == prefix and last[3] == width and last[2] + 1 == suffix:
            ranges[-1] = (prefix, last[1], suffix, width)
        else:
            ranges.append((prefix, suffix, suffix, width))
    out: list[str] = []
    i = 0
    while i < len(ranges):
        item = ranges[i]
        if isinstance(item, str):
            out.append(item)
            i += 1
            continue
        group = [item]
        while i + len(group) < len(ranges):
            following = ranges[i + len(group)]
            if not isinstance(following, tuple) or following[0] != item[0]:
                break
            group.append(following)
        i += len(group)
        spans = [
            f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}" for _, low, high, width in group
        ]
        single = len(group) == 1 and group[0][1] == group[0][2]
        out.append(f"{item[0]}{spans[0]}" if single else f"{item[0]}[{','.join(spans)}]")
    return ",".join(out)


class Rv1NoschedWriter(Writer):
    """``-F rv1_nosched``: RFC 20 R without the scheduling key (Fluxion's ``rv1_nosched_match_writers_t``).

    Core and gpu ids are gathered until their node is emitted (post-order), then the node's ``children``
    signature collects its rank; ``R_lite`` has one entry per distinct signature (in signature order) with the
    ranks compressed, ``nodelist`` the hosts in rank order, ``properties`` the nodes' properties by rank.
    """

    REDUCED = ("core", "gpu")

    def __init__(self) -> None:
        self._ids: dict[str, list[int]] = {type: [] for type in self.REDUCED}
        self._by_children: dict[str, list[tuple[int, str]]] = {}
        self._properties: dict[str, list[int]] = {}
        self._start = 0
        self._end = 0

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        if vertex.type in self._ids:
            self._ids[vertex.type].append(vertex.id)
        elif vertex.type == "node" and any(self._ids.values()):
            children = {type: compress_ids(sorted(ids)) for type, ids in self._ids.items() if ids}
            for ids in self._ids.values():
                ids.clear()
            self._by_children.setdefault(json.dumps(children), []).append((vertex.rank, vertex.name))
            for key, value in sorted(vertex.properties.items()):
                self._properties.setdefault(f"{key}={value}" if value else key, []).append(vertex.rank)

    def interval(self, start: int, end: int) -> None:
        self._start, self._end = start, end

    def render(self) -> str:
        if not self._by_children:
            return ""
        r_lite = []
        hosts: list[tuple[int, str]] = []
        for children in sorted(self._by_children):
            ranked = sorted(self._by_children[children], key=lambda item: item[0])
            hosts.extend(ranked)
            r_lite.append({"rank": compress_ids([rank for rank, _ in ranked]), "children": json.loads(children)})
        execution: dict[str, Any] = {
            "R_lite": r_lite,
            "nodelist": [compress_hosts([name for _, name in sorted(hosts, key=lambda item: item[0])])],
        }
        if self._properties:
            execution["properties"] = {
                key: compress_ids(sorted(ranks)) for key, ranks in sorted(self._properties.items())
            }
        execution["starttime"] = self._start
        execution["expiration"] = self._end
        self._by_children.clear()
        self._properties.clear()
        return json.dumps({"version": 1, "execution": execution}) + "\n"


class DiscardWriter(Writer):
    """Emits nothing: for a replay whose caller needs the recorded state, not its text."""

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        return None

    def render(self) -> str:
        return ""

    def leaves(self, level: int, graph: Graph, leaves: list[tuple[int, int, int]], memo: Memo = None) -> None:
        return None


class PlacementWriter(Writer):
    """A match writer for the scheduler's engine: what :func:`placements_from_output` reads from the ``simple``
    writer's text (each node with the cores and gpus the match took there, in the order written), kept as
    :class:`Placement` objects instead of text that is written, then parsed, for every match.

    The engine writes vertices children first: a node's cores and gpus (by way of their socket, if any) come just
    before the node itself. :meth:`render` returns no text; :meth:`placements` gives what it rendered last (the
    engine puts them in its :class:`~kubeflux.match.engine.MatchResult`)."""

    def __init__(self) -> None:
        self._found: list[Placement] = []
        self._cores: list[str] = []
        self._gpus: list[str] = []
        self._rendered: tuple[Placement, ...] = ()

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, *, agfilter: AgFilter = None) -> None:
        kind = vertex.type
        if kind == "node":
            if self._cores or self._gpus:
                self._found.append(Placement(vertex.name, tuple(self._cores), tuple(self._gpus)))
                self._cores.clear()
                self._gpus.clear()
        elif kind == "core":
            self._cores.append(vertex.name)
        elif kind == "gpu":
            self._gpus.append(vertex.name)

    def leaves(self, level: int, graph: Graph, leaves: list[tuple[int, int, int]], memo: Memo = None) -> None:
        vertices = graph.vertices
        for _edge, uid, _needs in leaves:  # (named: compiled, a field read into `_` is boxed)
            vertex = vertices[uid]
            kind = vertex.type
            if kind == "core":
                self._cores.append(vertex.name)
            elif kind == "gpu":
                self._gpus.append(vertex.name)

    def render(self) -> str:
        self._rendered = tuple(self._found)
        self._found.clear()
        self._cores.clear()
        self._gpus.clear()
        return ""

    def placements(self) -> tuple[Placement, ...]:
        return self._rendered


WRITERS: dict[str, type[Writer]] = {
    "simple": SimpleWriter,
    "pretty_simple": PrettySimpleWriter,
    "jgf": JgfWriter,
    "rv1_nosched": Rv1NoschedWriter,
}
