"""jobs.csv and pods.csv are written a column at a time: the bytes must be those the row-by-row code gives."""

import csv
import io
import random
from pathlib import Path

import pytest

from kubeflux.sim.metrics import (
    JOBS_COLUMNS,
    POD_COLUMNS,
    batsim_line,
    job_cells,
    pod_cells,
    time_offset,
    write_jobs_csv,
    write_pods_csv,
)
from kubeflux.sim.records import FinalState, JobRecord, PodRecord, RunRecord

TEXTS = ("", "plain", 'said "no"', "a, b", "line\nbreak", "café")


def random_run(seed: int, scale: float, whole: bool = False) -> RunRecord:
    """Jobs and pods in every state, times from ``scale`` up (2**32 and more take the slow, exact path); ``whole``:
    every time a whole number of seconds, as in traces (the fast paths)."""
    rng = random.Random(seed)

    def _time(rng: random.Random, base: float) -> float:
        step = rng.choice([0.0, 1.0, 0.5, 1e-7, 0.0000005, 0.1 + 0.2, rng.random() * 1e4, rng.random() * 1e-3])
        return float(round(base + step)) if whole else base + step

    jobs: list[JobRecord] = []
    pods: list[PodRecord] = []
    for number in range(300):
        state = rng.choice(list(FinalState))
        submitted = _time(rng, scale * rng.random() - (0.0 if number % 7 else scale / 2))
        start = None if rng.random() < 0.2 else _time(rng, submitted)
        finish = None if start is None or rng.random() < 0.2 else rng.choice([start, _time(rng, start)])
        bind = None if rng.random() < 0.2 else _time(rng, submitted)
        ids = rng.sample(range(64), rng.randint(0, 6)) + list(range(100, 100 + rng.randint(0, 40)))
        job = JobRecord(
            rng.choice(TEXTS) + str(number), rng.choice(TEXTS), submitted, rng.randint(1, 9), rng.choice([-1.0, 3600]),
            state, start, finish, bind, None if bind is None else _time(rng, bind), ids, reason=rng.choice(TEXTS),
            profile=rng.choice(TEXTS),
            workload_submission_time=None if rng.random() < 0.5 else submitted + 1_000_000.25,
        )  # fmt: skip
        jobs.append(job)
        for pod in range(rng.randint(0, 3)):
            running = None if start is None else _time(rng, submitted)
            pods.append(
                PodRecord(
                    job.job_id, f"ns/{job.job_id}-{pod}", rng.choice(TEXTS), submitted, bind, running,
                    None if running is None or rng.random() < 0.3 else _time(rng, running),
                    None if rng.random() < 0.3 else _time(rng, submitted), rng.choice(["Running", "Succeeded"]),
                    rng.choice(TEXTS), rng.choice([None, 0, 137]), ids, rng.choice(TEXTS),
                )
            )  # fmt: skip
    return RunRecord("fcfs", "trace", jobs, total_cores=64, wall_seconds=1.0, pods_bound=1, events=1, pods=pods)


def rows_one_by_one(run: RunRecord) -> tuple[str, str]:
    offset = time_offset(run)
    jobs = ",".join(JOBS_COLUMNS) + "\n"
    jobs += "".join(batsim_line(job_cells(job, offset, run.workload_name)) + "\n" for job in run.jobs)
    stream = io.StringIO(newline="")
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(POD_COLUMNS)
    writer.writerows(pod_cells(pod, offset) for pod in run.pods)
    return jobs, stream.getvalue()


@pytest.mark.parametrize("whole", [False, True], ids=["fractions", "whole-seconds"])
@pytest.mark.parametrize("scale", [0.0, 1e5, 2.0**32, 1e13, 1e16])
@pytest.mark.parametrize("seed", range(3))
def test_columns_write_the_bytes_rows_write(tmp_path: Path, seed: int, scale: float, whole: bool) -> None:
    run = random_run(seed, scale, whole)
    jobs, pods = rows_one_by_one(run)
    assert write_jobs_csv(run, tmp_path / "jobs.csv").read_bytes() == jobs.encode()
    assert write_pods_csv(run, tmp_path / "pods.csv").read_bytes() == pods.encode()


def test_an_empty_run_writes_the_headers(tmp_path: Path) -> None:
    run = RunRecord("fcfs", "w", [], total_cores=1, wall_seconds=0.0, pods_bound=0, events=0)
    assert write_jobs_csv(run, tmp_path / "jobs.csv").read_text() == ",".join(JOBS_COLUMNS) + "\n"
    assert write_pods_csv(run, tmp_path / "pods.csv").read_text() == ",".join(POD_COLUMNS) + "\n"
