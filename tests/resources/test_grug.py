"""GRUG recipes expand exactly as Fluxion's reader does, checked on the conformance corpus."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from kubeflux.resources import Graph, GraphFormatError, graph_to_jgf, load_graph, load_grug, read_grug
from tests.shared import SHARED

RESOURCE = SHARED / "conformance" / "fluxion" / "data" / "resource"
GRUGS = RESOURCE / "grugs"
CASES = json.loads((SHARED / "conformance" / "fluxion" / "cases.json").read_text())


@pytest.mark.parametrize(
    ("name", "vertices", "edges"),
    [
        ("tiny.graphml", 100, 99),
        ("small.graphml", 378, 377),
        ("medium.graphml", 3533, 3532),
        ("resv_test.graphml", 5299, 5298),
        ("advanced_test.graphml", 6002, 6001),
        ("coarse_iobw.graphml", 5317, 5316),
        ("power.graphml", 4042, 4116),
        ("mt-storage/mtl0.graphml", 223, 222),
        ("mt-storage/mtl1.graphml", 225, 224),
        ("mt-storage/mtl2.graphml", 224, 223),
        ("mt-storage/mtl3.graphml", 226, 227),
    ],
)
def test_corpus_recipes_expand_to_the_right_size(name: str, vertices: int, edges: int) -> None:
    graph = read_grug(GRUGS / name)
    assert (len(graph.vertices), len(graph.edges)) == (vertices, edges)
    # uniq_id is the Boost vertex descriptor: the order of creation.
    assert [v.uniq_id for v in graph.vertices] == list(range(vertices))


def test_all_corpus_recipes_are_covered() -> None:
    assert len(list(GRUGS.rglob("*.graphml"))) == 11


def test_tiny_names_ids_and_scopes() -> None:
    graph = read_grug(GRUGS / "tiny.graphml")
    root = graph.root()
    assert (root.name, root.type, root.id, root.uniq_id, root.paths) == (
        "tiny0",
        "cluster",
        0,
        0,
        {"containment": "/tiny0"},
    )
    assert [graph.vertices[u].name for u in graph.by_type["node"]] == ["node0", "node1"]
    # id_scope=1 on socket->core: core ids run per node, so socket1 holds core18..core35.
    node1 = graph.vertex_at("/tiny0/rack0/node1")
    assert node1 is not None and node1.uniq_id == 3
    socket1 = graph.vertex_at("/tiny0/rack0/node1/socket1")
    assert socket1 is not None
    names = [graph.vertices[u].name for u in socket1.children]
    assert names == [f"core{i}" for i in range(18, 36)] + ["gpu1"] + [f"memory{i}" for i in range(4, 8)]
    memory = graph.vertex_at("/tiny0/rack0/node0/socket0/memory3")
    assert memory is not None and (memory.size, memory.unit, memory.id) == (2, "GB", 3)
    assert all(v.rank == -1 and v.parent == (-1 if v.uid == 0 else v.parent) for v in graph.vertices)
    # Level by level: all sockets before any core, all cores before any gpu.
    assert [graph.vertices[u].uid for u in graph.by_type["socket"]] == [4, 5, 6, 7]
    assert graph.by_type["core"][0] == 8 and graph.by_type["gpu"] == [80, 81, 82, 83]


def test_only_forward_edges_are_created() -> None:
    graph = read_grug(GRUGS / "tiny.graphml")
    assert {(e.subsystem, e.relation) for e in graph.edges} == {("containment", "contains")}
    for vertex in graph.vertices[1:]:
        parent = graph.vertices[vertex.parent]
        assert graph.depth(vertex.uid) == graph.depth(parent.uid) + 1
        assert vertex.uid in parent.children


@pytest.mark.parametrize("name", ["tiny", "power"])
def test_expansion_matches_fluxions_own_jgf_dump(name: str) -> None:
    """``jgfs/{tiny,power}.json`` were written by Fluxion from these recipes (with ranks assigned afterwards)."""
    ours = graph_to_jgf(read_grug(GRUGS / f"{name}.graphml"))["graph"]
    theirs = json.loads((RESOURCE / "jgfs" / f"{name}.json").read_text())["graph"]
    for node in theirs["nodes"]:
        node["metadata"]["rank"] = -1
    assert ours["nodes"] == theirs["nodes"]
    # Fluxion dumps edges by source vertex, each in out-edge order: that order is the tie-break order.
    assert ours["edges"] == theirs["edges"]


def test_power_subsystem_associations() -> None:
    graph = read_grug(GRUGS / "power.graphml")
    assert graph.vertices[graph.roots["power"]].name == "powerpanel0"
    node0 = graph.vertex_at("/power0/rack0/node0")
    node18 = graph.vertex_at("/power0/rack1/node18")
    assert node0 is not None and node18 is not None
    # ASSOCIATE_BY_PATH_IN matches the node to the pdu of its own rack (path prefixes one level up).
    assert node0.paths == {"containment": "/power0/rack0/node0", "power": "/powerpanel0/pdu0/node0"}
    assert node18.paths["power"] == "/powerpanel0/pdu1/node18"
    assert graph.vertex_at("/powerpanel0/pdu1/node18") is node18
    pdu1 = graph.vertex_at("/power0/rack1/pdu1")
    assert pdu1 is not None
    power_targets = graph.out_vertices(pdu1.uid, "power")
    assert [graph.vertices[u].name for u in power_targets[:18]] == [f"node{i}" for i in range(18, 36)]
    assert [graph.vertices[u].name for u in power_targets[18:]] == [f"power{i}" for i in range(40)]
    # Power vertices hang under their power parent only; containment children are untouched.
    assert all(graph.vertices[u].type != "power" for u in node0.children)
    assert node0.parent == graph.by_path["/power0/rack0"]


def test_associate_in_containment_reparents_paths() -> None:
    graph = read_grug(GRUGS / "mt-storage" / "mtl3.graphml")
    mtl2 = graph.vertex_at("/mtl3-test0/mtl2unit0")
    assert mtl2 is not None
    linked = [graph.vertices[u] for u in mtl2.children]
    assert [v.name for v in linked] == ["mtl1unit0", "mtl1unit1"]
    # Fluxion overwrites the containment path of an associated vertex; the old path still finds it.
    assert linked[1].paths["containment"] == "/mtl3-test0/mtl2unit0/mtl1unit1"
    assert graph.vertex_at("/mtl3-test0/rack1/mtl1unit1") is linked[1]


def _simple_lines(expected: Path) -> list[tuple[int, str]]:
    lines = []
    for line in expected.read_text().splitlines():
        match = re.fullmatch(r" {6}((?:---)+)(\S+)\[\d+:[xs]\]", line)
        if match:
            lines.append((len(match.group(1)) // 3, match.group(2)))
    return lines


@pytest.mark.parametrize(
    "graph_file",
    sorted({case["graph"] for case in CASES if case["graph"].endswith(".graphml")}),
)
def test_every_vertex_in_expected_simple_outputs_exists_at_its_depth(graph_file: str) -> None:
    graph = read_grug(SHARED / "conformance" / "fluxion" / graph_file)
    depths: dict[str, set[int]] = defaultdict(set)
    for vertex in graph.vertices:
        for path in vertex.paths.values():  # depth in each subsystem the vertex belongs to
            depths[vertex.name].add(path.count("/"))
    checked = 0
    for case in CASES:
        if case["graph"] != graph_file or case["match_format"] not in (None, "simple"):
            continue
        for depth, name in _simple_lines(SHARED / "conformance" / "fluxion" / case["expected"]):
            assert depth in depths[name], f"{case['expected']}: {name} at depth {depth}"
            checked += 1
    assert checked > 0


def test_bench1024_shape() -> None:
    graph = read_grug(SHARED / "bench" / "bench1024.graphml")
    assert len(graph.vertices) == 73_745
    assert [graph.vertices[u].id for u in graph.by_type["node"]] == list(range(1024))
    node1023 = graph.vertex_at("/bench0/rack15/node1023")
    assert node1023 is not None
    assert [graph.vertices[u].name for u in node1023.children] == [
        "socket0",
        "socket1",
        *map("gpu{}".format, range(4)),
        "memory0",
    ]
    socket1 = graph.vertices[node1023.children[1]]
    assert graph.vertices[socket1.children[0]].name == "core32"


RECIPE = """<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="root" for="node" attr.name="root" attr.type="int"><default>0</default></key>
  <key id="type" for="node" attr.name="type" attr.type="string"/>
  <key id="basename" for="node" attr.name="basename" attr.type="string"/>
  <key id="size" for="node" attr.name="size" attr.type="long"><default>1</default></key>
  <key id="subsystem" for="node" attr.name="subsystem" attr.type="string"><default>containment</default></key>
  <key id="e_subsystem" for="edge" attr.name="e_subsystem" attr.type="string"><default>containment</default></key>
  <key id="relation" for="edge" attr.name="relation" attr.type="string"><default>contains</default></key>
  <key id="id_scope" for="edge" attr.name="id_scope" attr.type="int"><default>0</default></key>
  <key id="id_start" for="edge" attr.name="id_start" attr.type="int"><default>0</default></key>
  <key id="id_stride" for="edge" attr.name="id_stride" attr.type="int"><default>1</default></key>
  <key id="gen_method" for="edge" attr.name="gen_method" attr.type="string"><default>MULTIPLY</default></key>
  <key id="multi_scale" for="edge" attr.name="multi_scale" attr.type="int"><default>1</default></key>
  <graph id="t" edgedefault="directed">
    <node id="c"><data key="root">1</data><data key="type">cluster</data><data key="basename">c</data></node>
    <node id="n"><data key="type">node</data><data key="basename">n</data></node>
    <node id="x"><data key="type">core</data><data key="basename">x</data></node>
    <node id="b"><data key="type">bb</data><data key="basename">bb</data></node>
    <edge source="c" target="n"><data key="multi_scale">2</data></edge>
    <edge source="n" target="x">EDGE</edge>
    <edge source="n" target="b"><data key="id_scope">-1</data></edge>
  </graph>
</graphml>
"""


def _recipe(edge: str) -> Graph:
    return load_grug(RECIPE.replace("EDGE", edge), source="t.graphml")


def test_id_start_and_stride_with_scope() -> None:
    graph = _recipe(
        '<data key="multi_scale">3</data><data key="id_scope">1</data>'
        '<data key="id_start">10</data><data key="id_stride">2</data>'
    )
    assert [graph.vertices[u].name for u in graph.by_type["core"]] == ["x10", "x12", "x14", "x16", "x18", "x20"]
    assert [graph.vertices[u].paths["containment"] for u in graph.by_type["core"]][3] == "/c0/n1/x16"


def test_scope_zero_ignores_stride_and_negative_scope_gives_no_id() -> None:
    graph = _recipe('<data key="multi_scale">2</data><data key="id_start">5</data><data key="id_stride">3</data>')
    assert [graph.vertices[u].name for u in graph.by_type["core"]] == ["x5", "x6", "x5", "x6"]
    bbs = [graph.vertices[u] for u in graph.by_type["bb"]]
    assert [(v.name, v.id, v.paths["containment"]) for v in bbs] == [("bb", -1, "/c0/n0/bb"), ("bb", -1, "/c0/n1/bb")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<graphml><graph>", "not well-formed XML"),
        ("<notgraphml/>", "expected <graphml>"),
        ("<graphml/>", "no <graph> element"),
        (RECIPE.replace("EDGE", '<data key="gen_method">MULTIPLE</data>'), "unknown gen_method 'MULTIPLE'"),
        (RECIPE.replace("EDGE", '<data key="multi_scale">two</data>'), "multi_scale='two' is not an integer"),
        # what Python's int() takes and Boost's lexical_cast (read_graphml) refuses
        (RECIPE.replace("EDGE", '<data key="multi_scale">1_0</data>'), "multi_scale='1_0' is not an integer"),
        (RECIPE.replace("EDGE", '<data key="id_start">٣</data>'), "id_start='٣' is not an integer"),
        (
            RECIPE.replace("EDGE", '<data key="id_start">2147483648</data>'),
            "id_start=2147483648 is out of range (a 32-bit integer)",
        ),
        (
            RECIPE.replace('key="basename">x</data>', 'key="basename">x</data><data key="size">-5</data>'),
            "node 'x': size=-5 must not be negative",
        ),
        (
            RECIPE.replace('key="basename">x</data>', f'key="basename">x</data><data key="size">{2**63}</data>'),
            f"node 'x': size={2**63} is out of range (a 64-bit integer)",
        ),
        (RECIPE.replace("EDGE", '<data key="colour">red</data>'), "<data key='colour'> refers to no declared <key>"),
        (RECIPE.replace('target="x"', 'target="y"'), "refers to unknown target node 'y'"),
        (
            RECIPE.replace('attr.name="unit"', "")
            .replace("EDGE", "")
            .replace('attr.name="relation"', 'attr.name="rel"'),
            "unknown GRUG property 'rel'",
        ),
    ],
)
def test_bad_recipes_raise_graph_format_error_naming_the_file(text: str, message: str) -> None:
    with pytest.raises(GraphFormatError, match=re.escape(message)) as info:
        load_grug(text, source="bad.graphml")
    assert str(info.value).startswith("bad.graphml: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphFormatError, match="cannot read GRUG file"):
        read_grug(tmp_path / "absent.graphml")


def test_load_graph_dispatches_on_format() -> None:
    assert len(load_graph(GRUGS / "tiny.graphml")) == 100
    assert len(load_graph(RESOURCE / "jgfs" / "tiny.json")) == 100
    assert len(load_graph(GRUGS / "tiny.graphml", "grug")) == 100
    with pytest.raises(GraphFormatError, match="unknown graph format 'xml'"):
        load_graph(GRUGS / "tiny.graphml", "xml")
