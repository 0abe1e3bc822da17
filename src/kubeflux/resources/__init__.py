"""The resource graph and its readers/writers: GRUG recipes, JGF, and graphs built from node lists."""

from __future__ import annotations

from pathlib import Path

from kubeflux._native import use_compiled

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether the graph and its builder run compiled (mypyc) rather than from the sources (see ``_native``)."""

# (after use_compiled: the compiled modules shadow the sources)
from .builder import GIB, NodeSpec, add_node, build_graph, node_path, remove_node  # noqa: E402
from .graph import (  # noqa: E402
    CONTAINMENT,
    Edge,
    Graph,
    GraphFormatError,
    Status,
    Vertex,
    id_from_name_suffix,
    paused_gc,
)
from .grug import Recipe, generate, load_grug, parse_recipe, read_grug  # noqa: E402
from .jgf import (  # noqa: E402
    JgfDocument,
    JgfEdge,
    JgfVertex,
    add_jgf,
    attach_jgf,
    decode_idset,
    dumps_jgf,
    full_vertex_metadata,
    graph_to_jgf,
    jgf_document,
    load_jgf,
    parse_jgf,
    read_jgf,
    vertex_metadata,
    write_jgf,
)

FORMATS = ("grug", "jgf")


def load_graph(path: str | Path, format: str | None = None) -> Graph:
    """Read a graph file as resource-query's ``-f`` does: ``grug`` or ``jgf``.

    Without a format, a ``.json`` file is read as JGF and anything else as GRUG (resource-query's default).
    """
    if format is None:
        format = "jgf" if Path(path).suffix.lower() == ".json" else "grug"
    if format == "grug":
        return read_grug(path)
    if format == "jgf":
        return read_jgf(path)
    raise GraphFormatError(f"{path}: unknown graph format {format!r} (expected one of {', '.join(FORMATS)})")


__all__ = [
    "CONTAINMENT",
    "FORMATS",
    "GIB",
    "Edge",
    "Graph",
    "GraphFormatError",
    "JgfDocument",
    "JgfEdge",
    "JgfVertex",
    "NodeSpec",
    "Recipe",
    "Status",
    "Vertex",
    "add_jgf",
    "add_node",
    "attach_jgf",
    "build_graph",
    "decode_idset",
    "dumps_jgf",
    "full_vertex_metadata",
    "generate",
    "graph_to_jgf",
    "id_from_name_suffix",
    "jgf_document",
    "load_graph",
    "load_grug",
    "load_jgf",
    "node_path",
    "parse_jgf",
    "parse_recipe",
    "paused_gc",
    "read_grug",
    "read_jgf",
    "remove_node",
    "settle_gc",
    "vertex_metadata",
    "write_jgf",
]
