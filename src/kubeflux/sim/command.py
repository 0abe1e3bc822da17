"""``kubeflux simulate``: run workloads on a simulated cluster under one or more schedulers and compare them.

For each ``--scheduler`` the whole workload runs once, in virtual time, from the same cluster and seed. Output in
``--out``: ``<scheduler>/jobs.csv`` (Batsim's columns), ``summary.csv``/``summary.json`` (one row per scheduler),
plots and ``index.html``, and ``problems.txt`` when input lines were skipped or decisions refused. Several
``--workload`` files are merged into one run, each shifted so its first submission is at time 0.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import Node
from kubeflux.sim.cluster import Lifecycle
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob

DEFAULT_SCHEDULER_NAME = "default-scheduler"


def merge_workloads(workloads: list[Workload]) -> Workload:
    """One workload from several: each shifted to start at 0, job ids prefixed by the workload name.

    Trace jobs (SWF, Batsim) are named ``job-<number>`` in every trace, so their names (hence their pods' names)
    are prefixed too, with the workload's position and name as a DNS label (``w2-kth-sp2-1996-2.1-cln-job-15``);
    otherwise the second trace's jobs would collide with the first's and be refused as existing pods. Kubernetes
    objects keep the names their manifests give.
    """
    if len(workloads) == 1:
        return workloads[0]
    jobs: list[WorkloadJob] = []
    problems: list[str] = []
    for number, wl in enumerate(workloads, start=1):
        first = min((j.submit_time for j in wl.jobs), default=0.0)
        prefix = f"w{number}-{_dns_label(wl.name)}-"
        jobs.extend(
            replace(
                j,
                id=f"{wl.name}:{j.id}",
                name=prefix + j.name if j.kind is JobKind.TRACE else j.name,
                submit_time=j.submit_time - first,
            )
            for j in wl.jobs
        )
        problems.extend(wl.problems)
    return Workload(name="+".join(wl.name for wl in workloads), jobs=jobs, problems=problems)


def _dns_label(text: str) -> str:
    """``HPC2N-2002-2.2.first3170`` → ``hpc2n-2002-2.2.first3170``: lowercase, other characters become ``-``."""
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")[:40] or "workload"


def _nodes(cluster: Path | None, nodes: int | None, cores: int | None, memory: str, gpus: int) -> list[Node]:
    from kubeflux.sim.workloads.cluster_file import read_cluster, uniform_cluster

    if cluster is not None:
        if nodes is not None or cores is not None:
            raise typer.BadParameter("give either --cluster or --nodes/--cores-per-node, not both")
        return read_cluster(cluster)
    if nodes is None or cores is None:
        raise typer.BadParameter("give --cluster FILE, or --nodes N and --cores-per-node C")
    if nodes <= 0 or cores <= 0:
        raise typer.BadParameter("--nodes and --cores-per-node must be positive")
    return uniform_cluster(nodes, cores, memory, gpus)


def _schedulers_for(name: str, workload: Workload) -> tuple[dict[str, Scheduler], str]:
    """The scheduler under test, plus one scheduler per other ``schedulerName`` the workload's pods name."""
    from kubeflux.sim.baselines import available, create

    primary = create(name)
    schedulers: dict[str, Scheduler] = {primary.name: primary}
    wanted = {t.scheduler_name for j in workload.jobs for t in j.pods if t.scheduler_name}
    known = available()
    for other in sorted(wanted - {primary.name}):
        registry_name = "kube-default" if other == DEFAULT_SCHEDULER_NAME else other
        if registry_name in known:
            extra = create(registry_name)
            if extra.name == other:
                schedulers[other] = extra
    return schedulers, primary.name


def _write_outputs(runs: list[RunRecord], out: Path, console: Console) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    try:
        from kubeflux.sim import metrics
    except ImportError:
        console.print("[yellow]kubeflux.sim.metrics is missing: jobs.csv and summary.csv not written[/]")
        return rows
    for run in runs:
        metrics.write_jobs_csv(run, out / run.scheduler / "jobs.csv")
        metrics.write_pods_csv(run, out / run.scheduler / "pods.csv")
        rows.append(metrics.summarize(run))
    metrics.write_summary_csv(rows, out / "summary.csv")
    metrics.write_summary_json(rows, out / "summary.json")
    try:
        from kubeflux.sim import report
    except ImportError:
        console.print("[yellow]kubeflux.sim.report is missing: no plots[/]")
        return rows
    report.write_report(runs, out)
    console.print(report.summary_table(rows))
    return rows


def _list_schedulers(console: Console) -> None:
    from kubeflux.sim.baselines import available

    table = Table(title="Schedulers")
    table.add_column("name")
    table.add_column("description")
    for info in available().values():
        table.add_row(info.name, info.description)
    console.print(table)


REPORT_WIDTH = 160


def simulate_command(
    workload: Annotated[
        list[Path] | None,
        typer.Option("--workload", "-w", help="SWF, .swf.gz, Batsim JSON or Kubernetes YAML; repeatable."),
    ] = None,
    scheduler: Annotated[
        list[str] | None, typer.Option("--scheduler", "-s", help="A registered scheduler; repeatable.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder.")] = None,
    cluster: Annotated[Path | None, typer.Option("--cluster", help="Kubernetes Node manifests (YAML).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="Number of identical nodes.")] = None,
    cores_per_node: Annotated[int | None, typer.Option("--cores-per-node", help="Cores per node.")] = None,
    memory_per_node: Annotated[str, typer.Option("--memory-per-node", help="Memory per node (quantity).")] = "256Gi",
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="nvidia.com/gpu per node.")] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of start jitter and injected failures.")] = 0,
    start_delay: Annotated[float, typer.Option("--start-delay", help="Seconds from bind to Running.")] = 0.0,
    start_jitter: Annotated[float, typer.Option("--start-jitter", help="Upper bound of the start delay (KWOK).")] = 0.0,
    fail_fraction: Annotated[float, typer.Option("--fail-fraction", help="Fraction of pods that crash.")] = 0.0,
    list_schedulers: Annotated[bool, typer.Option("--list-schedulers", help="Print the schedulers and exit.")] = False,
) -> None:
    """Simulate workloads on a virtual-time Kubernetes cluster under each scheduler and compare them."""
    # Printed to a pipe or a file (make demo, CI logs), the comparison keeps its full width instead of 80 columns.
    console = Console(width=None if sys.stdout.isatty() else REPORT_WIDTH)
    if list_schedulers:
        _list_schedulers(console)
        return
    if not workload or not scheduler or out is None:
        raise typer.BadParameter("--workload, --scheduler and --out are required (or --list-schedulers)")
    from kubeflux.sim.baselines import available
    from kubeflux.sim.workloads import WorkloadError, load_workload
    from kubeflux.sim.workloads.mapping import map_to_cluster

    unknown = [s for s in scheduler if s not in available()]
    if unknown:
        raise typer.BadParameter(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(available())}")
    try:
        node_list = _nodes(cluster, nodes, cores_per_node, memory_per_node, gpus_per_node)
        lifecycle = Lifecycle(start_delay, start_jitter, fail_fraction, seed=seed)
        loaded = merge_workloads([load_workload(path) for path in workload])
    except (WorkloadError, ValueError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from exc
    mapped = map_to_cluster(loaded, node_list)
    if mapped.problems:
        console.print(f"[yellow]{len(mapped.problems)} workload problem(s); see problems.txt[/]")
    out.mkdir(parents=True, exist_ok=True)
    runs: list[RunRecord] = []
    for name in scheduler:
        schedulers, primary = _schedulers_for(name, mapped)
        run = _run_with_progress(mapped, node_list, schedulers, primary, name, lifecycle, console)
        runs.append(run)
        console.print(f"{name}: {len(run.jobs)} jobs, {run.pods_bound} pods bound in {run.wall_seconds:.2f} s")
    problems = [f"[{run.scheduler}] {p}" for run in runs for p in run.problems]
    if problems:
        (out / "problems.txt").write_text("\n".join(problems) + "\n", encoding="utf-8")
    _write_outputs(runs, out, console)


def _run_with_progress(
    workload: Workload,
    nodes: list[Node],
    schedulers: dict[str, Scheduler],
    primary: str,
    label: str,
    lifecycle: Lifecycle,
    console: Console,
) -> RunRecord:
    """Run one simulation; a progress bar appears once it has taken more than a second."""
    began = time.perf_counter()
    total = len(workload.jobs)
    state: dict[str, Any] = {"progress": None, "task": None}

    def progress(now: float, submitted: int) -> None:
        bar = state["progress"]
        if bar is None:
            if time.perf_counter() - began < 1.0:
                return
            bar = Progress(
                TextColumn(f"{label}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} jobs submitted"),
                TextColumn("t={task.fields[now]:.0f}s"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            bar.start()
            state["progress"], state["task"] = bar, bar.add_task(label, total=total, now=now)
        bar.update(state["task"], completed=submitted, now=now)

    try:
        options = SimulationOptions(lifecycle=lifecycle)
        return simulate(workload, nodes, schedulers, primary=primary, label=label, options=options, progress=progress)
    finally:
        if state["progress"] is not None:
            state["progress"].stop()


__all__ = ["merge_workloads", "simulate_command"]
