"""Small workloads whose schedules are known, run through the real simulator."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob
from tests.shared import REPO


def one_core_nodes(count: int) -> list[Node]:
    return [Node(f"n{i}", allocatable={CPU: 1000, MEMORY: 2**30}) for i in range(count)]


def trace(*jobs: tuple[float, int, float, float]) -> Workload:
    """Trace jobs from (submit, processors, run time, requested time), numbered 1, 2, …"""
    return Workload(
        "test",
        [
            WorkloadJob(
                id=str(n),
                submit_time=submit,
                kind=JobKind.TRACE,
                name=f"j{n}",
                requested_processors=procs,
                run_time=run,
                requested_time=walltime,
            )
            for n, (submit, procs, run, walltime) in enumerate(jobs, start=1)
        ],
    )


def run(workload: Workload, nodes: list[Node], scheduler: Scheduler, **options: object) -> RunRecord:
    opts = SimulationOptions(**options)  # type: ignore[arg-type]
    return simulate(map_to_cluster(workload, nodes), nodes, {scheduler.name: scheduler}, options=opts)


def starts(record: RunRecord) -> dict[str, float | None]:
    return {j.job_id: j.starting_time for j in record.jobs}


EIGHT_8CORE = REPO / "examples" / "clusters" / "eight-8core.yaml"
"""8 nodes of 8 cores and 32 GiB (the preemption examples' cluster)."""


def gang_job_yaml(
    name: str,
    submit: float,
    run: int,
    ranks: int,
    cores: int = 8,
    priority: int | None = 0,
    policy: str = "",
    *,
    planned: bool = False,
    group: bool = True,
    node_selector: str = "",
    pod_annotations: str = "",
    memory: str = "1Gi",
) -> str:
    """A PodGroup of ``ranks`` and its ``batch/v1`` Job of as many pods of ``cores`` cores (and ``memory``),
    submitted at ``submit`` and running ``run`` seconds; ``priority``: the pods' (None: not stated); ``policy``: their
    ``preemptionPolicy``; ``planned``: kubeflux is told the run time (``kubeflux.io/duration``); ``group=False``: the
    Job alone, its pods in no group; ``node_selector``, ``pod_annotations``: the pods' (YAML flow text, e.g.
    ``{rack: r0}``, ``key: value``)."""
    labels = f"{{scheduling.x-k8s.io/pod-group: {name}}}" if group else "{}"
    annotations = f'pod-complete.stage.kwok.x-k8s.io/delay: "{run}s"'
    if planned:
        annotations += f', kubeflux.io/duration: "{run}"'
    if pod_annotations:
        annotations += f", {pod_annotations}"
    spec = "\n      nodeSelector: " + node_selector if node_selector else ""
    spec += "" if priority is None else f"\n      priority: {priority}"
    spec += f"\n      preemptionPolicy: {policy}" if policy else ""
    podgroup = f"""apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {{name: {name}, annotations: {{sim.kubeflux.io/submit-time: "{submit}"}}}}
spec: {{minMember: {ranks}}}
---
"""
    return (
        (podgroup if group else "")
        + f"""apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  annotations: {{sim.kubeflux.io/submit-time: "{submit}"}}
spec:
  parallelism: {ranks}
  completions: {ranks}
  template:
    metadata:
      labels: {labels}
      annotations: {{{annotations}}}
    spec:
      restartPolicy: Never{spec}
      containers:
        - name: main
          image: mpi
          resources: {{requests: {{cpu: "{cores}", memory: {memory}}}}}
"""
    )


def simulate_yaml(
    tmp_path: Path, scheduler: str, *docs: str
) -> tuple[dict[str, Any], dict[str, dict[str, str]], list[dict[str, str]]]:
    """``kubeflux simulate`` of the manifests ``docs`` on :data:`EIGHT_8CORE` under ``scheduler``: its summary row,
    ``jobs.csv`` by job and ``pods.csv``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "work.yaml").write_text("---\n".join(docs))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(tmp_path / "work.yaml"), "--cluster", str(EIGHT_8CORE)]
    result = CliRunner().invoke(app, [*args, "-s", scheduler, "-o", str(out)])
    assert result.exit_code == 0, result.output
    with (out / scheduler / "jobs.csv").open() as f:
        jobs = {row["job_id"]: row for row in csv.DictReader(f)}
    with (out / scheduler / "pods.csv").open() as f:
        pods = list(csv.DictReader(f))
    return json.loads((out / "summary.json").read_text())[0], jobs, pods
