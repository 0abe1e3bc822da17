"""``kubeflux sweep``: a grid of simulations on a Dask LocalCluster and on local processes, resumed, with a run that
fails, and grid files with mistakes."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.sweep import SweepError, execute, load_grid, plan
from tests.shared import REPO

distributed = pytest.importorskip("distributed")

SCHEDULERS = ["kubeflux", "kubeflux-fcfs", "easy", "kube-default"]


def _trace(path: Path, jobs: int, seed: int) -> Path:
    """A small SWF trace: ``jobs`` jobs of 1-16 cores and 10-300 s on a 4 x 16 core machine."""
    rng = random.Random(seed)
    lines = ["; MaxProcs: 64", "; MaxNodes: 4"]
    for number in range(1, jobs + 1):
        procs, run = rng.randint(1, 16), rng.randint(10, 300)
        lines.append(
            f"{number} {number * rng.randint(5, 40)} -1 {run} {procs} -1 -1 {procs} {run * 2} -1 1 1 1 -1 1 1 -1 -1"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _grid(folder: Path, **fields: Any) -> Path:
    traces = [_trace(folder / f"trace{i}.swf", 12, i).name for i in range(3)]
    grid = {
        "name": "three-traces",
        "workloads": traces,
        "schedulers": SCHEDULERS,
        "clusters": [{"nodes": 4, "coresPerNode": 16}],
        "seeds": [0, 1, 2],
        "startDelay": 1.0,
        "startJitter": 4.0,
        **fields,
    }
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(grid), encoding="utf-8")
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0"
    ) as dask:
        yield dask.scheduler_address


def test_three_traces_by_four_schedulers_by_three_seeds_on_a_dask_local_cluster_then_resumed(
    tmp_path: Path, dask_address: str
) -> None:
    grid = _grid(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(out), "--dask", dask_address])
    assert result.exit_code == 0, result.output
    assert "36 runs, 0 already done, 36 to run on Dask" in result.output
    rows = _rows(out / "sweep.csv")
    assert len(rows) == 36 and {r["status"] for r in rows} == {"ok"}
    assert {r["scheduler"] for r in rows} == set(SCHEDULERS)
    assert {(r["scheduler"], r["policy"]) for r in rows if r["scheduler"] == "easy"} == {("easy", "-")}
    assert all(int(r["jobs"]) == 12 for r in rows)
    merged = _rows(out / "sweep-summary.csv")
    assert len(merged) == 12 and all(r["runs"] == "3" and r["ok"] == "3" for r in merged)
    for row in merged:  # the mean lies between the seeds' extremes
        low, mean, high = (float(row[f"mean_waiting_time{s}"]) for s in ("_min", "", "_max"))
        assert low <= mean <= high
    assert (out / "sweep-mean_waiting_time.png").stat().st_size > 0
    assert json.loads((out / "sweep.json").read_text())[0]["status"] == "ok"
    again = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(out), "--dask", dask_address])
    assert again.exit_code == 0, again.output
    assert "36 runs, 36 already done, 0 to run" in again.output
    assert "done in" not in again.output  # nothing was run again


def test_the_same_grid_gives_the_same_numbers_on_local_processes_and_a_changed_input_runs_again(
    tmp_path: Path, dask_address: str
) -> None:
    grid = _grid(tmp_path, schedulers=["kubeflux", "easy"], seeds=[0, 1])
    on_dask, local = tmp_path / "dask", tmp_path / "local"
    assert CliRunner().invoke(app, ["sweep", str(grid), "-o", str(on_dask), "--dask", dask_address]).exit_code == 0
    assert CliRunner().invoke(app, ["sweep", str(grid), "-o", str(local), "--workers", "2"]).exit_code == 0

    def numbers(out: Path) -> list[tuple[str, ...]]:
        return sorted(tuple(r[k] for k in ("key", "mean_waiting_time", "makespan")) for r in _rows(out / "sweep.csv"))

    assert numbers(on_dask) == numbers(local)
    _trace(tmp_path / "trace0.swf", 13, 0)  # one workload changed: only its runs are run again
    again = CliRunner().invoke(app, ["sweep", str(grid), "-o", str(local), "--workers", "1"])
    assert "8 already done, 4 to run" in again.output, again.output


def test_a_run_that_fails_is_reported_and_the_others_go_on(tmp_path: Path) -> None:
    grid = _grid(tmp_path, schedulers=["easy"], seeds=[0])
    (tmp_path / "trace1.swf").write_text("1 0 -1 60 4\nnot a trace line at all\n", encoding="utf-8")
    loaded, base = load_grid(grid)
    outcomes = execute(plan(loaded, base), workers=1)
    failed = [o for o in outcomes if o.error]
    assert len(outcomes) == 3 and len(failed) == 1 and failed[0].point["workload"] == "trace1.swf"
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["sweep", str(grid), "-o", str(out), "--workers", "1"])
    assert result.exit_code == 0  # one failed run is not fatal
    rows = {r["workload"]: r for r in _rows(out / "sweep.csv")}
    assert rows["trace1.swf"]["status"] == "failed" and "trace1.swf" in rows["trace1.swf"]["error"]
    assert rows["trace0.swf"]["status"] == rows["trace2.swf"]["status"] == "ok"
    assert "1 run(s) failed" in result.output


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schedulers": ["kubeflux", "nope"]}, "schedulers: unknown scheduler(s) nope"),
        ({"schedulers": ["easy", "easy"]}, "schedulers: a scheduler is named twice"),
        ({"policies": ["lowest"]}, "policies"),
        ({"clusters": [{"nodes": 4}]}, "clusters.0: give file, or nodes and coresPerNode"),
        ({"seeds": []}, "seeds: List should have at least 1 item"),
        ({"seeds": [True]}, "seeds.0: Input should be a valid integer"),
        ({"clusters": [{"file": "a/x.yaml"}, {"file": "b/x.yaml"}]}, "clusters: two clusters are both labelled x"),
        ({"seeds": [1, 1]}, "seeds: a seed is named twice"),
        ({"policies": ["lonode", "lonode"]}, "policies: a policy is named twice"),
        ({"workloads": ["trace0.swf", "./trace0.swf"]}, "workloads: trace0.swf is named twice"),
        ({"clusters": [{"nodes": True, "coresPerNode": 16}]}, "clusters.0.nodes: Input should be a valid integer"),
        ({"workload": ["x"]}, "workload: Extra inputs are not permitted"),
    ],
)
def test_a_grid_with_a_mistake_names_the_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    grid = _grid(tmp_path, **change)
    with pytest.raises(SweepError, match=r"grid\.yaml: ") as error:
        load_grid(grid)
    assert message in str(error.value)
    result = CliRunner().invoke(app, ["sweep", str(grid), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "error:" in result.output


def test_a_missing_workload_file_is_named(tmp_path: Path) -> None:
    grid = _grid(tmp_path, workloads=["absent.swf"])
    loaded, base = load_grid(grid)
    with pytest.raises(SweepError, match=r"workloads\.0: .*absent\.swf: cannot read"):
        plan(loaded, base)


def test_the_example_grid_plans_every_point() -> None:
    loaded, base = load_grid(REPO / "examples" / "sweep" / "grid.yaml")
    tasks = plan(loaded, base)
    # 3 workloads x 2 clusters x 4 schedulers (one match policy each) x 3 seeds
    assert len(tasks) == 72 and len({t.key for t in tasks}) == 72


def test_two_custom_policies_alike_in_their_first_characters_are_two_runs(tmp_path: Path) -> None:
    long = "policy=high node_centric=true node_exclusive=true"
    grid = _grid(tmp_path, schedulers=["kubeflux"], seeds=[0], policies=[long, long.replace("true", "false", 2)])
    tasks = plan(*load_grid(grid))
    assert len(tasks) == 6 and len({t.key for t in tasks}) == 6
