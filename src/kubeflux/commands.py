"""Registry of ``kubeflux`` subcommands: each shell module exposes a function that typer turns into a command."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach every implemented subcommand to ``app``."""
