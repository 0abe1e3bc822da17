import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from kubeflux.sim import report
from kubeflux.sim.metrics import MEAN_OVER, summarize
from kubeflux.sim.records import FinalState, JobRecord, RunRecord
from kubeflux.sim.report import queue_points, summary_table, utilization_points, write_report
from kubeflux.sim.verdict import verdict_lines, verdicts

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
    for name in ("headline.png", "gantt.png", "utilization.png", "queue.png", "waiting_cdf.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert f'src="{name}"' in index.read_text()
    page = index.read_text()
    assert '<th scope="col">fcfs</th>' in page and '<th scope="col">kubeflux</th>' in page
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
    assert "mean wait" in text and "utilization" in text
    assert "fcfs" in text and "kubeflux" in text and "5.0 s" in text and ".000" not in text


def test_empty_report(tmp_path: Path) -> None:
    index = write_report([], tmp_path)
    assert (tmp_path / "gantt.png").exists() and "<table" in index.read_text()


def test_every_average_says_over_how_many_jobs() -> None:
    """The 6 jobs of ``run`` started and finished, the 7th was rejected: each mean covers 6, and says so."""
    unfinished = run("kube-default", 5.0)
    unfinished.jobs[0].finish_time = None
    unfinished.jobs[0].final_state = FinalState.NOT_FINISHED  # started, never finished
    rows = [summarize(run("fcfs", 0.0)), summarize(unfinished)]
    counts = ("started_jobs", "finished_jobs", "slowdown_jobs", "bound_jobs")
    assert [rows[0][key] for key in counts] == [6, 6, 6, 6]
    assert [rows[1][key] for key in counts] == [6, 5, 5, 6]
    for mean, count in MEAN_OVER.items():
        assert mean in rows[0] and count in rows[0]
    console = Console(width=400, record=True)
    console.print(summary_table(rows))
    text = console.export_text()
    for header in ("mean wait of started", "mean turnaround of finished", "mean sched. latency of bound"):
        assert header in text
    line = next(line for line in text.splitlines() if "kube-default" in line)
    assert line.split("│")[5:8] == ["       6 ", "        5 ", "     6 "]  # started, finished, bound


def test_the_index_page_names_each_averages_count(tmp_path: Path) -> None:
    page = write_report([run("fcfs", 0.0)], tmp_path).read_text()
    assert '<code>mean_waiting_time</code> <span class="note">over started_jobs</span>' in page
    assert "<code>started_jobs</code></th>" in page


def row(
    name: str, wait: float, makespan: float, useful: float, finished: int = 203, failed: int = 0
) -> dict[str, object]:
    return {
        "scheduler": name,
        "jobs": 203,
        "rejected": 0,
        "not_finished": 203 - finished,
        "finished_jobs": finished,
        "failed": failed,
        "mean_waiting_time": wait,
        "makespan": makespan,
        "useful_utilization": useful,
    }


@pytest.mark.parametrize(
    ("theirs", "expected"),
    [
        pytest.param(
            row("kube-default", 5538.443, 40722.0, 0.718),
            "kubeflux vs kube-default: mean wait −54 %, makespan −10 %, useful utilization +8 points "
            "(both finished all 203 jobs)",
            id="gains",
        ),
        pytest.param(
            row("slow", 2000.0, 36000.0, 0.80),
            "kubeflux vs slow: mean wait +28 %, makespan +2 %, useful utilization −0.6 points "
            "(both finished all 203 jobs)",
            id="losses",
        ),
        pytest.param(
            row("same", 2554.788, 36824.0, 0.794),
            "kubeflux vs same: mean wait ±0 %, makespan ±0 %, useful utilization ±0 points "
            "(both finished all 203 jobs)",
            id="equal",
        ),
        pytest.param(
            row("idle", 0.0, 36824.0, 0.794),
            "kubeflux vs idle: mean wait +2555 s (from 0 s), makespan ±0 %, useful utilization ±0 points "
            "(both finished all 203 jobs)",
            id="baseline-without-wait",
        ),
        pytest.param(
            row("stuck", 100.0, 20000.0, 0.9, finished=150),
            "kubeflux vs stuck: mean wait +2455 %, makespan +84 %, useful utilization −11 points (not like for like: "
            "kubeflux finished 203 of 203 jobs, stuck 150; the means cover only the jobs each ran)",
            id="baseline-left-jobs-unfinished",
        ),
        pytest.param(
            row("failing", 2554.788, 36824.0, 0.794, failed=203),
            "kubeflux vs failing: mean wait ±0 %, makespan ±0 %, useful utilization ±0 points "
            "(both finished all 203 jobs; failed: kubeflux 0, failing 203)",
            id="a-run-of-failures-is-said",  # finished is not succeeded (hostile review of issue 30)
        ),
    ],
)
def test_the_verdict_says_in_one_line_what_the_first_scheduler_gains(theirs: dict[str, object], expected: str) -> None:
    ours = row("kubeflux", 2554.788, 36824.0, 0.794)
    assert verdict_lines([ours, theirs]) == [expected]
    assert verdict_lines([ours]) == []


def test_a_run_of_failures_reads_as_failures_in_its_summary_line() -> None:
    """Every job of a run failed (``--fail-fraction 1``): its summary line says so, instead of '203 of 203 jobs
    finished' reading as a success (the verdict lines say it of each run compared)."""
    from kubeflux.sim.verdict import summary_line

    failing = row("fcfs", 10.0, 3600.0, 0.5, failed=203)
    assert summary_line(failing).startswith("fcfs: 203 of 203 jobs finished (203 failed); mean wait")


def rejected_run(name: str, jobs: int = 3) -> RunRecord:
    records = [JobRecord(str(i), "w", float(i), 64, -1.0, FinalState.REJECTED) for i in range(jobs)]
    return RunRecord(name, "w", records, total_cores=4, wall_seconds=0.01, pods_bound=0, events=3)


def test_a_page_where_every_job_was_rejected_says_so_in_its_verdict(tmp_path: Path) -> None:
    """Rejected jobs leave every figure at 0 s, which reads as a perfect run: the verdict says nothing ran."""
    page = write_report([rejected_run("kubeflux"), rejected_run("fcfs")], tmp_path / "both").read_text()
    verdict = page.split('id="verdict"')[1].split("</section>")[0]
    assert verdict.startswith(
        ' aria-label="Verdict"><p class="alert">Nothing ran: all 3 jobs were rejected under every scheduler (the'
    )
    assert verdict.count("<p") == 1 and " vs " not in verdict  # nothing to compare
    assert '<th scope="row">rejected<br>' in page and 'class="best"' not in page and "No ★: no run finished" in page
    one = write_report([rejected_run("fcfs", 1)], tmp_path / "one").read_text()
    assert (
        '<p class="alert">Nothing ran: the job was rejected by fcfs (the metadata column of jobs.csv says why).</p>'
        in one
    )


def test_a_run_that_rejected_everything_is_named_and_left_out_of_the_comparison(tmp_path: Path) -> None:
    rows = [summarize(rejected_run("kube-gang", 7)), summarize(run("fcfs", 0.0)), summarize(run("kubeflux", 5.0))]
    lines = verdicts(rows)
    assert lines[0] == (
        "kube-gang rejected every job and ran nothing (the metadata column of jobs.csv says why); the other runs are "
        "compared below."
    )
    assert lines[1].startswith("fcfs vs kubeflux: mean wait") and len(lines) == 2


def drawn_texts(figure: Any) -> Iterator[Any]:
    """The texts of a figure that are drawn: each panel's title, its annotations and the tick labels within its
    view (a locator also makes ticks beyond the limits, which are not drawn)."""
    for ax in figure.axes:
        yield ax.title
        yield from ax.texts
        for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = min(low, high), max(low, high)
            for tick in axis.get_major_ticks():
                if low - 1e-9 <= tick.get_loc() <= high + 1e-9:
                    yield tick.label1


@pytest.mark.parametrize("schedulers", [1, 2, 8, 12], ids=["one", "two", "eight", "twelve"])
def test_no_label_of_the_headline_bars_overlaps_another(schedulers: int) -> None:
    """Every text of ``headline.png`` (names, values, titles, ticks) measured as drawn: none overlaps another, and
    all are inside the image, with long scheduler names and values of every width."""
    from kubeflux.sim.output.plots import HEADLINE, headline_figure

    rows = [
        {
            "scheduler": f"kubeflux-conservative-variant-{i}" if i % 2 else f"kube-{i}",
            "mean_waiting_time": 36824.0 * (i + 1),
            "mean_bounded_slowdown": 1.0 + 97.3 * i,
            "makespan": 10.0**i,
            "useful_utilization": 0.05 * (i % 20),
        }
        for i in range(schedulers)
    ]
    best = {key: {schedulers - 1} for key, _, _ in HEADLINE}
    figure = headline_figure(rows, best)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    page = figure.bbox
    texts = [t for t in drawn_texts(figure) if t.get_visible() and t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    for text, box in boxes:
        assert page.x0 - 1 <= box.x0 and box.x1 <= page.x1 + 1 and page.y0 - 1 <= box.y0 and box.y1 <= page.y1 + 1, text
    overlapping = [
        (a, b) for i, (a, one) in enumerate(boxes) for b, other in boxes[i + 1 :] if one.overlaps(other)
    ]  # fmt: skip
    assert overlapping == []
    labels = [t.get_text() for t in texts]
    assert sum(label.startswith("★ ") for label in labels) == 4  # the best of each panel, starred
    import matplotlib.pyplot as plt

    plt.close(figure)
