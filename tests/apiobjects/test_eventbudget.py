"""client-go's event spam filter, shared by serve's binder and the served cluster's in-process schedulers."""

from __future__ import annotations

import pytest

from kubeflux.apiobjects.eventbudget import EventBudget


def test_a_burst_then_one_event_per_refill_period_per_object() -> None:
    budget = EventBudget(burst=3, refill_seconds=300.0)
    assert [budget.take("pod-a", 0.0) for _ in range(4)] == [True, True, True, False]
    assert budget.take("pod-b", 0.0)  # each object has its own bucket
    assert not budget.take("pod-a", 150.0)  # half a token back
    assert budget.take("pod-a", 300.0) and not budget.take("pod-a", 300.0)  # one token back per 300 s
    assert budget.take("pod-a", 100_000.0) and budget.take("pod-a", 100_000.0)  # refills up to the burst only
    assert budget.take("pod-a", 100_000.0) and not budget.take("pod-a", 100_000.0)


def test_a_forgotten_object_starts_with_a_full_bucket_and_a_bad_burst_is_refused() -> None:
    budget = EventBudget(burst=1, refill_seconds=300.0)
    assert budget.take("pod", 0.0) and not budget.take("pod", 1.0)
    budget.forget("pod")
    assert budget.take("pod", 2.0)
    with pytest.raises(ValueError, match="burst must be at least 1"):
        EventBudget(burst=0)
