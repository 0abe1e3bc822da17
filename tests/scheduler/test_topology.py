"""Topology levels from node labels in the scheduler's graph: cluster → zone → rack → node, kept as nodes change."""

from __future__ import annotations

import dataclasses

import pytest

from kubeflux.kube.config import NodesConfig
from kubeflux.resources import NodeSpec, build_graph, node_path
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import Node
from kubeflux.scheduler.testing import ADDED, DELETED, MODIFIED, Cluster, bound, node, pod
from kubeflux.scheduler.topology import RACK_LEVEL, UNKNOWN, ZONE_LEVEL, check_levels, level_type
from kubeflux.scheduler.translate import NodeShape

BLOCK = "cloud.provider.com/topology-block"
KUEUE_RACK = "cloud.provider.com/topology-rack"


def racked(name: str, rack: str | None, zone: str | None = None, cores: int = 16) -> Node:
    labels = {RACK_LEVEL: rack} if rack is not None else {}
    if zone is not None:
        labels[ZONE_LEVEL] = zone
    return node(name, cores, labels=labels)


def paths(scheduler: KubefluxScheduler) -> dict[str, str]:
    graph = scheduler.books.graph
    assert graph is not None
    return {name: graph.paths[name] for name in graph.specs if name not in graph.gone}


@pytest.mark.parametrize(
    ("label", "kind"),
    [(ZONE_LEVEL, "zone"), (RACK_LEVEL, "rack"), (BLOCK, "block"), (KUEUE_RACK, "rack"), ("rack", "rack")],
)
def test_a_levels_vertex_type_is_its_labels_name(label: str, kind: str) -> None:
    assert level_type(label) == kind


@pytest.mark.parametrize(
    ("levels", "problem"),
    [
        ((RACK_LEVEL, KUEUE_RACK), "would both be 'rack' vertices"),
        (("example.com/node",), "a vertex type the graph already uses"),
        (("not a label",), "not a label key"),
    ],
)
def test_bad_levels_are_refused_naming_the_level(levels: tuple[str, ...], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_levels(levels)


def test_the_hostname_level_is_the_node_itself_and_left_out() -> None:
    assert NodeShape(levels=(BLOCK, KUEUE_RACK, "kubernetes.io/hostname")).levels == (BLOCK, KUEUE_RACK)


def test_nodes_below_their_zone_and_rack_in_the_graph() -> None:
    scheduler = KubefluxScheduler()
    Cluster(scheduler, [racked("n0", "r0", "a"), racked("n1", "r1", "a"), racked("n2", "r0", "b")]).run()
    assert paths(scheduler) == {
        "n0": "/kubeflux0/a/r0/n0",
        "n1": "/kubeflux0/a/r1/n1",
        "n2": "/kubeflux0/b/r0/n2",  # a rack is known by its path: r0 of zone b is another rack
    }
    assert scheduler.books.levels == (ZONE_LEVEL, RACK_LEVEL)


def test_without_topology_labels_the_graph_is_the_one_without_levels() -> None:
    scheduler = KubefluxScheduler()
    Cluster(scheduler, [node("n0"), node("n1")]).run()
    assert paths(scheduler) == {"n0": "/kubeflux0/n0", "n1": "/kubeflux0/n1"}
    assert scheduler.books.levels == ()


def test_configured_levels_are_read_and_others_ignored() -> None:
    scheduler = KubefluxScheduler(shape=NodeShape(levels=(BLOCK, KUEUE_RACK)))
    nodes = [node("n0", labels={BLOCK: "b1", KUEUE_RACK: "r1", RACK_LEVEL: "x"}), node("n1", labels={BLOCK: "b1"})]
    Cluster(scheduler, nodes).run()
    assert paths(scheduler) == {"n0": "/kubeflux0/b1/r1/n0", "n1": f"/kubeflux0/b1/{UNKNOWN}/n1"}


def test_no_levels_configured_builds_none_whatever_the_labels() -> None:
    scheduler = KubefluxScheduler(shape=NodeShape(levels=()))
    Cluster(scheduler, [racked("n0", "r0", "a")]).run()
    assert paths(scheduler) == {"n0": "/kubeflux0/n0"}


def test_a_node_without_a_levels_label_goes_to_its_unknown_domain_reported_once() -> None:
    scheduler = KubefluxScheduler()
    bare = racked("n1", None)
    cluster = Cluster(scheduler, [racked("n0", "r0"), bare])
    cluster.run()
    cluster.tell(MODIFIED, dataclasses.replace(bare, allocatable={**bare.allocatable}))
    cluster.run(1.0)
    assert paths(scheduler)["n1"] == f"/kubeflux0/{UNKNOWN}/n1"
    told = [line for line in scheduler.log if "has no label" in line]
    assert told == [f"Node n1 has no label {RACK_LEVEL}: it is in the level's unknown domain"]


def rack_of(scheduler: KubefluxScheduler) -> dict[str, str]:
    """Each node's rack, as the graph view keeps it for jobs that ask for one rack (:meth:`GraphView.domains`)."""
    graph = scheduler.books.graph
    assert graph is not None
    vertices = graph.engine.graph.vertices
    return {name: vertices[uid].name for name, uid in graph.domains("rack").items() if uid is not None}


def test_a_relabelled_node_moves_racks_keeping_its_pods_allocations() -> None:
    scheduler = KubefluxScheduler()
    nodes = [racked("n0", "r0"), racked("n1", "r0"), racked("n2", "r1")]
    cluster = Cluster(scheduler, nodes)
    cluster.add(pod("a", 4000), pod("b", 8000, t=1))
    assert bound(cluster.run()) == {"default/a": "n0", "default/b": "n0"}
    before = {uid: alloc.placement for uid, alloc in scheduler.books.allocations.items()}
    assert rack_of(scheduler) == {"n0": "r0", "n1": "r0", "n2": "r1"}

    cluster.tell(MODIFIED, racked("n0", "r1"))
    cluster.add(pod("c", 8000, t=2))
    assert bound(cluster.run(1.0)) == {"default/c": "n1"}  # n0 (now in r1) has only 4 cores left
    assert paths(scheduler)["n0"] == "/kubeflux0/r1/n0"
    graph = scheduler.books.graph
    assert graph is not None
    assert graph.busy_cores("n0", 1) == 12
    assert {uid: scheduler.books.allocations[uid].placement for uid in before} == before
    assert rack_of(scheduler) == {"n0": "r1", "n1": "r0", "n2": "r1"}  # the kept node-to-rack map follows the move
    cluster.end("a")
    cluster.end("b")
    cluster.run(2.0)
    assert graph.busy_cores("n0", 2) == 0


def test_the_first_node_with_a_levels_label_moves_every_node_below_the_new_level() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("n0"), node("n1")])
    cluster.add(pod("a", 2000))
    assert bound(cluster.run()) == {"default/a": "n0"}
    cluster.tell(ADDED, racked("n2", "r9", cores=4))
    cluster.run(1.0)
    assert paths(scheduler) == {
        "n0": f"/kubeflux0/{UNKNOWN}/n0",
        "n1": f"/kubeflux0/{UNKNOWN}/n1",
        "n2": "/kubeflux0/r9/n2",
    }
    graph = scheduler.books.graph
    assert graph is not None
    assert graph.busy_cores("n0", 1) == 2
    cluster.tell(DELETED, racked("n2", "r9", cores=4))
    cluster.run(2.0)
    assert paths(scheduler) == {"n0": "/kubeflux0/n0", "n1": "/kubeflux0/n1"}
    assert graph.busy_cores("n0", 2) == 2


def test_a_restarted_scheduler_rebuilds_the_same_racks_and_allocations() -> None:
    nodes = [racked(f"n{i}", f"r{i // 2}", cores=8) for i in range(4)]
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, nodes)
    cluster.add(pod("a", 8000), pod("b", 4000, t=1), pod("c", 8000, t=2))
    assert bound(cluster.run()) == {"default/a": "n0", "default/b": "n1", "default/c": "n2"}
    cluster.tell(MODIFIED, racked("n1", "r1", cores=8))  # a rack changed before the restart
    cluster.run(1.0)

    restarted = KubefluxScheduler()
    again = Cluster(restarted, [*nodes[:1], racked("n1", "r1", cores=8), *nodes[2:]])
    for p in cluster.pods.values():
        again.pods[p.key] = p
        again.tell(ADDED, p)
    again.add(pod("d", 8000, t=3))
    assert bound(again.run(2.0)) == {"default/d": "n3"}
    assert paths(restarted) == paths(scheduler)
    graph, before = restarted.books.graph, scheduler.books.graph
    assert graph is not None and before is not None
    for name in ("n0", "n1", "n2"):
        assert graph.busy_cores(name, 2) == before.busy_cores(name, 1)
    assert {u: a.placement for u, a in restarted.books.allocations.items() if u != "uid-d"} == {
        u: a.placement for u, a in scheduler.books.allocations.items()
    }


def test_nodes_a_pod_may_not_use_are_hidden_below_racks_too() -> None:
    """The engine is told which racks hold a hidden node: their subtrees are walked with it hidden."""
    scheduler = KubefluxScheduler()
    nodes = [racked(f"n{i}", f"r{i // 2}", cores=4) for i in range(4)]
    for n in nodes:
        n.labels["kubernetes.io/hostname"] = n.name
    cluster = Cluster(scheduler, nodes)
    cluster.add(pod("big", 4000, node_selector={"kubernetes.io/hostname": "n3"}))
    assert bound(cluster.run()) == {"default/big": "n3"}
    cluster.add(pod("x", 4000, t=1, node_selector={"kubernetes.io/hostname": "n2"}), pod("y", 4000, t=2))
    assert bound(cluster.run(1.0)) == {"default/x": "n2", "default/y": "n0"}
    cluster.add(pod("z", 2000, t=3, node_selector={"kubernetes.io/hostname": "n1"}), pod("w", 2000, t=4))
    assert bound(cluster.run(2.0)) == {"default/z": "n1", "default/w": "n1"}


def test_a_node_path_is_where_the_builder_puts_the_node() -> None:
    spec = NodeSpec("n7", cores=1, domains=(("zone", "a"), ("rack", "r1")))
    graph = build_graph([spec], cluster="c")
    vertex = graph.vertex_at(node_path(spec, "c"))
    assert vertex is not None and vertex.name == "n7" and node_path(spec, "c") == "/c0/a/r1/n7"


def test_serve_reads_its_levels_from_the_nodes_section() -> None:
    assert NodesConfig().shape().levels == (ZONE_LEVEL, RACK_LEVEL)
    config = NodesConfig.model_validate({"topologyLevels": [BLOCK, KUEUE_RACK, "kubernetes.io/hostname"]})
    assert config.shape().levels == (BLOCK, KUEUE_RACK)
    assert NodesConfig.model_validate({"topologyLevels": []}).shape().levels == ()
    with pytest.raises(ValueError, match="would both be 'rack' vertices"):
        NodesConfig.model_validate({"topologyLevels": [RACK_LEVEL, KUEUE_RACK]})


def test_a_rack_first_seen_after_the_build_is_numbered_as_a_full_build_numbers_it() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [racked("n0", "left"), racked("n1", "right")])
    cluster.run()
    cluster.tell(ADDED, racked("n2", "middle"))
    cluster.run(1.0)
    graph = scheduler.books.graph
    assert graph is not None
    vertices = graph.engine.graph.vertices
    ids = {vertices[uid].name: vertices[uid].id for uid in graph.engine.graph.by_type["rack"]}
    assert ids == {"left": 0, "right": 1, "middle": 2}
