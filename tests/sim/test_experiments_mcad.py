"""Seed 004's MCAD rows (issue 33): the talk's cases behind Kueue, as the seed-004 page quotes them, and what they
show — the dispatch time takes over the scheduling latency, and kube-default no longer holds half a gang."""

from __future__ import annotations

from experiments import seed004_rows
from experiments.mcad import QUEUED_SCHEDULERS, queued_rows, queued_table
from experiments.seed004 import SEED004_CASES
from tests.shared import REPO


def test_the_seed004_page_quotes_the_queued_rows_the_code_gives_and_their_claims_hold() -> None:
    queued = queued_rows(SEED004_CASES)
    page = (REPO / "docs" / "experiments" / "seed004.md").read_text(encoding="utf-8")
    assert queued_table(queued) in page, "docs/experiments/seed004.md is stale: run `python -m experiments seed004`"
    assert [(q.case, q.scheduler) for q in queued] == [
        (case, scheduler) for case, _, _ in SEED004_CASES for scheduler in QUEUED_SCHEDULERS
    ]
    assert all(q.finished == q.jobs == 50 for q in queued)
    plain = {(row.case, row.scheduler): row for row in seed004_rows(QUEUED_SCHEDULERS)}
    for q in queued:
        alone = plain[(q.case, q.scheduler)]
        assert q.jct == alone.jct  # in virtual time the queue moves the wait (in the mean), it adds none
        assert q.latency == 0.0 and q.dispatch == alone.latency  # the wait is all dispatch
        assert q.jct_from_dispatch == 72.0  # once dispatched a job runs at once: its pods' 72 s
    every_20 = [q for q in queued if q.case.startswith("Jobs, one every 20 s")]
    assert all(q.dispatch == 0.0 for q in every_20)  # no queueing above 18 s, as the talk saw
    gangs = SEED004_CASES[2][0]
    held, alone = (
        next(q for q in queued if q.case == gangs and q.scheduler == "kube-default"),
        plain[(gangs, "kube-default")],
    )
    coscheduling = plain[(gangs, "coscheduling")]
    assert held.max_wait == coscheduling.max_wait < alone.max_wait  # Kueue admits a PodGroup whole
    assert "## Behind a queue: the talk's MCAD rows" in page and "325.68 s" in page
