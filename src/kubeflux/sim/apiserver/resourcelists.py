"""Resource lists (``{"cpu": "600m", "pods": "2"}``) as the quota code of k8s.io/apiserver (``pkg/quota/v1``)
adds, masks and compares them, with quantities written back as Go's ``resource.Quantity.String()`` writes them.

A quantity keeps the format it was read in, as Go's does: a binary suffix (``Ki`` … ``Ei``) is ``BinarySI``, an
exponent (``1e3``) ``DecimalExponent``, anything else ``DecimalSI``; a sum takes the format of its left operand,
unless that is zero (then the right one's). Written back, a ``DecimalSI`` amount is its integer mantissa with the
largest power of 1000 that leaves it whole (``1500`` → ``"1500"``, ``1000`` → ``"1k"``, ``0.6`` → ``"600m"``), a
``BinarySI`` one likewise with powers of 1024 (falling back to ``DecimalSI`` below 1024 or for a fraction), as
``CanonicalizeBytes`` does. Amounts are exact (:class:`~fractions.Fraction`), rounded up to nano units as Go rounds
what it parses.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from kubeflux.apiobjects.quantity import QuantityError, parse_quantity

__all__ = [
    "Amount",
    "ResourceList",
    "add",
    "less_or_equal",
    "mask",
    "negative",
    "parse_list",
    "pretty",
    "remove_zeros",
    "subtract_non_negative",
    "text_of",
]

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY = {0: "", 10: "Ki", 20: "Mi", 30: "Gi", 40: "Ti", 50: "Pi", 60: "Ei"}
_NANO = Fraction(1, 10**9)


@dataclass(frozen=True, slots=True)
class Amount:
    """One quantity: its exact value and the format it is written in."""

    value: Fraction
    format: str = DECIMAL_SI

    def __str__(self) -> str:
        return text_of(self.value, self.format)

    def plus(self, other: Amount) -> Amount:
        return Amount(self.value + other.value, other.format if self.value == 0 else self.format)

    def minus(self, other: Amount) -> Amount:
        return Amount(self.value - other.value, other.format if self.value == 0 else self.format)


ResourceList = dict[str, Amount]


def _format_of(text: str) -> str:
    letters = text.lstrip("+-0123456789.")
    if letters[:1] in ("e", "E"):
        return DECIMAL_EXPONENT
    return BINARY_SI if letters.endswith("i") else DECIMAL_SI


def parse_amount(value: object) -> Amount:
    """A quantity as the API carries it (a string, or a number from YAML); raises :class:`QuantityError`."""
    if isinstance(value, str):
        return _parse_text(value)
    return _parse(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> Amount:
    """:func:`_parse` of a quantity's text, remembered: a quota's admission reads the same few texts on every
    create (measured: parsing was two thirds of a create's cost in a namespace with a quota)."""
    return _parse(value)


def _parse(value: object) -> Amount:
    exact = parse_quantity(value)  # type: ignore[arg-type]
    if exact.denominator != 1 and (exact / _NANO).denominator != 1:  # Go keeps nano precision, rounding up
        exact = Fraction(-((-exact.numerator * 10**9) // exact.denominator), 10**9)
    return Amount(exact, _format_of(value) if isinstance(value, str) else DECIMAL_SI)


def parse_list(values: object) -> ResourceList:
    """``{name: quantity}``; names whose value does not parse are left out (validation reports them)."""
    if not isinstance(values, Mapping):
        return {}
    result: ResourceList = {}
    for name, value in values.items():
        try:
            result[str(name)] = parse_amount(value)
        except QuantityError:
            continue
    return result


def _mantissa(value: Fraction, base: int, lowest: int, highest: int) -> tuple[int, int]:
    """``value`` (a whole number of ``base**lowest``) as ``mantissa * base**exponent`` with the largest exponent up
    to ``highest`` that leaves the mantissa whole."""
    number = (value / Fraction(base) ** lowest).numerator
    exponent = lowest
    if number == 0:
        return 0, 0
    while number % base == 0 and exponent < highest:
        number //= base
        exponent += 1
    return number, exponent


@functools.lru_cache(maxsize=4096)
def text_of(value: Fraction, format_: str = DECIMAL_SI) -> str:
    """``value`` as Go writes a quantity of ``format_`` (see the module docstring)."""
    if format_ == BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        number, times = _mantissa(value, 1024, 0, 6)
        return f"{number}{_BINARY[times * 10]}"
    number, exponent = _mantissa(value, 10, -9, 18)
    while exponent % 3:  # a power of 1000: the mantissa takes the rest
        number *= 10
        exponent -= 1
    if format_ == DECIMAL_EXPONENT:
        return f"{number}e{exponent}" if exponent else str(number)
    return f"{number}{_DECIMAL[exponent]}"


def add(a: Mapping[str, Amount], b: Mapping[str, Amount]) -> ResourceList:
    """``quota.Add``: every name of either, summed where both have it."""
    result = dict(a)
    for name, amount in b.items():
        result[name] = result[name].plus(amount) if name in result else amount
    return result


def subtract_non_negative(a: Mapping[str, Amount], b: Mapping[str, Amount]) -> ResourceList:
    """``quota.SubtractWithNonNegativeResult``."""
    result: ResourceList = {}
    for name, amount in a.items():
        left = amount.minus(b[name]) if name in b else amount
        result[name] = left if left.value >= 0 else Amount(Fraction(0), left.format)
    for name, amount in b.items():
        if name not in result:
            result[name] = Amount(Fraction(0), amount.format)
    return result


def mask(values: Mapping[str, Amount], names: Iterable[str]) -> ResourceList:
    """``quota.Mask``: only ``names``."""
    kept = set(names)
    return {name: amount for name, amount in values.items() if name in kept}


def remove_zeros(values: Mapping[str, Amount]) -> ResourceList:
    return {name: amount for name, amount in values.items() if amount.value != 0}


def negative(values: Mapping[str, Amount]) -> list[str]:
    return sorted(name for name, amount in values.items() if amount.value < 0)


def less_or_equal(a: Mapping[str, Amount], b: Mapping[str, Amount]) -> tuple[bool, list[str]]:
    """``quota.LessThanOrEqual``: whether each of ``a`` is at most ``b``'s (a name ``b`` lacks is fine), and the
    names that exceed."""
    exceeded = sorted(name for name, amount in a.items() if name in b and amount.value > b[name].value)
    return not exceeded, exceeded


def pretty(values: Mapping[str, Amount]) -> str:
    """``prettyPrint``: ``name=quantity`` sorted by name, joined by commas."""
    return ",".join(f"{name}={values[name]}" for name in sorted(values))


def as_json(values: Mapping[str, Amount]) -> dict[str, str]:
    """The list as the API writes it."""
    return {name: str(values[name]) for name in sorted(values)}
