"""The real-traces page: each trace cut to a few jobs runs under the schedulers as a sweep, and the page holds the
table, the plot and the command; the published page names every trace and scheduler the code runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from experiments.traces import SCHEDULERS, TRACES, prefix, trace_rows, traces_table, write_traces
from kubeflux.sim.workloads import load_workload
from tests.shared import REPO, SHARED

FOLDER = SHARED / "traces"
pytestmark = pytest.mark.skipif(
    not all((FOLDER / t.file).is_file() for t in TRACES), reason="the traces are in ../shared/traces"
)


def test_a_cut_of_a_trace_keeps_its_header_and_first_jobs(tmp_path: Path) -> None:
    for trace in TRACES:
        cut = load_workload(prefix(FOLDER / trace.file, 25, tmp_path))
        assert len(cut.jobs) == 25 and not cut.problems, trace.file
        if ".swf" in trace.file:
            assert "MaxProcs" in cut.header, trace.file  # the ';' header is kept
        else:
            assert cut.resources == 96  # nb_res is kept
    assert prefix(FOLDER / TRACES[0].file, None, tmp_path) == FOLDER / TRACES[0].file  # no cut: the file itself


def test_each_trace_cut_short_runs_under_three_schedulers_and_the_page_has_table_plot_and_command(
    tmp_path: Path,
) -> None:
    small = [dataclasses.replace(t, first=30) for t in TRACES]
    rows = trace_rows(FOLDER, small, ("fcfs", "easy", "kubeflux"))
    assert [(r.trace, r.scheduler) for r in rows] == [(t.label, s) for t in small for s in ("fcfs", "easy", "kubeflux")]
    assert all(r.status == "ok" and r.jobs == 30 and r.not_finished == 0 for r in rows)
    by = {(r.trace, r.scheduler): r for r in rows}
    for trace in small:  # kubeflux backfills as EASY does: the same schedule
        assert by[trace.label, "kubeflux"].mean_wait == by[trace.label, "easy"].mean_wait
    page = write_traces(tmp_path, rows, traces_folder=FOLDER, traces=small).read_text(encoding="utf-8")
    assert traces_table(rows) in page and "](traces.png)" in page and (tmp_path / "traces.png").stat().st_size
    assert "python -m experiments traces" in page and "first 30 jobs" in page


def test_the_published_page_names_every_trace_and_scheduler() -> None:
    page = (REPO / "docs" / "experiments" / "traces.md").read_text(encoding="utf-8")
    for trace in TRACES:
        assert trace.file in page
        for scheduler in SCHEDULERS:
            assert f"| {trace.label} | {scheduler} |" in page
    assert (REPO / "docs" / "experiments" / "traces.png").is_file()
