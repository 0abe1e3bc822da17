"""The topology experiment page is what the code gives (regenerated whole, a sweep of 8 runs in about 18 s of CPU),
and its claims hold."""

from __future__ import annotations

from pathlib import Path

from experiments import EXPERIMENTS
from experiments.topology import CASES, topology_rows, topology_table, write_topology
from tests.shared import REPO


def test_the_topology_page_is_what_the_code_gives_and_a_required_rack_pays(tmp_path: Path) -> None:
    rows = topology_rows()
    published = (REPO / "docs" / "experiments" / "topology.md").read_text(encoding="utf-8")
    assert topology_table(rows) in published, (
        "docs/experiments/topology.md is stale: run `python -m experiments topology`"
    )
    assert EXPERIMENTS["topology"] is write_topology
    assert write_topology(tmp_path, rows).read_text(encoding="utf-8") == published
    assert all(row.finished == row.jobs == 200 for row in rows)
    for penalty in {row.penalty for row in rows}:
        by = {row.case: row for row in rows if row.penalty == penalty}
        default, coscheduling, flux, rack = (by[case] for case, _, _ in CASES)
        assert rack.split == 0.0 < flux.split < default.split
        assert rack.mean_run < flux.mean_run < coscheduling.mean_run < default.mean_run
        assert rack.makespan < default.makespan and rack.mean_wait < default.mean_wait
