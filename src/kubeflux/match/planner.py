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
from collections.abc import Iterator, Mapping, Sequence

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
        if b1 == b2:
            rems = self.rems[b1]
            if len(rems) <= _SHORT_BLOCK:
                rems[i1:i2] = [r + delta for r in rems[i1:i2]]
                self._refresh(b1)
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
        times_l, rems_l, offs, mins = self.times, self.rems, self.offs, self.mins
        low: int | None = None
        while b < len(times_l):
            times = times_l[b]
            if times[i] >= last:
                break
            if times[-1] < last:
                m = mins[b] if i == 0 else min(rems_l[b][i:]) + offs[b]
            else:
                m = min(rems_l[b][i : bisect_left(times, last, i)]) + offs[b]
            low = m if low is None or m < low else low
            if times[-1] >= last:
                break
            b += 1
            i = 0
        assert low is not None
        return low

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
        if duration < 1:
            raise PlannerInvalidError(f"duration must be >= 1, got {duration}")
        if at < self._base or at + duration > self._end:
            raise PlannerRangeError(f"[{at}, {at + duration}) is outside the horizon [{self._base}, {self._end})")

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
        refs, tl = self._refs, self._tl
        for t in (start, last):
            if t in refs:
                refs[t] += 1
            else:
                refs[t] = 1
                tl.insert(t)

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
        refs = self._refs
        for t in (start, last):
            n = refs[t] - 1
            if n:
                refs[t] = n
            else:
                del refs[t]
                tl.remove(t)

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

    def _skip_after_failure(self, at: int, duration: int, request: int) -> int:
        """The earliest start not ruled out by a failed ``avail_during(at, duration, request)``.

        Let f be the last point in force during the window with too little remaining: every start from ``at`` up
        to the point after f has f's state in its window, so none of them can fit.
        """
        tl = self._tl
        b, i = tl.locate(at)
        if tl.rems[b][i] + tl.offs[b] >= request:
            fail = tl.last_below(b, i, at + duration, request)
            if fail is None:
                return at
            b, i = fail
        else:
            b, i = tl.last_below(b, i, at + duration, request) or (b, i)
        if i + 1 < len(tl.times[b]):
            return tl.times[b][i + 1]
        return tl.firsts[b + 1] if b + 1 < len(tl.firsts) else self._end + 1

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
        return any(request and start < end and at < last for start, last, request in self._spans.values())

    def add_span(self, start: int, duration: int, request: int) -> int:
        if not self._unit:
            return super().add_span(start, duration, request)
        last = self._check_span(start, duration, request)
        if request and self._spans and self._busy(start, last):
            raise PlannerBusyError(f"fewer than {request} {self._type} free during [{start}, {last})")
        return self._new_span(start, last, request)

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


class MultiPlanner:
    """Planners for several resource types on one time axis (Fluxion's ``planner_multi``)."""

    __slots__ = ("_base", "_duration", "_index", "_iter", "_planners", "_span_counter", "_spans", "_types")

    def __init__(self, totals: Totals, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        pairs = _pairs(totals)
        self._base = base
        self._duration = duration
        self._types = [t for t, _ in pairs]
        self._planners = [Planner(n, base, duration, t) for t, n in pairs]
        self._index = {t: i for i, t in enumerate(self._types)}
        self._spans: dict[int, dict[str, int]] = {}
        self._span_counter = 0
        self._iter: tuple[int, int, dict[str, int]] | None = None

    @property
    def base(self) -> int:
        return self._base

    @property
    def duration(self) -> int:
        return self._duration

    @property
    def resource_types(self) -> tuple[str, ...]:
        return tuple(self._types)

    def resource_total(self, resource_type: str) -> int:
        return self.planner(resource_type).total

    def planner(self, resource_type: str) -> Planner:
        try:
            return self._planners[self._index[resource_type]]
        except KeyError:
            raise PlannerInvalidError(f"no resource type {resource_type!r}") from None

    def __repr__(self) -> str:
        totals = ", ".join(f"{p.resource_type}={p.total}" for p in self._planners)
        return f"MultiPlanner({{{totals}}}, {self._base}, {self._duration}: {len(self._spans)} spans)"

    def copy(self) -> MultiPlanner:
        other = MultiPlanner.__new__(MultiPlanner)
        other._base = self._base
        other._duration = self._duration
        other._types = list(self._types)
        other._planners = [p.copy() for p in self._planners]
        other._index = dict(self._index)
        other._spans = {k: dict(v) for k, v in self._spans.items()}
        other._span_counter = self._span_counter
        other._iter = self._iter
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
            and self._types == other._types
            and self._planners == other._planners
        )

    __hash__ = None  # type: ignore[assignment]

    def same_schedule(self, other: MultiPlanner) -> bool:
        return (
            self._types == other._types
            and self._base == other._base
            and self._duration == other._duration
            and len(self._spans) == len(other._spans)
            and all(a.same_schedule(b) for a, b in zip(self._planners, other._planners, strict=True))
        )

    def reset(self, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        for p in self._planners:
            p.reset(base, duration)
        self._base = base
        self._duration = duration
        self._spans = {}
        self._span_counter = 0
        self._iter = None

    def _vector(self, requests: Requests) -> Sequence[int]:
        if type(requests) is list and len(requests) == len(self._planners):
            return requests
        if isinstance(requests, Mapping):
            unknown = set(requests) - set(self._index)
            if unknown:
                raise PlannerInvalidError(f"unknown resource types {sorted(unknown)}")
            return [requests.get(t, 0) for t in self._types]
        if len(requests) != len(self._planners):
            raise PlannerInvalidError(f"{len(requests)} requests for {len(self._planners)} resource types")
        return requests

    def span_ids(self) -> list[int]:
        return sorted(self._spans)

    def span_count(self) -> int:
        return len(self._spans)

    def is_active_span(self, span_id: int) -> bool:
        return span_id in self._spans

    def _span(self, span_id: int) -> dict[str, int]:
        try:
            return self._spans[span_id]
        except KeyError:
            raise UnknownSpanError(span_id, _errno.ENOENT) from None

    def span_planned(self, span_id: int, resource_type: str) -> int:
        planner = self.planner(resource_type)
        sub = self._span(span_id).get(resource_type)
        return 0 if sub is None else planner.span_resources(sub)

    def add_span(self, start: int, duration: int, requests: Requests) -> int:
        vector = self._vector(requests)
        span_id = self._span_counter
        self._span_counter += 1
        subs: dict[str, int] = {}
        try:
            for planner, request in zip(self._planners, vector, strict=True):
                subs[planner._type] = planner.add_span(start, duration, request)
        except PlannerError:
            for resource_type, sub in subs.items():
                self._planners[self._index[resource_type]].rem_span(sub)
            raise
        self._spans[span_id] = subs
        return span_id

    def rem_span(self, span_id: int) -> None:
        subs = self._span(span_id)
        for resource_type, sub in subs.items():
            self._planners[self._index[resource_type]].rem_span(sub)
        del self._spans[span_id]

    def reduce_span(self, span_id: int, reductions: Mapping[str, int]) -> bool:
        subs = self._span(span_id)
        for resource_type, amount in reductions.items():
            if amount < 0:
                raise PlannerRangeError(f"cannot release {amount} {resource_type}")
            sub = subs.get(resource_type)
            if sub is not None:
                planned = self._planners[self._index[resource_type]].span_resources(sub)
                if amount > planned:
                    raise PlannerInvalidError(f"cannot release {amount} {resource_type} of span {span_id} ({planned})")
        for resource_type in self._types:
            sub = subs.get(resource_type)
            if sub is not None and self._planners[self._index[resource_type]].reduce_span(
                sub, reductions.get(resource_type, 0)
            ):
                del subs[resource_type]
        if subs:
            return False
        del self._spans[span_id]
        return True

    def avail_during(self, at: int, duration: int, requests: Requests) -> bool:
        vector = self._vector(requests)
        return all(p.avail_during(at, duration, n) for p, n in zip(self._planners, vector, strict=True))

    def avail_resources_at(self, at: int, resource_type: str) -> int:
        return self.planner(resource_type).avail_resources_at(at)

    def avail_resources_array_at(self, at: int) -> list[int]:
        return [p.avail_resources_at(at) for p in self._planners]

    def avail_resources_array_during(self, at: int, duration: int) -> list[int]:
        return [p.avail_resources_during(at, duration) for p in self._planners]

    def avail_time_first(self, on_or_after: int, duration: int, requests: Requests) -> int | None:
        if not self._planners:
            raise PlannerInvalidError("a multi-planner without resource types has no time points")
        vector = self._vector(requests)
        for p, n in zip(self._planners, vector, strict=True):
            p._check_request(n)
        t = self._planners[0].avail_time_first(on_or_after, duration, vector[0])
        self._iter = (on_or_after, duration, dict(zip(self._types, vector, strict=True)))
        return self._confirm(t, duration, vector)

    def avail_time_next(self) -> int | None:
        if not self._planners or self._iter is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        _, duration, counts = self._iter
        if any(t not in counts for t in self._types):
            raise PlannerInvalidError("the resource types changed since avail_time_first")
        vector = [counts[t] for t in self._types]
        return self._confirm(self._planners[0].avail_time_next(), duration, vector)

    def _confirm(self, t: int | None, duration: int, vector: Sequence[int]) -> int | None:
        first = self._planners[0]
        others = list(zip(self._planners[1:], vector[1:], strict=True))
        while t is not None:
            skip = next(
                (p._skip_after_failure(t, duration, n) for p, n in others if not p.avail_during(t, duration, n)), None
            )
            if skip is None:
                return t
            first._iter_cursor = max(first._iter_cursor, skip)
            t = first.avail_time_next()
        return None

    def update(self, totals: Totals) -> None:
        pairs = _pairs(totals)
        old = {p.resource_type: p for p in self._planners}
        planners: list[Planner] = []
        for resource_type, total in pairs:
            planner = old.pop(resource_type, None)
            if planner is None:
                planner = Planner(total, self._base, self._duration, resource_type)
            else:
                planner.update_total(total)
            planners.append(planner)
        if old:
            for subs in self._spans.values():
                for resource_type in old:
                    subs.pop(resource_type, None)
        self._planners = planners
        self._types = [t for t, _ in pairs]
        self._index = {t: i for i, t in enumerate(self._types)}

    def add_resource_type(self, resource_type: str, total: int) -> None:
        if resource_type in self._index:
            raise PlannerInvalidError(f"resource type {resource_type!r} already planned")
        self.update([*((p.resource_type, p.total) for p in self._planners), (resource_type, total)])

    def update_total(self, resource_type: str, total: int) -> None:
        self.planner(resource_type).update_total(total)
