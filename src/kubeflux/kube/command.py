"""``kubeflux serve``: run kubeflux as a second scheduler of a Kubernetes cluster (or of ``kubeflux cluster serve``).

The connection is a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG`` or ``~/.kube/config``) or the pod's service
account (``--in-cluster``); what to schedule and how is the ``--config`` file (:mod:`kubeflux.kube.config`).
Ctrl-C or SIGTERM stops watching and scheduling, finishes the writes already decided, and exits 0.
"""

from __future__ import annotations

import gc
import logging
import os
import stat
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kubeflux.stopsignals import StopSignals

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

__all__ = ["api_client", "kubeconfig_problem", "serve_command"]


def api_client(kubeconfig: Path | None, context: str | None, in_cluster: bool, connections: int) -> ApiClient:
    """The official client's ``ApiClient`` for the cluster, with room for ``connections`` concurrent requests
    (each watch holds one for its whole life)."""
    from kubernetes import client, config

    from kubeflux import __version__

    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None, context=context, client_configuration=configuration
        )
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, connections)
    api = client.ApiClient(configuration)
    api.user_agent = f"kubeflux/{__version__}"  # as kube-scheduler names itself: its requests stand out in audit logs
    return api


def kubeconfig_problem(kubeconfig: Path) -> str:
    """Why ``--kubeconfig`` is no file the client can read, or empty: missing, a directory, or no regular file (a
    named pipe would hang the client's read until something writes to it; a socket or a device is no kubeconfig)."""
    try:
        mode = kubeconfig.stat().st_mode
    except FileNotFoundError:
        return f"--kubeconfig {kubeconfig}: no such file"
    except OSError as exc:
        return f"--kubeconfig {kubeconfig}: cannot read: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"--kubeconfig {kubeconfig}: is a directory, not a kubeconfig file"
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        return f"--kubeconfig {kubeconfig}: is {kind}, not a regular file; save the kubeconfig to a file first"
    if not os.access(kubeconfig, os.R_OK):
        return f"--kubeconfig {kubeconfig}: cannot read: permission denied"
    return ""


def _missing_kubeconfig(kubeconfig: Path | None, in_cluster: bool) -> str:
    """Why the kubeconfig cannot be read (the client would say "Invalid kube-config file"), or empty: ``--kubeconfig``,
    else each file ``$KUBECONFIG`` lists (the client skips the missing ones when another exists)."""
    if in_cluster:
        return ""
    if kubeconfig is not None:
        return kubeconfig_problem(kubeconfig)
    listed = [Path(p) for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed and not any(path.is_file() for path in listed):
        return f"$KUBECONFIG ({os.environ['KUBECONFIG']}): no such file"
    if not listed and not (Path.home() / ".kube" / "config").is_file():
        return "~/.kube/config: no such file; give --kubeconfig FILE, set $KUBECONFIG, or use --in-cluster"
    return ""


def serve_command(
    config_file: Annotated[
        Path | None, typer.Option("--config", help="The serve configuration (YAML; default: every default).")
    ] = None,
    kubeconfig: Annotated[
        Path | None, typer.Option("--kubeconfig", help="Kubeconfig of the cluster (default: $KUBECONFIG, ~/.kube).")
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="The kubeconfig context to use.")] = None,
    in_cluster: Annotated[
        bool, typer.Option("--in-cluster", help="Use the pod's service account (running inside the cluster).")
    ] = False,
    operations_port: Annotated[
        int | None,
        typer.Option(
            "--operations-port",
            min=0,
            max=65535,
            help="Port of /metrics, /readyz and /kubeflux/queue (default: the config's operations.port, 10260; "
            "0: a free one).",
        ),
    ] = None,
    verbose: Annotated[
        int, typer.Option("--verbose", "-v", count=True, help="-v: every bind and refusal; -vv: the core's log.")
    ] = 0,
) -> None:
    """Schedule the pods that name kubeflux's scheduler(s) on a Kubernetes cluster, until Ctrl-C or SIGTERM."""
    # No cyclic collection while serve starts (its imports alone made ~160, ~50 ms): the scheduling loop turns it
    # on once the graph is built, its objects frozen out of the scans (Serve.run)
    gc.disable()
    from kubeflux.kube.config import ConfigError, load_config
    from kubeflux.kube.replica import Replica

    if in_cluster and kubeconfig is not None:
        raise typer.BadParameter("--in-cluster and --kubeconfig exclude each other")
    try:
        settings = load_config(config_file)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if operations_port is not None:
        operations = settings.operations.model_copy(update={"port": operations_port})
        settings = settings.model_copy(update={"operations": operations})
    missing = _missing_kubeconfig(kubeconfig, in_cluster)
    if missing:
        typer.echo(f"error: {missing}", err=True)
        raise typer.Exit(2)
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s: %(message)s")
    logging.getLogger("kubeflux.serve").setLevel(level)
    if verbose < 2:  # urllib3 says each of its retries; the informers say a failure once, then every 30 s
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    try:
        api = api_client(kubeconfig, context, in_cluster, settings.binding.workers + 8)
    except Exception as exc:  # the kubernetes client's config errors have no common base
        typer.echo(f"error: cannot configure the Kubernetes client: {exc}", err=True)
        raise typer.Exit(2) from exc
    try:
        # the process is serve's own; its binder's process builds its client as this one was
        connect = partial(api_client, kubeconfig, context, in_cluster, settings.binding.workers + 2)
        replica = Replica(settings, api, tune_gc=True, connect=connect)
    except (RuntimeError, OSError) as exc:  # no published clock when asked for; the operations port is taken
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    serve = replica.serve
    names = ", ".join(core.name for core in serve.cores)
    typer.echo(f"kubeflux serve: scheduling pods with schedulerName {names} at {api.configuration.host}")
    if replica.operations is not None:
        ops = replica.operations
        typer.echo(
            f"kubeflux serve: /metrics /healthz /readyz /livez at http://{settings.operations.address}:{ops.port}"
        )
    if replica.elector is not None:
        election = settings.leader_election
        typer.echo(f"kubeflux serve: waiting for the lease {election.namespace}/{election.name} to lead")
    stop = StopSignals()
    replica.start()
    said_synced = False
    while not stop.wait(0.1) and not replica.ended.is_set() and serve.alive:
        if not said_synced and serve.synced.is_set():
            typer.echo(f"kubeflux serve: caches synced ({len(serve.pods)} pods); scheduling")
            said_synced = True
    if not serve.alive:
        typer.echo(f"kubeflux serve: scheduling stopped: {serve.binder.failed or 'the loop ended'}", err=True)
        replica.stop()
        raise typer.Exit(1)
    if replica.lost:
        typer.echo("kubeflux serve: lost the lease; exiting so that a fresh replica recovers", err=True)
        replica.stop(release=False)
        raise typer.Exit(1)
    typer.echo("kubeflux serve: stopping (finishing the writes already decided)")
    replica.stop()
    typer.echo(f"kubeflux serve: stopped after {serve.bound} binds")
