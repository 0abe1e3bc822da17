"""Growing (``Engine.attach``) and shrinking (``Engine.remove_path``/``remove_ranks``) a live graph."""

from __future__ import annotations

import json

import pytest

from kubeflux.jobspec import Jobspec, jobspec_from_yaml
from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.meta import Errno
from kubeflux.resources import NodeSpec, build_graph, graph_to_jgf
from kubeflux.resources.jgf import load_jgf
from tests.match._helpers import whole_nodes_job


def nodes(count: int) -> list[NodeSpec]:
    return [NodeSpec(f"node{i}", cores=4) for i in range(count)]


def root_usage(engine: Engine) -> str:
    """The root's ``agfilter`` line of ``find`` (JGF writer)."""
    found = engine.find("agfilter=t")
    return found[found.rindex('"agfilter"') :].split("}")[0]


def test_attached_nodes_are_matched_and_counted() -> None:
    bigger = build_graph(nodes(3))
    node2 = bigger.vertex_at("/cluster0/node2")
    assert node2 is not None
    subtree = [0, node2.uid, *node2.children]
    engine = Engine(build_graph(nodes(2)), match_format="jgf")
    assert engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).matched

    added = engine.attach(graph_to_jgf(bigger, subtree), source="node2.json")

    assert [engine.graph.vertices[uid].name for uid in added] == ["node2", "core0", "core1", "core2", "core3"]
    assert root_usage(engine) == '"agfilter": {"core": "used:8, total:12", "node": "used:2, total:3"'
    third = engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1))
    assert third.matched and "/cluster0/node2" in third.resources
    assert engine.schedule.view.nodes_up == 3


def test_attach_refuses_a_document_that_does_not_fit() -> None:
    engine = Engine(build_graph(nodes(1)))
    with pytest.raises(EngineError, match="second root"):
        engine.attach(graph_to_jgf(build_graph(nodes(1), cluster="other")), source="other.json")


def test_removing_an_allocated_node_releases_its_job_there() -> None:
    engine = Engine(build_graph(nodes(3)), match_format="jgf")
    first = engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2))
    assert first.matched and "/cluster0/node2" in first.resources and "/cluster0/node1" in first.resources

    removed = engine.remove_path("/cluster0/node2")

    assert engine.graph.vertices[removed[0]].name == "node2" and len(removed) == 5
    assert root_usage(engine) == '"agfilter": {"core": "used:4, total:8", "node": "used:1, total:2"'
    assert not engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).matched
    engine.cancel(first.jobid)
    assert root_usage(engine) == '"agfilter": {"core": "used:0, total:8", "node": "used:0, total:2"'
    assert engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).matched
    assert engine.schedule.view.nodes_up == 2


def test_removing_ranks_and_bad_targets() -> None:
    engine = Engine(build_graph(nodes(3)))
    assert len(engine.remove_ranks([0, 1])) == 10
    assert engine.graph.vertex_at("/cluster0/node0") is None
    assert engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).matched
    with pytest.raises(EngineError, match="rank 0 is not in the resource graph"):
        engine.remove_ranks([0])
    with pytest.raises(EngineError, match="no vertex at /cluster0/node9"):
        engine.remove_path("/cluster0/node9")
    with pytest.raises(EngineError, match="root of the resource graph"):
        engine.remove_path("/cluster0")


def test_a_graph_with_every_node_removed_answers_matches_and_grows_again() -> None:
    """With every node removed, nothing is left below the root to track, so it has no aggregate filter: a match
    that may reserve is unsatisfiable (Fluxion answers so too; its root keeps a stale filter), where it used to
    raise KeyError. A node attached again is matched."""
    core = jobspec_from_yaml(
        "version: 9999\nresources: [{type: core, count: 1, exclusive: true}]\n"
        "attributes: {system: {duration: 600}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )
    engine = Engine(build_graph(nodes(2)))
    engine.remove_ranks([0, 1])
    for op in (MatchOp.ALLOCATE_ORELSE_RESERVE, MatchOp.ALLOCATE_WITH_SATISFIABILITY, MatchOp.SATISFIABILITY):
        result = engine.match(op, core)
        assert not result.matched and result.errno == Errno.ENODEV and not result.satisfiable
    busy = engine.match(MatchOp.ALLOCATE, core)
    assert not busy.matched and busy.errno == Errno.EBUSY

    bigger = build_graph(nodes(3))
    node2 = bigger.vertex_at("/cluster0/node2")
    assert node2 is not None
    engine.attach(graph_to_jgf(bigger, [0, node2.uid, *node2.children]), source="node2.json")
    again = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, core)
    assert again.matched and "node2" in again.resources


def _racks(count: int) -> Jobspec:
    return jobspec_from_yaml(
        f"version: 9999\nresources: [{{type: rack, count: {count}, exclusive: true}}]\n"
        "attributes: {system: {duration: 100}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


def test_a_job_on_a_vertex_that_lost_its_children_is_cancelled_cleanly() -> None:
    """A rack whose only node is removed while a job holds the rack becomes a leaf; a job reserved on it then must
    cancel cleanly (it raised IndexError: the rack's span bookkeeping for cached evaluations still had the first
    job's entries but never got the second's), and the rack is reserved exactly as before afterwards."""
    engine = Engine(build_graph([NodeSpec("n0", cores=2, rack="r0"), NodeSpec("n1", cores=2, rack="r1")]), policy="low")
    assert engine.match(MatchOp.ALLOCATE, _racks(2)).matched
    engine.remove_path("/cluster0/r0/n0")

    reserved = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, _racks(1))
    assert reserved.reserved and reserved.at == 100 and "r0[1:x]" in reserved.resources
    engine.cancel(reserved.jobid)
    again = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, _racks(1))
    assert again.at == 100 and again.resources == reserved.resources
    engine.cancel(again.jobid)
    engine.cancel(1)
    both = engine.match(MatchOp.ALLOCATE, _racks(2))
    assert both.matched and both.at == 0 and "r0[1:x]" in both.resources and "r1[1:x]" in both.resources


def test_removing_a_rank_releases_what_jobs_hold_below_it_whatever_its_rank() -> None:
    """In a JGF only the nodes carry a rank (as in Fluxion's tiny.json): removing rank 0 removes node0 with its
    unranked cores, so a job holding them must release them all first. It released node0 only, and its cancel
    later raised KeyError on the removed vertices' records."""
    document = graph_to_jgf(build_graph(nodes(2)))
    for record in document["graph"]["nodes"]:
        if record["metadata"]["type"] != "node":
            record["metadata"]["rank"] = -1
    engine = Engine(load_jgf(json.dumps(document)), match_format="jgf")
    assert engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).matched

    engine.remove_ranks([0])
    assert root_usage(engine) == '"agfilter": {"core": "used:4, total:4", "node": "used:1, total:1"'
    engine.cancel(1)
    assert root_usage(engine) == '"agfilter": {"core": "used:0, total:4", "node": "used:0, total:1"'
    assert engine.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).matched


def test_a_jobspec_matched_again_after_attach_counts_the_types_the_filters_track_now() -> None:
    """The engine primes a jobspec's aggregate counts once, and again when attach makes the filters track a new
    type (here gpus, which the first graph lacked), so the pruning by aggregates sees the gpus it asks for."""
    gpu_job = jobspec_from_yaml(
        "version: 9999\nresources: [{type: node, count: 1, with: "
        "[{type: slot, count: 1, label: default, with: [{type: core, count: 1}, {type: gpu, count: 1}]}]}]\n"
        "attributes: {system: {duration: 60}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )
    engine = Engine(build_graph(nodes(1)))
    assert not engine.match(MatchOp.ALLOCATE, gpu_job).matched
    bigger = build_graph([*nodes(1), NodeSpec("node1", cores=4, gpus=2)])
    node1 = bigger.vertex_at("/cluster0/node1")
    assert node1 is not None
    engine.attach(graph_to_jgf(bigger, [0, node1.uid, *node1.children]), source="node1.json")

    matched = engine.match(MatchOp.ALLOCATE, gpu_job)

    assert matched.matched and "gpu" in matched.resources
    (node,) = engine._working_copy(gpu_job).requests
    assert node.user_data == {"core": 1, "gpu": 1}


def test_attaching_a_node_without_children_makes_the_root_count_every_node() -> None:
    """A childless node is a leaf, and a leaf type the filters do not track yet is tracked at the root. The root
    must then count every node, also those its rack summed before the leaf was found: counting only the new one
    (total 1), the first job holding two nodes made the update walk raise PlannerRangeError."""
    racked = [NodeSpec(f"node{i}", cores=4, rack="r0") for i in range(2)]
    engine = Engine(build_graph(racked), policy="firstnodex", prune_filters="ALL:core", match_format="jgf")
    bare = {
        "graph": {
            "nodes": [
                {
                    "id": "0",
                    "metadata": {
                        "type": "cluster",
                        "name": "cluster0",
                        "id": 0,
                        "uniq_id": 0,
                        "rank": -1,
                        "size": 1,
                        "paths": {"containment": "/cluster0"},
                    },
                },
                {
                    "id": "99",
                    "metadata": {
                        "type": "node",
                        "name": "bare99",
                        "basename": "bare",
                        "id": 99,
                        "uniq_id": 99,
                        "rank": 9,
                        "size": 1,
                        "paths": {"containment": "/cluster0/bare99"},
                    },
                },
            ],
            "edges": [{"source": "0", "target": "99", "metadata": {"subsystem": "containment"}}],
        }
    }
    engine.attach(bare, source="bare.json")

    assert root_usage(engine) == '"agfilter": {"core": "used:0, total:8", "node": "used:0, total:3"'
    two_nodes = jobspec_from_yaml(
        "version: 9999\nresources: [{type: node, count: 2, with: "
        "[{type: slot, count: 1, label: default, with: [{type: core, count: 4}]}]}]\n"
        "attributes: {system: {duration: 60}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )
    both = engine.match(MatchOp.ALLOCATE, two_nodes)
    assert both.matched
    assert root_usage(engine) == '"agfilter": {"core": "used:8, total:8", "node": "used:2, total:3"'
