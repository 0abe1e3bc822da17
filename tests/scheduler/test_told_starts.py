"""The starts kubeflux tells its waiting pods hold, on the real simulator: after a restart, and when a pass leaves
part of its work to a later pass that no event may bring.

A fresh kubeflux knows nothing of what its previous run told its pods; it reads it from them: a pending pod of its
own carrying the expected-start annotation was told a start, so a pass that plans none for it takes the annotation
back, and one that plans another writes it.

Nothing kubeflux reads follows a Reject, and a pass goes on past what it changed: a gang whose member beyond
minMember can never fit (a rejected fpga pod) is planned in the very pass that rejects the member (left to the next
pass, it kept no reservation, and the start its previous run wrote, while the jobs behind it were planned as if it
were not there); a gang rejected whole does not use up the queue depth; the members a started gang leaves waiting
are planned before the jobs behind them; a group is placed first on the nodes its reservation assigned its members
(so one that may start short of its size starts with the members it named), and under conservative backfilling the
members its reservation leaves out are reserved too; the members a started group leaves waiting
keep its place in the queue, as a restarted kubeflux finds them.
"""

from __future__ import annotations

import dataclasses
import functools
from unittest import mock

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import CPU, Pod
from kubeflux.scheduler.placing import Placer
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from tests.scheduler._invariants import EXPECTED, INVARIANTS
from tests.scheduler._workload import Change, Checked, NodeShape, PodShape, Scenario, group, lone, run

P = PodShape

RESTART_WHILE_A_GANG_IS_TOLD_ITS_START = Scenario(
    nodes=(
        NodeShape(cpu=8000, tainted=True),
        NodeShape(cpu=8000, memory=16, pods=3),
        NodeShape(cpu=3500),
        NodeShape(cpu=2000, storage=20),
    ),
    jobs=(
        group(
            120, P(500, run=300, tolerates=True, policy="lonodex"), P(8000, run=300, tolerates=True, policy="lonodex")
        ),
        group(140, *[P(1000, storage=50, run=60)] * 4),
        group(130, P(1000, run=60), P(4000, run=60), P(1000, fpga=1, run=60), min_member=2),
    ),
    changes=(Change(225, "restart"),),
)
"""A gang of three (minMember 2) told it starts at 300; kubeflux restarts at 225. Its third member never fits (no
node has an fpga): the restarted kubeflux rejected it and left the other two to a later pass, with no reservation
and the start the previous run wrote (the scenarios below vary it)."""

GANG_WITH_AN_FPGA_MEMBER_NO_NODE_HAS = dataclasses.replace(RESTART_WHILE_A_GANG_IS_TOLD_ITS_START, changes=())
"""j0 (a node-exclusive pair) runs 0-300 on n0 and n1; j2 (arriving at 10: 1 and 4 cores, and an fpga pod no node
has, minMember 2) fits n1 once j0 ends; j1 (arriving at 20: four pods of 50Gi storage) fits n1 and n2 after it."""

RESTART_WHILE_ITS_NODE_IS_CORDONED = dataclasses.replace(
    GANG_WITH_AN_FPGA_MEMBER_NO_NODE_HAS,
    changes=(Change(5, "restart"), Change(5, "cordon", 1), Change(265, "uncordon", 1)),
)
"""n1 is cordoned from 5 to 265, so j2 and j1 are rejected as never fitting; kubeflux restarts at 5."""


def test_a_gang_whose_extra_member_never_fits_is_told_its_start_when_it_arrives() -> None:
    outcome = run(GANG_WITH_AN_FPGA_MEMBER_NO_NODE_HAS)
    first = outcome.checked.first_reservation
    j2 = outcome.simulation.cluster.pod("default/j2-0").pod
    assert first[j2.uid][:2] == (10.0, 300.0)  # not at 20, when j1's arrival happened to bring a pass
    assert (outcome.started("j2-0"), outcome.started("j1-0"), outcome.started("j2-2")) == (300.0, 360.0, None)


def test_after_a_restart_an_uncordoned_node_is_planned_for_the_earlier_gang_first() -> None:
    # At 265 the uncordon queues both gangs again; the earlier one's fpga member is rejected alone and the gang was
    # left to a later pass, so j1 was told 300, then j2 took n1 at 300 and j1 started at 360. Every invariant holds,
    # among them that a job starts by the first start it is told.
    outcome = run(RESTART_WHILE_ITS_NODE_IS_CORDONED, INVARIANTS)
    first = outcome.checked.first_reservation
    cluster = outcome.simulation.cluster
    assert first[cluster.pod("default/j2-0").pod.uid][:2] == (265.0, 300.0)
    assert first[cluster.pod("default/j1-0").pod.uid][:2] == (300.0, 360.0)
    assert (outcome.started("j2-0"), outcome.started("j1-0")) == (300.0, 360.0)


ONE_NODE_QUEUE_OVERTAKEN_AT_A_RESTART = Scenario(
    nodes=(NodeShape(cpu=8000),),
    jobs=(
        lone(0, P(8000, run=100)),
        lone(1, P(8000, run=100)),
        lone(2, P(8000, run=100)),
        lone(50, P(8000, run=100), priority=10),
    ),
    changes=(Change(50, "restart"),),
    backfill="conservative",
)
"""One node, pods that fill it; conservative backfill plans two jobs a pass: j1 is told 100 and j2 200. At 50 a pod
of higher priority arrives and kubeflux restarts: j3 and j1 are planned, j2 is past the queue depth."""


def test_a_restarted_kubeflux_takes_back_a_start_it_no_longer_plans_beyond_its_queue_depth() -> None:
    decided: list[tuple[float, Decision]] = []
    schedule = Checked.schedule

    def spied(self: Checked, now: float) -> list[Decision]:
        decisions = schedule(self, now)
        decided.extend((now, decision) for decision in decisions)
        return decisions

    depth_2 = functools.partial(KubefluxScheduler, queue_depth=2, preemption="never")  # the queue's order alone
    with (
        mock.patch("tests.scheduler._workload.KubefluxScheduler", depth_2),
        mock.patch.object(Checked, "schedule", spied),
    ):
        outcome = run(ONE_NODE_QUEUE_OVERTAKEN_AT_A_RESTART, (EXPECTED,))  # the annotation is checked at every call
    j2 = outcome.simulation.cluster.pod("default/j2").pod
    assert outcome.checked.first_reservation[j2.uid][:2] == (2.0, 200.0)
    told = [d for t, d in decided if t == 50.0 and isinstance(d, Unschedulable) and d.pod == "default/j2"]
    assert [(d.expected_start, "beyond kubeflux's queue depth of 2 jobs" in d.message) for d in told] == [(None, True)]
    assert [outcome.started(name) for name in ("j0", "j3", "j1", "j2")] == [0.0, 100.0, 200.0, 300.0]


def test_a_fresh_kubeflux_rewrites_or_takes_back_any_expected_start_on_its_waiting_pods_and_no_others() -> None:
    # What the pods carry is all a new kubeflux has: a start of any form, even one no kubeflux would write, is
    # rewritten or taken back on kubeflux's waiting pods; another scheduler's pod is not kubeflux's to touch.
    core = KubefluxScheduler(queue_depth=2)
    core.observe(ClusterEvent(EventKind.ADDED, NodeShape(cpu=8000).node("n0")), 0.0)
    written = {EXPECTED_START_ANNOTATION: "soon"}
    pods = [
        Pod("default", "running", "u0", "kubeflux", requests={CPU: 8000}, annotations={DURATION_ANNOTATION: "100"}),
        Pod("default", "next", "u1", "kubeflux", creation_time=1, requests={CPU: 8000}, annotations=written),
        Pod("default", "last", "u2", "kubeflux", creation_time=2, requests={CPU: 8000}, annotations=written),
        Pod("default", "web", "u3", "default-scheduler", creation_time=3, requests={CPU: 1000}, annotations=written),
    ]
    for waiting in pods:
        core.observe(ClusterEvent(EventKind.ADDED, waiting), 0.0)
    said = {d.pod: d for d in core.schedule(0.0) if isinstance(d, Unschedulable)}
    assert said.keys() == {"default/next", "default/last"}  # "running" is bound
    assert said["default/next"].expected_start == 100.0  # reserved for when "running" ends
    assert said["default/last"].expected_start is None  # past the queue depth: taken back, and why
    assert "waits beyond kubeflux's queue depth of 2 jobs" in said["default/last"].message


# ------------------------------------------------------------ a pass that leaves work to a pass no event brings

BURST_ON_AN_IDLE_NODE = Scenario(nodes=(NodeShape(),), jobs=tuple(lone(0, P()) for _ in range(5)))
"""Five one-core pods at 0 on an idle node of eight cores."""


@pytest.mark.parametrize("depth", [1, 2, 64])
def test_a_burst_beyond_the_queue_depth_starts_at_once_on_an_idle_cluster(depth: int) -> None:
    # A pass stops at the queue depth once it has bound pods, for the jobs behind to move up; the binds' events
    # came within the pass's time point, so the simulator brought no other pass: the pods beyond the depth waited
    # for the first ones to end (0, 0, 60, 60, 120 with a depth of 2).
    at_depth = functools.partial(KubefluxScheduler, queue_depth=depth)
    with mock.patch("tests.scheduler._workload.KubefluxScheduler", at_depth):
        outcome = run(BURST_ON_AN_IDLE_NODE, INVARIANTS)
    assert [outcome.started(f"j{i}") for i in range(5)] == [0.0] * 5


X = P(1000, policy="lonodex")
GANG_THAT_NEVER_FITS_FIRST_IN_THE_QUEUE = Scenario(
    nodes=(NodeShape(), NodeShape()), jobs=(group(0, X, X, X), lone(0, P()))
)
"""Three node-exclusive pods on two nodes (rejected as never fitting), then a one-core pod, both at 0."""


def test_a_gang_rejected_as_never_fitting_does_not_use_up_the_queue_depth() -> None:
    # With a queue depth of 1 the rejected gang was the pass's one job, and nothing kubeflux reads follows a Reject:
    # the pod behind it, on an idle cluster, waited for an event that never came.
    depth_1 = functools.partial(KubefluxScheduler, queue_depth=1)
    with mock.patch("tests.scheduler._workload.KubefluxScheduler", depth_1):
        outcome = run(GANG_THAT_NEVER_FITS_FIRST_IN_THE_QUEUE, INVARIANTS)
    assert (outcome.started("j0-0"), outcome.started("j1")) == (None, 0.0)


GANG_STARTED_SHORT_OF_ITS_SIZE = Scenario(
    nodes=(NodeShape(cpu=2000),),
    jobs=(lone(0, P(run=100)), lone(0, P(run=110)), group(10, P(), P(), min_member=1), lone(20, P())),
)
"""Two cores, busy until 100 and 110; a gang of two (minMember 1) arrives at 10, a one-core pod at 20. At 100 the
gang starts with one member; the other waits on its own, ahead of the pod by its arrival."""


@pytest.mark.parametrize("backfill", ["fcfs", "easy", "conservative"])
def test_the_member_a_started_gang_leaves_waiting_is_planned_before_the_pod_behind_it(backfill: str) -> None:
    # The member was queued on its own for a later pass, and the pass went on: the pod was told 110, then the
    # member (earlier) took the core at 110 and the pod started at 160. Under conservative backfilling the member
    # the gang's reservation left out is reserved on its own (told 110 at 10), so the pod is told 160 at 20.
    outcome = run(dataclasses.replace(GANG_STARTED_SHORT_OF_ITS_SIZE, backfill=backfill), INVARIANTS)
    assert [outcome.started(name) for name in ("j2-0", "j2-1", "j3")] == [100.0, 110.0, 160.0]
    if backfill == "conservative":
        told = {uid: start for uid, (_, start, _) in outcome.checked.first_reservation.items()}
        assert (told["2-1"], told["3-0"]) == (110.0, 160.0)


GANG_OF_UNEQUAL_MEMBERS_SHORT_OF_ITS_SIZE = Scenario(
    nodes=(NodeShape(cpu=8000, tainted=True), NodeShape(cpu=2000)),
    jobs=(lone(0, P(1000)), lone(0, P(1000)), group(0, P(500), P(1000), P(1000), min_member=2)),
)
"""Two usable cores, busy until 60; a gang of a 500m pod and two one-core pods (minMember 2) waits for them."""


def test_a_gang_short_of_its_size_starts_the_members_its_reservation_named() -> None:
    # The reservation holds j2-1 and j2-2 (each told 60, j2-0 told none); placed in pod order at 60 the gang
    # started with j2-0 and j2-1, and j2-2 at 120: the members are placed first where the reservation put them.
    outcome = run(GANG_OF_UNEQUAL_MEMBERS_SHORT_OF_ITS_SIZE, INVARIANTS)
    assert [outcome.started(f"j2-{i}") for i in range(3)] == [120.0, 60.0, 60.0]


GPU = P(1000, gpu=1)
RESTART_AMONG_JOBS_OF_ONE_SECOND = Scenario(
    nodes=(NodeShape(), NodeShape(gpu=2)),
    jobs=(group(0, GPU, GPU, GPU, GPU, min_member=2), lone(0, GPU)),
    changes=(Change(30, "restart"),),
    backfill="conservative",
)
"""Two gpus; a gang of four one-gpu pods (minMember 2) and a one-gpu pod, created in the same second (the gang
first). Two members start at 0; the other two are told 60, the pod 120; kubeflux restarts at 30."""


def test_a_restarted_kubeflux_keeps_the_starts_it_told_jobs_created_in_the_same_second() -> None:
    # The members the gang left waiting were queued as new jobs, behind the pod created in the same second: the pod
    # was told 60, the members 60 and 120; restarted, kubeflux saw the members first (the relist's order, the order
    # of creation) and gave them 60, the pod 120. A started group's members now keep the group's place in the queue.
    outcome = run(RESTART_AMONG_JOBS_OF_ONE_SECOND, INVARIANTS)
    assert [outcome.started(name) for name in ("j0-2", "j0-3", "j1")] == [60.0, 60.0, 120.0]


GANG_RESERVED_WHOLE_PLACED_IN_POD_ORDER = Scenario(
    nodes=(NodeShape(), NodeShape(), NodeShape(gpu=2), NodeShape(cpu=4000, memory=8)),
    jobs=(
        lone(0, P()),
        lone(0, P()),
        lone(0, P()),
        group(0, P(), P(policy="lonodex"), min_member=2),
        group(0, P(), P(gpu=1), P(1000, memory=12, policy="lonodex"), P(8000), min_member=3),
    ),
    backfill="conservative",
)
"""Found by the random workloads (150 examples): j4's reservation holds its four members at 60 (an 8-core pod on
an empty node among them)."""


def test_a_gang_reserved_whole_starts_whole_at_its_reserved_time() -> None:
    # Placed in pod order at 60, j4-0 took a core of the node the 8-core j4-3 was to have whole, so j4-3, told 60,
    # started at 120: a group is placed first where its reservation's assignment put each member.
    outcome = run(GANG_RESERVED_WHOLE_PLACED_IN_POD_ORDER, INVARIANTS)
    assert [outcome.started(f"j4-{i}") for i in range(4)] == [60.0] * 4


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_a_restarted_kubeflux_clears_the_expected_start_it_no_longer_plans() -> None:
    with mock.patch.object(Placer, "_run_at_once", lambda *_: None):  # not the shortcut's: one by one does it too
        run(RESTART_WHILE_A_GANG_IS_TOLD_ITS_START, checks=(EXPECTED,))
