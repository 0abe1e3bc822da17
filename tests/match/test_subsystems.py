"""Matching over other subsystems (``-S PA``, ``-S C+PA``): the dominant walk and the auxiliary up-walks."""

from __future__ import annotations

import pytest

from kubeflux.jobspec import Jobspec, jobspec_from_yaml
from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.subsystems import SubsystemError, SubsystemTraverser, parse_subsystems
from kubeflux.match.writers import JgfWriter
from kubeflux.resources.graph import CONTAINMENT, Graph, Status

POWER = "power"


def power_graph(pdus: int = 2, nodes_per_pdu: int = 2) -> Graph:
    """cluster0 -> rack<r> -> {pdu<r>, node<i> -> core[2]} in containment, and in power
    powerpanel0 -> pdu<r> -> {node<i> -> power0 (10 units), power0 (10 units)}: pdus and nodes are shared
    vertices, and a pdu is a containment leaf with power out-edges (as in Fluxion's power.graphml)."""
    graph = Graph()
    cluster = graph.add_vertex("cluster", "cluster", "cluster0", 0, 0, paths={CONTAINMENT: "/cluster0"})
    graph.roots[CONTAINMENT] = cluster.uid
    racks = graph.add_children(cluster.uid, "rack", "rack", range(pdus))
    panel = graph.add_vertex(
        "powerpanel", "powerpanel", "powerpanel0", 0, len(graph.vertices), paths={POWER: "/powerpanel0"}
    )
    graph.roots[POWER] = panel.uid
    for r, rack in enumerate(racks):
        (pdu,) = graph.add_children(rack, "pdu", "pdu", [r])
        graph.add_edge(panel.uid, pdu, POWER, "supplies_to")
        graph.set_path(graph.vertices[pdu], POWER, f"/powerpanel0/pdu{r}")
        for node in graph.add_children(rack, "node", "node", range(r * nodes_per_pdu, (r + 1) * nodes_per_pdu)):
            graph.add_children(node, "core", "core", range(2))
            graph.add_edge(pdu, node, POWER, "supplies_to")
            graph.set_path(graph.vertices[node], POWER, f"/powerpanel0/pdu{r}/{graph.vertices[node].name}")
            graph.add_children(
                node, "power", "power", [0], size=10, subsystem=POWER, edge_subsystem=POWER, relation="supplies_to"
            )
        graph.add_children(
            pdu, "power", "power", [0], size=10, subsystem=POWER, edge_subsystem=POWER, relation="supplies_to"
        )
    return graph


def job(resources: str) -> Jobspec:
    return jobspec_from_yaml(
        "version: 9999\nresources:\n"
        + resources
        + "\nattributes:\n  system:\n    duration: 3600\n"
        + "tasks:\n  - command: [app]\n    slot: default\n    count:\n      per_slot: 1\n"
    )


PDU_POWER_AND_NODE = job(
    """  - type: pdu
    count: 1
    with:
      - type: power
        count: 5
        exclusive: true
      - type: node
        count: 1
        exclusive: true"""
)
NODE = job(
    """  - type: node
    count: 1"""
)
SLOT_NODE = job(
    """  - type: slot
    count: 1
    label: default
    with:
      - type: node
        count: 1"""
)


NODE_CORE = job(
    """  - type: node
    count: 1
    with:
      - type: core
        count: 1"""
)
NODE_X = job(
    """  - type: node
    count: 1
    exclusive: true"""
)
NODE_CORE_X = job(
    """  - type: node
    count: 1
    with:
      - type: core
        count: 1
        exclusive: true"""
)


def lines(text: str) -> list[str]:
    return [line.strip(" -") for line in text.splitlines()]


# ---------------------------------------------------------------------- -S names


def test_subsystem_names_follow_resource_query() -> None:
    assert parse_subsystems("CA") == (CONTAINMENT,)
    assert parse_subsystems("PA") == (POWER,)
    assert parse_subsystems("C+PA") == (CONTAINMENT, POWER)
    assert parse_subsystems("c+pa") == (CONTAINMENT, POWER)
    assert parse_subsystems("ALL")[0] == CONTAINMENT
    with pytest.raises(SubsystemError):
        parse_subsystems("C+Pa")
    with pytest.raises(SubsystemError):
        parse_subsystems("XYZ")


def test_a_subsystem_missing_from_the_graph_is_refused() -> None:
    graph = power_graph()
    del graph.roots[POWER]
    with pytest.raises(EngineError, match="no power subsystem"):
        Engine(graph, subsystems="PA")
    with pytest.raises(EngineError, match="only the containment"):
        Engine(power_graph(), subsystems="PA", traverser="flexible")


def test_containment_keeps_the_plain_traverser() -> None:
    assert type(Engine(power_graph()).traverser).__name__ == "Traverser"
    assert isinstance(Engine(power_graph(), subsystems="PA").traverser, SubsystemTraverser)


# ---------------------------------------------------------------------- the dominant walk (-S PA)


def test_power_walk_starts_at_the_power_root_and_prints_power_depths() -> None:
    engine = Engine(power_graph(), policy="low", subsystems="PA")
    result = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert result.matched
    assert result.resources.splitlines() == [
        "      ------------power0[10:x]",  # node0's power, emitted whole because node0 is exclusive
        "      ---------node0[1:x]",
        "      ---------power0[10:x]",  # pdu0's power
        "      ------pdu0[1:s]",
        "      ---powerpanel0[1:s]",
    ]


def test_busy_power_moves_the_job_to_another_pdu() -> None:
    """pdu0's power is held by job 1, so job 2 goes to pdu1 although node1 (below pdu0) is free: the choice
    follows the power subsystem, which a containment walk never sees."""
    engine = Engine(power_graph(), policy="low", subsystems="PA")
    engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    second = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert second.matched
    assert "node2[1:x]" in lines(second.resources) and "pdu1[1:s]" in lines(second.resources)
    third = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert not third.matched  # both pdus' power is taken
    engine.cancel(1)
    fourth = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert "node0[1:x]" in lines(fourth.resources) and "pdu0[1:s]" in lines(fourth.resources)


@pytest.mark.parametrize("policy", ["high", "first"])
def test_high_policies_take_the_last_pdu_first(policy: str) -> None:
    engine = Engine(power_graph(), policy=policy, subsystems="PA")
    first = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert "node3[1:x]" in lines(first.resources) and "pdu1[1:s]" in lines(first.resources)
    second = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert "node1[1:x]" in lines(second.resources) and "pdu0[1:s]" in lines(second.resources)


def test_the_jgf_writer_shows_power_edges() -> None:
    engine = Engine(power_graph(), policy="low", subsystems="PA", match_format="jgf")
    result = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    assert '"subsystem": "power"' in result.resources
    assert isinstance(engine.writer, JgfWriter)


def test_a_cross_edge_of_the_dominant_subsystem_is_not_walked_twice() -> None:
    """node0 is also fed by pdu1: the walk reaches it through pdu0 first (depth first, in edge order) and keeps
    that parent, as Fluxion's colouring of visited vertices does."""
    graph = power_graph()
    pdu1 = graph.vertex_at("/powerpanel0/pdu1")
    node0 = graph.vertex_at("/powerpanel0/pdu0/node0")
    assert pdu1 is not None and node0 is not None
    graph.add_edge(pdu1.uid, node0.uid, POWER, "supplies_to")
    engine = Engine(graph, policy="high", subsystems="PA")
    below_pdu1 = [graph.vertices[target].name for _, target in engine.schedule.view.children(pdu1.uid)]
    assert "node0" not in below_pdu1
    assert sorted(below_pdu1) == ["node2", "node3", "power0"]


def test_find_walks_the_dominant_subsystem() -> None:
    engine = Engine(power_graph(), subsystems="PA")
    found = lines(engine.find("status=up"))
    assert found[-1] == "powerpanel0[1:x]"
    assert "pdu1[1:x]" in found and "node3[1:x]" in found
    assert not any(name.startswith(("cluster", "rack", "core")) for name in found)


# ---------------------------------------------------------------------- auxiliary up-walks (-S C+PA)


def test_aux_candidates_without_a_score_make_the_request_unsatisfiable() -> None:
    """A pdu is a containment leaf with power out-edges. Its up-walk finds its nodes and its power, but it has no
    dominant child, so their candidates carry the scoring's initial score (-1): unqualified. Merged up to the
    root (no vertex on the way chooses among node candidates), they fail Fluxion's ``has_remaining``. (The node
    itself chooses its core, so its own up-walk's candidates stay below it.) Under ``first`` the walk stops at
    the first rack's first node, before it reaches the pdu, and the request is satisfiable."""
    assert Engine(power_graph(), policy="low", subsystems="CA").match(MatchOp.SATISFIABILITY, NODE_CORE).satisfiable
    assert Engine(power_graph(), policy="first", subsystems="C+PA").match(MatchOp.SATISFIABILITY, NODE_CORE).satisfiable
    engine = Engine(power_graph(), policy="low", subsystems="C+PA")
    assert not engine.match(MatchOp.SATISFIABILITY, NODE_CORE).satisfiable
    result = engine.match(MatchOp.ALLOCATE_WITH_SATISFIABILITY, NODE_CORE)
    assert not result.matched and not result.satisfiable


def test_a_slot_match_drops_the_aux_candidates_below_it() -> None:
    """The rack is the slot: its slot groups replace what its children passed up, auxiliary candidates included."""
    engine = Engine(power_graph(), policy="low", subsystems="C+PA")
    result = engine.match(MatchOp.ALLOCATE, SLOT_NODE)
    assert result.matched
    assert lines(result.resources) == ["node0[1:x]", "rack0[1:s]", "cluster0[1:s]"]


def test_the_up_walk_starts_only_at_vertices_the_walk_accepts() -> None:
    """With both pdus down the dominant walk prunes them before their up-walks, so no unqualified auxiliary
    candidate reaches the root and the node request is allocated."""
    engine = Engine(power_graph(), policy="low", subsystems="C+PA")
    assert not engine.match(MatchOp.ALLOCATE, NODE_CORE_X).matched
    for path in ("/cluster0/rack0/pdu0", "/cluster0/rack1/pdu1"):
        engine.set_status(path, Status.DOWN)
    assert engine.match(MatchOp.ALLOCATE, NODE_CORE_X).matched


def test_aux_targets_that_fail_prune_add_no_candidate() -> None:
    """node0 is a containment leaf fed power by power0: its up-walk adds an unqualified power candidate (node0 has
    no dominant child to lend it a score), which fails the request at the root. A down power0 fails ``prune``
    in the up-walk and adds no candidate at all, so the allocation goes through; a satisfiability pass ignores
    status, so there it still counts."""
    graph = Graph()
    cluster = graph.add_vertex("cluster", "cluster", "cluster0", 0, 0, paths={CONTAINMENT: "/cluster0"})
    graph.roots[CONTAINMENT] = cluster.uid
    (node,) = graph.add_children(cluster.uid, "node", "node", [0])
    panel = graph.add_vertex("powerpanel", "powerpanel", "powerpanel0", 0, 2, paths={POWER: "/powerpanel0"})
    graph.roots[POWER] = panel.uid
    graph.add_edge(panel.uid, node, POWER, "supplies_to")
    graph.set_path(graph.vertices[node], POWER, "/powerpanel0/node0")
    graph.add_children(node, "power", "power", [0], size=10, subsystem=POWER, edge_subsystem=POWER)
    assert Engine(graph, policy="low", subsystems="CA").match(MatchOp.ALLOCATE, NODE_X).matched
    engine = Engine(graph, policy="low", subsystems="C+PA")
    assert not engine.match(MatchOp.ALLOCATE, NODE_X).matched
    engine.set_status("/powerpanel0/node0/power0", Status.DOWN)
    assert engine.match(MatchOp.ALLOCATE, NODE_X).matched
    assert not engine.match(MatchOp.SATISFIABILITY, NODE_X).satisfiable


def test_a_power_allocation_replays_and_other_subsystems_refuse_what_they_cannot_walk() -> None:
    engine = Engine(power_graph(), policy="low", subsystems="PA", match_format="jgf")
    first = engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE)
    engine.cancel(first.jobid)
    replayed = engine.update(5, first.resources, at=0, duration=3600)
    assert replayed.matched and replayed.resources == first.resources
    assert "pdu1" in engine.match(MatchOp.ALLOCATE, PDU_POWER_AND_NODE).resources
    with pytest.raises(EngineError, match="dominant"):
        engine.partial_cancel(5, first.resources)
    with pytest.raises(EngineError, match="dominant"):
        engine.remove_path("/cluster0/rack0")


@pytest.mark.parametrize("policy", ["first", "low"])
def test_a_slot_over_a_vertex_without_children_in_the_dominant_tree_fails_cleanly(policy: str) -> None:
    """-S C+PA: a slot asking for power and a node below the containment root finds no children to explore at a
    pdu; ``first`` stopped with an IndexError there instead of moving on."""
    spec = job(
        """  - type: slot
    count: 2
    label: default
    with:
      - type: power
        count: 2
        exclusive: true
      - type: node
        count: 1
        exclusive: true
        with:
          - type: power
            count: 2
            exclusive: true"""
    )
    answers = []
    for name in ("first", policy):
        engine = Engine(power_graph(), policy=name, subsystems="C+PA")
        answers.append([engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, spec).matched for _ in range(2)])
    assert answers[0] == answers[1]


ALL_NODES = job(
    """  - type: slot
    count: 4
    label: default
    with:
      - type: node
        count: 1"""
)


@pytest.mark.parametrize("filters", ["ALL:core,ALL:node", "ALL:core", "ALL:core,ALL:gpu"])
def test_a_reservation_walks_the_jobs_ends_when_the_root_tracks_no_type_of_its_tree(filters: str) -> None:
    """The power tree has no core, so with ``-p ALL:core`` the root keeps no aggregate filter; Fluxion's root
    keeps the core count at 0, with a 0-unit span per job, so its reservations start where jobs end, as they do
    when the root counts nodes."""
    engine = Engine(power_graph(), policy="low", subsystems="PA", prune_filters=filters)
    assert engine.match(MatchOp.ALLOCATE, ALL_NODES).matched

    reserved = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, ALL_NODES)
    later = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, NODE_X)
    cores = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, NODE_CORE)  # no core in the power tree

    assert (reserved.matched, reserved.at, later.matched, later.at) == (True, 3600, True, 7200)
    assert (cores.matched, cores.satisfiable, cores.error) == (False, False, "")
    engine.cancel(1)
    assert engine.match(MatchOp.ALLOCATE, NODE_X).matched


def test_a_reservation_is_refused_clearly_when_the_root_tracks_no_type_at_all() -> None:
    """``-p node:core`` gives the power root nothing to track: Fluxion looks its filter up regardless and
    resource-query aborts (std::out_of_range)."""
    engine = Engine(power_graph(), subsystems="PA", prune_filters="node:core")
    assert engine.match(MatchOp.ALLOCATE, ALL_NODES).matched

    refused = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, ALL_NODES)

    assert not refused.matched
    assert refused.error == (
        "cannot reserve: the root powerpanel0 has no aggregate filter to find a start time in; "
        "--prune-filters names no type for a powerpanel to track (e.g. ALL:node)"
    )
    engine.cancel(1)
    assert engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, ALL_NODES).matched
