"""Cutting a vertex's candidates into slots: Fluxion's ``cnt_slot`` and ``take_slot`` (:func:`count_slots`,
:func:`take_slot`), and :func:`leaf_slots`, the same for a slot made of the vertex's own leaves (a node's cores for
a pod's ``slot → core(k)``) in one loop: what :meth:`~kubeflux.match.traverser.Traverser._dom_slot` computes through
the generic explore, the slot's best-k choice (Fluxion's ``finish_slot``), ``cnt_slot`` and one ``take_slot`` per
slot, without an edge group, an :class:`~kubeflux.match.scoring.Evals` or a cursor per leaf.

A node of 64 cores is visited leaf by leaf on every evaluation of it (its first one, and each one after a job
changed it), so this is the part of a match that grows with cores per node. The answer is the generic one, slot for
slot: the same leaves qualify in the same order, they are ordered as :func:`~kubeflux.match.stdsort.sort` orders
them (ties included), and the slots take them in that order. Shapes it does not cover (several elements, an element
with children, a leaf with children, scores that are not an id plus a constant) return None: the caller walks.
"""

from __future__ import annotations

from itertools import pairwise
from operator import itemgetter

from kubeflux.match import stdsort
from kubeflux.match.meta import AllocType, Errno, JobMeta, MatchFailure
from kubeflux.match.request import Request, calc_count
from kubeflux.match.scoring import MATCH_MET, EdgeEval, EdgeGroup, Scoring
from kubeflux.match.state import SLOT
from kubeflux.match.view import ScheduleView
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import Vertex

_SCORE = itemgetter(0)

Candidate = tuple[int, int, int]
"""A qualified leaf: (score, units available, edge)."""


def own_slot(vertex: Vertex, resources: list[Request]) -> Request | None:
    """The slot ``vertex`` chooses among itself: the one child of its own request (``node → slot``), whose
    count its :meth:`~kubeflux.match.policy.MatchPolicy.finish_vertex` takes at once; None when its slots go up to
    be chosen above (a slot requested at its level) or its request has other children."""
    for resource in resources:
        if resource.type == vertex.type:
            with_ = resource.with_
            return with_[0] if len(with_) == 1 and with_[0].type == SLOT else None
    return None


def leaf_slots(
    schedule: ScheduleView, visit: Visit, children: list[tuple[int, int]], label: str, own: Request | None
) -> list[EdgeGroup] | None:
    """The slot groups a vertex with ``children`` offers for ``shape`` (its slot's elements), in the order the
    generic path adds them; [] when none qualifies; None when the shape or the children are not covered.

    With ``own`` (see :func:`own_slot`) only the slots the vertex's best-k choice takes are made, when that choice
    is certain (see :func:`_chosen`): it reads nothing else of them.

    Raises :class:`MatchFailure` (EINVAL) where the generic walk does: an element marked not exclusive that a
    qualified leaf reaches (a slot holds its leaves exclusively). ``visit``: the slot's (its shape)."""
    shape = visit.resources
    if len(shape) != 1:
        return None
    element = shape[0]
    if element.type == SLOT or element.with_:
        return None
    base = visit.policy.leaf_base(element.type)
    if base is None:
        return None
    candidates = _qualified(schedule, visit.meta, children, element, base)
    if candidates is None:
        return None
    if not candidates:
        return []
    descending = visit.policy.descending
    avails = [avail for _score, avail, _edge in candidates]
    if min([score for score, _avail, _edge in candidates]) > 0:
        qualified = sum(avails)
    else:
        qualified = sum(avail for score, avail, _edge in candidates if score > 0)
    if qualified:  # the slot's best-k choice of all its candidates (Evals.choose_best_k), which sorts them
        stdsort.sort(candidates, _SCORE, descending)
    count = calc_count(element, qualified)
    if count == 0:
        return []
    if own is not None and count == 1:
        chosen = _chosen(candidates, own, descending)
        if chosen is not None:
            return _take_slots(chosen, count, label)
    return _take_slots(candidates, count, label)


def ordered_slots(candidates: list[Candidate], element: Request, label: str) -> list[EdgeGroup]:
    """:func:`leaf_slots`' slots of ``candidates`` that are already in the order the slot's choice of all of them
    puts them (``first`` finds a fresh socket's cores in strictly descending score order): no sort is needed."""
    qualified = sum([avail for score, avail, _edge in candidates if score > 0])
    count = calc_count(element, qualified)
    return _take_slots(candidates, count, label) if count else []


def _chosen(candidates: list[Candidate], own: Request, descending: bool) -> list[Candidate] | None:
    """Of ``candidates`` cut into slots of one unit (each candidate a slot of its own, in order, its score plus
    MATCH_MET), those of the slots that the vertex's own best-k choice takes, when no tie can change which: the
    first ``k``, if they and the one after them have strictly ordered scores, all positive (then every correct sort
    of the slots, the partial choice among many as the full sort of few, puts exactly these first, in this order).
    Offering only these, ``k`` is still what that choice takes of them. None otherwise."""
    if min(candidates[0][0], candidates[-1][0]) + MATCH_MET <= 0:
        return None  # a slot that does not qualify (they are sorted, so the lowest score is at an end)
    wanted = calc_count(own, len(candidates))
    if wanted == 0 or calc_count(own, wanted) != wanted:
        return None
    head = candidates[: wanted + 1]
    scores = [score for score, _avail, _edge in head]
    ordered = all(a > b for a, b in pairwise(scores)) if descending else all(a < b for a, b in pairwise(scores))
    return head[:wanted] if ordered else None


def _qualified(
    schedule: ScheduleView, meta: JobMeta, children: list[tuple[int, int]], element: Request, base: int
) -> list[Candidate] | None:
    """The children of ``element``'s type that qualify, in child order, as :meth:`Traverser._visit_leaf` finds
    them with the slot's exclusivity: up (unless testing satisfiability), units free in the window, no other job
    holding them, within their own aggregate filter. None if a child is no leaf (the generic walk visits it).
    Children of other types fail the slot's shape (their visit finds nothing and records nothing)."""
    vertices = schedule.graph.vertices
    plans, subplans = schedule.plan_table, schedule.subplans
    allocations, uses = schedule.allocation_table, schedule.use_table
    any_status = meta.alloc_type == AllocType.SATISFIABILITY
    at, duration = meta.at, meta.duration
    type = element.type
    conflict = element.exclusive is False
    skip_allocated = not conflict and meta.alloc_type == AllocType.ALLOCATE  # held, with no error to raise first
    candidates: list[Candidate] = []
    for edge, target in children:
        vertex = vertices[target]
        if vertex.out:
            return None
        if vertex.type != type or (vertex.status and not any_status):  # Status.UP is 0
            continue
        if skip_allocated and allocations.get(target):
            continue
        plan = plans.get(target)
        avail = vertex.size if plan is None else plan.avail_resources_during(at, duration)
        if avail == 0:
            continue
        if conflict:
            message = f"exclusivity conflicts at jobspec={element.label} : vertex={vertex.name}"
            raise MatchFailure(Errno.EINVAL, message)
        if (target in allocations or target in uses) and schedule.held(meta, target):
            continue
        if target in subplans and not schedule.by_subplan(meta, target, element):
            continue
        candidates.append((base + vertex.id, avail, edge))
    return candidates


def _take_slots(candidates: list[Candidate], count: int, label: str) -> list[EdgeGroup]:
    """Cut the ordered candidates into slots of ``count`` units (Fluxion's ``cnt_slot`` and ``take_slot``): each
    slot takes candidates until it has ``count`` units; the leftover that covers no whole slot is not offered."""
    if count == 1:  # every candidate offers a unit at least: one slot each
        return [
            EdgeGroup(MATCH_MET + score, 1, 0, True, False, label, [EdgeEval(avail, avail, True, edge)])
            for score, avail, edge in candidates
        ]
    slots: list[EdgeGroup] = []
    group = EdgeGroup(MATCH_MET, 1, 0, True, task_label=label)
    taken = 0
    for score, avail, edge in candidates:
        group.edges.append(EdgeEval(avail, avail, True, edge))
        group.score += score
        taken += avail
        if taken >= count:
            slots.append(group)
            group = EdgeGroup(MATCH_MET, 1, 0, True, task_label=label)
            taken = 0
    return slots


def take_slot(shape: list[Request], dfu_slot: Scoring, label: str) -> EdgeGroup | None:
    """The next slot's edges: for each element, the next best candidates covering its count (None when
    they run out)."""
    slot_group = EdgeGroup(MATCH_MET, 1, 0, True, task_label=label)
    for element in shape:
        evals = dfu_slot.evals(element.type)
        count = calc_count(element, evals.qualified)
        taken = 0
        while taken < count:
            group = evals.next_group()
            if group is None:
                return None
            first = group.edges[0]
            slot_group.edges.append(EdgeEval(first.count, first.count, True, first.edge))
            slot_group.score += group.score
            taken += first.count
    return slot_group


def count_slots(shape: list[Request], dfu_slot: Scoring) -> int:
    """How many slots of ``shape`` the candidates cover, the scarcest element deciding (Fluxion's ``cnt_slot``)."""
    fits = 2**32 - 1
    for element in shape:
        evals = dfu_slot.evals(element.type)
        count = calc_count(element, evals.qualified)
        shares = 0
        if count != 0:
            current = 0
            for group in evals.groups:
                current += group.edges[0].count
                if current >= count:
                    shares += 1
                    current = 0
        fits = min(fits, shares)
        evals.reset_cursor()
    return fits
