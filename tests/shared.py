"""Where the data shared beside the repository lives (``../shared``: the Fluxion corpora, traces, benchmarks).

The repository may be checked out anywhere (a worktree of it, say), so the folder is looked for beside the
checkout and beside each folder above it; ``KUBEFLUX_SHARED`` names it outright.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path:
    named = os.environ.get("KUBEFLUX_SHARED")
    if named:
        return Path(named).resolve()
    for folder in REPO.parents:
        candidate = folder / "shared"
        if (candidate / "conformance").is_dir():
            return candidate
    return REPO.parent / "shared"  # missing: the tests that read it say which file they could not open


SHARED = _find_shared()


def unavailable(reason: str) -> NoReturn:
    """Skip a test whose tools were not built on this machine (no Go: ``make`` says so), saying ``reason``; under
    ``CI=true`` fail instead, so CI never passes without running it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run this test, but: {reason}")
    pytest.skip(reason)


def unboxed(text: str) -> str:
    """``text`` without click's error box and without any blank, so that a message whose long path the box wrapped
    (anywhere, even inside a name) is found whole: compare ``unboxed(expected) in unboxed(output)``."""
    return "".join(re.sub("[│╭╮╰╯─]", "", text).split())
