"""Registry of ``kubeflux`` subcommands: each shell module exposes a function that typer turns into a command.

A subcommand's module is imported when the subcommand is registered: :func:`register` with ``only`` registers the one
a command line names, so ``kubeflux serve`` does not import the simulator's, the served cluster's and the harness's
modules (0.1 s of serve's start, issue 28); ``kubeflux --help`` registers them all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer


def query(
    load_file: Annotated[Path, typer.Option("-L", "--load-file", help="Graph file (GRUG GraphML or JGF).")],
    load_format: Annotated[str, typer.Option("-f", "--load-format", help="grug or jgf.")] = "grug",
    match_policy: Annotated[
        str, typer.Option("-P", "--match-policy", help="first, high, low, lonode, hinode, lonodex, hinodex, ...")
    ] = "first",
    match_format: Annotated[
        str, typer.Option("-F", "--match-format", help="simple, pretty_simple, jgf or rv1_nosched.")
    ] = "simple",
    traverser: Annotated[str, typer.Option("-T", "--traverser", help="simple or flexible.")] = "simple",
    subsystems: Annotated[
        str,
        typer.Option(
            "-S",
            "--match-subsystems",
            help="CA (containment), PA (power), C+PA (containment, power up-walks), IBA, C+IBA, ... or ALL.",
        ),
    ] = "CA",
    prune_filters: Annotated[
        str, typer.Option("-p", "--prune-filters", help="HIGH:LOW pairs, e.g. ALL:core,ALL:node.")
    ] = "ALL:core,ALL:node",
    test_output: Annotated[
        Path | None, typer.Option("-t", "--test-output", help="Write match output to this file.")
    ] = None,
    elapse_time: Annotated[bool, typer.Option("-e", "--elapse-time", help="Print timings.")] = False,
) -> None:
    """Match jobspecs against a resource graph: a resource-query compatible shell (commands on stdin)."""
    from kubeflux.query import QueryOptions, run_query

    options = QueryOptions(
        graph=load_file,
        load_format=load_format,
        policy=match_policy,
        match_format=match_format,
        traverser=traverser,
        subsystems=subsystems,
        prune_filters=prune_filters,
        output=test_output,
        elapse_time=elapse_time,
        long_running=True,
    )
    raise typer.Exit(run_query(options, sys.stdin))


def demo(
    out: Annotated[Path, typer.Option("--out", help="Folder for the report.")] = Path("demo-out"),
) -> None:
    """Run the main demo on the embedded default (no cluster needed) and write the report."""
    from kubeflux.demo import run_demo

    run_demo(out)


def _query(app: typer.Typer) -> None:
    app.command("query")(query)


def _demo(app: typer.Typer) -> None:
    app.command("demo")(demo)


def _simulate(app: typer.Typer) -> None:
    from kubeflux.sim.command import simulate_command

    app.command("simulate")(simulate_command)


def _sweep(app: typer.Typer) -> None:
    from kubeflux.sim.sweep_command import sweep_command

    app.command("sweep")(sweep_command)


def _serve(app: typer.Typer) -> None:
    from kubeflux.kube.command import serve_command

    app.command("serve")(serve_command)


def _queue(app: typer.Typer) -> None:
    from kubeflux.kube.queue_command import queue_command

    app.command("queue")(queue_command)


def _cluster(app: typer.Typer) -> None:
    from kubeflux.sim.apiserver.command import cluster_app

    app.add_typer(cluster_app, name="cluster")


def _kube(app: typer.Typer) -> None:
    from kubeflux.controlplane.command import kube_app

    app.add_typer(kube_app, name="kube")


SUBCOMMANDS: dict[str, Callable[[typer.Typer], None]] = {
    "query": _query,
    "demo": _demo,
    "simulate": _simulate,
    "sweep": _sweep,
    "serve": _serve,
    "queue": _queue,
    "cluster": _cluster,
    "kube": _kube,
}
"""Subcommand name → what registers it, in the order ``kubeflux --help`` lists them."""


def register(app: typer.Typer, only: str | None = None) -> None:
    """Attach every implemented subcommand to ``app``, or only the one named ``only`` (one of :data:`SUBCOMMANDS`)."""
    for name, attach in SUBCOMMANDS.items():
        if only is None or name == only:
            attach(app)
