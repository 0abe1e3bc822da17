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
import json
from typing import Any
from unittest import mock

import pytest

from kubeflux.scheduler.core import ALLOCATION_ANNOTATION, KubefluxScheduler
from kubeflux.scheduler.placing import Placer
from kubeflux.scheduler.sharing import CappedSharing
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from kubeflux.sim.workloads.model import PodTemplate
from tests.scheduler._invariants import INVARIANTS
from tests.scheduler._workload import NodeShape, PodShape, Scenario, group, lone, run

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


def _outcome(scenario: Scenario, *, at_once: bool, **options: Any) -> tuple[dict[str, tuple[Any, ...]], int]:
    """Every pod's (bound at, node, cores, gpus, finished at), and how many runs of members one match placed, with
    kubeflux made with ``options`` (its policy, its sharing)."""
    calls = 0
    real = Placer._run_at_once

    def counted(self: Placer, *args: object) -> object:
        nonlocal calls
        made = real(self, *args)  # type: ignore[arg-type]
        calls += bool(made)
        return made

    core = functools.partial(KubefluxScheduler, **options)
    with (
        mock.patch.object(Placer, "_run_at_once", counted if at_once else lambda *_: None),
        mock.patch("tests.scheduler._workload.KubefluxScheduler", core),
    ):
        outcome = run(scenario, checks=INVARIANTS if at_once else ())
    pods: dict[str, tuple[Any, ...]] = {}
    for key, sim_pod in outcome.simulation.cluster.pods.items():
        text = sim_pod.pod.annotations.get(ALLOCATION_ANNOTATION)
        where = json.loads(text) if text else {}
        pods[key] = (
            sim_pod.bound_at,
            sim_pod.node_index,
            tuple(where.get("cores", ())),
            tuple(where.get("gpus", ())),
            sim_pod.finished_at,
        )
    return pods, calls


def _same_as_one_by_one(scenario: Scenario, **options: Any) -> tuple[dict[str, tuple[Any, ...]], int]:
    fast, calls = _outcome(scenario, at_once=True, **options)
    plain, _ = _outcome(scenario, at_once=False, **options)
    assert {key: fast[key] for key in fast if fast[key] != plain[key]} == {}
    assert all(bound is not None for bound, *_ in fast.values())
    return fast, calls


# ---------------------------------------------------------------------------------------------------- hinode

HINODE_GANG_BESIDE_A_LONG_POD = Scenario(
    nodes=(NODE, NODE, NODE),
    jobs=(lone(0, P(3000, run=500), other=True), group(1, *[P(2000, run=300)] * 6), lone(2, P(2000, run=100))),
)
"""Under ``hinode`` six 2-core ranks fill the highest node and the next, beside kube-default's pod."""


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


def test_capped_sharing_ranks_never_overcommit_a_node_another_scheduler_fills() -> None:
    fast, _ = _same_as_one_by_one(CAPPED_NODE_FILLED_BY_ANOTHER_SCHEDULER, sharing=CappedSharing())
    assert [fast[f"default/j1-{k}"][1] for k in range(6)] == [0, 0, 1, 1, 1, 1]
