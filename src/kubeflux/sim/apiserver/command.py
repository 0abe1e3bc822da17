"""``kubeflux cluster serve``: the simulated cluster over the Kubernetes API, for kubectl and unmodified clients.

Nodes come from ``--cluster FILE`` or the ``simulate`` flags (the same reader and builders as ``kubeflux
simulate``). The server listens on 127.0.0.1 (a free port unless ``--port``), writes a kubeconfig and prints its
path, and stops on Ctrl-C or SIGTERM. What it serves, and what not yet, is in docs/apiserver.md.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["cluster_app"]

cluster_app = typer.Typer(
    name="cluster",
    help="A simulated Kubernetes cluster served over the Kubernetes API.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@cluster_app.command("serve")
def serve_command(
    cluster: Annotated[Path | None, typer.Option("--cluster", help="Kubernetes Node manifests (YAML).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="Number of identical nodes.")] = None,
    cores_per_node: Annotated[int | None, typer.Option("--cores-per-node", help="Cores per node.")] = None,
    memory_per_node: Annotated[str, typer.Option("--memory-per-node", help="Memory per node (quantity).")] = "256Gi",
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="nvidia.com/gpu per node.")] = 0,
    address: Annotated[str, typer.Option("--address", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: a free one).")] = 0,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Where to write the kubeconfig (default: a new temp dir).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", help="Static bearer token clients must send (--token random: generate one)."),
    ] = None,
    scheduler: Annotated[
        list[str] | None,
        typer.Option("--scheduler", "-s", help="Run this kubeflux scheduler in the process (repeatable; 'none')."),
    ] = None,
    kubelet: Annotated[
        bool, typer.Option("--kubelet/--no-kubelet", help="Simulated kubelets run bound pods (KWOK stages).")
    ] = True,
    start_delay: Annotated[float, typer.Option("--start-delay", help="Seconds from bind to Running.")] = 0.0,
    start_jitter: Annotated[float, typer.Option("--start-jitter", help="Upper bound of the start delay (KWOK).")] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the start and run time jitter.")] = 0,
    speed: Annotated[
        float, typer.Option("--speed", help="Simulated time runs this many times faster than wall.")
    ] = 1.0,
) -> None:
    """Serve a simulated cluster over the Kubernetes REST API until Ctrl-C or SIGTERM."""
    from kubeflux.sim.apiserver.app import ServerSettings
    from kubeflux.sim.apiserver.server import ApiServer
    from kubeflux.sim.command import _nodes
    from kubeflux.sim.workloads import WorkloadError

    if address not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: listening on {address}, beyond loopback", err=True)
    if not 0 <= port <= 65535:
        raise typer.BadParameter(f"--port must be in 0..65535, got {port}")
    try:
        node_list = _nodes(cluster, nodes, cores_per_node, memory_per_node, gpus_per_node)
    except (WorkloadError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    from kubeflux.sim.baselines import available, create
    from kubeflux.sim.pods import Lifecycle

    names = [n for n in (scheduler or []) if n != "none"]
    unknown = [n for n in names if n not in available()]
    if unknown:
        raise typer.BadParameter(f"unknown scheduler(s) {', '.join(unknown)}; known: none, {', '.join(available())}")
    from kubeflux.sim.apiserver.clock import ServedClock

    try:
        lifecycle = Lifecycle(start_delay, start_jitter, seed=seed)
        clock = ServedClock(speed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    cores = [create(n) for n in names]
    secret = secrets.token_urlsafe(24) if token == "random" else (token or "")
    server = ApiServer(
        node_list,
        host=address,
        port=port,
        settings=ServerSettings(token=secret),
        kubelet=kubelet,
        lifecycle=lifecycle,
        schedulers=cores,
        clock=clock,
        controllers=True,
    )
    try:
        server.bind()
    except OSError as exc:
        typer.echo(f"error: cannot listen on {address}:{port}: {exc}", err=True)
        raise typer.Exit(2) from exc
    path = kubeconfig or Path(tempfile.mkdtemp(prefix="kubeflux-cluster-")) / "kubeconfig"
    server.write_kubeconfig(path)
    pace = "" if speed == 1.0 else f", simulated time x{speed:g} (GET /kubeflux/time)"
    typer.echo(f"kubeflux cluster: {len(node_list)} nodes at {server.url}{pace}")
    for core in cores:
        typer.echo(f"scheduler: {core.name} (in process; pods with schedulerName: {core.name})")
    typer.echo(f"kubeconfig: {path}")
    typer.echo(f"  export KUBECONFIG={path}")
    server.serve_forever()
    typer.echo("kubeflux cluster: stopped")
