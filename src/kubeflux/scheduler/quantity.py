"""Kubernetes resource quantities and Go durations, parsed exactly as Kubernetes parses them.

Quantities follow ``k8s.io/apimachinery/pkg/api/resource.ParseQuantity``: a signed decimal number
(``12``, ``0.5``, ``.5``, ``1.``) followed by at most one suffix:

* decimal SI: ``n`` (1e-9), ``u`` (1e-6), ``m`` (1e-3), ``k``, ``M``, ``G``, ``T``, ``P``, ``E``;
* binary SI: ``Ki``, ``Mi``, ``Gi``, ``Ti``, ``Pi``, ``Ei`` (powers of 1024);
* a decimal exponent: ``1e3``, ``5E-3``, ``2e+2``.

``K`` (upper case), ``mi``, ``KB``, spaces and units such as ``GB`` are rejected, as the API server rejects them.
Values are kept exact (:class:`fractions.Fraction`) and rounded up to the canonical integer unit the way
``Quantity.MilliValue()`` / ``Quantity.Value()`` round: ``cpu: 0.0001`` asks for 1 millicore, ``memory: 1.5``
for 2 bytes.

Durations follow Go's ``time.ParseDuration`` / ``Duration.String`` (``1m30s``, ``500ms``, ``1h0m0s``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "bytes_",
    "canonical_value",
    "cpu_millis",
    "format_cpu",
    "format_duration",
    "format_quantity",
    "parse_duration",
    "parse_quantity",
]


class QuantityError(ValueError):
    """A quantity or duration that Kubernetes would reject; the message quotes the bad value."""


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
_BINARY_SUFFIXES: dict[str, Fraction] = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
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


def canonical_value(resource: str, text: Quantityish) -> int:
    """The amount in kubeflux's canonical unit for ``resource``: millicores for ``cpu``, units otherwise."""
    return cpu_millis(text) if resource == "cpu" else bytes_(text)


def format_cpu(millis: int) -> str:
    """Millicores as Kubernetes writes them: 2000 → ``"2"``, 500 → ``"500m"``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_quantity(resource: str, value: int) -> str:
    """The inverse of :func:`canonical_value`, as the shortest exact string (``"2"``, ``"500m"``, ``"4Gi"``)."""
    if resource == "cpu":
        return format_cpu(value)
    if value != 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            size = int(_BINARY_SUFFIXES[suffix])
            if value % size == 0:
                return f"{value // size}{suffix}"
    return str(value)


# --- Go durations -------------------------------------------------------------------------------------------

_DURATION_UNITS_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_DURATION_PART_RE = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


_MAX_DURATION_NS = 2**63 - 1


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string: ``"1m30s"`` → 90.0, ``"500ms"`` → 0.5, ``"-1.5h"`` → -5400.0.

    As in Go, ``"0"`` needs no unit, every other number needs one, and units may repeat (``"1s1s"``).
    """
    if not isinstance(text, str) or not text:
        raise QuantityError(f"invalid duration {text!r}")
    if len(text) > _MAX_DIGITS:
        raise QuantityError(f"invalid duration {text[:40]!r}…: more than {_MAX_DIGITS} characters")
    body = text
    sign = 1
    if body[0] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise QuantityError(f"invalid duration {text!r}")
    total = Fraction(0)
    pos = 0
    while pos < len(body):
        match = _DURATION_PART_RE.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise QuantityError(f"invalid duration {text!r}: expected a number followed by one of ns, us, ms, s, m, h")
        total += Fraction(match.group(1)) * _DURATION_UNITS_NS[match.group(2)]
        pos = match.end()
    if total > _MAX_DURATION_NS:  # Go's time.Duration is an int64 of nanoseconds: about 292 years
        raise QuantityError(f"invalid duration {text[:40]!r}: beyond Go's limit of about 292 years")
    return float(sign * total / 1_000_000_000)


def format_duration(seconds: float) -> str:
    """A duration as Go's ``Duration.String`` writes it: 90 → ``"1m30s"``, 0.5 → ``"500ms"``, 0 → ``"0s"``."""
    ns = round(seconds * 1_000_000_000)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ns", 1), ("µs", 1_000), ("ms", 1_000_000)):
            if ns < size * 1000:
                return sign + _trim(Fraction(ns, size)) + unit
    hours, rest = divmod(ns, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    secs = _trim(Fraction(rest, 1_000_000_000)) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return sign + secs


def _trim(value: Fraction) -> str:
    """A non-negative fraction with a power-of-ten denominator, without trailing zeros (1.500 → ``1.5``)."""
    whole, rest = divmod(value.numerator, value.denominator)
    if rest == 0:
        return str(whole)
    # value.denominator divides 10**9 (nanosecond resolution), so this is exact.
    digits = str(rest * (10**9 // value.denominator)).rjust(9, "0").rstrip("0")
    return f"{whole}.{digits}"
