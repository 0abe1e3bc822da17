"""A graph whose nodes' leaves are reserved (made when first needed) is the eager graph, to every reader.

``build_graph(..., reserve=True)`` takes each node's leaf uids and edge indices without making the leaves
(``kubeflux serve``'s graph of a cluster: its matches descend into few nodes). Checked here on generated clusters
and operations: once made, the graph equals the eager build field by field; before, every path and uid asked for
is the eager one's; the engine's prime sums the reserved nodes as it sums made ones and makes none of them; and
random sequences of matches under every policy, replays, releases, cancels, status changes and node removals give
byte-identical transcripts and tables on both graphs, while a packing match makes only the nodes it went into.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.builder import GIB, node_path
from kubeflux.resources.graph import CONTAINMENT, Graph, Status
from kubeflux.resources.jgf import graph_to_jgf
from tests.match._wide import DURATIONS, WAITS, jobspec_of, slot

POLICIES = ["first", "low", "high", "lonode", "hinode", "lonodex", "hinodex", "firstnodex", "variation"]

node_specs = st.builds(
    lambda i, cores, gpus, memory, sockets, zone, rack, named: NodeSpec(
        f"n{i}" if named else f"host-{'abc'[i % 3]}x{'' if i % 2 else i}",
        cores=cores,
        gpus=gpus,
        memory=memory * GIB + (GIB // 2 if memory == 1 else 0),
        sockets=sockets,
        zone=zone,
        rack=rack,
    ),
    st.integers(0, 10**6),
    st.integers(0, 8),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from([0, 0, 0, 2]),
    st.sampled_from([None, "z1", "z2"]),
    st.sampled_from([None, "r1", "r2"]),
    st.booleans(),
)


def _unique(specs: list[NodeSpec]) -> list[NodeSpec]:
    seen: set[str] = set()
    return [spec for spec in specs if not (spec.name in seen or seen.add(spec.name))]  # type: ignore[func-returns-value]


def _state(graph: Graph) -> dict[str, Any]:
    """Everything a reader can see of ``graph``: vertices field by field, edges, roots and indexes (by type and
    by name as sets: they are listed in the order leaves were made)."""
    fields = ("uid", "type", "basename", "name", "id", "uniq_id", "size", "unit", "rank", "status", "properties")
    fields += ("paths", "out", "parent", "children", "removed")
    vertices = [tuple(getattr(v, field) for field in fields) for v in graph.vertices]
    return {
        "vertices": vertices,
        "edges": [(e.source, e.target, e.subsystem, e.relation) for e in graph.edges],
        "roots": graph.roots,
        "by_type": {kind: sorted(uids) for kind, uids in graph.by_type.items()},
        "by_name": {name: sorted(uids) for name, uids in graph.by_name.items()},
        "by_path": graph.by_path,
        "by_rank": graph.by_rank,
        "flags": (graph.shared_children, graph.other_edges),
    }


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(node_specs, min_size=1, max_size=12), order=st.randoms(use_true_random=False))
def test_a_graph_with_reserved_leaves_made_is_the_eager_graph(specs: list[NodeSpec], order: Any) -> None:
    specs = _unique(specs)
    eager = build_graph(specs)
    lazy = build_graph(specs, reserve=True)
    assert len(lazy.vertices) == len(eager.vertices) and len(lazy.edges) == len(eager.edges)
    assert set(lazy.reserved) == {
        uid
        for uid, spec in zip(eager.by_type["node"], specs, strict=True)
        if spec.sockets == 0 and (spec.cores or spec.gpus or spec.memory >= GIB)
    }
    for uid in eager.by_type["node"]:  # the nodes' lists are whole before any leaf is made
        assert lazy.vertices[uid].children == eager.vertices[uid].children
        assert lazy.vertices[uid].out == eager.vertices[uid].out
    paths = sorted(eager.by_path)
    order.shuffle(paths)
    for path in paths[: len(paths) // 2]:  # some asked for by path, in any order: the node's leaves made
        assert lazy.uid_at(path) == eager.by_path[path]
        assert lazy.vertex_at(path).name == eager.vertex_at(path).name  # type: ignore[union-attr]
    uids = list(range(len(eager.vertices)))
    order.shuffle(uids)
    for uid in uids[: len(uids) // 3]:
        assert lazy.vertex(uid).paths == eager.vertices[uid].paths
    lazy.make_all_leaves()
    assert not lazy.reserved
    assert _state(lazy) == _state(eager)
    assert graph_to_jgf(build_graph(specs, reserve=True)) == graph_to_jgf(eager)  # written whole: made first


@settings(max_examples=40, deadline=None)
@given(specs=st.lists(node_specs, min_size=1, max_size=8), pick=st.integers(0, 10**6), which=st.integers(0, 4))
def test_what_the_graph_answers_of_a_leaf_not_made_is_the_eager_answer(
    specs: list[NodeSpec], pick: int, which: int
) -> None:
    """Asked of one reserved leaf (or its node) on a fresh graph, each question makes what it needs first."""
    specs = _unique(specs)
    eager = build_graph(specs)
    leaves = [uid for uid in range(len(eager.vertices)) if not eager.vertices[uid].children]
    leaf = leaves[pick % len(leaves)]
    node = eager.vertices[leaf].parent
    lazy = build_graph(specs, reserve=True)
    ask = [
        lambda graph: graph.depth(leaf),
        lambda graph: graph.in_edges(leaf),
        lambda graph: graph.find_out_edge(node, leaf) if node != -1 else None,
        lambda graph: graph.out_vertices(node, CONTAINMENT) if node != -1 else None,
        lambda graph: graph.remove_subtree(leaf) if node != -1 else None,
    ][which]
    assert ask(lazy) == ask(eager)
    lazy.make_all_leaves()
    assert _state(lazy) == _state(eager)


@settings(max_examples=30, deadline=None)
@given(specs=st.lists(node_specs, min_size=1, max_size=12))
def test_the_prime_sums_reserved_nodes_as_made_ones_and_makes_none(specs: list[NodeSpec]) -> None:
    specs = _unique(specs)
    eager = Engine(build_graph(specs), policy="lonode")
    graph = build_graph(specs, reserve=True)
    reserved = set(graph.reserved)
    lazy = Engine(graph, policy="lonode")
    assert set(graph.reserved) == reserved  # nothing made by the prime
    plans = lambda engine: {  # noqa: E731
        uid: [(kind, plan.resource_total(kind)) for kind in plan.resource_types]
        for uid, plan in engine.schedule.subplans.items()
    }
    assert plans(lazy) == plans(eager)
    assert list(lazy.schedule.view.prune_filters.total) == list(eager.schedule.view.prune_filters.total)
    assert lazy.schedule.view._ids_above == eager.schedule.view._ids_above


def _jobspecs() -> list[Any]:
    return [jobspec_of([{"type": "node", "count": 1, "with": [slot(1, cores)]}]) for cores in (1, 2, 4)] + [
        jobspec_of([{"type": "node", "count": 2, "with": [slot(1, 3)]}]),
        jobspec_of([{"type": "node", "count": 1, "exclusive": True, "with": [slot(1, 2)]}]),
        jobspec_of([slot(3, 2)]),
        jobspec_of([{"type": "node", "count": 1, "with": [slot(1, 1, gpus=1)]}]),
        jobspec_of([{"type": "node", "count": 1, "with": [{"type": "memory", "count": 2}, slot(1, 1)]}]),
        jobspec_of([{"type": "node", "count": 1, "with": [slot(1, 99)]}]),  # fits nowhere
    ]


OPS = [MatchOp.ALLOCATE, MatchOp.ALLOCATE_ORELSE_RESERVE, MatchOp.ALLOCATE_WITH_SATISFIABILITY]


def _transcript(specs: list[NodeSpec], policy: str, steps: list[tuple[str, int, int]], reserve: bool) -> list[str]:
    """What each step answers, then the engine's tables with every leaf made."""
    engine = Engine(build_graph(specs, reserve=reserve), policy=policy)
    graph = engine.graph
    jobspecs = _jobspecs()
    nodes = list(graph.by_type["node"])
    out: list[str] = []
    live: list[int] = []
    now = 0
    for kind, a, b in steps:
        if kind == "wait":
            now += WAITS[b % len(WAITS)]
        elif kind == "cancel" and live:
            jobid = live.pop(a % len(live))
            out.append(f"cancel {jobid} {engine.cancel(jobid)}")
        elif kind == "status":
            node = nodes[a % len(nodes)]
            if not graph.vertices[node].removed:
                engine.set_status(graph.vertices[node].paths[CONTAINMENT], Status.DOWN if b % 2 else Status.UP)
        elif kind == "replay":  # a pod put back on the cores it names (a restart): uids straight from the node
            node = graph.vertices[nodes[a % len(nodes)]]
            cores = node.children[: max(1, b % 3)]
            replayed = engine.next_jobid
            result = engine.update_leaves(replayed, cores, duration=DURATIONS[b % 3], now=now)
            out.append(f"replay {result.matched} {result.error}")
            if result.matched:
                live.append(replayed)
        elif kind == "release" and live:  # a part of a job given back, by uid
            jobid = live[a % len(live)]
            held = sorted(
                u for u in engine.schedule.view.job_vertices.get(jobid, ()) if graph.vertices[u].type == "core"
            )
            if len(held) > 1:
                try:
                    out.append(f"release {engine.release_vertices(jobid, held[:1])}")
                except Exception as exc:  # (the same refusal on both graphs)
                    out.append(f"release refused {exc}")
        elif kind == "remove":
            node = graph.vertices[nodes[a % len(nodes)]]
            if not node.removed and len([n for n in nodes if not graph.vertices[n].removed]) > 1:
                out.append(f"remove {engine.remove_path(node.paths[CONTAINMENT])}")
        elif kind == "match":
            op = OPS[b % len(OPS)]
            spec = dataclasses.replace(jobspecs[a % len(jobspecs)], duration=DURATIONS[(a + b) % 3])
            result = engine.match(op, spec, now=now)
            if result.matched:
                live.append(result.jobid)
            out.append(f"{op} {result.matched} {result.at} {result.errno}\n{result.resources}")
    graph.make_all_leaves()
    view = engine.schedule.view
    out.append(repr(sorted((uid, sorted(spans.items())) for uid, spans in view.allocations.items())))
    out.append(repr(sorted((uid, sorted(spans.items())) for uid, spans in view.reservations.items())))
    out.append(repr(sorted((uid, sorted(tags)) for uid, tags in view.tags.items())))
    out.append(repr((view.fp, view.edge_weight)))
    return out


steps = st.lists(
    st.tuples(
        st.sampled_from(["match"] * 5 + ["cancel", "status", "wait", "replay", "release", "remove"]),
        st.integers(0, 99),
        st.integers(0, 9),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(
    nodes=st.sampled_from([3, 70, 140]),
    memory=st.booleans(),
    policy=st.sampled_from(POLICIES),
    steps=steps,
)
def test_every_operation_answers_the_same_on_reserved_and_eager_leaves(
    nodes: int, memory: bool, policy: str, steps: list[tuple[str, int, int]]
) -> None:
    specs = [
        NodeSpec(f"n{i}", cores=(2, 4, 8)[i % 3], gpus=2 if i % 5 == 0 else 0, memory=(4 * GIB if memory else 0))
        for i in range(nodes)
    ]
    assert _transcript(specs, policy, steps, reserve=True) == _transcript(specs, policy, steps, reserve=False)


def test_a_packing_match_makes_only_the_nodes_it_goes_into() -> None:
    """1,000 nodes of 64 cores under ``lonode``: 100 one-core jobs fill two nodes; the nodes made are those and the
    rest of the first block of children the walk lays out, not the cluster."""
    specs = [NodeSpec(f"n{i}", cores=64, memory=256 * GIB) for i in range(1_000)]
    engine = Engine(build_graph(specs, reserve=True), policy="lonode")
    spec = jobspec_of([{"type": "node", "count": 1, "with": [slot(1, 1)]}])
    for _ in range(100):
        assert engine.match(MatchOp.ALLOCATE, spec).matched
    made = 1_000 - len(engine.graph.reserved)
    assert 2 <= made <= 40, made
    holding = {engine.graph.vertices[uid].parent for uid in engine.schedule.view.allocations}
    assert {engine.graph.vertices[uid].name for uid in holding if uid != -1} >= {"n0", "n1"}
    before = len(engine.graph.reserved)
    assert engine.graph.vertex_at(node_path(specs[999]) + "/core63").name == "core63"  # type: ignore[union-attr]
    assert len(engine.graph.reserved) == before - 1  # asked for by path: that node made, no other
