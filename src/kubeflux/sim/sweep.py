"""``kubeflux sweep``: a grid of simulations (workloads x schedulers x match policies x cluster shapes x seeds).

The grid is a YAML file (:class:`SweepGrid`; paths in it are relative to the file). Each point of the grid is one
independent :func:`~kubeflux.sim.driver.simulate` run (a :class:`Task`), executed on a local process pool or, with
``dask``, on any Dask cluster (``dask.distributed``: a laptop's ``LocalCluster``, a Kubernetes cluster through
dask-kubernetes, an HPC batch system through dask-jobqueue). A task carries everything it needs (the workload
file's bytes, the nodes, the lifecycle), so workers need no shared filesystem; it sends back the summary row and
``jobs.csv``, which the client writes under ``runs/<key>/``.

**Resumable**: a run whose ``runs/<key>/summary.json`` exists is not run again. The key names the grid point and
hashes what the run depends on (the workload's bytes, the nodes, the lifecycle), so a changed input runs afresh.
**A failed run is reported, not fatal**: its error goes to ``runs/<key>/error.txt`` and to the merged report
(:mod:`kubeflux.sim.sweep_report`), and is tried again on the next invocation. Match policies apply to the kubeflux
schedulers only; the other schedulers run once per point with the policy ``-``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from kubeflux.match.policy import PolicyError, parse_policy
from kubeflux.scheduler.objects import Node
from kubeflux.sim.workloads.limits import start_delay_problem

__all__ = [
    "ClusterShape",
    "Outcome",
    "SweepError",
    "SweepGrid",
    "Task",
    "done_keys",
    "execute",
    "load_grid",
    "plan",
    "pool_size",
    "record",
    "run_task",
]

NO_POLICY: Final = "-"
"""The policy column of a scheduler that has no match policy (the baselines)."""


_Named = TypeVar("_Named", str, int)


class SweepError(ValueError):
    """The grid cannot be run; the message names the file and the field."""


def _once_each(values: list[_Named], what: str) -> list[_Named]:
    """``values``; ValueError when one of them is there twice."""
    if len(set(values)) != len(values):
        raise ValueError(f"a {what} is named twice")
    return values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class ClusterShape(_Strict):
    """One cluster of the grid: a Node manifests ``file``, or ``nodes`` identical nodes (in ``racks`` racks of
    consecutive nodes, labelled ``topology.kubeflux.io/rack``, when given)."""

    file: str | None = None
    nodes: Annotated[StrictInt | None, Field(gt=0)] = None
    cores_per_node: Annotated[StrictInt | None, Field(alias="coresPerNode", gt=0)] = None
    memory_per_node: Annotated[str, Field(alias="memoryPerNode")] = "256Gi"
    gpus_per_node: Annotated[StrictInt, Field(alias="gpusPerNode", ge=0)] = 0
    racks: Annotated[StrictInt, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _one_kind(self) -> ClusterShape:
        uniform = self.nodes is not None or self.cores_per_node is not None
        if self.file is not None and (uniform or self.racks):
            raise ValueError("give either file or nodes and coresPerNode (and racks), not both")
        if self.file is None and (self.nodes is None or self.cores_per_node is None):
            raise ValueError("give file, or nodes and coresPerNode")
        return self

    def label(self) -> str:
        if self.file is not None:
            return Path(self.file).stem
        gpus = f"-{self.gpus_per_node}g" if self.gpus_per_node else ""
        memory = "" if self.memory_per_node == "256Gi" else f"-{self.memory_per_node}"
        racks = f"-{self.racks}r" if self.racks else ""
        return f"{self.nodes}x{self.cores_per_node}c{gpus}{memory}{racks}"


class SweepGrid(_Strict):
    """The grid (see the module docstring); ``examples/sweep/grid.yaml`` is a complete example."""

    name: Annotated[str, Field(min_length=1)] = "sweep"
    workloads: Annotated[list[str], Field(min_length=1)]
    schedulers: Annotated[list[str], Field(min_length=1)]
    policies: Annotated[list[str], Field(min_length=1)] = ["lonode"]
    clusters: Annotated[list[ClusterShape], Field(min_length=1)]
    seeds: Annotated[list[StrictInt], Field(min_length=1)] = [0]
    start_delay: Annotated[float, Field(alias="startDelay", ge=0.0, allow_inf_nan=False)] = 0.0
    start_jitter: Annotated[float, Field(alias="startJitter", ge=0.0, allow_inf_nan=False)] = 0.0
    fail_fraction: Annotated[float, Field(alias="failFraction", ge=0.0, le=1.0, allow_inf_nan=False)] = 0.0
    topology_penalty: Annotated[dict[str, float], Field(alias="topologyPenalty")] = {}
    """``kubeflux simulate --topology-penalty``'s ``LEVEL=P,…`` (the default levels: zone, rack), read as
    :func:`~kubeflux.sim.fabric.parse_penalty` gives it (normalized: one value however the text orders or spells it)."""

    @field_validator("topology_penalty", mode="before")
    @classmethod
    def _penalty(cls, text: object) -> dict[str, float]:
        from kubeflux.scheduler.topology import DEFAULT_LEVELS
        from kubeflux.sim.fabric import parse_penalty

        if not isinstance(text, str):
            raise ValueError(f"expected text such as 'rack=0.1,zone=0.5', got {type(text).__name__}")
        return parse_penalty(text, DEFAULT_LEVELS)

    @field_validator("start_delay", "start_jitter")
    @classmethod
    def _bounded_delay(cls, seconds: float) -> float:
        problem = start_delay_problem(seconds)  # as simulate's --start-delay and --start-jitter are held
        if problem is not None:
            raise ValueError(problem)
        return seconds

    @field_validator("schedulers")
    @classmethod
    def _known_schedulers(cls, names: list[str]) -> list[str]:
        from kubeflux.sim.baselines import available

        known = available()
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown scheduler(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return _once_each(names, "scheduler")

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        return _once_each(seeds, "seed")

    @field_validator("workloads")
    @classmethod
    def _distinct_workloads(cls, workloads: list[str]) -> list[str]:
        seen: set[str] = set()
        for workload in workloads:
            name = Path(workload).name  # what names the runs and the report's rows
            if name in seen:
                raise ValueError(f"{name} is named twice (rename a copy to compare two files of one name)")
            seen.add(name)
        return workloads

    @field_validator("clusters")
    @classmethod
    def _distinct_clusters(cls, clusters: list[ClusterShape]) -> list[ClusterShape]:
        labels = [shape.label() for shape in clusters]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"two clusters are both labelled {twice[0]} in the report; make them differ")
        return clusters

    @field_validator("policies")
    @classmethod
    def _known_policies(cls, policies: list[str]) -> list[str]:
        for policy in _once_each(policies, "policy"):
            try:
                parse_policy(policy)
            except PolicyError as exc:
                raise ValueError(str(exc)) from exc
        return policies


def load_grid(path: Path) -> tuple[SweepGrid, Path]:
    """The grid in ``path`` and the folder its relative paths start from; :class:`SweepError` names the field."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SweepError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SweepError(f"{path}: not UTF-8 text (byte {exc.start}): a grid is a YAML file") from exc
    except yaml.YAMLError as exc:
        raise SweepError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise SweepError(f"{path}: expected a mapping of grid fields, got {type(raw).__name__}")
    try:
        grid = SweepGrid.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SweepError(f"{path}: {where}: {message}") from exc
    return grid, path.parent


@dataclass(frozen=True, slots=True)
class Task:
    """One run of the grid, with everything a worker needs."""

    key: str
    workload: str
    """The workload file's name (its format is read from it)."""
    workload_bytes: bytes
    scheduler: str
    policy: str
    cluster: str
    nodes: tuple[Node, ...]
    seed: int
    start_delay: float
    start_jitter: float
    fail_fraction: float
    source: str = ""
    """The workload file as the grid names it (what an error about it says)."""
    topology_penalty: tuple[tuple[str, float], ...] = ()
    """The grid's ``topologyPenalty``: (level label, penalty) in the levels' order, none of penalty 0
    (:func:`~kubeflux.sim.fabric.parse_penalty`)."""

    def point(self) -> dict[str, Any]:
        """The grid coordinates, as the merged report's first columns."""
        return {
            "workload": self.workload,
            "cluster": self.cluster,
            "scheduler": self.scheduler,
            "policy": self.policy,
            "seed": self.seed,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a run sends back: its summary row and ``jobs.csv``, or the error that stopped it."""

    key: str
    point: dict[str, Any]
    row: dict[str, Any] | None
    jobs_csv: str
    error: str
    seconds: float


def _slug(text: str) -> str:
    if text == NO_POLICY:
        return "nopolicy"
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-.")[:40] or "x"


def _has_policy(scheduler: str) -> bool:
    from kubeflux.scheduler.core import KubefluxScheduler
    from kubeflux.sim.baselines import create

    return isinstance(create(scheduler), KubefluxScheduler)


def plan(grid: SweepGrid, base: Path) -> list[Task]:
    """Every run of the grid, in grid order (workload, cluster, scheduler, policy, seed)."""
    from kubeflux.sim.inputs import nodes_from_options

    workloads: list[tuple[str, bytes]] = []
    sources: dict[str, str] = {}
    for index, name in enumerate(grid.workloads):
        path = base / name
        sources[path.name] = str(path)
        try:
            workloads.append((path.name, path.read_bytes()))
        except OSError as exc:
            raise SweepError(f"workloads.{index}: {path}: cannot read: {exc.strerror or exc}") from exc
    clusters: list[tuple[str, tuple[Node, ...]]] = []
    for index, shape in enumerate(grid.clusters):
        file = None if shape.file is None else base / shape.file
        try:
            built = nodes_from_options(
                file, shape.nodes, shape.cores_per_node, shape.memory_per_node, shape.gpus_per_node, shape.racks
            )
        except Exception as exc:  # the cluster reader's own errors name the file and line
            raise SweepError(f"clusters.{index}: {exc}") from exc
        clusters.append((shape.label(), tuple(built)))
    lifecycle = (grid.start_delay, grid.start_jitter, grid.fail_fraction)
    penalty = tuple(grid.topology_penalty.items())
    tasks: list[Task] = []
    for workload, content in workloads:
        for cluster, nodes in clusters:
            for scheduler in grid.schedulers:
                policies = grid.policies if _has_policy(scheduler) else [NO_POLICY]
                for policy in policies:
                    for seed in grid.seeds:
                        digest = hashlib.sha256()
                        digest.update(content)
                        # the whole point too: slugs of two long custom policies may read alike
                        digest.update(repr((workload, cluster, scheduler, policy, seed, nodes, lifecycle)).encode())
                        if penalty:  # (not there before: the keys of runs without it are kept)
                            digest.update(repr(penalty).encode())
                        readable = "_".join(_slug(p) for p in (workload, cluster, scheduler, policy, f"seed{seed}"))
                        key = f"{readable}_{digest.hexdigest()[:10]}"
                        tasks.append(
                            Task(
                                key,
                                workload,
                                content,
                                scheduler,
                                policy,
                                cluster,
                                nodes,
                                seed,
                                *lifecycle,
                                sources[workload],
                                penalty,
                            )
                        )
    return tasks


def run_task(task: Task) -> Outcome:
    """Run one simulation (on a worker); never raises: an error is part of the outcome."""
    began = time.perf_counter()
    try:
        row, jobs_csv = _simulate(task)
    except Exception:
        return Outcome(task.key, task.point(), None, "", traceback.format_exc(), time.perf_counter() - began)
    return Outcome(task.key, task.point(), row, jobs_csv, "", time.perf_counter() - began)


def _simulate(task: Task) -> tuple[dict[str, Any], str]:
    from kubeflux.scheduler.core import KubefluxScheduler
    from kubeflux.scheduler.topology import DEFAULT_LEVELS
    from kubeflux.sim import metrics
    from kubeflux.sim.cluster import Lifecycle
    from kubeflux.sim.command import schedulers_for
    from kubeflux.sim.driver import SimulationOptions, simulate
    from kubeflux.sim.fabric import Fabric
    from kubeflux.sim.workloads import load_workload
    from kubeflux.sim.workloads.mapping import map_to_cluster

    with tempfile.TemporaryDirectory(prefix="kubeflux-sweep-") as scratch:
        path = Path(scratch) / task.workload
        path.write_bytes(task.workload_bytes)
        try:
            loaded = load_workload(path)
        except Exception as exc:  # said of the user's file, not of this scratch copy
            raise SweepError(str(exc).replace(str(path), task.source or task.workload)) from None
        nodes = list(task.nodes)
        mapped = map_to_cluster(loaded, nodes)
        schedulers, primary = schedulers_for(task.scheduler, mapped)
        core = schedulers[primary]
        if task.policy != NO_POLICY and isinstance(core, KubefluxScheduler):
            core.profile.policy = task.policy
        lifecycle = Lifecycle(task.start_delay, task.start_jitter, task.fail_fraction, seed=task.seed)
        fabric = Fabric.of(DEFAULT_LEVELS, dict(task.topology_penalty))
        options = SimulationOptions(lifecycle=lifecycle, fabric=fabric)
        run = simulate(mapped, nodes, schedulers, primary=primary, label=task.scheduler, options=options)
        jobs = metrics.write_jobs_csv(run, Path(scratch) / "jobs.csv").read_text(encoding="utf-8")
        row = dict(metrics.summarize(run))
        row["problems"] = len(run.problems)
        return row, jobs


# ---------------------------------------------------------------------------------------------------- running


def read_summary(path: Path) -> dict[str, Any] | None:
    """A run's ``summary.json``, or None when it is missing or damaged (then the run is done again)."""
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(written, dict) or not isinstance(written.get("row"), dict):
        return None
    return written


def done_keys(out: Path) -> set[str]:
    """The runs already finished in ``out`` (their summary is written whole)."""
    runs = out / "runs"
    if not runs.is_dir():
        return set()
    return {p.parent.name for p in runs.glob("*/summary.json") if read_summary(p) is not None}


def record(outcome: Outcome, out: Path) -> None:
    """Write one outcome under ``out/runs/<key>/``: the summary and ``jobs.csv``, or ``error.txt``."""
    folder = out / "runs" / outcome.key
    folder.mkdir(parents=True, exist_ok=True)
    if outcome.row is None:
        (folder / "error.txt").write_text(outcome.error, encoding="utf-8")
        (folder / "summary.json").unlink(missing_ok=True)
        return
    (folder / "error.txt").unlink(missing_ok=True)
    (folder / "jobs.csv").write_text(outcome.jobs_csv, encoding="utf-8")
    summary = {"point": outcome.point, "row": outcome.row, "seconds": round(outcome.seconds, 3)}
    # written last, and whole: its presence is what marks the run done
    staging = folder / "summary.json.partial"
    staging.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    staging.replace(folder / "summary.json")


def execute(
    tasks: Sequence[Task],
    *,
    workers: int = 2,
    dask: str | None = None,
    on_done: Callable[[Outcome], None] = lambda outcome: None,
) -> list[Outcome]:
    """Run ``tasks`` (local processes, or the Dask scheduler at ``dask``); ``on_done`` sees each as it ends."""
    outcomes: list[Outcome] = []

    def finish(outcome: Outcome) -> None:
        outcomes.append(outcome)
        on_done(outcome)

    if not tasks:
        return outcomes
    if dask is not None:
        _on_dask(tasks, dask, finish)
    elif workers <= 1:
        for task in tasks:
            finish(run_task(task))
    else:
        # a worker that dies (killed, out of memory) breaks the whole pool: what it left unfinished runs again in
        # a new pool, and what breaks a pool twice runs alone, where only the run that kills its worker fails
        broken = _on_pool(tasks, workers, finish)
        if broken:
            broken = _on_pool(broken, workers, finish)
        for task in broken:
            if _on_pool([task], 1, finish):
                finish(Outcome(task.key, task.point(), None, "", _LOST, 0.0))
    return outcomes


_LOST = "the worker process running it died (killed, or out of memory?)"


def pool_size(workers: int, tasks: int) -> int:
    """The processes of a local pool given ``workers`` for ``tasks`` runs: never more than there are runs (a
    process for none would only take memory and time to start), at least one."""
    return max(1, min(workers, tasks))


def _on_pool(tasks: Sequence[Task], workers: int, finish: Callable[[Outcome], None]) -> list[Task]:
    """Run ``tasks`` on a new pool of at most ``workers`` processes (:func:`pool_size`); the tasks a broken pool
    left unfinished."""
    pool = ProcessPoolExecutor(max_workers=pool_size(workers, len(tasks)))
    broken: list[Task] = []
    try:
        futures = {pool.submit(run_task, task): task for task in tasks}
        for future in as_completed(futures):
            try:
                outcome = future.result()
            except BrokenProcessPool:
                broken.append(futures[future])
                continue
            finish(outcome)
    except BaseException:  # Ctrl-C, SIGTERM (see sweep_command), an error recording: stop, run nothing more
        running = list((pool._processes or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in running:  # what runs now is lost anyway: do not wait for it
            process.terminate()
        raise
    pool.shutdown(wait=True)
    return broken


def _result(get: Callable[[], Outcome], task: Task) -> Outcome:
    """The outcome of a finished future; a worker lost on the way (killed, out of memory) is an error outcome."""
    try:
        return get()
    except Exception as exc:
        return Outcome(task.key, task.point(), None, "", f"the worker running it was lost: {exc!r}", 0.0)


def _run_shipped(task: Task, content: bytes, nodes: tuple[Node, ...]) -> Outcome:
    """:func:`run_task` on a Dask worker, the workload and nodes sent once for all the tasks that use them."""
    return run_task(dataclasses.replace(task, workload_bytes=content, nodes=nodes))


def _on_dask(tasks: Iterable[Task], address: str, finish: Callable[[Outcome], None]) -> None:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError as exc:
        raise SweepError("--dask needs dask.distributed: pip install 'kubeflux[dask]'") from exc
    try:
        client = Client(address, timeout=30)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        raise SweepError(f"--dask {address}: cannot reach a Dask scheduler there: {exc}") from exc
    with client:
        listed = list(tasks)
        # each workload and each cluster goes to the cluster once; the tasks refer to it
        contents = {t.workload: t.workload_bytes for t in listed}
        clusters = {t.cluster: t.nodes for t in listed}
        sent_contents = {name: client.scatter(data) for name, data in contents.items()}  # type: ignore[no-untyped-call]
        sent_clusters = {name: client.scatter(nodes) for name, nodes in clusters.items()}  # type: ignore[no-untyped-call]
        light = [dataclasses.replace(t, workload_bytes=b"", nodes=()) for t in listed]
        futures = client.map(
            _run_shipped,
            light,
            [sent_contents[t.workload] for t in listed],
            [sent_clusters[t.cluster] for t in listed],
            key=[f"kubeflux-sweep-{task.key}" for task in listed],
            pure=False,
        )
        by_key = {future.key: task for future, task in zip(futures, listed, strict=True)}
        for future in dask_completed(futures):  # type: ignore[no-untyped-call]
            finish(_result(future.result, by_key[future.key]))
