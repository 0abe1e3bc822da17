"""Kueue's fair sharing (``docs/kueue.md``), run through the simulator: ClusterQueues of a cohort borrow what it
lends in proportion to their ``fairSharing.weight``, in the order of their dominant resource share, and a queue above
its fair share is preempted when another needs its share back (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import read_cluster
from tests.shared import REPO
from tests.sim._kueue_yaml import FLAVOR, cluster_queue, job, local_queue

EXAMPLE = REPO / "examples" / "workloads" / "kueue-fair-sharing.yaml"
FAIR_SHARING = (
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
    "fairSharing: {enable: true, preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}\n"
)
RECLAIM = "  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}\n"


def member(name: str, weight: str | None, cpu: int = 0) -> str:
    """A ClusterQueue of the cohort ``research`` of ``cpu`` cores (0: it only borrows), of fair-sharing ``weight``."""
    spec = "  namespaceSelector: {}\n  cohort: research\n" + RECLAIM
    if weight is not None:
        spec += f"  fairSharing: {{weight: {weight}}}\n"
    return cluster_queue(name, cpu, spec=spec)


def teams(tmp_path: Path, weights: dict[str, str], at: dict[str, float], fair: bool = True) -> RunRecord:
    """A cohort of a 12-core lender and one quota-less ClusterQueue per team of ``weights``, each team submitting 12
    one-core Jobs of 100 s at its time of ``at`` (in that order in the file), run by kube-default on 2 × 8 cores."""
    documents = [FAIR_SHARING] if fair else []
    documents += [FLAVOR, member("shared", None, 12)]
    for team, weight in weights.items():
        documents += [member(f"{team}-cq", weight), local_queue(team, f"{team}-cq")]
    for team, when in at.items():
        documents += [job(f"{team}-{i:02d}", team, 1, when, 100, 1) for i in range(12)]
    path = tmp_path / "teams.yaml"
    path.write_text("---\n".join(documents))
    workload = load_workload(path)
    assert workload.problems == []
    scheduler = create("kube-default")
    nodes = [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 2**35}) for i in range(2)]
    return simulate(workload, nodes, {scheduler.name: scheduler})


def started_at(record: RunRecord, team: str, when: float) -> int:
    return sum(1 for job in record.jobs if job.job_id.startswith(f"{team}/") and job.starting_time == when)


def test_the_borrowed_quota_is_split_by_weight(tmp_path: Path) -> None:
    record = teams(tmp_path, {"a": "1", "b": "2"}, {"a": 0.0, "b": 0.0})
    assert (started_at(record, "a", 0.0), started_at(record, "b", 0.0)) == (4, 8)  # 4/12/1 = 8/12/2
    assert record.admission["quota_preemptions"] == 0


def test_without_fair_sharing_the_queues_take_turns(tmp_path: Path) -> None:
    record = teams(tmp_path, {"a": "1", "b": "2"}, {"a": 0.0, "b": 0.0}, fair=False)
    assert (started_at(record, "a", 0.0), started_at(record, "b", 0.0)) == (6, 6)


def test_equal_weights_split_evenly(tmp_path: Path) -> None:
    record = teams(tmp_path, {"a": "1", "b": "500m"}, {"a": 0.0, "b": 0.0})
    assert (started_at(record, "a", 0.0), started_at(record, "b", 0.0)) == (8, 4)  # a weight of 0.5 halves B's


@pytest.mark.parametrize("scheduler", ["kube-default", "kubeflux", "coscheduling"])
def test_a_queue_above_its_fair_share_is_preempted(scheduler: str) -> None:
    made = create(scheduler)
    record = simulate(
        load_workload(EXAMPLE), read_cluster(REPO / "examples/clusters/two-8core.yaml"), {made.name: made}
    )
    rows = {job.job_id: job for job in record.jobs}
    b_at_10 = [key for key, row in rows.items() if key.startswith("team-b/") and row.starting_time == 10.0]
    assert len(b_at_10) == 8
    a_kept = [key for key, row in rows.items() if key.startswith("team-a/") and row.finish_time == 1000.0]
    assert a_kept == ["team-a/a-00", "team-a/a-01", "team-a/a-02", "team-a/a-03"]  # the most recent ones go first
    assert sum(row.quota_evictions for row in rows.values()) == 8
    assert record.admission["quota_preemptions"] == 8
    assert record.admission["fair_sharing_preemptions"] == 8


def test_without_fair_sharing_the_borrower_keeps_what_it_borrowed(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("  enable: true", "  enable: false")
    path = tmp_path / "classic.yaml"
    path.write_text(text)
    made = create("kube-default")
    record = simulate(load_workload(path), read_cluster(REPO / "examples/clusters/two-8core.yaml"), {made.name: made})
    assert record.admission["quota_preemptions"] == 0  # team B would borrow: classic reclaiming never lets it preempt
    assert min(job.starting_time or 0.0 for job in record.jobs if job.job_id.startswith("team-b/")) == 1000.0


def test_a_queue_of_weight_zero_comes_last_and_is_preempted_first(tmp_path: Path) -> None:
    at_once = teams(tmp_path, {"z": "0", "a": "1"}, {"z": 0.0, "a": 0.0})
    assert (started_at(at_once, "a", 0.0), started_at(at_once, "z", 0.0)) == (12, 0)
    later = teams(tmp_path, {"z": "0", "a": "1"}, {"z": 0.0, "a": 10.0})
    assert started_at(later, "a", 10.0) == 12  # every one of Z's Jobs is preempted: its share is infinite
    assert later.admission["fair_sharing_preemptions"] == 12
    assert started_at(later, "z", 110.0) == 12
