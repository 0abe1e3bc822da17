"""The walk of a wide vertex's children (thousands of nodes under a cluster): cut into spans whose candidates are
cached, or visited in the policy's order with an early stop (:mod:`kubeflux.match.ranked`).

Level 0 spans are :data:`BLOCK` consecutive children, each level above groups :data:`BLOCK` spans of the level
below, up to at most :data:`BLOCK` spans on top. A span's candidates (a part of the vertex's candidates, in the same
order) are kept while the sum of its children's fingerprints is unchanged, so re-evaluating a vertex with thousands
of children after one of them changed re-merges one span per level.

Functions of the select walk's part for one wide vertex (a :class:`Spans`): they read the schedule's view and
explore a block of children through the walk's own explore (:attr:`Spans.explore`); like the rest of the select walk
they never write the schedule. With nodes excluded, the walk visits the allowed children itself
(:meth:`~kubeflux.match.traverser.Traverser._explore_allowed`: a span's cached candidates hold the excluded nodes'
too).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, pairwise

from kubeflux.match import ranked
from kubeflux.match.evaluation import (
    BLOCK,
    BlockPart,
    CacheKey,
    Excluded,
    Kids,
    Layout,
    allowed_positions,
    cached,
    remember,
    take_part,
)
from kubeflux.match.policy import MatchPolicy, PolicySpec
from kubeflux.match.request import Request, effective_max
from kubeflux.match.scoring import Scoring
from kubeflux.match.slotbound import Elements, empty_block
from kubeflux.match.state import SLOT
from kubeflux.match.view import ScheduleView
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import Vertex

__all__ = [
    "InOrder",
    "Layout",
    "Spans",
    "early_count",
    "explore_all",
    "explore_allowed",
    "explore_in_order",
    "layout_of",
    "levels_below",
]

Explore = Callable[[Visit, list[tuple[int, int]], Scoring, int, Kids], bool]
"""The select walk's explore of a list of children (:meth:`~kubeflux.match.traverser.Traverser._explore`)."""
VisitChild = Callable[[Visit, int, int, Scoring, Kids], bool]
"""The select walk's visit of one child (:meth:`~kubeflux.match.traverser.Traverser._visit_child`)."""


class Spans:
    """One explore of a wide vertex's children through its spans: what every span of it shares."""

    __slots__ = ("bounded", "explore", "key", "layout", "parent", "schedule", "visit")

    def __init__(
        self,
        schedule: ScheduleView,
        visit: Visit,
        parent: int,
        layout: Layout,
        key: CacheKey,
        explore: Explore,
        bounded: Elements | None,
    ) -> None:
        self.schedule = schedule
        self.visit = visit
        self.parent = parent
        self.layout = layout
        self.key = key
        """The spans' cache key (the walk's key of the children's request)."""
        self.explore = explore
        self.bounded = bounded
        """The slot elements the walk's bound counted the root's children for (see
        :func:`~kubeflux.match.slotbound.empty_block`), None if it did not."""


class InOrder:
    """A walk of a wide vertex's children in the policy's order (:func:`early_count`): it may stop once ``needed``
    candidates qualify (0: never) after a child where ``stops`` allows it (None: after any)."""

    __slots__ = ("layout", "needed", "stops")

    def __init__(self, layout: Layout, needed: int, stops: list[bool] | None) -> None:
        self.layout = layout
        self.needed = needed
        self.stops = stops


def layout_of(schedule: ScheduleView, parent: int, children: list[tuple[int, int]]) -> Layout:
    """``parent``'s :class:`Layout` of ``children`` (laid out again when their number changed)."""
    layout = schedule.layouts.get(parent)
    if layout is None or layout.width != len(children):
        layout = schedule.layouts[parent] = _layout(schedule, children)
    return layout


def explore_all(spans: Spans, dfu: Scoring, kids: Kids) -> bool:
    """The static explore of a wide vertex: every top-level span's candidates, in order."""
    layout = spans.layout
    top = len(layout.fps) - 1
    found = False
    for index in range(len(layout.fps[top])):
        if take_part(_span(spans, top, index), dfu, kids):
            found = True
    return found


def explore_in_order(spans: Spans, order: InOrder, dfu: Scoring, kids: Kids) -> bool:
    """:func:`explore_all` block by block in ``order`` (with its early stop)."""
    layout = spans.layout
    visit = spans.visit
    needed, stops = order.needed, order.stops
    backwards = needed > 0 and visit.policy.descending
    wanted = visit.resources[0].type
    blocks = layout.blocks
    found = False
    for index in range(len(blocks) - 1, -1, -1) if backwards else range(len(blocks)):
        if take_part(_span(spans, 0, index), dfu, kids):
            found = True
            if needed and dfu.qualified_count(wanted) >= needed:
                last = index * BLOCK if backwards else min((index + 1) * BLOCK, layout.width) - 1
                if stops is None or stops[last]:
                    return True
    return found


def early_count(
    schedule: ScheduleView, policy: MatchPolicy, parent: int, layout: Layout, resources: list[Request]
) -> tuple[int, list[bool] | None]:
    """How many of the root's children's candidates the match takes, when the walk may stop once it has found
    that many in the policy's order (0: it must see them all), and after which children it may (None: after
    any). See :mod:`kubeflux.match.ranked`: a request for exactly ``k`` nodes, or ``k`` slots of unit leaves.

    The same holds below the root for a vertex above the nodes (a zone's racks, a rack's nodes): nothing above it
    adds to its candidates' scores, and the vertex that chooses among them takes the best ``k``; children that are
    such levels rather than nodes are ranked by the nodes or leaves below them."""
    if not layout.ordered or len(resources) != 1 or (parent != schedule.root and _below_node(schedule, parent)):
        return 0, None
    spec = policy.spec
    if spec.stop_on_first or spec.performance_class:
        return 0, None
    request = resources[0]
    count = request.count.min
    if count < 1 or effective_max(request) != count:
        return 0, None
    if request.type == layout.ordered:
        return count, None
    if request.type == "node" and layout.ordered != "node":
        types: tuple[str, ...] = ("node",)  # nodes below levels, ranked by their ids
    elif request.type != SLOT or any(element.with_ for element in request.with_):
        return 0, None
    else:
        types = tuple(sorted({element.type for element in request.with_}))
    key = (spec.node_centric, types, policy.descending)
    if key not in layout.stops:
        nodes_only = types == ("node",)
        ranges = ranked.leaf_ranges(
            schedule.graph.vertices,
            schedule.children,
            [target for _, target in layout.children],
            spec.node_centric,
            nodes_only=nodes_only,
            kept=schedule.below_ranges.setdefault((spec.node_centric, nodes_only), {}),
            reserved=schedule.graph.reserved,
        )
        layout.stops[key] = ranked.slot_stops(ranges, list(types), policy.descending)
    stops = layout.stops[key]
    return (count, stops) if stops is not None and any(stops) else (0, None)


def explore_allowed(
    visit_child: VisitChild, visit: Visit, order: InOrder, excluded: Excluded, dfu: Scoring, kids: Kids
) -> bool:
    """The children of a wide vertex that ``excluded`` allows, one by one in ``order`` (with its early stop) through
    the walk's ``visit_child``; a span's cached candidates hold the excluded nodes' too."""
    needed, stops = order.needed, order.stops
    backwards = needed > 0 and visit.policy.descending
    wanted = visit.resources[0].type
    children = order.layout.children
    found = False
    for position in allowed_positions(order.layout, excluded, backwards):
        edge, target = children[position]
        if not visit_child(visit, edge, target, dfu, kids):
            continue
        found = True
        if needed and dfu.qualified_count(wanted) >= needed and (stops is None or stops[position]):
            return True
    return found


def levels_below(
    level_types: frozenset[str], vertices: list[Vertex], children: list[tuple[int, int]], spec: PolicySpec
) -> bool:
    """Whether a vertex's ``children`` are a few levels (the racks of a zone, …: ``level_types``, which a scheduler's
    graph sets), walked as a wide vertex's children however few they are, so that a walk over them in the policy's
    order may stop early (:func:`early_count`)."""
    return (
        bool(level_types)
        and not spec.stop_on_first
        and 1 < len(children) < 2 * BLOCK
        and vertices[children[0][1]].type in level_types
    )


def _below_node(schedule: ScheduleView, uid: int) -> bool:
    """Whether ``uid`` is a node or below one (a node-centric policy's factor is in its candidates' scores)."""
    vertices = schedule.graph.vertices
    while uid != -1:
        vertex = vertices[uid]
        if vertex.type == "node":
            return True
        uid = vertex.parent
    return False


def _layout(schedule: ScheduleView, children: list[tuple[int, int]]) -> Layout:
    fp = schedule.fp
    layout = Layout(len(children), [children[i : i + BLOCK] for i in range(0, len(children), BLOCK)])
    layout.children = children
    vertices = schedule.graph.vertices
    kinds = {vertices[target].type for _, target in children}
    ids = [vertices[target].id for _, target in children]
    if len(kinds) == 1 and all(a < b for a, b in pairwise(ids)):
        layout.ordered = kinds.pop()
    level = [sum([fp[target] for _, target in block]) for block in layout.blocks]
    layout.fps.append(level)
    while len(level) > BLOCK:
        level = [sum(level[i : i + BLOCK]) for i in range(0, len(level), BLOCK)]
        layout.fps.append(level)
    layout.cache = [[{} for _ in level] for level in layout.fps]
    bounds = schedule.bounds
    level_bounds = [
        sorted(chain.from_iterable(bounds.get(target, ()) for _, target in block)) for block in layout.blocks
    ]
    layout.bounds.append(level_bounds)
    while len(layout.bounds) < len(layout.fps):
        level_bounds = [
            sorted(chain.from_iterable(level_bounds[i : i + BLOCK])) for i in range(0, len(level_bounds), BLOCK)
        ]
        layout.bounds.append(level_bounds)
    kid_pos = schedule.kid_pos
    for position, (_edge, target) in enumerate(children):
        kid_pos[target] = position
    return layout


def _span(spans: Spans, level: int, index: int) -> BlockPart:
    layout = spans.layout
    meta = spans.visit.meta
    table = layout.cache[level][index]
    fingerprint = layout.fps[level][index]
    key = spans.key
    hit = cached(table, key, fingerprint, layout.bounds[level][index], meta)
    if hit is not None:
        return hit
    bounded = spans.bounded
    empty = level == 0 and bounded is not None and spans.parent == spans.schedule.root
    if empty and bounded is not None and empty_block(bounded, layout, index, meta):
        return Scoring(), False, Kids()  # none of its children qualifies (nor takes part otherwise)
    part_dfu = Scoring()
    part_kids = Kids()
    if level == 0:
        found = spans.explore(spans.visit, layout.blocks[index], part_dfu, 0, part_kids)
    else:
        found = False
        below = layout.fps[level - 1]
        for sub in range(index * BLOCK, min((index + 1) * BLOCK, len(below))):
            if take_part(_span(spans, level - 1, sub), part_dfu, part_kids):
                found = True
    result = (part_dfu, found, part_kids)
    remember(table, key, (fingerprint, meta.at, meta.at + meta.duration, result))
    return result
