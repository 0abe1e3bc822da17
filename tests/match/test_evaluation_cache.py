"""The matcher's shortcuts never change an answer.

Each non-leaf vertex caches its evaluation and a best-k choice among many candidates skips the full sort
(merging ranked lists, or replaying libstdc++'s introsort with array operations). Random sequences of
allocate / reserve / satisfiability / cancel / set-status must give byte-identical output with the shortcuts
on and off, under every policy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec, jobspec_from_dict, load_jobspec
from kubeflux.match import evaluation, scoring, stdsort, traverser, view, wide
from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.policy import MatchPolicy, parse_policy
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.graph import Status
from kubeflux.resources.grug import read_grug
from tests.match._helpers import BENCH, bench_graph, node_cores_job
from tests.shared import SHARED

DATA = SHARED / "conformance" / "fluxion" / "data" / "resource"
GRAPHS = [DATA / "grugs" / "tiny.graphml", DATA / "grugs" / "small.graphml"]
JOBSPECS = sorted((DATA / "jobspecs" / "basics").glob("test0*.yaml"))
POLICIES = ["first", "low", "high", "lonode", "hinode", "lonodex", "hinodex", "firstnodex"]
DURATIONS = [600, 3600, 5000]
WAITS = [600, 1400, 3000]
"""Steps of the clock between matches: windows then start and end where earlier spans start and end."""
"""Different lengths, so that reservations land at different times."""
OPS = [MatchOp.ALLOCATE, MatchOp.ALLOCATE_ORELSE_RESERVE, MatchOp.ALLOCATE_WITH_SATISFIABILITY]

pytestmark = pytest.mark.skipif(not JOBSPECS, reason="the shared Fluxion corpus is not checked out")

Step = tuple[str, int, int]


def _jobspecs() -> list[Jobspec]:
    return [load_jobspec(path) for path in JOBSPECS]


def _run(graph_path: Path, policy: str, steps: list[Step], *, shortcuts: bool) -> list[str]:
    cache = evaluation.CACHE_PER_VERTEX if shortcuts else 0
    partial = 2 if shortcuts else 10**9
    with (
        mock.patch.object(evaluation, "CACHE_PER_VERTEX", cache),
        mock.patch.object(traverser, "CACHE_PER_VERTEX", cache),  # (the name the vertex cache reads)
        mock.patch.object(scoring, "PARTIAL_MIN", partial),
        mock.patch.object(scoring, "RANKED_MAX", 4 if shortcuts else 10**9),
    ):
        engine = Engine(read_grug(graph_path), policy=policy)
        specs = _jobspecs()
        nodes = [engine.graph.vertices[uid].paths["containment"] for uid in engine.graph.by_type.get("node", [])]
        transcript = []
        live: list[int] = []
        now = 0
        for kind, a, b in steps:
            if kind == "wait":
                now += WAITS[b % len(WAITS)]
            elif kind == "cancel" and live:
                jobid = live.pop(a % len(live))
                engine.cancel(jobid)
                transcript.append(f"cancel {jobid}")
            elif kind == "status" and nodes:
                status = Status.DOWN if b % 2 else Status.UP
                try:
                    engine.set_status(nodes[a % len(nodes)], status)
                except EngineError as exc:
                    transcript.append(str(exc))
            else:
                op = OPS[b % len(OPS)]
                spec = dataclasses.replace(specs[a % len(specs)], duration=DURATIONS[(a + b) % len(DURATIONS)])
                result = engine.match(op, spec, now=now)
                if result.matched:
                    live.append(result.jobid)
                transcript.append(f"{op} {result.matched} {result.at} {result.errno}\n{result.resources}")
        return transcript


steps = st.lists(
    st.tuples(
        st.sampled_from(["match", "match", "match", "cancel", "status", "wait"]), st.integers(0, 99), st.integers(0, 9)
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(graph=st.sampled_from(GRAPHS), policy=st.sampled_from(POLICIES), steps=steps)
def test_shortcuts_give_the_same_matches(graph: Path, policy: str, steps: list[Step]) -> None:
    assert _run(graph, policy, steps, shortcuts=True) == _run(graph, policy, steps, shortcuts=False)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(0, 12), min_size=1, max_size=300), data=st.data())
def test_vectorised_introsort_leaves_the_same_first_positions(keys: list[int], data: st.DataObject) -> None:
    m = data.draw(st.integers(1, len(keys)))
    order = list(range(len(keys)))
    stdsort._introsort(order, keys)
    first = stdsort.first_positions(np.array(keys, dtype=np.int64), m)
    if first is not None:
        assert first.tolist() == order[:m]


@pytest.mark.parametrize("policy", ["low", "high", "lonode"])
def test_ties_among_many_candidates_pick_what_the_full_sort_picks(tmp_path: Path, policy: str) -> None:
    """Under ``low``/``high`` every node's core 0 ties with every other node's: the pick follows introsort."""
    graph = bench_graph(tmp_path, racks=2, nodes_per_rack=8)
    steps: list[Step] = [("match", 0, 0)] * 40 + [("cancel", 7, 0)] * 5 + [("match", 0, 3)] * 10
    specs = [load_jobspec(BENCH / "a_core1.yaml")]
    with mock.patch(f"{__name__}._jobspecs", return_value=specs):
        assert _run(graph, policy, steps, shortcuts=True) == _run(graph, policy, steps, shortcuts=False)


@pytest.mark.parametrize("policy", ["lonode", "first"])
def test_reservations_follow_each_node_freeing_up(tmp_path: Path, policy: str) -> None:
    """Nodes busy until 100, 200, ... 1600: reservations land at many different times, on nodes whose subtrees
    did not change between the searches (their cached evaluations were made for other windows)."""
    graph = bench_graph(tmp_path, racks=2, nodes_per_rack=8)
    node = load_jobspec(BENCH / "d_1n_64c.yaml")

    def run(shortcuts: bool) -> list[tuple[int, str]]:
        cache = evaluation.CACHE_PER_VERTEX if shortcuts else 0
        with (
            mock.patch.object(evaluation, "CACHE_PER_VERTEX", cache),
            mock.patch.object(traverser, "CACHE_PER_VERTEX", cache),
        ):
            engine = Engine(read_grug(graph), policy=policy)
            for hundreds in range(1, 17):
                assert engine.match(MatchOp.ALLOCATE, dataclasses.replace(node, duration=100 * hundreds)).matched
            short = dataclasses.replace(node, duration=50)
            results = [engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, short) for _ in range(16)]
        return [(result.at, result.resources) for result in results]

    reserved = run(shortcuts=True)
    assert len({at for at, _ in reserved}) > 5
    assert reserved == run(shortcuts=False)


@settings(max_examples=25, deadline=None)
@given(
    policy=st.sampled_from(["low", "high", "lonode", "hinode"]),
    steps=st.lists(
        st.tuples(st.sampled_from(["alloc", "alloc", "reserve", "cancel", "down", "up"]), st.integers(0, 999)),
        max_size=40,
    ),
)
def test_wide_vertices_reuse_blocks_of_children_exactly(policy: str, steps: list[tuple[str, int]]) -> None:
    """A cluster of 80 nodes right under the root is explored through spans (blocks of 4 here, so three levels);
    each span's candidates are reused while its children are unchanged. Same answers as without any reuse."""
    pod = jobspec_from_dict(
        {
            "version": 1,
            "resources": [{"type": "slot", "count": 1, "label": "pod", "with": [{"type": "core", "count": 2}]}],
            "tasks": [{"command": ["app"], "slot": "pod", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": 600}},
        }
    )

    def run(shortcuts: bool) -> list[str]:
        cache = evaluation.CACHE_PER_VERTEX if shortcuts else 0
        with (
            mock.patch.object(evaluation, "CACHE_PER_VERTEX", cache),
            mock.patch.object(traverser, "CACHE_PER_VERTEX", cache),
            mock.patch.object(traverser, "BLOCK", 4 if shortcuts else traverser.BLOCK),
            mock.patch.object(wide, "BLOCK", 4 if shortcuts else wide.BLOCK),
            mock.patch.object(view, "BLOCK", 4 if shortcuts else view.BLOCK),
            mock.patch.object(scoring, "RANKED_MAX", 16 if shortcuts else 10**9),
        ):
            engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(80)]), policy=policy)
            live: list[int] = []
            out = []
            for kind, number in steps:
                path = f"/cluster0/n{number % 80}"
                if kind == "cancel" and live:
                    engine.cancel(live.pop(number % len(live)))
                elif kind in ("down", "up"):
                    engine.set_status(path, Status.DOWN if kind == "down" else Status.UP)
                elif kind in ("alloc", "reserve"):
                    op = MatchOp.ALLOCATE if kind == "alloc" else MatchOp.ALLOCATE_ORELSE_RESERVE
                    result = engine.match(op, pod)
                    if result.matched:
                        live.append(result.jobid)
                    out.append(f"{result.at} {result.resources}")
            return out

    assert run(shortcuts=True) == run(shortcuts=False)


def test_vectorised_introsort_handles_a_large_tied_array_without_falling_back() -> None:
    keys = [(i * 7919) % 13 for i in range(10_000)]
    order = list(range(len(keys)))
    stdsort._introsort(order, keys)
    first = stdsort.first_positions(np.array(keys, dtype=np.int64), 50)
    assert first is not None
    assert first.tolist() == order[:50]


def test_a_policy_switched_between_matches_does_not_reuse_the_other_policys_choices() -> None:
    """The scheduler switches the policy per pod; evaluations cached under one must not answer for another."""
    job = node_cores_job()

    def hinode_after(warm: bool) -> str:
        engine = Engine(build_graph([NodeSpec(f"node{i}", cores=4) for i in range(3)]), policy="lonode")
        for _ in range(2 if warm else 0):
            engine.cancel(engine.match(MatchOp.ALLOCATE, job).jobid)
        return engine.match(MatchOp.ALLOCATE, job, policy=MatchPolicy(parse_policy("hinode"))).resources

    assert hinode_after(warm=True) == hinode_after(warm=False)


def _reserved_from_100_after_a_fit_at_0() -> Engine:
    """Two one-core nodes, each reserved during [100, 200), after a 100 s match at 0 fitted (its evaluations
    are cached) and was cancelled."""
    job = node_cores_job(duration=100)
    engine = Engine(build_graph([NodeSpec(f"node{i}", cores=1) for i in range(2)]), policy="lonode")
    running = [engine.match(MatchOp.ALLOCATE, job, now=0).jobid for _ in range(2)]
    assert all(engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, job, now=0).at == 100 for _ in range(2))
    for jobid in running:
        engine.cancel(jobid)
    fits = engine.match(MatchOp.ALLOCATE, job, now=0)
    assert fits.matched
    engine.cancel(fits.jobid)
    return engine


def test_a_window_moved_onto_a_span_that_starts_where_the_old_window_ended_is_evaluated_again() -> None:
    """The same match at 50 must not reuse the answer at 0: its window now reaches the reservations."""
    engine = _reserved_from_100_after_a_fit_at_0()
    assert not engine.match(MatchOp.ALLOCATE, node_cores_job(duration=100), now=50).matched


def test_a_longer_window_that_reaches_a_span_is_evaluated_again() -> None:
    """Evaluations are shared between windows of different lengths that meet the same spans; one reaching
    further, into a reservation, must not reuse the shorter window's answer."""
    engine = _reserved_from_100_after_a_fit_at_0()
    assert not engine.match(MatchOp.ALLOCATE, node_cores_job(duration=150), now=0).matched
    assert engine.match(MatchOp.ALLOCATE, node_cores_job(duration=100), now=0).matched
