"""The scheduler's amounts and durations as people read them: canonical amounts (millicores, bytes) written the
way Kubernetes writes quantities (``500m``, ``4Gi``), seconds as Go durations (``1m30s``), read and written, and a
bad value as a message repeats it (:func:`echo`: cut to :data:`ECHO_LIMIT` characters, whatever its length).

This is no wire format: the core writes amounts in its messages (``pod group … can never fit: … need 8 cpu``) and
reads durations from its own annotations (``kubeflux.io/duration: 1h30m``). Parsing Kubernetes quantities, which
the readers of manifests do, is :mod:`kubeflux.apiobjects.quantity`'s.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

__all__ = [
    "BINARY_SUFFIXES",
    "ECHO_LIMIT",
    "DurationError",
    "clip",
    "echo",
    "format_cpu",
    "format_duration",
    "format_quantity",
    "parse_duration",
]


class DurationError(ValueError):
    """A duration Go's ``time.ParseDuration`` would reject; the message quotes the bad value (:func:`echo`)."""


ECHO_LIMIT: Final = 40
"""The most characters of a bad value a message repeats (a 400-digit number is shown by its start and length)."""


def clip(text: str) -> str:
    """``text`` for a message, cut to :data:`ECHO_LIMIT` characters: ``99999999… (402 characters)``."""
    return text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}… ({len(text):,} characters)"


def echo(value: object) -> str:
    """``repr(value)`` for a message, cut as :func:`clip` cuts: ``'99999999…' (402 characters)``."""
    return clip(repr(value))


BINARY_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)
"""Kubernetes' binary quantity suffixes and their sizes, largest first."""


def format_cpu(millis: int) -> str:
    """Millicores as Kubernetes writes them: 2000 → ``"2"``, 500 → ``"500m"``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_quantity(resource: str, value: int) -> str:
    """An amount in kubeflux's canonical unit for ``resource`` as the shortest exact quantity (``"2"``, ``"500m"``,
    ``"4Gi"``): the inverse of :func:`kubeflux.apiobjects.quantity.canonical_value`."""
    if resource == "cpu":
        return format_cpu(value)
    if value != 0:
        for suffix, size in BINARY_SUFFIXES:
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


_MAX_DURATION_TEXT = 1_000
"""Characters a duration may have: far beyond any real one, so a huge text is refused before it is parsed."""
_MAX_DURATION_NS = 2**63 - 1
"""Go's ``time.Duration`` is an int64 of nanoseconds: about 292 years."""


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string: ``"1m30s"`` → 90.0, ``"500ms"`` → 0.5, ``"-1.5h"`` → -5400.0.

    As in Go, ``"0"`` needs no unit, every other number needs one, and units may repeat (``"1s1s"``).
    """
    if not isinstance(text, str) or not text:
        raise DurationError(f"invalid duration {echo(text)}")
    if len(text) > _MAX_DURATION_TEXT:
        raise DurationError(f"invalid duration {echo(text)}: more than {_MAX_DURATION_TEXT:,} characters")
    body = text
    sign = 1
    if body[0] in "+-":
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f"invalid duration {echo(text)}")
    total = Fraction(0)
    pos = 0
    while pos < len(body):
        match = _DURATION_PART_RE.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise DurationError(
                f"invalid duration {echo(text)}: expected a number followed by one of ns, us, ms, s, m, h"
            )
        total += Fraction(match.group(1)) * _DURATION_UNITS_NS[match.group(2)]
        pos = match.end()
    if total > _MAX_DURATION_NS:
        raise DurationError(f"invalid duration {echo(text)}: beyond Go's limit of about 292 years")
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
