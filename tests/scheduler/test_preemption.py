"""Preemption's shared rules (:mod:`kubeflux.scheduler.preemption`): PodDisruptionBudget status as the disruption
controller computes it, and kube-scheduler v1.36's DefaultPreemption choice of victims and of a node, as named
cases."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.preemption import (
    DisruptionBudget,
    LabelSelector,
    NodeVictims,
    RunningPod,
    SelectorRequirement,
    VictimJob,
    choose_victim_jobs,
    disruptions_allowed,
    more_important,
    pick_one_node,
    select_victims_on_node,
    split_by_budget,
)

APP = LabelSelector(match_labels=(("app", "db"),))


def pod(name: str, priority: int, start: float = 0.0, **labels: str) -> RunningPod:
    return RunningPod("ns", name, priority, start, labels)


def fits_on(capacity: int, requests: Mapping[str, int], need: int) -> Callable[[frozenset[str]], bool]:
    """A node of ``capacity`` cpu holding pods of ``requests``: does ``need`` fit once the pods given are gone?"""

    def fits_without(gone: frozenset[str]) -> bool:
        used = sum(cpu for key, cpu in requests.items() if key not in gone)
        return capacity - used >= need

    return fits_without


# --- PodDisruptionBudget status ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "healthy", "expected", "allowed"),
    [
        pytest.param(DisruptionBudget("ns", "b", APP, min_available=2), 3, None, 1, id="minAvailable count"),
        pytest.param(DisruptionBudget("ns", "b", APP, min_available=3), 3, None, 0, id="minAvailable all"),
        pytest.param(DisruptionBudget("ns", "b", APP, min_available=5), 3, None, 0, id="never negative"),
        pytest.param(DisruptionBudget("ns", "b", APP, min_available="50%"), 4, 4, 2, id="minAvailable percent"),
        pytest.param(DisruptionBudget("ns", "b", APP, min_available="50%"), 3, 3, 1, id="percent rounds up"),
        pytest.param(DisruptionBudget("ns", "b", APP, min_available="50%"), 4, None, 0, id="percent, Job's pods"),
        pytest.param(DisruptionBudget("ns", "b", APP, max_unavailable=1), 4, 4, 1, id="maxUnavailable count"),
        pytest.param(DisruptionBudget("ns", "b", APP, max_unavailable="30%"), 10, 10, 3, id="maxUnavailable %"),
        pytest.param(DisruptionBudget("ns", "b", APP, max_unavailable=1), 3, 4, 0, id="one already down"),
        pytest.param(DisruptionBudget("ns", "b", APP, max_unavailable=1), 4, None, 0, id="maxUnavailable, Job"),
        pytest.param(DisruptionBudget("ns", "b", APP), 4, 4, 0, id="neither set"),
    ],
)
def test_disruptions_allowed_as_the_disruption_controller_computes_them(
    budget: DisruptionBudget, healthy: int, expected: int | None, allowed: int
) -> None:
    assert disruptions_allowed(budget, healthy, expected) == allowed


def test_a_bad_percentage_is_named() -> None:
    with pytest.raises(ValueError, match="'half': not an integer or a percentage"):
        disruptions_allowed(DisruptionBudget("ns", "b", APP, min_available="half"), 3, 3)


def test_a_budget_covers_pods_of_its_namespace_its_selector_matches_and_an_empty_selector_none() -> None:
    budget = DisruptionBudget("ns", "b", APP)
    assert budget.covers("ns", {"app": "db", "tier": "x"})
    assert not budget.covers("other", {"app": "db"})
    assert not budget.covers("ns", {"app": "web"})
    assert not DisruptionBudget("ns", "b", LabelSelector()).covers("ns", {"app": "db"})
    assert not DisruptionBudget("ns", "b", None).covers("ns", {"app": "db"})
    expression = LabelSelector(match_expressions=(SelectorRequirement("app", "In", ("db", "cache")),))
    assert DisruptionBudget("ns", "b", expression).covers("ns", {"app": "cache"})
    absent = LabelSelector(match_expressions=(SelectorRequirement("keep", "DoesNotExist"),))
    assert DisruptionBudget("ns", "b", absent).covers("ns", {"app": "db"})
    with pytest.raises(ValueError, match="operator 'Gt'"):
        LabelSelector(match_expressions=(SelectorRequirement("a", "Gt", ("1",)),)).matches({"a": "2"})


def test_victims_take_the_budget_in_order_and_those_beyond_it_violate() -> None:
    budget = DisruptionBudget("ns", "b", APP, disrupted=frozenset({"gone"}))
    pods = [pod("a", 1, app="db"), pod("gone", 1, app="db"), pod("b", 1, app="db"), pod("c", 1, app="web")]
    violating, sparing = split_by_budget(pods, [budget], {"ns/b": 1})
    assert [p.name for p in violating] == ["b"]  # "a" took the one disruption; "gone" was granted already
    assert [p.name for p in sparing] == ["a", "gone", "c"]


# --- SelectVictimsOnNode ----------------------------------------------------------------------------------


def test_only_lower_priority_pods_are_victims_and_the_most_important_are_spared_first() -> None:
    pods = [pod("low", 1, start=5), pod("mid", 2), pod("high", 10), pod("equal", 5)]
    requests = {"ns/low": 1, "ns/mid": 1, "ns/high": 1, "ns/equal": 1}
    chosen = select_victims_on_node("n", 5, pods, fits_on(4, requests, 1))
    assert chosen == NodeVictims("n", (pods[0],), 0)  # "mid" is put back first and fits; "low" goes


def test_no_candidate_without_lower_priority_pods_or_when_removing_them_all_is_not_enough() -> None:
    equal = [pod("a", 5), pod("b", 7)]
    assert select_victims_on_node("n", 5, equal, fits_on(2, {"ns/a": 1, "ns/b": 1}, 1)) is None
    low = [pod("a", 1), pod("b", 9)]
    assert select_victims_on_node("n", 5, low, fits_on(2, {"ns/a": 1, "ns/b": 1}, 2)) is None


def test_pods_a_budget_protects_are_put_back_before_the_others() -> None:
    protected, free = pod("protected", 1, start=9, app="db"), pod("free", 1, start=0)
    requests = {"ns/protected": 1, "ns/free": 1}
    budget = DisruptionBudget("ns", "b", APP)
    chosen = select_victims_on_node("n", 5, [protected, free], fits_on(2, requests, 1), [budget], {"ns/b": 0})
    assert chosen == NodeVictims("n", (free,), 0)  # without the budget "free" (started first) would be spared


def test_a_victim_the_budget_cannot_spare_counts_as_a_violation() -> None:
    a, b = pod("a", 1, app="db"), pod("b", 2, app="db")
    budget = DisruptionBudget("ns", "b", APP)
    chosen = select_victims_on_node("n", 5, [a, b], fits_on(2, {"ns/a": 1, "ns/b": 1}, 2), [budget], {"ns/b": 0})
    assert chosen == NodeVictims("n", (b, a), 2)  # both go, most important first


# --- pickOneNodeForPreemption -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidates", "picked"),
    [
        pytest.param(
            [NodeVictims("a", (pod("x", 1),), 1), NodeVictims("b", (pod("y", 1), pod("z", 1)), 0)],
            "b",
            id="fewest budget violations first",
        ),
        pytest.param(
            [NodeVictims("a", (pod("x", 3),), 0), NodeVictims("b", (pod("y", 2), pod("z", 2)), 0)],
            "b",
            id="then the lowest priority of the most important victim",
        ),
        pytest.param(
            [NodeVictims("a", (pod("x", 3), pod("w", 3)), 0), NodeVictims("b", (pod("y", 3), pod("z", -5)), 0)],
            "b",
            id="then the smallest sum of priorities, negative ones counted",
        ),
        pytest.param(
            [NodeVictims("a", (pod("x", 3), pod("w", 0)), 0), NodeVictims("b", (pod("y", 3),), 0)],
            "b",
            id="then the fewest victims",
        ),
        pytest.param(
            [NodeVictims("a", (pod("x", 3, start=10),), 0), NodeVictims("b", (pod("y", 3, start=20),), 0)],
            "b",
            id="then the most recently started",
        ),
        pytest.param(
            [NodeVictims("a", (pod("x", 3, start=10),), 0), NodeVictims("b", (pod("y", 3, start=10),), 0)],
            "a",
            id="then the first",
        ),
        pytest.param([NodeVictims("a", (pod("x", 1),), 0), NodeVictims("b", (), 0)], "b", id="no victim at all"),
    ],
)
def test_kube_scheduler_picks_one_node_in_its_order(candidates: list[NodeVictims], picked: str) -> None:
    chosen = pick_one_node(candidates)
    assert chosen is not None and chosen.node == picked


def test_no_candidate_no_node() -> None:
    assert pick_one_node([]) is None


def test_more_important_is_higher_priority_then_earlier_start() -> None:
    assert more_important(pod("a", 2, start=9), pod("b", 1, start=0))
    assert more_important(pod("a", 1, start=0), pod("b", 1, start=9))
    assert not more_important(pod("a", 1, start=9), pod("b", 1, start=0))


# --- properties -------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(1, 3), st.booleans()), min_size=1, max_size=7),
    st.integers(1, 8),
    st.integers(0, 9),
    st.integers(0, 2),
)
def test_victims_are_lower_priority_enough_and_none_can_be_spared(
    spec: Sequence[tuple[int, int, bool]], need: int, priority: int, allowed: int
) -> None:
    """On random nodes: every victim has lower priority than the preemptor, the preemptor fits without them, and
    putting any one victim back makes it not fit (the set is minimal); the violations are counted as the budget
    says."""
    pods = [
        pod(f"p{i}", prio, start=float(i), **({"app": "db"} if protected else {}))
        for i, (prio, _, protected) in enumerate(spec)
    ]
    requests = {p.key: cpu for p, (_, cpu, _) in zip(pods, spec, strict=True)}
    capacity = sum(requests.values())
    fits = fits_on(capacity, requests, need)
    budget = DisruptionBudget("ns", "b", APP)
    chosen = select_victims_on_node("n", priority, pods, fits, [budget], {"ns/b": allowed})
    lower = [p for p in pods if p.priority < priority]
    if chosen is None:
        assert not lower or not fits(frozenset(p.key for p in lower))
        return
    gone = frozenset(p.key for p in chosen.pods)
    assert all(p.priority < priority for p in chosen.pods)
    assert fits(gone)
    for victim in chosen.pods:
        assert not fits(gone - {victim.key})
    order = list(chosen.pods)
    assert all(not more_important(b, a) for a, b in itertools.pairwise(order))
    protected = [p for p in chosen.pods if p.labels]
    assert chosen.violations <= len(protected)


# --- kubeflux: whole jobs ---------------------------------------------------------------------------------


def gang_fits(
    nodes: Mapping[str, int], held: Mapping[str, Mapping[str, int]], members: int, cpu: int
) -> Callable[[frozenset[str]], bool]:
    """A preemptor gang of ``members`` pods of ``cpu`` each, on nodes of the given free cpu, once the jobs given
    (holding ``held[job][node]`` cpu) are gone."""

    def fits_without(gone: frozenset[str]) -> bool:
        free = dict(nodes)
        for job in gone:
            for node, amount in held[job].items():
                free[node] += amount
        return sum(amount // cpu for amount in free.values()) >= members

    return fits_without


def job(key: str, priority: int, work: float, *labels: str) -> VictimJob:
    return VictimJob(
        key, priority, work, tuple(pod(f"{key}-{i}", priority, app=label) for i, label in enumerate(labels))
    )


def test_an_urgent_gang_evicts_the_two_cheapest_whole_low_priority_gangs() -> None:
    """Four full 8-core nodes, one job on each (three of priority 0, one of 5): an urgent gang of two 8-core pods
    evicts the two priority-0 jobs that lose least work."""
    nodes = {f"n{i}": 0 for i in range(4)}
    held = {"a": {"n0": 8}, "b": {"n1": 8}, "c": {"n2": 8}, "d": {"n3": 8}}
    running = [job("a", 0, 50.0), job("b", 0, 10.0), job("c", 0, 30.0), job("d", 5, 1.0)]
    chosen = choose_victim_jobs(10, running, gang_fits(nodes, held, 2, 8))
    assert [j.key for j in chosen or ()] == ["b", "c"]  # lowest tier only (not "d"), least work lost


def test_equal_or_higher_priority_is_never_evicted_and_policy_says_none() -> None:
    nodes = {"n0": 0}
    held = {"a": {"n0": 8}}
    assert choose_victim_jobs(5, [job("a", 5, 1.0)], gang_fits(nodes, held, 1, 8)) is None
    assert choose_victim_jobs(5, [job("a", 7, 1.0)], gang_fits(nodes, held, 1, 8)) is None
    assert choose_victim_jobs(5, [], gang_fits(nodes, held, 1, 8)) is None


def test_a_budget_blocks_a_victim_and_another_is_chosen() -> None:
    nodes = {"n0": 0, "n1": 0}
    held = {"cheap": {"n0": 8}, "dear": {"n1": 8}}
    running = [job("cheap", 0, 1.0, "db"), job("dear", 0, 100.0, "web")]
    budget = DisruptionBudget("ns", "db", APP, min_available=1)
    chosen = choose_victim_jobs(9, running, gang_fits(nodes, held, 1, 8), [budget], {"ns/db": 0})
    assert [j.key for j in chosen or ()] == ["dear"]
    assert choose_victim_jobs(9, running[:1], gang_fits(nodes, held, 1, 8), [budget], {"ns/db": 0}) is None


def test_past_the_search_limit_the_set_is_still_enough_and_minimal() -> None:
    nodes = {f"n{i}": 0 for i in range(12)}
    held = {f"j{i}": {f"n{i}": 4} for i in range(12)}
    running = [job(f"j{i}", 0, float(i)) for i in range(12)]
    fits = gang_fits(nodes, held, 3, 8)  # needs two 4-core jobs on one node: impossible here, six nodes' worth
    assert choose_victim_jobs(9, running, fits, limit=5) is None
    fits = gang_fits(nodes, held, 3, 4)
    chosen = choose_victim_jobs(9, running, fits, limit=2)
    assert chosen is not None and fits(frozenset(j.key for j in chosen))
    for victim in chosen:
        assert not fits(frozenset(j.key for j in chosen if j is not victim))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 2), st.integers(1, 8), st.booleans()),
        min_size=1,
        max_size=7,
    ),
    st.integers(1, 4),
    st.sampled_from([2, 4, 8]),
    st.integers(0, 4),
    st.integers(0, 2),
)
def test_the_chosen_jobs_are_the_cheapest_set_brute_force_finds(
    spec: Sequence[tuple[int, int, int, int, bool]], members: int, cpu: int, preemptor: int, allowed: int
) -> None:
    """On random small clusters: the chosen set is one of the sets brute force ranks first (lowest priority of its
    most important job, then least work lost, then fewest jobs) among all sets of lower-priority jobs that keep
    the budget and let the preemptor in; None exactly when there is none; and no job in it could be spared."""
    nodes = {f"n{i}": 0 for i in range(3)}
    held = {f"j{i}": {f"n{node}": amount} for i, (_, _, node, amount, _) in enumerate(spec)}
    running = [
        job(f"j{i}", prio, float(work), *(["db"] if protected else ["x"]))
        for i, (prio, work, _, _, protected) in enumerate(spec)
    ]
    fits = gang_fits(nodes, held, members, cpu)
    budget = DisruptionBudget("ns", "db", APP)
    chosen = choose_victim_jobs(preemptor, running, fits, [budget], {"ns/db": allowed})

    def rank(jobs: Sequence[VictimJob]) -> tuple[int, float, int]:
        return (max(j.priority for j in jobs), sum(j.work_lost for j in jobs), len(jobs))

    lower = [j for j in running if j.priority < preemptor]
    valid = [
        subset
        for size in range(1, len(lower) + 1)
        for subset in itertools.combinations(lower, size)
        if not split_by_budget([p for j in subset for p in j.pods], [budget], {"ns/db": allowed})[0]
        and fits(frozenset(j.key for j in subset))
    ]
    if not valid:
        assert chosen is None
        return
    assert chosen is not None
    assert rank(chosen) == min(rank(subset) for subset in valid)
    for victim in chosen:
        assert not fits(frozenset(j.key for j in chosen if j is not victim))
