"""A walk for ``N`` slots that the root's children cannot hold, refused before it is made.

A gang's jobspec is ``slot(N) → core(k)`` (and ``gpu(g)``). The walk cuts each slot from the leaves of one vertex
below the root (a node's cores, or a socket's), so every slot lies in the subtree of one of the root's children, and
it takes at least ``k`` units of each element type, each unit free throughout the window. A child's aggregate filter
(its subtree's planner of those types, which the walk itself prunes by) counts no fewer free units than its leaves
do, so the child holds at most ``free // k`` slots: when these bounds summed over the root's children fall short of
``N``, the walk fails, and :func:`too_few_slots` says so without making it.

On 10,000 nodes the root's own filter (its total free cores) nearly always admits a gang, while too few nodes have
``k`` cores free throughout the window; the engine then walked every start time a reservation tries, in vain. The
bounds are summed through the spans of the root's :class:`~kubeflux.match.evaluation.Layout` and kept per span
and window, valid as its candidates are (:func:`~kubeflux.match.evaluation.cached`: while the span's fingerprint is
unchanged and none of its span bounds lies where the window moved), so a start time after another recounts the few
spans that changed, and one tried before (by the last pass, or by a gang of the same shape and duration) none. The
count may stop once it reaches ``N`` (a partial count is never kept).
"""

from __future__ import annotations

from typing import Final

from kubeflux.match.evaluation import BLOCK, CacheTable, Layout, cached
from kubeflux.match.meta import AllocType, JobMeta
from kubeflux.match.request import Request
from kubeflux.match.state import SLOT
from kubeflux.match.view import ScheduleView

Elements = tuple[tuple[str, int], ...]
"""A slot's elements: (leaf type, the fewest units one slot takes of it)."""
UNBOUNDED = 1 << 40
"""The bound of a child whose filter tracks none of the slot's types (nothing is known of it)."""
COUNTS_KEPT: Final = 16
"""Counts kept per span of the root's children, one per shape and window; the oldest is dropped first."""
BOUNDED_OPS = (AllocType.ALLOCATE_ORELSE_RESERVE,)
"""The walks bounded: those at the later start times a reservation tries, where most walks fail. A walk at now
(an allocation, or a reservation's first walk) is not: the scheduler asks for one after its own books found
room (:meth:`~kubeflux.scheduler.placing.Placer._too_few_slots`), so it mostly succeeds and stops early, and
counting slots over 10,000 nodes first tripled the cost of a gang's placement once queues formed."""


def slot_shape(resources: list[Request]) -> tuple[Request, int, Elements] | None:
    """The request's one slot, the slots it needs at least and its elements, when the bound applies: a request of
    ``N`` slots alone whose elements are leaf types with no request below them; None otherwise. A request marked
    not exclusive anywhere is left to the walk, which raises its error (EINVAL)."""
    if len(resources) != 1:
        return None
    slot = resources[0]
    count = slot.count
    if slot.type != SLOT or slot.exclusive is False or count.min < 1 or count.min > count.max or not slot.with_:
        return None
    elements: list[tuple[str, int]] = []
    for element in slot.with_:
        if element.type == SLOT or element.with_ or element.exclusive is False or element.count.min < 1:
            return None
        elements.append((element.type, element.count.min))
    return slot, count.min, tuple(elements)


def too_few_slots(schedule: ScheduleView, resources: list[Request], meta: JobMeta) -> tuple[bool, Elements | None]:
    """Whether the root's children certainly cannot hold the slots ``resources`` ask during ``meta``'s window (see
    the module docstring), and, when they can, the slot elements the bound counted them for (for
    :func:`empty_block`; None when it did not count). (False, None) whenever the bound does not apply: the walk
    then decides."""
    if meta.alloc_type not in BOUNDED_OPS or schedule.graph.shared_children:
        return False, None
    layout = schedule.layouts.get(schedule.root)
    if layout is None:
        return False, None
    shape = slot_shape(resources)
    if shape is None:
        return False, None
    slot, needed, elements = shape
    elements = tuple(element for element in elements if _leaf_type(schedule, layout, element[0]))
    if not elements:
        return False, None
    if meta.at < schedule.base or meta.at + meta.duration > schedule.base + schedule.horizon or meta.duration < 1:
        return False, None
    if schedule.slot_fits(schedule.graph.vertices[schedule.root], slot):
        return False, None  # (the root would cut slots from its own leaves, across its children)
    if not layout.counts:
        layout.counts = [[{} for _ in level] for level in layout.fps]
    top = len(layout.fps) - 1
    found = 0
    for index in range(len(layout.fps[top])):
        found += _span_slots(schedule, layout, top, index, elements, meta, needed - found)
        if found >= needed:
            return False, elements
    return True, None


def empty_block(elements: Elements, layout: Layout, index: int, meta: JobMeta) -> bool:
    """Whether the current walk's bound (:func:`too_few_slots`, just made for ``meta``'s window, which counted the
    slots of ``elements``) counted no slot in block ``index`` of the root's children: none of them then qualifies
    (each holds at most ``free // k`` slots by the filter the walk prunes by), and the walk skips the block rather
    than visit its children one by one."""
    hit = _kept(layout.counts[0][index], elements, layout.fps[0][index], layout.bounds[0][index], meta)
    return hit == 0


def _leaf_type(schedule: ScheduleView, layout: Layout, type: str) -> bool:
    """Whether no vertex of ``type`` has children (its units are what a slot holds, and what filters count); kept
    while the graph has as many vertices (a vertex that grows children brings new ones)."""
    size = len(schedule.graph.vertices)
    known = layout.leaf_types.get(type)
    if known is None or known[0] != size:
        vertices = schedule.graph.vertices
        known = layout.leaf_types[type] = (
            size,
            not any(vertices[uid].out for uid in schedule.graph.by_type.get(type, ())),
        )
    return known[1]


def _span_slots(
    schedule: ScheduleView, layout: Layout, level: int, index: int, elements: Elements, meta: JobMeta, wanted: int
) -> int:
    """The bound of one span of the root's children: exact, or, when it reached ``wanted`` part way, at least that."""
    table: CacheTable[int] = layout.counts[level][index]
    fingerprint = layout.fps[level][index]
    hit = _kept(table, elements, fingerprint, layout.bounds[level][index], meta)
    if hit is not None:
        return hit
    found = 0
    if level == 0:
        for _edge, target in layout.blocks[index]:
            found += child_slots(schedule, target, elements, meta)
    else:
        below = layout.fps[level - 1]
        for sub in range(index * BLOCK, min((index + 1) * BLOCK, len(below))):
            found += _span_slots(schedule, layout, level - 1, sub, elements, meta, wanted - found)
            if found >= wanted:
                return found
    table[elements, meta.at, meta.duration] = (fingerprint, meta.at, meta.at + meta.duration, found)
    if len(table) > COUNTS_KEPT:
        del table[next(iter(table))]
    return found


def _kept(table: CacheTable[int], elements: Elements, fingerprint: int, bounds: list[int], meta: JobMeta) -> int | None:
    """A span's count kept for ``meta``'s window, or the latest count kept if the span looks the same in this
    window. Counts are kept per window, up to :data:`COUNTS_KEPT` (a gang's reservation tries one start time after
    another, and the next pass, or the next gang of the same duration, tries the same ones again)."""
    hit = cached(table, (elements, meta.at, meta.duration), fingerprint, bounds, meta)
    if hit is None and table:
        latest = next(reversed(table))
        if latest[0] == elements:
            hit = cached(table, latest, fingerprint, bounds, meta)
    return hit


def child_slots(schedule: ScheduleView, uid: int, elements: Elements, meta: JobMeta) -> int:
    """The most slots of ``elements`` that ``uid``'s subtree can hold during ``meta``'s window, by its filter."""
    subplan = schedule.subplans.get(uid)
    if subplan is None:
        return UNBOUNDED
    types = subplan.resource_types
    free = subplan.avail_resources_array_during(meta.at, meta.duration)
    bound = UNBOUNDED
    for type, units in elements:
        if type in types:
            slots = free[types.index(type)] // units
            if slots < bound:
                bound = slots
    return bound
