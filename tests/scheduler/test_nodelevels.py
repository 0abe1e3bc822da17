"""The graph view's nodes as a match hides them (:class:`NodeLevels`), on a real graph with racks: a node keeps its
slot when attached again, a new node takes the next one; the masks, the vertices a walk may enter and the racks' counts
of hidden nodes follow each attach."""

from __future__ import annotations

from kubeflux.resources import NodeSpec, add_node, build_graph, node_path
from kubeflux.scheduler.hiding import HiddenNodes
from kubeflux.scheduler.nodelevels import NodeLevels

SPECS = [NodeSpec(f"n{i}", cores=2, domains=(("rack", f"r{i // 2}"),)) for i in range(4)]


def _levels() -> tuple[NodeLevels, dict[str, str]]:
    graph = build_graph(SPECS, cluster="c")
    paths = {spec.name: node_path(spec, "c") for spec in SPECS}
    uids = {name: graph.by_path[path] for name, path in paths.items()}
    return NodeLevels(uids, levelled=True), paths


def test_hidden_nodes_reach_the_engine_as_a_mask_and_counts_by_rack() -> None:
    graph = build_graph(SPECS, cluster="c")
    levels, paths = _levels()
    hidden = HiddenNodes({"n0", "n1", "n2"})
    excluded = levels.excluded(hidden.names, hidden, graph.vertices)
    assert hidden.mask is not None and list(hidden.mask) == [True, True, True, False, False]
    racks = levels.domains("rack", graph, paths)
    r0, r1 = racks["n0"], racks["n2"]
    assert r0 is not None and r1 is not None and racks["n1"] == r0 and racks["n3"] == r1
    assert excluded.counts is not None and excluded.sizes is not None
    assert (excluded.counts[r0], excluded.sizes[r0]) == (2, 2)  # a rack of hidden nodes: skipped whole
    assert (excluded.counts[r1], excluded.sizes[r1]) == (1, 2)
    assert excluded.covers is not None and excluded.covers(r1) and excluded.open is not None
    assert not excluded.open[graph.by_path[paths["n0"]]] and excluded.open[graph.by_path[paths["n3"]]]
    assert not excluded.open[r0] and excluded.open[r1]  # a walk never enters a rack of hidden nodes only


def test_a_node_attached_again_keeps_its_slot_and_a_new_one_takes_the_next() -> None:
    graph = build_graph(SPECS, cluster="c")
    levels, paths = _levels()
    hidden = HiddenNodes({"n3"})
    assert levels.excluded(hidden.names, hidden, graph.vertices).open is not None and hidden.mask is not None
    spec = NodeSpec("n4", cores=2, domains=(("rack", "r9"),))
    add_node(graph, spec, cluster="c")
    paths["n4"] = node_path(spec, "c")
    levels.attach("n4", graph.by_path[paths["n4"]], levelled=True)
    assert levels.slot_of == {"n0": 0, "n1": 1, "n2": 2, "n3": 3, "n4": 4}
    hidden.add("n4")
    excluded = levels.excluded(hidden.names, hidden, graph.vertices)
    assert excluded.open is not None and hidden.mask is not None
    assert list(hidden.mask) == [False, False, False, True, True, False]
    rack = levels.domains("rack", graph, paths)["n4"]  # found again for the new node generation
    assert rack is not None and graph.vertices[rack].name.startswith("r9")
    before = levels.generation
    levels.attach("n0", None, levelled=False)  # (not found in the graph after its attach): it keeps its slot
    assert levels.slot_of["n0"] == 0 and levels.generation == before + 1 and levels.levelled
