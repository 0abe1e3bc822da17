"""Topology through ``kubeflux simulate``: a cluster file of labelled nodes, gangs that ask for one rack."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.topology import RACK_LEVEL
from kubeflux.sim.workloads.cluster_file import read_cluster
from tests.sim._topology import FILLERS, cluster_yaml, job_yaml

RUNNER = CliRunner()


def simulate(tmp_path: Path, cluster: str, *jobs: str, options: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """The nodes of each job's pods that ran under kubeflux."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "work.yaml").write_text("---\n".join(jobs))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(tmp_path / "work.yaml"), "--cluster", str(tmp_path / "cluster.yaml"), *options]
    result = RUNNER.invoke(app, [*args, "-s", "kubeflux", "-o", str(out)])
    assert result.exit_code == 0, result.output
    nodes: dict[str, list[str]] = {}
    with (out / "kubeflux" / "pods.csv").open() as f:
        for row in csv.DictReader(f):
            if row["node"]:
                nodes.setdefault(row["job_id"].removeprefix("default/"), []).append(row["node"])
    return {job: sorted(names, key=lambda n: int(n.rsplit("-", 1)[1])) for job, names in nodes.items()}


def test_a_gang_requiring_one_rack_runs_in_the_rack_with_room(tmp_path: Path) -> None:
    placed = simulate(tmp_path, cluster_yaml(3, 4), *FILLERS, job_yaml("mpi", 1, 50, 4, topology="required"))
    assert placed["mpi"] == ["node-8", "node-9", "node-10", "node-11"]


def test_without_asking_the_gang_takes_the_lowest_free_nodes_across_racks(tmp_path: Path) -> None:
    placed = simulate(tmp_path, cluster_yaml(3, 4), *FILLERS, job_yaml("mpi", 1, 50, 4))
    assert placed["mpi"] == ["node-2", "node-3", "node-6", "node-7"]


def test_preferred_relaxes_to_two_racks_when_none_has_room(tmp_path: Path) -> None:
    placed = simulate(tmp_path, cluster_yaml(2, 4), *FILLERS, job_yaml("mpi", 1, 50, 4, topology="preferred"))
    assert placed["mpi"] == ["node-2", "node-3", "node-6", "node-7"]


def test_without_levels_a_required_gang_is_told_the_cluster_has_none(tmp_path: Path) -> None:
    placed = simulate(
        tmp_path,
        cluster_yaml(3, 4),
        *FILLERS,
        job_yaml("mpi", 1, 50, 4, topology="required"),
        options=("--topology-levels", ""),
    )
    assert "mpi" not in placed  # rejected: the cluster has no rack level
    assert "not a topology level of the cluster" in (tmp_path / "out" / "kubeflux" / "pods.csv").read_text()


def test_racks_in_node_order_change_no_schedule_of_a_job_that_asks_nothing(tmp_path: Path) -> None:
    """Contiguous racks under lonode: the walk takes the lowest rack with room, then its lowest nodes, as it takes the
    lowest nodes without racks: the same schedule."""
    jobs = [job_yaml(f"j{i}", i * 7 % 30, 20 + i * 13 % 40, 1 + i % 5) for i in range(24)]
    with_racks = simulate(tmp_path / "a", cluster_yaml(4, 3), *jobs)
    without = simulate(tmp_path / "b", cluster_yaml(4, 3), *jobs, options=("--topology-levels", ""))
    assert with_racks == without


def test_the_example_cluster_with_racks_reads(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(cluster_yaml(2, 2))
    nodes = read_cluster(tmp_path / "c.yaml")
    assert [n.labels[RACK_LEVEL] for n in nodes] == ["rack-0", "rack-0", "rack-1", "rack-1"]


@pytest.mark.parametrize("topology", ["required", "preferred"])
def test_ranks_sharing_nodes_run_in_the_rack_whose_memory_holds_them(tmp_path: Path, topology: str) -> None:
    """rack-0: node-0 (4 ranks of 4 cores by cpu, 2 of 24Gi by memory); rack-1: node-1 and node-2 (2 each)."""
    cluster = cluster_yaml(3, 1).replace("rack-2", "rack-1")
    placed = simulate(tmp_path, cluster, job_yaml("mpi", 1, 50, 4, topology=topology, cores=4, memory="24Gi"))
    assert placed["mpi"] == ["node-1", "node-1", "node-2", "node-2"]
