"""Where the data shared beside the repository lives (``../shared``: traces, the Fluxion bench graph), and the
argument types the benchmarks share (a bad flag is refused by argparse, naming it: exit 2, no traceback).

The benchmarks run from a checkout anywhere (a worktree of it, say), so the folder is looked for beside the checkout
and beside each folder above it, as the tests look for it; ``KUBEFLUX_SHARED`` names it outright.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kubeflux.match.policy import NAMED_POLICIES, PolicyError, parse_policy

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path:
    named = os.environ.get("KUBEFLUX_SHARED")
    if named:
        return Path(named).resolve()
    for folder in REPO.parents:
        if (folder / "shared" / "traces").is_dir():
            return folder / "shared"
    return REPO.parent / "shared"  # missing: the benchmark that reads it says which file it could not open


SHARED = _find_shared()
TRACES = SHARED / "traces"
BENCH = SHARED / "bench"


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number, ``minimum`` or more."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return whole_number


def comma_list(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse ``type``: comma-separated values, each read (and checked) by ``item``, another such type."""

    def items(text: str) -> list[T]:
        return [item(word.strip()) for word in text.split(",")]

    return items


def match_policy(text: str) -> str:
    """An argparse ``type``: a named match policy or a custom policy string (``policy=low node_centric=true``)."""
    try:
        parse_policy(text)
    except PolicyError as error:
        raise argparse.ArgumentTypeError(f"{error} (named policies: {', '.join(NAMED_POLICIES)})") from None
    return text
