"""The discrete-event core: time order, the documented tie order, determinism."""

from __future__ import annotations

import pytest

from kubeflux.sim.clock import EventLoop, Priority


def test_entries_run_in_time_order_and_advance_the_clock() -> None:
    loop = EventLoop()
    seen: list[tuple[float, str]] = []
    for at, name in [(5.0, "c"), (1.0, "a"), (3.0, "b")]:
        loop.schedule(at, Priority.ARRIVAL, lambda n: seen.append((loop.now, n)), name)
    loop.run()
    assert seen == [(1.0, "a"), (3.0, "b"), (5.0, "c")]
    assert loop.now == 5.0
    assert loop.processed == 3


def test_ties_go_releases_then_nodes_then_stages_then_arrivals_then_wakeups() -> None:
    loop = EventLoop()
    seen: list[str] = []
    for priority in (Priority.WAKEUP, Priority.ARRIVAL, Priority.STAGE, Priority.NODE, Priority.RELEASE):
        loop.schedule(10.0, priority, seen.append, priority.name)
    loop.run()
    assert seen == ["RELEASE", "NODE", "STAGE", "ARRIVAL", "WAKEUP"]


def test_equal_time_and_priority_keep_scheduling_order() -> None:
    loop = EventLoop()
    seen: list[int] = []
    for n in range(50):
        loop.schedule(1.0, Priority.ARRIVAL, seen.append, n)
    loop.run()
    assert seen == list(range(50))


def test_run_until_stops_before_later_entries_and_sets_the_clock() -> None:
    loop = EventLoop()
    seen: list[float] = []
    for at in (1.0, 2.0, 8.0):
        loop.schedule(at, Priority.STAGE, seen.append, at)
    loop.run(until=5.0)
    assert seen == [1.0, 2.0]
    assert loop.now == 5.0
    assert loop.peek() == 8.0


def test_a_time_point_includes_entries_added_for_the_same_time() -> None:
    loop = EventLoop()
    seen: list[str] = []

    def first(_: object) -> None:
        seen.append("first")
        loop.schedule(loop.now, Priority.RELEASE, seen.append, "added")

    loop.schedule(4.0, Priority.ARRIVAL, first)
    loop.schedule(6.0, Priority.ARRIVAL, seen.append, "later")
    assert loop.run_time_point() == 4.0
    assert seen == ["first", "added"]


def test_scheduling_in_the_past_is_an_error() -> None:
    loop = EventLoop(start=10.0)
    with pytest.raises(ValueError, match="already at 10"):
        loop.schedule(9.0, Priority.STAGE, print)
