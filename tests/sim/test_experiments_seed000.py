"""Seed 000's page: the two informer demos through the served cluster, and the update-vs-rebuild experiment.

The demos are deterministic (virtual time), so the page's tables, kubectl transcripts and log lines are compared
with a fresh run; the update-vs-rebuild figures are measured CPU times, so only its run on a small graph and the
page's structure are checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from experiments import main
from experiments.graph_update import NAME, measure, update_table, write_graph_update
from experiments.seed000 import Demo, seed000_demos, stable_log, timeline_table
from kubeflux import __version__
from kubeflux.cli import app
from kubeflux.sim.command import NOTHING_RAN
from kubeflux.sim.workloads.synthetic import PRESETS, parse_spec
from tests.shared import REPO

DOCS = REPO / "docs" / "experiments"


def at(seconds: float | None) -> float:
    assert seconds is not None, "the pod never got there"
    return seconds


@pytest.fixture(scope="module")
def demos() -> list[Demo]:
    return seed000_demos()


def test_the_seed000_page_quotes_what_a_fresh_run_of_both_demos_shows(demos: list[Demo]) -> None:
    page = (DOCS / "seed000.md").read_text(encoding="utf-8")
    stale = "docs/experiments/seed000.md is stale: run `make experiments`"
    for demo in demos:
        assert timeline_table(demo.records) in page, stale
        assert demo.pods in page and demo.jobs in page, stale
        assert "\n".join(stable_log(demo.log)) in "\n".join(stable_log(page.splitlines())), stale
    assert f"kubeflux {__version__}" in page and "python -m experiments seed000" in page


def test_demo1_runs_two_pi_pods_at_a_time_and_all_four_complete(demos: list[Demo]) -> None:
    succeed = demos[0]
    assert sorted((at(r.bind_time), at(r.end_time), r.reason) for r in succeed.records) == [
        (0.0, 60.0, "Completed"),
        (0.0, 60.0, "Completed"),
        (60.0, 120.0, "Completed"),
        (60.0, 120.0, "Completed"),
    ]
    assert succeed.pods.count("Completed") == 4 and "Complete   4/4" in succeed.jobs
    assert sum(line.startswith("Cancel flux job") for line in succeed.log) == 4


def test_demo2_frees_every_segfaulted_pod_s_cores_until_the_job_gives_up(demos: list[Demo]) -> None:
    segfault = demos[1]
    assert all(r.exit_code == 139 and r.reason == "Error" for r in segfault.records)
    assert sorted(at(r.bind_time) for r in segfault.records) == [0.0, 0.0, 30.0, 30.0, 60.0, 60.0]  # two at a time
    cancelled = [line for line in segfault.log if line.startswith("Cancel flux job")]
    assert len(cancelled) == 6 and all(line.endswith("(Failed)") for line in cancelled)
    # the last two fail at the same instant: both end Error, as each did, before the Job controller fails the Job
    assert " Failed " in segfault.jobs and segfault.pods.count("Error") == 6


def test_the_seed000_presets_run_under_simulate(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["simulate", "--preset", "seed000-segfault", "-s", "kubeflux", "--out", str(tmp_path / "out")]
    )
    # the demo's one Job fails (its pods segfault): the run says nothing succeeded, and exits as when nothing ran
    assert result.exit_code == NOTHING_RAN, result.output
    assert "nothing succeeded: no job succeeded under any scheduler: 1 failed" in " ".join(result.output.split())
    pods = (tmp_path / "out" / "kubeflux" / "pods.csv").read_text(encoding="utf-8")
    # the same as through the served cluster: the two pods failing at the same instant as the Job both end Error
    assert pods.count("kind-worker") == 6 and pods.count(",Error,139,") == 6
    assert ",Deleted," not in pods


def test_update_vs_rebuild_runs_on_a_small_graph_and_writes_its_page_and_plot(tmp_path: Path) -> None:
    rows = [measure(40, events=4), measure(80, events=4)]
    assert [row.vertices for row in rows] == [
        40 * 34 + 1,
        80 * 34 + 1,
    ]  # a node, its 32 cores and its memory each, and the root
    assert all(row.pods == row.nodes for row in rows)
    page = write_graph_update(tmp_path, rows, events=4).read_text(encoding="utf-8")
    assert update_table(rows) in page
    assert (tmp_path / f"{NAME}.png").stat().st_size > 0 and f"]({NAME}.png)" in page
    assert "load average" in page and f"python -m experiments {NAME}" in page


def test_the_published_update_vs_rebuild_page_has_its_three_sizes_and_plot() -> None:
    page = (DOCS / f"{NAME}.md").read_text(encoding="utf-8")
    for size in ("| 1,000 |", "| 5,000 |", "| 10,000 |"):
        assert size in page
    assert (DOCS / f"{NAME}.png").is_file()


def test_an_unknown_experiment_is_refused_with_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["seed999"])
    assert "seed000" in capsys.readouterr().err


def test_a_preset_s_exit_code_and_backoff_limit_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match=r"exit_code: must be in 0\.\.255"):
        parse_spec("exit_code=300", PRESETS["seed000-segfault"])
    with pytest.raises(ValueError, match="backoff_limit: must not be negative"):
        parse_spec("backoff_limit=-1", PRESETS["seed000-segfault"])
    spec = parse_spec("exit_code=1,backoff_limit=0", PRESETS["seed000-segfault"])
    assert (spec.exit_code, spec.backoff_limit) == (1, 0)
