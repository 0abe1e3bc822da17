"""Pods → jobspecs: the CPU rule, durations, policies and reading placements back."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.scheduler.interface import expected_start_text
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, WALLTIME_ANNOTATION, Node, Pod
from kubeflux.scheduler.translate import (
    DURATION_ANNOTATION,
    POLICY_ANNOTATION,
    Placement,
    PlacementWriter,
    gang_jobspec,
    node_spec,
    placement_from_output,
    placements_from_output,
    pod_duration,
    pod_jobspec,
    pod_policy,
)
from kubeflux.scheduler.validation import PodRequestError


def pod(cpu: int, gpus: int = 0, **annotations: str) -> Pod:
    requests = {CPU: cpu, MEMORY: 2**30}
    if gpus:
        requests[GPU] = gpus
    return Pod("default", "p", "u1", requests=requests, annotations=dict(annotations))


def test_a_node_offers_its_whole_cores_and_gpus() -> None:
    spec = node_spec(Node("w1", allocatable={CPU: 3500, MEMORY: 8 * 2**30, GPU: 2}))
    assert (spec.name, spec.cores, spec.gpus, spec.memory) == ("w1", 3, 2, 8 * 2**30)


@pytest.mark.parametrize(("cpu", "cores"), [(1000, 1), (2500, 2), (8000, 8)], ids=["1", "2.5", "8"])
def test_whole_cores_become_exclusive_core_vertices(cpu: int, cores: int) -> None:
    spec = pod_jobspec(pod(cpu), 60)
    assert spec is not None
    slot = spec.resources[0].with_[0]
    assert (spec.resources[0].type, slot.type, slot.with_[0].type, slot.with_[0].count.min) == (
        "node",
        "slot",
        "core",
        cores,
    )
    assert spec.duration == 60


def test_a_fractional_pod_costs_no_core() -> None:
    assert pod_jobspec(pod(250), 60) is None
    with_gpu = pod_jobspec(pod(250, gpus=1), 60)
    assert with_gpu is not None and [r.type for r in with_gpu.resources[0].with_[0].with_] == ["gpu"]


def test_durations_come_from_the_deadline_then_the_annotations() -> None:
    assert pod_duration(pod(1000)) is None
    assert pod_duration(pod(1000, **{WALLTIME_ANNOTATION: "90"})) == 90
    assert pod_duration(pod(1000, **{DURATION_ANNOTATION: "1h", WALLTIME_ANNOTATION: "90"})) == 3600
    deadline = pod(1000, **{DURATION_ANNOTATION: "1h"})
    deadline.active_deadline_seconds = 120
    assert pod_duration(deadline) == 120
    with pytest.raises(PodRequestError, match=r"default/p: metadata.annotations\[kubeflux.io/duration\]"):
        pod_duration(pod(1000, **{DURATION_ANNOTATION: "soon"}))


def test_a_pod_may_choose_its_match_policy() -> None:
    assert pod_policy(pod(1000), "lonode") == "lonode"
    assert pod_policy(pod(1000, **{POLICY_ANNOTATION: "hinode"}), "lonode") == "hinode"
    with pytest.raises(PodRequestError, match="match-policy"):
        pod_policy(pod(1000, **{POLICY_ANNOTATION: "fastest"}), "lonode")


def test_the_placement_is_read_back_from_the_engine() -> None:
    graph = build_graph([node_spec(Node(f"w{i}", allocatable={CPU: 4000, GPU: 1})) for i in range(2)])
    engine = Engine(graph, policy="hinode")
    spec = pod_jobspec(pod(2000, gpus=1), 60)
    assert spec is not None
    result = engine.match(MatchOp.ALLOCATE, spec)
    placement = placement_from_output(result.resources)
    assert placement.node == "w1" and len(placement.cores) == 2 and placement.gpus == ("gpu0",)


def test_a_node_exclusive_placement_lists_the_nodes_cores_and_gpus_but_not_its_memory() -> None:
    """Under ``lonodex`` the pod holds its node whole, memory pool included; the placement (the Bind annotation)
    names the cores and gpus only."""
    node = Node("w0", allocatable={CPU: 2000, GPU: 1, MEMORY: 4 * 2**30})
    engine = Engine(build_graph([node_spec(node)]), policy="lonodex")
    spec = pod_jobspec(pod(1000), 60)
    assert spec is not None
    result = engine.match(MatchOp.ALLOCATE, spec)
    assert "memory0[4:x]" in result.resources
    assert placement_from_output(result.resources) == Placement("w0", ("core0", "core1"), ("gpu0",))


def test_a_gang_of_equal_members_is_one_jobspec_and_different_members_are_not() -> None:
    same = gang_jobspec([pod(2000), pod(2000)], 60)
    assert same is not None and same.resources[0].type == "slot" and same.resources[0].count.min == 2
    assert gang_jobspec([pod(2000), pod(1000)], 60) is None


def test_a_gangs_match_over_several_nodes_names_each_node_with_its_cores_and_gpus() -> None:
    nodes = [Node(f"w{i}", allocatable={CPU: 2000, GPU: 1, MEMORY: 2**30}) for i in range(3)]
    engine = Engine(build_graph([node_spec(node) for node in nodes]), policy="lonode")
    spec = gang_jobspec([pod(1000, gpus=1)] * 3, 60)
    assert spec is not None
    result = engine.match(MatchOp.ALLOCATE, spec)
    assert placements_from_output(result.resources) == tuple(
        Placement(f"w{i}", ("core0",), ("gpu0",)) for i in range(3)
    )


@pytest.mark.parametrize(("expected", "text"), [(100, "100"), (100.0, "100"), (12.5, "12.5")])
def test_the_expected_start_annotation_reads_whole_seconds_without_a_fraction(expected: float, text: str) -> None:
    assert expected_start_text(expected) == text


def test_the_simple_output_of_nodes_with_sockets_names_each_nodes_cores_below_its_sockets() -> None:
    output = (
        "      ------------core0[1:x]\n"
        "      ------------core1[1:x]\n"
        "      ---------socket0[1:s]\n"
        "      ------------gpu3[1:x]\n"
        "      ---------socket1[1:s]\n"
        "      ------node-7[1:s]\n"
        "\n"
        "      ---------core2[1:x]\n"
        "      ---------memory0[16:x]\n"
        "      ------node-8[1:s]\n"
        "      ---kubeflux0[1:s]\n"
    )
    assert placements_from_output(output) == (
        Placement("node-7", ("core0", "core1"), ("gpu3",)),
        Placement("node-8", ("core2",), ()),
    )
    assert placements_from_output("") == ()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(st.tuples(st.integers(1, 8), st.integers(0, 3), st.sampled_from([1, 2])), min_size=1, max_size=6),
    jobs=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 2), st.integers(1, 4)), min_size=1, max_size=12),
    policy=st.sampled_from(["lonode", "hinode", "low", "high", "first", "lonodex"]),
)
def test_the_scheduler_reads_each_match_as_the_simple_writer_prints_it(
    nodes: list[tuple[int, int, int]], jobs: list[tuple[int, int, int]], policy: str
) -> None:
    """:class:`PlacementWriter` (what the scheduler's engine writes) and :func:`placements_from_output` of the
    ``simple`` writer's text agree on every match of a workload: single pods, gangs, sockets, gpus, every policy."""
    specs = [
        NodeSpec(f"w{i}", cores=cores, gpus=gpus, memory=2**32, sockets=sockets)
        for i, (cores, gpus, sockets) in enumerate(nodes)
    ]
    engines = [Engine(build_graph(specs, cluster="cluster"), policy=policy) for _ in range(2)]
    engines[1].writer = PlacementWriter()
    socketed = [(-(-c // s), -(-g // s)) for c, g, s in nodes if s > 1]
    socket_size = (max(c for c, _ in socketed), max(g for _, g in socketed)) if socketed else None
    for cores, gpus, count in jobs:
        members = [pod(cores * 1000, gpus)] * count
        spec = gang_jobspec(members, 60) if count > 1 else pod_jobspec(members[0], 60, socket_size=socket_size)
        if spec is None:
            continue
        text, read = (engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, spec) for engine in engines)
        assert text.matched == read.matched and text.at == read.at
        if text.matched:
            assert read.placements == placements_from_output(text.resources)
            assert read.resources == ""
