"""The matcher's own count arithmetic (:func:`~kubeflux.match.request.calc_count`, which does ``+`` counts itself
rather than call into the pure ``kubeflux.jobspec``) must give what :meth:`Count.calc` gives, for every kind of
count and any number of candidates, and so must :func:`~kubeflux.match.request.effective_max`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kubeflux.jobspec import UINT_MAX, Count
from kubeflux.match.request import Request, calc_count, effective_max


@st.composite
def counts(draw: st.DrawFn) -> Count:
    operator = draw(st.sampled_from("+*^"))
    # (not a "*" count from 0: Count.calc never ends for one; jobspec validation is where that belongs)
    low = draw(st.integers(1 if operator == "*" else 0, 5000))
    high = draw(st.one_of(st.just(UINT_MAX), st.integers(0, 10**6)))
    operand = draw(st.integers(1, 40))
    return Count(low, high, operator, operand)


@given(counts(), st.one_of(st.integers(0, 3000), st.integers(0, UINT_MAX)))
def test_calc_count_is_count_calc(count: Count, available: int) -> None:
    request = Request("core", count)
    assert calc_count(request, available) == count.calc(available)
    assert effective_max(request) == count.calc(count.max)


def test_slot_counts_a_user_writes() -> None:
    """``count: 4`` takes 4 of 6 candidates and none of 3; ``{min: 2}`` takes all 6; ``{min: 2, max: 8,
    operand: 3}`` takes 5 of 6 (2, 5, 8 …)."""
    assert calc_count(Request("slot", Count(4, 4)), 6) == 4
    assert calc_count(Request("slot", Count(4, 4)), 3) == 0
    assert calc_count(Request("slot", Count(2)), 6) == 6
    assert calc_count(Request("slot", Count(2, 8, "+", 3)), 6) == 5
    assert effective_max(Request("slot", Count(2, 8, "+", 3))) == 8
