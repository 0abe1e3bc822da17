"""``kubeflux simulate`` end to end on the shared real traces, as the command contract and the acceptance state it:
the table, summary.csv's columns, one jobs.csv per scheduler that evalys loads, the plots, and EASY waiting less
than FCFS."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from evalys.jobset import JobSet

TRACES = Path("/work/shared/traces")
SCHEDULERS = ("fcfs", "easy", "kube-default")
SUMMARY_COLUMNS = {
    "scheduler",
    "jobs",
    "makespan",
    "mean_waiting_time",
    "max_waiting_time",
    "mean_turnaround_time",
    "mean_bounded_slowdown",
    "utilization",
    "pods_per_wall_second",
    "wall_seconds",
}


@pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning", "ignore:The inplace keyword")
@pytest.mark.parametrize(
    ("trace", "nodes", "cores", "jobs"),
    [("HPC2N-2002-2.2.first3170.swf", 120, 2, 3170), ("KTH-SP2-1996-2.1-cln.first1000.batsim.json", 96, 1, 1000)],
    ids=["HPC2N", "KTH"],
)
def test_simulate_compares_fcfs_easy_and_kube_default_on_a_real_trace(
    tmp_path: Path, trace: str, nodes: int, cores: int, jobs: int
) -> None:
    out = tmp_path / "out"
    command = [sys.executable, "-m", "kubeflux.cli", "simulate", "--workload", str(TRACES / trace), "--out", str(out)]
    command += ["--nodes", str(nodes), "--cores-per-node", str(cores)]
    for name in SCHEDULERS:
        command += ["--scheduler", name]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert all(name in result.stdout for name in SCHEDULERS)  # the comparison table
    with (out / "summary.csv").open() as stream:
        rows = {row["scheduler"]: row for row in csv.DictReader(stream)}
    assert list(rows) == list(SCHEDULERS)
    assert set(rows["fcfs"]) >= SUMMARY_COLUMNS
    assert all(int(row["jobs"]) == jobs for row in rows.values())
    assert float(rows["easy"]["mean_waiting_time"]) < float(rows["fcfs"]["mean_waiting_time"])
    for name in SCHEDULERS:
        jobset = JobSet.from_csv(str(out / name / "jobs.csv"))
        assert len(jobset.df) == jobs
        assert jobset.df["execution_time"].min() >= 0  # no finish precedes its start
    for plot in ("gantt.png", "utilization.png", "queue.png", "waiting_cdf.png"):
        assert (out / plot).read_bytes()[:4] == b"\x89PNG"
    assert 'src="gantt.png"' in (out / "index.html").read_text()
