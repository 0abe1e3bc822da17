"""Every resource in the outputs: GPUs and extended resources get ids of their own after the cores (in
``allocated_resources``, ``pods.csv`` and the Gantt), ``requested_number_of_resources`` counts what the job asked,
and utilization is reported per resource kind — through ``kubeflux simulate`` and the simulator."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from evalys.jobset import JobSet

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import simulate
from kubeflux.sim.metrics import summarize
from kubeflux.sim.resourceids import ResourceIds, ResourceKind
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from tests.shared import REPO

KWOK_NODES = REPO / "examples" / "clusters" / "four-gpu-nodes.yaml"


def kubecon_jobs(count: int, every: float) -> str:
    """Seed 004's load: Jobs of one pod asking 8 GPUs (``cpu: 10m``, 110Gi) for 72 s, tolerating KWOK's taint."""
    return "".join(
        f"""---
apiVersion: batch/v1
kind: Job
metadata:
  name: train-{n}
  annotations: {{sim.kubeflux.io/submit-time: "{n * every:g}"}}
spec:
  template:
    metadata:
      annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: 72s}}
    spec:
      tolerations: [{{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}}]
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          resources: {{requests: {{cpu: 10m, memory: 110Gi, nvidia.com/gpu: "8"}}}}
"""
        for n in range(count)
    )


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as stream:
        return list(csv.DictReader(stream))


SCHEDULERS = ("kubeflux", "kube-default", "coscheduling", "fcfs", "easy")


@pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning", "ignore:The inplace keyword")
def test_the_kubecon_scenario_runs_every_job_in_72_s_with_its_8_gpus_counted(tmp_path: Path) -> None:
    workload = tmp_path / "kubecon.yaml"
    workload.write_text(kubecon_jobs(50, 20.0))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "kubeflux.cli", "simulate", "--workload", str(workload), "--out", str(out)]
    command += ["--cluster", str(KWOK_NODES)]
    for name in SCHEDULERS:
        command += ["--scheduler", name]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "gpu" in result.stdout  # the table's GPU utilization column
    summary = {row["scheduler"]: row for row in read_csv(out / "summary.csv")}
    for name in SCHEDULERS:
        jobs = read_csv(out / name / "jobs.csv")
        assert len(jobs) == 50
        assert {float(row["job_completion_time"]) for row in jobs} == {72.0}
        assert {float(row["waiting_time"]) for row in jobs} == {0.0}
        assert {row["requested_number_of_resources"] for row in jobs} == {"8"}
        for row in jobs:  # 4 nodes x 5 cores: ids 0-19 are cores, 20-51 the GPUs, 8 per node
            low, high = (int(x) for x in row["allocated_resources"].split("-"))
            assert high - low == 7 and low >= 20 and (low - 20) % 8 == 0 and high <= 51
        # 50 jobs x 72 s x 8 GPUs over the 32 GPUs of the cluster until the last job ends at 49 x 20 + 72 s
        gpu = float(summary[name]["utilization[nvidia.com/gpu]"])
        assert gpu == pytest.approx(50 * 72 * 8 / (32 * (49 * 20 + 72)), abs=1e-6)
        assert float(summary[name]["useful_utilization[nvidia.com/gpu]"]) == gpu
        pods = read_csv(out / name / "pods.csv")
        assert [row["resources"] for row in pods] == [row["allocated_resources"] for row in jobs]
        assert len(JobSet.from_csv(str(out / name / "jobs.csv")).df) == 50  # evalys reads the GPU ids
    assert (out / "gantt.png").read_bytes()[:4] == b"\x89PNG"


def node(name: str, **extra: int) -> Node:
    return Node(name, allocatable={CPU: 4000, MEMORY: 2**34, "pods": 110, **extra})


def pod_job(name: str, requests: dict[str, int], run_time: float = 10.0, submit: float = 0.0) -> WorkloadJob:
    pod = PodTemplate(name=name, requests=requests, run_time=run_time)
    return WorkloadJob(id=name, submit_time=submit, kind=JobKind.POD, name=name, pods=[pod])


def test_gpus_and_extended_resources_get_ids_after_the_cores_and_count_as_asked() -> None:
    nodes = [node("n0", **{GPU: 2, "example.com/fpga": 4}), node("n1", **{GPU: 2})]
    jobs = [
        pod_job("fpga-gpu", {CPU: 2000, GPU: 1, "example.com/fpga": 3}),
        pod_job("gpu-only", {GPU: 2}),
        pod_job("sub-core", {CPU: 500}),
    ]
    scheduler = create("kube-default")  # by name at equal priority: fpga-gpu on n0 (its FPGAs), gpu-only on n1
    run = simulate(Workload("w", jobs), nodes, {scheduler.name: scheduler})
    layout = {kind.name: (kind.first, kind.count) for kind in run.resources}
    assert layout[CPU] == (0, 8) and layout[GPU] == (8, 4) and layout["example.com/fpga"] == (12, 4)
    assert layout[MEMORY] == (12 + 4, 0)  # an amount: no ids
    records = {job.job_id: job for job in run.jobs}
    assert [records[name].requested_number_of_resources for name in ("gpu-only", "fpga-gpu", "sub-core")] == [2, 6, 1]
    gpu_ids = set(records["gpu-only"].allocated_resources)
    assert len(gpu_ids) == 2 and gpu_ids <= set(range(8, 12))
    mixed = records["fpga-gpu"].allocated_resources
    assert [i for i in mixed if i < 8] and len(mixed) == 6
    assert len([i for i in mixed if 12 <= i < 16]) == 3  # the FPGAs of n0, the one node that has them
    assert records["sub-core"].allocated_resources == []  # shares a core: no id of its own
    figures = summarize(run)
    assert figures["utilization[nvidia.com/gpu]"] == pytest.approx(3 / 4)  # 3 of 4 GPUs for the whole makespan
    assert figures["utilization[example.com/fpga]"] == pytest.approx(3 / 4)


def test_two_pods_of_one_node_hold_different_gpu_ids_and_free_ones_are_reused() -> None:
    nodes = [node("n0", **{GPU: 4})]
    jobs = [pod_job("a", {GPU: 2}, 10.0), pod_job("b", {GPU: 2}, 20.0), pod_job("c", {GPU: 2}, 5.0, submit=1.0)]
    scheduler = create("kube-default")
    run = simulate(Workload("w", jobs), nodes, {scheduler.name: scheduler})
    ids = {job.job_id: job.allocated_resources for job in run.jobs}
    assert ids == {"a": [4, 5], "b": [6, 7], "c": [4, 5]}  # c waits for a's GPUs (cores 0-3 come first)


def test_the_id_layout_puts_cores_first_then_gpus_then_extended_kinds_by_name() -> None:
    ids = ResourceIds()
    ids.add_node({CPU: 2500, MEMORY: 1024, GPU: 1, "b.example/x": 2})
    ids.add_node({CPU: 1000, "a.example/y": 1, "ephemeral-storage": 10**12})
    assert ids.layout() == [
        ResourceKind(CPU, 0, 3, 3),
        ResourceKind(GPU, 3, 1, 1),
        ResourceKind("a.example/y", 4, 1, 1),
        ResourceKind("b.example/x", 5, 2, 2),
        ResourceKind("ephemeral-storage", 7, 0, 10**12),
        ResourceKind(MEMORY, 7, 0, 1024),
    ]
    assert ids.take(GPU, 0, 1) == [0] and ids.take(GPU, 1, 1) == []  # within the kind; node 1 has none
    ids.resize(1, {CPU: 1000}, {CPU: 1000, GPU: 2})  # node 1 gains 2 GPUs: new ids at the end of the kind
    assert sorted(ids.take(GPU, 1, 2)) == [1, 2]
