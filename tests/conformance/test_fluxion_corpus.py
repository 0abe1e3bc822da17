"""Fluxion's ``resource-query``, byte for byte, on both corpora (see ../shared/conformance/*/README.md).

Every case of each corpus's ``cases.json`` must give exactly the expected ``-t`` output: ``fluxion`` is Fluxion's
own test data, ``fluxion-random`` random graphs and jobspecs run through Fluxion's real ``resource-query``. Cases
listed in ``known_differences.txt`` are expected to differ (with the reason); one that starts passing fails this
test, so the list can only shrink.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.fluxion_corpus import CORPORA, Case, known_differences, load_cases, run_case

pytestmark = pytest.mark.both_engines

CASES = {name: load_cases(name) for name in CORPORA}
ALL_CASES = [case for cases in CASES.values() for case in cases]
KNOWN = known_differences()


@pytest.mark.parametrize("case", ALL_CASES, ids=[case.id for case in ALL_CASES])
def test_case_output_is_byte_identical(case: Case, tmp_path: Path) -> None:
    expected = case.expected()
    got = run_case(case, tmp_path)
    if case.id in KNOWN:
        assert got != expected, f"{case.id} now passes: remove it from known_differences.txt"
        pytest.xfail(KNOWN[case.id])
    assert got == expected


def test_case_ids_are_unique_across_corpora() -> None:
    ids = [case.id for case in ALL_CASES]
    assert len(ids) == len(set(ids))


def test_known_differences_name_real_cases() -> None:
    assert set(KNOWN) <= {case.id for case in ALL_CASES}


@pytest.mark.parametrize("corpus", CORPORA)
def test_every_tier1_case_passes(corpus: str) -> None:
    tier1 = [case.id for case in CASES[corpus] if case.tier == 1]
    assert tier1, f"no tier-1 case in {corpus}"
    assert not [i for i in tier1 if i in KNOWN], "every tier-1 case must pass"


def test_ninety_percent_of_tier2_cases_pass() -> None:
    tier2 = [case.id for case in CASES["fluxion"] if case.tier == 2]
    passing = [i for i in tier2 if i not in KNOWN]
    assert len(passing) >= 0.9 * len(tier2), f"tier 2: {len(passing)}/{len(tier2)} pass, target 90%"
