"""A walk for ``N`` slots that the root's children cannot hold is refused before it is made
(:mod:`kubeflux.match.slotbound`), and that never changes an answer.

Random sequences of gang requests (``slot(N) → core(k)``, with gpus, with a count range), node requests that
fragment the cluster, cancels, status changes and clock steps, on flat clusters wide enough for the block walk
(with and without sockets), under every policy and operation, give byte-identical transcripts with the bound and
with the plain walk (no bound, no early stop, nothing cached).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec
from kubeflux.match import evaluation, slotbound, traverser, wide
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.match.meta import AllocType, JobMeta
from kubeflux.match.request import requests_from_jobspec
from kubeflux.match.traverser import Traverser
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.graph import Status
from tests.match._wide import DURATIONS, WAITS, Step, jobspec_of, slot

POLICIES = ["first", "low", "high", "lonode", "hinode", "lonodex", "hinodex", "variation"]
OPS = [
    MatchOp.ALLOCATE,
    MatchOp.ALLOCATE_ORELSE_RESERVE,
    MatchOp.ALLOCATE_ORELSE_RESERVE,
    MatchOp.ALLOCATE_WITH_SATISFIABILITY,
    MatchOp.SATISFIABILITY,
]


def _bounded(engine: Engine, gang: Jobspec, at: int) -> bool:
    """Whether the bound refuses a reservation's walk for ``gang`` at ``at`` (the walks it applies to)."""
    meta = JobMeta(engine.next_jobid, at, gang.duration, AllocType.ALLOCATE_ORELSE_RESERVE, at)
    return slotbound.too_few_slots(engine.schedule.view, requests_from_jobspec(gang.resources), meta)[0]


JOBSPECS = [
    jobspec_of([slot(1, 2)]),
    jobspec_of([slot(3, 4)]),
    jobspec_of([slot(6, 8)]),
    jobspec_of([slot(12, 2)]),
    jobspec_of([slot(40, 4)]),
    jobspec_of([slot(2, 1, gpus=1)]),
    jobspec_of([slot({"min": 2, "max": 9, "operator": "+", "operand": 1}, 4)]),
    jobspec_of([{"type": "node", "count": 1, "with": [slot(1, 1)]}]),  # fragments nodes (and is never bounded)
    jobspec_of([{"type": "node", "count": 2, "with": [slot(1, 3)]}]),
]


def _graph(nodes: int, sockets: bool, small: bool) -> list[NodeSpec]:
    """``nodes`` nodes of 2, 4 and 8 cores, some with gpus; ``small``: all of 4 cores (a cluster soon full)."""
    return [
        NodeSpec(
            f"n{i}",
            cores=4 if small else (2, 4, 8)[i % 3],
            gpus=2 if i % 5 == 0 else 0,
            sockets=2 if sockets else 0,
        )
        for i in range(nodes)
    ]


def _run(specs: list[NodeSpec], policy: str, steps: list[Step], *, bound: bool) -> list[str]:
    """The transcript of ``steps``; not ``bound``: the plain walk (no bound, no early stop, nothing cached)."""
    patches: list[Any] = [mock.patch.object(Traverser, "slot_bounds", bound)]
    if not bound:
        patches += [
            mock.patch.object(wide, "early_count", return_value=(0, None)),
            mock.patch.object(evaluation, "CACHE_PER_VERTEX", 0),
            mock.patch.object(traverser, "CACHE_PER_VERTEX", 0),
        ]
    for patch in patches:
        patch.start()
    try:
        engine = Engine(build_graph(specs), policy=policy)
        paths = [engine.graph.vertices[uid].paths["containment"] for uid in engine.graph.by_type["node"]]
        transcript: list[str] = []
        live: list[int] = []
        now = 0
        for kind, a, b in steps:
            if kind == "wait":
                now += WAITS[b % len(WAITS)]
            elif kind == "cancel" and live:
                engine.cancel(live.pop(a % len(live)))
            elif kind == "status":
                engine.set_status(paths[a % len(paths)], Status.DOWN if b % 2 else Status.UP)
            elif kind == "match":
                op = OPS[b % len(OPS)]
                spec = dataclasses.replace(JOBSPECS[a % len(JOBSPECS)], duration=DURATIONS[(a + b) % 3])
                result = engine.match(op, spec, now=now)
                if result.matched and op != MatchOp.SATISFIABILITY:
                    live.append(result.jobid)
                transcript.append(f"{op} {result.matched} {result.at} {result.errno}\n{result.resources}")
        return transcript
    finally:
        for patch in patches:
            patch.stop()


steps = st.lists(
    st.tuples(
        st.sampled_from(["match", "match", "match", "match", "match", "cancel", "status", "wait"]),
        st.integers(0, 99),
        st.integers(0, 9),
    ),
    min_size=1,
    max_size=80,
)


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=60, deadline=None)
@given(
    nodes=st.sampled_from([70, 100]),
    sockets=st.booleans(),
    small=st.booleans(),
    policy=st.sampled_from(POLICIES),
    steps=steps,
)
def test_the_slot_bound_gives_the_plain_walks_matches(
    nodes: int, sockets: bool, small: bool, policy: str, steps: list[Step]
) -> None:
    specs = _graph(nodes, sockets, small)
    assert _run(specs, policy, steps, bound=True) == _run(specs, policy, steps, bound=False)


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize("policy", ["lonode", "low", "first"])
def test_gangs_on_a_fragmented_cluster_are_reserved_as_the_plain_walk_reserves_them(policy: str) -> None:
    """Every node half busy for staggered times, so the cluster's free cores always suffice and no node is free
    throughout a long window until its job ends: gangs of whole nodes reserved, one after another, while the clock
    moves past those ends (a count kept for one window and reused for another would show)."""
    specs = _graph(96, False, small=True)
    steps: list[Step] = [("match", 7 + 9 * (i % 2), i % 10) for i in range(120)]  # one-core pods, some reserved
    steps += [step for i in range(30) for step in (("match", 9 * (i % 5) + 1, 1), ("wait", 0, i % 3))]
    steps += [step for i in range(30) for step in (("match", 9 * (i % 4) + 2, 2), ("cancel", i, 0))]
    with_bound = _run(specs, policy, steps, bound=True)
    assert with_bound == _run(specs, policy, steps, bound=False)
    assert sum(answer.startswith("allocate_orelse_reserve True") for answer in with_bound) > 10


def _fragmented(nodes: int, policy: str = "lonode") -> Engine:
    """``nodes`` nodes of 4 cores, node ``i`` with one core taken for 1,000 + ``i`` s (the first for 2,000 s)."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(nodes)]), policy=policy)
    for i, node in enumerate(engine.graph.by_type["node"]):
        core = engine.schedule.view.children(node)[0][1]
        assert engine.update_leaves(i + 1, [core], duration=2000 if i == 0 else 1000 + i).matched
    assert engine.match(MatchOp.SATISFIABILITY, jobspec_of([slot(1, 1)])).matched  # (a walk lays the root out)
    return engine


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
def test_a_gang_of_whole_nodes_on_a_fragmented_cluster_is_reserved_after_one_walk() -> None:
    """1,000 nodes with a core taken on each: the cluster has 3,000 free cores, but a gang of 4 whole nodes fits
    only once the pods on nodes 1 to 4 have ended, at 1,004 s. The walks at the three ends before are refused by
    the bound (the root is visited twice: the walk at now, which the bound leaves alone, and the one that
    succeeds); without the bound each is made."""
    gang = dataclasses.replace(jobspec_of([slot(4, 4)]), duration=500)
    for bound, walks in ((True, 2), (False, 5)):
        engine = _fragmented(1000)
        root = engine.schedule.view.root
        with (
            mock.patch.object(Traverser, "slot_bounds", bound),
            mock.patch.object(
                traverser.Traverser, "_evaluate", autospec=True, side_effect=traverser.Traverser._evaluate
            ) as evaluate,
        ):
            result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, gang, now=10)
        assert (result.matched, result.at) == (True, 1004)
        assert sum(1 for call in evaluate.call_args_list if call.args[2] == root) == walks


def test_a_gang_of_exactly_the_free_nodes_is_allocated() -> None:
    """The bound counts the nodes whose cores are all free: one more than those is refused, exactly those fit."""
    engine = _fragmented(200)
    for jobid in range(2, 201):  # the pods of every node but the first end
        engine.cancel(jobid)
    for count, fits in ((200, False), (199, True)):
        gang = dataclasses.replace(jobspec_of([slot(count, 4)]), duration=500)
        assert _bounded(engine, gang, at=10) == (not fits)
        assert engine.match(MatchOp.ALLOCATE, gang, now=10).matched == fits


def test_a_count_stopped_part_way_is_not_kept() -> None:
    """1,100 free nodes (spans of spans of nodes): a gang of 2 is counted only as far as the first block, which
    says nothing of the other nodes; a gang of 1,000 after it is counted through them all, and fits."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(1100)]), policy="lonode")
    assert engine.match(MatchOp.SATISFIABILITY, jobspec_of([slot(1, 1)])).matched  # (a walk lays the root out)
    for count in (2, 1000):
        gang = dataclasses.replace(jobspec_of([slot(count, 4)]), duration=500)
        assert not _bounded(engine, gang, at=0)
        result = engine.match(MatchOp.ALLOCATE, gang)
        assert result.matched
        engine.cancel(result.jobid)
    assert len(engine.schedule.view.layouts[engine.schedule.view.root].fps) == 2


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize(("policy", "first", "last"), [("lonode", "n0", "n15"), ("hinode", "n9984", "n9999")])
def test_a_gang_of_whole_nodes_on_a_wide_root_stops_once_it_has_its_nodes(policy: str, first: str, last: str) -> None:
    """10,000 free nodes: a gang of 16 whole nodes under a node-centric policy takes the 16 first (or last) nodes
    after visiting a block or two of them, not thousands (the early stop of ``slot(N)`` of unit leaves, see
    :mod:`kubeflux.match.ranked`, holds for slots of many cores)."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(10_000)]), policy=policy)
    assert engine.match(MatchOp.SATISFIABILITY, jobspec_of([slot(1, 1)])).matched  # (a walk lays the root out)
    gang = dataclasses.replace(jobspec_of([slot(16, 4)]), duration=500)
    with mock.patch.object(
        traverser.Traverser, "_visit_child", autospec=True, side_effect=traverser.Traverser._visit_child
    ) as visit:
        result = engine.match(MatchOp.ALLOCATE, gang, now=10)
    assert result.matched and f"{first}[" in result.resources and f"{last}[" in result.resources
    assert visit.call_count < 100


@pytest.mark.parametrize(
    ("resources", "bounded"),
    [
        ([slot(3, 4)], True),
        ([slot(3, 4, gpus=1)], True),
        ([slot(0, 4)], False),
        ([slot(2, 4), slot(1, 1)], False),
        ([{"type": "node", "count": 1, "with": [slot(1, 1)]}], False),
        (
            [{"type": "slot", "count": 2, "label": "task", "exclusive": False, "with": [{"type": "core", "count": 1}]}],
            False,
        ),
    ],
)
def test_the_bound_applies_to_one_slot_request_of_leaf_elements(
    resources: list[dict[str, object]], bounded: bool
) -> None:
    engine = Engine(build_graph([NodeSpec("n0", cores=4)]))
    requests = engine._working_copy(jobspec_of(resources)).requests
    assert (slotbound.slot_shape(requests) is not None) == bounded


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
def test_a_reservation_walk_skips_the_blocks_of_nodes_the_bound_counted_full() -> None:
    """320 nodes of 4 cores (ten blocks of 32) with a core taken on each: until 5,000 s on most, until 1,100 s on
    n230 (alone in its block) and from 1,200 s one by one on the block of n256. A gang of 4 whole nodes is reserved
    at 1,202 s on n230 and n256-n258, as the plain walk reserves it; the walk that finds them visits the two blocks
    where the bound counted a node, not the seven before them that it counted full."""
    ends = [5000] * 320
    ends[230] = 1100
    for i in range(256, 288):
        ends[i] = 1200 + i - 256
    gang = dataclasses.replace(jobspec_of([slot(4, 4)]), duration=500)
    answers = []
    for skip in (True, False):
        engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(320)]), policy="lonode")
        for i, node in enumerate(engine.graph.by_type["node"]):
            core = engine.schedule.view.children(node)[0][1]
            assert engine.update_leaves(i + 1, [core], duration=ends[i]).matched
        assert engine.match(MatchOp.SATISFIABILITY, jobspec_of([slot(1, 1)])).matched  # (a walk lays the root out)
        nodes = set(engine.graph.by_type["node"])
        with (
            mock.patch.object(wide, "empty_block", slotbound.empty_block if skip else lambda *_: False),
            mock.patch.object(
                traverser.Traverser, "_evaluate", autospec=True, side_effect=traverser.Traverser._evaluate
            ) as evaluate,
        ):
            result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, gang, now=10)
        answers.append((result.matched, result.at, result.resources))
        visited = sum(1 for call in evaluate.call_args_list if call.args[2] in nodes)
        if skip:
            chosen = [line.strip("- ").split("[")[0] for line in result.resources.splitlines() if "---n" in line]
            assert (result.at, chosen) == (1202, ["n230", "n256", "n257", "n258"])
            assert visited <= 320 + 2 * 32  # the walk at now (every node), then two blocks
        else:
            assert visited >= 320 + 9 * 32
    assert answers[0] == answers[1]
