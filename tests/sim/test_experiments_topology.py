"""The topology experiment page quotes the table the code gives, and its claims hold."""

from __future__ import annotations

from pathlib import Path

from experiments import main
from experiments.topology import CASES, topology_rows, topology_table
from tests.shared import REPO


def test_the_topology_page_quotes_the_table_the_code_gives_and_a_required_rack_pays() -> None:
    rows = topology_rows()
    page = (REPO / "docs" / "experiments" / "topology.md").read_text(encoding="utf-8")
    assert topology_table(rows) in page, "docs/experiments/topology.md is stale: run `python -m experiments topology`"
    assert all(row.finished == row.jobs == 200 for row in rows)
    for penalty in {row.penalty for row in rows}:
        by = {row.case: row for row in rows if row.penalty == penalty}
        default, coscheduling, flux, rack = (by[case] for case, _, _ in CASES)
        assert rack.split == 0.0 < flux.split < default.split
        assert rack.mean_run < flux.mean_run < coscheduling.mean_run < default.mean_run
        assert rack.makespan < default.makespan and rack.mean_wait < default.mean_wait


def test_the_command_knows_the_topology_experiment(tmp_path: Path) -> None:
    from experiments import EXPERIMENTS

    assert "topology" in EXPERIMENTS
    main(["topology", "--out", str(tmp_path)])
    assert "| 0.1 | kubeflux, one rack required | 200/200 |" in (tmp_path / "topology.md").read_text(encoding="utf-8")
