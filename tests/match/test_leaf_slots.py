"""A slot made of a vertex's own leaves (a pod's ``node → slot → core(k)`` on a node whose cores sit right under it)
is cut in one loop, a node that chooses its own slot makes only the slots it takes, and a vertex whose children
are all leaves of the requested type (a socket's cores) is explored in one loop: every answer, error, visit count
and schedule is the one the generic core-by-core walk gives."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec, jobspec_from_yaml
from kubeflux.match import slots
from kubeflux.match.engine import Engine, EngineError, JobState, MatchOp
from kubeflux.match.traverser import Traverser
from kubeflux.resources import NodeSpec, Status, build_graph
from tests.match._helpers import schedule

_OPS = {
    "alloc": MatchOp.ALLOCATE,
    "reserve": MatchOp.ALLOCATE_ORELSE_RESERVE,
    "satisfy": MatchOp.ALLOCATE_WITH_SATISFIABILITY,
}


def _job(resources: str, duration: int = 600) -> Jobspec:
    return jobspec_from_yaml(
        f"version: 9999\nresources: {resources}\nattributes: {{system: {{duration: {duration}}}}}\n"
        "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


def _pod(cores: int, *, extra: str = "", duration: int = 600) -> Jobspec:
    """The scheduler's pod: one node, one slot of ``cores`` cores (and ``extra`` elements)."""
    return _job(
        f"[{{type: node, count: 1, with: [{{type: slot, count: 1, label: default, "
        f"with: [{{type: core, count: {cores}}}{extra}]}}]}}]",
        duration,
    )


JOBS = [
    _pod(1),
    _pod(1, duration=100),
    _pod(2),
    _pod(3, duration=300),
    _pod(1, extra=", {type: gpu, count: 1}"),
    _job("[{type: slot, count: 5, label: default, with: [{type: core, count: 1}]}]"),  # a gang: slots go up
    _job("[{type: node, count: 2, with: [{type: slot, count: 1, label: default, with: [{type: core, count: 2}]}]}]"),
    _job(  # the node takes 1 to 3 slots, as many as it has
        "[{type: node, count: 1, with: [{type: slot, count: {min: 1, max: 3, operator: '+', operand: 1}, "
        "label: default, with: [{type: core, count: 1}]}]}]"
    ),
    _job(  # a socket's cores under a slot above it (on n4): the socket explores its leaves in one loop
        "[{type: node, count: 1, with: [{type: slot, count: 1, label: default, "
        "with: [{type: socket, count: 1, with: [{type: core, count: 2}]}]}]}]"
    ),
    _job("[{type: socket, count: 1, with: [{type: core, count: 3, exclusive: false}]}]"),
    _job(  # cores asked shared below a node asked whole: an error once a free core is reached
        "[{type: node, count: 1, exclusive: true, with: [{type: socket, count: 1, "
        "with: [{type: core, count: 1, exclusive: false}]}]}]"
    ),
    _job("[{type: core, count: 2}]"),  # cores with no slot: each vertex passes its candidates up
    _job(  # a slot's cores are exclusive: asking them shared is an error once a free core is reached
        "[{type: node, count: 1, with: [{type: slot, count: 1, label: default, "
        "with: [{type: core, count: 1, exclusive: false}]}]}]"
    ),
]


def _engine(policy: str, tied_ids: bool, *, socketed: bool = True) -> Engine:
    """Five nodes of 20 cores right under the node (one with gpus and memory; the last with 2 sockets of 10 cores,
    unless not ``socketed``); with ``tied_ids`` each node's cores have ids 0-2 over and over, so its slots tie, and
    more than 16 of them (where ``std::sort`` stops being an insertion sort, which keeps ties in order)."""
    specs = [NodeSpec(f"n{i}", cores=20) for i in range(3)]
    specs.append(NodeSpec("n3", cores=20, gpus=2, memory=4 * 2**30))
    specs.append(NodeSpec("n4", cores=20, sockets=2 if socketed else 0))
    graph = build_graph(specs)
    if tied_ids:
        for vertex in graph.vertices:
            if vertex.type == "core":
                vertex.id %= 3
    return Engine(graph, policy=policy)


def _step(subject: Engine, kind: str, number: int) -> list[object]:
    live = [info.jobid for info in subject.jobs.values() if info.state != JobState.CANCELED]
    try:
        if kind in _OPS:
            result = subject.match(_OPS[kind], JOBS[number % len(JOBS)])
            return [f"{result.at} {result.errno} {result.resources}"]
        if kind == "cancel" and live:
            subject.cancel(live[number % len(live)])
            return [(subject.state.preorder, subject.state.postorder)]
        if kind == "partial" and live:
            rank = json.dumps({"execution": {"R_lite": [{"rank": str(number % 5), "children": {}}]}})
            return [subject.partial_cancel(live[number % len(live)], rank)]
        if kind == "find":
            return [subject.find("sched-now=allocated")]
        if kind in ("down", "up"):
            subject.set_status(f"/cluster0/n{number % 5}", Status.DOWN if kind == "down" else Status.UP)
        if kind == "core":
            node, core = number % 5, number // 5 % 20  # n0..n3 hold their cores directly, n4 in sockets of 10
            socket = f"socket{core // 10}/" if node == 4 and subject.graph.vertex_at("/cluster0/n4/socket0") else ""
            subject.set_status(f"/cluster0/n{node}/{socket}core{core}", Status.DOWN if number % 3 else Status.UP)
    except EngineError as error:
        return [str(error)]
    return []


def _run(policy: str, tied_ids: bool, steps: list[tuple[str, int]], loops: bool) -> list[object]:
    """What a user sees of ``steps``, with the one-loop paths (``loops``) or the walk visiting leaf by leaf."""
    with mock.patch.object(Traverser, "leaf_slots", loops), mock.patch.object(Traverser, "leaf_batches", loops):
        subject = _engine(policy, tied_ids)
        seen: list[object] = []
        for kind, number in steps:
            seen += _step(subject, kind, number)
        seen.append(schedule(subject.schedule.view))
        return seen


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=120, deadline=None)
@given(
    policy=st.sampled_from(["low", "high", "lonode", "hinode", "lonodex", "hinodex"]),
    tied_ids=st.booleans(),
    steps=st.lists(
        st.tuples(
            st.sampled_from(
                ["alloc", "alloc", "alloc", "reserve", "satisfy", "cancel", "partial", "find", "down", "up", "core"]
            ),
            st.integers(0, 999),
        ),
        max_size=24,
    ),
)
def test_slots_and_leaves_in_one_loop_answer_as_the_core_by_core_walk(
    policy: str, tied_ids: bool, steps: list[tuple[str, int]]
) -> None:
    """Answers (errors included), cancel visit counts, releases, finds and the final schedule are the same when
    slots of a node's cores are cut in one loop and a socket's cores are explored in one loop (under the scoring
    policies, as under ``first``) as when the walk visits each core."""
    assert _run(policy, tied_ids, steps, loops=True) == _run(policy, tied_ids, steps, loops=False)


def _taken(policy: str, tied_ids: bool, jobs: int) -> list[int]:
    """How many slots each evaluation of a node offered, over ``jobs`` one-core pods."""
    offered: list[int] = []
    take = slots._take_slots

    def spy(candidates: list[Any], count: int, label: str) -> Any:
        slots = take(candidates, count, label)
        offered.append(len(slots))
        return slots

    subject = _engine(policy, tied_ids, socketed=False)
    with mock.patch.object(slots, "_take_slots", spy):
        for _ in range(jobs):
            assert subject.match(MatchOp.ALLOCATE, JOBS[0]).matched
    return offered


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
def test_a_pods_node_offers_only_the_slot_it_takes_unless_ids_tie() -> None:
    """Each node a one-core pod looks at makes one slot (the core it would take), not one per free core; where
    core ids tie within the node, which core wins depends on the full sort, so all of them are made. (A socket's
    slots, which its node chooses among, are all made: see the differential test.)"""
    assert set(_taken("lonode", False, 8)) == {1}
    assert max(_taken("lonode", True, 8)) > 1
