"""``kubeflux simulate``: run workloads on a simulated cluster under one or more schedulers and compare them.

For each ``--scheduler`` the whole workload runs once, in virtual time, from the same cluster and seed. Output in
``--out``: ``<scheduler>/jobs.csv`` (Batsim's columns), ``summary.csv``/``summary.json`` (one row per scheduler),
plots and ``index.html``, and ``problems.txt`` when input lines were skipped or decisions refused. Several
``--workload`` files are merged into one run, each shifted so its first submission is at time 0. With several
schedulers the comparison ends with one line per other scheduler saying what the first one gains over it (mean
wait, makespan, useful utilization: :mod:`kubeflux.sim.verdict`).

Besides files, ``--preset NAME`` (the seeds' presets of :mod:`kubeflux.sim.workloads.synthetic`, on their own
cluster unless one is given) and ``--synthetic "key=value,…"`` (the seeded generator) are workloads too.
``--urgent FRACTION[:PRIORITY]`` gives a fraction of the jobs, chosen with ``--seed``, a priority on all their pods
(:mod:`kubeflux.sim.urgent`), so that a trace shows what preemption does to them and to the others.

Without ``--scheduler`` every built-in scheduler runs (``all``); without a cluster, a trace's header states the
platform (:mod:`kubeflux.sim.inputs`). What the command refuses, with exit code 2 and a message naming the cause:
a path that is no readable regular file, an unreadable, truncated or corrupt workload file, a number out of range
(:mod:`kubeflux.sim.workloads.limits`; a ``--start-delay`` or ``--start-jitter`` beyond a year), a
run beyond ``--memory-budget``, a bad line or document under ``--strict``, a workload without any job, options that
would be ignored (``--gpus-per-node`` or ``--memory-per-node`` with ``--cluster``; a ``--start-jitter`` below
``--start-delay``; a scheduler named twice), an ``--out`` that cannot be a folder (a file, or a path through one: the
system's reason is said), and an ``--out`` folder that is not empty, unless ``--force`` is given: then the files of
the previous run there (listed in its ``.kubeflux-simulate`` file) are removed first, and nothing else.
"""

from __future__ import annotations

import atexit
import gc
import re
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from kubeflux.apiobjects.priority import PriorityClass
from kubeflux.resources.graph import paused_gc
from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import CPU, DEFAULT_SCHEDULER, GPU, DisruptionBudget, Node
from kubeflux.sim.cluster import Lifecycle
from kubeflux.sim.driver import SimulationOptions, few_collections, simulate
from kubeflux.sim.fabric import Fabric
from kubeflux.sim.inputs import (
    Shape,
    check_budget,
    choose_cluster,
    endless_pods,
    load_files,
    memory_budget_bytes,
    scheduler_names,
    tell_endless_pods,
    tell_input,
)
from kubeflux.sim.kinds import FinalState
from kubeflux.sim.kueue.objects import KueueObjects
from kubeflux.sim.output.page import About
from kubeflux.sim.output.timing import PhaseTimer
from kubeflux.sim.progress import ProgressReporter
from kubeflux.sim.records import RunRecord
from kubeflux.sim.urgent import Urgent, mark_urgent, parse_urgent
from kubeflux.sim.workloads.limits import ReadBudget, seconds_problem, start_delays_problem
from kubeflux.sim.workloads.model import JobKind, Lifetime, Workload, WorkloadJob, policy_key


def merge_workloads(workloads: list[Workload]) -> Workload:
    """One workload from several: each shifted to start at 0, job ids prefixed by the workload name (and its
    position, ``t#2:15``, when two files of one name are given).

    Trace jobs (SWF, Batsim) are named ``job-<number>`` in every trace, so their names (hence their pods' names)
    are prefixed too, with the workload's position and name as a DNS label (``w2-kth-sp2-1996-2.1-cln-job-15``);
    otherwise the second trace's jobs would collide with the first's and be refused as existing pods. Kubernetes
    objects keep the names their manifests give.
    """
    if len(workloads) == 1:
        return workloads[0]
    jobs: list[WorkloadJob] = []
    problems: list[str] = []
    names = [wl.name for wl in workloads]
    for number, wl in enumerate(workloads, start=1):
        first = min((j.submit_time for j in wl.jobs), default=0.0)
        prefix = f"w{number}-{_dns_label(wl.name)}-"
        label = wl.name if names.count(wl.name) == 1 else f"{wl.name}#{number}"  # a/t.swf and b/t.swf
        jobs.extend(
            replace(
                j,
                id=f"{label}:{j.id}",
                name=prefix + j.name if j.kind is JobKind.TRACE else j.name,
                submit_time=j.submit_time - first,
            )
            for j in wl.jobs
        )
        problems.extend(wl.problems)
    classes: dict[str, PriorityClass] = {}
    budgets: dict[str, DisruptionBudget] = {}
    lifetimes: dict[str, Lifetime] = {}
    for wl in workloads:  # one cluster: a class or a budget of one name is one object, the first file's
        clashes = [f"PriorityClass {c.name}" for c in wl.priority_classes if classes.setdefault(c.name, c) != c]
        clashes += [f"PodDisruptionBudget {b.key}" for b in wl.budgets if budgets.setdefault(b.key, b) != b]
        problems.extend(f"{wl.name}: {name} differs from an earlier file's; the first is kept" for name in clashes)
        first = min((j.submit_time for j in wl.jobs), default=0.0)  # its times shift with its jobs'
        timed: list[PriorityClass | DisruptionBudget] = [
            *(c for c in wl.priority_classes if classes[c.name] is c),
            *(b for b in wl.budgets if budgets[b.key] is b),
        ]
        for obj in timed:  # the objects this file's are kept of
            if (key := policy_key(obj)) in wl.lifetimes:
                lifetimes[key] = wl.lifetimes[key].shifted(first)
    return Workload(
        name="+".join(wl.name for wl in workloads),
        jobs=jobs,
        problems=problems,
        skipped=sum(wl.skipped for wl in workloads),
        priority_classes=list(classes.values()),
        budgets=list(budgets.values()),
        lifetimes=lifetimes,
        kueue=_kueue_objects(workloads, problems),
    )


def _kueue_objects(workloads: list[Workload], problems: list[str]) -> KueueObjects | None:
    """The Kueue objects of every file (one cluster: an object of one name is the first file's; one a later file
    defines otherwise is a problem, named, as a PriorityClass's); None without."""
    merged = KueueObjects()
    for wl in workloads:
        if wl.kueue is not None:
            for label in merged.conflicts(wl.kueue):
                problems.append(f"{wl.name}: {label} differs from an earlier file's; the first is kept")
            merged = merged.merged(wl.kueue)
    return merged or None


def _dns_label(text: str) -> str:
    """``HPC2N-2002-2.2.first3170`` → ``hpc2n-2002-2.2.first3170``: lowercase, other characters become ``-``."""
    return re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")[:40] or "workload"


def schedulers_for(
    name: str, workload: Workload, sockets: int = 0, levels: tuple[str, ...] | None = None
) -> tuple[dict[str, Scheduler], str]:
    """The scheduler under test, plus one scheduler per other ``schedulerName`` the workload's pods name.

    ``sockets`` > 0: a kubeflux scheduler's graph gives each node that many sockets, or its ``kubeflux.io/sockets``
    label's (:class:`~kubeflux.scheduler.translate.NodeShape`); ``levels``: the node labels forming its topology
    levels (None: the default, :data:`~kubeflux.scheduler.topology.DEFAULT_LEVELS`)."""
    from kubeflux.scheduler.core import KubefluxScheduler
    from kubeflux.scheduler.translate import SOCKETS_LABEL, NodeShape
    from kubeflux.sim.baselines import available, create

    primary = create(name)
    if isinstance(primary, KubefluxScheduler) and (sockets or levels is not None):
        # before it sees a node: its graph is built later
        shape = NodeShape(SOCKETS_LABEL, sockets) if sockets else NodeShape()
        primary.profile.shape = shape if levels is None else replace(shape, levels=levels)
    schedulers: dict[str, Scheduler] = {primary.name: primary}
    wanted = {t.scheduler_name for j in workload.jobs for t in j.pods if t.scheduler_name}
    known = available()
    for other in sorted(wanted - {primary.name}):
        registry_name = "kube-default" if other == DEFAULT_SCHEDULER else other
        if registry_name in known:
            extra = create(registry_name)
            if extra.name == other:
                schedulers[other] = extra
    return schedulers, primary.name


def write_outputs(
    runs: list[RunRecord],
    out: Path,
    console: Console,
    *,
    about: About | None = None,
    timer: PhaseTimer | None = None,
    parallel: bool = False,
) -> list[dict[str, Any]]:
    """Write every run's ``jobs.csv`` and ``pods.csv``, the summaries and the report (each timed by ``timer``);
    print the comparison; return the summary rows. ``parallel``: the CSV files are written by a forked child while
    this process summarizes and draws (:mod:`kubeflux.sim.output.parallel`; ``simulate`` only: a server's threads
    make forking unsafe, and it says so by itself)."""
    from kubeflux.sim import metrics, report
    from kubeflux.sim.output import parallel as forked

    timer = timer or PhaseTimer()

    def write_csv_files(timer: PhaseTimer) -> None:
        for run in runs:
            with timer.phase(f"write {run.scheduler}/jobs.csv"):
                metrics.write_jobs_csv(run, out / run.scheduler / "jobs.csv")
            with timer.phase(f"write {run.scheduler}/pods.csv"):
                metrics.write_pods_csv(run, out / run.scheduler / "pods.csv")

    csv_files = forked.start(write_csv_files, parallel=parallel)
    rows: list[dict[str, Any]] = []
    for run in runs:
        with timer.phase(f"summarize {run.scheduler}"):
            rows.append(metrics.summarize(run))
    report.write_figures(runs, rows, out, timer)
    csv_files.join(timer)
    report.write_page(runs, rows, out, about=about, timer=timer)
    console.print(fit_table(report.summary_table(rows), console.width))
    return rows


def describe_cluster(nodes: Sequence[Node]) -> str:
    """The cluster in words: ``16 nodes × 16 cores, 64Gi memory`` when all nodes are alike, else the count of
    nodes and the total of each kind (``120 nodes: 240 cores, 8 GPUs``). CPU is said as the nodes have it: a node
    of ``2500m`` has 2.5 cores, not 2."""
    shapes = {
        (node.allocatable.get(CPU, 0), node.allocatable.get("memory", 0), node.allocatable.get(GPU, 0))
        for node in nodes
    }
    count = f"{len(nodes):,} node{'s' if len(nodes) != 1 else ''}"
    if len(shapes) == 1:
        millicores, memory, gpus = next(iter(shapes))
        parts = [_cores_words(millicores)]
        if gpus:
            parts.append(f"{gpus:,} GPU{'s' if gpus != 1 else ''}")
        if memory:
            parts.append(f"{_gibibytes(memory)} memory")
        return f"{count} × {', '.join(parts)}"
    total_gpus = sum(node.allocatable.get(GPU, 0) for node in nodes)
    total = _cores_words(sum(node.allocatable.get(CPU, 0) for node in nodes))
    return f"{count}: {total}" + (f", {total_gpus:,} GPUs" if total_gpus else "")


def _cores_words(millicores: int) -> str:
    """``16 cores``, ``1 core``, ``2.5 cores``, ``0.25 cores`` (millicores exactly, in integers)."""
    whole, rest = divmod(int(millicores), 1000)
    if rest == 0:
        return f"{whole:,} core{'s' if whole != 1 else ''}"
    return f"{whole:,}.{rest:03d}".rstrip("0") + " cores"


def _gibibytes(amount: int) -> str:
    """Bytes, rounded to whole GiB or MiB (integer arithmetic: a cluster file's memory may exceed a float)."""
    whole = int(amount)
    return f"{(whole + 2**29) >> 30:,} GiB" if whole >= 2**30 else f"{(whole + 2**19) >> 20:,} MiB"


def _list_schedulers(console: Console) -> None:
    from kubeflux.sim.baselines import available

    table = Table(title="Schedulers")
    table.add_column("name")
    table.add_column("description")
    for info in available().values():
        table.add_row(info.name, info.description)
    console.print(table)


REPORT_WIDTH: Final = 160
DEFAULT_MEMORY_PER_NODE: Final = "256Gi"
OUTPUT_LIST: Final = ".kubeflux-simulate"
"""In ``--out``: the files and folders the run wrote, one per line, which ``--force`` removes before the next."""

UserQueuesOption = Annotated[
    str | None,
    typer.Option(
        "--user-queues",
        metavar="QUEUE,…",
        help="Put each trace job in a Kueue LocalQueue by its user (user id mod the number of queues); the "
        "LocalQueues come from a --workload file of Kueue objects, e.g. examples/workloads/kueue-tenants.yaml.",
    ),
]
"""``--user-queues`` (:func:`~kubeflux.sim.workloads.tenants.queues_by_user`), of ``simulate`` and ``cluster
serve`` alike."""


def fit_table(table: Table, width: int) -> Table:
    """``table`` as it is when it fits in ``width`` columns; otherwise turned on its side (one row per figure, one
    column per scheduler), so that narrow terminals get whole numbers instead of cells cut short with "…"."""
    console = Console(width=max(width, 1))
    if Measurement.get(console, console.options.update(width=100_000), table).maximum <= width:
        return table
    columns = table.columns
    turned = Table(title=table.title)
    turned.add_column(columns[0].header, no_wrap=True)
    for name in columns[0].cells:
        turned.add_column(name, justify="right", no_wrap=True)
    for column in columns[1:]:
        turned.add_row(column.header, *column.cells)
    return turned


def _check_options(
    cluster: Path | None,
    memory_per_node: str,
    gpus_per_node: int,
    start_delay: float,
    start_jitter: float,
    schedulers: list[str],
) -> None:
    """Refuse start delays that are no number of seconds (:func:`~kubeflux.sim.workloads.limits.
    start_delays_problem`), and options the run would silently ignore (typer.BadParameter, exit code 2)."""
    if (problem := start_delays_problem(start_delay, start_jitter)) is not None:
        raise typer.BadParameter(problem)
    if cluster is not None and (gpus_per_node != 0 or memory_per_node != DEFAULT_MEMORY_PER_NODE):
        raise typer.BadParameter("--gpus-per-node and --memory-per-node shape --nodes; with --cluster the file does")
    if 0 < start_jitter < start_delay:
        raise typer.BadParameter(
            f"--start-jitter {start_jitter:g} is below --start-delay {start_delay:g}: the jitter is the upper bound "
            "of the delay (KWOK's jitter-delay), so it would be ignored"
        )
    twice = sorted({name for name in schedulers if schedulers.count(name) > 1})
    if twice:
        raise typer.BadParameter(f"scheduler(s) named more than once: {', '.join(twice)}")


def _load(
    files: list[Path],
    preset_name: str | None,
    synthetic: str | None,
    seed: int,
    default_run_time: float | None = None,
    budget: ReadBudget | None = None,
) -> list[Workload]:
    """The workloads to merge: files, then the preset or synthetic spec (ValueError/WorkloadError on bad input);
    ``budget``: the files are read only as far as the memory budget allows (:func:`~kubeflux.sim.inputs.
    load_files`)."""
    from kubeflux.sim.workloads.synthetic import PRESETS, generate, parse_spec

    seen: dict[Path, Path] = {}
    for path in files:  # the same jobs twice would be two jobs of one id, and two pods of one name
        given = seen.setdefault(path.resolve(), path)
        if given is not path:
            same = "twice" if str(given) == str(path) else f"twice (as {given} and {path})"
            raise ValueError(f"-w {path}: the same file is given {same}; give each workload file once")
    workloads = load_files(files, default_run_time, budget)
    if preset_name is not None:
        base = PRESETS.get(preset_name)
        if base is None:
            raise ValueError(f"--preset: unknown preset {preset_name!r}; known: {', '.join(sorted(PRESETS))}")
        spec = parse_spec(synthetic, base) if synthetic else base
        workloads.append(generate(spec, seed))
    elif synthetic is not None:
        workloads.append(generate(parse_spec(synthetic), seed))
    return workloads


def make_out_folder(out: Path, what: str, clear: Callable[[], None] | None = None) -> None:
    """Make ``out`` a folder (with its parents), after ``clear`` if given; a path that cannot be one (a file, one
    under a file, one the system refuses) is typer.BadParameter (exit code 2) naming it as ``what`` with the system's
    reason, before anything is run."""
    if out.exists() and not out.is_dir():
        raise typer.BadParameter(f"--out {out}: exists and is not a folder")
    try:
        if clear is not None:
            clear()
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise typer.BadParameter(f"--out {out}: cannot be the {what}: {exc.strerror or exc}") from None


def _prepare_out(out: Path, force: bool) -> None:
    """Make ``out`` ready for a run (:func:`make_out_folder`): if not empty, refused unless ``force``, which removes
    the previous run's outputs (as its :data:`OUTPUT_LIST` names them) and leaves anything else alone."""

    def clear() -> None:
        if not out.is_dir() or not any(out.iterdir()):
            return
        if not force:
            raise typer.BadParameter(
                f"--out {out} is not empty (a previous run?); give another folder, or --force to replace the "
                "previous run's files there"
            )
        listed = out / OUTPUT_LIST
        names = listed.read_text(encoding="utf-8").splitlines() if listed.is_file() else []
        for name in names:
            target = out / name
            if not name or target.parent != out:
                continue  # only direct children the previous run wrote
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        listed.unlink(missing_ok=True)

    make_out_folder(out, "output folder", clear)


def _record_outputs(out: Path, before: set[str]) -> None:
    """List what this run added to ``out`` (for the next run's ``--force``)."""
    added = sorted(p.name for p in out.iterdir() if p.name not in before and p.name != OUTPUT_LIST)
    (out / OUTPUT_LIST).write_text("".join(f"{name}\n" for name in added), encoding="utf-8")


def _list_presets(console: Console) -> None:
    from kubeflux.sim.workloads.synthetic import PRESETS

    table = Table(title="Workload presets (--preset)")
    table.add_column("name")
    table.add_column("jobs", justify="right")
    table.add_column("every (s)", justify="right")
    table.add_column("kind")
    for name, spec in sorted(PRESETS.items()):
        table.add_row(name, str(spec.jobs), f"{spec.mean_interarrival:g}", spec.kind.value)
    console.print(table)


def _levels_option(text: str | None) -> tuple[str, ...] | None:
    """``--topology-levels``: the labels, checked (None when not given: the default levels)."""
    if text is None:
        return None
    from kubeflux.scheduler.topology import check_levels

    try:
        return check_levels(label.strip() for label in text.split(",") if label.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"--topology-levels: {exc}") from None


def _fabric_option(levels: tuple[str, ...] | None, penalty: str | None) -> Fabric:
    """The run's topology levels (``--topology-levels``, else the default) with ``--topology-penalty``'s penalties
    (typer.BadParameter naming the option for a bad one)."""
    from kubeflux.scheduler.topology import DEFAULT_LEVELS
    from kubeflux.sim.fabric import parse_penalty

    chosen = DEFAULT_LEVELS if levels is None else levels
    try:
        return Fabric.of(chosen, parse_penalty(penalty or "", chosen))
    except ValueError as exc:
        raise typer.BadParameter(f"--topology-penalty: {exc}") from None


def _check_sockets(node_list: list[Node], sockets: int) -> None:
    """Raise ValueError for a node kubeflux's graph cannot give its sockets (with ``--sockets``): a bad
    ``kubeflux.io/sockets`` label, or more sockets than whole cores. serve warns and uses its default, as a live
    cluster must go on; here the cluster is the user's file, so it is refused (it was silently taken as ``sockets``)."""
    if not sockets:
        return
    from kubeflux.scheduler.translate import SOCKETS_LABEL, NodeShape, whole_cores

    shape = NodeShape(SOCKETS_LABEL, sockets)
    for node in node_list:
        problem = shape.sockets(node)[1]
        if problem is not None:
            raise ValueError(problem.rsplit(";", 1)[0])
        cores = whole_cores(node.allocatable.get(CPU, 0))
        if SOCKETS_LABEL not in node.labels and sockets > max(cores, 1):
            raise ValueError(f"--sockets {sockets}: Node {node.name} has only {cores} whole cores")


def _fail(console: Console, message: object) -> typer.Exit:
    console.print(f"[red]error:[/] {escape(str(message))}")
    return typer.Exit(2)


def simulate_command(
    workload: Annotated[
        list[Path] | None,
        typer.Option("--workload", "-w", help="SWF, .swf.gz, Batsim JSON or Kubernetes YAML; repeatable."),
    ] = None,
    scheduler: Annotated[
        list[str] | None, typer.Option("--scheduler", "-s", help="A registered scheduler; repeatable.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output folder (new or empty).")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Use a non-empty --out, removing the previous run's files there.")
    ] = False,
    preset: Annotated[
        str | None, typer.Option("--preset", help="A named synthetic workload (--list-presets), e.g. seed004-jobs.")
    ] = None,
    synthetic: Annotated[
        str | None,
        typer.Option("--synthetic", help='Synthetic jobs, "key=value,…" (jobs, max_size, …); over --preset if given.'),
    ] = None,
    cluster: Annotated[Path | None, typer.Option("--cluster", help="Kubernetes Node manifests (YAML).")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", help="Number of identical nodes.")] = None,
    cores_per_node: Annotated[int | None, typer.Option("--cores-per-node", help="Cores per node.")] = None,
    memory_per_node: Annotated[
        str, typer.Option("--memory-per-node", help="Memory per node (quantity).")
    ] = DEFAULT_MEMORY_PER_NODE,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="nvidia.com/gpu per node.")] = 0,
    sockets: Annotated[
        int,
        typer.Option(
            "--sockets",
            min=0,
            max=1024,
            help="Sockets per node in kubeflux's graph (0: none); a node's kubeflux.io/sockets label overrides it.",
        ),
    ] = 0,
    topology_levels: Annotated[
        str | None,
        typer.Option(
            "--topology-levels",
            metavar="LABEL,…",
            help="Node labels forming topology levels above the nodes in kubeflux's graph, top first (default: "
            "topology.kubernetes.io/zone,topology.kubeflux.io/rack; '' for none); only levels some node carries "
            "are built.",
        ),
    ] = None,
    topology_penalty: Annotated[
        str | None,
        typer.Option(
            "--topology-penalty",
            metavar="LEVEL=P,…",
            help="Coupled jobs spanning k domains of a topology level (rack, zone, or a level's label) compute "
            "(1 + P·(k−1)) times as long, the levels' factors multiplied, e.g. rack=0.1,zone=0.5.",
        ),
    ] = None,
    user_queues: UserQueuesOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of start jitter, failures and synthetic jobs.")] = 0,
    start_delay: Annotated[float, typer.Option("--start-delay", help="Seconds from bind to Running.")] = 0.0,
    start_jitter: Annotated[
        float, typer.Option("--start-jitter", help="Upper bound of the start delay (KWOK), at least the delay.")
    ] = 0.0,
    fail_fraction: Annotated[float, typer.Option("--fail-fraction", help="Fraction of pods that crash.")] = 0.0,
    urgent: Annotated[
        str | None,
        typer.Option(
            "--urgent",
            metavar="FRACTION[:PRIORITY]",
            help="Make that fraction of the jobs (chosen with --seed) urgent: priority PRIORITY (default 1000) on all "
            "their pods.",
        ),
    ] = None,
    list_schedulers: Annotated[bool, typer.Option("--list-schedulers", help="Print the schedulers and exit.")] = False,
    list_presets: Annotated[bool, typer.Option("--list-presets", help="Print the workload presets and exit.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print the wall and CPU time of each phase at the end.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Fail (exit 2) when an input line, entry or document is bad, instead of skipping it."
        ),
    ] = False,
    default_runtime: Annotated[
        float | None,
        typer.Option(
            "--default-runtime",
            help="Seconds a Pod without the pod-complete.stage.kwok.x-k8s.io/delay annotation runs (default: until "
            "deleted, as on KWOK).",
        ),
    ] = None,
    memory_budget: Annotated[
        str,
        typer.Option("--memory-budget", help="Refuse a run expected to need more memory than this (quantity)."),
    ] = "8Gi",
) -> None:
    """Simulate workloads on a virtual-time Kubernetes cluster under each scheduler and compare them."""
    # Printed to a pipe or a file (make demo, CI logs), the comparison keeps its full width instead of 80 columns.
    console = Console(width=None if sys.stdout.isatty() else REPORT_WIDTH)
    if list_schedulers or list_presets:
        if list_schedulers:
            _list_schedulers(console)
        if list_presets:
            _list_presets(console)
        return
    if not (workload or preset or synthetic) or out is None:
        raise typer.BadParameter("--workload (or --preset/--synthetic) and --out are required (or --list-schedulers)")
    from kubeflux.sim.workloads import WorkloadError
    from kubeflux.sim.workloads.mapping import map_to_cluster
    from kubeflux.sim.workloads.tenants import parse_queues, queues_by_user

    scheduler = scheduler_names(scheduler)
    _check_options(cluster, memory_per_node, gpus_per_node, start_delay, start_jitter, scheduler)
    marked = _urgent_option(urgent)
    budget = memory_budget_bytes(memory_budget)
    levels = _levels_option(topology_levels)
    fabric = _fabric_option(levels, topology_penalty)
    try:
        queues = parse_queues(user_queues) if user_queues is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if default_runtime is not None and seconds_problem(default_runtime) is not None:
        raise typer.BadParameter(f"--default-runtime {seconds_problem(default_runtime)}")
    timer = PhaseTimer()
    try:
        with timer.phase("read workload"):
            read_budget = ReadBudget(budget, len(scheduler))
            parts = _load(workload or [], preset, synthetic, seed, default_runtime, read_budget)
            loaded = merge_workloads(parts)
            if queues is not None:
                loaded = queues_by_user(loaded, queues)
                _tell_queues(loaded, queues, console)
        shape = Shape(nodes, cores_per_node, memory_per_node, gpus_per_node)
        node_list = choose_cluster(parts, workload or [], preset, cluster, shape, budget, console)
        tell_input(loaded, console, strict)
        lifecycle = Lifecycle(start_delay, start_jitter, fail_fraction, seed=seed)
        _check_sockets(node_list, sockets)
        check_budget(loaded, node_list, scheduler, budget)
    except (WorkloadError, ValueError) as exc:
        raise _fail(console, exc) from exc
    if not loaded.jobs:
        skipped = f"; {len(loaded.problems)} line(s) skipped, first: {loaded.problems[0]}" if loaded.problems else ""
        raise _fail(console, f"no jobs to simulate in {loaded.name}{skipped}")
    tell_endless_pods(loaded, console)
    _prepare_out(out, force)
    before = {p.name for p in out.iterdir()}
    atexit.unregister(_skip_final_collection)  # registered once, however often the command runs in a process
    atexit.register(_skip_final_collection)
    with few_collections():  # millions of long-lived objects: see its docstring (mapping 2.2 -> 1.3 s on LCG)
        # No collection while the trace is mapped and a run goes: a run's objects live to its end (LCG under fcfs:
        # 86 young collections found 11 objects to free among 8.6 million, 0.9 s of its 5.4 s of CPU); the outputs,
        # whose plots make cyclic garbage, run with the collector on, and what a run leaves is collected after it.
        with timer.phase("map workload to cluster"), paused_gc():
            mapped = map_to_cluster(loaded, node_list)
            if marked is not None:
                mapped = mark_urgent(mapped, marked, seed)
        runs: list[RunRecord] = []
        for name in scheduler:
            schedulers, primary = schedulers_for(name, mapped, sockets, levels)
            with timer.phase(f"simulate {name}"), paused_gc():
                run = _run_with_progress(mapped, node_list, schedulers, primary, name, lifecycle, console, fabric)
            runs.append(run)
            console.print(
                f"{escape(name)}: {len(run.jobs)} jobs, {run.pods_bound} pods bound in {run.wall_seconds:.2f} s",
                highlight=False,
            )
        _write_problems(out, mapped.problems, runs)
        words = _workload_words(workload or [], preset, synthetic)
        if marked is not None:
            words += f", {marked.fraction * 100:g} % of its jobs urgent (priority {marked.priority:,}, seed {seed})"
        if loaded.skipped:  # the page's "what ran" says it too, not only the terminal
            words += f" ({loaded.skipped:,} line(s)/document(s) skipped: see problems.txt)"
        about = About(cluster=describe_cluster(node_list), workload=words)
        rows = write_outputs(runs, out, console, about=about, timer=timer, parallel=True)
        _record_outputs(out, before)
        _tell_verdict(rows, console)
        if verbose:
            for line in timer.lines():
                console.print(escape(line), highlight=False)
    tell_failures(runs, console, endless_pods(mapped))


def _write_problems(out: Path, input_problems: list[str], runs: list[RunRecord]) -> None:
    """``problems.txt``: the input's problems once (every run starts from them), then each run's own, marked with
    its scheduler; no file when there is none."""
    lines = list(input_problems)
    for run in runs:
        own = (
            run.problems[len(input_problems) :]
            if run.problems[: len(input_problems)] == input_problems
            else run.problems
        )
        lines.extend(f"[{run.scheduler}] {p}" for p in own)
    if lines:
        (out / "problems.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _urgent_option(text: str | None) -> Urgent | None:
    """``--urgent`` read (:func:`~kubeflux.sim.urgent.parse_urgent`; typer.BadParameter when it cannot be)."""
    if text is None:
        return None
    try:
        return parse_urgent(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _skip_final_collection() -> None:
    """At exit, move every object to the collector's permanent generation: the interpreter's last full collection
    then skips them, and the operating system takes the memory back at once. After an LCG run that collection
    walked millions of objects for about 2.6 s of CPU between the command's last line and the shell prompt."""
    gc.freeze()


def _workload_words(files: list[Path], preset: str | None, synthetic: str | None) -> str:
    """The workload as the command was given it: file names, ``preset NAME``, ``synthetic SPEC``."""
    parts = [path.name for path in files]
    if preset is not None:
        parts.append(f"preset {preset}" + (f" ({synthetic})" if synthetic else ""))
    elif synthetic is not None:
        parts.append(f"synthetic ({synthetic})")
    return " + ".join(parts)


def _tell_verdict(rows: list[dict[str, Any]], console: Console) -> None:
    """One line per other scheduler: what the first one gains over it (:mod:`kubeflux.sim.verdict`)."""
    from kubeflux.sim.verdict import verdict_lines

    for line in verdict_lines(rows):
        console.print(escape(line), highlight=False, soft_wrap=True)


NOTHING_RAN: Final = 3
"""``kubeflux simulate``'s (and a ``cluster serve`` replay's) exit code when no job of the workload finished under
any scheduler, or none succeeded: every job that ended failed, was killed or ran out of its time."""

_ENDED_WORDS: Final = {
    FinalState.COMPLETED_FAILED: "failed",
    FinalState.COMPLETED_KILLED: "killed",
    FinalState.COMPLETED_WALLTIME_REACHED: "reached its walltime",
    FinalState.REJECTED: "rejected",
    FinalState.NOT_FINISHED: "not finished",
}
"""How a job that did not succeed ended, in a count (``2 failed, 1 killed``)."""


def _unsuccessful(run: RunRecord) -> str:
    """How a run's jobs ended when none succeeded, counted (``3 failed, 1 rejected``) with the first one ended and
    why (``first: default/crash: failed: pod crash: … (exit code 1)``); empty when one succeeded (or none ran)."""
    states = [job.final_state for job in run.jobs]
    if not states or FinalState.COMPLETED_SUCCESSFULLY in states:
        return ""
    counts = ", ".join(f"{states.count(state):,} {words}" for state, words in _ENDED_WORDS.items() if state in states)
    first = next((job for job in run.jobs if job.finish_time is not None), run.jobs[0])
    return f"{counts}; first: {first.job_id}: {first.reason or first.final_state.value}"


def _tell_queues(workload: Workload, queues: tuple[str, ...], console: Console) -> None:
    """How many trace jobs ``--user-queues`` put in each LocalQueue."""
    counts = Counter(job.queue_name for job in workload.jobs if job.kind is JobKind.TRACE)
    told = ", ".join(f"{counts[name]:,} to {name}" for name in queues)
    console.print(f"--user-queues: trace jobs by user: {told}", highlight=False)


def tell_failures(runs: list[RunRecord], console: Console, endless_pods: int = 0) -> None:
    """A warning for every run that left jobs unfinished (with why it stopped, or the ``endless_pods`` that have
    no run time), and :data:`NOTHING_RAN` as the exit code when nothing finished anywhere, or nothing succeeded
    anywhere (every job failed, was killed or was rejected): a comparison of runs that did not run, or ran only
    failures, is not a result."""
    finished_anywhere = False
    for run in runs:
        unfinished = [job for job in run.jobs if job.final_state.value == "NOT_FINISHED"]
        finished_anywhere = finished_anywhere or any(job.finish_time is not None for job in run.jobs)
        if unfinished:
            why = run.stopped or (
                f"{endless_pods} pod(s) without a run time still run (they end only when deleted; "
                "--default-runtime SECONDS gives them one)"
                if endless_pods
                else "no event was left while they still waited (see jobs.csv's metadata)"
            )
            held = sum(1 for job in unfinished if job.cluster_queue and job.admission_time is None)
            if held:
                why = f"{held} never admitted by Kueue (see problems.txt); " + why
            console.print(
                f"[yellow]warning:[/] {escape(run.scheduler)}: {len(unfinished)} of {len(run.jobs)} jobs never "
                f"finished: {escape(why)}",
                highlight=False,
            )
    if runs and not finished_anywhere:
        rejected = [job for job in runs[0].jobs if job.final_state.value == "REJECTED"]
        why = "nothing to compare"
        if rejected and len(rejected) == len(runs[0].jobs):
            why = (
                f"every job was rejected; first: {rejected[0].job_id}: {rejected[0].reason.removeprefix('rejected: ')}"
            )
        console.print(f"[red]error:[/] no job finished under any scheduler: {escape(why)}", highlight=False)
        raise typer.Exit(NOTHING_RAN)
    unsuccessful = [_unsuccessful(run) for run in runs if run.jobs]
    if unsuccessful and all(unsuccessful):
        said = f"nothing succeeded: no job succeeded under any scheduler: {unsuccessful[0]}"
        console.print(f"[red]error:[/] {escape(said)}", highlight=False)
        raise typer.Exit(NOTHING_RAN)


def _run_with_progress(
    workload: Workload,
    nodes: list[Node],
    schedulers: dict[str, Scheduler],
    primary: str,
    label: str,
    lifecycle: Lifecycle,
    console: Console,
    fabric: Fabric | None = None,
) -> RunRecord:
    """Run one simulation, reporting progress from the start (see :mod:`kubeflux.sim.progress`)."""
    reporter = ProgressReporter(label, len(workload.jobs), console, interactive=console.is_terminal)
    reporter.start()
    try:
        options = SimulationOptions(lifecycle=lifecycle, fabric=fabric)
        return simulate(
            workload, nodes, schedulers, primary=primary, label=label, options=options, progress=reporter.update
        )
    finally:
        reporter.stop()


__all__ = ["fit_table", "make_out_folder", "merge_workloads", "simulate_command"]
