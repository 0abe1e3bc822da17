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

from collections.abc import Callable

from kubeflux.match.policy import NODE_FACTOR
from kubeflux.resources.graph import Vertex

KidEdges = Callable[[int], list[tuple[int, int]]]
Ranges = dict[str, tuple[list[float], list[float]]]
"""Per leaf type, per child in list order: the lowest and highest ``factor + id`` of its leaves of that type
(``inf``/``-inf`` when it has none); only types whose vertices all have one unit."""

INF = float("inf")


def leaf_ranges(
    vertices: list[Vertex], kid_edges: KidEdges, children: list[int], node_centric: bool, *, nodes_only: bool = False
) -> Ranges:
    """The :data:`Ranges` of the vertices below each of ``children`` (``nodes_only``: of those down to the nodes,
    for a request of nodes below levels)."""
    low: dict[str, list[float]] = {}
    high: dict[str, list[float]] = {}
    multi_unit: set[str] = set()
    add_by, multiply_by = NODE_FACTOR
    for position, child in enumerate(children):
        top = vertices[child]
        factor = 0
        if node_centric and top.type == "node":
            factor = (top.id + 1 + add_by) * multiply_by + abs(top.uniq_id % multiply_by - 1)
        # (each vertex with the factor of the node above it: below a level vertex, e.g. a rack, the nodes' own)
        stack = [(target, factor) for _, target in kid_edges(child)]
        while stack:
            uid, factor = stack.pop()
            vertex = vertices[uid]
            kind = vertex.type
            if vertex.size != 1:
                multi_unit.add(kind)
            lows = low.get(kind)
            if lows is None:
                lows = low[kind] = [INF] * len(children)
                high[kind] = [-INF] * len(children)
            score = factor + vertex.id
            if score < lows[position]:
                lows[position] = score
            highs = high[kind]
            if score > highs[position]:
                highs[position] = score
            if nodes_only and kind == "node":
                continue
            below = factor
            if node_centric and kind == "node":
                below = (vertex.id + 1 + add_by) * multiply_by + abs(vertex.uniq_id % multiply_by - 1)
            stack.extend((target, below) for _, target in kid_edges(vertex.uid))
    return {kind: (low[kind], high[kind]) for kind in low if kind not in multi_unit}


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
