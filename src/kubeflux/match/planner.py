"""The time planner: how many units of one resource type are free at each instant, as Fluxion's planner keeps it.

A pure leaf: it knows nothing of graphs, vertices or jobs. Semantics follow Fluxion's ``planner.h`` /
``planner_multi.h`` (flux-sched ``resource/planner``); each call below says which Fluxion function it mirrors.

Time and spans
    Time is an integer number of seconds. A planner covers the horizon ``[base, base + duration)``; ``end`` is
    ``base + duration``. A *span* reserves ``request`` units over ``[start, start + duration)``: it occupies
    ``start`` and is gone at ``start + duration``. Span ids are positive integers starting at 1 and never reused
    within a planner (until :meth:`Planner.reset`). A request of 0 units is a valid span: it holds nothing but
    still creates scheduled points (``planner_multi`` relies on this to keep one time axis for all its types).

Scheduled points
    The planner's state is a step function stored at *scheduled points*: ``base`` and the start and end of every
    span. The remaining count at time ``t`` is the value of the last point at or before ``t``.
    :meth:`Planner.avail_time_first` / :meth:`Planner.avail_time_next` return **only scheduled points**: if the
    state changes at t1 and t2, they can return t1 or t2 but never t1 + 1, even when it would fit. In particular,
    an ``on_or_after`` that is not a scheduled point is itself never returned.

Errors
    Fluxion returns -1 and sets ``errno``. Here a bad call raises a :class:`PlannerError` subclass whose
    ``errno`` attribute is the errno Fluxion sets for the same failure; an expected negative answer is a value:
    ``avail_during`` returns ``False`` (Fluxion: -1/EBUSY) and ``avail_time_first/next`` and
    ``unavail_time_first`` return ``None`` (Fluxion: -1/ENOENT).

    ====================== ========== ====================================================================
    exception              errno      raised when
    ====================== ========== ====================================================================
    PlannerInvalidError    EINVAL     bad argument: duration < 1, start before ``base``, span past ``end``,
                                      ``on_or_after`` outside ``[base, end)``, reduce by more than planned,
                                      ``avail_time_next`` without a live ``avail_time_first``, vector length
    PlannerBusyError       EINVAL     ``add_span``: fewer units free than requested somewhere in the span
                                      (a subclass of PlannerInvalidError; Fluxion reports EINVAL too)
    UnknownSpanError       EINVAL /   no span with that id (EINVAL in a Planner, ENOENT in a MultiPlanner,
                           ENOENT     as in Fluxion); also a ``LookupError``
    PlannerRangeError      ERANGE     request or total negative, request larger than the total, a query time
                                      window outside the horizon
    ====================== ========== ====================================================================

    EKEYREJECTED (Fluxion could not update its red-black trees) and EEXIST (span id collision) cannot happen
    here; ENOMEM is Python's ``MemoryError``.

Planner calls (one resource type)
    ``Planner(total, base, duration, resource_type)``: ``planner_new``. EINVAL if duration < 1, ERANGE if
    total < 0.
    ``add_span(start, duration, request) -> span_id``: ``planner_add_span``. EINVAL if duration < 1, start < base
    or start + duration > end; ERANGE if request < 0 or request > total; PlannerBusyError if fewer than
    ``request`` units are free at some instant of the span. Invalidates the avail-time iterator.
    ``rem_span(span_id)``: ``planner_rem_span``; UnknownSpanError. Invalidates the avail-time iterator.
    ``reduce_span(span_id, to_remove) -> bool``: ``planner_reduce_span`` (partial release). Removing exactly the
    planned count removes the span (returns True, like ``rem_span``); 0 does nothing (False); less than planned
    shrinks the span (False) and restarts the iterator from its ``on_or_after``; more than planned or negative
    is EINVAL. Spans planned with 0 units are removed by ``reduce_span(id, 0)``.
    ``avail_resources_at(at) -> int``: remaining units at ``at``; ERANGE unless base <= at <= end.
    ``avail_resources_during(at, duration) -> int``: the minimum remaining over ``[at, at + duration)``; EINVAL
    if duration < 1, ERANGE if at < base or at + duration > end.
    ``avail_during(at, duration, request) -> bool``: ``planner_avail_during``; True when ``request`` units are
    free at every instant of ``[at, at + duration)`` (any ``at``, not only scheduled points). EINVAL if
    duration < 1; ERANGE if request < 0, request > total, at < base or at + duration > end.
    ``avail_time_first(on_or_after, duration, request) -> int | None``: the earliest scheduled point
    t >= on_or_after with t + duration <= end and at least ``request`` units free over ``[t, t + duration)``;
    None when there is none (ENOENT). EINVAL unless base <= on_or_after < end and duration >= 1; ERANGE if
    request < 0 or request > total. Starts an iteration.
    ``avail_time_next() -> int | None``: the next such point after the last one returned, for the same request.
    EINVAL if no iteration is live (never started, or a span was added or removed since); ERANGE if the total
    has shrunk below the request; None (ENOENT) when exhausted.
    ``unavail_time_first(on_or_after, request) -> int | None``: ``planner_unavail_time_first``: the time of the
    first scheduled point, starting from the one in force at ``on_or_after`` (so possibly earlier than it),
    with fewer than ``request`` units free; None (ENOENT) if there is none. EINVAL unless
    base <= on_or_after < end; ERANGE if request < 0 or request > total. Leaves the avail-time iterator alone.
    ``span_start(id)``, ``span_duration(id)``, ``span_resources(id)``: ``planner_span_start_time``,
    ``planner_span_duration``, ``planner_span_resource_count``; UnknownSpanError.
    ``is_active_span(id) -> bool``, ``span_ids() -> list[int]`` (ascending, as Fluxion's span map iterates),
    ``span_count()``, ``is_empty`` (no spans), ``points()`` (the scheduled points as (time, remaining)).
    ``update_total(total)``: ``planner_update_total`` (graph grow/shrink): every point's remaining moves by the
    change of total. ERANGE if total < 0.
    ``reset(base, duration)``: ``planner_reset``: drop every span, new horizon, span ids restart at 1.
    ``copy()``: ``planner_copy``. ``==`` / :func:`planners_equal`: ``planners_equal``: same total, type,
    horizon, span id counter, spans, points and iterator position. ``same_schedule(other)``: the same but
    ignoring the span id counter and the iterator (a planner whose spans were all removed has the same schedule
    as a fresh one).

MultiPlanner calls (``planner_multi``: N planners, one per resource type, on one time axis)
    ``MultiPlanner(totals, base, duration)``: ``totals`` is a mapping or sequence of (type, total); the order
    is the vector order. ERANGE if a total < 0, EINVAL if duration < 1 or a type repeats.
    Requests are vectors in that order (a sequence of the same length, else EINVAL) or a mapping from type to
    count (missing types request 0; an unknown type is EINVAL).
    ``add_span(start, duration, requests) -> span_id``: one span in every planner (0-unit spans included); ids
    start at 0, as in Fluxion, and a failed call still uses one up. Errors as ``Planner.add_span``.
    ``rem_span(span_id)``, ``reduce_span(span_id, reductions) -> bool``: ``planner_multi_rem_span`` /
    ``planner_multi_reduce_span``; UnknownSpanError (ENOENT). ``reductions`` maps type to units released; types
    the multi-planner does not track are ignored, types not named release 0 (which removes their 0-unit spans);
    returns True when nothing of the span is left (it is then gone).
    ``avail_during(at, duration, requests) -> bool``, ``avail_resources_at(at, type)``,
    ``avail_resources_array_at(at)``, ``avail_resources_array_during(at, duration)``: per-type Planner calls.
    ``avail_time_first(on_or_after, duration, requests)`` / ``avail_time_next()``: the scheduled points of the
    **first** type's planner at which that planner fits and every other type passes ``avail_during`` (points
    that another type's state rules out are skipped without being tried; the answers are the same); None
    (ENOENT) when exhausted; ERANGE if any request exceeds its total; ``avail_time_next`` is EINVAL after a
    span change or a change of types.
    ``span_planned(span_id, type)``: ``planner_multi_span_planned_at`` (0 for a type added after the span).
    ``update(totals)``: ``planner_multi_update``: new types get an empty planner, known types get the new
    total, types not listed are dropped, the vector order becomes the order given. ``add_resource_type(type,
    total)`` appends one type; ``update_total(type, total)`` changes one total.
    ``planner(type)``: a copy of that type's planner as a planner per type would hold it (total, points, spans,
    avail-time iterator), to inspect: changing it leaves the multi-planner alone; its span ids are the
    multi-planner's plus 1. ``copy()``; ``==``: the same span id counter, spans, types, totals, horizon and
    iterator positions; ``same_schedule(other)``: the same types, totals, horizon and spans (in id order).
    The types share one set of scheduled points: a span's ends are counted and inserted once for all of them.
    A type's own points (the ones ``planner(type)`` lists and ``avail_time_*`` iterates when the type is first)
    remain ``base`` and the ends of the spans holding it, 0-unit spans included.

Known differences from Fluxion (all where Fluxion's C code is unsafe or self-contradictory)
    * A span must end by ``end``; Fluxion's ``span_input_check`` also admits one ending at ``end + 1`` without a
      resource check. ``add_span`` with request > total is ERANGE (Fluxion's pre-check turns it into EINVAL).
    * ``update_total`` keeps remaining = total - planned exactly (it may go below 0 after a shrink; reported
      counts are clamped at 0 and 0-unit requests always fit). Fluxion clamps the stored value at 0, so after a
      shrink and a removal it can report more than the total.
    * ``MultiPlanner.add_span`` undoes the spans it already added when one type fails (Fluxion leaves them);
      ``MultiPlanner.reduce_span`` checks every amount before changing anything; spans survive the addition or
      removal of types (Fluxion refuses them with EINVAL once the span vector and planner count differ).
"""

from __future__ import annotations

import errno as _errno
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence

__all__ = [
    "MultiPlanner",
    "Planner",
    "PlannerBusyError",
    "PlannerError",
    "PlannerInvalidError",
    "PlannerRangeError",
    "UnitPlanner",
    "UnknownSpanError",
    "planners_equal",
]


class PlannerError(Exception):
    """A failed planner call; ``errno`` is the errno Fluxion sets for the same failure."""

    errno: int = _errno.EINVAL


class PlannerInvalidError(PlannerError, ValueError):
    """An invalid argument (EINVAL)."""

    errno = _errno.EINVAL


class PlannerRangeError(PlannerError, ValueError):
    """A count or time out of range (ERANGE)."""

    errno = _errno.ERANGE


class PlannerBusyError(PlannerInvalidError):
    """``add_span`` found fewer units free than requested during the span (Fluxion: EINVAL)."""


class UnknownSpanError(PlannerError, LookupError):
    """No span with this id (EINVAL from a Planner, ENOENT from a MultiPlanner)."""

    def __init__(self, span_id: int, errno: int = _errno.EINVAL) -> None:
        super().__init__(f"no span with id {span_id}")
        self.span_id = span_id
        self.errno = errno


_BLOCK_MAX = 128
_SHORT_BLOCK = 16
"""Blocks up to this long are rescanned after a change: cheaper than keeping their extremes by cases."""


class _Timeline:
    """The scheduled points of one planner, as a list of sorted blocks (a sqrt-decomposed step function).

    Block ``b`` holds ``times[b]`` (ascending) and ``rems[b]``; the remaining count of a point is
    ``rems[b][i] + offs[b]``, so adding to every point of a whole block is O(1). ``mins``/``maxs`` hold each
    block's extreme remaining counts (offset included) and let searches skip blocks; ``firsts`` holds each
    block's first time for bisection. The first point (``base``) is never removed.
    """

    __slots__ = ("firsts", "maxs", "mins", "offs", "rems", "times")

    def __init__(self, base: int, remaining: int) -> None:
        self.times: list[list[int]] = [[base]]
        self.rems: list[list[int]] = [[remaining]]
        self.offs: list[int] = [0]
        self.mins: list[int] = [remaining]
        self.maxs: list[int] = [remaining]
        self.firsts: list[int] = [base]

    def set_points(self, times: list[int], rems: list[int]) -> None:
        """Become one block holding ``times`` (ascending, at most a block's worth) with their remaining counts.

        In place: a planner that empties and fills again (a core allocated and released) reuses its lists."""
        if len(self.times) > 1:
            for column in (self.times, self.rems, self.offs, self.mins, self.maxs, self.firsts):
                del column[1:]
        self.times[0] = times
        self.rems[0] = rems
        self.offs[0] = 0
        self.mins[0] = min(rems)
        self.maxs[0] = max(rems)
        self.firsts[0] = times[0]

    def copy(self) -> _Timeline:
        other = _Timeline.__new__(_Timeline)
        other.times = [list(t) for t in self.times]
        other.rems = [list(r) for r in self.rems]
        other.offs = list(self.offs)
        other.mins = list(self.mins)
        other.maxs = list(self.maxs)
        other.firsts = list(self.firsts)
        return other

    def items(self) -> Iterator[tuple[int, int]]:
        for times, rems, off in zip(self.times, self.rems, self.offs, strict=True):
            for t, r in zip(times, rems, strict=True):
                yield t, r + off

    def locate(self, t: int) -> tuple[int, int]:
        """The block and index of the point in force at ``t`` (the last one at or before it; t >= base)."""
        b = bisect_right(self.firsts, t) - 1
        return b, bisect_right(self.times[b], t) - 1

    def value_at(self, t: int) -> int:
        b = bisect_right(self.firsts, t) - 1
        return self.rems[b][bisect_right(self.times[b], t) - 1] + self.offs[b]

    def ceil(self, t: int) -> tuple[int, int] | None:
        """The first point at or after ``t``."""
        b = max(bisect_right(self.firsts, t) - 1, 0)
        i = bisect_left(self.times[b], t)
        if i < len(self.times[b]):
            return b, i
        return (b + 1, 0) if b + 1 < len(self.times) else None

    def _refresh(self, b: int) -> None:
        rems = self.rems[b]
        off = self.offs[b]
        self.mins[b] = min(rems) + off
        self.maxs[b] = max(rems) + off

    def insert(self, t: int) -> None:
        """Add a point at ``t`` (not yet a point, t > base) carrying the state in force there."""
        b, i = self.locate(t)
        times = self.times[b]
        rems = self.rems[b]
        times.insert(i + 1, t)
        rems.insert(i + 1, rems[i])
        if len(times) > _BLOCK_MAX:
            half = len(times) // 2
            self.times[b + 1 : b + 1] = [times[half:]]
            self.rems[b + 1 : b + 1] = [rems[half:]]
            del times[half:], rems[half:]
            self.offs.insert(b + 1, self.offs[b])
            self.mins.insert(b + 1, 0)
            self.maxs.insert(b + 1, 0)
            self.firsts.insert(b + 1, self.times[b + 1][0])
            self._refresh(b)
            self._refresh(b + 1)

    def remove(self, t: int) -> None:
        """Drop the point at ``t`` (a point, t > base); its state equals the one before it."""
        b, i = self.locate(t)
        times = self.times[b]
        del times[i], self.rems[b][i]
        if not times:
            del self.times[b], self.rems[b], self.offs[b], self.mins[b], self.maxs[b], self.firsts[b]
            return
        if i == 0:  # the equal point before it was in the previous block: this block's extremes may change
            self.firsts[b] = times[0]
            self._refresh(b)

    def add(self, start: int, last: int, delta: int) -> None:
        """Add ``delta`` to every point in ``[start, last)``; both are points."""
        b1, i1 = self.locate(start)
        b2, i2 = self.locate(last)
        self.add_at(b1, i1, b2, i2, delta)

    def add_at(self, b1: int, i1: int, b2: int, i2: int, delta: int) -> None:
        """Add ``delta`` to the points from (b1, i1) up to, not including, (b2, i2) (i2 may be the length of block
        b2: the points from (b1, i1) to the end of block b2)."""
        if b1 == b2:
            rems = self.rems[b1]
            if len(rems) <= _SHORT_BLOCK:
                rems[i1:i2] = [r + delta for r in rems[i1:i2]]
                off = self.offs[b1]
                self.mins[b1] = min(rems) + off
                self.maxs[b1] = max(rems) + off
            else:
                self._add_part(b1, i1, i2, delta)
            return
        self._add_part(b1, i1, len(self.rems[b1]), delta)
        offs, mins, maxs = self.offs, self.mins, self.maxs
        for b in range(b1 + 1, b2):
            offs[b] += delta
            mins[b] += delta
            maxs[b] += delta
        if i2:
            self._add_part(b2, 0, i2, delta)

    def _add_part(self, b: int, i: int, j: int, delta: int) -> None:
        """Add ``delta`` to the points ``i:j`` of block ``b`` (i < j), keeping its extremes without a full scan
        unless the changed points held one that moved inwards (a short block is simply rescanned)."""
        rems = self.rems[b]
        if len(rems) <= _SHORT_BLOCK:
            rems[i:j] = [r + delta for r in rems[i:j]]
            self._refresh(b)
            return
        part = rems[i:j]
        rems[i:j] = [r + delta for r in part]
        off = self.offs[b]
        low = min(part) + off
        high = max(part) + off
        if j - i == len(rems):
            self.mins[b] = low + delta
            self.maxs[b] = high + delta
        elif delta < 0:
            self.mins[b] = min(self.mins[b], low + delta)
            if high == self.maxs[b]:
                self.maxs[b] = max(rems) + off
        else:
            self.maxs[b] = max(self.maxs[b], high + delta)
            if low == self.mins[b]:
                self.mins[b] = min(rems) + off

    def shift(self, delta: int) -> None:
        for b in range(len(self.offs)):
            self.offs[b] += delta
            self.mins[b] += delta
            self.maxs[b] += delta

    def min_during(self, at: int, last: int) -> int:
        """The minimum remaining over ``[at, last)`` (at < last)."""
        b, i = self.locate(at)
        be = bisect_left(self.firsts, last) - 1
        return self.min_at(b, i, be, bisect_left(self.times[be], last))

    def window(self, at: int, last: int) -> tuple[int, int, int, int]:
        """The positions bounding ``[at, last)`` (at < last): the point in force at ``at``, and the block of the
        last point before ``last`` with the index after that point."""
        firsts, times = self.firsts, self.times
        b = bisect_right(firsts, at) - 1
        be = bisect_left(firsts, last) - 1
        return b, bisect_right(times[b], at) - 1, be, bisect_left(times[be], last)

    def min_at(self, b: int, i: int, be: int, je: int) -> int:
        """The minimum remaining of the points from (b, i) up to, not including, (be, je) (je >= 1)."""
        rems_l, offs = self.rems, self.offs
        if b == be:
            return min(rems_l[b][i:je]) + offs[b]
        mins = self.mins
        low = mins[b] if i == 0 else min(rems_l[b][i:]) + offs[b]
        if be > b + 1:
            low = min(low, min(mins[b + 1 : be]))
        high = mins[be] if je == len(rems_l[be]) else min(rems_l[be][:je]) + offs[be]
        return low if low < high else high

    def first_at_least(self, b: int, i: int, request: int) -> tuple[int, int] | None:
        """The first point at or after (b, i) with at least ``request`` remaining."""
        rems_l, offs, maxs = self.rems, self.offs, self.maxs
        while b < len(rems_l):
            if maxs[b] >= request:
                floor = request - offs[b]
                rems = rems_l[b]
                for k in range(i, len(rems)):
                    if rems[k] >= floor:
                        return b, k
            b += 1
            i = 0
        return None

    def last_below(self, b: int, i: int, last: int, request: int) -> tuple[int, int] | None:
        """The last point after (b, i) and before ``last`` with less than ``request`` remaining."""
        times_l, rems_l, offs, mins = self.times, self.rems, self.offs, self.mins
        be = bisect_left(self.firsts, last) - 1
        ke = bisect_left(times_l[be], last) - 1
        while be > b or (be == b and ke > i):
            if mins[be] < request:
                floor = request - offs[be]
                rems = rems_l[be]
                stop = i if be == b else -1
                for k in range(ke, stop, -1):
                    if rems[k] < floor:
                        return be, k
            be -= 1
            ke = len(times_l[be]) - 1
        return None

    def skip_after_failure(self, at: int, last: int, request: int, end: int) -> int:
        """The earliest start not ruled out by a failed ``avail_during(at, last - at, request)``.

        Let f be the last point in force during the window with too little remaining: every start from ``at`` up
        to the point after f has f's state in its window, so none of them can fit (``end + 1`` if f is the last).
        """
        b, i = self.locate(at)
        if self.rems[b][i] + self.offs[b] >= request:
            fail = self.last_below(b, i, last, request)
            if fail is None:
                return at
            b, i = fail
        else:
            b, i = self.last_below(b, i, last, request) or (b, i)
        if i + 1 < len(self.times[b]):
            return self.times[b][i + 1]
        return self.firsts[b + 1] if b + 1 < len(self.firsts) else end + 1

    @classmethod
    def of(cls, times: list[int], rems: list[int]) -> _Timeline:
        """A timeline of the points ``times`` (ascending, from base) with their remaining counts."""
        tl = cls(times[0], rems[0])
        tl.set_points(times[:_BLOCK_MAX], rems[:_BLOCK_MAX])
        for k in range(_BLOCK_MAX, len(times), _BLOCK_MAX):
            tl.times.append(times[k : k + _BLOCK_MAX])
            tl.rems.append(rems[k : k + _BLOCK_MAX])
            tl.offs.append(0)
            tl.mins.append(0)
            tl.maxs.append(0)
            tl.firsts.append(times[k])
            tl._refresh(len(tl.times) - 1)
        return tl


class _Axis:
    """The scheduled points of several step functions (one per resource type), held once.

    Each column is a :class:`_Timeline` whose ``times`` and ``firsts`` are the axis's own lists, so a point is
    inserted or removed once for every type, in the same block; a column keeps only its remaining counts, block
    offsets and extremes. A point that no span of a type starts or ends at carries, in that type's column, the
    count of the point before it (an insertion copies it and only the types a span holds are changed over it), so
    every count, minimum and fit a column answers is the one of that type's own points.
    """

    __slots__ = ("columns", "firsts", "times")

    def __init__(self, base: int, totals: Sequence[int]) -> None:
        self.times: list[list[int]] = [[base]]
        self.firsts: list[int] = [base]
        self.columns: list[_Timeline] = []
        for total in totals:
            col = _Timeline.__new__(_Timeline)
            col.times = self.times
            col.firsts = self.firsts
            col.rems = [[total]]
            col.offs = [0]
            col.mins = [total]
            col.maxs = [total]
            self.columns.append(col)

    def column(self, remaining: int) -> _Timeline:
        """A new column on this axis with ``remaining`` at every point (the caller adds it to ``columns``)."""
        col = _Timeline.__new__(_Timeline)
        col.times = self.times
        col.firsts = self.firsts
        col.rems = [[remaining] * len(times) for times in self.times]
        col.offs = [0] * len(self.times)
        col.mins = [remaining] * len(self.times)
        col.maxs = [remaining] * len(self.times)
        return col

    def copy(self) -> _Axis:
        other = _Axis.__new__(_Axis)
        other.times = [list(times) for times in self.times]
        other.firsts = list(self.firsts)
        other.columns = []
        for col in self.columns:
            twin = _Timeline.__new__(_Timeline)
            twin.times = other.times
            twin.firsts = other.firsts
            twin.rems = [list(rems) for rems in col.rems]
            twin.offs = list(col.offs)
            twin.mins = list(col.mins)
            twin.maxs = list(col.maxs)
            other.columns.append(twin)
        return other

    def clear(self, base: int, totals: Sequence[int]) -> None:
        """Keep only the point ``base``, each column at its total; in place (the columns share the lists)."""
        times, firsts = self.times, self.firsts
        del times[1:], firsts[1:]
        times[0] = [base]
        firsts[0] = base
        for col, total in zip(self.columns, totals, strict=True):
            del col.rems[1:], col.offs[1:], col.mins[1:], col.maxs[1:]
            col.rems[0] = [total]
            col.offs[0] = 0
            col.mins[0] = col.maxs[0] = total

    def first_span(self, start: int, last: int, requests: Sequence[int], totals: Sequence[int]) -> None:
        """Become the points of one span on an axis holding only ``base`` (requests within their totals)."""
        base = self.times[0][0]
        self.times[0] = [base, last] if start == base else [base, start, last]
        for col, request, total in zip(self.columns, requests, totals, strict=True):
            col.rems[0] = [total - request, total] if start == base else [total, total - request, total]
            col.offs[0] = 0
            col.mins[0] = total - request
            col.maxs[0] = total

    def insert(self, t: int) -> None:
        """Add a point at ``t`` (not yet a point, t > base) carrying, in every column, the count in force there."""
        b = bisect_right(self.firsts, t) - 1
        times = self.times[b]
        i = bisect_right(times, t)
        times.insert(i, t)
        for col in self.columns:
            rems = col.rems[b]
            rems.insert(i, rems[i - 1])
        if len(times) > _BLOCK_MAX:
            half = len(times) // 2
            self.times.insert(b + 1, times[half:])
            del times[half:]
            self.firsts.insert(b + 1, self.times[b + 1][0])
            for col in self.columns:
                rems = col.rems[b]
                col.rems.insert(b + 1, rems[half:])
                del rems[half:]
                col.offs.insert(b + 1, col.offs[b])
                col.mins.insert(b + 1, 0)
                col.maxs.insert(b + 1, 0)
                col._refresh(b)
                col._refresh(b + 1)

    def remove(self, t: int) -> None:
        """Drop the point at ``t`` (a point, t > base); in every column its count equals the one before it."""
        b = bisect_right(self.firsts, t) - 1
        times = self.times[b]
        i = bisect_left(times, t)
        del times[i]
        if not times:
            del self.times[b], self.firsts[b]
            for col in self.columns:
                del col.rems[b], col.offs[b], col.mins[b], col.maxs[b]
            return
        for col in self.columns:
            del col.rems[b][i]
        if i == 0:  # the equal point before it was in the previous block: this block's extremes may change
            self.firsts[b] = times[0]
            for col in self.columns:
                col._refresh(b)


def _check_count(value: int, what: str) -> None:
    if value < 0:
        raise PlannerRangeError(f"{what} must be >= 0, got {value}")


class Planner:
    """Free units of one resource type over ``[base, base + duration)``; see the module docstring."""

    __slots__ = ("_base", "_end", "_iter", "_iter_cursor", "_refs", "_span_counter", "_spans", "_tl", "_total", "_type")

    def __init__(self, total: int, base: int, duration: int, resource_type: str) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        _check_count(total, "resource total")
        self._total = total
        self._type = resource_type
        self._base = base
        self._end = base + duration
        self._clear()

    def _clear(self) -> None:
        self._tl = _Timeline(self._base, self._total)
        self._refs: dict[int, int] = {self._base: 1}
        self._spans: dict[int, tuple[int, int, int]] = {}
        self._span_counter = 0
        self._iter: tuple[int, int, int] | None = None
        self._iter_cursor = 0

    @property
    def base(self) -> int:
        return self._base

    @property
    def duration(self) -> int:
        return self._end - self._base

    @property
    def end(self) -> int:
        return self._end

    @property
    def total(self) -> int:
        return self._total

    @property
    def resource_type(self) -> str:
        return self._type

    @property
    def is_empty(self) -> bool:
        return not self._spans

    def __repr__(self) -> str:
        return (
            f"Planner({self._total}, {self._base}, {self._end - self._base}, {self._type!r}: "
            f"{len(self._spans)} spans, {len(self._refs)} points)"
        )

    def reset(self, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        self._base = base
        self._end = base + duration
        self._clear()

    def copy(self) -> Planner:
        other = Planner.__new__(Planner)
        other._total = self._total
        other._type = self._type
        other._base = self._base
        other._end = self._end
        other._tl = self._tl.copy()
        other._refs = dict(self._refs)
        other._spans = dict(self._spans)
        other._span_counter = self._span_counter
        other._iter = self._iter
        other._iter_cursor = self._iter_cursor
        return other

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, object]) -> Planner:
        return self.copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Planner):
            return NotImplemented
        return (
            self.same_schedule(other)
            and self._span_counter == other._span_counter
            and (self._iter is None) == (other._iter is None)
            and (self._iter is None or self._iter_cursor == other._iter_cursor)
        )

    __hash__ = None  # type: ignore[assignment]

    def same_schedule(self, other: Planner) -> bool:
        return (
            self._total == other._total
            and self._type == other._type
            and self._base == other._base
            and self._end == other._end
            and self._spans == other._spans
            and self.points() == other.points()
        )

    def points(self) -> list[tuple[int, int]]:
        return list(self._tl.items())

    def span_ids(self) -> list[int]:
        return sorted(self._spans)

    def span_count(self) -> int:
        return len(self._spans)

    def is_active_span(self, span_id: int) -> bool:
        return span_id in self._spans

    def _span(self, span_id: int) -> tuple[int, int, int]:
        try:
            return self._spans[span_id]
        except KeyError:
            raise UnknownSpanError(span_id) from None

    def span_start(self, span_id: int) -> int:
        return self._span(span_id)[0]

    def span_duration(self, span_id: int) -> int:
        start, last, _ = self._span(span_id)
        return last - start

    def span_resources(self, span_id: int) -> int:
        return self._span(span_id)[2]

    def _check_window(self, at: int, duration: int) -> None:
        _check_window(at, duration, self._base, self._end)

    def _check_request(self, request: int) -> None:
        if request < 0 or request > self._total:
            raise PlannerRangeError(f"request {request} is outside [0, {self._total}] {self._type}")

    def avail_resources_at(self, at: int) -> int:
        if at < self._base or at > self._end:
            raise PlannerRangeError(f"time {at} is outside the horizon [{self._base}, {self._end}]")
        if not self._spans:
            return self._total
        return max(self._free_at(at), 0)

    def avail_resources_during(self, at: int, duration: int) -> int:
        if duration < 1 or at < self._base or at + duration > self._end:
            self._check_window(at, duration)
        if not self._spans:
            return self._total
        return max(self._min_free(at, at + duration), 0)

    def avail_during(self, at: int, duration: int, request: int) -> bool:
        if duration < 1 or at < self._base or at + duration > self._end:
            self._check_window(at, duration)
        if request < 0 or request > self._total:
            self._check_request(request)
        if not self._spans or request == 0:
            return True
        return self._min_free(at, at + duration) >= request

    def _free_at(self, at: int) -> int:
        """The units free at ``at`` (spans present)."""
        return self._tl.value_at(at)

    def _min_free(self, at: int, end: int) -> int:
        """The fewest units free at any time of ``[at, end)`` (spans present)."""
        return self._tl.min_during(at, end)

    def add_span(self, start: int, duration: int, request: int) -> int:
        last = self._check_span(start, duration, request)
        if not self._spans:
            return self._add_first_span(start, last, request)
        tl = self._tl
        if request and tl.min_during(start, last) < request:
            raise PlannerBusyError(f"fewer than {request} {self._type} free during [{start}, {last})")
        self._ref_points(start, last)
        if request:
            tl.add(start, last, -request)
        return self._new_span(start, last, request)

    def _check_span(self, start: int, duration: int, request: int) -> int:
        """The end of a span to add; PlannerInvalidError or PlannerRangeError if it cannot be one."""
        if duration < 1 or start < self._base or start + duration > self._end:
            raise PlannerInvalidError(
                f"span [{start}, {start + duration}) is not a non-empty window of [{self._base}, {self._end})"
            )
        if request < 0 or request > self._total:
            self._check_request(request)
        return start + duration

    def _new_span(self, start: int, last: int, request: int) -> int:
        """Record a span whose units the timeline already counts; its id."""
        self._span_counter += 1
        span_id = self._span_counter
        self._spans[span_id] = (start, last, request)
        self._iter = None
        return span_id

    def _ref_points(self, start: int, last: int) -> None:
        """Count a span's two ends as points of the timeline, adding those that are new."""
        _count_end(self._refs, start, self._tl.insert)
        _count_end(self._refs, last, self._tl.insert)

    def _add_first_span(self, start: int, last: int, request: int) -> int:
        total, base = self._total, self._base
        if start == base:
            self._tl.set_points([base, last], [total - request, total])
            self._refs = {base: 2, last: 1}
        else:
            self._tl.set_points([base, start, last], [total, total - request, total])
            self._refs = {base: 1, start: 1, last: 1}
        return self._new_span(start, last, request)

    def rem_span(self, span_id: int) -> None:
        try:
            start, last, planned = self._spans.pop(span_id)
        except KeyError:
            raise UnknownSpanError(span_id) from None
        self._iter = None
        if not self._spans:
            self._tl.set_points([self._base], [self._total])
            self._refs = {self._base: 1}
            return
        tl = self._tl
        if planned:
            tl.add(start, last, planned)
        _uncount_end(self._refs, start, tl.remove)
        _uncount_end(self._refs, last, tl.remove)

    def reduce_span(self, span_id: int, to_remove: int) -> bool:
        start, last, planned = self._span(span_id)
        if to_remove == planned:
            self.rem_span(span_id)
            return True
        if to_remove == 0:
            return False
        if to_remove < 0 or to_remove > planned:
            raise PlannerInvalidError(f"cannot release {to_remove} of span {span_id}, which holds {planned}")
        self._tl.add(start, last, to_remove)
        self._spans[span_id] = (start, last, planned - to_remove)
        if self._iter is not None:
            self._iter_cursor = self._iter[0]
        return False

    def update_total(self, total: int) -> None:
        _check_count(total, "resource total")
        delta = total - self._total
        if delta:
            self._total = total
            self._tl.shift(delta)

    def avail_time_first(self, on_or_after: int, duration: int, request: int) -> int | None:
        if on_or_after < self._base or on_or_after >= self._end or duration < 1:
            raise PlannerInvalidError(
                f"on_or_after {on_or_after} must be in [{self._base}, {self._end}) and duration {duration} >= 1"
            )
        self._check_request(request)
        self._iter = (on_or_after, duration, request)
        self._iter_cursor = on_or_after
        return self._next_fit(duration, request)

    def avail_time_next(self) -> int | None:
        if self._iter is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        _, duration, request = self._iter
        self._check_request(request)
        return self._next_fit(duration, request)

    def _next_fit(self, duration: int, request: int) -> int | None:
        tl = self._tl
        pos = tl.ceil(self._iter_cursor)
        while pos is not None:
            if request:
                pos = tl.first_at_least(pos[0], pos[1], request)
                if pos is None:
                    break
            b, i = pos
            t = tl.times[b][i]
            fail = tl.last_below(b, i, t + duration, request) if request else None
            if fail is None:
                self._iter_cursor = t + 1
                return t if t + duration <= self._end else None
            b, i = fail
            pos = (b, i + 1) if i + 1 < len(tl.times[b]) else ((b + 1, 0) if b + 1 < len(tl.times) else None)
        self._iter_cursor = self._end + 1
        return None

    def unavail_time_first(self, on_or_after: int, request: int) -> int | None:
        if on_or_after < self._base or on_or_after >= self._end:
            raise PlannerInvalidError(f"on_or_after {on_or_after} must be in [{self._base}, {self._end})")
        self._check_request(request)
        tl = self._tl
        b, i = tl.locate(on_or_after)
        rems_l, offs, mins = tl.rems, tl.offs, tl.mins
        while b < len(rems_l):
            if mins[b] < request:
                floor = request - offs[b]
                rems = rems_l[b]
                for k in range(i, len(rems)):
                    if rems[k] < floor:
                        return tl.times[b][k]
            b += 1
            i = 0
        return None


def planners_equal(lhs: Planner | None, rhs: Planner | None) -> bool:
    """Fluxion's ``planners_equal``: two absent planners are equal; see :meth:`Planner.__eq__`."""
    if lhs is None or rhs is None:
        return lhs is rhs
    return lhs == rhs


Totals = Mapping[str, int] | Sequence[tuple[str, int]]
Requests = Sequence[int] | Mapping[str, int]


def _count_end(refs: dict[int, int], t: int, insert: Callable[[int], None]) -> bool:
    """Count a span end at ``t`` among a timeline's points, inserting ``t`` when it is new; whether it was."""
    if t in refs:
        refs[t] += 1
        return False
    refs[t] = 1
    insert(t)
    return True


def _uncount_end(refs: dict[int, int], t: int, remove: Callable[[int], None]) -> None:
    """Uncount a span end at ``t``, removing the point when no span ends there any more."""
    n = refs[t] - 1
    if n:
        refs[t] = n
    else:
        del refs[t]
        remove(t)


def _check_window(at: int, duration: int, base: int, end: int) -> None:
    """EINVAL for an empty window, ERANGE for one outside the horizon ``[base, end)``."""
    if duration < 1:
        raise PlannerInvalidError(f"duration must be >= 1, got {duration}")
    if at < base or at + duration > end:
        raise PlannerRangeError(f"[{at}, {at + duration}) is outside the horizon [{base}, {end})")


def _pairs(totals: Totals) -> list[tuple[str, int]]:
    pairs = list(totals.items()) if isinstance(totals, Mapping) else [(t, n) for t, n in totals]
    seen: set[str] = set()
    for resource_type, total in pairs:
        if resource_type in seen:
            raise PlannerInvalidError(f"resource type {resource_type!r} given twice")
        seen.add(resource_type)
        _check_count(total, f"total of {resource_type}")
    return pairs


class UnitPlanner(Planner):
    """A :class:`Planner` of one unit (a core, a gpu, a node): its spans are kept as a plain table and its
    timeline is built only when something beyond adding, removing and asking about availability needs it.

    Most of a large allocation's planners are such units, each holding one span at a time; the timeline of a
    general planner costs several objects per unit to build and to clear. Availability of one unit during a
    window is 0 as soon as a span asking for it overlaps the window, else the total. Once the timeline has been
    built the planner behaves exactly as a :class:`Planner` (the answers are the same either way).
    """

    __slots__ = ("_unit",)

    def _clear(self) -> None:
        self._unit = True
        self._spans = {}
        self._span_counter = 0
        self._iter = None
        self._iter_cursor = 0

    def _timeline(self) -> None:
        """Leave unit mode: build the timeline and point counts the spans make (as :meth:`Planner.add_span`
        would have, span by span)."""
        if not self._unit:
            return
        self._unit = False
        tl = self._tl = _Timeline(self._base, self._total)
        self._refs = {self._base: 1}
        for start, last, request in self._spans.values():
            self._ref_points(start, last)
            if request:
                tl.add(start, last, -request)

    def _busy(self, at: int, end: int) -> bool:
        # A loop, not any() over a generator (ruff's SIM110): this runs on every leaf visit, and is faster.
        for start, last, request in self._spans.values():  # noqa: SIM110
            if request and start < end and at < last:
                return True
        return False

    def add_span(self, start: int, duration: int, request: int) -> int:
        if not self._unit:
            return super().add_span(start, duration, request)
        last = start + duration
        if duration < 1 or start < self._base or last > self._end or request < 0 or request > self._total:
            self._check_span(start, duration, request)
        spans = self._spans
        if request and spans and self._busy(start, last):
            raise PlannerBusyError(f"fewer than {request} {self._type} free during [{start}, {last})")
        # _new_span, inline: a large allocation adds one such span per core.
        span_id = self._span_counter = self._span_counter + 1
        spans[span_id] = (start, last, request)
        self._iter = None
        return span_id

    def rem_span(self, span_id: int) -> None:
        if not self._unit:
            super().rem_span(span_id)
            return
        if self._spans.pop(span_id, None) is None:
            raise UnknownSpanError(span_id)
        self._iter = None

    def _free_at(self, at: int) -> int:
        if not self._unit:
            return super()._free_at(at)
        return 0 if self._busy(at, at + 1) else self._total

    def _min_free(self, at: int, end: int) -> int:
        if not self._unit:
            return super()._min_free(at, end)
        return 0 if self._busy(at, end) else self._total

    def __repr__(self) -> str:
        self._timeline()
        return super().__repr__()

    def copy(self) -> Planner:
        self._timeline()
        return super().copy()

    def points(self) -> list[tuple[int, int]]:
        self._timeline()
        return super().points()

    def reduce_span(self, span_id: int, to_remove: int) -> bool:
        self._timeline()
        return super().reduce_span(span_id, to_remove)

    def update_total(self, total: int) -> None:
        self._timeline()
        super().update_total(total)

    def avail_time_first(self, on_or_after: int, duration: int, request: int) -> int | None:
        self._timeline()
        return super().avail_time_first(on_or_after, duration, request)

    def avail_time_next(self) -> int | None:
        self._timeline()
        return super().avail_time_next()

    def unavail_time_first(self, on_or_after: int, request: int) -> int | None:
        self._timeline()
        return super().unavail_time_first(on_or_after, request)


_Span = tuple[int, int, tuple[int | None, ...]]
"""A multi-planner span: start, end and the units it holds of each type in the vector order (None: the span
holds nothing of that type, not even 0 units, because a reduce released it or the type came after the span)."""


class MultiPlanner:
    """Planners for several resource types on one time axis (Fluxion's ``planner_multi``).

    The types share one set of scheduled points and one count of the span ends at each point, so a span is
    checked, counted and inserted once however many types it holds; each type keeps its own column of remaining
    counts (see :class:`_Axis`). A type's own points are ``base`` and the ends of the spans holding it; they are
    all the axis's points except where a span holds nothing of it: ``_hidden[k]`` counts such span ends per point,
    and a point all of whose ends are hidden from type k is not one of k's points (it only matters where points
    are listed or iterated: the counts there are those of the point before). ``_pointless`` holds the spans added
    while no type was tracked: they have no points at all.
    """

    __slots__ = (
        "_axis",
        "_base",
        "_end",
        "_hidden",
        "_index",
        "_iter",
        "_iters",
        "_pointless",
        "_refs",
        "_span_counter",
        "_spans",
        "_totals",
        "_types",
    )

    def __init__(self, totals: Totals, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        pairs = _pairs(totals)
        self._base = base
        self._end = base + duration
        self._types = [t for t, _ in pairs]
        self._totals = [n for _, n in pairs]
        self._index = {t: k for k, t in enumerate(self._types)}
        self._axis = _Axis(base, self._totals)
        self._clear()

    def _clear(self) -> None:
        self._refs: dict[int, int] = {self._base: 1}
        self._hidden: list[dict[int, int]] = [{} for _ in self._types]
        self._spans: dict[int, _Span] = {}
        self._pointless: set[int] = set()
        self._span_counter = 0
        self._iter: tuple[int, int, dict[str, int]] | None = None
        # Each type's own avail-time iterator, as its planner would hold it: [on_or_after, duration, request, cursor].
        self._iters: dict[str, list[int]] = {}

    @property
    def base(self) -> int:
        return self._base

    @property
    def duration(self) -> int:
        return self._end - self._base

    @property
    def resource_types(self) -> tuple[str, ...]:
        return tuple(self._types)

    def _slot(self, resource_type: str) -> int:
        try:
            return self._index[resource_type]
        except KeyError:
            raise PlannerInvalidError(f"no resource type {resource_type!r}") from None

    def resource_total(self, resource_type: str) -> int:
        return self._totals[self._slot(resource_type)]

    def planner(self, resource_type: str) -> Planner:
        """A copy of the planner of one type: its total, points, spans (ids one more than this one's) and
        avail-time iterator. Changing it leaves this multi-planner alone."""
        k = self._slot(resource_type)
        base = self._base
        planner = Planner(self._totals[k], base, self._end - base, resource_type)
        hidden, refs = self._hidden[k], self._refs
        points = [(t, r) for t, r in self._axis.columns[k].items() if not hidden or refs[t] > hidden.get(t, 0)]
        planner._tl = _Timeline.of([t for t, _ in points], [r for _, r in points])
        own_refs = {base: 1}
        spans: dict[int, tuple[int, int, int]] = {}
        for span_id, (start, last, planned) in self._spans.items():
            request = planned[k]
            if request is not None:
                spans[span_id + 1] = (start, last, request)
                own_refs[start] = own_refs.get(start, 0) + 1
                own_refs[last] = own_refs.get(last, 0) + 1
        planner._refs = own_refs
        planner._spans = spans
        planner._span_counter = self._span_counter
        it = self._iters.get(resource_type)
        if it is not None:
            planner._iter = (it[0], it[1], it[2])
            planner._iter_cursor = it[3]
        return planner

    def __repr__(self) -> str:
        totals = ", ".join(f"{t}={n}" for t, n in zip(self._types, self._totals, strict=True))
        return f"MultiPlanner({{{totals}}}, {self._base}, {self._end - self._base}: {len(self._spans)} spans)"

    def copy(self) -> MultiPlanner:
        other = MultiPlanner.__new__(MultiPlanner)
        other._base = self._base
        other._end = self._end
        other._types = list(self._types)
        other._totals = list(self._totals)
        other._index = dict(self._index)
        other._axis = self._axis.copy()
        other._refs = dict(self._refs)
        other._hidden = [dict(hidden) for hidden in self._hidden]
        other._spans = dict(self._spans)
        other._pointless = set(self._pointless)
        other._span_counter = self._span_counter
        other._iter = self._iter
        other._iters = {t: list(it) for t, it in self._iters.items()}
        return other

    __copy__ = copy

    def __deepcopy__(self, memo: dict[int, object]) -> MultiPlanner:
        return self.copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MultiPlanner):
            return NotImplemented
        return (
            self._span_counter == other._span_counter
            and self._spans == other._spans
            and self._iter == other._iter
            and {t: it[3] for t, it in self._iters.items()} == {t: it[3] for t, it in other._iters.items()}
            and self.same_schedule(other)
        )

    __hash__ = None  # type: ignore[assignment]

    def same_schedule(self, other: MultiPlanner) -> bool:
        """The same types, totals, horizon and spans (in id order, whatever their ids)."""
        return (
            self._types == other._types
            and self._totals == other._totals
            and self._base == other._base
            and self._end == other._end
            and len(self._spans) == len(other._spans)
            and [self._spans[s] for s in sorted(self._spans)] == [other._spans[s] for s in sorted(other._spans)]
        )

    def reset(self, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        self._base = base
        self._end = base + duration
        self._axis.clear(base, self._totals)
        self._clear()

    def _vector(self, requests: Requests) -> Sequence[int]:
        if isinstance(requests, Mapping):
            unknown = set(requests) - set(self._index)
            if unknown:
                raise PlannerInvalidError(f"unknown resource types {sorted(unknown)}")
            return [requests.get(t, 0) for t in self._types]
        if len(requests) != len(self._types):
            raise PlannerInvalidError(f"{len(requests)} requests for {len(self._types)} resource types")
        return requests

    def _range_error(self, k: int, request: int) -> PlannerRangeError:
        return PlannerRangeError(f"request {request} is outside [0, {self._totals[k]}] {self._types[k]}")

    def _check_window(self, at: int, duration: int) -> None:
        _check_window(at, duration, self._base, self._end)

    def span_ids(self) -> list[int]:
        return sorted(self._spans)

    def span_count(self) -> int:
        return len(self._spans)

    def is_active_span(self, span_id: int) -> bool:
        return span_id in self._spans

    def _span(self, span_id: int) -> _Span:
        try:
            return self._spans[span_id]
        except KeyError:
            raise UnknownSpanError(span_id, _errno.ENOENT) from None

    def span_planned(self, span_id: int, resource_type: str) -> int:
        k = self._slot(resource_type)
        planned = self._span(span_id)[2][k]
        return 0 if planned is None else planned

    def add_span(self, start: int, duration: int, requests: Requests) -> int:
        if type(requests) is list and len(requests) == len(self._types):
            vector: Sequence[int] = requests
        else:
            vector = self._vector(requests)
        span_id = self._span_counter
        self._span_counter = span_id + 1
        columns = self._axis.columns
        last = start + duration
        if not columns:
            self._spans[span_id] = (start, last, ())
            self._pointless.add(span_id)
            return span_id
        if duration < 1 or start < self._base or last > self._end:
            raise PlannerInvalidError(
                f"span [{start}, {last}) is not a non-empty window of [{self._base}, {self._end})"
            )
        axis = self._axis
        totals = self._totals
        if not self._spans:
            for k, request in enumerate(vector):
                if request and (request < 0 or request > totals[k]):
                    self._failed_add(k)
                    raise self._range_error(k, request)
            axis.first_span(start, last, vector, totals)
            self._refs = {start: 2, last: 1} if start == self._base else {self._base: 1, start: 1, last: 1}
        else:
            window: tuple[int, int, int, int] | None = None
            for k, request in enumerate(vector):
                if request:
                    if request < 0 or request > totals[k]:
                        self._failed_add(k)
                        raise self._range_error(k, request)
                    if window is None:
                        window = columns[0].window(start, last)
                    if columns[k].min_at(*window) < request:
                        self._failed_add(k)
                        raise PlannerBusyError(f"fewer than {request} {self._types[k]} free during [{start}, {last})")
            new_start = _count_end(self._refs, start, axis.insert)
            if _count_end(self._refs, last, axis.insert) or new_start:  # new points move the window's indices
                window = None if window is None else columns[0].window(start, last)
            if window is not None:
                for k, request in enumerate(vector):
                    if request:
                        columns[k].add_at(*window, -request)
        self._spans[span_id] = (start, last, tuple(vector))
        if self._iters:
            self._iters.clear()
        return span_id

    def _failed_add(self, k: int) -> None:
        """Forget the avail-time iterators of the types before ``k``: a planner per type would have added the span
        to them (which ends an iteration) before type k refused it."""
        if self._iters:
            for resource_type in self._types[:k]:
                self._iters.pop(resource_type, None)

    def _release(self, start: int, last: int) -> None:
        """Uncount the ends of a span that is gone (its units already given back), dropping unused points."""
        if not self._spans:
            self._axis.clear(self._base, self._totals)
            self._refs = {self._base: 1}
            return
        _uncount_end(self._refs, start, self._axis.remove)
        _uncount_end(self._refs, last, self._axis.remove)

    def _hide(self, k: int, start: int, last: int) -> None:
        hidden = self._hidden[k]
        hidden[start] = hidden.get(start, 0) + 1
        hidden[last] = hidden.get(last, 0) + 1

    def _unhide(self, k: int, start: int, last: int) -> None:
        hidden = self._hidden[k]
        for t in (start, last):
            n = hidden[t] - 1
            if n:
                hidden[t] = n
            else:
                del hidden[t]

    def rem_span(self, span_id: int) -> None:
        try:
            start, last, planned = self._spans.pop(span_id)
        except KeyError:
            raise UnknownSpanError(span_id, _errno.ENOENT) from None
        if self._pointless and span_id in self._pointless:
            self._pointless.discard(span_id)
            return
        iters = self._iters
        if None in planned:
            for k, request in enumerate(planned):
                if request is None:
                    self._unhide(k, start, last)
                elif iters:
                    iters.pop(self._types[k], None)
        elif iters:
            iters.clear()
        if self._spans:
            columns = self._axis.columns
            window: tuple[int, int, int, int] | None = None
            for k, request in enumerate(planned):
                if request:
                    if window is None:
                        window = columns[0].window(start, last)
                    columns[k].add_at(*window, request)
        self._release(start, last)

    def reduce_span(self, span_id: int, reductions: Mapping[str, int]) -> bool:
        start, last, planned = self._span(span_id)
        index = self._index
        for resource_type, amount in reductions.items():
            if amount < 0:
                raise PlannerRangeError(f"cannot release {amount} {resource_type}")
            k = index.get(resource_type)
            held = None if k is None else planned[k]
            if held is not None and amount > held:
                raise PlannerInvalidError(f"cannot release {amount} {resource_type} of span {span_id} ({held})")
        types, columns, iters = self._types, self._axis.columns, self._iters
        left = list(planned)
        released: list[int] = []
        for k, held in enumerate(planned):
            if held is None:
                continue
            amount = reductions.get(types[k], 0)
            if amount == held:
                if held:
                    columns[k].add(start, last, held)
                left[k] = None
                released.append(k)
                iters.pop(types[k], None)
            elif amount:
                columns[k].add(start, last, amount)
                left[k] = held - amount
                it = iters.get(types[k])
                if it is not None:
                    it[3] = it[0]
        if any(request is not None for request in left):
            for k in released:
                self._hide(k, start, last)
            self._spans[span_id] = (start, last, tuple(left))
            return False
        del self._spans[span_id]
        if self._pointless and span_id in self._pointless:
            self._pointless.discard(span_id)
            return True
        for k, held in enumerate(planned):
            if held is None:
                self._unhide(k, start, last)
        self._release(start, last)
        return True

    def _fits(self, k: int, at: int, duration: int, request: int) -> bool:
        """``avail_during`` of type k alone, with its checks."""
        last = at + duration
        if duration < 1 or at < self._base or last > self._end:
            self._check_window(at, duration)
        if request < 0 or request > self._totals[k]:
            raise self._range_error(k, request)
        return not request or not self._spans or self._axis.columns[k].min_during(at, last) >= request

    def avail_during(self, at: int, duration: int, requests: Requests) -> bool:
        if type(requests) is list and len(requests) == len(self._types):
            vector: Sequence[int] = requests
        else:
            vector = self._vector(requests)
        columns = self._axis.columns
        if not columns:
            return True
        last = at + duration
        if duration < 1 or at < self._base or last > self._end:
            self._check_window(at, duration)
        totals = self._totals
        window: tuple[int, int, int, int] | None = None
        for k, request in enumerate(vector):
            if request:
                if request < 0 or request > totals[k]:
                    raise self._range_error(k, request)
                if self._spans:
                    if window is None:
                        window = columns[0].window(at, last)
                    if columns[k].min_at(*window) < request:
                        return False
        return True

    def _check_at(self, at: int) -> None:
        if at < self._base or at > self._end:
            raise PlannerRangeError(f"time {at} is outside the horizon [{self._base}, {self._end}]")

    def avail_resources_at(self, at: int, resource_type: str) -> int:
        k = self._slot(resource_type)
        self._check_at(at)
        return max(self._axis.columns[k].value_at(at), 0)

    def avail_resources_array_at(self, at: int) -> list[int]:
        columns = self._axis.columns
        if not columns:
            return []
        self._check_at(at)
        b, i = columns[0].locate(at)
        return [max(col.rems[b][i] + col.offs[b], 0) for col in columns]

    def avail_resources_array_during(self, at: int, duration: int) -> list[int]:
        columns = self._axis.columns
        if not columns:
            return []
        self._check_window(at, duration)
        return [max(col.min_during(at, at + duration), 0) for col in columns]

    def avail_time_first(self, on_or_after: int, duration: int, requests: Requests) -> int | None:
        if not self._types:
            raise PlannerInvalidError("a multi-planner without resource types has no time points")
        vector = self._vector(requests)
        totals = self._totals
        for k, request in enumerate(vector):
            if request < 0 or request > totals[k]:
                raise self._range_error(k, request)
        if on_or_after < self._base or on_or_after >= self._end or duration < 1:
            raise PlannerInvalidError(
                f"on_or_after {on_or_after} must be in [{self._base}, {self._end}) and duration {duration} >= 1"
            )
        it = [on_or_after, duration, vector[0], on_or_after]
        self._iters[self._types[0]] = it
        t = self._next_fit(it)
        self._iter = (on_or_after, duration, dict(zip(self._types, vector, strict=True)))
        return self._confirm(t, duration, vector)

    def avail_time_next(self) -> int | None:
        if not self._types or self._iter is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        _, duration, counts = self._iter
        if any(t not in counts for t in self._types):
            raise PlannerInvalidError("the resource types changed since avail_time_first")
        vector = [counts[t] for t in self._types]
        return self._confirm(self._first_next(), duration, vector)

    def _first_next(self) -> int | None:
        """``avail_time_next`` of the first type alone, with its own request and duration."""
        it = self._iters.get(self._types[0])
        if it is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        if it[2] < 0 or it[2] > self._totals[0]:
            raise self._range_error(0, it[2])
        return self._next_fit(it)

    def _next_fit(self, it: list[int]) -> int | None:
        """The first type's next fitting point from the iterator's cursor (``Planner._next_fit`` over the first
        type's own points: axis points hidden from it are passed over)."""
        _, duration, request, cursor = it
        tl = self._axis.columns[0]
        times_l = tl.times
        hidden, refs = self._hidden[0], self._refs
        pos = tl.ceil(cursor)
        while pos is not None:
            if request:
                pos = tl.first_at_least(pos[0], pos[1], request)
                if pos is None:
                    break
            b, i = pos
            t = times_l[b][i]
            if not hidden or refs[t] > hidden.get(t, 0):
                fail = tl.last_below(b, i, t + duration, request) if request else None
                if fail is None:
                    it[3] = t + 1
                    return t if t + duration <= self._end else None
                b, i = fail
            pos = (b, i + 1) if i + 1 < len(times_l[b]) else ((b + 1, 0) if b + 1 < len(times_l) else None)
        it[3] = self._end + 1
        return None

    def _confirm(self, t: int | None, duration: int, vector: Sequence[int]) -> int | None:
        columns = self._axis.columns
        while t is not None:
            for k in range(1, len(columns)):
                request = vector[k]
                if not self._fits(k, t, duration, request):
                    skip = columns[k].skip_after_failure(t, t + duration, request, self._end)
                    if self._hidden[k]:
                        skip = self._own_point(k, skip)
                    it = self._iters[self._types[0]]
                    it[3] = max(it[3], skip)
                    break
            else:
                return t
            t = self._first_next()
        return None

    def _own_point(self, k: int, t: int) -> int:
        """The first of type k's own points at or after the axis point ``t`` (``end + 1`` if none; so is ``t``
        past the end): where type k's planner would resume after the failure that gave ``t``."""
        if t > self._end:
            return t
        hidden, refs, tl = self._hidden[k], self._refs, self._axis.columns[k]
        b, i = tl.locate(t)
        times_l = tl.times
        while refs[times_l[b][i]] <= hidden.get(times_l[b][i], 0):
            i += 1
            if i == len(times_l[b]):
                b += 1
                i = 0
                if b == len(times_l):
                    return self._end + 1
        return times_l[b][i]

    def update(self, totals: Totals) -> None:
        pairs = _pairs(totals)
        types = [t for t, _ in pairs]
        axis = self._axis
        if types == self._types:
            for k, (_, total) in enumerate(pairs):
                delta = total - self._totals[k]
                if delta:
                    self._totals[k] = total
                    axis.columns[k].shift(delta)
            return
        slots = [self._index.get(t) for t in types]
        columns: list[_Timeline] = []
        hidden: list[dict[int, int]] = []
        for (_, total), j in zip(pairs, slots, strict=True):
            if j is None:
                columns.append(axis.column(total))
                hidden.append(self._span_ends())
            else:
                col = axis.columns[j]
                col.shift(total - self._totals[j])
                columns.append(col)
                hidden.append(self._hidden[j])
        for resource_type in set(self._types) - set(types):
            self._iters.pop(resource_type, None)
        self._spans = {
            span_id: (start, last, tuple(None if j is None else planned[j] for j in slots))
            for span_id, (start, last, planned) in self._spans.items()
        }
        axis.columns = columns
        self._hidden = hidden
        self._types = types
        self._totals = [n for _, n in pairs]
        self._index = {t: k for k, t in enumerate(types)}

    def _span_ends(self) -> dict[int, int]:
        """How many span ends each point has (a type added now holds nothing of these spans)."""
        ends: dict[int, int] = {}
        pointless = self._pointless
        for span_id, (start, last, _) in self._spans.items():
            if span_id not in pointless:
                ends[start] = ends.get(start, 0) + 1
                ends[last] = ends.get(last, 0) + 1
        return ends

    def add_resource_type(self, resource_type: str, total: int) -> None:
        if resource_type in self._index:
            raise PlannerInvalidError(f"resource type {resource_type!r} already planned")
        self.update([*zip(self._types, self._totals, strict=True), (resource_type, total)])

    def update_total(self, resource_type: str, total: int) -> None:
        k = self._slot(resource_type)
        _check_count(total, "resource total")
        delta = total - self._totals[k]
        if delta:
            self._totals[k] = total
            self._axis.columns[k].shift(delta)
