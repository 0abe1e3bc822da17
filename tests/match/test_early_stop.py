"""Two shortcuts of a wide root never change an answer.

* **Early stop**: under a scoring policy, a request for exactly ``k`` nodes takes the ``k`` qualifying nodes that
  come first in the policy's order, so the walk of the root's children stops there (``wide.early_count``).
* **Excluded nodes**: a scheduler passes the nodes a pod may not use as ``excluded`` instead of marking them down;
  the match must be exactly the one it would be with those nodes down.

Random sequences of matches (every operation), cancels, status changes and clock steps on flat clusters wide
enough for the block walk (more than 64 nodes, of uneven sizes, with and without sockets and gpus), under every
policy, give byte-identical transcripts with and without each shortcut.
"""

from __future__ import annotations

import dataclasses
from unittest import mock

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec
from kubeflux.match import evaluation, traverser, wide
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.graph import Status
from tests.match._wide import DURATIONS, WAITS, Step, jobspec_of, slot

POLICIES = ["first", "low", "high", "lonode", "hinode", "lonodex", "hinodex", "firstnodex", "variation"]
OPS = [
    MatchOp.ALLOCATE,
    MatchOp.ALLOCATE_ORELSE_RESERVE,
    MatchOp.ALLOCATE_WITH_SATISFIABILITY,
    MatchOp.SATISFIABILITY,
]
RANGE = {"min": 1, "max": 3, "operator": "+", "operand": 1}
"""A node count that depends on how many qualify: the walk must see them all."""


def _jobspecs(sockets: bool) -> list[Jobspec]:
    below = (lambda slot: [{"type": "socket", "count": 1, "with": [slot]}]) if sockets else (lambda slot: [slot])
    return [jobspec_of([{"type": "node", "count": 1, "with": below(slot(1, cores))}]) for cores in (1, 2, 4, 8)] + [
        jobspec_of([{"type": "node", "count": 2, "with": below(slot(1, 3))}]),
        jobspec_of([{"type": "node", "count": 1, "exclusive": True, "with": below(slot(1, 2))}]),
        jobspec_of([{"type": "node", "count": RANGE, "with": below(slot(1, 2))}]),
        jobspec_of(
            [{"type": "cluster", "count": 1, "with": [{"type": "node", "count": 1, "with": below(slot(1, 4))}]}]
        ),
        jobspec_of([slot(3, 2)]),
        jobspec_of([{"type": "node", "count": 1, "with": below(slot(1, 1, gpus=1))}]),
    ]


def _graph(nodes: int, sockets: bool, small: bool = False) -> list[NodeSpec]:
    """``nodes`` nodes of 2, 4 and 8 cores, some with gpus; ``small``: all of 2 cores (a cluster soon full)."""
    return [
        NodeSpec(
            f"n{i}",
            cores=2 if small else (2, 4, 8)[i % 3],
            gpus=2 if i % 5 == 0 else 0,
            sockets=2 if sockets else 0,
        )
        for i in range(nodes)
    ]


class _Masked:
    """Excluded uids that also answer by a vectorised mask, as the scheduler's do."""

    def __init__(self, uids: set[int], size: int) -> None:
        self.uids = uids
        self.mask = np.zeros(size, dtype=bool)
        self.mask[list(uids)] = True

    def __contains__(self, uid: object) -> bool:
        return uid in self.uids

    def __len__(self) -> int:
        return len(self.uids)

    def allowed(self, uids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return ~self.mask[uids]


def _run(specs: list[NodeSpec], policy: str, steps: list[Step], *, early: bool, exclude: bool) -> list[str]:
    """The transcript of ``steps``; ``exclude``: hidden nodes are passed as ``excluded`` (else marked down for
    the match and up again after it); not ``early``: the plain walk, without early stops or cached evaluations
    (a span of the root's children reused for a window it was not made for would show too)."""
    patches = (
        []
        if early
        else [
            mock.patch.object(wide, "early_count", return_value=(0, None)),
            mock.patch.object(evaluation, "CACHE_PER_VERTEX", 0),  # the plain walk: nothing cached either
            mock.patch.object(traverser, "CACHE_PER_VERTEX", 0),
        ]
    )
    for patch in patches:
        patch.start()
    try:
        engine = Engine(build_graph(specs), policy=policy)
        jobspecs = _jobspecs(any(spec.sockets for spec in specs))
        uids = list(engine.graph.by_type["node"])
        paths = [engine.graph.vertices[uid].paths["containment"] for uid in uids]
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
            elif kind == "probe":  # matched and at once cancelled: the graph is as it was
                op = OPS[b % len(OPS)]
                result = engine.match(op, jobspecs[a % len(jobspecs)], now=now)
                if result.matched and op != MatchOp.SATISFIABILITY:
                    engine.cancel(result.jobid)
                transcript.append(f"probe {op} {result.matched} {result.at} {result.errno}\n{result.resources}")
            elif kind == "match":
                op = OPS[b % len(OPS)]
                spec = dataclasses.replace(jobspecs[a % len(jobspecs)], duration=DURATIONS[(a + b) % 3])
                hidden = {uids[i] for i in range(len(uids)) if (i * 7 + a + b) % 5 < (a % 4)}
                if a % 7 == 6:  # all but one node: a request for two may not even be tried
                    hidden = set(uids) - {uids[b]}
                if exclude:
                    masked = _Masked(hidden, len(engine.graph.vertices)) if b >= 5 else hidden
                    result = engine.match(op, spec, now=now, excluded=masked)
                else:
                    marked = [uid for uid in hidden if engine.graph.vertices[uid].status == Status.UP]
                    for uid in marked:
                        engine.set_status(engine.graph.vertices[uid].paths["containment"], Status.DOWN)
                    result = engine.match(op, spec, now=now)
                    for uid in marked:
                        engine.set_status(engine.graph.vertices[uid].paths["containment"], Status.UP)
                if result.matched and op != MatchOp.SATISFIABILITY:
                    live.append(result.jobid)
                transcript.append(f"{op} {result.matched} {result.at} {result.errno}\n{result.resources}")
        return transcript
    finally:
        for patch in patches:
            patch.stop()


steps = st.lists(
    st.tuples(
        st.sampled_from(["match", "match", "match", "match", "cancel", "status", "wait"]),
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
def test_early_stop_and_excluded_nodes_give_the_same_matches(
    nodes: int, sockets: bool, small: bool, policy: str, steps: list[Step]
) -> None:
    specs = _graph(nodes, sockets, small)
    reference = _run(specs, policy, steps, early=False, exclude=False)
    assert _run(specs, policy, steps, early=True, exclude=False) == reference
    assert _run(specs, policy, steps, early=True, exclude=True) == reference


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
def test_a_one_node_request_on_a_wide_root_stops_at_the_first_node_that_qualifies() -> None:
    """10,000 nodes: a one-core pod under ``lonode`` visits a handful of nodes, not thousands (counted visits)."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(10_000)]), policy="lonode")
    spec = _jobspecs(False)[0]
    engine.match(MatchOp.ALLOCATE, spec)  # the first walk lays the root out
    visits = mock.patch.object(
        traverser.Traverser, "_visit_child", autospec=True, side_effect=traverser.Traverser._visit_child
    )
    with visits as visit:
        result = engine.match(MatchOp.ALLOCATE, spec, now=10)
    assert result.matched and "n0" in result.resources
    assert visit.call_count < 100
    excluded = set(engine.graph.by_type["node"][:5000])
    with visits as visit:
        result = engine.match(MatchOp.ALLOCATE, spec, now=20, excluded=excluded)
    assert result.matched and "n5000" in result.resources
    assert visit.call_count < 100


def test_the_prime_keeps_no_node_s_list_of_leaves_and_a_match_makes_those_it_descends_into() -> None:
    """Under a packing policy a match descends into few nodes: the prime keeps only the child lists of vertices
    with children below (here the root's), and each match adds the lists of the nodes it went into."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(2_000)]), policy="lonode")
    view, nodes = engine.schedule.view, engine.graph.by_type["node"]
    assert not set(view._kids) & set(nodes)
    spec = _jobspecs(False)[0]
    for step in range(6):  # one-core pods: four fill a node
        assert engine.match(MatchOp.ALLOCATE, spec, now=step).matched
    listed = set(view._kids) & set(nodes)
    assert nodes[0] in listed and nodes[1] in listed
    assert len(listed) < 100


@pytest.mark.parametrize("width", [1, 6, 7, 8, 20, 21, 100, 1500])
@pytest.mark.parametrize("backwards", [False, True])
def test_allowed_positions_in_runs_are_those_a_plain_scan_gives(width: int, backwards: bool) -> None:
    """A mask asked a run of children at a time (here 7, and the engine's own 512: windows listing more than their
    first few positions) lists the same positions as testing each child."""
    layout = evaluation.Layout(width, [])
    layout.children = [(i, 100 + i) for i in range(width)]
    excluded = {100 + i for i in range(width) if i % 3 == 0}

    class Masked:
        def __contains__(self, uid: object) -> bool:
            return uid in excluded

        def __len__(self) -> int:
            return len(excluded)

        def allowed(self, uids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
            return np.array([uid not in excluded for uid in uids.tolist()], dtype=bool)

    with mock.patch.object(evaluation, "POSITIONS_AT_ONCE", 7):
        runs = list(evaluation.allowed_positions(layout, Masked(), backwards))
    windows = list(evaluation.allowed_positions(layout, Masked(), backwards))
    scan = list(evaluation.allowed_positions(layout, excluded, backwards))
    assert runs == windows == scan == [p for p in (reversed(range(width)) if backwards else range(width)) if p % 3]


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize("policy", ["lonode", "low", "hinode"])
def test_a_span_of_nodes_is_reused_only_for_windows_that_meet_the_same_jobs(policy: str) -> None:
    """Jobs of many lengths on a wide cluster; then the same request, matched and cancelled as the clock moves past
    their ends (each cancel restores the fingerprints, so only the window tells a cached span is stale): every
    answer is the plain walk's."""
    specs = [NodeSpec(f"n{i}", cores=2) for i in range(96)]
    steps: list[Step] = [("match", 0, (i * 7) % 10) for i in range(150)]
    steps += [step for i in range(40) for step in (("wait", 0, i % 3), ("probe", i % 5, 1), ("probe", 4, 0))]
    reference = _run(specs, policy, steps, early=False, exclude=False)
    assert _run(specs, policy, steps, early=True, exclude=False) == reference


@pytest.mark.parametrize("masked", [False, True])
def test_excluding_all_nodes_but_one_answers_a_two_node_request_as_marking_them_down_does(masked: bool) -> None:
    """Too few nodes left up is found before any walk: busy for an allocation, and no such resources at all for an
    allocation that also tests satisfiability (as when the nodes are marked down)."""
    specs = _graph(70, False)
    spec = _jobspecs(False)[4]  # two nodes
    engine, marked = Engine(build_graph(specs), policy="lonode"), Engine(build_graph(specs), policy="lonode")
    uids = list(engine.graph.by_type["node"])
    hidden = set(uids) - {uids[3]}
    for uid in hidden:
        marked.set_status(marked.graph.vertices[uid].paths["containment"], Status.DOWN)
    excluded = _Masked(hidden, len(engine.graph.vertices)) if masked else hidden
    for op in OPS:
        got, want = engine.match(op, spec, excluded=excluded), marked.match(op, spec)
        assert (got.matched, got.errno) == (want.matched, want.errno)
    assert engine.match(MatchOp.ALLOCATE_WITH_SATISFIABILITY, spec, excluded=excluded).errno.name == "ENODEV"


@pytest.mark.parametrize("policy", ["lonode", "high", "first"])
def test_a_reservation_told_it_cannot_start_now_is_the_one_the_walk_at_now_would_have_led_to(policy: str) -> None:
    """``later`` skips the walk at ``now`` of an allocate_orelse_reserve: on a cluster where the job cannot start
    now, the reservation is the same, as is every answer after it."""
    specs = _graph(70, False, small=True)
    fill = 140  # one-core jobs: every core taken, for 600 to 5,000 s

    def reserve(later: bool) -> list[str]:
        engine = Engine(build_graph(specs), policy=policy)
        jobspecs = _jobspecs(False)
        answers = []
        for index in range(fill):
            engine.match(MatchOp.ALLOCATE, dataclasses.replace(jobspecs[0], duration=DURATIONS[index % 3]), now=0)
        for a in (1, 8, 0, 1):
            result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, jobspecs[a], now=10, later=later)
            answers.append(f"{result.matched} {result.at} {result.errno}\n{result.resources}")
        return answers

    with_walk = reserve(later=False)
    assert all(answer.startswith("True ") and " 10 " not in answer.split("\n")[0] for answer in with_walk)
    assert reserve(later=True) == with_walk
