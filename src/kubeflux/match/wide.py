"""The walk of a wide vertex's children (thousands of nodes under a cluster): cut into spans whose candidates are
cached, visited in the policy's order with an early stop (:mod:`kubeflux.match.ranked`), or only at the positions
a match's exclusions leave (:func:`~kubeflux.match.evaluation.allowed_positions`).

A part of the select walk (:class:`~kubeflux.match.traverser.Traverser` inherits it), kept apart so that each stays
a readable size; like the rest of the select walk it never writes the schedule.
"""

from __future__ import annotations

from itertools import chain, pairwise

from kubeflux.match import ranked
from kubeflux.match.evaluation import BLOCK, BlockPart, Kids, Layout, allowed_positions, remember, take_part
from kubeflux.match.meta import AllocType, JobMeta
from kubeflux.match.request import Request, effective_max
from kubeflux.match.schedule import cached
from kubeflux.match.scoring import Scoring
from kubeflux.match.slotbound import empty_block
from kubeflux.match.state import SLOT, WalkState


class WideWalk(WalkState):
    """The wide-vertex part of the select walk; :meth:`_explore` and :meth:`_visit_child` are the traverser's."""

    # Methods, not attribute annotations: mypyc would make an annotation a slot of its own, unset, that hides the
    # traverser's method (see kubeflux._native).
    def _explore(
        self,
        meta: JobMeta,
        children: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        multiplier: int,
        kids: Kids,
    ) -> bool:
        raise NotImplementedError

    def _visit_child(
        self,
        meta: JobMeta,
        edge: int,
        target: int,
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        kids: Kids,
    ) -> bool:
        raise NotImplementedError

    def _explore_blocks(
        self,
        meta: JobMeta,
        children: list[tuple[int, int]],
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        kids: Kids,
    ) -> bool:
        """The static explore of a wide vertex, through a tree of spans over its children.

        Level 0 spans are :data:`BLOCK` consecutive children, each level above groups :data:`BLOCK` spans of the
        level below, up to at most :data:`BLOCK` spans on top. A span's candidates (a part of the vertex's
        candidates, in the same order) are kept while the sum of its children's fingerprints is unchanged, so
        re-evaluating a vertex with thousands of children after one of them changed re-merges one span per level."""
        parent = self.graph.vertices[children[0][1]].parent
        layout = self._layouts.get(parent)
        if layout is None or layout.width != len(children):
            layout = self._layouts[parent] = self._layout(children)
        needed, stops = self._early_count(parent, layout, resources)
        if needed or self.excluded is not None:
            return self._explore_ordered(meta, parent, layout, resources, pristine, excl, dfu, kids, needed, stops)
        key = self._part_key(meta, resources, pristine, excl)
        top = len(layout.fps) - 1
        found = False
        for index in range(len(layout.fps[top])):
            if take_part(self._span(meta, parent, layout, top, index, key, resources, pristine, excl), dfu, kids):
                found = True
        return found

    def _early_count(self, parent: int, layout: Layout, resources: list[Request]) -> tuple[int, list[bool] | None]:
        """How many of the root's children's candidates the match takes, when the walk may stop once it has found
        that many in the policy's order (0: it must see them all), and after which children it may (None: after
        any). See :mod:`kubeflux.match.ranked`: a request for exactly ``k`` nodes, or ``k`` slots of unit leaves."""
        if parent != self.root or not layout.ordered or len(resources) != 1:
            return 0, None
        spec = self.policy.spec
        if spec.stop_on_first or spec.performance_class:
            return 0, None
        request = resources[0]
        count = request.count.min
        if count < 1 or effective_max(request) != count:
            return 0, None
        if request.type == layout.ordered:
            return count, None
        if request.type != SLOT or layout.ordered != "node" or any(element.with_ for element in request.with_):
            return 0, None
        types = tuple(sorted({element.type for element in request.with_}))
        key = (spec.node_centric, types, self.policy.descending)
        if key not in layout.stops:
            ranges = ranked.leaf_ranges(
                self.graph.vertices,
                self._kid_edges,
                [target for _, target in layout.children],
                spec.node_centric,
            )
            layout.stops[key] = ranked.slot_stops(ranges, list(types), self.policy.descending)
        stops = layout.stops[key]
        return (count, stops) if stops is not None and any(stops) else (0, None)

    def _explore_ordered(
        self,
        meta: JobMeta,
        parent: int,
        layout: Layout,
        resources: list[Request],
        pristine: bool,
        excl: bool,
        dfu: Scoring,
        kids: Kids,
        needed: int,
        stops: list[bool] | None,
    ) -> bool:
        """:meth:`_explore_blocks` in the policy's order, stopping once ``needed`` candidates qualify (0: never)
        after a child where ``stops`` allows it (None: any): block by block from the spans' caches, or, with nodes
        excluded, the allowed children one by one (a span's cached candidates hold the excluded nodes' too)."""
        excluded = self.excluded if meta.alloc_type != AllocType.SATISFIABILITY else None
        backwards = needed > 0 and self.policy.descending
        wanted = resources[0].type
        if excluded is not None:
            children = layout.children
            found = False
            self.excluded = None  # (the children below are allowed, and nothing deeper is ever excluded)
            try:
                for position in allowed_positions(layout, excluded, backwards):
                    edge, target = children[position]
                    if not self._visit_child(meta, edge, target, resources, pristine, excl, dfu, kids):
                        continue
                    found = True
                    if needed and dfu.qualified_count(wanted) >= needed and (stops is None or stops[position]):
                        return True
            finally:
                self.excluded = excluded
            return found
        blocks = layout.blocks
        key = self._part_key(meta, resources, pristine, excl)
        found = False
        for index in range(len(blocks) - 1, -1, -1) if backwards else range(len(blocks)):
            if take_part(self._span(meta, parent, layout, 0, index, key, resources, pristine, excl), dfu, kids):
                found = True
                if needed and dfu.qualified_count(wanted) >= needed:
                    last = index * BLOCK if backwards else min((index + 1) * BLOCK, layout.width) - 1
                    if stops is None or stops[last]:
                        return True
        return found

    def _layout(self, children: list[tuple[int, int]]) -> Layout:
        fp = self.fp
        layout = Layout(len(children), [children[i : i + BLOCK] for i in range(0, len(children), BLOCK)])
        layout.children = children
        vertices = self.graph.vertices
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
        bounds = self.bounds
        level_bounds = [
            sorted(chain.from_iterable(bounds.get(target, ()) for _, target in block)) for block in layout.blocks
        ]
        layout.bounds.append(level_bounds)
        while len(layout.bounds) < len(layout.fps):
            level_bounds = [
                sorted(chain.from_iterable(level_bounds[i : i + BLOCK])) for i in range(0, len(level_bounds), BLOCK)
            ]
            layout.bounds.append(level_bounds)
        for position, (_edge, target) in enumerate(children):
            self._kid_pos[target] = position
        return layout

    def _span(
        self,
        meta: JobMeta,
        parent: int,
        layout: Layout,
        level: int,
        index: int,
        key: tuple[object, ...],
        resources: list[Request],
        pristine: bool,
        excl: bool,
    ) -> BlockPart:
        table = layout.cache[level][index]
        fingerprint = layout.fps[level][index]
        hit = cached(table, key, fingerprint, layout.bounds[level][index], meta)
        if hit is not None:
            return hit
        if level == 0 and self._bounded is not None and parent == self.root and empty_block(self, layout, index, meta):
            return Scoring(), False, Kids()  # none of its children qualifies (nor takes part otherwise)
        part_dfu = Scoring()
        part_kids = Kids()
        if level == 0:
            found = self._explore(meta, layout.blocks[index], resources, pristine, excl, part_dfu, 0, part_kids)
        else:
            found = False
            below = layout.fps[level - 1]
            for sub in range(index * BLOCK, min((index + 1) * BLOCK, len(below))):
                part = self._span(meta, parent, layout, level - 1, sub, key, resources, pristine, excl)
                if take_part(part, part_dfu, part_kids):
                    found = True
        result = (part_dfu, found, part_kids)
        remember(table, key, (fingerprint, meta.at, meta.at + meta.duration, result))
        return result
