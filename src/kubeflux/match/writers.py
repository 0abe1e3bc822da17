"""Writers for matched resource sets (``-F``), byte-compatible with Fluxion's match writers.

The update walk calls :meth:`Writer.vertex` in post-order (children before their parent) and
:meth:`Writer.edge` for each edge it followed; :meth:`Writer.render` returns the text for one match.
"""

from __future__ import annotations

from typing import Protocol

from kubeflux.resources.graph import Graph, Vertex


class Writer(Protocol):
    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, exclusive_parent: bool) -> None: ...

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

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, exclusive_parent: bool) -> None:
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

    def vertex(self, level: int, vertex: Vertex, needs: int, exclusive: bool, exclusive_parent: bool) -> None:
        mode = "exclusive" if exclusive else "shared"
        self._lines.append(f"{_prefix(level)}{vertex.name}[{needs}:{mode}]\n")

    def edge(self, level: int, graph: Graph, edge: int, exclusive_parent: bool) -> None:
        return None

    def render(self) -> str:
        text = "".join(reversed(self._lines))
        self._lines.clear()
        return text


WRITERS: dict[str, type[SimpleWriter] | type[PrettySimpleWriter]] = {
    "simple": SimpleWriter,
    "pretty_simple": PrettySimpleWriter,
}
