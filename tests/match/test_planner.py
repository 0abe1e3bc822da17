"""The time planner: Fluxion's planner unit tests (planner_test01/02, planner_errno_test) and property tests."""

from __future__ import annotations

import contextlib
import copy
import errno
from bisect import bisect_left
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import (
    Planner,
    PlannerBusyError,
    PlannerError,
    PlannerInvalidError,
    PlannerRangeError,
    UnitPlanner,
    UnknownSpanError,
    planners_equal,
)

INT64_MAX = 2**63 - 1


def iterate(first: int | None, next_: Callable[[], int | None]) -> list[int | None]:
    """``first`` followed by ``next_()`` until it gives None (the None included)."""
    out = [first]
    while out[-1] is not None:
        out.append(next_())
    return out


# ---------------------------------------------------------------------------------------------------------------
# planner_test01: one resource type
# ---------------------------------------------------------------------------------------------------------------


def test_getters() -> None:
    p = Planner(10, 0, 9999, "1")
    assert (p.base, p.duration, p.end, p.total, p.resource_type) == (0, 9999, 9999, 10, "1")
    assert p.is_empty and p.span_count() == 0


def test_basic_add_remove() -> None:
    p = Planner(1, 0, 10, "B")
    steps = []
    t = p.avail_time_first(0, 5, 1)
    assert t == 0
    p.add_span(t, 5, 1)
    t = p.avail_time_first(0, 2, 1)
    assert t == 5
    span2 = p.add_span(t, 2, 1)
    t = p.avail_time_first(0, 2, 1)
    assert t == 7
    span3 = p.add_span(t, 2, 1)
    steps.append(p.avail_time_first(0, 2, 1))
    t = p.avail_time_first(0, 1, 1)
    assert t == 9
    p.add_span(t, 1, 1)
    assert p.span_start(span2) == 5
    p.rem_span(span2)
    p.rem_span(span3)
    steps.append(p.avail_time_first(0, 5, 1))
    assert steps == [None, None]
    assert p.avail_time_first(0, 4, 1) == 5
    assert p.add_span(5, 4, 1) == 5


@pytest.fixture
def checkers() -> Planner:
    """test_availability_checkers: 10 units; 5 on [1,1001), 10 on [2000,3001), 1 on [10,2000)."""
    p = Planner(10, 0, INT64_MAX, "A")
    assert p.avail_during(0, 1, 10)
    assert p.avail_during(1, 1000, 5)
    assert p.add_span(1, 1000, 5) == 1
    assert p.add_span(2000, 1001, 10) == 2
    assert not p.avail_during(10, 2991, 1)
    assert p.avail_during(10, 1990, 1)
    assert p.add_span(10, 1990, 1) == 3
    return p


@pytest.mark.parametrize(("at", "avail"), [(1, 5), (10, 4), (1500, 9), (2000, 0), (2500, 0), (3000, 0), (3001, 10)])
def test_avail_resources_at(checkers: Planner, at: int, avail: int) -> None:
    assert checkers.avail_resources_at(at) == avail


@pytest.mark.parametrize(
    ("at", "duration", "count", "fits", "min_avail"),
    [
        pytest.param(2000, 1001, 1, False, 0, id="whole-full-span"),
        pytest.param(0, 1001, 4, True, 4, id="from-base"),
        pytest.param(10, 1990, 4, True, 4, id="exact-overlap"),
        pytest.param(4, 3, 5, True, 5, id="subset-no-edge-1"),
        pytest.param(20, 980, 4, True, 4, id="subset-no-edge-2"),
        pytest.param(1001, 998, 9, True, 9, id="subset-no-edge-3"),
        pytest.param(2500, 101, 1, False, 0, id="subset-no-edge-4"),
        pytest.param(0, 1000, 4, True, 4, id="one-edge-1"),
        pytest.param(10, 990, 4, True, 4, id="one-edge-2"),
        pytest.param(20, 981, 4, True, 4, id="one-edge-3"),
        pytest.param(1001, 999, 9, True, 9, id="one-edge-4"),
        pytest.param(100, 1401, 4, True, 4, id="several-spans-1"),
        pytest.param(1500, 1001, 1, False, 0, id="several-spans-2"),
        pytest.param(1000, 1001, 1, False, 0, id="several-spans-3"),
        pytest.param(0, 3001, 1, False, 0, id="all-spans-1"),
        pytest.param(0, 2001, 1, False, 0, id="all-spans-2"),
        pytest.param(3001, 2000, 10, True, 10, id="after-all"),
    ],
)
def test_avail_during(checkers: Planner, at: int, duration: int, count: int, fits: bool, min_avail: int) -> None:
    assert checkers.avail_during(at, duration, count) is fits
    assert checkers.avail_resources_during(at, duration) == min_avail


@pytest.mark.parametrize(
    ("on_or_after", "duration", "count", "expected"),
    [
        pytest.param(0, 9, 5, [0, 1, 1001, 3001, None], id="five-for-9s"),
        pytest.param(0, 10, 9, [1001, 3001, None], id="nine-for-10s"),
    ],
)
def test_avail_time_iteration(
    checkers: Planner, on_or_after: int, duration: int, count: int, expected: list[int | None]
) -> None:
    got = iterate(checkers.avail_time_first(on_or_after, duration, count), checkers.avail_time_next)
    assert got == expected


def test_add_span_resets_iterator() -> None:
    p = Planner(10, 0, 10, "C")
    assert iterate(p.avail_time_first(0, 4, 3), p.avail_time_next) == [0, None]
    p.add_span(0, 4, 3)
    with pytest.raises(PlannerInvalidError):
        p.avail_time_next()
    assert iterate(p.avail_time_first(0, 4, 3), p.avail_time_next) == [0, 4, None]


def test_on_or_after() -> None:
    p = Planner(3, 0, INT64_MAX, "A")
    assert p.avail_time_first(100000, 100, 2) is None
    assert p.avail_during(100000, 100, 2)
    p.add_span(100000, 100, 2)
    assert p.avail_time_first(100000, 200, 2) == 100100
    p.add_span(100100, 200, 2)
    assert [p.avail_time_first(100000, 200, 1), p.avail_time_next(), p.avail_time_next()] == [100000, 100100, 100300]
    assert [p.avail_time_first(0, 200, 1), p.avail_time_next()] == [0, 100000]


def test_remove_more() -> None:
    p = Planner(10, 0, INT64_MAX, "core")
    spans = [p.add_span(i // 2 * 1000, 1000, 5) for i in range(10000)]
    for span_id in spans[::4]:
        p.rem_span(span_id)
    assert p.span_count() == 7500
    for span_id in spans:
        if p.is_active_span(span_id):
            p.rem_span(span_id)
    assert p.same_schedule(Planner(10, 0, INT64_MAX, "core"))


def test_stress_fully_overlap() -> None:
    p = Planner(1_000_000, 0, INT64_MAX, "hardware-thread")
    for _ in range(10000):
        t = p.avail_time_first(0, 4, 100)
        assert t == 0
        p.add_span(t, 4, 100)
    assert p.avail_resources_at(0) == 0
    for _ in range(1000):
        t = p.avail_time_first(0, 4, 100)
        assert t == 4
        p.add_span(t, 4, 100)


def test_stress_4spans_overlap() -> None:
    p = Planner(10_000_000, 0, INT64_MAX, "hardware-thread")
    for i in range(20000):
        assert p.avail_during(i, 4, 100)
        p.add_span(i, 4, 100)
    assert p.avail_resources_at(10000) == 10_000_000 - 400
    assert len(p.points()) == 20004


def test_resource_service_flow() -> None:
    """Local (per-vertex) and global (aggregate) planners reserved in step, as the traverser does."""
    types, totals = ["A", "B", "C"], [16, 2, 32]
    l1, l2, depth, at, duration = 9, 3, 5000, 3600, 1000
    locals_ = [Planner(totals[i % l2], 0, INT64_MAX, types[i % l2]) for i in range(l1)]
    globals_ = {t: Planner(l2 * n, 0, INT64_MAX, t) for t, n in zip(types, totals, strict=True)}
    for i in range(l1):
        locals_[i].add_span(at, duration, totals[i % l2])
        globals_[types[i % l2]].add_span(at, duration, totals[i % l2])
    at += 1000
    for i in range(depth):
        j, k = i % l2, i % l1
        glob = globals_[types[j]]
        t = glob.avail_time_first(at, duration, totals[j])
        assert t == at + (i // l1) * duration
        assert locals_[k].avail_during(t, duration, totals[j])
        locals_[k].add_span(t, duration, totals[j])
        glob.add_span(t, duration, totals[j])


SIX_SPANS = [(0, 600, 36), (0, 57600, 3600), (57600, 57600, 1800), (115200, 57600, 1152), (172800, 57600, 2304)]
SIX_SPANS.append((115200, 900, 468))


def test_more_add_remove() -> None:
    p = Planner(100000, 0, INT64_MAX, "core")
    ids = [p.add_span(*s) for s in SIX_SPANS]
    for span_id in ids:
        p.rem_span(span_id)
    assert [p.add_span(*s) for s in SIX_SPANS] == list(range(7, 13))


def test_copy_and_equality() -> None:
    p = Planner(100000, 0, INT64_MAX, "core")
    ids = [p.add_span(*s) for s in SIX_SPANS]
    assert p == p and planners_equal(p, p)
    assert planners_equal(None, None) and not planners_equal(p, None) and not planners_equal(None, p)
    fresh = Planner(100000, 0, INT64_MAX, "core")
    assert p != fresh
    p2 = p.copy()
    p3 = copy.deepcopy(p2)
    assert p2 == p3 == p
    p3.reset(0, INT64_MAX)
    assert p3 != p2 and p3 == fresh
    p4 = copy.copy(p2)
    p2.rem_span(ids[3])
    assert p2 != p4 and p == p4
    assert p4.avail_resources_at(57600) == p.avail_resources_at(57600) == 100000 - 1800
    p4.rem_span(ids[3])
    assert p4 == p2


# ---------------------------------------------------------------------------------------------------------------
# Error cases (planner.h, planner_c_interface.cpp, planner_errno_test)
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def small() -> Planner:
    """planner_errno_test's planner: 10 cores over [0, 100), 8 of them held over [10, 20)."""
    p = Planner(10, 0, 100, "core")
    assert p.add_span(10, 10, 8) == 1
    return p


@pytest.mark.parametrize(
    ("call", "exc", "err"),
    [
        pytest.param(lambda p: p.avail_resources_at(101), PlannerRangeError, errno.ERANGE, id="at-after-end"),
        pytest.param(lambda p: p.avail_resources_at(-1), PlannerRangeError, errno.ERANGE, id="at-before-base"),
        pytest.param(lambda p: p.avail_resources_during(95, 10), PlannerRangeError, errno.ERANGE, id="during-past-end"),
        pytest.param(lambda p: p.avail_resources_during(0, 0), PlannerInvalidError, errno.EINVAL, id="during-zero"),
        pytest.param(lambda p: p.avail_during(95, 10, 5), PlannerRangeError, errno.ERANGE, id="avail-past-end"),
        pytest.param(lambda p: p.avail_during(0, 0, 5), PlannerInvalidError, errno.EINVAL, id="avail-zero-duration"),
        pytest.param(lambda p: p.avail_during(0, 5, 11), PlannerRangeError, errno.ERANGE, id="avail-over-total"),
        pytest.param(lambda p: p.span_start(999), UnknownSpanError, errno.EINVAL, id="span-start-unknown"),
        pytest.param(lambda p: p.span_duration(999), UnknownSpanError, errno.EINVAL, id="span-duration-unknown"),
        pytest.param(lambda p: p.span_resources(999), UnknownSpanError, errno.EINVAL, id="span-resources-unknown"),
        pytest.param(lambda p: p.rem_span(999), UnknownSpanError, errno.EINVAL, id="rem-unknown"),
        pytest.param(lambda p: p.reduce_span(999, 1), UnknownSpanError, errno.EINVAL, id="reduce-unknown"),
        pytest.param(lambda p: p.reduce_span(1, 9), PlannerInvalidError, errno.EINVAL, id="reduce-too-much"),
        pytest.param(lambda p: p.reduce_span(1, -1), PlannerInvalidError, errno.EINVAL, id="reduce-negative"),
        pytest.param(lambda p: p.add_span(-1, 5, 1), PlannerInvalidError, errno.EINVAL, id="add-before-base"),
        pytest.param(lambda p: p.add_span(0, 0, 1), PlannerInvalidError, errno.EINVAL, id="add-zero-duration"),
        pytest.param(lambda p: p.add_span(95, 6, 1), PlannerInvalidError, errno.EINVAL, id="add-past-end"),
        pytest.param(lambda p: p.add_span(0, 5, 11), PlannerRangeError, errno.ERANGE, id="add-over-total"),
        pytest.param(lambda p: p.add_span(0, 5, -1), PlannerRangeError, errno.ERANGE, id="add-negative"),
        pytest.param(lambda p: p.add_span(15, 10, 3), PlannerBusyError, errno.EINVAL, id="add-busy"),
        pytest.param(lambda p: p.avail_time_first(-1, 5, 1), PlannerInvalidError, errno.EINVAL, id="first-before"),
        pytest.param(lambda p: p.avail_time_first(100, 5, 1), PlannerInvalidError, errno.EINVAL, id="first-at-end"),
        pytest.param(lambda p: p.avail_time_first(0, 0, 1), PlannerInvalidError, errno.EINVAL, id="first-zero"),
        pytest.param(lambda p: p.avail_time_first(0, 5, 11), PlannerRangeError, errno.ERANGE, id="first-over-total"),
        pytest.param(lambda p: p.avail_time_next(), PlannerInvalidError, errno.EINVAL, id="next-without-first"),
        pytest.param(lambda p: p.unavail_time_first(100, 1), PlannerInvalidError, errno.EINVAL, id="unavail-at-end"),
        pytest.param(lambda p: p.unavail_time_first(0, 11), PlannerRangeError, errno.ERANGE, id="unavail-over"),
        pytest.param(lambda p: p.update_total(-1), PlannerRangeError, errno.ERANGE, id="total-negative"),
        pytest.param(lambda p: p.reset(0, 0), PlannerInvalidError, errno.EINVAL, id="reset-zero"),
    ],
)
def test_planner_errors(small: Planner, call: Callable[[Planner], object], exc: type[PlannerError], err: int) -> None:
    before = small.copy()
    with pytest.raises(exc) as info:
        call(small)
    assert info.value.errno == err
    assert small == before


@pytest.mark.parametrize(
    ("args", "exc"),
    [
        pytest.param((10, 0, 0, "core"), PlannerInvalidError, id="zero-duration"),
        pytest.param((-1, 0, 10, "core"), PlannerRangeError, id="negative-total"),
    ],
)
def test_new_errors(args: tuple[int, int, int, str], exc: type[PlannerError]) -> None:
    with pytest.raises(exc):
        Planner(*args)


def test_avail_during_busy_and_edges(small: Planner) -> None:
    assert not small.avail_during(10, 10, 5)
    assert small.avail_during(0, 10, 10)
    assert small.avail_during(20, 10, 10)
    assert small.avail_during(90, 10, 5)
    assert small.avail_resources_at(100) == 10


def test_unknown_span_is_a_lookup_error(small: Planner) -> None:
    with pytest.raises(LookupError):
        small.rem_span(42)


def test_span_lookups(small: Planner) -> None:
    assert (small.span_start(1), small.span_duration(1), small.span_resources(1)) == (10, 10, 8)
    assert small.is_active_span(1) and not small.is_active_span(2)
    assert small.span_ids() == [1]
    assert small.points() == [(0, 10), (10, 2), (20, 10)]


def test_failed_add_does_not_use_an_id(small: Planner) -> None:
    with pytest.raises(PlannerBusyError):
        small.add_span(10, 5, 3)
    assert small.add_span(10, 5, 2) == 2


def test_span_ending_at_end_is_accepted() -> None:
    p = Planner(4, 0, 100, "core")
    p.add_span(90, 10, 4)
    assert p.avail_resources_at(100) == 4
    assert iterate(p.avail_time_first(0, 10, 4), p.avail_time_next) == [0, None]


def test_zero_request_spans_create_points() -> None:
    p = Planner(4, 0, 100, "core")
    p.add_span(30, 10, 0)
    assert p.points() == [(0, 4), (30, 4), (40, 4)]
    assert iterate(p.avail_time_first(0, 10, 4), p.avail_time_next) == [0, 30, 40, None]
    assert p.reduce_span(1, 0) is True and p.is_empty


def test_reduce_span() -> None:
    p = Planner(10, 0, 100, "core")
    span = p.add_span(10, 10, 8)
    assert p.reduce_span(span, 0) is False
    assert p.reduce_span(span, 3) is False
    assert p.span_resources(span) == 5 and p.avail_resources_at(15) == 5
    assert p.reduce_span(span, 5) is True
    assert not p.is_active_span(span) and p.same_schedule(Planner(10, 0, 100, "core"))


def test_partial_reduce_restarts_the_iteration() -> None:
    p = Planner(10, 0, 100, "core")
    a = p.add_span(10, 10, 8)
    p.add_span(30, 10, 0)
    assert [p.avail_time_first(0, 5, 2), p.avail_time_next()] == [0, 10]
    p.reduce_span(a, 1)
    assert iterate(p.avail_time_next(), p.avail_time_next) == [0, 10, 20, 30, 40, None]


def test_exhausted_iteration_stays_exhausted() -> None:
    p = Planner(10, 0, 100, "core")
    assert iterate(p.avail_time_first(0, 100, 10), p.avail_time_next) == [0, None]
    assert p.avail_time_next() is None


def test_fit_must_end_within_horizon() -> None:
    p = Planner(2, 0, 100, "core")
    p.add_span(0, 60, 2)
    assert p.avail_time_first(0, 40, 1) == 60
    assert p.avail_time_first(0, 41, 1) is None


def test_unavail_time_first() -> None:
    p = Planner(10, 0, 100, "core")
    p.add_span(10, 10, 8)
    p.add_span(50, 10, 4)
    assert p.unavail_time_first(0, 3) == 10
    assert p.unavail_time_first(12, 3) == 10
    assert p.unavail_time_first(20, 3) is None
    assert p.unavail_time_first(20, 7) == 50
    assert p.unavail_time_first(20, 6) is None


@pytest.mark.parametrize(
    ("new_total", "at_15", "at_50"),
    [
        pytest.param(20, 12, 20, id="grow"),
        pytest.param(10, 2, 10, id="same"),
        pytest.param(6, 0, 6, id="shrink-below-planned"),
    ],
)
def test_update_total(new_total: int, at_15: int, at_50: int) -> None:
    p = Planner(10, 0, 100, "core")
    span = p.add_span(10, 10, 8)
    p.update_total(new_total)
    assert (p.total, p.avail_resources_at(15), p.avail_resources_at(50)) == (new_total, at_15, at_50)
    assert p.avail_during(10, 5, 0)
    p.rem_span(span)
    assert p.avail_resources_at(15) == new_total


def test_update_total_on_empty_planner() -> None:
    p = Planner(10, 0, 100, "core")
    p.update_total(4)
    assert p.avail_resources_at(0) == 4 and p.avail_during(0, 100, 4)
    with pytest.raises(PlannerRangeError):
        p.avail_during(0, 100, 5)
    p.add_span(0, 10, 4)
    assert p.avail_time_first(0, 10, 4) == 10


def test_many_blocks() -> None:
    """Enough points to split the timeline into many blocks; every query agrees with the span list."""
    p = Planner(1000, 0, 10**9, "core")
    ids = [p.add_span(i * 7, 50 + (i * 13) % 400, 1 + i % 9) for i in range(3000)]
    for span_id in ids[::3]:
        p.rem_span(span_id)
    model = Model(p)
    for t in range(0, 3000 * 7 + 500, 97):
        assert p.avail_resources_at(t) == model.avail_at(t)
    for req, dur in [(1, 10), (990, 30), (995, 200), (1000, 5)]:
        assert iterate(p.avail_time_first(0, dur, req), p.avail_time_next) == model.fits(0, dur, req)


# ---------------------------------------------------------------------------------------------------------------
# planner_test02: MultiPlanner
# ---------------------------------------------------------------------------------------------------------------

TYPES5 = ["A", "B", "C", "D", "E"]


@pytest.fixture
def multi_basics() -> MultiPlanner:
    m = MultiPlanner(dict(zip(TYPES5, [10, 20, 30, 20, 100], strict=True)), 0, INT64_MAX)
    totals = [10, 20, 30, 20, 100]
    assert m.avail_during(0, 1, totals)
    assert m.avail_during(1, 1000, [5, 10, 15, 10, 50])
    assert m.add_span(1, 1000, [5, 10, 15, 10, 50]) == 0
    assert m.add_span(2000, 1001, totals) == 1
    assert not m.avail_during(10, 2991, [1, 2, 3, 2, 10])
    assert m.avail_during(10, 1990, [1, 2, 3, 2, 10])
    assert m.add_span(10, 1990, [1, 2, 3, 2, 10]) == 2
    return m


@pytest.mark.parametrize(
    ("at", "rtype", "avail"),
    [
        (1, "A", 5),
        (10, "B", 8),
        (500, "C", 12),
        (1500, "A", 9),
        (2000, "A", 0),
        (2500, "A", 0),
        (3000, "E", 0),
        (3001, "C", 30),
    ],
)
def test_multi_avail_resources_at(multi_basics: MultiPlanner, at: int, rtype: str, avail: int) -> None:
    assert multi_basics.avail_resources_at(at, rtype) == avail


def test_multi_avail_resources_arrays(multi_basics: MultiPlanner) -> None:
    assert multi_basics.avail_resources_array_at(500) == [4, 8, 12, 8, 40]
    assert multi_basics.avail_resources_array_during(0, 3001) == [0, 0, 0, 0, 0]
    assert multi_basics.avail_resources_array_during(1001, 999) == [9, 18, 27, 18, 90]


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param([0, 0, 15, 0, 0], [0, 1, 1001, 3001, None], id="only-C"),
        pytest.param({"E": 50, "A": 1, "B": 1, "C": 1, "D": 1}, [0, 1001, 3001, None], id="many-E-as-mapping"),
    ],
)
def test_multi_basics_iteration(
    multi_basics: MultiPlanner, request_: list[int] | dict[str, int], expected: list[int | None]
) -> None:
    duration = 9 if isinstance(request_, list) else 10
    got = iterate(multi_basics.avail_time_first(0, duration, request_), multi_basics.avail_time_next)
    assert got == expected


def test_multi_getters() -> None:
    m = MultiPlanner([("1", 10), ("2", 20)], 0, 9999)
    assert (m.base, m.duration, m.resource_types) == (0, 9999, ("1", "2"))
    assert m.resource_total("1") == 10 and m.resource_total("2") == 20
    assert m.planner("2").total == 20


def _staircase(requests: list[list[int]], starts: list[int], durations: list[int]) -> MultiPlanner:
    m = MultiPlanner(dict(zip(TYPES5, [10, 20, 30, 40, 50], strict=True)), 0, INT64_MAX)
    for req, start, dur in zip(requests, starts, durations, strict=True):
        assert m.avail_during(start, dur, req)
        m.add_span(start, dur, req)
    return m


UNIT_REQUESTS = [[1, 0, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 3, 0, 0], [0, 0, 0, 4, 0], [0, 0, 0, 0, 5]]


@pytest.mark.parametrize(
    ("on_or_after", "request_", "expected"),
    [
        pytest.param(0, [10, 20, 30, 40, 45], [4000, 5000, None], id="A"),
        pytest.param(0, [0, 0, 0, 30, 40], [0, 1000, 2000, 3000, 4000, 5000, None], id="B"),
        pytest.param(3500, [0, 0, 0, 30, 40], [4000, 5000, None], id="B-on-or-after"),
        pytest.param(0, [10, 18, 30, 30, 30], [3000, 4000, 5000, None], id="C"),
    ],
)
def test_multi_strictly_larger(on_or_after: int, request_: list[int], expected: list[int | None]) -> None:
    m = _staircase(UNIT_REQUESTS, [0] * 5, [1000, 2000, 3000, 4000, 5000])
    assert iterate(m.avail_time_first(on_or_after, 1000, request_), m.avail_time_next) == expected


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param([10, 20, 30, 40, 50], [5000, None], id="A"),
        pytest.param([9, 20, 27, 36, 50], [0, 2000, 3000, 5000, None], id="B"),
        pytest.param([9, 19, 30, 40, 50], [0, 5000, None], id="C"),
    ],
)
def test_multi_partially_larger(request_: list[int], expected: list[int | None]) -> None:
    m = _staircase(UNIT_REQUESTS, [0, 1000, 2000, 3000, 4000], [1000] * 5)
    assert iterate(m.avail_time_first(0, 1000, request_), m.avail_time_next) == expected


@pytest.fixture(scope="module")
def many_spans() -> MultiPlanner:
    m = MultiPlanner({"A": 99, "B": 99, "C": 99}, 0, INT64_MAX)
    for i in range(1000):
        request = [i % 100, 99 - i % 100, i % 100]
        assert m.avail_during(i * 1000, 1000, request)
        m.add_span(i * 1000, 1000, request)
    return m


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param([99, 99, 99], [1000000, None], id="A"),
        pytest.param([98, 1, 98], [1000 * (100 * i + 1) for i in range(10)] + [1000000, None], id="B"),
        pytest.param([50, 49, 50], [1000 * (100 * i + 49) for i in range(10)] + [1000000, None], id="C"),
    ],
)
def test_multi_many_spans(many_spans: MultiPlanner, request_: list[int], expected: list[int | None]) -> None:
    assert iterate(many_spans.avail_time_first(0, 1000, request_), many_spans.avail_time_next) == expected


def test_multi_add_remove() -> None:
    m = _staircase(UNIT_REQUESTS[:3], [0, 1000, 2000], [1000] * 3)
    m.rem_span(1)
    assert m.span_count() == 2 and m.span_ids() == [0, 2]


def test_multi_copy_and_equality() -> None:
    m = _staircase(UNIT_REQUESTS[:3], [0, 1000, 2000], [1000] * 3)
    assert m == m
    empty = MultiPlanner({}, 0, INT64_MAX)
    assert empty == MultiPlanner({}, 0, INT64_MAX) and m != empty
    m2 = m.copy()
    m4 = copy.deepcopy(m2)
    assert m == m2 == m4
    m2.rem_span(1)
    assert m2.span_count() == 2 and m4.span_count() == 3 and m2 != m4
    m4 = m2.copy()
    assert m4 == m2 and m4.span_count() == 2
    assert m4.avail_resources_at(500, "B") == m2.avail_resources_at(500, "B")


# ---------------------------------------------------------------------------------------------------------------
# MultiPlanner errors, reduce, update (planner_multi_c_interface.cpp, planner_errno_test)
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def core_mem() -> MultiPlanner:
    m = MultiPlanner({"core": 10, "memory": 20}, 0, 100)
    assert m.add_span(0, 10, [5, 10]) == 0
    return m


@pytest.mark.parametrize(
    ("call", "exc", "err"),
    [
        pytest.param(lambda m: m.add_span(0, 10, [1]), PlannerInvalidError, errno.EINVAL, id="add-short-vector"),
        pytest.param(lambda m: m.add_span(0, 10, {"gpu": 1}), PlannerInvalidError, errno.EINVAL, id="add-unknown"),
        pytest.param(lambda m: m.add_span(0, 10, [6, 0]), PlannerBusyError, errno.EINVAL, id="add-busy"),
        pytest.param(lambda m: m.add_span(0, 10, [0, 21]), PlannerRangeError, errno.ERANGE, id="add-over-total"),
        pytest.param(lambda m: m.rem_span(7), UnknownSpanError, errno.ENOENT, id="rem-unknown"),
        pytest.param(lambda m: m.rem_span(-1), UnknownSpanError, errno.ENOENT, id="rem-negative"),
        pytest.param(lambda m: m.reduce_span(7, {}), UnknownSpanError, errno.ENOENT, id="reduce-unknown"),
        pytest.param(lambda m: m.reduce_span(0, {"core": 6}), PlannerInvalidError, errno.EINVAL, id="reduce-excess"),
        pytest.param(lambda m: m.reduce_span(0, {"core": -1}), PlannerRangeError, errno.ERANGE, id="reduce-neg"),
        pytest.param(lambda m: m.span_planned(7, "core"), UnknownSpanError, errno.ENOENT, id="planned-unknown"),
        pytest.param(lambda m: m.span_planned(0, "gpu"), PlannerInvalidError, errno.EINVAL, id="planned-bad-type"),
        pytest.param(lambda m: m.resource_total("gpu"), PlannerInvalidError, errno.EINVAL, id="total-bad-type"),
        pytest.param(lambda m: m.avail_time_first(0, 5, [11, 0]), PlannerRangeError, errno.ERANGE, id="first-over-0"),
        pytest.param(lambda m: m.avail_time_first(0, 5, [0, 21]), PlannerRangeError, errno.ERANGE, id="first-over-1"),
        pytest.param(lambda m: m.avail_time_next(), PlannerInvalidError, errno.EINVAL, id="next-without-first"),
        pytest.param(lambda m: m.update({"core": -1}), PlannerRangeError, errno.ERANGE, id="update-negative"),
        pytest.param(lambda m: m.update([("a", 1), ("a", 2)]), PlannerInvalidError, errno.EINVAL, id="update-dup"),
        pytest.param(lambda m: m.add_resource_type("core", 1), PlannerInvalidError, errno.EINVAL, id="add-type-dup"),
    ],
)
def test_multi_errors(
    core_mem: MultiPlanner, call: Callable[[MultiPlanner], object], exc: type[PlannerError], err: int
) -> None:
    before = core_mem.copy()
    with pytest.raises(exc) as info:
        call(core_mem)
    assert info.value.errno == err
    assert core_mem.same_schedule(before)


def test_multi_failed_add_rolls_back_and_uses_an_id(core_mem: MultiPlanner) -> None:
    with pytest.raises(PlannerBusyError):
        core_mem.add_span(5, 10, [1, 11])
    assert core_mem.planner("core").points() == [(0, 5), (10, 10)]
    assert core_mem.add_span(5, 10, [1, 10]) == 2


def test_multi_empty() -> None:
    m = MultiPlanner({}, 0, 100)
    with pytest.raises(PlannerInvalidError):
        m.avail_time_first(0, 5, [])
    with pytest.raises(PlannerInvalidError):
        m.avail_time_next()
    m.add_resource_type("core", 4)
    assert m.avail_time_first(0, 5, [4]) == 0


def test_multi_new_errors() -> None:
    with pytest.raises(PlannerInvalidError):
        MultiPlanner({"core": 1}, 0, 0)
    with pytest.raises(PlannerRangeError):
        MultiPlanner({"core": -1}, 0, 10)


def test_multi_reduce_span(core_mem: MultiPlanner) -> None:
    assert core_mem.reduce_span(0, {"core": 2, "gpu": 3}) is False
    assert (core_mem.span_planned(0, "core"), core_mem.span_planned(0, "memory")) == (3, 10)
    assert core_mem.reduce_span(0, {"memory": 10}) is False
    assert core_mem.span_planned(0, "memory") == 0 and core_mem.avail_resources_at(5, "memory") == 20
    assert core_mem.reduce_span(0, {"memory": 5}) is False
    assert core_mem.reduce_span(0, {"core": 3}) is True
    assert not core_mem.is_active_span(0)
    assert core_mem.same_schedule(MultiPlanner({"core": 10, "memory": 20}, 0, 100))


def test_multi_reduce_removes_zero_spans_of_unnamed_types() -> None:
    m = MultiPlanner({"core": 10, "memory": 20}, 0, 100)
    span = m.add_span(0, 10, {"core": 4})
    assert m.reduce_span(span, {"core": 4}) is True
    assert m.planner("memory").is_empty


def test_multi_update_grow_shrink_reorder(core_mem: MultiPlanner) -> None:
    core_mem.update([("gpu", 2), ("core", 16)])
    assert core_mem.resource_types == ("gpu", "core")
    assert core_mem.avail_resources_array_at(5) == [2, 11]
    assert core_mem.span_planned(0, "gpu") == 0 and core_mem.span_planned(0, "core") == 5
    core_mem.rem_span(0)
    assert core_mem.avail_resources_array_at(5) == [2, 16]
    core_mem.update_total("gpu", 4)
    core_mem.add_resource_type("memory", 8)
    assert core_mem.resource_types == ("gpu", "core", "memory")
    assert core_mem.avail_resources_array_at(0) == [4, 16, 8]


def test_multi_next_after_type_change_is_invalid() -> None:
    m = MultiPlanner({"core": 10}, 0, 100)
    m.add_span(10, 10, [5])
    assert m.avail_time_first(0, 5, [10]) == 0
    m.update([("gpu", 30), ("core", 10)])
    with pytest.raises(PlannerInvalidError):
        m.avail_time_next()
    assert m.avail_time_first(0, 5, [1, 10]) == 0


def test_multi_next_after_add_is_invalid(core_mem: MultiPlanner) -> None:
    assert core_mem.avail_time_first(0, 5, [1, 1]) == 0
    core_mem.add_span(20, 5, [1, 1])
    with pytest.raises(PlannerInvalidError):
        core_mem.avail_time_next()


def test_multi_reset(core_mem: MultiPlanner) -> None:
    core_mem.reset(50, 10)
    assert (core_mem.base, core_mem.duration, core_mem.span_count()) == (50, 10, 0)
    assert core_mem.add_span(50, 10, [10, 20]) == 0


# ---------------------------------------------------------------------------------------------------------------
# Property tests against a brute-force model
# ---------------------------------------------------------------------------------------------------------------

BASE, DURATION, TOTAL = 10, 60, 6


class Model:
    """The planner's meaning computed from a snapshot of its span list alone."""

    def __init__(self, planner: Planner) -> None:
        self.total, self.base, self.end = planner.total, planner.base, planner.end
        self.spans = [
            (planner.span_start(s), planner.span_start(s) + planner.span_duration(s), planner.span_resources(s))
            for s in planner.span_ids()
        ]

    def avail_at(self, t: int) -> int:
        return self.total - sum(planned for start, last, planned in self.spans if start <= t < last)

    def point_times(self) -> list[int]:
        return sorted({self.base} | {start for start, _, _ in self.spans} | {last for _, last, _ in self.spans})

    def fits(self, on_or_after: int, duration: int, request: int) -> list[int | None]:
        """Every scheduled point t >= on_or_after at which the request fits, then None."""
        times = self.point_times()
        change = dict.fromkeys(times, 0)
        for start, last, planned in self.spans:
            change[start] -= planned
            change[last] += planned
        avail, running = [], self.total
        for t in times:
            running += change[t]
            avail.append(running)
        out: list[int | None] = []
        for k, t in enumerate(times):
            if t < on_or_after or t + duration > self.end:
                continue
            window = range(k, bisect_left(times, t + duration))
            if all(avail[j] >= request for j in window):
                out.append(t)
        return [*out, None]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(BASE - 2, BASE + DURATION), st.integers(0, 25), st.integers(0, 7)),
        st.tuples(st.just("rem"), st.integers(0, 40), st.just(0), st.just(0)),
        st.tuples(st.just("reduce"), st.integers(0, 40), st.integers(-1, 7), st.just(0)),
    ),
    max_size=40,
)


def apply(p: Planner, live: list[int], op: tuple[str, int, int, int]) -> None:
    kind, a, b, c = op
    try:
        if kind == "add":
            live.append(p.add_span(a, b, c))
        elif live and kind == "rem":
            p.rem_span(live.pop(a % len(live)))
        elif live:
            span_id = live[a % len(live)]
            if p.reduce_span(span_id, b):
                live.remove(span_id)
    except PlannerError:
        pass


@settings(max_examples=300, deadline=None)
@given(ops, st.integers(BASE, BASE + DURATION - 1), st.integers(1, 30), st.integers(0, TOTAL))
def test_property_matches_model(
    sequence: list[tuple[str, int, int, int]], on_or_after: int, duration: int, request: int
) -> None:
    p = Planner(TOTAL, BASE, DURATION, "core")
    live: list[int] = []
    for op in sequence:
        apply(p, live, op)
        model = Model(p)
        for t in range(BASE, BASE + DURATION + 1):
            avail = p.avail_resources_at(t)
            assert 0 <= avail <= TOTAL
            assert avail == model.avail_at(t)
        assert [t for t, _ in p.points()] == model.point_times()
    model = Model(p)
    assert sorted(live) == p.span_ids()
    assert iterate(p.avail_time_first(on_or_after, duration, request), p.avail_time_next) == model.fits(
        on_or_after, duration, request
    )
    last = min(on_or_after + duration, p.end)
    expected_during = min(model.avail_at(t) for t in range(on_or_after, last))
    assert p.avail_resources_during(on_or_after, last - on_or_after) == expected_during
    assert p.avail_during(on_or_after, last - on_or_after, request) is (expected_during >= request)
    for span_id in list(live):
        p.rem_span(span_id)
    assert p.same_schedule(Planner(TOTAL, BASE, DURATION, "core"))
    assert p.is_empty and p.points() == [(BASE, TOTAL)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 400), st.integers(0, 9)), min_size=200, max_size=400))
def test_property_many_blocks(spans: list[tuple[int, int, int]]) -> None:
    """Enough spans for several blocks: searches that skip blocks agree with the model."""
    p = Planner(40, 0, 4000, "core")
    for start, duration, request in spans:
        if p.avail_during(start, duration, request):
            p.add_span(start, duration, request)
    model = Model(p)
    for request, duration in [(40, 50), (35, 200), (1, 1)]:
        assert iterate(p.avail_time_first(0, duration, request), p.avail_time_next) == model.fits(0, duration, request)
    for t in range(0, 4000, 37):
        assert p.avail_resources_at(t) == model.avail_at(t)
    for span_id in p.span_ids():
        p.rem_span(span_id)
    assert p.same_schedule(Planner(40, 0, 4000, "core"))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 500), st.integers(1, 80), st.integers(0, 4), st.integers(0, 6)), max_size=200),
    st.integers(0, 4),
    st.integers(0, 6),
    st.integers(1, 60),
)
def test_property_multi_matches_first_type_points(
    spans: list[tuple[int, int, int, int]], req_core: int, req_mem: int, duration: int
) -> None:
    """Multi avail_time_* = the first type's fitting points at which every other type fits too."""
    m = MultiPlanner({"core": 4, "memory": 6}, 0, 600)
    ids = []
    for start, dur, core, mem in spans:
        with contextlib.suppress(PlannerError):
            ids.append(m.add_span(start, dur, [core, mem]))
    cores = Model(m.planner("core"))
    expected = [
        t
        for t in cores.fits(0, duration, req_core)
        if t is None or m.planner("memory").avail_during(t, duration, req_mem)
    ]
    assert iterate(m.avail_time_first(0, duration, [req_core, req_mem]), m.avail_time_next) == expected
    for span_id in ids:
        m.rem_span(span_id)
    assert m.same_schedule(MultiPlanner({"core": 4, "memory": 6}, 0, 600))


_UNIT_OP = st.tuples(
    st.sampled_from(["add"] * 4 + ["ask"] * 4 + ["rem"] * 2 + ["timeline"]),
    st.integers(0, 21),
    st.integers(1, 6),
    st.integers(0, 1),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_UNIT_OP, max_size=40))
def test_a_unit_planner_answers_as_a_planner_of_one_unit(ops: list[tuple[str, int, int, int]]) -> None:
    """UnitPlanner keeps a one-unit planner's spans as a table until its timeline is needed; every answer,
    error and span id must be the plain Planner's, before and after the timeline is built."""
    unit, plain = UnitPlanner(1, 0, 20, "core"), Planner(1, 0, 20, "core")

    def both(method: str, *args: int) -> None:
        answers: list[object] = []
        for planner in (unit, plain):
            try:
                answers.append(getattr(planner, method)(*args))
            except PlannerError as error:
                answers.append((type(error), str(error)))
        assert answers[0] == answers[1], method

    for kind, at, duration, request in ops:
        if kind == "add":
            both("add_span", at, duration, request)
        elif kind == "rem":
            ids = plain.span_ids()
            both("rem_span", ids[at % len(ids)] if ids else 99)
        elif kind == "ask":
            both("avail_resources_during", at, duration)
            both("avail_during", at, duration, request)
            both("avail_resources_at", at)
        else:
            assert unit.points() == plain.points()
    assert unit == plain
    assert unit.avail_time_first(0, 10, 1) == plain.avail_time_first(0, 10, 1)
