"""On a cluster wide enough for the matcher's shortcuts (the walk that stops at the first nodes that qualify, the
nodes a pod may not use passed as a vertex mask, spans of nodes reused across windows), kubeflux's schedule is the
one the plain walk (no shortcut, nothing cached) gives: a queueing
synthetic workload of single pods and gangs, under each scoring policy and backfill, through the real simulator."""

from __future__ import annotations

from unittest import mock

import pytest

from kubeflux.match import evaluation, traverser, wide
from kubeflux.scheduler import hiding
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.sim.driver import Simulation
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate


def _schedule(policy: str, backfill: str, *, shortcuts: bool, racks: int = 0) -> list[tuple[object, ...]]:
    nodes = uniform_cluster(80, 8, racks=racks)
    spec = SyntheticSpec(jobs=150, mean_interarrival=15.0, max_size=32, mean_runtime=1800.0)
    workload = map_to_cluster(generate(spec, seed=7), nodes)
    scheduler = KubefluxScheduler(policy=policy, backfill=backfill)
    patches = []
    if not shortcuts:
        patches = [
            mock.patch.object(wide, "early_count", return_value=(0, None)),
            mock.patch.object(hiding.ExcludedNames, "allowed", new=None),
            mock.patch.object(evaluation, "CACHE_PER_VERTEX", 0),  # and no evaluation reused either
            mock.patch.object(traverser, "CACHE_PER_VERTEX", 0),
        ]
    for patch in patches:
        patch.start()
    try:
        record = Simulation(workload, nodes, {scheduler.name: scheduler}).run()
    finally:
        for patch in patches:
            patch.stop()
    return [
        (j.job_id, j.submission_time, j.starting_time, j.finish_time, tuple(j.allocated_resources)) for j in record.jobs
    ]


@pytest.mark.pure_engine  # patches the engine's internals (tests/conftest.py)
@pytest.mark.parametrize(
    ("policy", "backfill", "racks"),
    [
        ("lonode", "easy", 0),
        ("hinode", "conservative", 0),
        ("low", "easy", 0),
        ("lonode", "easy", 5),  # the walk over 5 racks stops early
        ("hinode", "conservative", 1),  # the walk over one rack's 80 nodes stops early
        ("low", "easy", 5),
    ],
)
def test_a_wide_cluster_is_scheduled_as_the_plain_walk_schedules_it(policy: str, backfill: str, racks: int) -> None:
    fast = _schedule(policy, backfill, shortcuts=True, racks=racks)
    assert fast == _schedule(policy, backfill, shortcuts=False, racks=racks)
    assert sum(1 for _, submit, start, _, _ in fast if start is not None and start > submit) > 10  # jobs queued
