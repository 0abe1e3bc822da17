"""Hostile scenarios for a gang's alike members placed by one engine match (``Placer._run_at_once``), each played
on the real simulator twice, with the shortcut and with every member matched one by one: every pod must be bound at
the same time to the same node and cores and end at the same time, and the run with the shortcut keeps every
invariant of :mod:`tests.scheduler._invariants` (books and graph equal a rebuild, no shared core, no over-commit,
reservations kept).

What they guard: members that outlive their planned time together (the shared job released part by part while each
part is replayed), a node of the gang replaced by a bigger one, kubeflux restarted mid-gang, node pod limits that make
the books refuse the engine's packing, a gang whose launcher does not fit after its workers were matched at once,
and the ``hinode`` policy, whose members take a node's cores from the highest down.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, PODS, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.sharing import CappedSharing
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from kubeflux.sim.workloads.model import PodTemplate
from tests.scheduler._at_once import outcome
from tests.scheduler._invariants import BOOKS, CORES, FILTERS, INVARIANTS, OVERCOMMIT, compare_books
from tests.scheduler._strategies import EXAMPLES, scenarios
from tests.scheduler._workload import Change, NodeShape, PodShape, Scenario, group, lone, run

P = PodShape
NODE = NodeShape(cpu=8000)


@dataclasses.dataclass(frozen=True)
class Planned(PodShape):
    """A pod that says it runs ``planned`` seconds (kubeflux's duration annotation) and runs ``run``."""

    planned: int = 0

    def template(self, name: str, scheduler: str, priority: int) -> PodTemplate:
        template = super().template(name, scheduler, priority)
        template.annotations = {**template.annotations, DURATION_ANNOTATION: str(self.planned)}
        return template


def _same_as_one_by_one(
    scenario: Scenario, checks: Iterable[str] = INVARIANTS, *, all_bound: bool = True, **options: Any
) -> tuple[dict[str, tuple[Any, ...]], int]:
    """:func:`outcome` with the shortcut and without it: the same for every pod (and every pod bound, unless not
    ``all_bound``)."""
    fast, calls = outcome(scenario, at_once=True, checks=checks, **options)
    plain, _ = outcome(scenario, at_once=False, **options)
    assert {key: fast[key] for key in fast if fast[key] != plain[key]} == {}
    assert not all_bound or all(bound is not None for bound, *_ in fast.values())
    return fast, calls


# ---------------------------------------------------------------------------------------------------- hinode

HINODE_GANG_BESIDE_A_LONG_POD = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(lone(0, P(3000, run=500), other=True), group(1, *[P(2000, run=300)] * 6), lone(2, P(2000, run=100))),
)
"""Under ``hinode`` six 2-core ranks fill the highest node and the next, beside kube-default's pod."""


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_hinode_ranks_get_the_cores_one_by_one_gives_them(backfill: str) -> None:
    scenario = dataclasses.replace(HINODE_GANG_BESIDE_A_LONG_POD, backfill=backfill)
    fast, calls = _same_as_one_by_one(scenario, policy="hinode")
    assert calls == 1
    assert fast["default/j1-0"][1:3] == (2, ("core6", "core7"))  # the highest node's highest cores first


HINODE_FRAGMENTED_NODES = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(
        lone(0, P(1000, run=50)),
        lone(0, P(2000, run=500)),
        lone(0, P(1000, run=50)),
        lone(0, P(3000, run=500)),
        group(60, *[P(1000, run=300)] * 6),
        lone(61, P(3000, run=10)),
    ),
)
"""Single-core ranks on nodes whose free cores are holes left by ended pods."""


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_hinode_ranks_on_fragmented_nodes_take_the_highest_holes_first() -> None:
    _, calls = _same_as_one_by_one(HINODE_FRAGMENTED_NODES, policy="hinode")
    assert calls == 1


# ---------------------------------------------------------------------------------------------------- sharing

CAPPED_NODE_FILLED_BY_ANOTHER_SCHEDULER = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(lone(0, P(6000, run=500), other=True), group(1, *[P(1000, run=300)] * 6)),
)
"""kube-default's 6-core pod on n0; kubeflux may use half of each node (capped sharing): its share of n0 is free,
the node has two cores left."""


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_capped_sharing_ranks_never_overcommit_a_node_another_scheduler_fills() -> None:
    fast, _ = _same_as_one_by_one(CAPPED_NODE_FILLED_BY_ANOTHER_SCHEDULER, sharing=CappedSharing())
    assert [fast[f"default/j1-{k}"][1] for k in range(6)] == [0, 0, 1, 1, 1, 1]


# ---------------------------------------------------------------------------------------------------- the shared job

RANKS_OUTLIVE_THEIR_PLANNED_TIME = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(
        group(0, *[Planned(2000, run=50, planned=100)] * 2, *[Planned(2000, run=300, planned=100)] * 3),
        lone(150, P(8000, run=100)),
        lone(150, P(4000, run=100)),
    ),
    changes=(Change(200, "delete", 2),),
)
"""Five ranks say 100 s: two end at 50, three run on past 100 (each one's part of the shared job is released and the
pod replayed to the horizon), a user deletes one at 200; the pods arriving at 150 take only what is free."""

NODE_OF_THE_GANG_COMES_BACK_BIGGER = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(group(0, *[P(2000, run=1000)] * 5), lone(300, P(8000, run=100)), lone(300, P(8000, run=100))),
    changes=(Change(100, "remove", 1), Change(150, "readd", 0, NodeShape(cpu=16000))),
)
"""The node holding the fifth rank is removed (the gang fails) and comes back with twice the cores."""

NODE_OF_THE_GANG_GROWS = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(group(0, *[P(2000, run=1000)] * 5), lone(300, P(8000, run=100)), lone(300, P(4000, run=100))),
    changes=(Change(100, "grow", 1),),
)
"""The node holding the fifth rank doubles while the ranks run: the shared job is cancelled whole and every rank is
replayed onto its cores."""

RESTARTED_MID_GANG_THEN_RANKS_END = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(group(0, *[Planned(2000, run=300, planned=100)] * 5), lone(50, P(4000, run=100))),
    changes=(Change(60, "grow", 1), Change(70, "delete", 0), Change(110, "restart"), Change(130, "delete", 1)),
)
"""kubeflux restarts while the ranks run past their planned time; a node grows and ranks are deleted around it."""

NODE_POD_LIMIT_REFUSES_THE_PACKING = Scenario(
    nodes=(NodeShape(cpu=8000, pods=2), NodeShape(cpu=8000, pods=2), NODE),
    jobs=(group(0, *[P(2000, run=100)] * 5),),
)
"""Nodes of 8 cores that take two pods: the engine packs four ranks a node, the books refuse."""

LAUNCHER_DOES_NOT_FIT_AFTER_ITS_WORKERS = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(lone(0, P(8000, run=100)), group(0, *[P(2000, run=500)] * 6, P(8000, run=500)), lone(1, P(2000, run=50))),
)
"""Six workers matched at once, then an 8-core launcher that finds no empty node until 100: the workers are undone
(twice); at 100 the group starts where its reservation assigned each member, without the shortcut."""

GPU_RANKS_ONE_DELETED = Scenario(
    nodes=(NodeShape(cpu=8000, gpu=4),) * 3,
    jobs=(group(0, *[P(1000, gpu=1, run=200)] * 9), lone(50, P(1000, gpu=4, run=100))),
    changes=(Change(100, "delete", 3),),
)


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize(
    ("scenario", "at_once"),
    [
        (RANKS_OUTLIVE_THEIR_PLANNED_TIME, 1),
        (NODE_OF_THE_GANG_COMES_BACK_BIGGER, 1),
        (NODE_OF_THE_GANG_GROWS, 1),
        (RESTARTED_MID_GANG_THEN_RANKS_END, 1),
        (NODE_POD_LIMIT_REFUSES_THE_PACKING, 0),
        (LAUNCHER_DOES_NOT_FIT_AFTER_ITS_WORKERS, 2),
        (GPU_RANKS_ONE_DELETED, 1),
    ],
    ids=["overrun", "readd-bigger", "grow", "restart", "pod-limit", "launcher", "gpus"],
)
def test_a_gang_matched_at_once_lives_as_one_by_one(scenario: Scenario, at_once: int) -> None:
    _, calls = _same_as_one_by_one(scenario)
    assert calls == at_once


# ------------------------------------------------------------------------------------------------ as a watch sees it


class _Watched:
    """kubeflux fed by hand as a watch delivers events (orders the simulator never produces); after each step its
    books and graph must equal a rebuild from the objects."""

    def __init__(self, nodes: int, ranks: int) -> None:
        self.nodes = {f"n{i}": _node(f"n{i}", 8) for i in range(nodes)}
        self.group = PodGroup("default", "g", ranks)
        self.pods: dict[str, Pod] = {}
        self.core = KubefluxScheduler()
        self.now = 0.0
        for node in self.nodes.values():
            self.core.observe(ClusterEvent(EventKind.ADDED, node), 0.0)
        self.core.observe(ClusterEvent(EventKind.ADDED, self.group), 0.0)
        for k in range(ranks):
            pod = Pod("default", f"g-{k}", f"u{k}", "kubeflux", requests={CPU: 2000}, labels={POD_GROUP_LABEL: "g"})
            self.pods[pod.key] = pod
            self.core.observe(ClusterEvent(EventKind.ADDED, pod), 0.0)
        self.step()
        assert len(self.core.books.shared) == 1  # one engine job for the ranks

    def step(self) -> None:
        self.now += 1.0
        for decision in self.core.schedule(self.now):
            if isinstance(decision, Bind):
                pod = self.pods[decision.pod]
                pod.node_name, pod.phase = decision.node, PodPhase.RUNNING
                pod.annotations = {**pod.annotations, **decision.annotations}
                self.core.observe(ClusterEvent(EventKind.MODIFIED, pod), self.now)
        bound = [pod for pod in self.pods.values() if pod.node_name and not pod.phase.terminal]
        compare_books(self.core, list(self.nodes.values()), [self.group], bound, self.now)

    def change(self, key: str, **fields: Any) -> None:
        pod = self.pods[key] = dataclasses.replace(self.pods[key], **fields)
        self.core.observe(ClusterEvent(EventKind.MODIFIED, pod), self.now)

    def node(self, kind: EventKind, name: str, cores: int) -> None:
        node = _node(name, cores)
        if kind is EventKind.DELETED:
            del self.nodes[name]
        else:
            self.nodes[name] = node
        self.core.observe(ClusterEvent(kind, node), self.now)

    def ended(self) -> None:
        """Every rank ends: nothing is left busy in the engine and no job is shared."""
        for key in self.pods:
            self.change(key, phase=PodPhase.SUCCEEDED)
            self.step()
        graph = self.core.books.graph
        assert graph is not None
        assert [graph.busy_cores(name, int(self.now)) for name in self.nodes] == [0] * len(self.nodes)
        assert self.core.books.shared == {} and graph.lost == []


def _node(name: str, cores: int) -> Node:
    return Node(name, uid=name, allocatable={CPU: cores * 1000, MEMORY: 2**34, PODS: 110})


def test_a_rank_resized_in_place_keeps_its_mates_cores_and_frees_its_own_at_its_end() -> None:
    world = _Watched(nodes=2, ranks=5)
    world.change("default/g-0", requests={CPU: 1000})  # fewer cores: its part of the shared job is let go
    world.step()
    world.change("default/g-1", requests={CPU: 3000})  # more: the node has just the room
    world.step()
    world.change("default/g-2", phase=PodPhase.SUCCEEDED)
    world.step()
    world.ended()


def test_a_node_deleted_before_its_ranks_and_back_bigger_leaves_nothing_busy() -> None:
    world = _Watched(nodes=3, ranks=6)  # four ranks on n0, two on n1
    world.change("default/g-0", phase=PodPhase.SUCCEEDED)  # its release is pending in the graph
    world.step()
    world.node(EventKind.DELETED, "n0", 8)  # the node's DELETED before its pods' ends, as a watch may order them
    world.node(EventKind.ADDED, "n0", 16)
    world.step()
    world.ended()


# ---------------------------------------------------------------------------------------------------- random workloads


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
@pytest.mark.parametrize(
    "options", [{"policy": "hinode"}, {"sharing": CappedSharing()}], ids=["hinode", "capped-sharing"]
)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=scenarios("easy", jobs=10))
def test_random_workloads_under_hinode_or_capped_sharing_place_a_gang_at_once_as_one_by_one(
    options: dict[str, Any], data: Scenario
) -> None:
    """The issue 12 workloads (kube-default's pods, node changes, restarts, deletions) under the other node-centric
    policy and under a sharing policy; the run with the shortcut keeps the books, cores and capacity right (the
    liveness invariants assume kubeflux may use whole nodes)."""
    _same_as_one_by_one(data, checks=(OVERCOMMIT, FILTERS, CORES, BOOKS), all_bound=False, **options)


# ---------------------------------------------------------------------------------------------------- found on the way

OTHERS_POD_ON_A_NODE_GROWN_UNDER_CAPPED_SHARING = Scenario(
    nodes=(NODE, NODE),
    jobs=(lone(0, P(1000, run=60)), lone(60, P(1000, run=60), other=True)),
    changes=(Change(65, "grow", 0),),
)
"""kube-default's pod runs on n0 when n0 is grown at 65; kubeflux runs with capped sharing (half of each node)."""


@pytest.mark.pure_engine  # patches the scheduler's internals (tests/conftest.py)
def test_a_node_grown_under_capped_sharing_keeps_another_schedulers_pod_out_of_the_graph() -> None:
    # Under capped sharing another scheduler's pods are counted in the books only (kubeflux's share is its own);
    # replaying every pod of the grown node put kube-default's into the graph, unlike a restarted kubeflux.
    core = functools.partial(KubefluxScheduler, sharing=CappedSharing())
    with mock.patch("tests.scheduler._workload.KubefluxScheduler", core):
        run(OTHERS_POD_ON_A_NODE_GROWN_UNDER_CAPPED_SHARING, checks=(BOOKS, CORES, OVERCOMMIT))
