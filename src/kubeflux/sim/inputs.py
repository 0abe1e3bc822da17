"""What ``kubeflux simulate`` makes of its inputs before a run: the schedulers (``all`` by default), the cluster
(the file, ``--nodes`` x ``--cores-per-node``, a preset's, or the platform a trace's header states), the memory
budget, and what it tells of the input (skipped lines, ``--strict``, pods without a run time).

Each refusal raises ``typer.BadParameter`` (a bad option) or ValueError (input beyond a bound), which the command
turns into exit code 2 with the message."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from kubeflux.scheduler.objects import Node
from kubeflux.sim.workloads.limits import PROCESS_BYTES, ReadBudget
from kubeflux.sim.workloads.model import JobKind, Workload
from kubeflux.sim.workloads.platform import HeaderPlatform

ALL_SCHEDULERS = "all"
"""``--scheduler all`` (the default): every built-in scheduler, kubeflux first (not the variants that differ only on
some workloads, such as ``kubeflux-no-preemption``: named, they run)."""


def scheduler_names(names: list[str] | None) -> list[str]:
    """The schedulers to run, in order: as named, ``all`` standing for every built-in one not named on its own
    (kubeflux first, so that the verdict lines say what it gains over each); ``all`` when none is named."""
    from kubeflux.sim.baselines import available

    registry = available()
    known = list(registry)
    given = names or [ALL_SCHEDULERS]
    unknown = [name for name in given if name not in known and name != ALL_SCHEDULERS]
    if unknown:
        raise typer.BadParameter(
            f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(known)}, or {ALL_SCHEDULERS}"
        )
    everyone = sorted((name for name in known if registry[name].in_all), key=lambda name: name != "kubeflux")
    result: list[str] = []
    for name in given:
        if name == ALL_SCHEDULERS:
            result.extend(other for other in everyone if other not in given and other not in result)
        else:
            result.append(name)
    return result


@dataclass(frozen=True, slots=True)
class Shape:
    """``--nodes``, ``--cores-per-node``, ``--memory-per-node``, ``--gpus-per-node`` as given."""

    nodes: int | None
    cores: int | None
    memory: str
    gpus: int


MAX_MEMORY_BUDGET = 2**63 - 1
"""The largest ``--memory-budget``: a Kubernetes quantity's int64 range."""


def memory_budget_bytes(text: str) -> int:
    from kubeflux.apiobjects.quantity import QuantityError, bytes_

    try:
        budget = bytes_(text)
    except QuantityError as exc:
        raise typer.BadParameter(f"--memory-budget: {exc}") from exc
    if budget <= 0:
        raise typer.BadParameter(f"--memory-budget must be positive, got {text!r}")
    if budget > MAX_MEMORY_BUDGET:  # 1e400 would turn the budget off without a word
        raise typer.BadParameter(f"--memory-budget must be at most 8Ei (2^63 - 1 bytes), got {text[:40]!r}")
    if budget < PROCESS_BYTES:  # else refused later as "more than 0 jobs need more than the budget of 0 MiB"
        raise typer.BadParameter(
            f"--memory-budget must be at least {PROCESS_BYTES >> 20}Mi, what the command needs before any input, "
            f"got {text[:40]!r}"
        )
    return budget


def load_files(files: list[Path], default_run_time: float | None, budget: ReadBudget | None) -> list[Workload]:
    """Each workload file, read as far as ``budget`` allows: the files share it, each reader stopping at the first
    job beyond what the jobs of the files before it left (WorkloadError naming the file, the line and the count)."""
    from kubeflux.sim.workloads import load_workload

    workloads: list[Workload] = []
    for path in files:
        workloads.append(load_workload(path, default_run_time=default_run_time, budget=budget))
        if budget is not None:
            budget = budget.after(len(workloads[-1].jobs))
    return workloads


def nodes_from_options(
    cluster: Path | None, nodes: int | None, cores: int | None, memory: str, gpus: int, racks: int = 0
) -> list[Node]:
    from kubeflux.sim.workloads.cluster_file import read_cluster, uniform_cluster

    if cluster is not None:
        if nodes is not None or cores is not None:
            raise typer.BadParameter("give either --cluster or --nodes/--cores-per-node, not both")
        return read_cluster(cluster)
    if nodes is None or cores is None:
        raise typer.BadParameter("give --cluster FILE, or --nodes N and --cores-per-node C")
    if nodes <= 0 or cores <= 0:
        raise typer.BadParameter("--nodes and --cores-per-node must be positive")
    return uniform_cluster(nodes, cores, memory, gpus, racks=racks)


def choose_cluster(
    parts: list[Workload],
    files: list[Path],
    preset: str | None,
    cluster: Path | None,
    shape: Shape,
    budget: int,
    console: Console,
) -> list[Node]:
    """The nodes to run on: the cluster file, ``--nodes`` x ``--cores-per-node``, the preset's own cluster, or
    the platform the traces' headers state (said on the first line of the output; headers that disagree are
    refused). A uniform cluster is
    bounded before it is built: at most :data:`NODE_VERTICES_LIMIT` cores or GPUs per node, and the memory
    budget."""
    from kubeflux.sim.workloads.limits import cluster_bytes
    from kubeflux.sim.workloads.synthetic import preset_cluster

    nodes, cores, what = shape.nodes, shape.cores, f"--nodes {shape.nodes} x --cores-per-node {shape.cores}"
    if cluster is None and nodes is None and cores is None:
        if preset is not None:
            return preset_cluster(preset)
        platform = _one_platform(parts, files)
        nodes, cores, what = platform.nodes, platform.cores_per_node, f"the platform of {platform.source}"
        words = f"{nodes:,} node{'s' if nodes != 1 else ''} × {cores:,} core{'s' if cores != 1 else ''}"
        console.print(
            f"platform: {escape(words)} from {escape(platform.source)} (--nodes/--cores-per-node or --cluster to "
            "choose another)",
            highlight=False,
        )
    if cluster is None and nodes is not None and cores is not None:
        check_uniform(what, cores, shape.gpus, cluster_bytes(nodes, cores), budget)
    return nodes_from_options(cluster, nodes, cores, shape.memory, shape.gpus)


def check_uniform(what: str, cores: int, gpus: int, estimate: int, budget: int) -> None:
    """Refuse (ValueError) a uniform cluster, ``what`` the options that give it, before it is built: more than
    :data:`~kubeflux.scheduler.validation.NODE_VERTICES_LIMIT` cores or GPUs a node, or ``estimate`` bytes beyond
    ``budget``."""
    from kubeflux.scheduler.validation import NODE_VERTICES_LIMIT
    from kubeflux.sim.workloads.limits import budget_problem

    if cores > NODE_VERTICES_LIMIT or gpus > NODE_VERTICES_LIMIT:
        raise ValueError(f"{what}: at most {NODE_VERTICES_LIMIT:,} cores and GPUs per node")
    problem = budget_problem(what, estimate, budget)
    if problem is not None:
        raise ValueError(problem)


def _one_platform(parts: list[Workload], files: list[Path]) -> HeaderPlatform:
    """The platform the workload files state: the one they all state (each that states one), named by the first;
    BadParameter when none states one or two state different ones (each named)."""
    from kubeflux.sim.workloads.platform import header_platform, header_problems

    found = [p for wl, path in zip(parts, files, strict=False) if (p := header_platform(wl, path.name))]
    if not found:
        unreadable = [
            problem
            for wl, path in zip(parts, files, strict=False)
            for problem in [*header_problems(wl.header, path.name), *wl.problems]
            if problem.startswith(f"{path.name}: header Max") or problem.startswith(f"{path.name}: nb_res:")
        ]
        said = f" ({'; '.join(dict.fromkeys(unreadable))})" if unreadable else ""
        raise typer.BadParameter(
            "give --cluster FILE, or --nodes N and --cores-per-node C: the workload states no platform (an SWF "
            f"header's MaxNodes/MaxProcs, a Batsim nb_res){said}"
        )
    first = found[0]
    other = next((p for p in found if (p.nodes, p.cores_per_node) != (first.nodes, first.cores_per_node)), None)
    if other is not None:
        raise typer.BadParameter(
            f"{first.source} and {other.source} state different platforms; give --cluster FILE, or --nodes N and "
            "--cores-per-node C"
        )
    if len(found) > 1:
        first = replace(first, source=f"{first.source}, as {' and '.join(p.source for p in found[1:])}")
    return first


def check_budget(workload: Workload, nodes: list[Node], schedulers: list[str], budget: int) -> None:
    """Raise ValueError when the runs of ``workload`` on ``nodes`` under ``schedulers`` would need more than
    ``budget`` bytes (one run at a time, plus the records of the runs before it and the graphs of kubeflux's:
    :func:`kubeflux.sim.workloads.limits.estimate_bytes`)."""
    from kubeflux.sim.workloads.limits import budget_problem, estimate_bytes, pod_count
    from kubeflux.sim.workloads.mapping import whole_cores

    schedulable = [node for node in nodes if not node.unschedulable]
    largest = max((whole_cores(node) for node in schedulable), default=0)
    total = sum(whole_cores(node) for node in schedulable)
    pods = pod_count(workload, largest, total)
    graphs = sum(1 for name in schedulers if name.startswith("kubeflux"))  # the ones that build kubeflux's graph
    estimate = estimate_bytes(workload, len(nodes), largest, total, runs=len(schedulers), graphs=graphs)
    runs = len(schedulers)
    jobs = f"{len(workload.jobs):,} jobs ({pods:,} pods) on {len(nodes):,} nodes under {runs} scheduler(s)"
    problem = budget_problem(f"{workload.name}: {jobs}", estimate, budget)
    if problem is not None:
        raise ValueError(problem)


def tell_input(workload: Workload, console: Console, strict: bool) -> None:
    """Say how many input lines, entries or documents were skipped or had problems (all are in problems.txt);
    with ``strict``, any is an error (ValueError), and so is a job the reader kept but rejected (an SWF run time of
    -1: jobs.csv lists it ``REJECTED``)."""
    problems = workload.problems
    if strict:
        rejected = [job for job in workload.jobs if job.rejected]
        if rejected and not problems:
            first = rejected[0]
            raise ValueError(
                f"--strict: {len(rejected)} job(s) rejected by the reader; first: {first.source or first.id}: "
                f"{first.rejected}"
            )
    if not problems:
        return
    skipped = workload.skipped
    what = f"{len(problems)} input problem(s), {skipped} line(s)/document(s) skipped; first: {problems[0]}"
    if strict:
        raise ValueError(f"--strict: {what}")
    console.print(f"[yellow]warning:[/] {escape(what)} (all in problems.txt; --strict to fail)", highlight=False)


def endless_pods(workload: Workload) -> int:
    """Pods of the workload with no run time: they run until deleted (a manifest's Pod without the KWOK
    annotation), so their jobs never finish."""
    return sum(
        1
        for job in workload.jobs
        if not job.rejected and job.kind is not JobKind.TRACE
        for pod in job.pods
        if pod.run_time is None
    )


def tell_endless_pods(workload: Workload, console: Console) -> None:
    """A note on pods without a run time, and on Jobs of ``parallelism: 0`` (valid, but they never make a pod)."""
    from kubeflux.sim.workloads.manifests import RUN_TIME_ANNOTATION

    count = endless_pods(workload)
    if count:
        console.print(
            f"note: {count} pod(s) have no run time (annotation {RUN_TIME_ANNOTATION}): they run until deleted, as "
            "on KWOK, so their jobs never finish; --default-runtime SECONDS gives them one",
            highlight=False,
        )
    idle = [job.id for job in workload.jobs if job.kind is JobKind.JOB and job.parallelism == 0 and job.completions]
    if idle:
        console.print(
            f"note: {len(idle)} Job(s) have parallelism 0 (first: {escape(idle[0])}): a Job never runs a pod until "
            "its parallelism is raised, so they never finish",
            highlight=False,
        )


__all__ = [
    "ALL_SCHEDULERS",
    "Shape",
    "check_budget",
    "check_uniform",
    "choose_cluster",
    "endless_pods",
    "load_files",
    "memory_budget_bytes",
    "nodes_from_options",
    "scheduler_names",
    "tell_endless_pods",
    "tell_input",
]
