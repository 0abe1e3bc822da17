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
from collections.abc import Mapping, Sequence
from typing import Any, Final

from mypy_extensions import mypyc_attr

from kubeflux.match.timeline import Timeline

__all__ = [
    "Planner",
    "PlannerBusyError",
    "PlannerError",
    "PlannerInvalidError",
    "PlannerRangeError",
    "UnitPlanner",
    "UnknownSpanError",
    "planners_equal",
]


# Not native classes when compiled: mypyc drops a native exception's class attribute defaults (``errno`` here).
@mypyc_attr(native_class=False)
class PlannerError(Exception):
    """A failed planner call; ``errno`` is the errno Fluxion sets for the same failure."""

    errno: int = _errno.EINVAL


@mypyc_attr(native_class=False)
class PlannerInvalidError(PlannerError, ValueError):
    """An invalid argument (EINVAL)."""

    errno = _errno.EINVAL


@mypyc_attr(native_class=False)
class PlannerRangeError(PlannerError, ValueError):
    """A count or time out of range (ERANGE)."""

    errno = _errno.ERANGE


@mypyc_attr(native_class=False)
class PlannerBusyError(PlannerInvalidError):
    """``add_span`` found fewer units free than requested during the span (Fluxion: EINVAL)."""


@mypyc_attr(native_class=False)
class UnknownSpanError(PlannerError, LookupError):
    """No span with this id (EINVAL from a Planner, ENOENT from a MultiPlanner)."""

    def __init__(self, span_id: int, errno: int = _errno.EINVAL) -> None:
        super().__init__(f"no span with id {span_id}")
        self.span_id = span_id
        self.errno = errno


def check_count(value: int, what: str) -> None:
    if value < 0:
        raise PlannerRangeError(f"{what} must be >= 0, got {value}")


class Planner:
    """Free units of one resource type over ``[base, base + duration)``; see the module docstring."""

    __slots__ = ("_base", "_end", "_iter", "_iter_cursor", "_refs", "_span_counter", "_spans", "_tl", "_total", "_type")

    def __init__(self, total: int, base: int, duration: int, resource_type: str) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        check_count(total, "resource total")
        self._total = total
        self._type = resource_type
        self._base = base
        self._end = base + duration
        self._clear()

    def _clear(self) -> None:
        self._tl = Timeline(self._base, self._total)
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
        # Not Planner.__new__: mypyc's __new__ runs __init__ (see kubeflux._native); all is set again below.
        other = Planner(self._total, self._base, self._end - self._base, self._type)
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

    def load(
        self,
        timeline: Timeline,
        refs: dict[int, int],
        spans: dict[int, tuple[int, int, int]],
        span_counter: int,
        iterator: list[int] | None,
    ) -> None:
        """Take a state made elsewhere (one type of a :class:`~kubeflux.match.multiplanner.MultiPlanner`): its free
        units over time, reference counts of its points, spans by id, the last span id, and the ``avail_time``
        iteration under way as (on or after, duration, request, cursor)."""
        self._tl = timeline
        self._refs = refs
        self._spans = spans
        self._span_counter = span_counter
        if iterator is not None:
            self._iter = (iterator[0], iterator[1], iterator[2])
            self._iter_cursor = iterator[3]

    def __copy__(self) -> Planner:  # not `__copy__ = copy`, which mypyc compiles wrongly (see kubeflux._native)
        return Planner.copy(self)

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

    def check_window(self, at: int, duration: int) -> None:
        check_window(at, duration, self._base, self._end)

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
            self.check_window(at, duration)
        if not self._spans:
            return self._total
        return max(self._min_free(at, at + duration), 0)

    def avail_during(self, at: int, duration: int, request: int) -> bool:
        if duration < 1 or at < self._base or at + duration > self._end:
            self.check_window(at, duration)
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
        self._tl.count_end(self._refs, start)
        self._tl.count_end(self._refs, last)

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
        tl.uncount_end(self._refs, start)
        tl.uncount_end(self._refs, last)

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
        check_count(total, "resource total")
        delta = total - self._total
        if delta:
            self._total = total
            self._tl.shift(delta)

    def avail_time_first(self, on_or_after: int, duration: int, request: int) -> int | None:
        check_start(on_or_after, duration, self._base, self._end)
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
        t = next_fit(self._tl, self._iter_cursor, duration, request, _NOTHING_HIDDEN, self._refs)
        if t is None:
            self._iter_cursor = self._end + 1
            return None
        self._iter_cursor = t + 1
        return t if t + duration <= self._end else None

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


def check_window(at: int, duration: int, base: int, end: int) -> None:
    """EINVAL for an empty window, ERANGE for one outside the horizon ``[base, end)``."""
    if duration < 1:
        raise PlannerInvalidError(f"duration must be >= 1, got {duration}")
    if at < base or at + duration > end:
        raise PlannerRangeError(f"[{at}, {at + duration}) is outside the horizon [{base}, {end})")


def check_start(on_or_after: int, duration: int, base: int, end: int) -> None:
    """EINVAL unless an ``avail_time_first`` from ``on_or_after`` for ``duration`` can start in ``[base, end)``."""
    if on_or_after < base or on_or_after >= end or duration < 1:
        raise PlannerInvalidError(f"on_or_after {on_or_after} must be in [{base}, {end}) and duration {duration} >= 1")


def next_fit(
    tl: Timeline, cursor: int, duration: int, request: int, hidden: dict[int, int], refs: dict[int, int]
) -> int | None:
    """The first point of ``tl`` at or after ``cursor`` from which ``request`` units are free for ``duration``
    (that window may pass the horizon: the caller checks), or None. A point with as many span ends ``hidden`` as
    ``refs`` counts there is passed over: it is no point of the type ``tl`` counts (see :class:`MultiPlanner`'s
    ``_hidden``; a :class:`Planner` hides nothing)."""
    times_l = tl.times
    pos = tl.ceil(cursor)
    while pos is not None:
        if request:
            pos = tl.first_at_least(pos[0], pos[1], request)
            if pos is None:
                return None
        b, i = pos
        t = times_l[b][i]
        if not hidden or refs[t] > hidden.get(t, 0):
            fail = tl.last_below(b, i, t + duration, request) if request else None
            if fail is None:
                return t
            b, i = fail
        pos = (b, i + 1) if i + 1 < len(times_l[b]) else ((b + 1, 0) if b + 1 < len(times_l) else None)
    return None


_NOTHING_HIDDEN: Final[dict[int, int]] = {}
"""The ``hidden`` of :func:`next_fit` for a planner's own timeline (never written)."""


def resource_pairs(totals: Totals) -> list[tuple[str, int]]:
    pairs = list(totals.items()) if isinstance(totals, Mapping) else [(t, n) for t, n in totals]
    seen: set[str] = set()
    for resource_type, total in pairs:
        if resource_type in seen:
            raise PlannerInvalidError(f"resource type {resource_type!r} given twice")
        seen.add(resource_type)
        check_count(total, f"total of {resource_type}")
    return pairs


class _LastSpan:
    """The span a :class:`UnitPlanner` stored last, as one tuple the next unit planner given the same span stores
    too: a job's spans on its many cores are one tuple, not one each (96 bytes per core and job saved; compiled,
    128, the start being a new int object at each store too)."""

    __slots__ = ("last", "request", "span", "start")

    def __init__(self) -> None:
        self.start = self.last = self.request = -1
        self.span: Any = (-1, -1, -1)
        """``(start, last, request)``; ``Any``, so that compiled code keeps the tuple object (it would hold a
        ``tuple[int, int, int]`` unboxed, and make a new tuple at each store)."""


_LAST_SPAN: Final = _LastSpan()


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
        tl = self._tl = Timeline(self._base, self._total)
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
        shared = _LAST_SPAN
        if shared.start != start or shared.last != last or shared.request != request:
            shared.start, shared.last, shared.request = start, last, request
            shared.span = (start, last, request)
        spans[span_id] = shared.span
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
