"""Numbers as a reader wants them: durations in the unit that suits them, shares in percent, counts with thousands
separators, never ``36824.000``.

* :func:`duration` — ``0 s``, ``0.35 s``, ``4.2 s``, ``42 s``, ``12.5 min``, ``10.2 h``, ``3.4 d``;
* :func:`durations` — several to compare, in one unit (the largest's): ``0.71 h``, ``4.0 h``;
* :func:`seconds` — the exact figure for a tooltip or a CSV-minded reader: ``36,824 s``, ``2,554.788 s``;
* :func:`percent` — ``79.4 %`` of a fraction (0.794);
* :func:`count` — ``188,041``;
* :func:`ratio` — ``1.23`` (slowdowns: a ratio of times).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0


def _valid(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def duration(value: float | None) -> str:
    """A duration in seconds in the unit that reads best, three significant figures at most (``""`` for None)."""
    if not _valid(value):
        return "" if value is None else str(value)
    assert value is not None
    size = abs(value)
    if size == 0:
        return "0 s"
    if size < 10:
        return f"{value:.2g} s" if size < 1 else f"{value:.1f} s"
    if size < 2 * MINUTE:
        return f"{value:.0f} s"
    if size < 2 * HOUR:
        return f"{value / MINUTE:.1f} min"
    if size < 2 * DAY:
        return f"{value / HOUR:.1f} h"
    return f"{value / DAY:,.1f} d"


def unit_of(largest: float) -> tuple[float, str]:
    """(seconds in the unit, its name) that suits durations up to ``largest`` seconds: s, min, h or d."""
    for size, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min")):
        if largest >= 2 * size:
            return size, name
    return 1.0, "s"


def durations(values: Sequence[float | None]) -> list[str]:
    """Durations to compare side by side: all in the unit that suits the largest (``0.71 h``, ``4.0 h``), with
    one decimal (two under 1, none from 1,000); ``""`` for None."""
    known = [abs(v) for v in values if v is not None and math.isfinite(v)]
    size, name = unit_of(max(known, default=0.0))
    shown: list[str] = []
    for value in values:
        if not _valid(value):
            shown.append("" if value is None else str(value))
            continue
        assert value is not None
        scaled = value / size
        if scaled == 0:
            shown.append(f"0 {name}")
        else:
            digits = 2 if abs(scaled) < 1 else 1 if abs(scaled) < 1000 else 0
            shown.append(f"{scaled:,.{digits}f} {name}")
    return shown


def seconds(value: float | None) -> str:
    """Exact seconds with thousands separators: whole ones without decimals, others with up to three."""
    if not _valid(value):
        return "" if value is None else str(value)
    assert value is not None
    if float(value).is_integer():
        return f"{value:,.0f} s"
    return f"{value:,.3f}".rstrip("0").rstrip(".") + " s"


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal: 0.794 → ``79.4 %``."""
    if not _valid(value):
        return "" if value is None else str(value)
    assert value is not None
    return f"{value * 100:.1f} %"


def count(value: float | None) -> str:
    """A whole number with thousands separators."""
    if not _valid(value):
        return "" if value is None else str(value)
    assert value is not None
    return f"{value:,.0f}"


def ratio(value: float | None) -> str:
    """A ratio with two decimals (three significant figures from 10 up)."""
    if not _valid(value):
        return "" if value is None else str(value)
    assert value is not None
    return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


def each(shown: Callable[[float | None], str]) -> Callable[[Sequence[float | None]], list[str]]:
    """A formatter of one value as one of a row of values."""

    def row(values: Sequence[float | None]) -> list[str]:
        return [shown(value) for value in values]

    return row


def plain(value: object) -> str:
    """Any summary value for a table: whole floats without decimals, others with up to six, thousands separated."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value.is_integer():
        return f"{value:,.0f}"
    return f"{value:,.6f}".rstrip("0").rstrip(".")


__all__ = ["count", "duration", "durations", "each", "percent", "plain", "ratio", "seconds", "unit_of"]
