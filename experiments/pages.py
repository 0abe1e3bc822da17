"""What every experiment page shares: its Markdown tables and the line naming the version and the command."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path

from kubeflux import __version__

__all__ = ["COMMAND", "machine", "markdown_table", "stamp", "write_page"]

COMMAND = "python -m experiments"
"""The command that regenerates every page (``make experiments``); ``COMMAND NAME`` regenerates one."""


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table of ``rows`` (cells as they are, ``str()``-ed) under ``header``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def stamp(name: str, checked: str = "a test checks this page's tables against the code") -> str:
    """The page's italic line under its title: the kubeflux version, the one command that regenerates the page,
    and what a test checks of it."""
    return f"*kubeflux {__version__}; regenerate with `{COMMAND} {name}` (or `make experiments`); {checked}.*"


def write_page(folder: Path, name: str, text: str) -> Path:
    """Write ``folder/name.md`` (creating ``folder``); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def machine() -> str:
    """Where the figures were measured: Python, platform, cores and the load average at the time."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"Python {platform.python_version()} on {platform.machine()} ({os.cpu_count()} cores), load average {load} "
        "(1, 5, 15 min)"
    )
