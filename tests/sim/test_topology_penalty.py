"""The simulator feels topology: ``--topology-penalty`` slows a coupled job by the domains it spans, and
``jobs.csv``/``summary.csv`` say how jobs were spread (only on clusters whose nodes carry a level's label)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.objects import Node
from kubeflux.scheduler.topology import DEFAULT_LEVELS, RACK_LEVEL, ZONE_LEVEL
from kubeflux.sim.fabric import Fabric, parse_penalty
from tests.sim._topology import FILLERS, cluster_yaml, job_yaml

RUNNER = CliRunner()


def run(
    tmp_path: Path, cluster: str, *jobs: str, options: tuple[str, ...] = ()
) -> tuple[dict[str, dict[str, str]], dict[str, object]]:
    """kubeflux's jobs.csv rows by job name, and its summary row."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cluster.yaml").write_text(cluster)
    (tmp_path / "work.yaml").write_text("---\n".join(jobs))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(tmp_path / "work.yaml"), "--cluster", str(tmp_path / "cluster.yaml"), *options]
    result = RUNNER.invoke(app, [*args, "-s", "kubeflux", "-o", str(out)])
    assert result.exit_code == 0, result.output
    with (out / "kubeflux" / "jobs.csv").open() as f:
        rows = {row["job_id"].removeprefix("default/"): row for row in csv.DictReader(f)}
    summary = json.loads((out / "summary.json").read_text())[0]
    return rows, summary


def test_a_gang_spread_over_two_racks_computes_1_plus_p_times_as_long(tmp_path: Path) -> None:
    """Racks 0 and 1 half busy: the 4-pod gang that asks nothing takes their free halves (two racks) under lonode."""
    work = (*FILLERS, job_yaml("mpi", 1, 50, 4))
    rows, summary = run(tmp_path / "a", cluster_yaml(3, 4), *work, options=("--topology-penalty", "rack=0.5"))
    assert (rows["mpi"]["domains[rack]"], rows["mpi"]["execution_time"]) == ("2", "75.000000")
    assert rows["fill-a"]["execution_time"] == "100.000000"  # two pods of a Job that is not coupled: not slowed
    assert summary["split[rack]"] == pytest.approx(1 / 3) and summary["multi_pod_jobs"] == 3
    assert summary["mean_execution_time"] == pytest.approx((100 + 100 + 75) / 3)
    plain, _ = run(tmp_path / "b", cluster_yaml(3, 4), *work)
    assert (plain["mpi"]["domains[rack]"], plain["mpi"]["execution_time"]) == ("2", "50.000000")


def test_a_gang_kept_in_one_rack_is_not_slowed(tmp_path: Path) -> None:
    """Each rack a zone of its own: the gang that asks nothing, over two racks, spans two zones too and computes
    (1 + 0.5)·(1 + 2) times as long; the one that requires one rack is in one zone and is not slowed."""
    penalty = ("--topology-penalty", "rack=0.5,zone=2")
    cluster = cluster_yaml(3, 4, zoned=True)
    work = (*FILLERS, job_yaml("mpi", 1, 50, 4, topology="required"))
    rows, summary = run(tmp_path / "a", cluster, *work, options=penalty)
    assert (rows["mpi"]["domains[rack]"], rows["mpi"]["domains[zone]"]) == ("1", "1")
    assert rows["mpi"]["execution_time"] == "50.000000" and summary["split[rack]"] == summary["split[zone]"] == 0.0
    spread, _ = run(tmp_path / "b", cluster, *FILLERS, job_yaml("mpi", 1, 50, 4), options=penalty)
    assert (spread["mpi"]["domains[rack]"], spread["mpi"]["domains[zone]"]) == ("2", "2")
    assert spread["mpi"]["execution_time"] == "225.000000"


def late_members(name: str, submit: float, run: int) -> str:
    """A PodGroup of 2 and its Job of 4 completions, 2 at a time: the last two start after the job began."""
    return job_yaml(name, submit, run, 2).replace("completions: 2", "completions: 4")


def pods_of(tmp_path: Path, job: str) -> list[dict[str, str]]:
    """The rows of ``job``'s pods in kubeflux's pods.csv."""
    with (tmp_path / "out" / "kubeflux" / "pods.csv").open() as f:
        return [row for row in csv.DictReader(f) if row["job_id"] == f"default/{job}"]


def test_pods_that_start_after_the_job_began_are_not_stretched(tmp_path: Path) -> None:
    """One node of each rack busy: the job's first two pods compute on the other two, in two racks, 1.5 times as
    long; the two that start when they end compute their 50 s."""
    fillers = (job_yaml("fill-a", 0, 200, 1, rack="rack-0"), job_yaml("fill-b", 0, 200, 1, rack="rack-1"))
    rows, _ = run(
        tmp_path, cluster_yaml(2, 2), *fillers, late_members("mpi", 1, 50), options=("--topology-penalty", "rack=0.5")
    )
    runs = sorted(float(row["end_time"]) - float(row["compute_time"]) for row in pods_of(tmp_path, "mpi"))
    assert runs == pytest.approx([50, 50, 75, 75])
    assert rows["mpi"]["domains[rack]"] == "2"


def test_the_racks_a_job_spanned_are_counted_when_it_began_with_a_penalty_or_without(tmp_path: Path) -> None:
    """Rack 0 busy until 40: the job's first two pods compute in rack 1 (one rack: not slowed); the two that start
    at 51 take rack 0's lowest nodes. jobs.csv counts the racks when the job began, with a penalty or without."""
    work = (job_yaml("fill", 0, 40, 2, rack="rack-0"), late_members("mpi", 1, 50))
    plain, _ = run(tmp_path / "a", cluster_yaml(2, 2), *work)
    slowed, _ = run(tmp_path / "b", cluster_yaml(2, 2), *work, options=("--topology-penalty", "rack=0.5"))
    nodes = sorted(row["node"] for row in pods_of(tmp_path / "a", "mpi"))
    assert nodes == ["node-0", "node-1", "node-2", "node-3"]  # over its whole run, the job was in both racks
    assert plain["mpi"]["domains[rack]"] == slowed["mpi"]["domains[rack]"] == "1"
    assert plain["mpi"]["execution_time"] == slowed["mpi"]["execution_time"]


def test_a_cluster_without_level_labels_writes_what_it_always_wrote(tmp_path: Path) -> None:
    cluster = cluster_yaml(2, 4).replace(f", {RACK_LEVEL}: rack-0", "").replace(f", {RACK_LEVEL}: rack-1", "")
    rows, summary = run(tmp_path, cluster, job_yaml("mpi", 1, 50, 8), options=("--topology-penalty", "rack=1"))
    assert not any(key.startswith("domains[") for key in rows["mpi"]) and rows["mpi"]["execution_time"] == "50.000000"
    assert not {"split[rack]", "multi_pod_jobs", "mean_execution_time"} & set(summary)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("rack=x", "'rack=x': 'x' is not a number"),
        ("switch=1", "'switch' is not a topology level of the run"),
        ("rack=-0.1", "the penalty must be a finite number >= 0"),
        ("rack=nan", "the penalty must be a finite number >= 0"),
        ("rack", "expected LEVEL=NUMBER"),
        ("rack=1,rack=2", "level 'rack' is given twice"),
    ],
)
def test_a_bad_penalty_is_refused_naming_the_option(tmp_path: Path, given: str, said: str) -> None:
    (tmp_path / "c.yaml").write_text(cluster_yaml(1, 2))
    (tmp_path / "w.yaml").write_text(job_yaml("mpi", 0, 5, 2))
    args = [
        "simulate",
        "-w",
        str(tmp_path / "w.yaml"),
        "--cluster",
        str(tmp_path / "c.yaml"),
        "-o",
        str(tmp_path / "o"),
    ]
    result = RUNNER.invoke(app, [*args, "--topology-penalty", given], terminal_width=400)
    assert result.exit_code == 2
    words = " ".join(result.output.replace("│", " ").split())
    assert "--topology-penalty" in words and said in words


def test_a_penalty_on_a_level_that_the_run_does_not_have_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(cluster_yaml(1, 2))
    (tmp_path / "w.yaml").write_text(job_yaml("mpi", 0, 5, 2))
    args = [
        "simulate",
        "-w",
        str(tmp_path / "w.yaml"),
        "--cluster",
        str(tmp_path / "c.yaml"),
        "-o",
        str(tmp_path / "o"),
    ]
    result = RUNNER.invoke(app, [*args, "--topology-levels", ZONE_LEVEL, "--topology-penalty", "rack=1"])
    assert result.exit_code == 2 and "levels: zone (topology.kubernetes.io/zone)" in " ".join(result.output.split())


def node(name: str, **labels: str) -> Node:
    return Node(name=name, uid=name, allocatable={"cpu": 1000}, labels=labels)


def test_levels_multiply_a_domain_is_its_path_and_a_node_without_the_label_is_one_unknown_domain() -> None:
    fabric = Fabric.of(DEFAULT_LEVELS, parse_penalty("rack=0.1, topology.kubernetes.io/zone=0.5", DEFAULT_LEVELS))
    assert fabric.penalties == (0.5, 0.1)
    zone, rack = ZONE_LEVEL, RACK_LEVEL
    nodes = [
        node("a", **{zone: "z1", rack: "r1"}),
        node("b", **{zone: "z2", rack: "r1"}),  # rack r1 of another zone: another rack
        node("c", **{zone: "z2"}),  # no rack label: zone z2's unknown rack
        node("d", **{zone: "z2"}),
    ]
    assert fabric.spans(nodes) == (2, 3)
    assert fabric.slowdown(fabric.spans(nodes)) == pytest.approx((1 + 0.5) * (1 + 0.1 * 2))
    assert fabric.spans(nodes[2:]) == (1, 1) and fabric.slowdown((1, 1)) == 1.0
    assert fabric.present(nodes[2:]) == (zone,)
    assert Fabric.of(DEFAULT_LEVELS, {}).penalties == () == Fabric.of(DEFAULT_LEVELS, {RACK_LEVEL: 0.0}).penalties


def test_a_sweep_takes_the_penalty_and_keeps_the_keys_of_runs_without_it(tmp_path: Path) -> None:
    from kubeflux.sim.sweep import SweepError, load_grid, plan, run_task

    (tmp_path / "racks.yaml").write_text(cluster_yaml(3, 4))
    (tmp_path / "mpi.yaml").write_text("---\n".join((*FILLERS, job_yaml("mpi", 1, 50, 4))))
    grid = {"workloads": ["mpi.yaml"], "schedulers": ["kubeflux"], "clusters": [{"file": "racks.yaml"}]}
    outcomes = {}
    for penalty in ("", "rack=0.5"):
        text = json.dumps({**grid, "topologyPenalty": penalty} if penalty else grid)
        (tmp_path / "grid.yaml").write_text(text)
        (task,) = plan(*load_grid(tmp_path / "grid.yaml"))
        outcomes[penalty] = run_task(task)
    plain, slowed = outcomes[""], outcomes["rack=0.5"]
    assert plain.key != slowed.key and not plain.error and not slowed.error
    assert slowed.row is not None and plain.row is not None
    assert (slowed.row["mean_execution_time"], plain.row["mean_execution_time"]) == pytest.approx((275 / 3, 250 / 3))
    assert "domains[rack]" in slowed.jobs_csv.splitlines()[0]
    (tmp_path / "grid.yaml").write_text(json.dumps({**grid, "topologyPenalty": "rack=fast"}))
    with pytest.raises(SweepError, match="topologyPenalty: 'rack=fast': 'fast' is not a number"):
        load_grid(tmp_path / "grid.yaml")


def test_one_penalty_written_two_ways_is_one_sweep_point(tmp_path: Path) -> None:
    """The sweep's key is the penalty's value, not its text: reordered, respaced or spelled by label it is one run
    (done once); a penalty of 0 is no penalty."""
    from kubeflux.sim.sweep import load_grid, plan

    (tmp_path / "racks.yaml").write_text(cluster_yaml(1, 2))
    (tmp_path / "mpi.yaml").write_text(job_yaml("mpi", 0, 5, 2))
    grid = {"workloads": ["mpi.yaml"], "schedulers": ["kubeflux"], "clusters": [{"file": "racks.yaml"}]}

    def key(penalty: str | None) -> str:
        (tmp_path / "grid.yaml").write_text(
            json.dumps(grid if penalty is None else {**grid, "topologyPenalty": penalty})
        )
        (task,) = plan(*load_grid(tmp_path / "grid.yaml"))
        return task.key

    same = {key(text) for text in ("rack=0.1,zone=0.5", "zone=0.5, rack=0.1", f"{ZONE_LEVEL}=.5,rack=0.10,")}
    assert len(same) == 1 and key("rack=0.1,zone=0.4") not in same
    assert key("rack=0") == key("") == key(None)
