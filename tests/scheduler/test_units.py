"""Go durations, checked against what Go's ``time.ParseDuration`` accepts and ``Duration.String`` writes."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.units import DurationError, format_duration, parse_duration

DURATION_CASES = [
    ("minutes-seconds", "1m30s", 90.0, "1m30s"),
    ("milliseconds", "500ms", 0.5, "500ms"),
    ("negative-hours", "-1.5h", -5400.0, "-1h30m0s"),
    ("zero", "0", 0.0, "0s"),
    ("hour", "1h", 3600.0, "1h0m0s"),
    ("fractional-seconds", "1.5s", 1.5, "1.5s"),
    ("micro", "1us", 1e-06, "1µs"),
    ("micro-sign", "2µs", 2e-06, "2µs"),
    ("nano", "3ns", 3e-09, "3ns"),
    ("repeated-units", "1s1s", 2.0, "2s"),
]


@pytest.mark.parametrize(
    ("text", "seconds", "formatted"), [c[1:] for c in DURATION_CASES], ids=[c[0] for c in DURATION_CASES]
)
def test_go_durations(text: str, seconds: float, formatted: str) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert format_duration(seconds) == formatted


@pytest.mark.parametrize("text", ["", "1", "1x", "h", "1.5", "--1s", "1s "], ids=repr)
def test_bad_durations(text: str) -> None:
    with pytest.raises(DurationError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("9" * 500 + "x", "invalid duration '" + "9" * 39 + "… (503 characters): expected a number"),
        ("9" * 299 + "h", "invalid duration '" + "9" * 39 + "… (302 characters): beyond Go's limit"),
        ("1s" * 600, "invalid duration '1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1s1… (1,202 characters): more than 1,000"),
        ("1e400s", "invalid duration '1e400s': expected a number followed by one of ns, us, ms, s, m, h"),
    ],
    ids=["500-digits-cut", "overflow-cut", "too-long-cut", "short-said-whole"],
)
def test_a_bad_duration_is_echoed_cut_as_other_messages_cut_values(text: str, said: str) -> None:
    """The message repeats at most 40 characters of the value, quotes included, and says how long it was
    (``units.echo``, the helper every reader's messages use), however long the annotation."""
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert str(caught.value).startswith(said)
    assert len(str(caught.value)) < 140
