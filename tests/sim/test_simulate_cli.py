"""``kubeflux simulate``'s rough edges, as a new user meets them: bad files, empty workloads, a reused ``--out``,
ignored options, narrow terminals, progress in a log, and the synthetic workloads from the command line."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.command import fit_table
from kubeflux.sim.progress import ProgressReporter, eta_seconds
from tests.shared import unboxed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = EXAMPLES / "workloads" / "small.swf"
CLUSTER = ["--nodes", "4", "--cores-per-node", "16"]


def simulate(*args: str | Path) -> tuple[int, str]:
    """Exit code and output, with click's error box and line breaks taken out (words joined by one space)."""
    result = CliRunner().invoke(app, ["simulate", *map(str, args)])
    return result.exit_code, " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())


def test_a_truncated_gzip_trace_is_an_error_naming_the_file(tmp_path: Path) -> None:
    whole = gzip.compress(SMALL.read_bytes() * 40)
    truncated = tmp_path / "cut.swf.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    code, output = simulate("-w", truncated, "-s", "easy", "-o", tmp_path / "out", *CLUSTER)
    assert code == 2
    assert "cut.swf.gz: cannot read" in output and "truncated or corrupt" in output
    assert "Aborted" not in output and "Traceback" not in output


def test_a_corrupt_gzip_trace_is_an_error_naming_the_file(tmp_path: Path) -> None:
    corrupt = tmp_path / "bad.swf.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    code, output = simulate("-w", corrupt, "-s", "easy", "-o", tmp_path / "out", *CLUSTER)
    assert code == 2 and "bad.swf.gz: cannot read" in output


def test_error_text_keeps_its_brackets(tmp_path: Path) -> None:
    odd = tmp_path / "[b]odd[i].swf"
    odd.write_text("not a workload\n")
    code, output = simulate("-w", odd, "-s", "easy", "-o", tmp_path / "out", *CLUSTER)
    assert code == 2 and "[b]odd[i].swf: unknown workload format" in output


@pytest.mark.parametrize("text", ["", "; Version: 2.2\n; MaxProcs: 64\n", "; Version: 2.2\n1 0 -1 10 1\n"])
def test_an_empty_workload_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.swf"
    path.write_text(text)
    code, output = simulate("-w", path, "-s", "easy", "-o", tmp_path / "out", *CLUSTER)
    assert code == 2
    assert "is empty" in output or "no jobs to simulate" in output
    assert not (tmp_path / "out").exists()


def test_out_refuses_a_previous_run_and_force_replaces_only_its_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _ = simulate("-w", SMALL, "-s", "fcfs", "-o", out, *CLUSTER)
    assert code == 0 and (out / "fcfs" / "jobs.csv").is_file()
    (out / "notes.txt").write_text("mine")
    code, output = simulate("-w", SMALL, "-s", "easy", "-o", out, *CLUSTER)
    assert code == 2 and "not empty" in output and "--force" in output
    code, _ = simulate("-w", SMALL, "-s", "easy", "-o", out, "--force", *CLUSTER)
    assert code == 0
    assert not (out / "fcfs").exists()  # the previous run's scheduler does not linger in the new comparison
    assert (out / "easy" / "jobs.csv").is_file() and (out / "notes.txt").read_text() == "mine"
    assert [row["scheduler"] for row in json.loads((out / "summary.json").read_text())] == ["easy"]


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--cluster", str(EXAMPLES / "clusters" / "cpu-nodes.yaml"), "--gpus-per-node", "8"], "--gpus-per-node"),
        ([*CLUSTER, "--start-delay", "5", "--start-jitter", "2"], "--start-jitter 2 is below --start-delay 5"),
        ([*CLUSTER, "-s", "easy"], "named more than once: easy"),
    ],
    ids=["gpus-with-cluster", "jitter-below-delay", "scheduler-twice"],
)
def test_options_that_would_be_ignored_are_errors(tmp_path: Path, options: list[str], complaint: str) -> None:
    code, output = simulate("-w", SMALL, "-s", "easy", "-o", tmp_path / "out", *options)
    assert code == 2 and complaint in output


def test_the_kubecon_preset_runs_from_the_command_line_on_its_kwok_cluster(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = simulate(
        "--preset", "seed004-jobs", "--synthetic", "mean_interarrival=20,jobs=10", "-s", "easy", "-s", "fcfs", "-o", out
    )
    assert code == 0, output
    rows = {row["scheduler"]: row for row in json.loads((out / "summary.json").read_text())}
    assert {name: row["mean_turnaround_time"] for name, row in rows.items()} == {"easy": 72.0, "fcfs": 72.0}
    assert all(row["mean_waiting_time"] == 0.0 for row in rows.values())


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--start-delay", "inf"], "--start-delay must be a finite number of seconds, got inf"),
        (["--start-delay", "nan"], "--start-delay must be a finite number of seconds, got nan"),
        (["--start-jitter", "inf"], "--start-jitter must be a finite number of seconds, got inf"),
        (["--start-delay", "1e18"], "--start-delay must be at most 31,536,000 s (a year), got 1e+18"),
    ],
    ids=["infinite-delay", "nan-delay", "infinite-jitter", "delay-beyond-a-year"],
)
def test_a_start_delay_that_is_no_number_of_seconds_is_refused(
    tmp_path: Path, options: list[str], complaint: str
) -> None:
    """``inf`` was an OverflowError in the scheduler, ``1e18`` a PlannerInvalidError, ``nan`` taken silently."""
    code, output = simulate("-w", SMALL, "-s", "easy", "-o", tmp_path / "out", *CLUSTER, *options)
    assert code == 2 and complaint in output
    assert not (tmp_path / "out").exists()


def test_an_out_under_a_file_is_refused_with_the_system_s_reason(tmp_path: Path) -> None:
    """``-o FILE/sub``: NotADirectoryError from ``out.mkdir`` was a traceback."""
    taken = tmp_path / "taken"
    taken.write_text("mine")
    code, output = simulate("-w", SMALL, "-s", "easy", "-o", taken / "sub", *CLUSTER)
    expected = f"--out {taken / 'sub'}: cannot be the output folder: Not a directory"
    assert code == 2 and unboxed(expected) in unboxed(output)
    assert "Traceback" not in output and taken.read_text() == "mine"


def test_synthetic_jobs_from_the_command_line_and_bad_keys_named(tmp_path: Path) -> None:
    code, _ = simulate(
        "--synthetic", "jobs=30,max_size=8,mean_runtime=60", "-s", "easy", "-o", tmp_path / "o", *CLUSTER
    )
    assert code == 0
    assert json.loads((tmp_path / "o" / "summary.json").read_text())[0]["jobs"] == 30
    code, output = simulate("--synthetic", "jobz=3", "-s", "easy", "-o", tmp_path / "p", *CLUSTER)
    assert code == 2 and "'jobz=3': expected key=value" in output
    listing = CliRunner().invoke(app, ["simulate", "--list-presets"])
    assert listing.exit_code == 0 and "seed004-jobs" in listing.output


def test_progress_in_a_log_starts_at_once_and_ends_with_the_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["simulate", "-w", str(SMALL), "-s", "easy", "-o", str(tmp_path / "o"), *CLUSTER])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines.index("easy: simulating 10 jobs …") < next(i for i, t in enumerate(lines) if "pods bound in" in t)


def test_progress_lines_every_few_seconds_with_the_time_left() -> None:
    wall = [0.0]
    console = Console(width=200, record=True, force_terminal=False)
    reporter = ProgressReporter("easy", 1000, console, interactive=False, every=10.0, clock=lambda: wall[0])
    reporter.start()
    for now, submitted, at in ((5.0, 100, 4.0), (50.0, 250, 10.0), (60.0, 300, 12.0), (90.0, 1000, 21.0)):
        wall[0] = at
        reporter.update(now, submitted)
    reporter.stop()
    lines = console.export_text().splitlines()
    assert lines == [
        "easy: simulating 1000 jobs …",
        "easy: 250/1000 jobs submitted (25 %), virtual t=50s, 10s elapsed, about 30s left",
        "easy: 1000/1000 jobs submitted (100 %), virtual t=90s, 21s elapsed, all submitted, draining",
    ]
    assert eta_seconds(10.0, 0, 100) is None and eta_seconds(60.0, 50, 100) == 60.0


def test_a_wide_table_is_turned_on_its_side_on_a_narrow_terminal() -> None:
    table = Table(title="Scheduler comparison")
    table.add_column("scheduler")
    for n in range(12):
        table.add_column(f"figure number {n}", justify="right")
    for name in ("kubeflux-conservative", "easy"):
        table.add_row(name, *[f"{123_456_789 + n:,}" for n in range(12)])
    console = Console(width=100, record=True)
    console.print(fit_table(table, 100))
    text = console.export_text()
    assert "…" not in text and text.count("123,456,789") == 2 and "kubeflux-conservative" in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert fit_table(table, 400) is table  # it fits: unchanged
