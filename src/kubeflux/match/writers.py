"""Writers for matched resource sets (``-F``), byte-compatible with Fluxion's match writers.

The update walk calls :meth:`Writer.vertex` in post-order (children before their parent) and
:meth:`Writer.edge` for each edge it followed; :meth:`Writer.render` returns the text for one match.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from kubeflux.resources.graph import CONTAINMENT, Graph, Vertex
from kubeflux.resources.jgf import vertex_metadata


class Writer(Protocol):
    def vertex(
        self,
        level: int,
        vertex: Vertex,
        needs: int,
        exclusive: bool,
        exclusive_parent: bool,
        *,
        agfilter: Mapping[str, str] | None = None,
    ) -> None:
        """Emit one vertex; ``agfilter`` is ``find``'s per-type aggregate-filter use (only JGF shows it)."""
        ...

    def edge(self, level: int, graph: Graph, edge: int, exclusive_parent: bool) -> None: ...

    def render(self) -> str:
        """The text emitted so far (ending with a newline if not empty); clears the writer."""
        ...


def _prefix(level: int) -> str:
    return "      " + "---" * level


class SimpleWriter:
    """``-F simple``: one line per vertex, ``name[count:x|s]`` indented by containment depth."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def vertex(
        self,
        level: int,
        vertex: Vertex,
        needs: int,
        exclusive: bool,
        exclusive_parent: bool,
        *,
        agfilter: Mapping[str, str] | None = None,
    ) -> None:
        self._lines.append(f"{_prefix(level)}{vertex.name}[{needs}:{'x' if exclusive else 's'}]\n")

    def edge(self, level: int, graph: Graph, edge: int, exclusive_parent: bool) -> None:
        return None

    def render(self) -> str:
        text = "".join(self._lines)
        self._lines.clear()
        return text


class PrettySimpleWriter:
    """``-F pretty_simple``: the same tree, parents before children, with the access mode spelled out."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def vertex(
        self,
        level: int,
        vertex: Vertex,
        needs: int,
        exclusive: bool,
        exclusive_parent: bool,
        *,
        agfilter: Mapping[str, str] | None = None,
    ) -> None:
        mode = "exclusive" if exclusive else "shared"
        self._lines.append(f"{_prefix(level)}{vertex.name}[{needs}:{mode}]\n")

    def edge(self, level: int, graph: Graph, edge: int, exclusive_parent: bool) -> None:
        return None

    def render(self) -> str:
        text = "".join(reversed(self._lines))
        self._lines.clear()
        return text


class JgfWriter:
    """``-F jgf``: the selected sub-graph as one line of JSON Graph Format (Fluxion's ``jgf_match_writers_t``).

    Vertices in emission order (post-order) with :func:`~kubeflux.resources.jgf.vertex_metadata`, then the
    edges followed; a containment edge carries no metadata, another one its ``subsystem``.
    """

    def __init__(self) -> None:
        self._nodes: list[dict[str, Any]] = []
        self._edges: list[dict[str, Any]] = []

    def vertex(
        self,
        level: int,
        vertex: Vertex,
        needs: int,
        exclusive: bool,
        exclusive_parent: bool,
        *,
        agfilter: Mapping[str, str] | None = None,
    ) -> None:
        metadata = vertex_metadata(vertex, needs=needs, exclusive=exclusive, agfilter=agfilter)
        self._nodes.append({"id": str(vertex.uniq_id), "metadata": metadata})

    def edge(self, level: int, graph: Graph, edge: int, exclusive_parent: bool) -> None:
        record = graph.edges[edge]
        item: dict[str, Any] = {
            "source": str(graph.vertices[record.source].uniq_id),
            "target": str(graph.vertices[record.target].uniq_id),
        }
        if record.subsystem != CONTAINMENT:
            item["metadata"] = {"subsystem": record.subsystem}
        self._edges.append(item)

    def render(self) -> str:
        """The JGF line; empty when nothing was emitted, or (as Fluxion) when vertices came without edges."""
        nodes, edges = self._nodes, self._edges
        self._nodes, self._edges = [], []
        if not nodes or not edges:
            return ""
        return json.dumps({"graph": {"nodes": nodes, "edges": edges}}) + "\n"


WRITERS: dict[str, type[Writer]] = {
    "simple": SimpleWriter,
    "pretty_simple": PrettySimpleWriter,
    "jgf": JgfWriter,
}
