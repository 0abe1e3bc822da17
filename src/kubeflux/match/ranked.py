"""Where the walk of a wide root's children may stop: the candidates found so far outrank all the others.

Under a scoring policy (ids, not ``first``, not ``variation``) the root's choice is the ``k`` best candidates of the
requested type by score, and scores come from ids (:class:`~kubeflux.match.policy.MatchPolicy`):

* a **node** scores ``MATCH_MET + id + 1`` (the root has no factor), so when the children are nodes whose ids
  increase along the list, the ``k`` best nodes are the first ``k`` that qualify (the last ``k`` for a ``high``
  policy);
* a **slot** is cut from the leaves of one child, and scores ``MATCH_MET`` plus its leaves' scores, a leaf
  ``MATCH_MET + factor + id + 1`` (``factor``: its node's ``(id + 2) * 10000 + |uniq_id mod 10000 - 1|`` under a
  node-centric policy, else 0). When every vertex of the slot's types has one unit (so a slot holds exactly its
  counts of leaves), the slots found among some children outrank every slot of the others when each leaf type's
  ``factor + id`` under them is below (above, for ``high``) all of the others'. :func:`slot_stops` finds after
  which children that holds.

Leaf ids restart in every node (``core0`` … in each), so under ``low`` the slots of different nodes tie and no
stop is ever allowed; under ``lonode`` the node factor separates them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kubeflux.match.policy import NODE_FACTOR
from kubeflux.resources.graph import ReservedLeaves, Vertex

KidEdges = Callable[[int], list[tuple[int, int]]]
Ranges = dict[str, tuple[list[float], list[float]]]
"""Per leaf type, per child in list order: the lowest and highest ``factor + id`` of its leaves of that type
(``inf``/``-inf`` when it has none); only types whose vertices all have one unit."""
Below = dict[str, tuple[float, float, bool]]
"""Per vertex type, below one vertex: the lowest and highest ``factor + id`` of the vertices of that type, and
whether one of them has several units."""

INF = float("inf")


def leaf_ranges(
    vertices: list[Vertex],
    kid_edges: KidEdges,
    children: list[int],
    node_centric: bool,
    *,
    nodes_only: bool = False,
    kept: dict[int, Below] | None = None,
    reserved: Mapping[int, ReservedLeaves] | None = None,
) -> Ranges:
    """The :data:`Ranges` of the vertices below each of ``children`` (``nodes_only``: of those down to the nodes,
    for a request of nodes below levels). ``kept``: what was found below vertices already (for the same
    ``node_centric`` and ``nodes_only``, on the same graph), added to as found, so that the levels of a graph (the
    racks of the root, the nodes of each rack) are not walked again level after level. ``reserved``: the graph's
    nodes whose leaves are not made (:attr:`Graph.reserved`), answered from their counts."""
    low: dict[str, list[float]] = {}
    high: dict[str, list[float]] = {}
    multi_unit: set[str] = set()
    found = {} if kept is None else kept
    for position, child in enumerate(children):
        below = _below(vertices, kid_edges, child, node_centric, nodes_only, found, reserved or {})
        for kind, (lowest, highest, multi) in below.items():
            if multi:
                multi_unit.add(kind)
            lows = low.get(kind)
            if lows is None:
                lows = low[kind] = [INF] * len(children)
                high[kind] = [-INF] * len(children)
            lows[position] = lowest
            high[kind][position] = highest
    return {kind: (low[kind], high[kind]) for kind in low if kind not in multi_unit}


def _factor(vertex: Vertex) -> int:
    """A node's factor under a node-centric policy: added to the ids of everything below it."""
    add_by, multiply_by = NODE_FACTOR
    return (vertex.id + 1 + add_by) * multiply_by + abs(vertex.uniq_id % multiply_by - 1)


def _below(
    vertices: list[Vertex],
    kid_edges: KidEdges,
    uid: int,
    node_centric: bool,
    nodes_only: bool,
    kept: dict[int, Below],
    reserved: Mapping[int, ReservedLeaves],
) -> Below:
    """The :data:`Below` of ``uid``, each vertex with the factor of the node above it (below a level vertex, e.g. a
    rack, the nodes' own), found once per vertex: what is below a level is what is below its children and the
    children themselves."""
    known = kept.get(uid)
    if known is not None:
        return known
    top = vertices[uid]
    factor = _factor(top) if node_centric and top.type == "node" else 0
    below: Below = {}
    leaves = reserved.get(uid)
    if leaves is not None:  # leaves not made: ids 0 … units - 1 of each type, one unit each (memory0: one pool)
        for kind, units in leaves.kinds():
            _add(below, kind, factor, kind == "memory" and units != 1)
            if kind != "memory":
                _add(below, kind, factor + units - 1, False)
        kept[uid] = below
        return below
    for _, target in kid_edges(uid) if top.out else []:
        vertex = vertices[target]
        _add(below, vertex.type, factor + vertex.id, vertex.size != 1)
        if not vertex.out or (nodes_only and vertex.type == "node"):
            continue
        if factor and vertex.type != "node":  # (below a node: its factor, not the vertex's own walk's)
            _add_walked(below, vertices, kid_edges, target, factor, node_centric, nodes_only)
            continue
        inner = _below(vertices, kid_edges, target, node_centric, nodes_only, kept, reserved)
        for kind, (lowest, highest, multi) in inner.items():
            _add(below, kind, lowest, multi)
            _add(below, kind, highest, multi)
    kept[uid] = below
    return below


def _add_walked(
    below: Below,
    vertices: list[Vertex],
    kid_edges: KidEdges,
    uid: int,
    factor: int,
    node_centric: bool,
    nodes_only: bool,
) -> None:
    """Add to ``below`` the vertices below ``uid`` (a socket of a node …), walked with the ``factor`` of the node
    above them, or of a node among them below that node."""
    stack = [(target, factor) for _, target in kid_edges(uid)]
    while stack:
        target, inherited = stack.pop()
        vertex = vertices[target]
        _add(below, vertex.type, inherited + vertex.id, vertex.size != 1)
        if not vertex.out or (nodes_only and vertex.type == "node"):
            continue
        down = _factor(vertex) if node_centric and vertex.type == "node" else inherited
        stack.extend((kid, down) for _, kid in kid_edges(target))


def _add(below: Below, kind: str, score: float, multi: bool) -> None:
    known = below.get(kind)
    if known is None:
        below[kind] = (score, score, multi)
    elif score < known[0] or score > known[1] or (multi and not known[2]):
        below[kind] = (min(known[0], score), max(known[1], score), known[2] or multi)


def slot_stops(ranges: Ranges, types: list[str], backwards: bool) -> list[bool] | None:
    """Per child position, whether the walk may stop once it has visited that child and all before it in its order
    (for ``backwards``, that child and all after it): for each of ``types``, every leaf seen outranks every leaf
    unseen, and the leaves seen are themselves ranked child by child, so no two slots seen tie (a tie among them
    could be broken otherwise by the full walk's unstable sort). None when a type has vertices of several units
    (or none at all)."""
    if not types or any(kind not in ranges for kind in types):
        return None
    width = len(ranges[types[0]][0])
    stops = [True] * width
    for kind in types:
        low, high = ranges[kind]
        if backwards:  # mirror the lists, so that "seen" is always a prefix
            low, high = [-x for x in reversed(high)], [-x for x in reversed(low)]
        unseen_low = [INF] * (width + 1)
        for p in range(width - 1, -1, -1):
            unseen_low[p] = min(unseen_low[p + 1], low[p])
        seen_high = -INF
        ranked_so_far = True
        for p in range(width):
            if low[p] != INF:
                ranked_so_far = ranked_so_far and seen_high < low[p]
                seen_high = max(seen_high, high[p])
            if not (ranked_so_far and seen_high < unseen_low[p + 1]):
                stops[width - 1 - p if backwards else p] = False
    return stops
