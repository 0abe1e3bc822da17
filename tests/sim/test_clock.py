"""The discrete-event core: time order, the documented tie order, determinism."""

from __future__ import annotations

import math

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


def test_a_cancelled_entry_never_runs_nor_counts_nor_stops_the_clock() -> None:
    loop = EventLoop()
    seen: list[str] = []
    dropped = loop.schedule_cancellable(2.0, Priority.STAGE, seen.append, "dropped")
    loop.schedule_cancellable(5.0, Priority.STAGE, seen.append, "kept")
    inside = loop.schedule_cancellable(5.0, Priority.WAKEUP, seen.append, "dropped at 5")
    dropped.cancel()
    dropped.cancel()  # twice is once
    assert dropped.cancelled and len(loop) == 2 and loop.peek() == 5.0
    inside.cancel()
    assert loop.run_time_point() == 5.0
    assert seen == ["kept"] and loop.processed == 1 and len(loop) == 0 and loop.peek() == math.inf


def test_cancelling_an_entry_that_ran_changes_nothing() -> None:
    loop = EventLoop()
    seen: list[str] = []
    ran = loop.schedule_cancellable(1.0, Priority.STAGE, seen.append, "ran")
    loop.schedule(3.0, Priority.STAGE, seen.append, "later")
    loop.run(until=2.0)
    ran.cancel()
    assert not ran.cancelled and len(loop) == 1
    loop.run()
    assert seen == ["ran", "later"] and loop.processed == 2


def test_an_entry_cancelled_by_an_earlier_one_of_its_time_point_is_dropped() -> None:
    loop = EventLoop()
    seen: list[str] = []
    later = loop.schedule_cancellable(1.0, Priority.ARRIVAL, seen.append, "arrival")
    loop.schedule(1.0, Priority.RELEASE, lambda _: later.cancel())
    loop.schedule(1.0, Priority.WAKEUP, seen.append, "wake-up")
    loop.run()
    assert seen == ["wake-up"] and loop.processed == 2


def test_cancelled_entries_leave_the_heap_once_they_are_most_of_it() -> None:
    loop = EventLoop()
    handles = [loop.schedule_cancellable(float(n), Priority.STAGE, print) for n in range(1, 1001)]
    for handle in handles[::-1][:900]:
        handle.cancel()
    assert len(loop) == 100 and len(loop._heap) < 1000
    seen: list[float] = []
    for handle in handles[:100]:
        handle.callback = lambda _: seen.append(loop.now)
    loop.run()
    assert seen == [float(n) for n in range(1, 101)] and loop.processed == 100
