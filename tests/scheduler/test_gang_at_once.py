"""A gang's alike members placed by one engine match (``Placer._run_at_once``) land exactly where matching them one
by one puts them, and their shared engine job is released member by member as the pods end.

The property plays whole random workloads (the issue 12 scenarios: gangs with launchers and minMember, memory-heavy
pods, kube-default's pods, node changes, restarts, deletions) twice on the real simulator, with the shortcut and
without it, and asks for the same bind, node, cores and end of every pod. The scenarios below are the cases a user
would name: ranks that end one by one while a later job takes their cores, and nodes whose memory takes fewer
members than their cores would.
"""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings

from kubeflux.match.engine import MatchOp
from kubeflux.resources.builder import NodeSpec
from kubeflux.scheduler.graphview import GraphView
from kubeflux.scheduler.translate import _jobspec, _slot
from tests.scheduler._at_once import outcome
from tests.scheduler._strategies import EXAMPLES, scenarios
from tests.scheduler._workload import Change, NodeShape, PodShape, Scenario, group, lone

P = PodShape


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize("backfill", ["easy", "conservative", "fcfs"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios("easy", jobs=10))
def test_random_workloads_place_a_gang_at_once_as_one_by_one(backfill: str, data: Scenario) -> None:
    scenario = Scenario(data.nodes, data.jobs, data.changes, backfill)
    fast, _ = outcome(scenario, at_once=True, checks=())
    plain, _ = outcome(scenario, at_once=False)
    assert fast == plain


RANKS_DELETED_ONE_BY_ONE = Scenario(
    nodes=(NodeShape(cpu=8000), NodeShape(cpu=8000), NodeShape(cpu=8000)),
    jobs=(
        lone(0, P(8000, run=50)),
        group(0, *[P(2000, run=1000)] * 5),
        lone(10, P(4000, run=1000)),
        lone(250, P(8000, run=1000)),
        lone(250, P(8000, run=1000)),
    ),
    changes=(Change(100, "delete", 1),),
)
"""Five 2-core ranks of one gang (placed by one match) beside an 8-core pod until 50; a user deletes a rank at 100
and the job's ranks end; of two 8-core pods arriving at 250 one takes the node four of them held."""

MEMORY_TAKES_ONE_PER_NODE = Scenario(
    nodes=(NodeShape(cpu=8000, memory=16), NodeShape(cpu=8000, memory=16), NodeShape(cpu=8000, memory=16)),
    jobs=(group(0, P(2000, memory=12), P(2000, memory=12), P(2000, memory=12)),),
)
"""Three 2-core workers of 12 GiB on nodes of 8 cores and 16 GiB: the cores hold four per node, the memory one."""


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize("backfill", ["easy", "conservative"])
@pytest.mark.parametrize("scenario", [RANKS_DELETED_ONE_BY_ONE, MEMORY_TAKES_ONE_PER_NODE], ids=["ranks", "memory"])
def test_named_scenarios_place_a_gang_at_once_as_one_by_one(scenario: Scenario, backfill: str) -> None:
    scenario = Scenario(scenario.nodes, scenario.jobs, scenario.changes, backfill)
    fast, calls = outcome(scenario, at_once=True, checks=())
    plain, _ = outcome(scenario, at_once=False)
    assert fast == plain
    assert all(bound is not None for bound, *_ in fast.values())
    if scenario.jobs is RANKS_DELETED_ONE_BY_ONE.jobs:
        assert calls == 1  # the gang took one match
        assert [fast[f"default/j1-{k}"][1] for k in (0, 2, 3, 4)] == [1, 1, 1, 2]  # four on n1, the fifth on n2
        assert {fast[f"default/j1-{k}"][-1] for k in (0, 2, 3, 4)} == {100.0}
        assert fast["default/j2"][:2] == (10.0, 2)
        assert fast["default/j4"][:2] == (250.0, 1)  # the ranks' cores were released
    else:
        assert calls == 0  # the books refused the engine's packing: matched one by one
        assert len({node for _, node, *_ in fast.values()}) == 3


def test_a_shared_job_is_released_part_by_part_and_whole_at_its_last_part() -> None:
    view = GraphView([NodeSpec(f"n{i}", cores=4) for i in range(3)], "lonode", 10**6, deque())
    gang = view.match(MatchOp.ALLOCATE, _jobspec([_slot(3, 4, 0)], 1000, "g", "test"), "g", 0, ())
    assert gang.matched
    names = [f"core{i}" for i in range(4)]
    assert view.release(gang.jobid, "n0", names, partial=True)
    assert view.busy_cores("n0", 0) == 0  # the read tells the engine first
    assert view.busy_cores("n1", 0) == 4
    assert view.release(gang.jobid, "n1", names, partial=True)
    assert view.release(gang.jobid, "n2", names)  # the last part ends the job
    assert gang.jobid not in view.engine.jobs or view.engine.jobs[gang.jobid].state.name == "CANCELED"
    assert all(view.busy_cores(f"n{i}", 0) == 0 for i in range(3))
    assert not view.lost


def test_a_part_that_cannot_be_released_alone_cancels_the_job_and_says_so() -> None:
    view = GraphView([NodeSpec(f"n{i}", cores=4) for i in range(2)], "lonode", 10**6, deque())
    gang = view.match(MatchOp.ALLOCATE, _jobspec([_slot(2, 4, 0)], 1000, "g", "test"), "g", 0, ())
    other = view.match(MatchOp.ALLOCATE, _jobspec([_slot(1, 1, 0)], 1000, "o", "test"), "o", 0, ())
    assert gang.matched and not other.matched  # every core is the gang's
    view._releasing[gang.jobid] = [view.leaves("n0")[0][0], 10**6]  # a vertex the job does not hold
    assert view.busy_cores("n1", 0) == 0
    assert view.lost == [gang.jobid]
    assert any("could not be released alone" in line for line in view.log)
