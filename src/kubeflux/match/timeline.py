"""Scheduled points: the step function of remaining units a planner keeps, and the time axis several share.

:class:`Timeline` holds one planner's points ``(time, remaining)`` in sorted blocks (a sqrt-decomposed step
function), with the queries the planners need (value at a time, minimum over a window, first point with enough
units). :class:`Axis` is the one set of points the types of a multi-planner share, one column of remaining counts
per type. A pure leaf below :mod:`kubeflux.match.planner`: no spans, no errors, no resource types.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence

_BLOCK_MAX = 128
_SHORT_BLOCK = 16
"""Blocks up to this long are rescanned after a change: cheaper than keeping their extremes by cases."""


class Points:
    """What :class:`Timeline` and :class:`Axis` share: points inserted and removed as span ends are counted."""

    __slots__ = ()

    def insert(self, t: int) -> None:
        raise NotImplementedError

    def remove(self, t: int) -> None:
        raise NotImplementedError

    def count_end(self, refs: dict[int, int], t: int) -> bool:
        """Count a span end at ``t`` in ``refs`` (the span ends at each point), inserting ``t`` when it is new
        (on an axis, in every column); whether it was. (A method, not a function given ``insert``: compiled, a
        bound method passed as a value is made and called as a Python object.)"""
        if t in refs:
            refs[t] += 1
            return False
        refs[t] = 1
        self.insert(t)
        return True

    def uncount_end(self, refs: dict[int, int], t: int) -> None:
        """Uncount a span end at ``t``, removing the point when no span ends there any more."""
        n = refs[t] - 1
        if n:
            refs[t] = n
        else:
            del refs[t]
            self.remove(t)


class Timeline(Points):
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

    def copy(self) -> Timeline:
        other = Timeline(0, 0)  # not Timeline.__new__: mypyc's __new__ runs __init__ (see kubeflux._native)
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
                for i in range(i1, i2):  # (a loop, not a comprehension: a window is mostly a point or two)
                    rems[i] += delta
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

    def min_in(self, window: tuple[int, int, int, int]) -> int:
        """:meth:`min_at` of a :meth:`window` (a call with its four positions: compiled, ``min_at(*window)`` is a
        Python call)."""
        return self.min_at(window[0], window[1], window[2], window[3])

    def add_in(self, window: tuple[int, int, int, int], delta: int) -> None:
        """:meth:`add_at` of a :meth:`window` (see :meth:`min_in`)."""
        self.add_at(window[0], window[1], window[2], window[3], delta)

    def min_at(self, b: int, i: int, be: int, je: int) -> int:
        """The minimum remaining of the points from (b, i) up to, not including, (be, je) (je >= 1)."""
        rems_l, offs = self.rems, self.offs
        if b == be:
            # A loop, not min() of a slice: a window mostly spans a point or two (compiled, no list is made).
            rems = rems_l[b]
            low = rems[i]
            for k in range(i + 1, je):
                if rems[k] < low:
                    low = rems[k]
            return low + offs[b]
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
    def of(cls, times: list[int], rems: list[int]) -> Timeline:
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


class Axis(Points):
    """The scheduled points of several step functions (one per resource type), held once.

    Each column is a :class:`Timeline` whose ``times`` and ``firsts`` are the axis's own lists, so a point is
    inserted or removed once for every type, in the same block; a column keeps only its remaining counts, block
    offsets and extremes. A point that no span of a type starts or ends at carries, in that type's column, the
    count of the point before it (an insertion copies it and only the types a span holds are changed over it), so
    every count, minimum and fit a column answers is the one of that type's own points.
    """

    __slots__ = ("columns", "firsts", "times")

    def __init__(self, base: int, totals: Sequence[int]) -> None:
        self.times: list[list[int]] = [[base]]
        self.firsts: list[int] = [base]
        self.columns: list[Timeline] = []
        for total in totals:
            col = Timeline(base, total)  # remaining counts, offsets and extremes; the axis's times and firsts:
            col.times = self.times
            col.firsts = self.firsts
            self.columns.append(col)

    def column(self, remaining: int) -> Timeline:
        """A new column on this axis with ``remaining`` at every point (the caller adds it to ``columns``)."""
        col = Timeline(0, remaining)
        col.times = self.times
        col.firsts = self.firsts
        col.rems = [[remaining] * len(times) for times in self.times]
        col.offs = [0] * len(self.times)
        col.mins = [remaining] * len(self.times)
        col.maxs = [remaining] * len(self.times)
        return col

    def copy(self) -> Axis:
        other = Axis(0, ())
        other.times = [list(times) for times in self.times]
        other.firsts = list(self.firsts)
        other.columns = []
        for col in self.columns:
            twin = Timeline(0, 0)
            twin.times = other.times
            twin.firsts = other.firsts
            twin.rems = [list(rems) for rems in col.rems]
            twin.offs = list(col.offs)
            twin.mins = list(col.mins)
            twin.maxs = list(col.maxs)
            other.columns.append(twin)
        return other

    def clear(self, base: int, totals: Sequence[int]) -> None:
        """Keep only the point ``base``, each column at its total; in place (the columns share the lists), down to
        the first block's lists (a vertex's filter empties and fills again with every job that comes and goes)."""
        times, firsts = self.times, self.firsts
        # (Each del guarded: compiled, deleting a slice makes a slice object and calls through it, and an axis
        # mostly holds one block.)
        blocks = len(times)
        if blocks > 1:
            del times[1:], firsts[1:]
        block = times[0]
        points = len(block)
        if points > 1:
            del block[1:]
        block[0] = base
        firsts[0] = base
        for k, col in enumerate(self.columns):  # (not zip(..., strict=True): compiled, a Python call per loop)
            total = totals[k]
            rems = col.rems
            if blocks > 1:
                del rems[1:], col.offs[1:], col.mins[1:], col.maxs[1:]
            first = rems[0]
            if points > 1:
                del first[1:]
            first[0] = total
            col.offs[0] = 0
            col.mins[0] = col.maxs[0] = total

    def first_span(self, start: int, last: int, requests: Sequence[int], totals: Sequence[int]) -> None:
        """Become the points of one span on an axis holding only ``base`` (requests within their totals)."""
        block = self.times[0]
        base = block[0]
        if len(block) > 1:  # (see clear)
            del block[1:]
        if start != base:
            block.append(start)
        block.append(last)
        for k, col in enumerate(self.columns):  # (see clear)
            request, total = requests[k], totals[k]
            rems = col.rems[0]  # (filled in place, as clear left it: see clear)
            if len(rems) > 1:
                del rems[1:]
            if start == base:
                rems[0] = total - request
            else:
                rems[0] = total
                rems.append(total - request)
            rems.append(total)
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
