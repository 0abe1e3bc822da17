import csv
import json
import random
from pathlib import Path

import pytest
from evalys.jobset import JobSet

from kubeflux.sim.metrics import (
    JOBS_COLUMNS,
    interval_set,
    jobs_rows,
    summarize,
    write_jobs_csv,
    write_summary_csv,
    write_summary_json,
)
from kubeflux.sim.records import FinalState, JobRecord, RunRecord


def small_run(**changes: object) -> RunRecord:
    """Four jobs on 4 cores, submitted from t=100 (hand-checked numbers in the tests below)."""
    jobs = [
        JobRecord(
            "a", "w", 100.0, 4, 60.0, FinalState.COMPLETED_SUCCESSFULLY, 110.0, 140.0, 105.0, 110.0, [0, 1, 2, 3]
        ),
        JobRecord("b", "w", 101.0, 2, -1.0, FinalState.COMPLETED_FAILED, 140.0, 145.0, 140.0, 140.0, [3, 2]),
        JobRecord("c", "w", 102.0, 100, -1.0, FinalState.REJECTED),
        JobRecord("d", "w", 103.0, 1, -1.0, FinalState.NOT_FINISHED),
    ]
    run = RunRecord("fcfs", "w", jobs, total_cores=4, wall_seconds=0.5, pods_bound=3, events=12)
    for key, value in changes.items():
        setattr(run, key, value)
    return run


def test_interval_set_is_batsims_hyphen_format() -> None:
    assert interval_set([5, 0, 1, 2, 3]) == "0-3 5"
    rng = random.Random(3)
    for _ in range(2000):
        ids = [rng.randint(0, 60) for _ in range(rng.randint(0, 30))]
        if rng.random() < 0.3:
            ids += range(rng.randint(0, 5), rng.randint(5, 300))  # whole nodes' cores
        ordered = sorted(set(ids))
        runs: list[list[int]] = []
        for i in ordered:
            if runs and runs[-1][-1] + 1 == i:
                runs[-1].append(i)
            else:
                runs.append([i])
        expected = " ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
        assert interval_set(ids) == expected
    assert interval_set([7]) == "7"
    assert interval_set([2, 2, 4, 3, 9, 10]) == "2-4 9-10"
    assert interval_set([]) == ""


def test_jobs_rows_by_hand() -> None:
    rows = {row["job_id"]: row for row in jobs_rows(small_run())}
    a, b, c, d = rows["a"], rows["b"], rows["c"], rows["d"]
    assert list(a) == list(JOBS_COLUMNS)
    # times on the workload's clock: the records' own here (they do not say another)
    assert (a["submission_time"], a["starting_time"], a["finish_time"]) == (100.0, 110.0, 140.0)
    assert (a["execution_time"], a["waiting_time"], a["turnaround_time"], a["stretch"]) == (30.0, 10.0, 40.0, 1.333333)
    assert (a["success"], a["final_state"], a["allocated_resources"], a["consumed_energy"]) == (
        1,
        "COMPLETED_SUCCESSFULLY",
        "0-3",
        -1,
    )
    assert (a["scheduling_latency"], a["bind_span"], a["job_completion_time"]) == (5.0, 5.0, 40.0)
    assert (b["success"], b["waiting_time"], b["execution_time"], b["stretch"], b["allocated_resources"]) == (
        0,
        39.0,
        5.0,
        8.8,
        "2-3",
    )
    assert (b["scheduling_latency"], b["bind_span"]) == (39.0, 0.0)
    # Batsim leaves the time columns of a rejected job empty
    for column in ("starting_time", "execution_time", "finish_time", "waiting_time", "turnaround_time", "stretch"):
        assert c[column] is None and d[column] is None
    assert (c["success"], c["final_state"], c["submission_time"], c["consumed_energy"]) == (0, "REJECTED", 102.0, None)
    assert d["final_state"] == "NOT_FINISHED" and d["scheduling_latency"] is None


def test_jobs_csv_columns_and_empty_cells(tmp_path: Path) -> None:
    path = write_jobs_csv(small_run(), tmp_path / "out" / "jobs.csv")
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(JOBS_COLUMNS)
    assert lines[0].startswith(
        "job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,"
        "final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,"
        "allocated_resources,consumed_energy,metadata,scheduling_latency,bind_span,job_completion_time,priority"
    )
    # as Batsim writes a rejected job: six decimals, empty times and energy, metadata in quotes
    assert lines[3] == 'c,w,,102.000000,100,-1.000000,0,REJECTED,,,,,,,,,"",,,,0'
    assert lines[1].startswith("a,w,,100.000000,4,60.000000,1,COMPLETED_SUCCESSFULLY,110.000000,30.000000,")
    rows = list(csv.DictReader(path.open()))
    assert rows[0]["allocated_resources"] == "0-3" and rows[1]["turnaround_time"] == "44.000000"


def test_times_go_back_to_the_workloads_clock(tmp_path: Path) -> None:
    """The simulator counts from the first submission; jobs.csv and pods.csv write the workload's own times."""
    run = small_run()
    for job in run.jobs:  # the workload's trace started at 1,000,000 s; virtual time 0 is its first job, at 100
        job.workload_submission_time = job.submission_time + 1_000_000 - 100
        job.profile = "101"
    rows = jobs_rows(run)
    assert (rows[0]["submission_time"], rows[0]["starting_time"], rows[0]["finish_time"]) == (
        1_000_000.0,
        1_000_010.0,
        1_000_040.0,
    )
    assert (rows[0]["waiting_time"], rows[0]["profile"]) == (10.0, "101")  # durations do not move
    line = write_jobs_csv(run, tmp_path / "jobs.csv").read_text().splitlines()[2]
    assert line.startswith("b,w,101,1000001.000000,2,-1.000000,0,COMPLETED_FAILED,1000040.000000,5.000000,")


def test_metadata_is_always_quoted_and_stays_one_cell(tmp_path: Path) -> None:
    run = small_run()
    run.jobs[1].reason = 'failed: pod b-0: Error (exit code 1), said "no"'
    path = write_jobs_csv(run, tmp_path / "jobs.csv")
    assert ',"failed: pod b-0: Error (exit code 1), said ""no""",' in path.read_text()
    rows = list(csv.DictReader(path.open()))
    assert rows[1]["metadata"] == 'failed: pod b-0: Error (exit code 1), said "no"' and rows[0]["metadata"] == ""


@pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning", "ignore:The inplace keyword")
def test_jobs_csv_loads_in_evalys(tmp_path: Path) -> None:
    path = write_jobs_csv(small_run(), tmp_path / "jobs.csv")
    jobset = JobSet.from_csv(str(path))
    frame = jobset.df.set_index("jobID")
    assert list(frame.index) == ["a", "b", "c", "d"]
    assert frame.loc["a", "execution_time"] == 30.0
    assert frame.loc["b", "proc_alloc"] == 2
    assert jobset.MaxProcs == 4  # resources 0-3
    assert jobset.utilisation.load.max() == 4


def test_summary_by_hand() -> None:
    summary = summarize(small_run())
    assert summary["scheduler"] == "fcfs"
    assert (summary["jobs"], summary["rejected"], summary["succeeded"], summary["failed"], summary["not_finished"]) == (
        4,
        1,
        1,
        1,
        1,
    )
    assert summary["makespan"] == 45.0  # last finish 145 - first submission 100
    assert (summary["mean_waiting_time"], summary["max_waiting_time"]) == (24.5, 39.0)  # waits 10 and 39
    assert summary["mean_turnaround_time"] == 42.0  # 40 and 44
    assert summary["mean_slowdown"] == pytest.approx((40 / 30 + 44 / 5) / 2, abs=1e-6)
    assert summary["mean_bounded_slowdown"] == pytest.approx((40 / 30 + 44 / 10) / 2, abs=1e-6)  # b: max(5, 10)
    assert summary["utilization"] == pytest.approx(130 / 180, abs=1e-6)  # 4 cores x 30 s + 2 x 5 over 4 x 45
    assert (summary["mean_scheduling_latency"], summary["mean_bind_span"]) == (22.0, 2.5)
    assert summary["pods_per_virtual_second"] == pytest.approx(3 / 45, abs=1e-6)
    assert summary["pods_per_wall_second"] == 6.0


def test_utilization_uses_the_runs_series_when_it_has_one() -> None:
    # one core busy from the start with another scheduler's pod: 1 x 10 + 4 x 30 + 2 x 5 = 140 core-seconds
    series = [(100.0, 1), (110.0, 4), (140.0, 2), (145.0, 0)]
    assert summarize(small_run(utilization_series=series))["utilization"] == pytest.approx(140 / 180, abs=1e-6)


def test_summary_files(tmp_path: Path) -> None:
    rows = [summarize(small_run()), summarize(small_run(scheduler="easy"))]
    csv_path = write_summary_csv(rows, tmp_path / "summary.csv")
    assert [r["scheduler"] for r in csv.DictReader(csv_path.open())] == ["fcfs", "easy"]
    data = json.loads(write_summary_json(rows, tmp_path / "summary.json").read_text())
    assert data[1]["scheduler"] == "easy" and data[0]["makespan"] == 45.0


def test_empty_run_summarizes_to_zeros() -> None:
    summary = summarize(RunRecord("fcfs", "w", [], total_cores=4, wall_seconds=0.0, pods_bound=0, events=0))
    assert (summary["jobs"], summary["makespan"], summary["utilization"], summary["pods_per_wall_second"]) == (
        0,
        0.0,
        0.0,
        0.0,
    )
