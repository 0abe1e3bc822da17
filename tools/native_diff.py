"""Differential check: the compiled engine and scheduler (mypyc) must give the pure-Python sources' answers.

Plays whole workloads through the real simulator with the real schedulers and prints one line per case: its name
and a digest of everything a user sees of the run (each job's start, end, state and resource ids; each pod's node,
bind, run and end times, phase, reason and message; the run's problems). Run it twice and compare::

    python tools/native_diff.py > compiled.txt
    KUBEFLUX_PURE=1 python tools/native_diff.py > pure.txt
    diff compiled.txt pure.txt

``--compare`` does both (the pure run in a child process) and exits 1 naming the cases that differ. The first
line says which engine ran (``kubeflux._native.describe``), so a run that silently fell back to pure Python shows.

    python tools/native_diff.py [--compare] [--seeds N] [--dump CASE]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from kubeflux import _native
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import Simulation
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, Workload
from kubeflux.sim.workloads.synthetic import SyntheticSpec, generate

_TIMING = re.compile(r" \(\d+\.\d+ s\)")
SCHEDULERS = ("kubeflux", "kubeflux-fcfs", "kubeflux-conservative")
KINDS = (JobKind.TRACE, JobKind.POD_GROUP, JobKind.POD, JobKind.JOB)


def _mixed_nodes(count: int) -> list[Node]:
    """Nodes of a few shapes: whole and fractional cores, gpus on some, small memory on some."""
    nodes: list[Node] = []
    for i in range(count):
        allocatable = {CPU: [8000, 4000, 16000, 3500][i % 4], MEMORY: [32, 8, 64][i % 3] * 2**30, "pods": 110}
        if i % 5 == 0:
            allocatable[GPU] = 2
        nodes.append(Node(f"n{i}", allocatable=allocatable, labels={"zone": "ab"[i % 2]}))
    return nodes


def _record_text(record: RunRecord) -> str:
    """Everything of a run a user sees, as text (wall times and other measurements left out)."""
    lines = [f"stopped {record.stopped!r} bound {record.pods_bound}"]
    lines += [f"problem {problem}" for problem in record.problems]
    for job in record.jobs:
        lines.append(
            f"job {job.job_id} {job.final_state} {job.starting_time} {job.finish_time} {job.first_bind_time} "
            f"{job.last_bind_time} {job.allocated_resources} {job.attempts} {job.reason!r}"
        )
    for pod in record.pods:
        lines.append(
            f"pod {pod.pod} {pod.node} {pod.bind_time} {pod.running_time} {pod.compute_time} {pod.end_time} "
            f"{pod.phase} {pod.reason} {pod.exit_code} {pod.resources} {pod.message!r}"
        )
    return "\n".join(lines)


def _run(workload: Workload, nodes: list[Node], scheduler: str) -> str:
    sched = create(scheduler)
    sim = Simulation(workload, nodes, {sched.name: sched})
    text = _record_text(sim.run())
    # What kubeflux wrote on the pods (its allocation annotations: start, duration, cores) and its log.
    annotations = [f"{key} {sorted(sp.pod.annotations.items())}" for key, sp in sorted(sim.cluster.pods.items())]
    log = [_TIMING.sub("", line) for line in getattr(sched, "log", ())]  # a match's time measured: left out
    return "\n".join([text, *annotations, *(f"log {line}" for line in log)])


def cases(seeds: int, only: str = "") -> Iterator[tuple[str, Callable[[], str]]]:
    """(name, run) of every case: synthetic workloads of every kind on uniform and mixed clusters under each
    kubeflux queue policy, then a steady-state cluster near full load (as /work/scratch/steady.py)."""
    for seed in range(seeds):
        for kind in KINDS:
            for scheduler in SCHEDULERS:
                uniform = uniform_cluster(16, 8)
                spec = SyntheticSpec(jobs=60, mean_interarrival=15.0, max_size=32, mean_runtime=300.0, kind=kind)
                workload = map_to_cluster(generate(spec, seed=seed), uniform)
                yield f"uniform-{kind}-{scheduler}-{seed}", partial(_run, workload, uniform, scheduler)
                mixed = _mixed_nodes(12)
                requests = {CPU: [500, 1000, 1500, 3000][seed % 4], MEMORY: 2**30 * (1 + seed % 3)}
                if seed % 2:
                    requests[GPU] = 1
                spec = replace(
                    spec, pod_requests=requests, max_size=8, schedule_timeout_seconds=600.0, mean_interarrival=3.0
                )
                workload = map_to_cluster(generate(spec, seed=seed + 100), mixed)
                yield f"mixed-{kind}-{scheduler}-{seed}", partial(_run, workload, mixed, scheduler)
    if not only or "scenario" in only:  # (drawn only when asked for: a filter of another kind skips them)
        yield from _scenario_cases(seeds)
    if only and "steady" not in only:
        return
    nodes = uniform_cluster(200, 64)
    spec = SyntheticSpec(jobs=1000, mean_interarrival=1.1 * 10_000 / 200, max_size=1024, mean_runtime=3600.0)
    steady = map_to_cluster(generate(spec, seed=1), nodes)
    yield "steady-200x1000-kubeflux", lambda: _run(steady, nodes, "kubeflux")


def _scenario_cases(seeds: int) -> Iterator[tuple[str, Callable[[], str]]]:
    """The property tests' whole random workloads (tests/scheduler/_strategies.py: gangs, lone pods,
    kube-default's pods, nodes added, removed, cordoned, resized, tainted, kubeflux restarted), drawn the same in
    every process (hypothesis, derandomized), played with no invariant checked, one per policy and example."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    # Imported by name: the tests are not type-checked with the tools (mypy would follow a plain import into them).
    _workload: Any = importlib.import_module("tests.scheduler._workload")
    scenarios = importlib.import_module("tests.scheduler._strategies").scenarios

    for backfill in ("fcfs", "easy", "conservative"):
        drawn = _draw(scenarios(backfill, jobs=10, changes_=5), 10 * seeds)
        for i, scenario in enumerate(drawn):

            def play(scenario: Any = scenario) -> str:
                outcome = _workload.run(scenario, checks=())
                pods = sorted(outcome.simulation.cluster.pods.values(), key=lambda sp: sp.pod.key)
                lines = [
                    f"{sp.pod.key} {sp.pod.uid} {sp.pod.node_name} {sp.bound_at} {sp.finished_at} {sp.pod.phase} "
                    f"{sp.cores}"
                    for sp in pods
                ]
                return "\n".join([*outcome.problems, *lines])

            yield f"scenario-{backfill}-{i}", play


def _draw(strategy: Any, count: int) -> list[Any]:
    """``count`` examples of a hypothesis strategy, the same ones in every process (derandomized)."""
    from hypothesis import HealthCheck, given, settings

    drawn: list[Any] = []
    checks = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

    @settings(max_examples=count, derandomize=True, database=None, deadline=None, suppress_health_check=checks)
    @given(strategy)
    def collect(example: Any) -> None:
        drawn.append(example)

    collect()
    return drawn


def digests(seeds: int, only: str = "") -> dict[str, str]:
    """Case name -> the digest of its run, for the cases whose name contains ``only``."""
    return {name: hashlib.sha256(run().encode()).hexdigest()[:16] for name, run in cases(seeds, only) if only in name}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds per kind and scheduler")
    parser.add_argument("--compare", action="store_true", help="also run pure (a child process) and compare")
    parser.add_argument("--dump", help="print the whole text of this case instead of digests")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--json", action="store_true", help="print the digests as one JSON object")
    args = parser.parse_args()
    if args.dump:
        for name, run in cases(args.seeds):
            if name == args.dump:
                print(run())
                return 0
        raise SystemExit(f"no case {args.dump!r}")
    from kubeflux import match, scheduler, sim  # noqa: F401  (settles which engine runs, for describe())

    mine = digests(args.seeds, args.only)
    if args.json:
        print(json.dumps({"engine": _native.describe(), "digests": mine}))
        return 0
    print(_native.describe())
    for name, value in mine.items():
        print(f"{name} {value}")
    if not args.compare:
        return 0
    env = {**os.environ, "KUBEFLUX_PURE": "1"}
    child = [sys.executable, __file__, "--json", "--seeds", str(args.seeds), "--only", args.only]
    pure = json.loads(subprocess.run(child, env=env, capture_output=True, text=True, check=True).stdout)
    differ = [name for name, value in mine.items() if pure["digests"].get(name) != value]
    print(f"pure: {pure['engine']}".replace("\n", "; "))
    print(f"{len(mine) - len(differ)} of {len(mine)} cases identical" + (f"; differ: {differ}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
