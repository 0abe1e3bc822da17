"""Fluxion's own resource-query test data, byte for byte (see ../shared/conformance/fluxion/README.md).

Every case of ``cases.json`` must give exactly the expected ``-t`` output. Cases listed in
``known_differences.txt`` are expected to differ (with the reason); one that starts passing fails this test,
so the list can only shrink.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance.fluxion_corpus import CORPUS, known_differences, load_cases, run_case

CASES = load_cases()
KNOWN = known_differences()


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_case_output_is_byte_identical(case: dict[str, Any], tmp_path: Path) -> None:
    expected = (CORPUS / case["expected"]).read_text()
    got = run_case(case, tmp_path)
    if case["id"] in KNOWN:
        assert got != expected, f"{case['id']} now passes: remove it from known_differences.txt"
        pytest.xfail(KNOWN[case["id"]])
    assert got == expected


def test_known_differences_name_real_cases() -> None:
    ids = {case["id"] for case in CASES}
    assert set(KNOWN) <= ids


def test_every_tier1_case_passes() -> None:
    tier1 = [c["id"] for c in CASES if c["tier"] == 1]
    assert not [i for i in tier1 if i in KNOWN], "every tier-1 case must pass"


def test_ninety_percent_of_tier2_cases_pass() -> None:
    tier2 = [c["id"] for c in CASES if c["tier"] == 2]
    passing = [i for i in tier2 if i not in KNOWN]
    assert len(passing) >= 0.9 * len(tier2), f"tier 2: {len(passing)}/{len(tier2)} pass, target 90%"
