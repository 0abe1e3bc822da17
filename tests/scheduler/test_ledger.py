"""The exact per-node books on their own (:class:`~kubeflux.scheduler.ledger.Ledger`): every bound, unfinished pod
counted once on its node, its requests summed exactly with the pod count, a release that gives back exactly what was
taken and may be repeated, and kube-scheduler's NodeResourcesFit reasons for a pod that does not fit now."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeflux.scheduler.ledger import Ledger
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, ResourceList

GIB = 2**30
EPHEMERAL_STORAGE = "ephemeral-storage"


def test_a_pod_taken_is_counted_on_its_node_with_the_pod_count() -> None:
    ledger = Ledger()
    assert ledger.take("a", "w1", {CPU: 1500, MEMORY: GIB})
    assert ledger.take("b", "w1", {CPU: 250})
    assert ledger.on("w1") == {CPU: 1750, MEMORY: GIB, PODS: 2}
    assert ledger.by_node["w1"] == {"a", "b"} and ledger.on("w2") == {}
    assert ledger.bookings["a"].node == "w1" and ledger.bookings["a"].requests == {CPU: 1500, MEMORY: GIB}


def test_a_pod_is_never_counted_twice() -> None:
    ledger = Ledger()
    assert ledger.take("a", "w1", {CPU: 1000})
    assert not ledger.take("a", "w1", {CPU: 1000})
    assert not ledger.take("a", "w2", {CPU: 4000}), "already counted on w1: not moved"
    assert ledger.on("w1") == {CPU: 1000, PODS: 1} and ledger.on("w2") == {}


def test_a_booking_keeps_its_own_copy_of_the_requests() -> None:
    ledger = Ledger()
    requests: ResourceList = {CPU: 1000}
    ledger.take("a", "w1", requests)
    requests[CPU] = 9000
    booking = ledger.give("a")
    assert booking is not None and booking.requests == {CPU: 1000}
    assert ledger.on("w1") == {CPU: 0, PODS: 0}


def test_a_release_gives_back_what_was_taken_and_may_be_repeated() -> None:
    ledger = Ledger()
    ledger.take("a", "w1", {CPU: 1000, "example.com/fpga": 1})
    ledger.take("b", "w1", {CPU: 500})
    booking = ledger.give("a")
    assert booking is not None and (booking.node, booking.requests) == ("w1", {CPU: 1000, "example.com/fpga": 1})
    assert ledger.on("w1") == {CPU: 500, "example.com/fpga": 0, PODS: 1}
    assert ledger.give("a") is None and ledger.on("w1") == {CPU: 500, "example.com/fpga": 0, PODS: 1}
    assert ledger.by_node["w1"] == {"b"} and "a" not in ledger.bookings


def test_a_pod_never_counted_is_released_as_nothing() -> None:
    ledger = Ledger()
    assert ledger.give("ghost") is None
    assert ledger.used == {} and ledger.bookings == {}


@pytest.mark.parametrize(
    ("requests", "allocatable", "used", "reasons"),
    [
        pytest.param({CPU: 1000}, {CPU: 4000}, {CPU: 3000}, [], id="fits-exactly"),
        pytest.param({CPU: 1001}, {CPU: 4000}, {CPU: 3000}, ["Insufficient cpu"], id="a-millicore-short"),
        pytest.param({MEMORY: GIB}, {CPU: 4000, MEMORY: GIB}, {}, [], id="memory-fits"),
        pytest.param(
            {CPU: 4000, MEMORY: 2 * GIB},
            {CPU: 2000, MEMORY: GIB},
            {},
            ["Insufficient cpu", "Insufficient memory"],
            id="cpu-then-memory",
        ),
        pytest.param({CPU: 1}, {CPU: 4000, PODS: 1}, {PODS: 1}, ["Too many pods"], id="pod-count-full"),
        pytest.param({CPU: 1}, {CPU: 4000}, {PODS: 110}, [], id="no-pod-count-stated"),
        pytest.param({GPU: 1}, {CPU: 4000}, {}, ["Insufficient nvidia.com/gpu"], id="extended-the-node-lacks"),
        pytest.param({GPU: 0, CPU: 0}, {}, {}, [], id="zero-requests-always-fit"),
        pytest.param(
            {EPHEMERAL_STORAGE: 10 * GIB},
            {EPHEMERAL_STORAGE: GIB},
            {},
            ["Insufficient ephemeral-storage"],
            id="storage",
        ),
    ],
)
def test_the_shortfall_is_kube_schedulers_reasons_on_what_the_node_holds_now(
    requests: ResourceList, allocatable: ResourceList, used: ResourceList, reasons: list[str]
) -> None:
    ledger = Ledger()
    if used:
        ledger.take("there", "w1", {name: amount for name, amount in used.items() if name != PODS})
        ledger.used["w1"][PODS] = used.get(PODS, 1)
    assert ledger.shortfall(requests, "w1", allocatable) == reasons


requests = st.dictionaries(st.sampled_from([CPU, MEMORY, GPU, "example.com/fpga"]), st.integers(0, 2**40), max_size=4)


@given(
    pods=st.lists(st.tuples(st.sampled_from(["w1", "w2", "w3"]), requests), max_size=12),
    released=st.sets(st.integers(0, 11)),
)
def test_the_sums_are_always_those_of_the_pods_counted(
    pods: list[tuple[str, ResourceList]], released: set[int]
) -> None:
    ledger = Ledger()
    for i, (node, asked) in enumerate(pods):
        ledger.take(f"p{i}", node, asked)
    for i in sorted(released):
        ledger.give(f"p{i}")
        ledger.give(f"p{i}")
    kept = [(node, asked) for i, (node, asked) in enumerate(pods) if i not in released]
    for node in ("w1", "w2", "w3"):
        expected: ResourceList = {}
        for where, asked in kept:
            if where == node:
                for name, amount in asked.items():
                    expected[name] = expected.get(name, 0) + amount
                expected[PODS] = expected.get(PODS, 0) + 1
        assert {name: amount for name, amount in ledger.on(node).items() if amount} == {
            name: amount for name, amount in expected.items() if amount
        }
        assert ledger.by_node.get(node, set()) == {f"p{i}" for i, (w, _) in enumerate(pods) if w == node} - {
            f"p{i}" for i in released
        }
