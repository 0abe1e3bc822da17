"""The gang assignment search (:mod:`kubeflux.scheduler.gang`): a table of named cases, and a property against
brute force on small instances."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.among import spread_order
from kubeflux.scheduler.gang import EXHAUSTED, GangMember, Spread, assign


def members(*demands: int, nodes: int) -> list[GangMember]:
    return [GangMember((d,), tuple(range(nodes))) for d in demands]


def loads(found: list[int | None], gang: list[GangMember], count: int) -> list[int]:
    use = [0] * count
    for member, node in zip(gang, found, strict=True):
        if node is not None:
            use[node] += member.demand[0]
    return use


@pytest.mark.parametrize(
    ("demands", "capacities", "minimum", "fits"),
    [
        pytest.param((3, 3, 2, 2, 2, 2), (7, 7), 6, True, id="first-fit-decreasing-fails-the-search-does-not"),
        pytest.param((1, 8, 8), (8, 4, 8), 3, True, id="launcher-first-then-two-workers"),
        pytest.param((8, 8, 8), (8, 8), 3, False, id="larger-than-the-cluster"),
        pytest.param((8, 8, 8, 8), (8, 8), 2, True, id="min-member-two-of-four"),
        pytest.param((5, 5, 5), (9, 9), 3, False, id="each-pod-on-one-node"),
        pytest.param((), (1,), 0, True, id="empty"),
    ],
)
def test_assignment_table(demands: tuple[int, ...], capacities: tuple[int, ...], minimum: int, fits: bool) -> None:
    gang = members(*demands, nodes=len(capacities))
    found = assign(gang, [[c] for c in capacities], [True] * len(capacities), minimum)
    assert (isinstance(found, list)) == fits
    if isinstance(found, list):
        assert sum(node is not None for node in found) >= minimum
        assert all(u <= c for u, c in zip(loads(found, gang, len(capacities)), capacities, strict=True))


def test_members_beyond_the_minimum_are_placed_when_they_fit() -> None:
    gang = members(4, 4, 4, 4, nodes=2)
    found = assign(gang, [[8], [4]], [True, True], 2)
    assert isinstance(found, list) and sum(node is not None for node in found) == 3


def test_a_whole_node_member_needs_a_wholly_free_node_and_fills_it() -> None:
    whole = GangMember((1,), (0, 1), whole_node=True)
    other = GangMember((1,), (0, 1))
    assert assign([whole, whole], [[4], [4]], [True, False], 2) is None
    found = assign([whole, other], [[4], [4]], [True, True], 2)
    assert isinstance(found, list) and found[0] != found[1]


@pytest.mark.parametrize("alike", [True, False], ids=["alike", "differing"])
def test_distinct_members_take_distinct_domains_when_given_domains(alike: bool) -> None:
    # four nodes in zones 0, 0, 1, 2: room for all four members, but three zones for four members kept apart
    zones = [0, 0, 1, 2]
    small, big = GangMember((1,), (0, 1, 2, 3), distinct=True), GangMember((2,), (0, 1, 2, 3), distinct=True)
    gang = [small] * 4 if alike else [small, small, big, big]
    assert assign(gang, [[4]] * 4, [True] * 4, 4, domains=zones) is None
    found = assign(gang, [[4]] * 4, [True] * 4, 3, domains=zones)
    assert isinstance(found, list) and len({zones[node] for node in found if node is not None}) == 3
    assert isinstance(assign(gang, [[4]] * 4, [True] * 4, 4), list)  # without domains: one per node


def test_a_search_that_runs_out_of_budget_says_so_instead_of_no() -> None:
    # 14 members of odd sizes on nodes that cannot hold them all: proving "no" takes many trials.
    gang = [GangMember((d,), tuple(range(4))) for d in (5, 7, 9, 11, 13, 6, 8, 10, 12, 4, 3, 2, 14, 15)]
    assert assign(gang, [[30], [30], [30], [29]], [True] * 4, len(gang), budget=50) is EXHAUSTED


@settings(max_examples=150, deadline=None)
@given(
    demands=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), min_size=1, max_size=5),
    capacities=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 4)), min_size=1, max_size=3),
    data=st.data(),
)
def test_the_search_finds_an_assignment_whenever_brute_force_does(
    demands: list[tuple[int, int]], capacities: list[tuple[int, int]], data: st.DataObject
) -> None:
    count = len(capacities)
    candidates = [
        tuple(sorted(data.draw(st.sets(st.integers(0, count - 1), min_size=1), label=f"nodes of {i}")))
        for i in range(len(demands))
    ]
    minimum = data.draw(st.integers(1, len(demands)), label="minimum")
    gang = [GangMember(d, c) for d, c in zip(demands, candidates, strict=True)]
    best = 0
    for choice in itertools.product(*[(None, *c) for c in candidates]):
        use = [[0, 0] for _ in range(count)]
        for member, node in zip(gang, choice, strict=True):
            if node is not None:
                use[node][0] += member.demand[0]
                use[node][1] += member.demand[1]
        if all(u[0] <= c[0] and u[1] <= c[1] for u, c in zip(use, capacities, strict=True)):
            best = max(best, sum(node is not None for node in choice))
    found = assign(gang, [list(c) for c in capacities], [True] * count, minimum)
    assert (found is not None) == (best >= minimum)
    if isinstance(found, list):
        assert sum(node is not None for node in found) >= minimum
        for member, node in zip(gang, found, strict=True):
            assert node is None or node in member.candidates


def test_a_nodes_free_cores_counted_by_its_planner_are_an_upper_bound_and_exactly_one_by_one() -> None:
    # One core busy until 100, the other reserved from 100: over [50, 150) the node's planner sees one core free
    # at every instant, but no single core is free throughout.
    from collections import deque

    from kubeflux.match.engine import MatchOp
    from kubeflux.resources import NodeSpec
    from kubeflux.scheduler.graphview import GraphView
    from kubeflux.scheduler.objects import CPU, Pod
    from kubeflux.scheduler.translate import pod_jobspec

    view = GraphView([NodeSpec("n0", cores=2, memory=0, gpus=0)], "lonode", 10**6, deque())
    spec = pod_jobspec(Pod("default", "p", requests={CPU: 1000}), 100)
    assert spec is not None and view.match(MatchOp.ALLOCATE, spec, "p", 0, set()).matched
    other = view.free_leaves("n0", "core", 0, 100, 1)  # the core the allocation left free
    assert other is not None
    assert view.replay("n0", other, 100, 100, "r", 0, whole_node=False, reserve=True).matched
    assert view.free_counts("n0", 50, 100) == (1, 0, False)
    assert view.free_counts("n0", 50, 100, exact=True) == (0, 0, False)
    assert view.free_counts("n0", 0, 100, exact=True) == (1, 0, False)


# --- a topology spread among the members ----------------------------------------------------------------------


def _keeps_skew(domains: list[int], counts: list[int], skew: int, floor_zero: bool, order: Iterable[int]) -> bool:
    """Each member, bound in ``order``, keeps its skew beside those before it (kube-scheduler's check)."""
    current = list(counts)
    for k in order:
        least = 0 if floor_zero else min(current)
        if current[domains[k]] + 1 - least > skew:
            return False
        current[domains[k]] += 1
    return True


@settings(max_examples=300, deadline=None)
@given(
    demands=st.lists(st.integers(1, 3), min_size=1, max_size=4),
    capacities=st.lists(st.integers(0, 5), min_size=1, max_size=5),
    layout=st.lists(st.integers(-1, 2), min_size=5, max_size=5),
    counts=st.lists(st.integers(0, 2), min_size=3, max_size=3),
    skew=st.integers(1, 2),
    floor_zero=st.booleans(),
    optional=st.integers(0, 2),
)
def test_a_spread_assignment_exists_exactly_when_brute_force_finds_one_and_keeps_the_skew_bound_in_order(
    demands: list[int],
    capacities: list[int],
    layout: list[int],
    counts: list[int],
    skew: int,
    floor_zero: bool,
    optional: int,
) -> None:
    nodes = len(capacities)
    domain = layout[:nodes]  # each node's spread domain, -1: no member may go there
    gang = members(*demands, nodes=nodes)
    minimum = max(0, len(demands) - optional)
    spread = Spread(domain, counts, skew, floor_zero)
    found = assign(gang, [[c] for c in capacities], [True] * nodes, minimum, spread=spread)
    assert found is not EXHAUSTED

    def valid(chosen: tuple[int | None, ...], *, any_order: bool) -> bool:
        placed = [domain[node] for node in chosen if node is not None]
        if len(placed) < minimum or any(d < 0 for d in placed):
            return False
        if any(use > cap for use, cap in zip(loads(list(chosen), gang, nodes), capacities, strict=True)):
            return False
        orders = (
            itertools.permutations(range(len(placed))) if any_order else [spread_order(placed, dict(enumerate(counts)))]
        )
        return any(_keeps_skew(placed, counts, skew, floor_zero, order) for order in orders)

    options: list[int | None] = [*range(nodes), None]
    exists = any(valid(chosen, any_order=True) for chosen in itertools.product(options, repeat=len(demands)))
    assert (found is not None) == exists
    if found is not None:  # and the order the placer binds them in keeps it
        assert isinstance(found, list) and valid(tuple(found), any_order=False)
