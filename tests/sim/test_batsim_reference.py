"""``jobs.csv`` next to a ``jobs.csv`` that Batsim itself wrote.

``data/batsim_out_jobs.csv`` is the header and three rows (jobs 0, 1 and 10) of ``samples/results/out_jobs.csv`` in
the public repository hpcc-hcmut/batsim-web-portal (commit 339c34fb388015251e129d2c7d76dab32f3c8668), a Batsim
run of a delay workload named ``w0``. The tests replay those three jobs as a Batsim workload through
``kubeflux simulate`` and compare the lines: same header, same values written the same way (six decimals,
``-1.000000``, ``""``), the workload's own submission times and profile names.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.metrics import BATSIM_COLUMNS, KUBERNETES_COLUMNS

REFERENCE = Path(__file__).parent / "data" / "batsim_out_jobs.csv"


def _reference() -> list[dict[str, str]]:
    with REFERENCE.open(newline="") as stream:
        return list(csv.DictReader(stream))


def _replay(tmp_path: Path, scheduler: str = "easy") -> Path:
    """The reference's jobs as a Batsim workload (``w0.json``: delay profiles named as in the reference), run on one
    node of 160 cores (Batsim's platform had at least 159); returns the run's ``jobs.csv``."""
    rows = _reference()
    workload = {
        "nb_res": 160,
        "jobs": [
            {
                "id": int(row["job_id"]),
                "subtime": float(row["submission_time"]),
                "walltime": float(row["requested_time"]),
                "res": int(row["requested_number_of_resources"]),
                "profile": row["profile"],
            }
            for row in rows
        ],
        "profiles": {row["profile"]: {"type": "delay", "delay": float(row["execution_time"])} for row in rows},
    }
    path = tmp_path / "w0.json"
    path.write_text(json.dumps(workload))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(path), "-s", scheduler, "-o", str(out), "--nodes", "1", "--cores-per-node", "160"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out / scheduler / "jobs.csv"


def test_the_reference_is_batsims_header() -> None:
    assert REFERENCE.read_text().splitlines()[0] == ",".join(BATSIM_COLUMNS)


@pytest.mark.parametrize("scheduler", ["easy", "kubeflux"])
def test_replaying_batsims_jobs_writes_batsims_lines(tmp_path: Path, scheduler: str) -> None:
    ours = _replay(tmp_path, scheduler).read_text().splitlines()
    theirs = REFERENCE.read_text().splitlines()
    assert ours[0] == theirs[0] + "," + ",".join(KUBERNETES_COLUMNS)
    assert len(ours) == len(theirs)
    for mine, batsims in zip(ours[1:], theirs[1:], strict=True):
        # the line Batsim wrote, character for character, then the Kubernetes columns
        assert mine.startswith(batsims + ","), f"\nours:   {mine}\nBatsim: {batsims}"
        assert mine[len(batsims) + 1 :].split(",") == ["0.000000", "0.000000", mine.split(",")[12], "0"]


def test_submission_times_are_the_workloads_own(tmp_path: Path) -> None:
    """Batsim keeps ``subtime``: a workload whose first job arrives at 1 s (as the shared KTH-SP2 one) says 1, not 0;
    every other time is on the same clock."""
    workload = {
        "nb_res": 4,
        "jobs": [
            {"id": 15, "subtime": 1, "walltime": 100, "res": 4, "profile": "15"},
            {"id": 16, "subtime": 173.5, "walltime": 100, "res": 4, "profile": "16"},
        ],
        "profiles": {"15": {"type": "delay", "delay": 200}, "16": {"type": "delay", "delay": 10}},
    }
    path = tmp_path / "kth.json"
    path.write_text(json.dumps(workload))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(path), "-s", "fcfs", "-o", str(out), "--nodes", "1", "--cores-per-node", "4"]
    assert CliRunner().invoke(app, args).exit_code == 0
    with (out / "fcfs" / "jobs.csv").open(newline="") as stream:
        first, second = csv.DictReader(stream)
    assert (first["submission_time"], first["starting_time"], first["finish_time"]) == (
        "1.000000",
        "1.000000",
        "101.000000",  # killed at its 100 s walltime, as Batsim does
    )
    assert (second["submission_time"], second["starting_time"], second["waiting_time"]) == (
        "173.500000",
        "173.500000",
        "0.000000",
    )
    assert first["final_state"] == "COMPLETED_WALLTIME_REACHED" and first["profile"] == "15"
    with (out / "fcfs" / "pods.csv").open(newline="") as stream:
        pods = list(csv.DictReader(stream))
    assert [float(pod["creation_time"]) for pod in pods] == [1.0, 173.5]


@pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning", "ignore:The inplace keyword")
def test_evalys_reads_ours_as_it_reads_batsims(tmp_path: Path) -> None:
    """An optional check with evalys (skipped when it is not installed): the same job frame from both files."""
    jobset = pytest.importorskip("evalys.jobset")
    ours = jobset.JobSet.from_csv(str(_replay(tmp_path)))
    theirs = jobset.JobSet.from_csv(str(REFERENCE))
    columns = ["jobID", "submission_time", "starting_time", "finish_time", "execution_time", "proc_alloc"]
    assert ours.df[columns].to_dict("records") == theirs.df[columns].to_dict("records")
    assert ours.MaxProcs == theirs.MaxProcs == 112
