"""Replaying allocations (``Engine.update``) and releasing part of them (``Engine.partial_cancel``)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kubeflux.jobspec import jobspec_from_yaml
from kubeflux.match.engine import Engine, EngineError, JobState, MatchOp
from kubeflux.query import RULE, QuerySession
from kubeflux.resources import NodeSpec, build_graph, graph_to_jgf
from tests.match._helpers import leaves_resource_set, node_cores_job, schedule, socket_cores_job, whole_nodes_job


def engine(match_format: str = "simple", policy: str = "first") -> Engine:
    nodes = [NodeSpec(f"node{i}", cores=4) for i in range(3)]
    return Engine(build_graph(nodes), policy=policy, match_format=match_format)


def test_update_replays_a_jgf_allocation_exactly_as_the_match_made_it() -> None:
    origin = engine("jgf")
    matched = origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2))
    assert matched.matched

    replica = engine("jgf")
    replayed = replica.update(1, matched.resources, duration=3600)

    assert replayed.matched, replayed.error
    assert replayed.resources == matched.resources
    assert schedule(replica.schedule.view) == schedule(origin.schedule.view)
    assert replica.next_jobid == 2
    assert replica.jobs[1].state == JobState.ALLOCATED


def test_update_accepts_a_decoded_document_and_emits_in_the_engine_format() -> None:
    origin = engine("jgf")
    matched = origin.match(MatchOp.ALLOCATE, node_cores_job(cores=2))
    simple = engine("simple")
    expected = simple.match(MatchOp.ALLOCATE, node_cores_job(cores=2)).resources

    replica = engine("simple")
    replayed = replica.update(7, json.loads(matched.resources), at=0, duration=3600)

    assert replayed.resources == expected
    assert replica.next_jobid == 8


def test_a_reserved_replay_is_a_reservation_from_its_start() -> None:
    origin = engine("jgf")
    rset = origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=3)).resources
    replica = engine("jgf")

    result = replica.update(1, rset, at=100, duration=50, reserve=True)

    assert result.reserved and result.at == 100
    assert replica.jobs[1].state == JobState.RESERVED
    # busy during [100, 150): a whole-machine job fits now only if it ends by then
    assert replica.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=3, duration=100)).matched
    assert not replica.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).matched


def test_update_refuses_an_over_commit_and_changes_nothing() -> None:
    origin = engine("jgf")
    rset = origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).resources
    replica = engine("jgf")
    assert replica.update(1, rset, duration=3600).matched
    before = schedule(replica.schedule.view)

    again = replica.update(2, rset, duration=3600)

    assert not again.matched
    assert again.error == "core0 is held by another job during [0, 3600)"
    assert schedule(replica.schedule.view) == before
    assert 2 not in replica.jobs


def test_update_refuses_a_vertex_the_graph_does_not_have() -> None:
    origin = engine("jgf")
    document = json.loads(origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources)
    document["graph"]["nodes"][0]["metadata"]["paths"]["containment"] = "/cluster0/node9/core0"
    replica = engine("jgf")

    result = replica.update(1, document, duration=3600, source="R.json")

    assert not result.matched
    assert result.error.startswith("R.json: node ")
    assert "/cluster0/node9/core0" in result.error
    assert schedule(replica.schedule.view) == schedule(engine().schedule.view)


def test_update_refuses_a_job_id_in_use_and_a_bad_window() -> None:
    replica = engine()
    replica.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1))
    with pytest.raises(EngineError, match="job 1 already exists"):
        replica.update(1, "{}", duration=10)
    with pytest.raises(EngineError, match="invalid time window"):
        replica.update(2, "{}", at=-1, duration=10)
    with pytest.raises(EngineError, match="invalid time window"):
        replica.update(2, "{}", duration=0)


def test_update_names_a_malformed_document() -> None:
    result = engine().update(1, "not json", duration=10, source="bad.json")
    assert not result.matched
    assert result.error.startswith("bad.json: not valid JSON")


# ---------------------------------------------------------------------------------------------------- partial


def r_lite(ranks: str) -> str:
    return json.dumps({"version": 1, "execution": {"R_lite": [{"rank": ranks, "children": {"core": "0-3"}}]}})


def test_partial_cancel_by_rank_frees_those_nodes_for_later_jobs() -> None:
    subject = engine()
    pristine = schedule(subject.schedule.view)
    assert subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=3)).matched
    assert not subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).matched

    assert subject.partial_cancel(1, r_lite("0")) is False

    allocated = subject.find("sched-now=allocated")
    assert "node0[" not in allocated and "node1[" in allocated and "node2[" in allocated
    third = subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1))
    assert third.matched and "node0[1:x]" in third.resources
    subject.cancel(third.jobid)

    assert subject.partial_cancel(1, r_lite("1-2")) is True
    assert subject.jobs[1].state == JobState.CANCELED
    assert schedule(subject.schedule.view) == pristine


def test_partial_cancel_with_the_jobs_own_jgf_releases_it_whole() -> None:
    subject = engine("jgf")
    pristine = schedule(subject.schedule.view)
    rset = subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).resources

    assert subject.partial_cancel(1, rset) is True
    assert schedule(subject.schedule.view) == pristine
    with pytest.raises(EngineError, match="nonexistent job 1"):
        subject.partial_cancel(1, rset)


def test_partial_cancel_refuses_vertices_the_job_does_not_hold_and_changes_nothing() -> None:
    subject = engine("jgf")
    first = subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources
    subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1))
    before = schedule(subject.schedule.view)

    with pytest.raises(EngineError, match="job 2 does not hold"):
        subject.partial_cancel(2, first, source="first.json")
    with pytest.raises(EngineError, match="rank 7 is not in the resource graph"):
        subject.partial_cancel(2, r_lite("7"))
    assert schedule(subject.schedule.view) == before


def test_partial_cancel_refuses_reservations() -> None:
    subject = engine()
    subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=3))
    reserved = subject.match(MatchOp.ALLOCATE_ORELSE_RESERVE, whole_nodes_job(nodes=1))
    assert reserved.reserved
    with pytest.raises(EngineError, match="reservation"):
        subject.partial_cancel(reserved.jobid, r_lite("0"))


def test_resource_query_update_and_partial_cancel_commands(tmp_path: Path) -> None:
    origin = engine("jgf")
    rset = tmp_path / "R.json"
    rset.write_text(origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=2)).resources)
    out = io.StringIO()
    session = QuerySession(engine(), out)

    session.run([f"update allocate jgf {rset} 5 0 3600", f"partial-cancel 5 jgf {rset} stats", "find jobid-tag=5"])

    assert out.getvalue() == (
        "      ---------core0[1:x]\n      ---------core1[1:x]\n      ---------core2[1:x]\n"
        "      ---------core3[1:x]\n      ------node1[1:x]\n"
        "      ---------core0[1:x]\n      ---------core1[1:x]\n      ---------core2[1:x]\n"
        "      ---------core3[1:x]\n      ------node2[1:x]\n      ---cluster0[1:s]\n"
        f"{RULE}\nINFO: JOBID=5\nINFO: RESOURCES=ALLOCATED\nINFO: SCHEDULED AT=Now\n{RULE}\n"
        f'{RULE}\nINFO: PARTIAL CANCEL PREORDER COUNT="0"\nINFO: PARTIAL CANCEL POSTORDER COUNT="0"\n{RULE}\n'
        f'{RULE}\nINFO: EXPRESSION="jobid-tag=5"\n{RULE}\n'
    )
    assert session.engine.next_jobid == 6


def test_update_refuses_a_resource_set_without_the_path_from_the_root() -> None:
    origin = engine("jgf")
    document = json.loads(origin.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources)
    document["graph"]["nodes"] = [n for n in document["graph"]["nodes"] if n["metadata"]["type"] != "cluster"]
    document["graph"]["edges"] = [e for e in document["graph"]["edges"] if e["source"] != "0"]
    replica = engine("jgf")

    result = replica.update(1, document, duration=3600, source="R.json")

    assert result.error == "R.json: no edge leaves the root cluster0: a resource set must hold the path from the root"
    assert schedule(replica.schedule.view) == schedule(engine().schedule.view)
    assert replica.update(2, {"graph": {"nodes": [], "edges": []}}, duration=10).error.endswith("holds no vertex")


def test_update_refuses_an_exclusive_vertex_another_job_holds_shared() -> None:
    replica = engine("jgf")
    shared = replica.match(MatchOp.ALLOCATE, node_cores_job(cores=2))
    assert shared.matched and '"type": "node"' in shared.resources
    whole = engine("jgf").match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources
    before = schedule(replica.schedule.view)

    result = replica.update(2, whole, duration=3600)

    assert result.error == "core2 is held by another job during [0, 3600)"
    assert schedule(replica.schedule.view) == before


def test_partial_cancel_refuses_a_resource_set_that_releases_nothing() -> None:
    subject = engine()
    subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1))
    before = schedule(subject.schedule.view)
    with pytest.raises(EngineError, match=r"ranks \[0\] hold nothing that job 1 holds"):
        subject.partial_cancel(1, r_lite("0"))
    with pytest.raises(EngineError, match="ranks \\[\\] hold nothing"):
        subject.partial_cancel(1, json.dumps({"execution": {"R_lite": []}}))
    assert schedule(subject.schedule.view) == before


def test_a_reserved_replay_starting_now_is_still_a_reservation() -> None:
    rset = engine("jgf").match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources
    replica = engine()
    result = replica.update(1, rset, duration=60, reserve=True)
    assert result.matched and not result.reserved  # starts now, as resource-query prints it
    assert replica.jobs[1].state == JobState.RESERVED
    assert "node2[1:x]" in replica.find("sched-future=reserved")
    with pytest.raises(EngineError, match="reservation"):
        replica.partial_cancel(1, rset)


# ---------------------------------------------------------------------------------------------------- by vertex


def _twins(policy: str) -> tuple[Engine, Engine]:
    """Two engines on equal graphs (cores, gpus, memory) with the same matched job 1 on them."""
    made = []
    for _ in range(2):
        nodes = [NodeSpec(f"node{i}", cores=4, gpus=2, memory=8 * 2**30) for i in range(4)]
        subject = Engine(build_graph(nodes), policy=policy)
        assert subject.match(MatchOp.ALLOCATE, node_cores_job(cores=2)).matched
        made.append(subject)
    return made[0], made[1]


def _state(subject: Engine) -> tuple[dict[str, object], list[int], list[int]]:
    return schedule(subject.schedule.view), subject.schedule.view.fp, subject.schedule.view.edge_weight


def _leaves(subject: Engine, node: str, names: tuple[str, ...]) -> list[int]:
    graph = subject.graph
    vertex = graph.vertex_at(f"/cluster0/{node}")
    assert vertex is not None
    return [uid for uid in vertex.children if graph.vertices[uid].name in names]


@pytest.mark.parametrize("policy", ["first", "lonode", "high"])
def test_replay_and_release_by_vertex_leave_the_state_the_jgf_path_leaves(policy: str) -> None:
    by_jgf, by_uid = _twins(policy)
    leaves = _leaves(by_jgf, "node2", ("core1", "core2", "gpu0"))

    jgf = by_jgf.update(2, leaves_resource_set(by_jgf.graph, leaves), duration=100)
    uid = by_uid.update_leaves(2, leaves, duration=100)
    assert jgf.matched and uid.matched
    assert _state(by_uid) == _state(by_jgf)

    partly = leaves[:1]
    assert by_jgf.partial_cancel(2, leaves_resource_set(by_jgf.graph, partly)) is False
    assert by_uid.release_vertices(2, partly) is False
    assert _state(by_uid) == _state(by_jgf)

    rest = leaves[1:]
    assert by_jgf.partial_cancel(2, leaves_resource_set(by_jgf.graph, rest)) is True
    assert by_uid.release_vertices(2, rest) is True
    assert _state(by_uid) == _state(by_jgf)

    later = node_cores_job(cores=2)
    assert (
        by_uid.match(MatchOp.ALLOCATE, later, now=6).resources == by_jgf.match(MatchOp.ALLOCATE, later, now=6).resources
    )


def test_a_replay_by_vertex_refuses_a_busy_vertex_and_changes_nothing() -> None:
    subject, pristine = _twins("lonode")
    held = [uid for uid, spans in subject.schedule.allocations.items() if spans]
    before = _state(subject)

    refused = subject.update_leaves(2, held[:1], duration=100, source="pod web")

    assert not refused.matched
    assert refused.error.startswith("pod web: core")
    assert "held by another job" in refused.error
    assert _state(subject) == before == _state(pristine)
    with pytest.raises(EngineError, match="does not hold"):
        subject.release_vertices(1, _leaves(subject, "node3", ("core0",)))


def test_a_replay_that_started_by_now_is_an_allocation_and_a_later_one_a_reservation() -> None:
    subject, _ = _twins("lonode")
    leaves = _leaves(subject, "node1", ("core0",))
    assert subject.update_leaves(2, leaves, at=50, duration=10, now=60).matched
    assert subject.jobs[2].state == JobState.ALLOCATED
    assert subject.update_leaves(3, leaves, at=100, duration=10, now=60).reserved
    assert subject.jobs[3].state == JobState.RESERVED


@pytest.mark.parametrize("by", ["vertex", "jgf"])
def test_a_partial_release_across_sockets_frees_a_core_on_each_socket(by: str) -> None:
    subject = Engine(build_graph([NodeSpec("node0", cores=8, sockets=2)]), policy="low")
    assert subject.match(MatchOp.ALLOCATE, socket_cores_job(cores=4)).matched
    graph = subject.graph
    released = [graph.by_path["/cluster0/node0/socket0/core0"], graph.by_path["/cluster0/node0/socket1/core7"]]
    if by == "vertex":
        assert subject.release_vertices(1, released) is False
    else:
        assert subject.partial_cancel(1, leaves_resource_set(graph, released)) is False

    one_per_socket = subject.match(MatchOp.ALLOCATE, socket_cores_job(cores=1))
    assert one_per_socket.matched
    assert "core0[1:x]" in one_per_socket.resources and "core7[1:x]" in one_per_socket.resources


def test_first_weighs_nodes_by_their_free_cores_now_after_a_replay_by_vertex() -> None:
    subject = Engine(build_graph([NodeSpec(f"node{i}", cores=4) for i in range(2)]), policy="first")
    assert subject.update_leaves(
        1, _leaves(subject, "node1", ("core0", "core1", "core2")), at=100, duration=1000, now=100
    )
    job = node_cores_job(duration=1000)
    placed = [subject.match(MatchOp.ALLOCATE, job, now=100).resources for _ in range(2)]
    # node0 has 4 free cores, node1 one: first's explore goes to the emptier node both times
    assert all("node0[" in text and "node1[" not in text for text in placed)


def test_a_replay_or_release_naming_a_vertex_the_graph_lacks_is_refused_clearly() -> None:
    subject, _ = _twins("lonode")
    before = _state(subject)
    for uid in (10**6, -2):
        refused = subject.update_leaves(2, [uid], duration=100, source="pod web")
        assert not refused.matched
        assert refused.error == f"pod web: no vertex with uid {uid} in the resource graph"
        with pytest.raises(EngineError, match=f"no vertex with uid {uid}"):
            subject.release_vertices(1, [uid])
    assert _state(subject) == before


_WHOLE_NODE = jobspec_from_yaml(
    "version: 9999\nresources: [{type: node, count: 1, exclusive: true}]\n"
    "attributes: {system: {duration: 600}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
)


def _jgf_of(subject: Engine, *paths: str) -> str:
    graph = subject.graph
    return json.dumps(graph_to_jgf(graph, [graph.by_path[path] for path in paths]))


def test_a_node_released_without_the_cores_below_it_stays_in_use_until_they_go() -> None:
    """A JGF partial cancel may name a node a job holds whole but not the cores it holds there: the job no longer
    holds the node whole but still uses it, so a job asking for a whole node gets another one (it used to get
    this one, and crash recording its busy cores). Once the cores go too, the job is over and the node free."""
    subject = engine(policy="low")
    assert "node0[1:x]" in subject.match(MatchOp.ALLOCATE, whole_nodes_job(nodes=1)).resources

    assert subject.partial_cancel(1, _jgf_of(subject, "/cluster0/node0")) is False
    whole = subject.match(MatchOp.ALLOCATE, _WHOLE_NODE)
    assert whole.matched and "node1[1:x]" in whole.resources and "node0" not in whole.resources

    cores = [f"/cluster0/node0/core{i}" for i in range(4)]
    assert subject.partial_cancel(1, _jgf_of(subject, *cores)) is True
    assert subject.jobs[1].state == JobState.CANCELED
    again = subject.match(MatchOp.ALLOCATE, _WHOLE_NODE)
    assert again.matched and "node0[1:x]" in again.resources


def test_a_node_whose_cores_are_released_stays_in_use_while_the_job_holds_its_gpu() -> None:
    """Releasing every core a job holds on a node drains the node's aggregate filter, which counts cores, not
    gpus: the job still holds the node's gpu, so a job asking for a whole node must get another node (it used to
    get this one, and crash recording the busy gpu)."""
    subject = Engine(build_graph([NodeSpec(f"node{i}", cores=2, gpus=1) for i in range(3)]), policy="low")
    assert subject.match(MatchOp.ALLOCATE, node_cores_job(nodes=2, cores=2, gpus=1)).matched

    assert subject.partial_cancel(1, _jgf_of(subject, "/cluster0/node0/core0", "/cluster0/node0/core1")) is False
    whole = subject.match(MatchOp.ALLOCATE, _WHOLE_NODE)
    assert whole.matched and "node2[1:x]" in whole.resources and "node0" not in whole.resources

    subject.cancel(1)
    again = subject.match(MatchOp.ALLOCATE, _WHOLE_NODE)
    assert again.matched and "node0[1:x]" in again.resources


def test_a_replay_under_a_node_exclusive_policy_refuses_a_node_another_job_uses() -> None:
    """Under ``lonodex`` a replay holds its nodes whole, as a match does: onto a node of which another job still
    holds a core it is refused with a clear error and changes nothing (it raised PlannerBusyError half way through
    the update walk), and it still replays onto a free node."""
    subject = Engine(build_graph([NodeSpec(f"node{i}", cores=4) for i in range(2)]), policy="lonodex")
    assert "node0[1:x]" in subject.match(MatchOp.ALLOCATE, node_cores_job(cores=1)).resources
    released = ["/cluster0/node0", *(f"/cluster0/node0/core{i}" for i in (1, 2, 3))]
    assert subject.partial_cancel(1, _jgf_of(subject, *released)) is False
    before = schedule(subject.schedule.view)

    graph = subject.graph
    refused = subject.update_leaves(2, [graph.by_path["/cluster0/node0/core1"]], duration=100, source="pod web")
    assert not refused.matched
    assert refused.error == (
        "pod web: node0 is used by another job during [0, 100), and under the lonodex policy a replay holds its "
        "nodes whole"
    )
    assert schedule(subject.schedule.view) == before
    assert subject.update_leaves(2, [graph.by_path["/cluster0/node1/core1"]], duration=100).matched


def test_a_replay_under_a_node_exclusive_policy_holds_the_node_whole_as_a_match_does() -> None:
    """Under ``lonodex`` a replay naming one core of a node records what a match of that node records: a span on
    every vertex below it, not only on the core it names. Before, the aggregate filters counted the whole node but
    only the named core was planned, so after a release by rank the filters kept a phantom use and the second
    match after it raised PlannerBusyError."""
    nodes = [NodeSpec(f"node{i}", cores=4) for i in range(2)]
    matched = Engine(build_graph(nodes), policy="lonodex")
    assert "node0[1:x]" in matched.match(MatchOp.ALLOCATE, node_cores_job(cores=1)).resources
    replayed = Engine(build_graph(nodes), policy="lonodex")
    core = replayed.graph.by_path["/cluster0/node0/core0"]
    assert replayed.update_leaves(1, [core], duration=3600).matched
    assert schedule(replayed.schedule.view) == schedule(matched.schedule.view)

    assert replayed.partial_cancel(1, json.dumps({"execution": {"R_lite": [{"rank": "0", "children": {}}]}}))
    placed = [replayed.match(MatchOp.ALLOCATE, node_cores_job(cores=1)).resources for _ in range(2)]
    assert ["node0[1:x]" in placed[0], "node1[1:x]" in placed[1]] == [True, True]
    assert not replayed.match(MatchOp.ALLOCATE, node_cores_job(cores=1)).matched
