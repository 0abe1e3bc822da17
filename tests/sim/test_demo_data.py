"""The workload ``make demo`` runs is bundled, loads without problems and mixes kubeflux and kube-scheduler pods;
the demo compares the schedulers with coupled jobs and says what kubeflux gains over each baseline."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.demo import SCHEDULERS, run_demo
from kubeflux.sim.verdict import verdict_line
from kubeflux.sim.workloads import load_workload
from tests.shared import unboxed


def test_the_bundled_demo_workload_loads_cleanly() -> None:
    data = resources.files("kubeflux") / "data" / "demo"
    with resources.as_file(data) as folder:
        trace = load_workload(folder / "hpc-mix.swf")
        services = load_workload(folder / "services.yaml")
    assert len(trace.jobs) == 200 and not trace.problems
    assert max(job.requested_processors for job in trace.jobs) <= 256  # fits the demo's 16 x 16 cores
    assert [job.pods[0].scheduler_name for job in services.jobs] == ["default-scheduler"] * 3
    assert not services.problems


def test_the_demo_says_what_kubeflux_gains_over_each_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``make demo``: coupled jobs (kube-default holds cores idle for the ranks it has not placed: its allocated
    utilization is above its useful one), and one line per baseline comparing kubeflux on what users feel."""
    run_demo(tmp_path / "demo")
    output = capsys.readouterr().out
    rows = json.loads((tmp_path / "demo" / "summary.json").read_text(encoding="utf-8"))
    by_name = {row["scheduler"]: row for row in rows}
    assert list(by_name) == list(SCHEDULERS) and SCHEDULERS[0] == "kubeflux"
    default = by_name["kube-default"]
    assert default["utilization"] > default["useful_utilization"] + 0.1  # the idle holding of partial placement
    kubeflux = by_name["kubeflux"]
    assert kubeflux["utilization"] == kubeflux["useful_utilization"]  # whole jobs placed at once
    lines = [" ".join(line.split()) for line in output.splitlines() if line.startswith("kubeflux vs ")]
    assert lines == [verdict_line(kubeflux, by_name[name]) for name in SCHEDULERS[1:]]
    gain = next(line for line in lines if line.startswith("kubeflux vs kube-default: "))
    # on the demo's mix kubeflux waits less and computes on more of the cores than kube-default, all jobs finished
    assert "mean wait −" in gain and "useful utilization +" in gain and gain.endswith("(both finished all 203 jobs)")


def test_a_demo_out_under_a_file_is_refused_with_the_system_s_reason(tmp_path: Path) -> None:
    """``demo --out FILE/sub`` goes through ``simulate``'s ``--out``: NotADirectoryError was a traceback."""
    taken = tmp_path / "taken"
    taken.write_text("mine")
    result = CliRunner().invoke(app, ["demo", "--out", str(taken / "sub")])
    expected = f"--out {taken / 'sub'}: cannot be the output folder: Not a directory"
    assert result.exit_code == 2 and unboxed(expected) in unboxed(result.output)
