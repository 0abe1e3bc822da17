"""What the report's page and tables show: readable numbers, the best of each row, the phases of ``simulate -v``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.objects import Node
from kubeflux.sim.command import describe_cluster
from kubeflux.sim.output import numbers, parallel
from kubeflux.sim.output.page import best_of, compact_table, star_legend
from kubeflux.sim.output.timing import PhaseTimer
from kubeflux.sim.workloads.cluster_file import uniform_cluster


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.0, "0 s"), (0.35, "0.35 s"), (4.2, "4.2 s"), (42.0, "42 s"), (750.0, "12.5 min"), (36824.0, "10.2 h"),
     (1_123_200.0, "13.0 d"), (None, "")],
)  # fmt: skip
def test_a_duration_reads_in_the_unit_that_suits_it(seconds: float | None, shown: str) -> None:
    assert numbers.duration(seconds) == shown


def test_durations_side_by_side_share_the_unit_of_the_largest() -> None:
    assert numbers.durations([2554.788, 14417.4, 5538.4, None]) == ["0.71 h", "4.0 h", "1.5 h", ""]
    assert numbers.durations([0.0, 50.0]) == ["0 s", "50.0 s"]


def test_other_numbers() -> None:
    assert (numbers.percent(0.794072), numbers.count(188041), numbers.ratio(53.126789)) == ("79.4 %", "188,041", "53.1")
    assert (numbers.plain(36824.0), numbers.plain(2554.788177), numbers.plain("fcfs")) == (
        "36,824",
        "2,554.788177",
        "fcfs",
    )
    assert numbers.seconds(36824.0) == "36,824 s" and numbers.seconds(2554.7881) == "2,554.788 s"


def row(
    name: str, wait: float, utilization: float, not_finished: int = 0, failed: int = 0, rejected: int = 0
) -> dict[str, object]:
    return {"scheduler": name, "jobs": 10, "finished_jobs": 10 - not_finished - rejected, "not_finished": not_finished,
            "failed": failed, "rejected": rejected, "mean_waiting_time": wait, "useful_utilization": utilization,
            "mean_scheduling_latency": 0.0}  # fmt: skip


def test_the_best_of_a_row_is_among_the_runs_that_finished_everything() -> None:
    rows = [row("a", 50.0, 0.7), row("b", 10.0, 0.9, not_finished=3), row("c", 50.0, 0.8)]
    best = best_of(rows, [("mean_waiting_time", "lower"), ("useful_utilization", "higher"),
                          ("mean_scheduling_latency", "lower")])  # fmt: skip
    assert best == {"mean_waiting_time": {0, 2}, "useful_utilization": {2}}  # ties both; all 0 s: nothing to mark
    assert best_of(rows[:1], [("mean_waiting_time", "lower")]) == {}  # one run competes with nobody
    table = compact_table(rows)
    assert table.count('class="best"') == 3 and '<td class="warn">7 of 10</td>' in table
    assert '<td title="10">10.0 s</td>' in table and '<td class="best" title="50">★ 50.0 s</td>' in table
    # what became of the other jobs is a row of its own, not words widening the cell
    assert '<th scope="row">never finished<br>' in table and '<td>0</td><td class="warn">3</td><td>0</td>' in table
    assert "rejected<br>" not in table and "failed<br>" not in table  # no run has any: no row


def test_no_star_goes_to_a_run_with_failures_or_when_no_run_finished_everything() -> None:
    failing = [row("a", 50.0, 0.7, failed=1), row("b", 60.0, 0.6), row("c", 10.0, 0.9, failed=4)]
    best = best_of(failing, [("mean_waiting_time", "lower"), ("useful_utilization", "higher")])
    assert best == {"mean_waiting_time": {1}, "useful_utilization": {1}}  # b, the one run without failures
    table = compact_table(failing)
    assert '<th scope="row">failed<br><span class="note">finished without success</span></th>' in table
    assert '<td class="warn">1</td><td>0</td><td class="warn">4</td>' in table
    nobody = [row("a", 50.0, 0.7, rejected=7), row("b", 60.0, 0.6, not_finished=1), row("c", 10.0, 0.9, failed=1)]
    assert best_of(nobody, [("mean_waiting_time", "lower")]) == {}
    assert "★" not in compact_table(nobody)
    assert star_legend(nobody).startswith("No ★: no run finished all its jobs without a failure")
    assert star_legend(failing).startswith("★ best of the row among the runs that finished all their jobs")


def test_the_cluster_in_words() -> None:
    assert describe_cluster(uniform_cluster(16, 16, "64Gi")) == "16 nodes × 16 cores, 64 GiB memory"
    assert describe_cluster(uniform_cluster(2, 8, "1Gi", 4)) == "2 nodes × 8 cores, 4 GPUs, 1 GiB memory"
    mixed: list[Node] = [*uniform_cluster(1, 4), *uniform_cluster(1, 2)]
    assert describe_cluster(mixed).startswith("2 nodes: 6 cores")


@pytest.mark.parametrize(
    ("cpu", "words"),
    [
        (2500, "1 node × 2.5 cores"),
        (500, "1 node × 0.5 cores"),
        (1000, "1 node × 1 core"),
        (1250, "1 node × 1.25 cores"),
    ],
    ids=["2500m", "500m", "1000m", "1250m"],
)
def test_millicores_are_said_as_they_are(cpu: int, words: str) -> None:
    (node,) = uniform_cluster(1, 4)
    node.allocatable = {**node.allocatable, "cpu": cpu, "memory": 0}
    assert describe_cluster([node]) == words


def test_a_timer_keeps_each_phase_in_order() -> None:
    timer = PhaseTimer()
    with timer.phase("read"):
        pass
    with pytest.raises(ValueError), timer.phase("broken"):
        raise ValueError
    lines = timer.lines()
    assert [line.split()[0] for line in lines] == ["read", "broken", "total"] and "s CPU" in lines[0]


def test_work_in_a_child_process_is_done_once_and_its_phases_come_back(tmp_path: Path) -> None:
    def work(timer: PhaseTimer) -> None:
        with timer.phase("write"), (tmp_path / "out.txt").open("a") as stream:
            stream.write("written\n")

    timer = PhaseTimer()
    started = parallel.start(work)
    started.join(timer)
    assert (tmp_path / "out.txt").read_text() == "written\n"
    assert [name for name, _, _ in timer.phases + timer.beside] == ["write"]
    assert (timer.beside != []) == parallel.can_fork()


def test_work_that_fails_in_the_child_is_done_again_here(tmp_path: Path) -> None:
    runs: list[int] = []

    def work(timer: PhaseTimer) -> None:
        runs.append(os.getpid())
        if os.getpid() != parent:
            raise RuntimeError("the child fails")  # its traceback goes to stderr
        (tmp_path / "out.txt").write_text("written here")

    parent = os.getpid()
    parallel.start(work).join(PhaseTimer())
    assert (tmp_path / "out.txt").read_text() == "written here" and runs == [parent]  # the child's list is its own


def test_simulate_verbose_prints_where_the_time_went(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 -1 60 2 -1 -1 2 120 -1 1 1 1 -1 1 1 -1 -1\n2 5 -1 30 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n")
    command = ["simulate", "-w", str(trace), "--nodes", "2", "--cores-per-node", "2", "-s", "fcfs", "-s", "easy"]
    result = CliRunner().invoke(app, [*command, "--out", str(tmp_path / "out"), "-v"])
    assert result.exit_code == 0, result.output
    phases = [line.split("  ")[0] for line in result.output.splitlines() if " s wall " in line]
    assert phases[:3] == ["read workload", "map workload to cluster", "simulate fcfs"]
    assert "plot gantt.png" in phases and phases[-1] == "total"
    assert "write easy/jobs.csv" in phases or "write easy/jobs.csv (in a child, meanwhile)" in phases
    page = (tmp_path / "out" / "index.html").read_text()
    assert "2 nodes × 2 cores" in page and "t.swf (2 jobs)" in page and "fcfs vs easy: mean wait" in page
