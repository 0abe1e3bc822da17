"""The one ``kubeflux`` command. Each subcommand is a thin shell over the engine, scheduler or simulator."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="kubeflux",
    help="An HPC-grade, Fluxion-compatible graph scheduler for Kubernetes, with a virtual-time simulator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """kubeflux: place HPC jobs the way Flux's Fluxion does, on Kubernetes or in a simulated cluster."""


@app.command()
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


# Subcommands are registered by their own modules (kept out of this file so each shell stays small).
from kubeflux import commands as _commands  # noqa: E402

_commands.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
