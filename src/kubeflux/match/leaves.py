"""``first``'s one-loop paths through a vertex whose children are all leaves of the one type its request asks for
(a socket's cores): the leaves found in one loop (:func:`leaf_candidates`), the vertex's own choice of them
(:func:`own_leaves`) or the slots cut from them (:func:`first_leaf_slots`) when they come in strictly descending
score order, which every sort keeps; and what a request list says of a vertex type, worked out once per list
(:func:`kind_plan`, :func:`own_exclusive`).

Functions of a :class:`LeafWalk` (the schedule's view and the select walk's hooks and settings) and a
:class:`~kubeflux.match.visit.Visit`. The answers are the
vertex-by-vertex walk's (:class:`~kubeflux.match.traverser.Traverser` with ``leaf_batches`` off walks it): the same
candidates in the same order, the same marks, the same policy hooks in the same order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate
from operator import gt, itemgetter, lt
from typing import Final

from kubeflux.match.evaluation import FAILED, NO_LEAD, Evaluation, LeafRun
from kubeflux.match.meta import AllocType, Errno, MatchFailure
from kubeflux.match.request import Request, calc_count, effective_max
from kubeflux.match.scoring import MATCH_UNMET, EdgeEval, EdgeGroup, Scoring
from kubeflux.match.slots import ordered_slots
from kubeflux.match.state import SLOT
from kubeflux.match.view import ScheduleView
from kubeflux.match.visit import Visit
from kubeflux.resources.graph import Vertex

MatchKind = tuple[str, list[Request], int, str, bool]
"""What :meth:`Traverser._match_kind` answers: (kind, next resources, nslots, slot label, pristine)."""
KindPlan = tuple[list[Request], Request | None, MatchKind, MatchKind]
"""A request list, the slot a vertex must fit, the answer if it does, the answer otherwise."""
KINDS_KEPT: Final = 4096
"""Answers of :func:`kind_plan` kept (by request list and vertex type) before they are forgotten."""
LeafCandidate = tuple[int, int, int, int]
"""A qualified leaf: (score, units available, edge, uid)."""
Found = tuple[list[LeafCandidate], bool, bool]
"""What :func:`leaf_candidates` finds: the candidates, whether the request holds them exclusively, whether their
scores strictly descend."""
LeafKind = Callable[[Vertex, list[Request], bool], bool | None]
"""The traverser's :meth:`~kubeflux.match.traverser.Traverser._leaf_kind`."""
_COUNT = itemgetter(1)
_EDGE = itemgetter(2)


class LeafWalk:
    """What the select walk gives its one-loop paths through leaves: the schedule's view, its leaf test and whether
    it records runs of leaves as one (set from the traverser at each walk: see
    :class:`~kubeflux.match.traverser.Traverser`)."""

    __slots__ = ("leaf_kind", "leaf_runs", "schedule")

    def __init__(self, schedule: ScheduleView, leaf_kind: LeafKind, leaf_runs: bool) -> None:
        self.schedule = schedule
        self.leaf_kind = leaf_kind
        self.leaf_runs = leaf_runs
        """Whether the marks on a run of one vertex's exclusive leaves are one :class:`LeafRun`."""


def kind_plan(
    kinds: dict[tuple[int, str, bool], KindPlan], type: str, resources: list[Request], pristine: bool
) -> KindPlan:
    """:meth:`Traverser._match_kind` for a vertex of ``type``: the slot to check, the answer if the vertex fits it,
    the answer otherwise. Kept with the request list itself, so a list that dies and whose id another takes
    is never confused with it (at most :data:`KINDS_KEPT` kept)."""
    slot: Request | None = None
    matched_resource: Request | None = None
    nslots = 0
    matched = False
    none = ("none", resources, 0, "", pristine)
    plan: KindPlan | None = None
    for resource in resources:
        if resource.type == type:
            if matched:
                plan = (resources, None, none, none)
                break
            matched_resource = resource
            for child in resource.with_:
                if child.type == SLOT:
                    slot = child
                    nslots = effective_max(child)
            matched = True
        elif resource.type == SLOT:
            if matched:
                plan = (resources, None, none, none)
                break
            slot = resource
            nslots = effective_max(resource)
            matched = True
    if plan is None:
        otherwise: MatchKind
        if matched_resource is not None:
            otherwise = ("resource", matched_resource.with_, nslots, "", False)
        else:
            otherwise = (("pristine" if pristine else "none"), resources, nslots, "", pristine)
        fits = otherwise if slot is None else ("slot", slot.with_, nslots, slot.label, False)
        plan = (resources, slot, fits, otherwise)
    if len(kinds) >= KINDS_KEPT:
        kinds.clear()
    kinds[id(resources), type, pristine] = plan
    return plan


def own_exclusive(
    exclusives: dict[tuple[int, str], tuple[list[Request], bool]], type: str, resources: list[Request]
) -> bool:
    """Whether ``resources`` ask for a vertex of ``type`` exclusively (kept as :func:`kind_plan` keeps its
    answers)."""
    known = exclusives.get((id(resources), type))
    if known is not None and known[0] is resources:
        return known[1]
    answer = any(r.type == type and r.exclusive is True for r in resources)
    if len(exclusives) >= KINDS_KEPT:
        exclusives.clear()
    exclusives[id(resources), type] = (resources, answer)
    return answer


def add_leaves(
    dfu: Scoring, type: str, candidates: list[LeafCandidate], x_in: bool, descending: bool, always: bool
) -> None:
    """Add the leaves :func:`leaf_candidates` found to ``dfu``'s candidates of ``type``: ``first`` adds to them
    even when none is found (``always``); the others, as :meth:`Traverser._visit_leaf` does, only when one is."""
    if candidates or always:
        dfu.evals(type).add_all(
            [
                EdgeGroup(score, avail, 0, x_in, False, "", [EdgeEval(avail, avail, x_in, edge)])
                for score, avail, edge, _uid in candidates
            ],
            descending_scores=descending,
        )


def leaf_candidates(
    walk: LeafWalk, visit: Visit, order: list[tuple[int, int]], needed: int | None, dfu: Scoring | None = None
) -> Found | None:
    """The leaves of :meth:`Traverser._first_leaves` that qualify, in visit order, whether the request holds them
    exclusively, and whether their scores strictly descend; None when the leaves need :meth:`Traverser._evaluate`
    (the walk's ``leaf_kind`` says, the traverser's :meth:`Traverser._leaf_kind`). ``dfu`` holds the candidates
    found before (``first``'s shares count them)."""
    resources, pristine, excl, meta = visit.resources, visit.pristine, visit.exclusive, visit.meta
    resource = resources[0]
    schedule = walk.schedule
    vertices = schedule.graph.vertices
    leaf = walk.leaf_kind(vertices[order[0][1]], resources, pristine)
    if leaf is None or resource.type == SLOT:
        return None
    x_in = excl or leaf
    if x_in and resource.exclusive is False:
        conflict: str | None = f"exclusivity conflicts at jobspec={resource.label} : vertex="
    else:
        conflict = None
    check_held = x_in or resource.exclusive is True
    skip_allocated = check_held and conflict is None and meta.alloc_type == AllocType.ALLOCATE
    any_status = meta.alloc_type == AllocType.SATISFIABILITY
    at, duration = meta.at, meta.duration
    plans, subplans, policy = schedule.plan_table, schedule.subplans, visit.policy
    allocations, uses = schedule.allocation_table, schedule.use_table
    base = policy.leaf_base(resource.type)
    per_share = effective_max(resource)
    total = 0 if dfu is None or needed is None else dfu.total_count(resource.type)
    previous = current = shares = 0
    candidates: list[LeafCandidate] = []
    descending, last_score = True, float("inf")
    # Leaves whose parent's fingerprint is still that of a fresh graph hold no span, use or pool and are up
    # (each of those is in the fingerprint): every one is free whole (what a cached evaluation trusts too).
    fresh = base is not None and not schedule.graph.shared_children and schedule.fp[vertices[order[0][1]].parent] == 0
    if fresh and base is not None:
        # Each leaf holds a unit at least, so the loop below would stop within ``needed * per_share`` of them.
        head = order if needed is None or per_share <= 0 else order[: needed * per_share]
        kids = [vertices[target] for _edge, target in head]
        sizes = [vertex.size for vertex in kids]
        if 0 not in sizes:  # (else the loop below skips the empty ones)
            if conflict is not None:
                raise MatchFailure(Errno.EINVAL, conflict + kids[0].name)
            stop = len(sizes) if needed is None else _stop(sizes, total, per_share, needed)
            ids = [vertex.id for vertex in kids[:stop]]
            taken = zip(ids, sizes, order, strict=False)  # the first ``stop`` of them
            candidates = [(base + id, size, edge, target) for id, size, (edge, target) in taken]
            return candidates, x_in, all(map(gt, ids, ids[1:]))
    for edge, target in order:
        vertex = vertices[target]
        if fresh:
            avail = vertex.size
            if avail == 0:
                continue
            if conflict is not None:
                raise MatchFailure(Errno.EINVAL, conflict + vertex.name)
        else:
            if vertex.status and not any_status:  # Status.UP is 0
                continue
            plan = plans.get(target)
            if plan is not None and skip_allocated and allocations.get(target):
                continue  # held whatever its availability (see _held), and no error to raise first
            avail = vertex.size if plan is None else plan.avail_resources_during(at, duration)
            if avail == 0:
                continue
            if conflict is not None:
                raise MatchFailure(Errno.EINVAL, conflict + vertex.name)
            if check_held and (target in allocations or target in uses) and schedule.held(meta, target):
                continue
            if target in subplans and not schedule.by_subplan(meta, target, resource):
                continue
        if base is None:
            policy.discover(vertex)
            score = policy.finish_leaf(vertex)
        else:
            score = base + vertex.id
        if score >= last_score:
            descending = False
        last_score = float(score)  # one representation for mypyc (scores are ints far below 2**53: exact)
        candidates.append((score, avail, edge, target))
        if needed is None:
            continue
        total += avail
        if total > previous:
            current += total - previous
            previous = total
            if per_share > 0 and current >= per_share:
                shares += 1
                current = 0
        if shares >= needed:
            break
    return candidates, x_in, descending


def _stop(sizes: list[int], total: int, per_share: int, needed: int) -> int:
    """How many of leaves with ``sizes`` (all > 0) :func:`leaf_candidates`' loop takes before ``needed`` shares of
    ``per_share`` units are found, counting from ``total`` units found before (all of them if never)."""
    if per_share <= 0:
        return len(sizes)
    if needed == 1:  # the first leaf at which the running count reaches a share (the sums strictly increase)
        return min(bisect_left(list(accumulate(sizes)), per_share - total) + 1, len(sizes))
    current = total
    shares = 0
    for n, size in enumerate(sizes, 1):
        current += size
        if current >= per_share:
            shares += 1
            current = 0
            if shares >= needed:
                return n
    return len(sizes)


def own_leaves(
    walk: LeafWalk, visit: Visit, vertex: Vertex, children: list[tuple[int, int]], avail: int
) -> Evaluation | Found | None:
    """``first``'s evaluation of a vertex whose request asks only for leaves of one type and whose children are
    all such leaves (a socket's cores under ``socket → core(k)``): the explore in one loop, and, when the
    leaves come in strictly descending score order (a vertex seen fresh, or with some leaves taken), the
    vertex's own best-k choice of them without an edge group per leaf, since every sort keeps that order.
    Otherwise what :func:`leaf_candidates` found, which the caller adds (:func:`add_leaves`) and goes on with (policy
    hooks and choices as :meth:`Traverser._evaluate` makes them, in the same order); None when the vertex is not
    such a vertex (nothing was done). ``visit``: the request of the vertex's children; ``avail``: the vertex's free
    units."""
    schedule = walk.schedule
    source = schedule.walk_parent(children[0][1])
    order = schedule.heaviest_first(source, children)
    element = visit.resources[0]
    x_in = visit.exclusive
    if schedule.leaf_family(source, order) != element.type:
        return None
    found = leaf_candidates(walk, visit, order, 1)
    if found is None:
        return None
    candidates, leaf_x_in, descending = found
    if not (descending and visit.policy.descending):
        return found
    counts = list(map(_COUNT, candidates))
    if candidates and candidates[-1][0] > 0:  # the lowest score is the last
        qualified = sum(counts)
    else:
        qualified = sum([count for score, count, _edge, _uid in candidates if score > 0])
    wanted = calc_count(element, qualified)
    score = visit.policy.finish_chosen(vertex, wanted > 0)
    if wanted == 0:
        return FAILED
    evaluation = Evaluation(True, x_in, avail, score)
    if score <= MATCH_UNMET:
        return evaluation
    # the first of them that cover ``wanted`` (each holds some units, so the running sums strictly increase)
    chosen = candidates[: bisect_left(list(accumulate(counts)), wanted) + 1]
    evaluation.marks = [(edge, count, leaf_x_in, NO_LEAD) for _score, count, edge, _uid in chosen]
    if walk.leaf_runs and leaf_x_in and not schedule.graph.shared_children:
        evaluation.run = own_run(schedule, vertex.uid, chosen)
    return evaluation


def first_leaf_slots(
    walk: LeafWalk, visit: Visit, children: list[tuple[int, int]], nslots: int, label: str
) -> list[EdgeGroup] | None:
    """``first``'s slots of one element made of the vertex's own leaves (a socket's cores for ``slot →
    core(k)``): the leaves :meth:`Traverser._dom_slot` explores in one loop (stopping at ``nslots`` slots), cut into
    slots as :func:`~kubeflux.match.slots.leaf_slots` cuts them, when they come in strictly descending score
    order under a descending policy (the slot's choice of all of them then keeps that order). None when the
    caller must walk (nothing was changed). ``visit``: the slot's (its shape, held exclusively)."""
    element = visit.resources[0]
    schedule = walk.schedule
    source = schedule.walk_parent(children[0][1])
    order = schedule.heaviest_first(source, children)
    if schedule.leaf_family(source, order) != element.type:
        return None
    found = leaf_candidates(walk, visit, order, max(nslots, 1))
    if found is None or not (found[2] and visit.policy.descending):
        return None
    return ordered_slots([(score, avail, edge) for score, avail, edge, _uid in found[0]], element, label)


def own_run(schedule: ScheduleView, source: int, chosen: list[LeafCandidate]) -> LeafRun:
    """:meth:`WalkState.leaf_run` of the marks :func:`own_leaves` made of ``chosen``, exclusive leaves of one type
    reached through ``source``'s own out-edges (each edge once)."""
    if len(chosen) > 1 and chosen[0][2] > chosen[-1][2]:
        chosen = chosen[::-1]  # found highest uniq_id first, which is usually the last edge first
    _, counts, edges, uid_tuple = zip(*chosen, strict=True)
    if not all(map(lt, edges, edges[1:])):
        _, counts, edges, uid_tuple = zip(*sorted(chosen, key=_EDGE), strict=True)
    leaves = list(zip(edges, uid_tuple, counts, strict=True))
    uids = list(uid_tuple)
    vertices = schedule.graph.vertices
    sizes = [vertices[uid].size for uid in uids]
    whole = len(uids) == len(schedule.children(source)) and list(counts) == sizes
    type = vertices[uids[0]].type
    return LeafRun(source, leaves, uids, {type: sum(sizes)}, whole, hash((source, tuple(leaves))))
