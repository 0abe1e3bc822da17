"""``kubeflux cluster serve``: the simulated cluster over the Kubernetes API, for kubectl and unmodified clients.

Nodes come from ``--cluster FILE`` or the ``simulate`` flags (the same reader and builders as ``kubeflux
simulate``). The server listens on 127.0.0.1 (a free port unless ``--port``), writes a kubeconfig and prints its
path, and stops on Ctrl-C or SIGTERM. What it serves, and what not yet, is in docs/apiserver.md.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kubeflux.scheduler.objects import DEFAULT_SCHEDULER
from kubeflux.sim.command import UserQueuesOption, make_out_folder
from kubeflux.sim.workloads.limits import start_delays_problem

SYSTEM_OBJECTS = 100
"""Room left beside the nodes and their leases for the objects a served cluster makes itself (namespaces, their
service accounts, priority classes: 11 at start) and a few of the user's."""

if TYPE_CHECKING:
    from kubeflux.scheduler.interface import Scheduler
    from kubeflux.scheduler.objects import Node
    from kubeflux.sim.apiserver.server import ApiServer
    from kubeflux.sim.inputs import Shape
    from kubeflux.sim.workloads.model import Workload

__all__ = ["cluster_app"]

cluster_app = typer.Typer(help="A simulated Kubernetes cluster served over the Kubernetes API.", no_args_is_help=True)
"""A group of the ``kubeflux`` command (``cli.app`` names it and sets completion and exceptions for all)."""


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
        typer.Option(
            "--token",
            help="Static bearer token clients must send (--token random: generate one); needs --tls, as kubectl "
            "sends no token over plain http.",
        ),
    ] = None,
    feature_gates: Annotated[
        str,
        typer.Option(
            "--feature-gates", help="As kube-apiserver's, e.g. GenericWorkload=true (Kubernetes' own gang API)."
        ),
    ] = "",
    tls: Annotated[
        bool,
        typer.Option("--tls/--no-tls", help="Serve HTTPS with a new self-signed CA (written into the kubeconfig)."),
    ] = False,
    tls_san: Annotated[
        list[str] | None,
        typer.Option("--tls-san", help="Another name or address the certificate names (repeatable; with --tls)."),
    ] = None,
    scheduler: Annotated[
        list[str] | None,
        typer.Option("--scheduler", "-s", help="Run this kubeflux scheduler in the process (repeatable; 'none')."),
    ] = None,
    kubelet: Annotated[
        bool, typer.Option("--kubelet/--no-kubelet", help="Simulated kubelets run bound pods (KWOK stages).")
    ] = True,
    no_controllers: Annotated[
        list[str] | None,
        typer.Option(
            "--no-controllers",
            help="Turn off a built-in controller (repeatable): job, disruption, resourcequota, "
            "persistentvolume-binder, garbagecollector, namespace (run a real kube-controller-manager instead), "
            "podgroup.",
        ),
    ] = None,
    start_delay: Annotated[float, typer.Option("--start-delay", help="Seconds from bind to Running.")] = 0.0,
    start_jitter: Annotated[float, typer.Option("--start-jitter", help="Upper bound of the start delay (KWOK).")] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the start and run time jitter.")] = 0,
    speed: Annotated[
        float, typer.Option("--speed", help="Simulated time runs this many times faster than wall.")
    ] = 1.0,
    clock_mode: Annotated[
        str, typer.Option("--clock", help="wall (with --speed) or virtual: jump to the next event when quiescent.")
    ] = "wall",
    settle: Annotated[
        float, typer.Option("--settle", help="Virtual time: wall seconds without requests before time may jump.")
    ] = 0.05,
    external: Annotated[
        list[str] | None,
        typer.Option(
            "--external-scheduler", help="Virtual time waits only for these external schedulers' pods (repeatable)."
        ),
    ] = None,
    workload: Annotated[
        list[Path] | None,
        typer.Option("--workload", "-w", help="Replay a workload (any `simulate` format) at its submit times."),
    ] = None,
    user_queues: UserQueuesOption = None,
    primary: Annotated[
        str | None,
        typer.Option("--primary", help="schedulerName of replayed pods naming none (default: the first --scheduler)."),
    ] = None,
    until_done: Annotated[
        bool, typer.Option("--until-done", help="Stop once the replayed workload is done (then write the report).")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Report folder of a replay (default: beside the kubeconfig).")
    ] = None,
    memory_budget: Annotated[
        str,
        typer.Option(
            "--memory-budget", help="Refuse nodes (and a workload) expected to need more memory than this (quantity)."
        ),
    ] = "8Gi",
    max_objects: Annotated[
        int | None,
        typer.Option(
            "--max-objects",
            help="Objects the store holds at most (as etcd's --quota-backend-bytes; default 250,000): creates beyond "
            "are refused with etcd's 'database space exceeded'; Events have as many of their own, the oldest expiring "
            "first.",
        ),
    ] = None,
) -> None:
    """Serve a simulated cluster over the Kubernetes REST API until Ctrl-C or SIGTERM."""
    from kubeflux.sim.apiserver.app import ServerSettings
    from kubeflux.sim.apiserver.resources import default_registry
    from kubeflux.sim.apiserver.server import ApiServer
    from kubeflux.sim.apiserver.store import Store
    from kubeflux.sim.baselines import available
    from kubeflux.sim.inputs import Shape, memory_budget_bytes
    from kubeflux.sim.pods import Lifecycle

    if address not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: listening on {address}, beyond loopback", err=True)
    if not 0 <= port <= 65535:
        raise typer.BadParameter(f"--port must be in 0..65535, got {port}")
    if (problem := start_delays_problem(start_delay, start_jitter)) is not None:
        raise typer.BadParameter(problem)
    from kubeflux.sim.apiserver.store import DEFAULT_MAX_OBJECTS

    max_objects = DEFAULT_MAX_OBJECTS if max_objects is None else max_objects
    if max_objects < 1:
        raise typer.BadParameter(f"--max-objects must be positive, got {max_objects}")
    names = [n for n in (scheduler or []) if n != "none"]
    unknown = [n for n in names if n not in available()]
    if unknown:
        raise typer.BadParameter(f"unknown scheduler(s) {', '.join(unknown)}; known: none, {', '.join(available())}")
    budget = memory_budget_bytes(memory_budget)
    shape = Shape(nodes, cores_per_node, memory_per_node, gpus_per_node)
    node_list = _served_nodes(cluster, shape, len(names), max_objects, budget)
    from kubeflux.sim.apiserver.clock import Clock, VirtualClock
    from kubeflux.wallclock import WallClock

    if clock_mode not in ("wall", "virtual"):
        raise typer.BadParameter(f"--clock must be wall or virtual, got {clock_mode!r}")
    if clock_mode == "virtual" and speed != 1.0:
        raise typer.BadParameter("--speed is for the wall clock; virtual time jumps from event to event")
    if not 0 <= settle <= 60:
        raise typer.BadParameter(f"--settle must be from 0 to 60 seconds, got {settle}")
    if until_done and not workload:
        raise typer.BadParameter("--until-done needs a --workload to replay")
    if workload and not kubelet:
        raise typer.BadParameter("--workload runs its pods in the simulated kubelets: --no-kubelet cannot go with it")
    if workload and out is not None:  # the report of a replay
        make_out_folder(out, "report folder")  # refused before the server starts, not after the replay
    try:
        lifecycle = Lifecycle(start_delay, start_jitter, seed=seed)
        clock: Clock = VirtualClock() if clock_mode == "virtual" else WallClock(speed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    from kubeflux.sim.apiserver.server import CONTROLLERS

    disabled = [name.strip() for item in no_controllers or () for name in item.split(",") if name.strip()]
    unknown_controllers = sorted(set(disabled) - set(CONTROLLERS))
    if unknown_controllers:
        known = ", ".join(CONTROLLERS)
        raise typer.BadParameter(
            f"--no-controllers: unknown controller(s) {', '.join(unknown_controllers)}; known: {known}"
        )
    if user_queues is not None and not workload:
        raise typer.BadParameter("--user-queues puts a --workload's trace jobs in LocalQueues: give a --workload")
    replayed, cores, under_test = _replay_plan(workload, node_list, names, primary, budget, user_queues)
    from kubeflux.sim.workloads.model import JobKind

    needed = sorted({"job", "garbagecollector"} & set(disabled))
    if needed and replayed is not None and any(j.kind is JobKind.JOB for j in replayed.jobs):
        raise typer.BadParameter(
            f"--no-controllers {needed[0]}: the --workload has Jobs, which the replay runs with the built-in Job "
            "controller and garbage collector"
        )
    gates = _feature_gates(feature_gates)
    if token and not tls:
        raise typer.BadParameter(
            "--token needs --tls: kubectl (client-go) sends no bearer token over plain http, so every kubectl "
            "request would be 401 Unauthorized, and a real kube-apiserver serves only HTTPS; give --tls too",
            param_hint="--token",
        )
    secret = secrets.token_urlsafe(24) if token == "random" else (token or "")
    path = kubeconfig or Path(tempfile.mkdtemp(prefix="kubeflux-cluster-")) / "kubeconfig"
    if path.is_dir() or any(parent.exists() and not parent.is_dir() for parent in path.parents):
        typer.echo(
            f"error: --kubeconfig {path}: cannot be a file (a folder is in its place or a file on its path)", err=True
        )
        raise typer.Exit(2)
    certificates = None
    if tls:
        from kubeflux.sim.apiserver.tls import make_certificates

        certificates = make_certificates(path.parent / "pki", address, tls_san or ())
    elif tls_san:
        raise typer.BadParameter("--tls-san names what the certificate of --tls holds: give --tls too")
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
        disabled_controllers=disabled,
        settle=settle,
        external_schedulers=external or (),
        workload=replayed,
        primary=under_test,
        until_done=until_done,
        tls=certificates,
        store=Store(default_registry(generic_workload=gates["GenericWorkload"]), clock=clock, max_objects=max_objects),
    )
    try:
        server.bind()
    except OSError as exc:
        typer.echo(f"error: cannot listen on {address}:{port}: {exc}", err=True)
        raise typer.Exit(2) from exc
    server.write_kubeconfig(path)
    pace = "" if speed == 1.0 else f", simulated time x{speed:g} (GET /kubeflux/time)"
    if clock_mode == "virtual":
        pace = ", virtual time (GET /kubeflux/time, header X-Kubeflux-Time)"
    typer.echo(f"kubeflux cluster: {len(node_list)} nodes at {server.url}{pace}")
    for core in cores:
        typer.echo(f"scheduler: {core.name} (in process; pods with schedulerName: {core.name})")
    if certificates is not None:
        typer.echo(f"TLS: certificates in {certificates.ca.parent} (the CA is in the kubeconfig)")
    if disabled:
        typer.echo(f"controllers turned off: {', '.join(sorted(set(disabled)))}")
    typer.echo(f"kubeconfig: {path}")
    typer.echo(f"  export KUBECONFIG={path}")
    if replayed is not None:
        typer.echo(f"workload: {replayed.name}, {len(replayed.jobs)} jobs (pods naming no scheduler: {under_test})")
        _tell_notes(replayed)
    server.serve_forever()
    typer.echo("kubeflux cluster: stopped")
    if replayed is not None:
        _write_report(server, names[0] if names else under_test, out or path.parent / "report")


def _served_nodes(cluster: Path | None, shape: Shape, schedulers: int, max_objects: int, budget: int) -> list[Node]:
    """The nodes to serve, held with the store's bound to the memory budget: ``--nodes`` x ``--cores-per-node``
    before they are built, a ``--cluster`` file's once read, with a graph for each in-process scheduler
    (:func:`~kubeflux.sim.workloads.limits.serve_bytes`); exit code 2 with the message when refused."""
    from kubeflux.sim.inputs import check_uniform, nodes_from_options
    from kubeflux.sim.workloads import WorkloadError
    from kubeflux.sim.workloads.limits import budget_problem, serve_bytes
    from kubeflux.sim.workloads.mapping import whole_cores

    nodes, cores = shape.nodes, shape.cores
    graphs = f"{schedulers} in-process scheduler(s) and " if schedulers else ""
    served = f"with {graphs}--max-objects {max_objects:,}"
    try:
        if cluster is None and nodes is not None and cores is not None and nodes > 0 and cores > 0:
            estimate = serve_bytes(nodes, nodes * cores, schedulers, max_objects)
            check_uniform(
                f"--nodes {nodes:,} x --cores-per-node {cores:,} {served}", cores, shape.gpus, estimate, budget
            )
        node_list = nodes_from_options(cluster, nodes, cores, shape.memory, shape.gpus)
        if cluster is not None:
            total = sum(whole_cores(node) for node in node_list)
            estimate = serve_bytes(len(node_list), total, schedulers, max_objects)
            problem = budget_problem(f"{cluster}: {len(node_list):,} nodes {served}", estimate, budget)
            if problem is not None:
                raise ValueError(problem)
        if 2 * len(node_list) + SYSTEM_OBJECTS > max_objects:
            raise ValueError(
                f"--max-objects {max_objects:,} leaves no room: {len(node_list):,} nodes take {2 * len(node_list):,} "
                f"objects with their leases, and the cluster's own about {SYSTEM_OBJECTS}"
            )
    except (WorkloadError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    return node_list


def _feature_gates(text: str) -> dict[str, bool]:
    """``--feature-gates``: ``Name=true|false`` pairs, comma-separated, of the gates the served cluster knows."""
    from kubeflux.sim.apiserver.resources import FEATURE_GATES

    gates = dict.fromkeys(FEATURE_GATES, False)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in gates or value.lower() not in ("true", "false"):
            known = ", ".join(FEATURE_GATES)
            raise typer.BadParameter(f"--feature-gates: {item!r}: expected Name=true|false with Name one of {known}")
        gates[name] = value.lower() == "true"
    return gates


def _replay_plan(
    workload: list[Path] | None,
    nodes: list[Node],
    names: list[str],
    primary: str | None,
    budget: int,
    user_queues: str | None = None,
) -> tuple[Workload | None, list[Scheduler], str]:
    """The workload fitted to the nodes (as ``simulate`` reads and fits it, held to the memory ``budget`` as
    ``simulate`` holds one run; with ``user_queues``, its trace jobs in their users' LocalQueues, as ``simulate
    --user-queues`` puts them), the in-process schedulers (with a workload, as ``simulate`` runs them: the first
    ``--scheduler``, plus one for each other ``schedulerName`` its pods name that kubeflux has), and the name of
    the scheduler under test."""
    from kubeflux.sim.baselines import create
    from kubeflux.sim.command import merge_workloads, schedulers_for
    from kubeflux.sim.inputs import check_budget, load_files
    from kubeflux.sim.workloads import WorkloadError
    from kubeflux.sim.workloads.limits import ReadBudget
    from kubeflux.sim.workloads.mapping import map_to_cluster

    if not workload:
        cores = [create(n) for n in names]
        return None, cores, primary or (cores[0].name if cores else DEFAULT_SCHEDULER)
    from kubeflux.sim.workloads.tenants import parse_queues, queues_by_user

    try:
        loaded = merge_workloads(load_files(workload, None, ReadBudget(budget)))
        if user_queues is not None:
            loaded = queues_by_user(loaded, parse_queues(user_queues))
        check_budget(loaded, nodes, names[:1] or [DEFAULT_SCHEDULER], budget)  # the replay is one run
        mapped = map_to_cluster(loaded, nodes)
    except (WorkloadError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if not names:
        return mapped, [], primary or DEFAULT_SCHEDULER
    schedulers, first = schedulers_for(names[0], mapped)
    for name in names[1:]:
        extra = create(name)
        schedulers.setdefault(extra.name, extra)
    return mapped, list(schedulers.values()), primary or first


def _tell_notes(workload: Workload) -> None:
    """The notes ``simulate`` gives on the workload (pods without a run time, Jobs of ``parallelism: 0``): the
    served kubelet and Job controller run them as the simulator does."""
    from rich.console import Console

    from kubeflux.sim.command import REPORT_WIDTH
    from kubeflux.sim.inputs import tell_endless_pods

    tell_endless_pods(workload, Console(width=None if sys.stdout.isatty() else REPORT_WIDTH))


def _write_report(server: ApiServer, label: str, out: Path) -> None:
    """The report ``kubeflux simulate`` writes, from the replay's records, and its end as ``simulate`` tells it:
    warnings for jobs never finished, and exit code 3 when no job finished or none succeeded
    (:data:`~kubeflux.sim.command.NOTHING_RAN`)."""
    import time

    from rich.console import Console

    from kubeflux.sim.command import REPORT_WIDTH, tell_failures, write_outputs

    assert server.replay is not None
    run = server.replay.run_record(label, time.perf_counter() - server.started_at)
    out.mkdir(parents=True, exist_ok=True)
    if run.problems:
        (out / "problems.txt").write_text("\n".join(f"[{label}] {p}" for p in run.problems) + "\n", encoding="utf-8")
    console = Console(width=None if sys.stdout.isatty() else REPORT_WIDTH)
    done = sum(1 for job in run.jobs if job.finish_time is not None)
    console.print(f"{label}: {len(run.jobs)} jobs ({done} finished), {run.pods_bound} pods bound through the API")
    write_outputs([run], out, console)
    typer.echo(f"report: {out}")
    tell_failures([run], console)
