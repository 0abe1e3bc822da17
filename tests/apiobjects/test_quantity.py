"""Resource quantities, checked against what Kubernetes accepts and computes."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kubeflux.apiobjects.quantity import QuantityError, bytes_, canonical_value, cpu_millis, parse_quantity
from kubeflux.scheduler.units import format_quantity

PARSE_CASES = [
    ("plain-integer", "2", Fraction(2)),
    ("fractional-cpu", "0.5", Fraction(1, 2)),
    ("leading-dot", ".5", Fraction(1, 2)),
    ("trailing-dot", "1.", Fraction(1)),
    ("milli", "100m", Fraction(1, 10)),
    ("kilo-lowercase", "1k", Fraction(1000)),
    ("mega", "1M", Fraction(10**6)),
    ("giga", "3G", Fraction(3 * 10**9)),
    ("exa", "1E", Fraction(10**18)),
    ("kibi", "1Ki", Fraction(1024)),
    ("gibi-fraction", "1.5Gi", Fraction(3 * 2**29)),
    ("tebi", "2Ti", Fraction(2 * 2**40)),
    ("exponent", "1e3", Fraction(1000)),
    ("exponent-upper", "5E-3", Fraction(5, 1000)),
    ("exponent-plus", "2e+2", Fraction(200)),
    ("nano", "1n", Fraction(1, 10**9)),
    ("micro", "250u", Fraction(1, 4000)),
    ("negative", "-1", Fraction(-1)),
    ("explicit-plus", "+3", Fraction(3)),
    ("yaml-int", 4, Fraction(4)),
    ("yaml-float", 0.25, Fraction(1, 4)),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_parse_quantity(text: str | int | float, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


BAD_CASES = [
    ("uppercase-K", "1K", "suffix 'K'"),
    ("milli-binary", "1mi", "suffix 'mi'"),
    ("space", "1 Gi", "regular expression"),
    ("words", "abc", "regular expression"),
    ("empty", "", "regular expression"),
    ("bare-e", "1e", "suffix 'e'"),
    ("two-dots", "1.2.3", "regular expression"),
    ("GB", "1GB", "regular expression"),
    ("no-number", "Gi", "no number"),
    ("bool", True, "expected a string"),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_quantity_names_the_value(text: object, fragment: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)  # type: ignore[arg-type]
    assert repr(text) in str(info.value)
    assert fragment in str(info.value)


ROUNDING_CASES = [
    ("half-core", "0.5", 500, 1),
    ("sub-millicore-rounds-up", "0.0001", 1, 1),
    ("milli", "250m", 250, 1),
    ("cores", "4", 4000, 4),
    ("fraction-of-byte-rounds-up", "1.5", 1500, 2),
    ("gibi", "1Gi", 1024**3 * 1000, 1024**3),
    ("exponent", "1e3", 10**6, 1000),
]


@pytest.mark.parametrize(
    ("text", "millis", "value"), [c[1:] for c in ROUNDING_CASES], ids=[c[0] for c in ROUNDING_CASES]
)
def test_rounding_up_like_kubernetes(text: str, millis: int, value: int) -> None:
    assert cpu_millis(text) == millis
    assert bytes_(text) == value


def test_canonical_value_and_format_round_trip() -> None:
    assert canonical_value("cpu", "1.5") == 1500
    assert canonical_value("memory", "2Gi") == 2 * 1024**3
    assert canonical_value("nvidia.com/gpu", 2) == 2
    for resource, value in [("cpu", 1500), ("cpu", 2000), ("memory", 2 * 1024**3), ("memory", 1000), ("pods", 0)]:
        assert canonical_value(resource, format_quantity(resource, value)) == value
    assert format_quantity("cpu", 500) == "500m"
    assert format_quantity("memory", 4 * 1024**3) == "4Gi"


def test_a_quantity_read_again_gives_the_same_amount_per_resource_and_a_bad_one_is_refused_every_time() -> None:
    # the amounts read are kept by text; cpu and other resources read the same text differently
    for _ in range(2):
        assert canonical_value("cpu", "250m") == 250
        assert canonical_value("memory", "250m") == 1  # a quarter byte, rounded up
        assert canonical_value("cpu", "3") == 3000 and canonical_value("pods", "3") == 3
        with pytest.raises(QuantityError, match="'1GB'"):
            canonical_value("memory", "1GB")
    for i in range(5_000):  # more distinct quantities than are kept: each still read right
        assert canonical_value("memory", f"{i}Ki") == i * 1024
