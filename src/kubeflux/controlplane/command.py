"""``kubeflux kube up``: a real Kubernetes control plane with KWOK's fake nodes on this machine, as kwokctl makes
one, to try ``kubeflux serve`` (or anything else) against the real API without a cluster."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from kubeflux.stopsignals import StopSignals

__all__ = ["kube_app"]

kube_app = typer.Typer(help="A real Kubernetes control plane on loopback (built by `make` from its Go modules).")


@kube_app.callback()
def _kube() -> None:
    """Run the real control plane that kubeflux is tested against."""


def _gates(text: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if value.lower() not in ("true", "false") or not name:
            raise typer.BadParameter(f"{item!r}: expected NAME=true or NAME=false", param_hint="--feature-gates")
        gates[name] = value.lower() == "true"
    return gates


@kube_app.command("up")
def up(
    folder: Annotated[
        Path | None, typer.Option("--folder", help="Where the kubeconfig, data and logs go (default: a new one).")
    ] = None,
    kwok_nodes: Annotated[int, typer.Option("--kwok-nodes", min=0, max=10_000, help="Fake nodes KWOK runs.")] = 4,
    cpu: Annotated[str, typer.Option("--cpu", help="Each node's cpu.")] = "16",
    memory: Annotated[str, typer.Option("--memory", help="Each node's memory.")] = "64Gi",
    scheduler: Annotated[bool, typer.Option("--scheduler/--no-scheduler", help="Run kube-scheduler.")] = True,
    controller_manager: Annotated[
        bool, typer.Option("--controller-manager/--no-controller-manager", help="Run kube-controller-manager.")
    ] = True,
    feature_gates: Annotated[
        str, typer.Option("--feature-gates", help="e.g. GenericWorkload=true,GangScheduling=true")
    ] = "",
) -> None:
    """Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK with fake nodes; stop them all on
    Ctrl-C."""
    from kubeflux.controlplane import ControlPlane, ControlPlaneError, find_binaries

    binaries = find_binaries()
    if isinstance(binaries, str):
        typer.echo(f"kubeflux kube up: {binaries}", err=True)
        raise typer.Exit(2)
    where = folder if folder is not None else Path(tempfile.mkdtemp(prefix="kubeflux-kube-"))
    gates = _gates(feature_gates)
    plane = ControlPlane(where, binaries, feature_gates=gates)
    try:
        plane.start()
        if controller_manager:
            plane.start_controller_manager()
        if scheduler:
            plane.start_scheduler()
        plane.start_kwok()
        if kwok_nodes:
            plane.add_kwok_nodes(kwok_nodes, cpu=cpu, memory=memory)
    except ControlPlaneError as exc:
        plane.stop()
        typer.echo(f"kubeflux kube up: {exc}", err=True)
        raise typer.Exit(1) from None
    versions = binaries.versions
    typer.echo(f"Kubernetes {versions.get('kubernetes')} (etcd {versions.get('etcd')}, KWOK {versions.get('kwok')})")
    typer.echo(f"API server: {plane.server}, {kwok_nodes} KWOK node(s); logs in {where / 'logs'}")
    stop = StopSignals()  # before saying so: a script that signals on that line is heard
    typer.echo(f"export KUBECONFIG={plane.kubeconfig}")
    typer.echo("Ctrl-C stops it.")
    try:
        while not stop.wait(0.2):
            down = [name for name, component in plane.components.items() if not component.running]
            if down:
                typer.echo(f"kubeflux kube up: {', '.join(down)} stopped on its own; see {where / 'logs'}", err=True)
                raise typer.Exit(1)
    finally:
        plane.stop()
