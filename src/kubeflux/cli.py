"""The one ``kubeflux`` command. Each subcommand is a thin shell over the engine, scheduler or simulator."""

from __future__ import annotations

import os
import sys
from typing import Any

# kubeflux does no linear algebra, but NumPy's OpenBLAS starts a thread a core at import that spins for a while:
# ~0.1 s of CPU in every command that imports NumPy (serve, simulate, each sweep worker). One thread, unless the
# user chose otherwise; set before any import of NumPy.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from kubeflux import commands as _commands


def _root() -> None:
    """kubeflux: place HPC jobs the way Flux's Fluxion does, on Kubernetes or in a simulated cluster."""


def version() -> None:
    """Print kubeflux's version, and which engine runs: compiled (mypyc, built by ``make``) or pure Python."""
    # importing each compiled group settles which engine it runs
    import kubeflux.apiobjects
    import kubeflux.match
    import kubeflux.resources
    import kubeflux.scheduler
    import kubeflux.sim
    import kubeflux.sim.baselines  # noqa: F401
    from kubeflux import __version__, _native

    typer.echo(__version__)
    typer.echo(_native.describe())


def make_app(only: str | None = None) -> typer.Typer:
    """The command with every subcommand, or with only ``only`` (one of ``commands.SUBCOMMANDS``): a run imports the
    modules of the subcommand it runs, not the others' (:mod:`kubeflux.commands`)."""
    made = typer.Typer(
        name="kubeflux",
        help="An HPC-grade, Fluxion-compatible graph scheduler for Kubernetes, with a virtual-time simulator.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    made.callback()(_root)
    made.command()(version)
    _commands.register(made, only)
    return made


def __getattr__(name: str) -> Any:
    """``app``, the whole command (every subcommand), made on first use (tests drive it with typer's runner)."""
    if name == "app":
        made = globals()["app"] = make_app()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    named = sys.argv[1] if len(sys.argv) > 1 else None
    make_app(named if named in _commands.SUBCOMMANDS else None)()


if __name__ == "__main__":
    main()
