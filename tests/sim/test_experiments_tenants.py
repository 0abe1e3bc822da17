"""The tenants page (a trace's users as two Kueue tenants, issue 33): regenerated on a small cut of the trace, its
claims hold; the published page names every configuration and both tenants."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import EXPERIMENTS
from experiments.tenants import CONFIGURATIONS, TENANTS, small, tenant_rows, tenants_table, write_tenants
from tests.shared import REPO, SHARED


def test_the_tenants_page_regenerated_small_holds_its_claims(tmp_path: Path) -> None:
    """HPC2N's first 400 jobs: every job of both tenants finishes in every configuration; behind Kueue a tenant
    waits at least its admission wait, uses its quota and borrows only a share of its usage; the page holds the
    table and the command."""
    traces = SHARED / "traces"
    if not (traces / small().file).is_file():
        pytest.skip("the traces are in ../shared/traces")
    rows = tenant_rows(traces, small())
    assert [(row.configuration, row.tenant) for row in rows] == [
        (f"Kueue + {scheduler}" if kueue else scheduler, tenant)
        for scheduler, kueue in CONFIGURATIONS
        for tenant in TENANTS
    ]
    assert all(row.finished == row.jobs > 0 for row in rows)
    assert sum(row.jobs for row in rows[:2]) == 394  # 400 jobs, 6 rejected by the trace (unknown run time)
    for row in rows:
        kueue = row.configuration.startswith("Kueue + ")
        assert (row.mean_admission_wait is not None) is kueue
        if row.mean_admission_wait is not None:
            assert row.quota_use is not None and row.borrowed_share is not None
            assert 0 <= row.mean_admission_wait <= row.mean_wait + 1e-6
            assert row.quota_use > 0 and 0 <= row.borrowed_share < 1
    assert any((row.borrowed_share or 0) > 0 for row in rows)  # the idle half is borrowed
    page = write_tenants(tmp_path, rows, trace=small()).read_text(encoding="utf-8")
    assert tenants_table(rows) in page and "python -m experiments tenants" in page and "its first 400 jobs" in page
    assert EXPERIMENTS["tenants"] is write_tenants


def test_the_published_tenants_page_names_every_configuration() -> None:
    page = (REPO / "docs" / "experiments" / "tenants.md").read_text(encoding="utf-8")
    for scheduler, kueue in CONFIGURATIONS:
        for tenant in TENANTS:
            assert f"| {'Kueue + ' if kueue else ''}{scheduler} | {tenant} |" in page
    assert "HPC2N-2002-2.2.first3170.swf" in page and "its 3,170 jobs" in page
