"""JGF reading (Fluxion's defaults and checks), attach, and the writers, on the conformance corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kubeflux.resources import (
    Graph,
    GraphFormatError,
    Status,
    attach_jgf,
    dumps_jgf,
    full_vertex_metadata,
    load_jgf,
    parse_jgf,
    read_grug,
    read_jgf,
    vertex_metadata,
    write_jgf,
)
from tests.shared import SHARED

RESOURCE = SHARED / "conformance" / "fluxion" / "data" / "resource"
JGFS = RESOURCE / "jgfs"


def _node(key: str, type_: str, **meta: Any) -> dict[str, Any]:
    meta.setdefault("paths", {"containment": f"/c0/{type_}{key}"})
    return {"id": key, "metadata": {"type": type_, **meta}}


def _jgf(nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None, free: Any = None) -> str:
    document: dict[str, Any] = {"graph": {"nodes": nodes, "edges": edges or []}}
    if free is not None:
        document["free_ranks"] = free
    return json.dumps(document)


@pytest.mark.parametrize(
    ("name", "vertices", "edges", "root"),
    [
        ("tiny.json", 100, 99, "tiny0"),
        ("power.json", 4042, 4116, "power0"),
        ("dyn_explore.json", 23, 22, "mini"),
        ("4node.rank0123.nid0123.orig.json", 166, 165, "tiny++0"),
        ("4node.rank1230.nid0123.mod.json", 166, 165, "tiny++0"),
        ("elastic/node-test.json", 41, 40, "medium0"),
        ("elastic/node-add-test.json", 41, 40, "medium0"),
        ("elastic/node-add-test-random.json", 41, 40, "medium0"),
        ("elastic/tiny-partial-cancel.json", 100, 99, "tiny0"),
    ],
)
def test_corpus_jgfs_load(name: str, vertices: int, edges: int, root: str) -> None:
    graph = read_jgf(JGFS / name)
    assert (len(graph.vertices), len(graph.edges)) == (vertices, edges)
    assert graph.root().name == root
    # Every containment vertex is reachable from the root through children.
    seen, stack = 0, [graph.roots["containment"]]
    while stack:
        seen += 1
        stack.extend(graph.vertices[stack.pop()].children)
    assert seen == sum(1 for v in graph.vertices if "containment" in v.paths)


def test_tiny_json_equals_tiny_grug_except_ranks() -> None:
    jgf, grug = read_jgf(JGFS / "tiny.json"), read_grug(RESOURCE / "grugs" / "tiny.graphml")
    for a, b in zip(jgf.vertices, grug.vertices, strict=True):
        assert (a.type, a.name, a.id, a.uniq_id, a.size, a.unit, a.paths) == (
            b.type,
            b.name,
            b.id,
            b.uniq_id,
            b.size,
            b.unit,
            b.paths,
        )
        assert a.children == b.children
    assert [jgf.vertices[u].rank for u in jgf.by_type["node"]] == [0, 1]


def test_defaults_follow_fluxion() -> None:
    graph = read_jgf(JGFS / "dyn_explore.json")
    root = graph.root()
    assert (root.name, root.basename, root.id, root.uniq_id, root.size, root.unit, root.rank) == (
        "mini",
        "cluster",
        0,
        0,
        1,
        "",
        -1,
    )
    ssd = graph.vertex_at("/mini/chassis0/ssd0")
    assert ssd is not None
    # No id: id = uniq_id = int(outer id); name = basename + id (so "ssd2" although the path says ssd0).
    assert (ssd.name, ssd.basename, ssd.id, ssd.uniq_id, ssd.size, ssd.unit) == ("ssd2", "ssd", 2, 2, 525, "GiB")
    # The expected output of the dyn_explore cases names these vertices that way.
    assert "ssd21[616:x]" in (RESOURCE / "expected" / "dyn_explore" / "001.R.out").read_text()
    assert graph.vertices[21].name == "ssd21"


def test_node_id_comes_from_the_host_name_suffix() -> None:
    text = _jgf([_node("7", "node", name="nid0042"), _node("8", "node", name="login"), _node("9", "core")])
    graph = load_jgf(text)
    assert [(v.name, v.id, v.uniq_id) for v in graph.vertices] == [("nid0042", 42, 7), ("login", 8, 8), ("core9", 9, 9)]


def test_attach_reuses_present_vertices_and_appends_new_ones() -> None:
    graph = read_jgf(JGFS / "elastic" / "node-test.json")
    before = len(graph.vertices)
    added = attach_jgf(graph, (JGFS / "elastic" / "node-add-test.json").read_bytes(), source="node-add-test.json")
    assert added == list(range(before, before + 39))
    rack = graph.vertex_at("/medium0/rack0")
    assert rack is not None
    assert [graph.vertices[u].name for u in rack.children] == ["node0", "node3"]
    node3 = graph.vertex_at("/medium0/rack0/node3")
    assert node3 is not None and node3.uniq_id == 8 and len(node3.children) == 2
    assert len(graph.edges) == 79
    # Attaching the same subgraph again adds nothing.
    assert attach_jgf(graph, (JGFS / "elastic" / "node-add-test.json").read_text()) == []
    assert len(graph.vertices) == 80


def test_vertex_metadata_matches_fluxions_jgf_match_writer() -> None:
    """expected/elastic/001.R.out is ``find status=up`` with ``-F jgf`` after the attach above."""
    graph = read_jgf(JGFS / "elastic" / "node-test.json")
    attach_jgf(graph, (JGFS / "elastic" / "node-add-test.json").read_text())
    by_uniq_id = {v.uniq_id: v for v in graph.vertices}
    line = next(line for line in (RESOURCE / "expected" / "elastic" / "001.R.out").read_text().splitlines() if line)
    nodes = json.loads(line)["graph"]["nodes"]
    assert len(nodes) == len(graph.vertices)
    for node in nodes:
        expected = node["metadata"]
        ours = vertex_metadata(by_uniq_id[int(node["id"])], exclusive=expected.get("exclusive", False))
        assert list(ours.items()) == list(expected.items())


def test_vertex_metadata_optional_fields_in_writer_order() -> None:
    graph = read_grug(RESOURCE / "grugs" / "tiny.graphml")
    memory = graph.vertex_at("/tiny0/rack0/node0/socket0/memory0")
    assert memory is not None
    memory.properties.update({"z": "1", "a": "2"})
    meta = vertex_metadata(memory, needs=2, exclusive=True, agfilter={"core": "used:0, total:18"})
    assert list(meta) == ["type", "id", "rank", "properties", "unit", "exclusive", "size", "paths", "agfilter"]
    assert list(meta["properties"]) == ["a", "z"]
    assert "size" not in vertex_metadata(memory, needs=1)
    assert vertex_metadata(graph.root())["basename"] == "tiny"


def test_whole_graph_round_trip(tmp_path: Path) -> None:
    graph = read_grug(RESOURCE / "grugs" / "power.graphml")
    graph.vertices[5].status = Status.DOWN
    graph.vertices[5].properties["perf_class"] = "3"
    path = tmp_path / "power.json"
    write_jgf(graph, path)
    again = read_jgf(path)
    assert dumps_jgf(again) == dumps_jgf(graph)
    assert again.vertices[5].status is Status.DOWN and again.vertices[5].properties == {"perf_class": "3"}
    assert again.roots == graph.roots
    assert [again.edges[i].subsystem for i in again.vertices[3537].out] == ["power"] * 204
    assert list(full_vertex_metadata(graph.vertices[0])) == [
        "type",
        "basename",
        "name",
        "id",
        "uniq_id",
        "rank",
        "exclusive",
        "unit",
        "size",
        "paths",
    ]


def test_subset_writer_keeps_edges_inside_the_subset() -> None:
    graph = read_grug(RESOURCE / "grugs" / "tiny.graphml")
    node1 = graph.vertex_at("/tiny0/rack0/node1")
    assert node1 is not None
    subset = [node1.uid, *node1.children]
    document = json.loads(dumps_jgf(graph, subset))["graph"]
    assert [n["id"] for n in document["nodes"]] == ["3", "6", "7"]
    assert [(e["source"], e["target"]) for e in document["edges"]] == [("3", "6"), ("3", "7")]


def test_old_format_reverse_edges_are_not_children() -> None:
    nodes = [_node("0", "cluster", name="c0", paths={"containment": "/c0"}), _node("1", "node", name="n1")]
    edges = [
        {"source": "0", "target": "1", "metadata": {"name": {"containment": "contains"}}},
        {"source": "1", "target": "0", "metadata": {"name": {"containment": "in"}}},
    ]
    graph = load_jgf(_jgf(nodes, edges))
    assert graph.vertices[0].children == [1] and graph.vertices[1].children == []
    assert [(e.relation, e.subsystem) for e in graph.edges] == [("contains", "containment"), ("in", "containment")]


def test_free_ranks() -> None:
    assert parse_jgf(_jgf([], free="0-2,5")).free_ranks == frozenset({0, 1, 2, 5})
    assert parse_jgf(_jgf([], free=[1, 3])).free_ranks == frozenset({1, 3})
    assert parse_jgf(_jgf([], free=4)).free_ranks == frozenset({4})
    assert parse_jgf(_jgf([])).free_ranks is None
    with pytest.raises(GraphFormatError, match="free_ranks='2-1' is not a valid idset"):
        parse_jgf(_jgf([], free="2-1"))


def test_exclusive_and_status_are_parsed() -> None:
    document = parse_jgf(_jgf([_node("3", "core", exclusive=True, status=1)]))
    (record,) = document.vertices
    assert record.exclusive and record.status is Status.DOWN and record.key == "3"


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a JSON object"),
        ('{"nodes": []}', "required key (graph)"),
        ('{"graph": {"edges": []}}', "required key (graph.nodes)"),
        ('{"graph": {"nodes": []}}', "required key (graph.edges)"),
        (_jgf([{"id": 3, "metadata": {"type": "core", "paths": {}}}]), "nodes[0]: the node id must be a string"),
        (_jgf([{"id": "3"}]), "node '3': key (metadata) is missing"),
        (_jgf([{"id": "3", "metadata": {"paths": {}}}]), "node '3': metadata lacks the required key (type)"),
        (_jgf([{"id": "3", "metadata": {"type": "core"}}]), "node '3': metadata lacks the required key (paths)"),
        (_jgf([_node("x", "core")]), "node 'x': value for key (uniq_id) could not be inferred"),
        (_jgf([_node("3", "core", size="2")]), "node '3': metadata key (size) must be an integer"),
        (_jgf([_node("3", "core", id=True)]), "node '3': metadata key (id) must be an integer"),
        (_jgf([_node("3", "core", exclusive="yes")]), "metadata key (exclusive) must be true or false"),
        (_jgf([_node("3", "core", status=7)]), "status=7; expected 0 (up) or 1 (down)"),
        (_jgf([_node("3", "core", properties={"a": 1})]), "properties.a must be a string"),
        (_jgf([_node("3", "core", paths=["/a"])]), "key (paths) must be an object"),
        (_jgf([_node("3", "core"), _node("3", "gpu")]), "duplicate JGF node id '3'"),
        (
            _jgf(
                [
                    _node("1", "cluster", paths={"containment": "/a0"}),
                    _node("2", "cluster", paths={"containment": "/b0"}),
                ]
            ),
            "second root '/b0' for subsystem 'containment'",
        ),
        (_jgf([_node("3", "core")], [{"source": "3", "target": "4"}]), "edges[0] (3 -> 4): no node with id '4'"),
        (_jgf([_node("3", "core")], [{"source": "3"}]), "edges[0]: malformed edge"),
        (_jgf([_node("3", "core")], [{"source": "3", "target": "3", "metadata": {"subsystem": 1}}]), "must be strings"),
        # beyond Fluxion's json_int_t (int64): jansson refuses to read the file
        (_jgf([_node("3", "core", size=2**63)]), f"key (size) is out of range (a 64-bit integer), got {2**63}"),
        (_jgf([_node("3", "core", uniq_id=-(2**63) - 1)]), "metadata key (uniq_id) is out of range"),
        (_jgf([_node("3", "core", rank=2**70)]), "metadata key (rank) is out of range"),
    ],
)
def test_bad_jgf_raises_graph_format_error_naming_the_source(document: str, message: str) -> None:
    with pytest.raises(GraphFormatError, match=re.escape(message)) as info:
        load_jgf(document, source="bad.json")
    assert str(info.value).startswith("bad.json: ")


_TWO_NODES = [
    _node("0", "cluster", name="c0", paths={"containment": "/c0"}),
    _node("1", "node", name="node0", paths={"containment": "/c0/node0"}),
    _node("2", "node", name="node1", paths={"containment": "/c0/node1"}),
    _node("3", "core", name="core0", paths={"containment": "/c0/node0/core0"}),
]


def _edges(*pairs: str) -> list[dict[str, Any]]:
    return [{"source": pair.split()[0], "target": pair.split()[1]} for pair in pairs]


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        (
            _edges("0 1", "0 2", "2 3", "1 3"),
            "edges[3] (1 -> 3): invalid containment edge: core0 would have two containment parents, node1 "
            "(edges[2]) and node0",
        ),
        (
            _edges("0 1", "1 3", "1 3"),
            "edges[2] (1 -> 3): invalid containment edge: core0 is in node0 already (edges[1])",
        ),
        (_edges("0 1", "1 3", "3 0"), "edges[2] (3 -> 0): invalid containment edge: c0 is the containment root"),
        (_edges("0 1", "1 1"), "edges[1] (1 -> 1): invalid containment edge: node0 would contain itself"),
    ],
)
def test_containment_must_be_a_tree(edges: list[dict[str, Any]], message: str) -> None:
    """Fluxion's graph store walks containment from its root after loading and refuses any edge into a vertex
    it reached already ("Invalid containment edge detected"); a second parent used to reach the matcher, whose
    walks keep one parent per vertex, and a match then took a held core again through the other parent."""
    with pytest.raises(GraphFormatError) as info:
        load_jgf(_jgf(_TWO_NODES, edges), source="mp.json")
    assert str(info.value) == f"mp.json: {message}"


def test_an_attach_cannot_give_a_vertex_a_second_containment_parent() -> None:
    graph = load_jgf(_jgf(_TWO_NODES, _edges("0 1", "0 2", "1 3")))
    extra = _node("4", "socket", name="socket0", paths={"containment": "/c0/node1/socket0"})
    bad = _jgf([*_TWO_NODES, extra], _edges("2 4", "4 3"))
    with pytest.raises(GraphFormatError, match=re.escape("core0 would have two containment parents, node0 (already")):
        attach_jgf(graph, bad, source="bad.json")
    assert len(graph.vertices) == 4 and graph.vertex_at("/c0/node1/socket0") is None
    attach_jgf(graph, _jgf([*_TWO_NODES, extra], _edges("2 4")))
    assert graph.vertices[4].parent == 2


def test_a_failed_attach_leaves_the_graph_unchanged() -> None:
    graph = read_jgf(JGFS / "tiny.json")
    bad = _jgf([_node("500", "node", paths={"containment": "/tiny0/rack0/node9"})], [{"source": "1", "target": "500"}])
    with pytest.raises(GraphFormatError, match="no node with id '1'"):
        attach_jgf(graph, bad, source="bad.json")
    assert len(graph.vertices) == 100 and graph.vertex_at("/tiny0/rack0/node9") is None


def test_remove_subtree_detaches_and_unindexes() -> None:
    graph = read_jgf(JGFS / "tiny.json")
    node1 = graph.vertex_at("/tiny0/rack0/node1")
    assert node1 is not None
    removed = graph.remove_subtree(node1.uid)
    assert removed[:3] == [3, 6, 44] and len(removed) == 49
    rack = graph.vertex_at("/tiny0/rack0")
    assert rack is not None and rack.children == [2]
    assert [graph.edges[i].target for i in rack.out] == [2]
    assert graph.by_type["node"] == [2] and len(graph.by_type["core"]) == 36
    assert graph.vertex_at("/tiny0/rack0/node1/socket0/core0") is None
    assert all(graph.vertices[u].removed for u in removed) and 1 not in graph.by_rank
    assert graph.remove_subtree(node1.uid) == []
    assert isinstance(graph, Graph)


def test_a_resource_set_under_a_wide_root_lists_the_same_edges_as_a_full_scan() -> None:
    """graph_to_jgf looks the edges of a source with thousands of children up from the chosen targets."""
    from unittest import mock

    from kubeflux.resources import NodeSpec, build_graph
    from kubeflux.resources import jgf as jgf_module

    graph = build_graph([NodeSpec(f"n{i}", cores=2) for i in range(200)])
    node = graph.vertex_at("/cluster0/n137")
    assert node is not None
    chosen = [graph.roots["containment"], node.uid, *node.children]
    fast = jgf_module.graph_to_jgf(graph, chosen)
    with mock.patch.object(jgf_module, "FEW_EDGES", 10**9):
        scanned = jgf_module.graph_to_jgf(graph, chosen)
    assert fast == scanned
    assert len(fast["graph"]["edges"]) == 3
