"""The multi-planner: planners for several resource types on one time axis, as Fluxion's ``planner_multi`` keeps
them (a vertex's aggregate filter: how many cores, nodes… of its subtree are free at each instant).

A pure leaf beside :mod:`kubeflux.match.planner`, whose module docstring gives the single planner's semantics and
errors; the multi-planner's calls follow.

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
"""

from __future__ import annotations

import errno as _errno
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

from kubeflux.match.planner import (
    Planner,
    PlannerBusyError,
    PlannerInvalidError,
    PlannerRangeError,
    Requests,
    Totals,
    UnknownSpanError,
    check_count,
    check_start,
    check_window,
    next_fit,
    resource_pairs,
)
from kubeflux.match.timeline import Axis, Timeline

__all__ = ["MultiPlanner"]


_KNOWN_MAX = 16
"""An axis of one block up to this long takes a span between known points without finding its window twice."""

_Span = tuple[int, int, tuple[int | None, ...]]
"""A multi-planner span: start, end and the units it holds of each type in the vector order (None: the span
holds nothing of that type, not even 0 units, because a reduce released it or the type came after the span)."""


class MultiPlanner:
    """Planners for several resource types on one time axis (Fluxion's ``planner_multi``).

    The types share one set of scheduled points and one count of the span ends at each point, so a span is
    checked, counted and inserted once however many types it holds; each type keeps its own column of remaining
    counts (see :class:`Axis`). A type's own points are ``base`` and the ends of the spans holding it; they are
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
        "resource_types",
    )

    def __init__(self, totals: Totals, base: int, duration: int) -> None:
        if duration < 1:
            raise PlannerInvalidError(f"planner duration must be >= 1, got {duration}")
        pairs = resource_pairs(totals)
        self._base = base
        self._end = base + duration
        self._types = [t for t, _ in pairs]
        self.resource_types: tuple[str, ...] = tuple(self._types)
        self._totals = [n for _, n in pairs]
        self._index = {t: k for k, t in enumerate(self._types)}
        self._axis = Axis(base, self._totals)
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
        return _type_planner(self, self._slot(resource_type), resource_type)

    def __repr__(self) -> str:
        totals = ", ".join(f"{t}={n}" for t, n in zip(self._types, self._totals, strict=True))
        return f"MultiPlanner({{{totals}}}, {self._base}, {self._end - self._base}: {len(self._spans)} spans)"

    def copy(self) -> MultiPlanner:  # built, not MultiPlanner.__new__'d: mypyc's __new__ runs __init__
        other = MultiPlanner(list(zip(self._types, self._totals, strict=True)), self._base, self._end - self._base)
        other._base = self._base
        other._end = self._end
        other._types = list(self._types)
        other.resource_types = self.resource_types
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

    def __copy__(self) -> MultiPlanner:  # not `__copy__ = copy`, which mypyc compiles wrongly (see kubeflux._native)
        return MultiPlanner.copy(self)

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

    def check_window(self, at: int, duration: int) -> None:
        check_window(at, duration, self._base, self._end)

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
            self._refs[start] = 2 if start == self._base else 1  # (to {base: 1}, kept in place: see _release)
            self._refs[last] = 1
        elif start in self._refs and last in self._refs and len(axis.times) == 1 and len(axis.times[0]) <= _KNOWN_MAX:
            _add_known(self, vector, start, last)
        else:
            window: tuple[int, int, int, int] | None = None
            for k, request in enumerate(vector):
                if request:
                    if request < 0 or request > totals[k]:
                        self._failed_add(k)
                        raise self._range_error(k, request)
                    if window is None:
                        window = columns[0].window(start, last)
                    mins = columns[k].mins
                    if (len(mins) > 1 or mins[0] < request) and columns[k].min_in(window) < request:
                        self._failed_add(k)
                        raise PlannerBusyError(f"fewer than {request} {self._types[k]} free during [{start}, {last})")
            new_start = axis.count_end(self._refs, start)
            if axis.count_end(self._refs, last) or new_start:  # new points move the window's indices
                window = None if window is None else columns[0].window(start, last)
            if window is not None:
                for k, request in enumerate(vector):
                    if request:
                        columns[k].add_in(window, -request)
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
            self._refs.clear()
            self._refs[self._base] = 1
            return
        self._axis.uncount_end(self._refs, start)
        self._axis.uncount_end(self._refs, last)

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
                    columns[k].add_in(window, request)
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
            self.check_window(at, duration)
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
            self.check_window(at, duration)
        totals = self._totals
        window: tuple[int, int, int, int] | None = None
        for k, request in enumerate(vector):
            if request:
                if request < 0 or request > totals[k]:
                    raise self._range_error(k, request)
                if self._spans:
                    mins = columns[k].mins
                    if len(mins) == 1 and mins[0] >= request:
                        continue  # as many free at every point (a cluster with cores left): no window to find
                    if window is None:
                        window = columns[0].window(at, last)
                    if columns[k].min_in(window) < request:
                        return False
        return True

    def _check_at(self, at: int) -> None:
        if at < self._base or at > self._end:
            raise PlannerRangeError(f"time {at} is outside the horizon [{self._base}, {self._end}]")

    def avail_resources_at(self, at: int, resource_type: str) -> int:
        k = self._index.get(resource_type, -1)
        if k < 0 or at < self._base or at > self._end:  # (the checks raise)
            k = self._slot(resource_type)
            self._check_at(at)
        free = self._axis.columns[k].value_at(at)
        return free if free > 0 else 0

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
        self.check_window(at, duration)
        return [max(col.min_during(at, at + duration), 0) for col in columns]

    def avail_time_first(self, on_or_after: int, duration: int, requests: Requests) -> int | None:
        if not self._types:
            raise PlannerInvalidError("a multi-planner without resource types has no time points")
        vector = self._vector(requests)
        totals = self._totals
        for k, request in enumerate(vector):
            if request < 0 or request > totals[k]:
                raise self._range_error(k, request)
        check_start(on_or_after, duration, self._base, self._end)
        it = [on_or_after, duration, vector[0], on_or_after]
        self._iters[self._types[0]] = it
        t = _next_fit(self, it)
        self._iter = (on_or_after, duration, dict(zip(self._types, vector, strict=True)))
        return _confirm(self, t, duration, vector)

    def avail_time_next(self) -> int | None:
        if not self._types or self._iter is None:
            raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
        _, duration, counts = self._iter
        if any(t not in counts for t in self._types):
            raise PlannerInvalidError("the resource types changed since avail_time_first")
        vector = [counts[t] for t in self._types]
        return _confirm(
            self,
            _first_next(
                self,
            ),
            duration,
            vector,
        )

    def update(self, totals: Totals) -> None:
        pairs = resource_pairs(totals)
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
        columns: list[Timeline] = []
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
        self.resource_types = tuple(types)
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
        check_count(total, "resource total")
        delta = total - self._totals[k]
        if delta:
            self._totals[k] = total
            self._axis.columns[k].shift(delta)


def _type_planner(mp: MultiPlanner, k: int, resource_type: str) -> Planner:
    """:meth:`MultiPlanner.planner` of type ``k`` (kept out of the class, which holds the calls a walk makes)."""
    base = mp._base
    planner = Planner(mp._totals[k], base, mp._end - base, resource_type)
    hidden, refs = mp._hidden[k], mp._refs
    points = [(t, r) for t, r in mp._axis.columns[k].items() if not hidden or refs[t] > hidden.get(t, 0)]
    timeline = Timeline.of([t for t, _ in points], [r for _, r in points])
    own_refs = {base: 1}
    spans: dict[int, tuple[int, int, int]] = {}
    for span_id, (start, last, planned) in mp._spans.items():
        request = planned[k]
        if request is not None:
            spans[span_id + 1] = (start, last, request)
            own_refs[start] = own_refs.get(start, 0) + 1
            own_refs[last] = own_refs.get(last, 0) + 1
    planner.load(timeline, own_refs, spans, mp._span_counter, mp._iters.get(resource_type))
    return planner


def _first_next(mp: MultiPlanner) -> int | None:
    """``avail_time_next`` of the first type alone, with its own request and duration."""
    it = mp._iters.get(mp._types[0])
    if it is None:
        raise PlannerInvalidError("avail_time_next needs a live avail_time_first")
    if it[2] < 0 or it[2] > mp._totals[0]:
        raise mp._range_error(0, it[2])
    return _next_fit(mp, it)


def _next_fit(mp: MultiPlanner, it: list[int]) -> int | None:
    """The first type's next fitting point from the iterator's cursor, as ``Planner._next_fit`` finds it over the
    first type's own points."""
    _, duration, request, cursor = it
    t = next_fit(mp._axis.columns[0], cursor, duration, request, mp._hidden[0], mp._refs)
    if t is None:
        it[3] = mp._end + 1
        return None
    it[3] = t + 1
    return t if t + duration <= mp._end else None


def _confirm(mp: MultiPlanner, t: int | None, duration: int, vector: Sequence[int]) -> int | None:
    columns = mp._axis.columns
    while t is not None:
        for k in range(1, len(columns)):
            request = vector[k]
            if not mp._fits(k, t, duration, request):
                skip = columns[k].skip_after_failure(t, t + duration, request, mp._end)
                if mp._hidden[k]:
                    skip = _own_point(mp, k, skip)
                it = mp._iters[mp._types[0]]
                it[3] = max(it[3], skip)
                break
        else:
            return t
        t = _first_next(
            mp,
        )
    return None


def _own_point(mp: MultiPlanner, k: int, t: int) -> int:
    """The first of type k's own points at or after the axis point ``t`` (``end + 1`` if none; so is ``t``
    past the end): where type k's planner would resume after the failure that gave ``t``."""
    if t > mp._end:
        return t
    hidden, refs, tl = mp._hidden[k], mp._refs, mp._axis.columns[k]
    b, i = tl.locate(t)
    times_l = tl.times
    while refs[times_l[b][i]] <= hidden.get(times_l[b][i], 0):
        i += 1
        if i == len(times_l[b]):
            b += 1
            i = 0
            if b == len(times_l):
                return mp._end + 1
    return times_l[b][i]


def _add_known(mp: MultiPlanner, vector: Sequence[int], start: int, last: int) -> None:
    """:meth:`MultiPlanner.add_span`'s checks and counts for a span whose ends are points already, on an axis of one
    short block (jobs placed in one window): the window's indices are found once, and no point moves."""
    points = mp._axis.times[0]
    i = bisect_right(points, start) - 1
    j = bisect_left(points, last)
    columns, totals = mp._axis.columns, mp._totals
    for k, request in enumerate(vector):
        if request:
            if request < 0 or request > totals[k]:
                mp._failed_add(k)
                raise mp._range_error(k, request)
            col = columns[k]
            if col.mins[0] < request and min(col.rems[0][i:j]) + col.offs[0] < request:
                mp._failed_add(k)
                raise PlannerBusyError(f"fewer than {request} {mp._types[k]} free during [{start}, {last})")
    refs = mp._refs
    refs[start] += 1
    refs[last] += 1
    for k, request in enumerate(vector):
        if request:
            col = columns[k]
            rems = col.rems[0]
            for p in range(i, j):
                rems[p] -= request
            off = col.offs[0]
            col.mins[0] = min(rems) + off
            col.maxs[0] = max(rems) + off
