"""What visiting a vertex gave its parent, and how it is kept for reuse: :class:`Evaluation` (with the children's
evaluations that hold marks, :class:`Kids`), runs of exclusive leaves recorded as one piece (:class:`LeafRun`,
:class:`Pool`), a wide vertex's children cut into cached spans (:class:`Layout`), and the cache tables' helpers.

Plain records. Must never touch the graph or the schedule: the select walk fills them, the update walk reads them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from kubeflux.match.meta import AllocType, JobMeta
from kubeflux.match.scoring import EdgeEval, EdgeGroup, Evals, Scoring

CACHE_PER_VERTEX: Final = 8
"""Evaluations kept per vertex (one per request shape and time window); the oldest is dropped first."""
BLOCK: Final = 32
"""Children per block when a wide vertex's static explore is cached block by block."""

T = TypeVar("T")
CacheKey = tuple[object, ...]
CacheTable = dict[CacheKey, tuple[int, int, int, T]]
"""Cached values by key, each with the fingerprint and the window (start, end) it was computed for."""


class Excluded(Protocol):
    """Vertex uids a match treats as down (``in`` and ``len`` are asked of it; :func:`allowed_positions` also asks
    a ``allowed(uids)`` method for a mask of the given uids that are not excluded, when there is one)."""

    def __contains__(self, uid: object, /) -> bool: ...

    def __len__(self) -> int: ...


Mark = tuple[int, int, bool, int]
"""An edge chosen by a best-k choice: (edge, needs, exclusive, slot-leader action)."""
NO_LEAD, LEAD, NOT_LEAD = 0, 1, 2


class Kids:
    """The children's evaluations that hold marks, by child uid: set one by one, or whole blocks of them (a wide
    vertex refers to its blocks' tables instead of copying them; a lookup follows the few marked paths only)."""

    __slots__ = ("blocks", "own")

    def __init__(self) -> None:
        self.own: dict[int, Evaluation] = {}
        self.blocks: list[Kids] = []

    def __setitem__(self, uid: int, evaluation: Evaluation) -> None:
        self.own[uid] = evaluation

    def __bool__(self) -> bool:
        return bool(self.own or self.blocks)

    def get(self, uid: int) -> Evaluation | None:
        evaluation = self.own.get(uid)
        if evaluation is None:
            for block in self.blocks:
                evaluation = block.get(uid)
                if evaluation is not None:
                    break
        return evaluation


@dataclass(slots=True, eq=False, init=False)
class Evaluation:
    """What visiting one vertex gave its parent: whether it qualifies, its score and candidates, its choices.

    Evaluations are cached per vertex and reused while the subtree's fingerprint (:attr:`ScheduleView.fp`) and the
    request are unchanged, so a match walks only the subtrees that changed since the last one. ``marks`` are
    the edges this vertex's own best-k choice picked; ``kids`` are the children's evaluations that hold marks.
    """

    ok: bool
    x_in: bool = False
    avail: int = 0
    score: int = 0
    merged: dict[str, Evals] | None = None
    """Candidates passed up unchosen, by type (None when this vertex chose them itself)."""
    marks: list[Mark] | None = None
    kids: Kids | None = None
    applied: int = -1
    """The match sequence whose edges this evaluation's marks were last stamped on."""
    group: EdgeGroup | None = None
    run: LeafRun | None = None
    """The marks as one run of exclusive leaves of one source, when they are that (see :class:`LeafRun`)."""
    aux: dict[str, dict[str, Evals]] | None = None
    """The auxiliary subsystems' candidates passed up (:attr:`Scoring.aux`), when the walk has any."""

    def __init__(
        self,
        ok: bool,
        x_in: bool = False,
        avail: int = 0,
        score: int = 0,
        merged: dict[str, Evals] | None = None,
        marks: list[Mark] | None = None,
        kids: Kids | None = None,
        applied: int = -1,
        group: EdgeGroup | None = None,
        run: LeafRun | None = None,
    ) -> None:  # (written out: see docs/native.md)
        self.ok = ok
        self.x_in = x_in
        self.avail = avail
        self.score = score
        self.merged = merged
        self.marks = marks
        self.kids = kids
        self.applied = applied
        self.group = group
        self.run = run
        self.aux = None

    def group_for(self, edge: int) -> EdgeGroup:
        """The candidate group this vertex offers its parent through ``edge`` (its one parent edge)."""
        group = self.group
        if group is None:
            count = self.avail
            group = self.group = EdgeGroup(
                self.score, count, 0, self.x_in, edges=[EdgeEval(count, count, self.x_in, edge)]
            )
        return group


FAILED = Evaluation(False)


@dataclass(slots=True, eq=False)
class LeafRun:
    """An evaluation's marks when they are all exclusive leaves of one source, with nothing to do for slot
    leaders (a socket's cores, say): the update walk records them as one pool (see :class:`Pool`) and writes
    them as one piece of text, so a large job costs per socket rather than per core while the evaluation is
    reused."""

    source: int
    leaves: list[tuple[int, int, int]]
    """(edge, leaf, needs), in edge order (the update walk's order)."""
    uids: list[int]
    """The leaves alone, kept for the job's vertex set (one set update per pool)."""
    sizes: dict[str, int]
    """The leaves' total size per type (for the aggregate filters above)."""
    whole: bool
    """Whether the run is every child of its source, each whole (what holding the source whole records)."""
    signature: int
    texts: dict[object, str] = field(default_factory=dict)
    """Writers' text for these leaves, by writer and level (see :meth:`Writer.leaves`)."""


@dataclass(slots=True, eq=False, init=False)
class Pool:
    """A job's records on a run of leaves not yet written leaf by leaf: the planner spans, tags, uses and
    fingerprints :func:`~kubeflux.match.schedule.record_leaves` would write. Nothing reads a leaf's records without
    its parent's pools being written first (:meth:`ScheduleView.settle_source`), and a cancel that finds its pool
    unwritten drops it whole."""

    meta: JobMeta
    """The job and its window (the update walk's: a match changes its meta no more once it records)."""
    run: LeafRun
    total: int
    """The pool's share of its source's fingerprint: what its leaves' shares add up to once written."""

    def __init__(self, meta: JobMeta, run: LeafRun, total: int) -> None:  # (written out: see docs/native.md)
        self.meta = meta
        self.run = run
        self.total = total


BlockPart = tuple[Scoring, bool, Kids]
"""A span of children's candidates, whether any qualified, and their evaluations that hold marks."""


@dataclass(slots=True, eq=False)
class Layout:
    """A wide vertex's children cut into spans: ``blocks`` of :data:`BLOCK` children, and per level the sum of
    the children's fingerprints in each span (``fps[0]`` per block) and the cached candidates of each span."""

    width: int
    blocks: list[list[tuple[int, int]]]
    children: list[tuple[int, int]] = field(default_factory=list)
    """The (edge, child) pairs, in order."""
    uids: npt.NDArray[np.int64] | None = None
    """The children's uids, in order (made on first use by :func:`allowed_positions`)."""
    fps: list[list[int]] = field(default_factory=list)
    cache: list[list[CacheTable[BlockPart]]] = field(default_factory=list)
    bounds: list[list[list[int]]] = field(default_factory=list)
    """Per level and span, the sorted span bounds of the children in it (their own bounds together): a span's
    cached candidates hold for a new window unless one of these lies where the window moved."""
    ordered: str = ""
    """The children's type when they all have it and their ids strictly increase along the list, else "": a
    scoring policy then ranks them in list order (see :func:`kubeflux.match.wide.early_count`)."""
    stops: dict[tuple[bool, tuple[str, ...], bool], list[bool] | None] = field(default_factory=dict)
    """Per (node-centric, slot leaf types, backwards): after which children a walk for such slots may stop
    (:func:`kubeflux.match.ranked.slot_stops`), found on first use."""
    counts: list[list[CacheTable[int]]] = field(default_factory=list)
    """Per level and span, the most slots of a shape its children can hold in a window, as ``cache`` keeps
    candidates (:mod:`kubeflux.match.slotbound`); made on first use."""
    leaf_types: dict[str, tuple[int, bool]] = field(default_factory=dict)
    """Per vertex type, whether none of its vertices has children, and the graph's size when that was found."""


POSITIONS_AT_ONCE: Final = 512
"""Children whose exclusion :func:`allowed_positions` asks about at a time (a walk mostly stops at the first)."""
POSITIONS_FIRST: Final = 8
"""Allowed positions :func:`allowed_positions` lists first out of one mask (then four times as many each time)."""


def allowed_positions(layout: Layout, excluded: Excluded, backwards: bool) -> Iterator[int]:
    """The positions of ``layout``'s children that ``excluded`` leaves, in order (last first when ``backwards``).
    With an ``allowed`` method the mask is made a run of children at a time, vectorised, so a walk that stops at
    the first allowed child of ten thousand neither tests them one by one nor lists them all."""
    allowed: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None = getattr(excluded, "allowed", None)
    if allowed is None:
        positions = [p for p, (_, uid) in enumerate(layout.children) if uid not in excluded]
        yield from reversed(positions) if backwards else positions
        return
    uids = layout.uids
    if uids is None:
        uids = layout.uids = np.fromiter((uid for _, uid in layout.children), dtype=np.int64, count=layout.width)
    width, step = layout.width, POSITIONS_AT_ONCE
    if width <= step:  # (most graphs: one mask, with no slice to take nor offset to add)
        yield from _few_first(allowed(uids).nonzero()[0], 0, backwards)
        return
    for low in range(width - step if backwards else 0, -step if backwards else width, -step if backwards else step):
        start = max(low, 0)
        yield from _few_first(np.flatnonzero(allowed(uids[start : low + step])), start, backwards)


def _few_first(positions: npt.NDArray[np.int64], offset: int, backwards: bool) -> Iterator[int]:
    """``positions`` (ascending) plus ``offset``, in order (last first when ``backwards``), listed a few at a time and
    four times as many each time: the walk mostly stops at the first, and listing a window of 512 whole for it
    cost ~6 µs a match on 5,000 nodes."""
    if backwards:
        positions = positions[::-1]
    low, count, end = 0, POSITIONS_FIRST, len(positions)
    while low < end:
        listed = positions[low : low + count]
        yield from (listed + offset if offset else listed).tolist()
        low += count
        count *= 4


def remember(table: CacheTable[T], key: CacheKey, entry: tuple[int, int, int, T]) -> None:
    """Keep ``entry`` under ``key``, dropping the oldest entry beyond :data:`CACHE_PER_VERTEX`."""
    table[key] = entry
    if len(table) > CACHE_PER_VERTEX:
        del table[next(iter(table))]


def job_key(jobid: int, at: int, duration: int, alloc_type: AllocType) -> int:
    """A hash of what a job's record on a vertex is: its leaves' fingerprint shares are made from it."""
    return hash((jobid, at, duration, int(alloc_type)))


def take_part(part: BlockPart, dfu: Scoring, kids: Kids) -> bool:
    """Add a span's candidates and marked children to a vertex's; whether any of them qualified."""
    dfu.merge_types(part[0].by_type)
    if part[2]:
        kids.blocks.append(part[2])
    return part[1]


def same_window(bounds: list[int] | None, start: int, end: int, at: int, until: int) -> bool:
    """Whether a subtree looks the same during ``[at, until)`` as during ``[start, end)``: no span of
    the subtree starts or ends where the window's ends moved over.

    A span ``[s, t)`` meets a window ``[a, e)`` when ``s < e`` and ``a < t``; moving ``a`` between ``start``
    and ``at`` changes that only for ``t`` in ``(low, high]`` of the two, moving ``e`` between ``end`` and
    ``until`` only for ``s`` in ``[low, high)`` of those. Starts and ends share one sorted list, so both
    ranges are checked against every bound (``bounds``: those of the subtree, or of the span of children)."""
    if not bounds:
        return True
    low, high = (start, at) if start < at else (at, start)
    i = bisect_right(bounds, low)
    if i < len(bounds) and bounds[i] <= high:
        return False
    low, high = (end, until) if end < until else (until, end)
    i = bisect_left(bounds, low)
    return i == len(bounds) or bounds[i] >= high


def cached(table: CacheTable[T], key: tuple[object, ...], fp: int, bounds: list[int] | None, meta: JobMeta) -> T | None:
    """The value kept under ``key`` if the subtree (or span of children) is unchanged (``fp``) and looks the same in
    ``meta``'s window as in the one it was computed for (``bounds``: its sorted span bounds; see
    :func:`same_window`)."""
    hit = table.get(key)
    if hit is None:
        return None
    return fresh(hit, fp, bounds, meta)


def fresh(hit: tuple[int, int, int, T], fp: int, bounds: list[int] | None, meta: JobMeta) -> T | None:
    """:func:`cached` of an entry already found (``hit``: fingerprint, window start and end, value)."""
    if hit[0] != fp:
        return None
    at, end = meta.at, meta.at + meta.duration
    if (hit[1] == at and hit[2] == end) or same_window(bounds, hit[1], hit[2], at, end):
        return hit[3]
    return None
