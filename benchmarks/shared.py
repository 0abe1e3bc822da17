"""Where the data shared beside the repository lives (``../shared``: traces, the Fluxion bench graph).

The benchmarks run from a checkout anywhere (a worktree of it, say), so the folder is looked for beside the checkout
and beside each folder above it, as the tests look for it; ``KUBEFLUX_SHARED`` names it outright.
"""

from __future__ import annotations

import os
from pathlib import Path

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
