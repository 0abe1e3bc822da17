import json
from pathlib import Path

import pytest
from rich.console import Console

from kubeflux.sim import report
from kubeflux.sim.metrics import summarize
from kubeflux.sim.records import FinalState, JobRecord, RunRecord
from kubeflux.sim.report import queue_points, summary_table, utilization_points, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(name: str, delay: float) -> RunRecord:
    jobs = [
        JobRecord(str(i), "w", 10.0 * i, 2, 60.0, FinalState.COMPLETED_SUCCESSFULLY, 10.0 * i + delay,
                  10.0 * i + delay + 30, 10.0 * i + delay, 10.0 * i + delay, [2 * (i % 2), 2 * (i % 2) + 1])
        for i in range(6)
    ]  # fmt: skip
    jobs.append(JobRecord("big", "w", 5.0, 64, -1.0, FinalState.REJECTED))
    return RunRecord(name, "w", jobs, total_cores=4, wall_seconds=0.1, pods_bound=6, events=30)


def test_report_writes_plots_summaries_and_an_index(tmp_path: Path) -> None:
    index = write_report([run("fcfs", 0.0), run("kubeflux", 5.0)], tmp_path / "report")
    out = index.parent
    for name in ("gantt.png", "utilization.png", "queue.png", "waiting_cdf.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert f'src="{name}"' in index.read_text()
    page = index.read_text()
    assert "<td>fcfs</td>" in page and "<td>kubeflux</td>" in page
    rows = json.loads((out / "summary.json").read_text())
    assert [r["scheduler"] for r in rows] == ["fcfs", "kubeflux"]
    assert rows[1]["mean_waiting_time"] == 5.0


def test_series_are_derived_from_jobs_when_the_run_has_none() -> None:
    points = dict(utilization_points(run("fcfs", 0.0)))
    assert points[0.0] == 0.5  # job 0 on cores 0-1 of 4
    assert points[10.0] == 1.0  # job 1 joins on cores 2-3
    queue = dict(queue_points(run("fcfs", 5.0)))
    assert queue[0.0] == 1 and queue[5.0] == 0  # the rejected job never queues


def test_big_runs_are_sampled_in_the_gantt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "GANTT_MAX_JOBS", 3)
    monkeypatch.setattr(report, "SERIES_MAX_POINTS", 4)
    unfinished = run("fcfs", 0.0)
    unfinished.jobs[0].finish_time = None
    unfinished.jobs[0].final_state = FinalState.NOT_FINISHED
    index = write_report([unfinished], tmp_path)
    assert (tmp_path / "gantt.png").read_bytes()[:8] == PNG_MAGIC and index.exists()


def test_summary_table_lists_every_run() -> None:
    rows = [summarize(run("fcfs", 0.0)), summarize(run("kubeflux", 5.0))]
    console = Console(width=250, record=True)
    console.print(summary_table(rows))
    text = console.export_text()
    assert "mean wait (s)" in text and "utilization" in text
    assert "fcfs" in text and "kubeflux" in text and "5.000" in text


def test_empty_report(tmp_path: Path) -> None:
    index = write_report([], tmp_path)
    assert (tmp_path / "gantt.png").exists() and "<table>" in index.read_text()
