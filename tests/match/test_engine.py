"""Engine-level behaviour of a match that Fluxion's resource-query defines outside the walks' details."""

from __future__ import annotations

from kubeflux.jobspec import Jobspec, jobspec_from_yaml
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.match.meta import Errno, JobMeta, PruningFilters
from kubeflux.match.scoring import Scoring
from kubeflux.match.visit import Visit
from kubeflux.resources import NodeSpec, build_graph


def _job(resources: str) -> Jobspec:
    return jobspec_from_yaml(
        f"version: 9999\nresources: {resources}\nattributes: {{system: {{duration: 600}}}}\n"
        "tasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )


def test_a_match_that_would_hold_nothing_fails_as_in_fluxion() -> None:
    """A slot under a node whose cores sit below sockets: the slot's choice lies below a vertex no mark leads to,
    so the update walk records nothing. Fluxion's update then fails the match (EBUSY); it must not succeed holding
    nothing. The same request one level up (the slot at the top) and shapes that name the sockets still match."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=4, sockets=2) for i in range(2)]), policy="low")
    hollow = engine.match(
        MatchOp.ALLOCATE,
        _job(
            "[{type: node, count: 1, with: [{type: slot, count: 1, label: default, with: [{type: core, count: 1}]}]}]"
        ),
    )
    assert not hollow.matched and hollow.errno == Errno.EBUSY and hollow.resources == ""
    assert hollow.jobid not in engine.jobs
    assert engine.find("sched-now=allocated") == ""
    top = engine.match(
        MatchOp.ALLOCATE, _job("[{type: slot, count: 1, label: default, with: [{type: core, count: 1}]}]")
    )
    assert top.matched and "core0[1:x]" in top.resources and "socket0[1:s]" in top.resources
    sockets = engine.match(
        MatchOp.ALLOCATE,
        _job(
            "[{type: node, count: 1, with: [{type: slot, count: 1, label: default, with: [{type: socket, count: 1}]}]}]"
        ),
    )
    assert sockets.matched and "socket" in sockets.resources


def test_a_request_with_nothing_exclusive_fails_as_in_fluxion() -> None:
    """No slot and no ``exclusive: true``: nothing is held, so the match fails rather than succeed empty."""
    engine = Engine(build_graph([NodeSpec("n0", cores=2)]), policy="first")
    assert engine.match(MatchOp.ALLOCATE, _job("[{type: node, count: 1}]")).errno == Errno.EBUSY
    assert engine.match(MatchOp.ALLOCATE, _job("[{type: node, count: 1, exclusive: true}]")).matched


def test_a_node_exclusive_policy_passes_over_a_node_another_job_holds_in_part() -> None:
    """Under ``lonodex`` a match holds its node whole, every vertex below it included; a node of which another job
    holds a core (a replayed pod, or a job matched under another policy: the scheduler switches policy per pod)
    must be passed over, not chosen and then found busy half way through the update walk. Once that job ends,
    the node is free again."""
    engine = Engine(build_graph([NodeSpec("n0", cores=4), NodeSpec("n1", cores=4)]), policy="lonodex")
    core = engine.graph.vertex_at("/cluster0/n0/core1")
    assert core is not None
    assert engine.update_leaves(1, [core.uid], duration=600).matched
    one_core = _job("[{type: core, count: 1}]")
    first = engine.match(MatchOp.ALLOCATE, one_core)
    assert first.matched and "n1[1:x]" in first.resources and "n0" not in first.resources
    second = engine.match(MatchOp.ALLOCATE, one_core)
    assert not second.matched and second.errno == Errno.EBUSY
    engine.cancel(1)
    third = engine.match(MatchOp.ALLOCATE, one_core)
    assert third.matched and "n0[1:x]" in third.resources


def _first_leaves_scores_descend(core_ids: list[int]) -> tuple[bool, list[int]]:
    """Explore one socket's cores (given these ids) as ``first`` does in one loop: whether the candidates were
    found in strictly descending score order, and the core ids a best-k choice of all of them puts first."""
    graph = build_graph([NodeSpec("n0", cores=len(core_ids), sockets=1)])
    for uid, core_id in zip(graph.by_type["core"], core_ids, strict=True):
        graph.vertices[uid].id = core_id
    engine = Engine(graph, policy="first")
    job = jobspec_from_yaml(
        "version: 9999\nresources: [{type: slot, count: 1, label: default, with: [{type: core, count: 2}]}]\n"
        "attributes: {system: {duration: 60}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )
    engine.cancel(engine.match(MatchOp.ALLOCATE, job).jobid)
    schedule = engine.schedule.view
    (socket,) = graph.by_type["socket"]
    (slot,) = engine._working_copy(job).requests
    dfu = Scoring()
    order = schedule.heaviest_first(socket, schedule.children(socket))
    visit = Visit(JobMeta(99, 0, 60), engine.policy, slot.with_, False, True)
    assert engine.traverser._first_leaves(visit, order, dfu, len(core_ids) // 2)
    evals = dfu.evals("core")
    assert evals.choose_best_k(len(core_ids), descending=True)
    return evals.descending_scores, [graph.vertices[graph.edges[g.edges[0].edge].target].id for g in evals.groups]


def test_first_sorts_a_sockets_cores_by_score_unless_they_were_found_in_that_order() -> None:
    """``first`` visits a socket's cores highest uniq_id first; when their ids (so their scores) descend in that
    order no sort is needed, and when they do not, the best-k choice still orders them by score."""
    assert _first_leaves_scores_descend([0, 1, 2, 3]) == (True, [3, 2, 1, 0])
    assert _first_leaves_scores_descend([2, 0, 3, 1]) == (False, [3, 2, 1, 0])


def test_a_reservation_asked_for_at_the_end_of_the_horizon_fails_cleanly() -> None:
    """The Engine API lets a caller match ``now`` up to the planners' horizon. One second before its end nothing
    can start later: ``allocate_orelse_reserve`` fails (EBUSY) instead of raising PlannerInvalidError out of the
    start-time search."""
    engine = Engine(build_graph([NodeSpec("n0", cores=4)]), policy="low")
    job = jobspec_from_yaml(
        "version: 9999\nresources: [{type: slot, count: 1, label: default, with: [{type: core, count: 4}]}]\n"
        "attributes: {system: {duration: 60}}\ntasks: [{command: [app], slot: default, count: {per_slot: 1}}]\n"
    )
    assert engine.match(MatchOp.ALLOCATE, job).matched
    late = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, job, now=engine.graph_end - 1)
    assert (late.matched, late.errno) == (False, Errno.EBUSY)


def test_first_weighs_a_used_socket_by_its_filters_last_type_as_fluxion_does() -> None:
    """``first`` explores children heaviest first, an edge's weight being the free count at ``now`` of the last
    type in its target's aggregate filter. Fluxion's filter on a socket tracks ``core`` and ``node`` (every type
    the anchors name but the socket's own, ``node`` with total 0), so a socket once used weighs 0 whatever cores it
    has left: used sockets tie and are taken highest uniq_id first, after the unused ones. Weighing it by its free
    cores instead puts the fifth job below on socket0 (6 free) rather than socket1 (4 free), as Fluxion does."""
    engine = Engine(build_graph([NodeSpec("n0", cores=16, sockets=2)]), policy="first")
    two_cores = _job("[{type: slot, count: 1, label: default, with: [{type: core, count: 2}]}]")
    sockets = []
    for step in range(5):
        if step == 2:
            engine.cancel(1)
        result = engine.match(MatchOp.ALLOCATE, two_cores)
        assert result.matched
        sockets.append("socket1" if "socket1" in result.resources else "socket0")
    assert sockets == ["socket1", "socket0", "socket1", "socket1", "socket1"]


def test_an_edges_weight_type_is_the_last_type_fluxions_filter_tracks_for_its_target() -> None:
    """Fluxion's filter on a vertex holds every type the anchors name for the vertex's type except its own (the
    default ``ALL:core,ALL:node``: a node tracks cores, a socket or a rack cores and nodes); the last by name
    orders ``first``'s explore."""
    filters = PruningFilters()
    assert [filters.order_type(t) for t in ("rack", "node", "socket", "core")] == ["node", "core", "node", "node"]
    filters = PruningFilters("ALL:core,rack:memory")
    assert [filters.order_type(t) for t in ("rack", "node", "memory")] == ["memory", "core", "core"]
    assert PruningFilters("node:core").order_type("socket") is None
