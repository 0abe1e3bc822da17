"""The exact books in time on their own (:class:`~kubeflux.scheduler.timebooks.TimeBooks`): a booked pod uses its
requests until its planned end (for ever when it has none), a reservation (:class:`Hold`) its requests and one pod
during ``[start, end)``; what a node uses over a window, what stays free, whether a pod fits throughout, and the
times at which more can become free."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import CPU, MEMORY, PODS, ResourceList
from kubeflux.scheduler.timebooks import Hold, TimeBooks

GIB = 2**30


def _books(*pods: tuple[str, str, ResourceList, float]) -> TimeBooks:
    """Books of ``pods`` (uid, node, requests, planned end)."""
    ledger = Ledger()
    ends = {}
    for uid, node, requests, end in pods:
        ledger.take(uid, node, requests)
        ends[uid] = end
    return TimeBooks(ledger, ends.__getitem__)


def test_a_booked_pod_uses_its_requests_until_its_planned_end() -> None:
    books = _books(("a", "w1", {CPU: 2000, MEMORY: GIB}, 100), ("b", "w1", {CPU: 1000}, math.inf))
    assert books.peak("w1", 0, 50) == {CPU: 3000, MEMORY: GIB, PODS: 2}
    assert books.peak("w1", 100, 200) == {CPU: 1000, PODS: 1}, "a ends at 100: b holds on for ever"
    assert books.peak("w2", 0, 50) == {}


def test_a_hold_uses_its_requests_and_one_pod_from_its_start_to_just_before_its_end() -> None:
    books = _books()
    books.hold("w1", 10, 20, {CPU: 4000})
    assert books.peak("w1", 0, 10) == {}, "the window ends as the hold starts"
    assert books.peak("w1", 0, 11) == {CPU: 4000, PODS: 1}, "a hold starting inside the window counts"
    assert books.peak("w1", 19, 30) == {CPU: 4000, PODS: 1}
    assert books.peak("w1", 20, 30) == {}, "the hold is over at its end"


def test_the_peak_is_the_most_of_each_resource_at_any_time_of_the_window() -> None:
    # cpu is highest at the window's start (the pod), memory once the hold starts (the pod gone by then)
    books = _books(("a", "w1", {CPU: 4000}, 50))
    books.hold("w1", 60, 100, {CPU: 1000, MEMORY: 8 * GIB})
    assert books.peak("w1", 0, 100) == {CPU: 4000, MEMORY: 8 * GIB, PODS: 1}


@pytest.mark.parametrize(
    ("requests", "allocatable", "start", "end", "fits"),
    [
        pytest.param({CPU: 2000}, {CPU: 4000}, 0, 10, True, id="beside-the-pod"),
        pytest.param({CPU: 2001}, {CPU: 4000}, 0, 10, False, id="a-millicore-over"),
        pytest.param({CPU: 2001}, {CPU: 4000}, 100, 150, True, id="after-the-pod-ends"),
        pytest.param({CPU: 1000}, {CPU: 4000}, 150, 250, False, id="into-the-hold"),
        pytest.param({CPU: 1000}, {CPU: 4000}, 300, 400, True, id="after-the-hold"),
        pytest.param({MEMORY: GIB}, {CPU: 4000}, 0, 10, False, id="a-resource-the-node-lacks"),
        pytest.param({MEMORY: 0}, {CPU: 4000}, 0, 10, True, id="a-zero-request-is-no-request"),
        pytest.param({CPU: 1}, {CPU: 4000, PODS: 1}, 0, 10, False, id="pod-count-full"),
        pytest.param({CPU: 1}, {CPU: 4000, PODS: 2}, 0, 10, True, id="pod-count-room"),
        pytest.param({CPU: 1}, {CPU: 4000, PODS: 1}, 150, 250, False, id="the-hold-is-a-pod"),
    ],
)
def test_a_pod_fits_when_every_request_and_the_pod_count_stay_within_the_node_throughout(
    requests: ResourceList, allocatable: ResourceList, start: int, end: int, fits: bool
) -> None:
    books = _books(("a", "w1", {CPU: 2000}, 100))
    books.hold("w1", 200, 300, {CPU: 3500})
    assert books.fits_during("w1", requests, allocatable, start, end) is fits


def test_what_stays_free_is_the_allocatable_less_the_peak_and_may_be_negative() -> None:
    books = _books(("a", "w1", {CPU: 3000, MEMORY: GIB}, math.inf))
    books.hold("w1", 5, 10, {CPU: 2000})
    assert books.free_during("w1", {CPU: 4000, MEMORY: 4 * GIB}, 0, 5) == {CPU: 1000, MEMORY: 3 * GIB}
    assert books.free_during("w1", {CPU: 4000, MEMORY: 4 * GIB, PODS: 110}, 0, 10) == {
        CPU: -1000,
        MEMORY: 3 * GIB,
        PODS: 108,
    }


def test_release_times_are_the_later_ends_of_pods_and_holds_in_order_once_each() -> None:
    books = _books(
        ("a", "w1", {CPU: 1}, 100),
        ("b", "w2", {CPU: 1}, 100),
        ("c", "w1", {CPU: 1}, 40.5),
        ("d", "w1", {CPU: 1}, math.inf),
        ("e", "w1", {CPU: 1}, 10),
    )
    books.hold("w1", 0, 70, {CPU: 1})
    books.hold("w2", 50, 100, {CPU: 1})
    assert books.release_times(10) == [41, 70, 100], "fractional ends round up; for ever is no release"
    assert books.release_times(100) == []


def test_a_dropped_hold_frees_its_node_and_the_others_stay() -> None:
    books = _books()
    first = books.hold("w1", 0, 10, {CPU: 1000})
    second = books.hold("w1", 0, 10, {CPU: 1000})  # equal to the first, not the same
    other = books.hold("w2", 0, 10, {CPU: 1000})
    books.drop(first)
    assert books.holds["w1"] == [second] and books.peak("w1", 0, 10) == {CPU: 1000, PODS: 1}
    books.drop(second)
    books.drop(second)  # again: nothing left to drop
    assert list(books.held_nodes()) == ["w2"] and books.holds["w2"] == [other]
    books.drop(Hold("w3", 0, 1, {}))
    assert list(books.held_nodes()) == ["w2"]


def test_a_hold_keeps_its_own_copy_of_the_requests_and_books_may_share_their_holds() -> None:
    ledger = Ledger()
    shared: dict[str, list[Hold]] = {}
    one, two = TimeBooks(ledger, lambda uid: math.inf, shared), TimeBooks(ledger, lambda uid: 0.0, shared)
    asked: ResourceList = {CPU: 1000}
    one.hold("w1", 0, 10, asked)
    asked[CPU] = 9000
    assert two.peak("w1", 0, 10) == {CPU: 1000, PODS: 1}


windows = st.tuples(st.integers(0, 30), st.integers(1, 30)).map(lambda pair: (pair[0], pair[0] + pair[1]))


@given(
    pods=st.lists(st.tuples(st.integers(1, 4000), st.one_of(st.integers(0, 40), st.just(math.inf))), max_size=5),
    holds=st.lists(st.tuples(windows, st.integers(1, 4000), st.integers(0, 3)), max_size=5),
    window=windows,
)
def test_the_peak_is_the_most_used_at_any_whole_second_of_the_window(
    pods: list[tuple[int, float]], holds: list[tuple[tuple[int, int], int, int]], window: tuple[int, int]
) -> None:
    books = _books(*((f"p{i}", "w1", {CPU: cpu}, end) for i, (cpu, end) in enumerate(pods)))
    for (start, end), cpu, memory in holds:
        books.hold("w1", start, end, {CPU: cpu, MEMORY: memory})

    def used_at(t: int) -> ResourceList:
        use = {CPU: 0, MEMORY: 0, PODS: 0}
        for cpu, end in pods:
            if end > t:
                use[CPU] += cpu
                use[PODS] += 1
        for (start, end), cpu, memory in holds:
            if start <= t < end:
                use[CPU] += cpu
                use[MEMORY] += memory
                use[PODS] += 1
        return use

    every = [used_at(t) for t in range(*window)]
    expected = {name: max(use[name] for use in every) for name in (CPU, MEMORY, PODS)}
    peak = books.peak("w1", *window)
    assert {name: peak.get(name, 0) for name in expected} == expected
