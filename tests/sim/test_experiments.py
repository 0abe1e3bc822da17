"""The experiment pages in docs/experiments/ quote what the code gives: each table is regenerated and compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import main, seed004_rows, seed004_table
from experiments.seed004 import SEED004_CASES, served_rows, write_seed004
from tests.shared import REPO


def test_the_seed004_page_quotes_the_table_the_code_gives_and_the_talk_s_shape_holds() -> None:
    rows = seed004_rows()
    page = (REPO / "docs" / "experiments" / "seed004.md").read_text(encoding="utf-8")
    assert seed004_table(rows) in page, "docs/experiments/seed004.md is stale: run `make experiments`"
    every_20 = [r for r in rows if r.case.startswith("Jobs, one every 20 s")]
    assert len(every_20) == 4 and all((r.jct, r.latency, r.max_wait) == (72.0, 0.0, 0.0) for r in every_20)
    every_17 = [r for r in rows if r.case.startswith("Jobs, one every 17 s")]
    assert all(r.max_wait > 0 and r.jct > 72.0 for r in every_17)  # over-subscribed: it queues
    assert all(r.finished == r.jobs == 50 for r in rows)
    assert "## Through the simulated API, in accelerated time" in page
    assert page.count("| Jobs, one every 20 s | kubeflux |") == 2  # a row in each table


def test_the_command_writes_the_page_where_asked(tmp_path: Path) -> None:
    main(["seed000", "--out", str(tmp_path)])
    assert "# Seed 000" in (tmp_path / "seed000.md").read_text(encoding="utf-8")


def test_seed004_through_the_served_cluster_in_accelerated_time_runs_every_job_once_and_writes_both_tables(
    tmp_path: Path,
) -> None:
    rows = seed004_rows(["kubeflux"])
    served = served_rows(["kubeflux"], speed=200.0, cases=SEED004_CASES[:1])
    assert [(r.case, r.scheduler, r.finished, r.jobs) for r in served] == [(rows[0].case, "kubeflux", 50, 50)]
    assert served[0].jct >= 72.0  # the pod computes 72 s of the served clock, and wall time only adds delays
    page = write_seed004(tmp_path, rows, served, speed=200.0).read_text(encoding="utf-8")
    assert seed004_table(rows) in page and seed004_table(served) in page
    assert "x200" in page or "200 times faster" in page
    assert "](seed004.png)" in page and (tmp_path / "seed004.png").stat().st_size > 10_000  # the waits, plotted


def test_the_fidelity_page_quotes_the_table_its_kept_real_runs_and_the_simulator_give() -> None:
    """The real runs take an hour and are kept beside the page (``fidelity.json``); re-rendered from them, the page's
    tables — the simulated side computed now — are the ones published, every run has its row, and every case
    agrees within 2 % in mean JCT (a chaotic case by the mean of its real runs and simulated draws)."""
    from experiments.fidelity import CASE_HEADER, CASES, HEADER, case_rows, fidelity_rows, load_runs
    from experiments.pages import markdown_table

    folder = REPO / "docs" / "experiments"
    runs = load_runs(folder / "fidelity.json")
    assert {case.key for case in CASES} <= set(runs), "docs/experiments/fidelity.json lacks a case: run the experiment"
    rows = fidelity_rows(runs)
    page = (folder / "fidelity.md").read_text(encoding="utf-8")
    assert markdown_table(HEADER, [row.cells() for row in rows]) in page, "fidelity.md is stale: re-render it"
    assert [row.case.key for row in rows] == [case.key for case in CASES]
    cases = case_rows(runs)
    assert markdown_table(CASE_HEADER, [row.cells() for row in cases]) in page, "fidelity.md is stale: re-render it"
    assert len(cases) == len({case.case_key for case in CASES})
    assert [row.case.title for row in cases if abs(row.jct_gap) > 0.02] == []


def test_the_preemption_page_regenerated_small_holds_its_claims(tmp_path: Path) -> None:
    """HPC2N's first 400 jobs, a tenth urgent, under the page's three schedulers: the urgent jobs wait less under
    kubeflux than without preemption, no job is evicted for one of equal or lower priority, kubeflux never evicts
    part of a gang, and the page holds the table, the plot and the command."""
    from experiments.preemption import SCHEDULERS, preemption_rows, preemption_table, small, write_preemption
    from tests.shared import SHARED

    traces = SHARED / "traces"
    if not (traces / small().file).is_file():
        pytest.skip("the traces are in ../shared/traces")
    trace = small(first=400)
    rows = preemption_rows(traces, trace)
    by = {row.scheduler: row for row in rows}
    assert [row.scheduler for row in rows] == list(SCHEDULERS)
    assert all(row.not_finished == 0 and row.urgent == 39 for row in rows)
    off, on = by["kubeflux-no-preemption"], by["kubeflux"]
    assert on.urgent_mean_wait < off.urgent_mean_wait and on.urgent_p95_wait < off.urgent_p95_wait
    assert (off.preempted_pods, off.work_lost_core_hours, off.requeues) == (0, 0.0, 0)
    assert on.preempted_jobs > 0 and on.requeues >= on.preempted_jobs and on.work_lost_core_hours > 0
    assert on.partly_evicted == 0  # whole gangs only
    assert all(row.evicted_not_lower == 0 for row in rows)
    page = write_preemption(tmp_path, rows, traces_folder=traces, trace=trace).read_text(encoding="utf-8")
    assert preemption_table(rows) in page and "](preemption.png)" in page
    assert (tmp_path / "preemption.png").stat().st_size > 10_000
    assert "python -m experiments preemption" in page and "its first 400 jobs" in page


def test_the_published_preemption_page_names_every_scheduler() -> None:
    from experiments.preemption import SCHEDULERS

    page = (REPO / "docs" / "experiments" / "preemption.md").read_text(encoding="utf-8")
    for scheduler in SCHEDULERS:
        assert f"| {scheduler} |" in page
    assert "HPC2N-2002-2.2.first3170.swf" in page and (REPO / "docs" / "experiments" / "preemption.png").is_file()
