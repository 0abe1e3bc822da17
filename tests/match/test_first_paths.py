"""``first`` on the benchmark's nodes (2 sockets x 32 cores, 4 gpus and memory beside the sockets): the one-loop
paths (a socket's cores chosen or cut into slots without an edge group per core, the node's gpus and memory not
visited when nothing asks for them) answer as the vertex-by-vertex walk does."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec, jobspec_from_yaml, load_jobspec
from kubeflux.match.engine import Engine, JobState, MatchOp
from kubeflux.match.traverser import Traverser
from kubeflux.resources import Status
from kubeflux.resources.grug import read_grug
from tests.match._helpers import BENCH, bench_graph, schedule

OPS = {"alloc": MatchOp.ALLOCATE, "reserve": MatchOp.ALLOCATE_ORELSE_RESERVE}


def _slot_of_cores(cores: int, slots: int = 1) -> Jobspec:
    return jobspec_from_yaml(
        f"version: 9999\nresources: [{{type: slot, count: {slots}, label: default, "
        f"with: [{{type: core, count: {cores}}}]}}]"
        "\nattributes: {system: {duration: 600}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


def _run(graph_path: Path, steps: list[tuple[str, int]], *, one_loop: bool, low_gpu_ids: bool) -> list[object]:
    """What a user sees of ``steps`` (answers, then the schedule), with the one-loop paths on or off; with
    ``low_gpu_ids`` the gpus' ids are below -1, so scores need not be positive and the gpus must be visited."""
    jobs = [load_jobspec(BENCH / f"{spec}.yaml") for spec in ("a_core1", "b_node_excl", "d_1n_64c")]
    jobs += [_slot_of_cores(3), _slot_of_cores(40)]
    with mock.patch.object(Traverser, "leaf_batches", one_loop):
        graph = read_grug(graph_path)
        if low_gpu_ids:
            for uid in graph.by_type["gpu"]:
                graph.vertices[uid].id = -7
        engine = Engine(graph, policy="first")
        assert engine.schedule.view.positive_scores(engine.policy.spec) is not low_gpu_ids
        seen: list[object] = []
        for kind, number in steps:
            live = [info.jobid for info in engine.jobs.values() if info.state != JobState.CANCELED]
            if kind in OPS:
                result = engine.match(OPS[kind], jobs[number % len(jobs)])
                seen.append(f"{result.at} {result.errno} {result.resources}")
            elif kind == "cancel" and live:
                engine.cancel(live[number % len(live)])
            elif kind in ("down", "up"):
                path = f"/bench0/rack0/node{number % 3}"
                if number % 2:
                    path += f"/gpu{number % 4}" if number % 4 else "/socket1"
                engine.set_status(path, Status.DOWN if kind == "down" else Status.UP)
        seen.append(schedule(engine.schedule.view))
        return seen


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=40, deadline=None)
@given(
    low_gpu_ids=st.booleans(),
    steps=st.lists(
        st.tuples(st.sampled_from(["alloc", "alloc", "alloc", "reserve", "cancel", "down", "up"]), st.integers(0, 999)),
        max_size=20,
    ),
)
def test_firsts_one_loop_paths_answer_as_the_walk_vertex_by_vertex(
    tmp_path_factory: Any, low_gpu_ids: bool, steps: list[tuple[str, int]]
) -> None:
    """One core, a whole node, a node reserved, slots of 3 and 40 cores, jobs ending, nodes, sockets and gpus
    going down and up: the same answers and the same schedule with the one-loop paths as without them."""
    graph = bench_graph(tmp_path_factory.mktemp("bench"), racks=1, nodes_per_rack=3)
    one_loop = _run(graph, steps, one_loop=True, low_gpu_ids=low_gpu_ids)
    assert one_loop == _run(graph, steps, one_loop=False, low_gpu_ids=low_gpu_ids)


def test_a_fresh_nodes_cores_are_taken_highest_first_and_written_in_edge_order(tmp_path: Path) -> None:
    """The first core of a fresh graph is the last core of its last socket (Fluxion's ``first`` explores the highest
    uniq_id first), and a whole node lists its cores in edge order, socket by socket."""
    engine = Engine(read_grug(bench_graph(tmp_path, racks=1, nodes_per_rack=2)), policy="first")
    one = engine.match(MatchOp.ALLOCATE, load_jobspec(BENCH / "a_core1.yaml"))
    assert one.matched and "node1[1:s]" in one.resources and "core63[1:x]" in one.resources
    whole = engine.match(MatchOp.ALLOCATE, load_jobspec(BENCH / "b_node_excl.yaml"))
    lines = whole.resources.splitlines()
    cores = [line.strip().lstrip("-") for line in lines if "core" in line]
    assert cores[:3] == ["core0[1:x]", "core1[1:x]", "core2[1:x]"] and len(cores) == 64
    assert "node0[1:x]" in whole.resources and "gpu3[1:x]" in whole.resources


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=25, deadline=None)
@given(
    shapes=st.lists(st.tuples(st.integers(1, 9), st.integers(1, 40)), min_size=1, max_size=6),
    cancel_first=st.booleans(),
)
def test_firsts_several_slots_of_fresh_sockets_answer_as_the_walk_vertex_by_vertex(
    tmp_path_factory: Any, shapes: list[tuple[int, int]], cancel_first: bool
) -> None:
    """Several slots of k cores on fresh sockets (the one-loop path counts their shares over a socket's cores, then
    stops), one request after another, the first job possibly ended before the next: the same answers and the
    same schedule with the one-loop paths as without them."""
    path = bench_graph(tmp_path_factory.mktemp("bench"), racks=1, nodes_per_rack=3)

    def run(one_loop: bool) -> list[object]:
        with mock.patch.object(Traverser, "leaf_batches", one_loop):
            engine = Engine(read_grug(path), policy="first")
            seen: list[object] = []
            for number, (slots, cores) in enumerate(shapes):
                result = engine.match(MatchOp.ALLOCATE, _slot_of_cores(cores, slots))
                seen.append(f"{result.errno} {result.resources}")
                if number == 0 and cancel_first and result.matched:
                    engine.cancel(result.jobid)
            seen.append(schedule(engine.schedule.view))
            return seen

    assert run(True) == run(False)
