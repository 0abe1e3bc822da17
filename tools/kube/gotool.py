"""The Go toolchain as tools/kube's build steps run it: the local toolchain only (never one downloaded), each module's
pins as they are (``-mod=readonly``), static binaries (no cgo, so no C compiler either)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def go(*args: str, cwd: Path) -> str:
    """``go ARGS`` in ``cwd``; its output. A failure raises RuntimeError with the end of Go's own message."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}
    result = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"go {' '.join(args[:2])} in {cwd} failed:\n{result.stderr[-4000:]}")
    return result.stdout
