"""Graphs built from node lists, grown and shrunk in place."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from kubeflux.resources import (
    GIB,
    Graph,
    GraphFormatError,
    NodeSpec,
    Vertex,
    add_node,
    build_graph,
    dumps_jgf,
    load_jgf,
    remove_node,
    vertex_metadata,
)


def _names(graph: Graph, uid: int) -> list[str]:
    return [graph.vertices[child].name for child in graph.vertices[uid].children]


@pytest.fixture
def kind() -> Graph:
    return build_graph(
        [
            NodeSpec("kind-worker", cores=4, memory=16 * GIB + 123, zone="zone-a"),
            NodeSpec("kind-worker2", cores=2, gpus=1, zone="zone-a", properties={"arch": "amd64"}),
            NodeSpec("kind-worker3", cores=1, memory=GIB - 1, zone="zone-b", rack="r7"),
        ],
        cluster="kind",
    )


def test_shape_names_and_paths(kind: Graph) -> None:
    root = kind.root()
    assert (root.name, root.basename, root.type, root.paths["containment"]) == ("kind0", "kind", "cluster", "/kind0")
    assert _names(kind, root.uid) == ["zone-a", "zone-b"]
    zone_a = kind.vertex_at("/kind0/zone-a")
    assert zone_a is not None and zone_a.type == "zone"
    assert _names(kind, zone_a.uid) == ["kind-worker", "kind-worker2"]
    worker = kind.vertex_at("/kind0/zone-a/kind-worker")
    assert worker is not None
    assert _names(kind, worker.uid) == ["core0", "core1", "core2", "core3", "memory0"]
    memory = kind.vertex_at("/kind0/zone-a/kind-worker/memory0")
    assert memory is not None and (memory.size, memory.unit, memory.type) == (16, "GB", "memory")
    worker3 = kind.vertex_at("/kind0/zone-b/r7/kind-worker3")
    assert worker3 is not None and kind.vertices[worker3.parent].type == "rack"
    assert _names(kind, worker3.uid) == ["core0"]  # less than 1 GiB: no memory pool


def test_node_ids_ranks_and_uniq_ids(kind: Graph) -> None:
    nodes = [kind.vertices[u] for u in kind.by_type["node"]]
    assert [(v.name, v.basename, v.id, v.rank) for v in nodes] == [
        ("kind-worker", "kind-worker", 0, 0),
        ("kind-worker2", "kind-worker", 2, 1),
        ("kind-worker3", "kind-worker", 3, 2),
    ]
    assert all(v.uniq_id == v.uid for v in kind.vertices)
    gpu = kind.vertex_at("/kind0/zone-a/kind-worker2/gpu0")
    assert gpu is not None and gpu.rank == 1 and kind.depth(gpu.uid) == 4
    assert nodes[1].properties == {"arch": "amd64"}
    assert vertex_metadata(nodes[1])["properties"] == {"arch": "amd64"}


def test_sockets_split_cores_gpus_and_memory() -> None:
    graph = build_graph([NodeSpec("n1", cores=5, gpus=3, memory=9 * GIB, sockets=2)])
    node = graph.vertex_at("/cluster0/n1")
    assert node is not None
    assert _names(graph, node.uid) == ["socket0", "socket1"]
    socket0, socket1 = node.children
    assert _names(graph, socket0) == ["core0", "core1", "core2", "gpu0", "gpu1", "memory0"]
    assert _names(graph, socket1) == ["core3", "core4", "gpu2", "memory1"]
    assert [graph.vertices[u].size for u in graph.by_type["memory"]] == [5, 4]


def test_add_and_remove_nodes_in_place(kind: Graph) -> None:
    before = len(kind.vertices)
    node = add_node(kind, NodeSpec("gpu-7", cores=2, gpus=2, zone="zone-c"))
    assert (node.rank, node.id, node.paths["containment"]) == (3, 7, "/kind0/zone-c/gpu-7")
    assert len(kind.vertices) == before + 1 + 1 + 2 + 2
    assert _names(kind, kind.root().uid) == ["zone-a", "zone-b", "zone-c"]

    removed = remove_node(kind, "kind-worker2")
    assert removed[0] == kind.by_name["kind-worker"][0] + 6  # node, then its subtree in pre-order
    assert [kind.vertices[u].name for u in kind.by_type["node"]] == ["kind-worker", "kind-worker3", "gpu-7"]
    zone_a = kind.vertex_at("/kind0/zone-a")
    assert zone_a is not None and _names(kind, zone_a.uid) == ["kind-worker"]
    assert "gpu" in kind.by_type and kind.by_type["gpu"] == [
        u for u in kind.by_type["gpu"] if not kind.vertices[u].removed
    ]
    assert kind.vertex_at("/kind0/zone-a/kind-worker2/core0") is None

    # The name is free again; uids are never reused.
    again = add_node(kind, NodeSpec("kind-worker2", cores=1, zone="zone-a"))
    assert again.uid >= before and again.rank == 4
    assert _names(kind, zone_a.uid) == ["kind-worker", "kind-worker2"]
    with pytest.raises(KeyError, match="no node named 'ghost'"):
        remove_node(kind, "ghost")


def test_add_node_to_an_empty_graph_creates_the_root() -> None:
    graph = Graph()
    add_node(graph, NodeSpec("a", cores=1), cluster="k8s")
    assert graph.root().name == "k8s0" and _names(graph, graph.root().uid) == ["a"]


def test_built_graph_round_trips_through_jgf(kind: Graph) -> None:
    text = dumps_jgf(kind)
    again = load_jgf(text)
    assert dumps_jgf(again) == text
    assert [v.name for v in again.vertices] == [v.name for v in kind.vertices]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (NodeSpec("", cores=1), "must be non-empty"),
        (NodeSpec("a/b", cores=1), "contain no '/'"),
        (NodeSpec("a", cores=-1), "cores=-1 must not be negative"),
        (NodeSpec("a", cores=1, memory=-5), "memory=-5 must not be negative"),
        (NodeSpec("a", cores=1, zone="x/y"), "zone label 'x/y'"),
        (NodeSpec("a", cores=1, rack=""), "rack label ''"),
    ],
)
def test_bad_specs(spec: NodeSpec, message: str) -> None:
    with pytest.raises(GraphFormatError, match=message):
        build_graph([spec])


def test_duplicate_node_name() -> None:
    with pytest.raises(GraphFormatError, match="node 'a': a node with this name is already in the graph"):
        build_graph([NodeSpec("a", cores=1), NodeSpec("a", cores=2, zone="z")])


def test_an_edge_added_to_one_bulk_made_leaf_is_that_leafs_alone() -> None:
    """Leaves made in bulk share their empty edge lists until one gets an edge (a second subsystem, a child):
    the others, and the leaves of another node with the same names, see none of it."""
    graph = build_graph([NodeSpec("n0", cores=3), NodeSpec("n1", cores=3)])
    cores = graph.by_type["core"]
    first, others = cores[0], cores[1:]
    below = graph.add_children(first, "hwthread", "hwthread", range(2))
    graph.add_edge(cores[1], cores[2], subsystem="power", relation="feeds")
    assert graph.vertices[first].children == below
    assert [graph.edges[i].target for i in graph.vertices[cores[1]].out] == [cores[2]]
    assert all(not graph.vertices[uid].out and not graph.vertices[uid].children for uid in others[1:])
    assert graph.vertices[cores[0]].name is graph.vertices[cores[3]].name == "core0"  # one string for both nodes'


def test_a_pickled_graph_comes_back_whole(kind: Graph) -> None:
    """Vertices and edges write their own ``__init__`` (fast when compiled) and say how pickle rebuilds them: every
    field of every vertex and edge comes back, and the copy grows as the original would."""
    copy = pickle.loads(pickle.dumps(kind))
    fields = [f.name for f in dataclasses.fields(Vertex)]
    assert [[getattr(v, f) for f in fields] for v in copy.vertices] == [
        [getattr(v, f) for f in fields] for v in kind.vertices
    ]
    assert [(e.source, e.target, e.subsystem, e.relation) for e in copy.edges] == [
        (e.source, e.target, e.subsystem, e.relation) for e in kind.edges
    ]
    assert dumps_jgf(copy) == dumps_jgf(kind)
    add_node(copy, NodeSpec("kind-worker4", cores=2, zone="zone-b"))
    add_node(kind, NodeSpec("kind-worker4", cores=2, zone="zone-b"))
    assert dumps_jgf(copy) == dumps_jgf(kind)
