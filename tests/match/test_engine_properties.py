"""Property tests of the engine: random allocate / reserve / cancel / partial cancel sequences on small graphs
never over-commit a vertex, and cancelling every job returns the whole schedule to its initial state."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import jobspec_from_yaml, load_jobspec
from kubeflux.match import cancel as cancel_module
from kubeflux.match import engine as engine_module
from kubeflux.match import evaluation as evaluation_module
from kubeflux.match import traverser as traverser_module
from kubeflux.match import update as update_module
from kubeflux.match.engine import Engine, EngineError, JobState, MatchOp
from kubeflux.match.traverser import Traverser
from kubeflux.match.view import ScheduleView
from kubeflux.resources import NodeSpec, Status, build_graph, graph_to_jgf
from kubeflux.resources.grug import read_grug
from tests.match._helpers import BENCH, bench_graph, node_cores_job, schedule, whole_nodes_job

match_op = st.tuples(
    st.just("match"),
    st.sampled_from([MatchOp.ALLOCATE, MatchOp.ALLOCATE_ORELSE_RESERVE]),
    st.sampled_from([whole_nodes_job, partial(node_cores_job, memory=2)]),
    st.integers(1, 3),
    st.integers(1, 4),
    st.sampled_from([10, 25, 100]),
)
cancel_op = st.tuples(st.just("cancel"), st.integers(0, 20))
partial_op = st.tuples(st.just("partial"), st.integers(0, 20), st.integers(1, 7))
operations = st.lists(st.one_of(match_op, match_op, cancel_op, partial_op), max_size=14)


def engine(policy: str, match_format: str = "simple") -> Engine:
    graph = build_graph([NodeSpec(f"node{i}", cores=4, memory=8 * 2**30) for i in range(3)])
    return Engine(graph, policy=policy, prune_filters="ALL:core,ALL:node,ALL:memory", match_format=match_format)


def assert_never_over_committed(traverser: ScheduleView) -> None:
    vertices = traverser.graph.vertices
    for uid, plan in traverser.plans.items():
        assert plan.total == vertices[uid].size
        for time, remaining in plan.points():
            assert 0 <= remaining <= plan.total, f"{vertices[uid].name} at {time}: {remaining} of {plan.total}"
    for uid, subplan in traverser.subplans.items():
        for type in subplan.resource_types:
            for time, remaining in subplan.planner(type).points():
                assert 0 <= remaining <= subplan.resource_total(type), f"{vertices[uid].name} {type} at {time}"


def held_ranks(engine: Engine, jobid: int) -> list[int]:
    graph = engine.graph
    return sorted({graph.vertices[uid].rank for uid, jobs in engine.schedule.view.tags.items() if jobid in jobs} - {-1})


def live_jobs(engine: Engine) -> list[int]:
    return [info.jobid for info in engine.jobs.values() if info.state != JobState.CANCELED]


def release_first_rank(engine: Engine, jobid: int) -> bool:
    """Release what ``jobid`` holds on its lowest broker rank (a partial cancel by R)."""
    ranks = ",".join(map(str, held_ranks(engine, jobid)[:1]))
    return engine.partial_cancel(jobid, json.dumps({"execution": {"R_lite": [{"rank": ranks, "children": {}}]}}))


@settings(max_examples=150, deadline=None)
@given(operations, st.sampled_from(["first", "low", "lonodex"]))
def test_random_schedules_never_over_commit_and_cancel_back_to_pristine(ops: list[Any], policy: str) -> None:
    subject = engine(policy)
    pristine = schedule(subject.schedule.view)
    for op in ops:
        if op[0] == "match":
            _, match, make, count, cores, duration = op
            subject.match(match, make(nodes=count, cores=cores, duration=duration))
        else:
            live = live_jobs(subject)
            if not live:
                continue
            jobid = live[op[1] % len(live)]
            if op[0] == "cancel":
                subject.cancel(jobid)
            elif subject.jobs[jobid].state == JobState.ALLOCATED:
                ranks = held_ranks(subject, jobid)
                chosen = [rank for bit, rank in enumerate(ranks) if op[2] >> bit & 1] or ranks[:1]
                r_lite = [{"rank": ",".join(map(str, chosen)), "children": {}}]
                try:
                    subject.partial_cancel(jobid, json.dumps({"execution": {"R_lite": r_lite}}))
                except EngineError as error:
                    raise AssertionError(f"partial cancel of ranks {chosen} of job {jobid}: {error}") from error
        assert_never_over_committed(subject.schedule.view)
    for info in subject.jobs.values():
        if info.state != JobState.CANCELED:
            subject.cancel(info.jobid)
    assert schedule(subject.schedule.view) == pristine


@settings(max_examples=60, deadline=None)
@given(operations, st.sampled_from(["first", "high", "lonodex"]))
def test_a_replica_fed_by_update_keeps_the_same_schedule(ops: list[Any], policy: str) -> None:
    """Every allocation replayed from its JGF into a second engine (``update``) and released in both the same
    way leaves both with identical planners, filters, checkers and tags."""
    origin, replica = engine(policy, "jgf"), engine(policy)
    for op in ops:
        if op[0] == "match":
            _, match, make, count, cores, duration = op
            result = origin.match(match, make(nodes=count, cores=cores, duration=duration))
            if result.matched:
                replayed = replica.update(
                    result.jobid, result.resources, at=result.at, duration=duration, reserve=result.reserved
                )
                assert replayed.matched, replayed.error
        else:
            live = live_jobs(origin)
            if not live:
                continue
            jobid = live[op[1] % len(live)]
            if op[0] == "cancel":
                origin.cancel(jobid)
                replica.cancel(jobid)
            elif origin.jobs[jobid].state == JobState.ALLOCATED:
                ranks = held_ranks(origin, jobid)
                chosen = [rank for bit, rank in enumerate(ranks) if op[2] >> bit & 1] or ranks[:1]
                r = json.dumps({"execution": {"R_lite": [{"rank": ",".join(map(str, chosen)), "children": {}}]}})
                assert origin.partial_cancel(jobid, r) == replica.partial_cancel(jobid, r)
        assert schedule(replica.schedule.view) == schedule(origin.schedule.view)


@settings(max_examples=60, deadline=None)
@given(
    operations,
    st.lists(st.tuples(st.integers(0, 14), st.integers(0, 3), st.booleans()), max_size=3),
    st.sampled_from(["first", "low"]),
)
def test_removing_nodes_under_jobs_then_cancelling_leaves_the_smaller_graphs_schedule(
    ops: list[Any], removals: list[tuple[int, int, bool]], policy: str
) -> None:
    """Nodes removed (by path or rank) while jobs hold them: no over-commit after, and once every job is
    cancelled the schedule is that of an engine built without those nodes."""
    subject = engine(policy)
    gone: set[int] = set()
    for step, op in enumerate(ops):
        for when, node, by_path in removals:
            if when == step and node % 3 not in gone and len(gone) < 2:
                if by_path:
                    subject.remove_path(f"/cluster0/node{node % 3}")
                else:
                    subject.remove_ranks([node % 3])
                gone.add(node % 3)
        if op[0] == "match":
            _, match, make, count, cores, duration = op
            subject.match(match, make(nodes=count, cores=cores, duration=duration))
        elif op[0] == "cancel":
            live = live_jobs(subject)
            if live:
                subject.cancel(live[op[1] % len(live)])
        assert_never_over_committed(subject.schedule.view)
    for info in subject.jobs.values():
        if info.state != JobState.CANCELED:
            subject.cancel(info.jobid)
    kept = [NodeSpec(f"node{i}", cores=4, memory=8 * 2**30) for i in range(3) if i not in gone]
    smaller = Engine(build_graph(kept), policy=policy, prune_filters="ALL:core,ALL:node,ALL:memory")
    assert schedule(subject.schedule.view) == schedule(smaller.schedule.view)
    assert subject.schedule.view.nodes_up == smaller.schedule.view.nodes_up


@settings(max_examples=25, deadline=None)
@given(
    policy=st.sampled_from(["low", "first", "lonode"]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["alloc", "alloc", "reserve", "cancel", "partial", "remove", "attach"]),
            st.integers(0, 999),
        ),
        max_size=30,
    ),
)
def test_releases_and_graph_changes_keep_cached_answers_exact(policy: str, steps: list[tuple[str, int]]) -> None:
    """On a cluster wide enough for the matcher's block cache, partial cancels, removals and attaches give the
    same answers with the evaluation cache on as with it off."""
    pod = whole_nodes_job(nodes=2, cores=2, duration=600)
    bigger = build_graph([NodeSpec(f"n{i}", cores=4) for i in range(90)])

    def run(shortcuts: bool) -> list[str]:
        cache = evaluation_module.CACHE_PER_VERTEX if shortcuts else 0
        with (
            mock.patch.object(evaluation_module, "CACHE_PER_VERTEX", cache),
            mock.patch.object(traverser_module, "CACHE_PER_VERTEX", cache),  # (the name the vertex cache reads)
        ):
            subject = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(80)]), policy=policy)
            out: list[str] = []
            attached = 0
            for kind, number in steps:
                live = live_jobs(subject)
                try:
                    if kind in ("alloc", "reserve"):
                        op = MatchOp.ALLOCATE if kind == "alloc" else MatchOp.ALLOCATE_ORELSE_RESERVE
                        result = subject.match(op, pod)
                        out.append(f"{result.at} {result.resources}")
                    elif kind == "cancel" and live:
                        subject.cancel(live[number % len(live)])
                    elif kind == "partial" and live:
                        jobid = live[number % len(live)]
                        out.append(f"partial {jobid} {release_first_rank(subject, jobid)}")
                    elif kind == "remove":
                        out.append(f"removed {len(subject.remove_ranks([number % 80]))}")
                    elif kind == "attach" and attached < 10:
                        node = bigger.vertex_at(f"/cluster0/n{80 + attached}")
                        assert node is not None
                        subject.attach(graph_to_jgf(bigger, [0, node.uid, *node.children]))
                        attached += 1
                except EngineError as error:
                    out.append(str(error))
                assert_never_over_committed(subject.schedule.view)
            return out

    assert run(shortcuts=True) == run(shortcuts=False)


@settings(max_examples=40, deadline=None)
@given(
    policy=st.sampled_from(["low", "first"]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["gang", "pods", "reserve", "cancel", "cancel", "partial", "remove"]),
            st.integers(0, 999),
        ),
        max_size=25,
    ),
)
def test_cancel_through_the_jobs_own_vertices_equals_visiting_every_child(
    policy: str, steps: list[tuple[str, int]]
) -> None:
    """A cancel that walks only the job's own children under wide vertices leaves the same schedule,
    fingerprints and slot leaders, and reports the same visit counts, as one that visits every child."""
    jobs = [whole_nodes_job(nodes=2, cores=2, duration=600), node_cores_job(nodes=3, cores=1, duration=300)]

    def run(wide: int) -> list[object]:
        with mock.patch.object(cancel_module, "WIDE_CANCEL", wide):
            subject = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(40)]), policy=policy)
            traverser = subject.schedule.view
            seen: list[object] = []
            for kind, number in steps:
                live = live_jobs(subject)
                try:
                    if kind in ("gang", "pods", "reserve"):
                        op = MatchOp.ALLOCATE_ORELSE_RESERVE if kind == "reserve" else MatchOp.ALLOCATE
                        result = subject.match(op, jobs[number % 2 if kind == "reserve" else kind == "pods"])
                        seen.append(f"{result.at} {result.resources}")
                    elif kind == "cancel" and live:
                        subject.cancel(live[number % len(live)])
                        seen.append((subject.state.preorder, subject.state.postorder))
                    elif kind == "partial" and live:
                        jobid = live[number % len(live)]
                        seen.append(release_first_rank(subject, jobid))
                    elif kind == "remove":
                        seen.append(len(subject.remove_ranks([number % 40])))
                except EngineError as error:
                    seen.append(str(error))
                seen += [schedule(traverser), list(traverser.fp), sorted(subject.state.slot_leader)]
            return seen

    assert run(wide=-(10**9)) == run(wide=10**9)


def test_an_engine_that_forgets_cancelled_jobs_keeps_only_live_ones() -> None:
    subject = Engine(build_graph([NodeSpec(f"node{i}", cores=4) for i in range(3)]), keep_cancelled=False)
    first, second = (subject.match(MatchOp.ALLOCATE, node_cores_job(nodes=1, cores=2)) for _ in range(2))
    subject.cancel(first.jobid)
    r_lite = [{"rank": ",".join(map(str, held_ranks(subject, second.jobid))), "children": {}}]
    assert subject.partial_cancel(second.jobid, json.dumps({"execution": {"R_lite": r_lite}}))
    assert subject.jobs == {} and subject.match_times.count == 2
    with_history = engine("first")
    jobid = with_history.match(MatchOp.ALLOCATE, node_cores_job()).jobid
    with_history.cancel(jobid)
    assert with_history.jobs[jobid].state == JobState.CANCELED


@pytest.mark.pure_engine  # patches REQUESTS_KEPT, a Final constant compiled code inlines
def test_a_scheduler_matching_ever_new_jobspecs_keeps_a_bounded_number_of_request_signatures() -> None:
    """Each pod brings its own jobspec object; the engine keeps the requests of the last few only, and the
    traverser's shape signatures of the dropped ones must go with them."""
    subject = Engine(build_graph([NodeSpec(f"node{i}", cores=4) for i in range(3)]), keep_cancelled=False)
    with mock.patch.object(engine_module, "REQUESTS_KEPT", 4):
        for _ in range(60):
            result = subject.match(MatchOp.ALLOCATE, node_cores_job(nodes=1, cores=1))
            subject.cancel(result.jobid)
    depth = 4  # node -> slot -> core -> nothing: one request list per level
    assert len(subject.traverser.keys._signatures) <= (4 + 1) * depth


def _held(subject: Engine) -> list[str]:
    return sorted(k for k in schedule(subject.schedule.view) if k.startswith(("alloc", "tags", "x ")))


def test_releasing_the_rest_of_a_job_after_its_node_leaves_nothing_behind() -> None:
    """A node released before its cores: releasing the cores then ends the job, and every core is free again."""
    subject = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(2)]))
    traverser = subject.schedule.view
    jobid = subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1, cores=4, duration=600)).jobid
    mine = sorted(uid for uid, jobs in traverser.allocations.items() if jobid in jobs)
    node = next(uid for uid in mine if subject.graph.vertices[uid].type == "node")
    assert subject.release_vertices(jobid, [node]) is False
    assert subject.release_vertices(jobid, [uid for uid in mine if uid != node]) is True
    assert _held(subject) == []
    assert subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2, cores=4, duration=600)).matched


def test_cancelling_a_job_released_in_part_leaves_nothing_behind() -> None:
    subject = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(2)]))
    traverser = subject.schedule.view
    jobid = subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1, cores=4, duration=600)).jobid
    node = next(uid for uid in traverser.job_vertices[jobid] if subject.graph.vertices[uid].type == "node")
    subject.release_vertices(jobid, [node])
    subject.cancel(jobid)
    assert _held(subject) == []


def test_cancel_on_a_containment_dag_releases_a_child_reached_through_its_other_parent() -> None:
    graph = build_graph([NodeSpec("n0", cores=40), NodeSpec("n1", cores=2)])
    n1, core0 = graph.vertex_at("/cluster0/n1"), graph.vertex_at("/cluster0/n0/core0")
    assert n1 is not None and core0 is not None
    graph.add_edge(n1.uid, core0.uid)  # a second containment parent
    subject = Engine(graph, policy="low")
    jobid = subject.match(MatchOp.ALLOCATE, node_cores_job(nodes=1, cores=1, duration=600)).jobid
    assert _held(subject)
    subject.cancel(jobid)
    assert _held(subject) == []


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["gang", "pods", "release", "release", "cancel"]), st.integers(0, 2**16)),
        max_size=20,
    ),
)
def test_releasing_a_jobs_vertices_in_any_pieces_matches_releasing_them_one_piece_at_a_time(
    steps: list[tuple[str, int]],
) -> None:
    """Releases of any subsets of a job's exclusive vertices, then cancels, leave the same schedule and the same
    answers whether a release of everything left is taken as the job's cancel or purged vertex by vertex."""
    jobs = [whole_nodes_job(nodes=2, cores=2, duration=600), node_cores_job(nodes=3, cores=1, duration=300)]

    def run(shortcut: bool) -> list[object]:
        releases_all = update_module._releases_all if shortcut else (lambda *_: False)
        with mock.patch.object(update_module, "_releases_all", releases_all):
            subject = Engine(build_graph([NodeSpec(f"n{i}", cores=4) for i in range(6)]), policy="low")
            traverser = subject.schedule.view
            seen: list[object] = []
            for kind, number in steps:
                live = [info.jobid for info in subject.jobs.values() if info.state == JobState.ALLOCATED]
                if kind in ("gang", "pods"):
                    seen.append(subject.match(MatchOp.ALLOCATE, jobs[kind == "pods"]).resources)
                elif live:
                    jobid = live[number % len(live)]
                    if kind == "cancel":
                        subject.cancel(jobid)
                    else:
                        mine = sorted(
                            u
                            for u, held in traverser.allocations.items()
                            if jobid in held and u in traverser.tags and jobid in traverser.tags[u]
                        )
                        chosen = [u for bit, u in enumerate(mine) if number >> bit & 1] or mine[:1]
                        if chosen:
                            seen.append(subject.release_vertices(jobid, chosen))
                seen.append(schedule(traverser))
            for info in list(subject.jobs.values()):
                if info.state != JobState.CANCELED:
                    subject.cancel(info.jobid)
            seen.append(_held(subject))
            return seen

    with_shortcut = run(shortcut=True)
    assert with_shortcut == run(shortcut=False)
    assert with_shortcut[-1] == []


_MATCH_OPS = {
    "alloc": MatchOp.ALLOCATE,
    "reserve": MatchOp.ALLOCATE_ORELSE_RESERVE,
    "satisfy": MatchOp.ALLOCATE_WITH_SATISFIABILITY,
}


def _step(subject: Engine, jobs: list[Any], kind: str, number: int) -> list[object]:
    """One random step of the differential tests, on nodes ``/cluster0/n0..4``, and what a user sees of it: the
    answer, a cancel's visit counts, a release's outcome, the allocated vertices, or the error."""
    live = live_jobs(subject)
    try:
        if kind in _MATCH_OPS:
            result = subject.match(_MATCH_OPS[kind], jobs[number % len(jobs)])
            return [f"{result.at} {result.errno} {result.resources}"]
        if kind == "cancel" and live:
            subject.cancel(live[number % len(live)])
            return [(subject.state.preorder, subject.state.postorder)]
        if kind == "partial" and live:
            return [release_first_rank(subject, live[number % len(live)])]
        if kind == "find":
            return [subject.find("sched-now=allocated")]
        if kind in ("down", "up"):
            subject.set_status(f"/cluster0/n{number % 5}", Status.DOWN if kind == "down" else Status.UP)
    except EngineError as error:
        return [str(error)]
    return []


def _socket_job(nodes: int, sockets: int, cores: int, *, gpus: int = 0, slot_on: str = "node") -> Any:
    """``nodes`` nodes of ``sockets`` sockets x ``cores`` cores (and ``gpus`` gpus), the slot above the node or
    above the cores."""
    core = f"type: core, count: {cores}"
    socket = f"type: socket, count: {sockets}, with: [{{{core}}}]"
    if slot_on == "node":
        inner = f"{{type: slot, count: 1, label: default, with: [{{{socket}}}]}}"
        gpu = f", {{type: gpu, count: {gpus}}}" if gpus else ""
        node = f"{{type: node, count: {nodes}, with: [{inner}{gpu}]}}"
    else:
        node = f"{{type: node, count: {nodes}, with: [{{type: slot, count: 1, label: default, with: [{{{core}}}]}}]}}"
    return jobspec_from_yaml(
        f"version: 9999\nresources: [{node}]\n"
        "attributes: {system: {duration: 600}}\n"
        "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["low", "first", "high", "lonodex"]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(
                ["alloc", "alloc", "reserve", "cancel", "cancel", "partial", "find", "down", "up", "satisfy"]
            ),
            st.integers(0, 999),
        ),
        max_size=24,
    ),
)
def test_jobs_recorded_as_pools_of_leaves_behave_as_jobs_recorded_leaf_by_leaf(
    policy: str, steps: list[tuple[str, int]]
) -> None:
    """A run of a socket's cores recorded as one pool (written leaf by leaf only when something reads them) gives
    the same answers, visit counts, schedule and fingerprints as the same job recorded core by core, and cancelling
    every job returns the fingerprints to where they started."""
    jobs = [
        _socket_job(2, 2, 4),
        _socket_job(1, 2, 2, gpus=1),
        _socket_job(3, 1, 1, slot_on="core"),
        _socket_job(1, 1, 3),
    ]

    def run(leaf_runs: bool) -> list[object]:
        with mock.patch.object(Traverser, "leaf_runs", leaf_runs):
            specs = [NodeSpec(f"n{i}", cores=8, sockets=2, gpus=2, memory=2**30) for i in range(5)]
            subject = Engine(build_graph(specs), policy=policy)
            traverser = subject.schedule.view
            pristine = list(traverser.fp)
            seen: list[object] = []
            for kind, number in steps:
                seen += _step(subject, jobs, kind, number)
            for info in list(subject.jobs.values()):
                if info.state != JobState.CANCELED:
                    subject.cancel(info.jobid)
            for uid in range(len(specs)):
                subject.set_status(f"/cluster0/n{uid}", Status.UP)
            # first's edge weights stay where the last update left them (as in Fluxion), a partial release
            # changes fingerprints for good; else the fingerprints must come back exactly.
            if policy != "first" and all(kind != "partial" for kind, _ in steps):
                assert traverser.fp == pristine
            seen += [schedule(traverser), list(traverser.fp)]
            return seen

    assert run(leaf_runs=True) == run(leaf_runs=False)


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
def test_a_cancelled_pool_is_never_written_and_a_read_writes_it_whole() -> None:
    """The 128-node benchmark's shape on a small graph: the cores of an allocation are pooled per socket; a
    cancel drops the pools unwritten, counting the visits a core-by-core cancel makes, and anything that reads
    the cores (a find) sees every core held."""
    job = _socket_job(2, 2, 4)
    with mock.patch.object(Traverser, "leaf_runs", False):
        reference = Engine(build_graph([NodeSpec(f"n{i}", cores=8, sockets=2) for i in range(4)]), policy="low")
        reference.cancel(reference.match(MatchOp.ALLOCATE, job).jobid)
    subject = Engine(build_graph([NodeSpec(f"n{i}", cores=8, sockets=2) for i in range(4)]), policy="low")
    first = subject.match(MatchOp.ALLOCATE, job)
    traverser = subject.schedule.view
    assert len(traverser.pools) == 4
    subject.cancel(first.jobid)
    assert not traverser.pools
    assert (subject.state.preorder, subject.state.postorder) == (reference.state.preorder, reference.state.postorder)
    assert not any(traverser.use_table.values())
    second = subject.match(MatchOp.ALLOCATE, job)
    assert second.resources == first.resources
    held = subject.find("sched-now=allocated")
    assert not traverser.pools
    assert held.count("core") == 16
    assert sum(1 for uses in traverser.x_uses.values() if second.jobid in uses) == 16 + 4 + 2 + 1  # and the root


def test_a_core_with_two_parents_is_never_given_twice() -> None:
    """On a containment DAG (socket0 -> core4 next to socket1 -> core4; the JGF reader refuses such a graph, as
    Fluxion does, but the graph API can make one) the cores of a socket are not pooled: a pool on socket1 would
    not be written when socket0's walk reads core4, and core4 would be given to a second job. The second job is
    refused and the schedule stays readable."""
    graph = build_graph([NodeSpec("n0", cores=8, sockets=2)])
    socket0, core4 = (graph.vertex_at(path) for path in ("/cluster0/n0/socket0", "/cluster0/n0/socket1/core4"))
    assert socket0 is not None and core4 is not None
    graph.add_edge(socket0.uid, core4.uid)
    subject = Engine(graph, policy="high")

    def cores(top: str, count: int) -> Any:
        inner = f"{{type: socket, count: 1, with: [{{type: core, count: {count}, exclusive: true}}]}}"
        resources = f"[{{type: node, count: 1, with: [{inner}]}}]" if top == "node" else f"[{inner}]"
        return jobspec_from_yaml(
            f"version: 9999\nresources: {resources}\nattributes: {{system: {{duration: 100}}}}\n"
            "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
        )

    first = subject.match(MatchOp.ALLOCATE, cores("node", 4))
    assert first.matched and "core4[1:x]" in first.resources
    second = subject.match(MatchOp.ALLOCATE, cores("socket", 5))
    assert not second.matched
    held = {line.strip(" -") for line in subject.find("sched-now=allocated").splitlines() if "core" in line}
    assert held == {f"core{i}[1:x]" for i in range(4, 8)}  # core4 is listed under both its parents


def _cores_job(cores: int, *, exclusive: str = "", duration: int = 600) -> Any:
    """One slot of ``cores`` cores (the cores' ``exclusive`` given or not)."""
    flag = f", exclusive: {exclusive}" if exclusive else ""
    core = f"{{type: core, count: {cores}{flag}}}"
    return jobspec_from_yaml(
        f"version: 9999\nresources: [{{type: slot, count: 1, label: default, with: [{core}]}}]\n"
        f"attributes: {{system: {{duration: {duration}}}}}\n"
        "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


def _socketed_engine(policy: str) -> Engine:
    """Four nodes whose sockets hold only cores, and one whose sockets also hold a gpu and memory."""
    specs = [NodeSpec(f"n{i}", cores=8, sockets=2) for i in range(4)]
    specs.append(NodeSpec("n4", cores=8, sockets=2, gpus=2, memory=2**30))
    return Engine(build_graph(specs), policy=policy)


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["first", "firstnodex", "policy=low node_centric=false stop_on_1_matches=true"]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(
                ["alloc", "alloc", "reserve", "satisfy", "cancel", "partial", "find", "down", "up", "core", "core"]
            ),
            st.integers(0, 999),
        ),
        max_size=24,
    ),
)
def test_first_exploring_a_sockets_cores_in_one_loop_answers_as_core_by_core(
    policy: str, steps: list[tuple[str, int]]
) -> None:
    """``first`` explores a vertex whose children are all cores in one loop; the answers (including a refused
    exclusivity conflict), visit counts and schedule are those of visiting the cores one by one, with cores and
    nodes going down and up, jobs ending and being released in part."""
    jobs = [
        _socket_job(2, 2, 4),
        _socket_job(1, 1, 3),
        _socket_job(3, 1, 1, slot_on="core"),
        _cores_job(3),
        _cores_job(2, exclusive="true", duration=100),
        _cores_job(1, exclusive="false"),
    ]

    def run(leaf_batches: bool) -> list[object]:
        with mock.patch.object(Traverser, "leaf_batches", leaf_batches):
            subject = _socketed_engine(policy)
            traverser = subject.schedule.view
            seen: list[object] = []
            for kind, number in steps:
                if kind == "core":  # each node's cores 0-3 on socket0, 4-7 on socket1
                    node, core = number % 5, number // 5 % 8
                    path = f"/cluster0/n{node}/socket{core // 4}/core{core}"
                    subject.set_status(path, Status.DOWN if number % 3 else Status.UP)
                else:
                    seen += _step(subject, jobs, kind, number)
            seen.append(schedule(traverser))
            return seen

    assert run(leaf_batches=True) == run(leaf_batches=False)


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from(["alloc", "alloc", "cancel", "down"]), st.integers(0, 999)), max_size=20)
)
def test_firsts_explore_orders_stay_those_of_sorting_by_weight_then_uniq_id(steps: list[tuple[str, int]]) -> None:
    """Every explore order ``first`` keeps (made fresh as the children reversed, then patched as edge weights
    change) is the children sorted heaviest edge first, then highest uniq_id first, with matching sort keys."""
    jobs = [_socket_job(1, 2, 4), _socket_job(1, 1, 3), _cores_job(5)]
    subject = _socketed_engine("first")
    traverser = subject.schedule.view
    graph = subject.graph
    for kind, number in [("alloc", 0), *steps]:
        live = live_jobs(subject)
        if kind == "alloc":
            subject.match(MatchOp.ALLOCATE, jobs[number % len(jobs)])
        elif kind == "cancel" and live:
            subject.cancel(live[number % len(live)])
        elif kind == "down":
            subject.set_status(f"/cluster0/n{number % 5}", Status.DOWN if number % 2 else Status.UP)
        for source, (keys, order) in traverser._by_weight.items():
            children = traverser.children(source)
            expected = sorted(
                children, key=lambda kid: (-traverser.edge_weight[kid[0]], -graph.vertices[kid[1]].uniq_id)
            )
            assert order == expected
            if keys is not None:
                assert keys == [(-traverser.edge_weight[e], -graph.vertices[t].uniq_id) for e, t in order]
    assert traverser._by_weight  # the orders were made and kept


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@settings(max_examples=30, deadline=None)
@given(
    policy=st.sampled_from(["first", "lonode", "lonodex"]),
    steps=st.lists(
        st.tuples(st.sampled_from(["alloc", "alloc", "reserve", "cancel", "halve", "find"]), st.integers(0, 999)),
        max_size=16,
    ),
)
def test_a_nodes_gpus_and_memory_pooled_next_to_its_sockets_answer_as_recorded_one_by_one(
    tmp_path_factory: Any, policy: str, steps: list[tuple[str, int]]
) -> None:
    """The benchmark's nodes (2 sockets x 32 cores, 4 gpus and memory beside the sockets): a whole node's gpus and
    memory are pooled under the node it holds; answers, visit counts and schedule are those of recording each."""
    graph = bench_graph(tmp_path_factory.mktemp("bench"), racks=1, nodes_per_rack=3)
    jobs = [load_jobspec(BENCH / f"{spec}.yaml") for spec in ("b_node_excl", "a_core1", "d_1n_64c")]

    def run(graph_path: Path, leaf_runs: bool) -> list[object]:
        with mock.patch.object(Traverser, "leaf_runs", leaf_runs):
            subject = Engine(read_grug(graph_path), policy=policy)
            traverser = subject.schedule.view
            seen: list[object] = []
            for kind, number in steps:
                live = live_jobs(subject)
                if kind != "halve":
                    seen += _step(subject, jobs, kind, number)
                elif live:  # the graph has no ranks: release the first half of the job's vertices
                    jobid = live[number % len(live)]
                    held = sorted(uid for uid, spans in traverser.allocations.items() if jobid in spans)
                    try:
                        seen.append(subject.release_vertices(jobid, held[: len(held) // 2 + 1]))
                    except EngineError as error:  # a reservation
                        seen.append(str(error))
            seen.append(schedule(traverser))
            return seen

    assert run(graph, leaf_runs=True) == run(graph, leaf_runs=False)
