"""The experiment pages in docs/experiments/ quote what the code gives: each table is regenerated and compared."""

from __future__ import annotations

from pathlib import Path

from kubeflux.sim.experiments import main, seed004_rows, seed004_table
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


def test_the_command_writes_the_page_where_asked(tmp_path: Path) -> None:
    main(["seed004", "--out", str(tmp_path)])
    assert "# Seed 004" in (tmp_path / "seed004.md").read_text(encoding="utf-8")
