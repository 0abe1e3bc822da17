"""Which schedulers see racks: kube-default and coscheduling have no notion of them (a rack label or a topology
annotation changes none of their placements), kubeflux under a packing policy fills racks in order, so a job that
asks nothing sits in as few racks as the free nodes in rack order give it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.topology import RACK_LEVEL
from tests.sim._topology import FILLERS, cluster_yaml, job_yaml

RUNNER = CliRunner()


def placements(
    tmp_path: Path, scheduler: str, cluster: str, *jobs: str, options: tuple[str, ...] = ()
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each job's pods' nodes under ``scheduler``, and its ``domains[rack]`` cell ("" without the column)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "work.yaml").write_text("---\n".join(jobs))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(tmp_path / "work.yaml"), "--cluster", str(tmp_path / "cluster.yaml")]
    result = RUNNER.invoke(app, [*args, "-s", scheduler, "-o", str(out), *options])
    assert result.exit_code == 0, result.output
    nodes: dict[str, list[str]] = {}
    with (out / scheduler / "pods.csv").open() as f:
        for row in csv.DictReader(f):
            nodes.setdefault(row["job_id"].removeprefix("default/"), []).append(row["node"])
    with (out / scheduler / "jobs.csv").open() as f:
        racks = {row["job_id"].removeprefix("default/"): row.get("domains[rack]", "") for row in csv.DictReader(f)}
    return {job: sorted(names) for job, names in nodes.items()}, racks


def unlabelled(cluster: str) -> str:
    return "\n".join(line.replace(f", {RACK_LEVEL}: ", ", x/y: ") for line in cluster.splitlines())


@pytest.mark.parametrize("scheduler", ["kube-default", "coscheduling"])
def test_baselines_place_the_same_with_or_without_racks_and_topology_annotations(
    tmp_path: Path, scheduler: str
) -> None:
    jobs = [job_yaml(f"j{i}", i * 5 % 20, 30 + i * 11 % 50, 1 + i % 4) for i in range(10)]
    asking = [job_yaml(f"j{i}", i * 5 % 20, 30 + i * 11 % 50, 1 + i % 4, topology="required") for i in range(10)]
    with_racks, racks = placements(tmp_path / "a", scheduler, cluster_yaml(3, 4), *asking)
    without, _ = placements(tmp_path / "b", scheduler, unlabelled(cluster_yaml(3, 4)), *jobs)
    assert with_racks == without
    assert any(int(count) > 1 for count in racks.values())  # they do spread gangs over racks


def test_kubeflux_asking_nothing_fills_racks_in_order_so_a_gang_that_fits_one_rack_stays_in_it(tmp_path: Path) -> None:
    """Racks of 4 nodes, the first two half busy: a 2-node gang takes rack-0's free half (one rack); on the empty
    cluster a 6-node gang takes rack-0 and half of rack-1, two racks, the fewest it can."""
    placed, racks = placements(tmp_path / "a", "kubeflux", cluster_yaml(4, 4), *FILLERS, job_yaml("two", 1, 50, 2))
    assert placed["two"] == ["node-2", "node-3"] and racks["two"] == "1"
    placed, racks = placements(tmp_path / "b", "kubeflux", cluster_yaml(4, 4), job_yaml("six", 0, 50, 6))
    assert placed["six"] == ["node-0", "node-1", "node-2", "node-3", "node-4", "node-5"] and racks["six"] == "2"


def test_kubeflux_asking_nothing_does_not_skip_to_an_empty_rack(tmp_path: Path) -> None:
    """Packing is not a search for the fewest racks: with rack-0 and rack-1 half busy, a 4-node gang takes their
    free halves (two racks) before the empty rack-2; asking for one rack (preferred or required) puts it there."""
    placed, racks = placements(tmp_path / "a", "kubeflux", cluster_yaml(3, 4), *FILLERS, job_yaml("mpi", 1, 50, 4))
    assert racks["mpi"] == "2"
    work = (*FILLERS, job_yaml("mpi", 1, 50, 4, topology="preferred"))
    placed, racks = placements(tmp_path / "b", "kubeflux", cluster_yaml(3, 4), *work)
    assert placed["mpi"] == ["node-10", "node-11", "node-8", "node-9"] and racks["mpi"] == "1"
