"""Kubernetes resource quantities, parsed exactly as Kubernetes parses them.

Quantities follow ``k8s.io/apimachinery/pkg/api/resource.ParseQuantity``: a signed decimal number
(``12``, ``0.5``, ``.5``, ``1.``) followed by at most one suffix:

* decimal SI: ``n`` (1e-9), ``u`` (1e-6), ``m`` (1e-3), ``k``, ``M``, ``G``, ``T``, ``P``, ``E``;
* binary SI: ``Ki``, ``Mi``, ``Gi``, ``Ti``, ``Pi``, ``Ei`` (powers of 1024);
* a decimal exponent: ``1e3``, ``5E-3``, ``2e+2``.

``K`` (upper case), ``mi``, ``KB``, spaces and units such as ``GB`` are rejected, as the API server rejects them.
Values are kept exact (:class:`fractions.Fraction`) and rounded up to the canonical integer unit the way
``Quantity.MilliValue()`` / ``Quantity.Value()`` round: ``cpu: 0.0001`` asks for 1 millicore, ``memory: 1.5``
for 2 bytes. Writing an amount back as a quantity (``format_quantity``), and Go durations, are the core's
(:mod:`kubeflux.scheduler.units`): its messages and annotations use them.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kubeflux.scheduler.units import BINARY_SUFFIXES

__all__ = [
    "QuantityError",
    "bytes_",
    "canonical_value",
    "cpu_millis",
    "parse_quantity",
]


class QuantityError(ValueError):
    """A quantity that Kubernetes would reject; the message quotes the bad value."""


_DECIMAL_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY_SUFFIXES: dict[str, Fraction] = {suffix: Fraction(size) for suffix, size in BINARY_SUFFIXES}
# The shape apimachinery's scanner accepts: number, then letters from "eEinumkKMGTP", then an optional signed
# integer (only meaningful after "e"/"E").
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*)([+-]?[0-9]*)")

Quantityish = str | int | float | Fraction
_MAX_DIGITS = 1_000
_MAX_EXPONENT = 1_000
"""Bounds on a quantity's text, far beyond any amount (Go's int64 has 19 digits): an exponent of 999999999 would
otherwise be computed exactly, for minutes and gigabytes, and 4,300 digits are more than ``int`` converts."""


def parse_quantity(text: Quantityish) -> Fraction:
    """The exact value of a quantity, e.g. ``"1.5Gi"`` → ``Fraction(1610612736)``, ``"100m"`` → ``1/10``.

    Numbers (as YAML gives for ``cpu: 2`` or ``cpu: 0.5``) are accepted and read through their decimal text.
    Raises :class:`QuantityError` naming the value for anything Kubernetes would reject.
    """
    if isinstance(text, bool):
        raise QuantityError(f"invalid quantity {text!r}: expected a string or a number")
    if isinstance(text, Fraction):
        return text
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}: not a finite number")
        return Fraction(repr(text))
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: expected a string or a number")
    match = _QUANTITY_RE.fullmatch(text)
    if not text or match is None:
        raise QuantityError(
            f"invalid quantity {text!r}: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    sign, whole, fraction, letters, exponent = match.groups()
    if not whole and fraction is None:
        raise QuantityError(f"invalid quantity {text!r}: no number before the suffix")
    if len(whole) + len(fraction or "") > _MAX_DIGITS:
        raise QuantityError(f"invalid quantity {text[:40]!r}…: more than {_MAX_DIGITS} digits")
    number = Fraction(int(whole or "0"))
    if fraction:
        number += Fraction(int(fraction), 10 ** len(fraction))
    suffix = letters + exponent
    multiplier = _suffix_multiplier(text, suffix)
    value = number * multiplier
    return -value if sign == "-" else value


def _suffix_multiplier(text: str, suffix: str) -> Fraction:
    if suffix in _DECIMAL_SUFFIXES:
        return _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        if re.fullmatch(r"[+-]?[0-9]+", digits):
            if len(digits) > 6 or abs(int(digits)) > _MAX_EXPONENT:  # 10**999999999 would take minutes and GBs
                raise QuantityError(f"invalid quantity {text[:40]!r}: exponent beyond ±{_MAX_EXPONENT}")
            return Fraction(10) ** int(digits)
    raise QuantityError(f"invalid quantity {text!r}: unable to parse quantity's suffix {suffix!r}")


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def cpu_millis(text: Quantityish) -> int:
    """CPU in millicores, rounded up like ``Quantity.MilliValue()``: ``"0.5"`` → 500, ``"2"`` → 2000."""
    return _ceil(parse_quantity(text) * 1000)


def bytes_(text: Quantityish) -> int:
    """An integer amount (bytes for memory), rounded up like ``Quantity.Value()``: ``"1Gi"`` → 1073741824."""
    return _ceil(parse_quantity(text))


_CANONICAL: dict[tuple[bool, str], int] = {}
"""(cpu?, text) → the canonical amount: a cluster's pods and nodes repeat a few quantities (``"1"``, ``"1Gi"``,
``"64"``), and reading one exactly (:class:`~fractions.Fraction`) cost serve ~20 µs of CPU a pod event."""
_CANONICAL_KEPT = 1 << 12
"""Entries of :data:`_CANONICAL` at most (emptied when full: a stream of distinct quantities stays bounded)."""


def canonical_value(resource: str, text: Quantityish) -> int:
    """The amount in kubeflux's canonical unit for ``resource``: millicores for ``cpu``, units otherwise."""
    if not isinstance(text, str):
        return cpu_millis(text) if resource == "cpu" else bytes_(text)
    key = (resource == "cpu", text)
    amount = _CANONICAL.get(key)
    if amount is None:
        amount = cpu_millis(text) if key[0] else bytes_(text)  # a bad quantity raises: never kept
        if len(_CANONICAL) >= _CANONICAL_KEPT:
            _CANONICAL.clear()
        _CANONICAL[key] = amount
    return amount
