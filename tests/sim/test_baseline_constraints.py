"""The HPC baselines (fcfs, easy) place pods only where kube-default would: taints and tolerations (KWOK's tainted
nodes), node selectors and affinity, cordoned and NotReady nodes, the pod limit. Scenarios through the simulator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kubeflux.scheduler.objects import (
    CPU,
    GPU,
    MEMORY,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from kubeflux.sim.workloads.synthetic import preset

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KWOK_TOLERATION = Toleration(key="kwok.x-k8s.io/node", operator="Exists", effect="NoSchedule")
HPC = ("fcfs", "easy")


KEEP = SimulationOptions(keep_events=True)


def failures(sim: Simulation) -> list[str]:
    return [e.message for e in sim.cluster.kube_events if e.reason == "FailedScheduling"]


def run(workload: Workload, nodes: list[Node], name: str) -> tuple[RunRecord, dict[str, str]]:
    """The run's record and where each pod was bound (pod name → node)."""
    scheduler = create(name)
    sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=KEEP)
    record = sim.run()
    placed = {}
    for event in sim.cluster.kube_events:
        if event.reason == "Scheduled":
            pod, node = event.message.removeprefix("Successfully assigned ").split(" to ")
            placed[pod.split("/")[1]] = node
    return record, placed


def pods(*templates: PodTemplate, every: float = 1.0) -> Workload:
    """One lone-pod job per template, one every ``every`` seconds."""
    jobs = [
        WorkloadJob(id=t.name, submit_time=n * every, kind=JobKind.POD, name=t.name, pods=[t])
        for n, t in enumerate(templates)
    ]
    return Workload("constraints", jobs)


def node(name: str, **fields: object) -> Node:
    return Node(name, allocatable={CPU: 1000, MEMORY: 2**30, "pods": 110}, **fields)  # type: ignore[arg-type]


def one_core(name: str, run_time: float = 100.0, **fields: object) -> PodTemplate:
    return PodTemplate(name, {CPU: 1000}, run_time, **fields)  # type: ignore[arg-type]


def kubecon_workload(tolerate: bool, jobs: int = 12) -> Workload:
    workload = preset("seed004-jobs", mean_interarrival=20.0, jobs=jobs)
    for job in workload.jobs:  # the preset's pods tolerate KWOK's taint: say so, or take it away
        job.pods = [replace(p, tolerations=(KWOK_TOLERATION,) if tolerate else ()) for p in job.pods]
    return workload


@pytest.mark.parametrize("name", [*HPC, "kube-default", "coscheduling", "kubeflux"])
def test_the_kubecon_scenario_on_tainted_kwok_nodes_runs_every_job_at_once(name: str) -> None:
    # 4 KWOK nodes of 8 GPUs, all tainted kwok.x-k8s.io/node=fake:NoSchedule; one 8-GPU pod of 72 s every 20 s,
    # tolerating the taint: each job starts on arrival and takes 72 s (it bound nothing under fcfs and easy).
    nodes = read_cluster(EXAMPLES / "clusters" / "four-gpu-nodes.yaml")
    assert all(n.taints for n in nodes)
    record, _ = run(kubecon_workload(tolerate=True), nodes, name)
    assert record.pods_bound == 12
    assert [j.starting_time for j in record.jobs] == [20.0 * n for n in range(12)]
    assert {j.finish_time - j.submission_time for j in record.jobs if j.finish_time is not None} == {72.0}


@pytest.mark.parametrize("name", HPC)
def test_pods_that_tolerate_no_node_are_rejected_with_the_taint_named(name: str) -> None:
    # Without the toleration no node can ever take the pods: rejected (not blocked for ever, binding nothing).
    nodes = read_cluster(EXAMPLES / "clusters" / "four-gpu-nodes.yaml")
    sim = Simulation(kubecon_workload(tolerate=False, jobs=3), nodes, {name: create(name)}, options=KEEP)
    record = sim.run()
    assert record.pods_bound == 0
    assert [j.final_state for j in record.jobs] == ["REJECTED"] * 3
    assert "4 node(s) had untolerated taint(s)" in failures(sim)[0]


@pytest.mark.parametrize("name", [*HPC, "kube-default"])
def test_a_tolerating_pod_may_use_a_tainted_node_and_others_may_not(name: str) -> None:
    nodes = [node("tainted", taints=(Taint("dedicated", "gpu"),)), node("plain")]
    tolerating = one_core("tol", tolerations=(Toleration(key="dedicated", value="gpu"),))
    workload = pods(one_core("a"), tolerating, one_core("b"))
    record, placed = run(workload, nodes, name)
    assert placed["a"] == "plain" and placed["tol"] == "tainted"
    assert record.jobs[2].starting_time == 100.0  # b waits for the plain node: the tainted one is not for it


@pytest.mark.parametrize("name", [*HPC, "kube-default"])
def test_node_selector_and_required_affinity_choose_the_node(name: str) -> None:
    nodes = [node("n0", labels={"zone": "a"}), node("n1", labels={"zone": "b"}), node("n2", labels={"zone": "c"})]
    affinity = (NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("c",)),)),)
    workload = pods(one_core("sel", node_selector={"zone": "b"}), one_core("aff", required_node_affinity=affinity))
    _, placed = run(workload, nodes, name)
    assert placed == {"sel": "n1", "aff": "n2"}


@pytest.mark.parametrize("name", HPC)
def test_a_selector_no_node_matches_is_rejected_and_later_jobs_run(name: str) -> None:
    workload = pods(one_core("nowhere", node_selector={"zone": "mars"}), one_core("fine"))
    scheduler = create(name)
    sim = Simulation(workload, [node("n0", labels={"zone": "a"})], {scheduler.name: scheduler}, options=KEEP)
    record = sim.run()
    assert [j.final_state for j in record.jobs] == ["REJECTED", "COMPLETED_SUCCESSFULLY"]
    assert "1 node(s) didn't match Pod's node affinity/selector" in failures(sim)[0]


@pytest.mark.parametrize("name", [*HPC, "kube-default"])
def test_cordoned_and_not_ready_nodes_take_only_pods_tolerating_their_taints(name: str) -> None:
    nodes = [node("cordoned", unschedulable=True), node("down", ready=False), node("up")]
    everything = one_core("any", tolerations=(Toleration(operator="Exists"),))
    workload = pods(one_core("a", run_time=10.0), one_core("b", run_time=10.0), everything, every=0.0)
    record, placed = run(workload, nodes, name)
    assert placed["a"] == placed["b"] == "up"
    assert record.jobs[1].starting_time == 10.0
    assert placed["any"] in ("cordoned", "down")  # tolerating every taint, it may go anywhere free


@pytest.mark.parametrize("name", [*HPC, "kube-default"])
def test_the_pod_limit_of_a_node_is_honoured(name: str) -> None:
    # Two nodes of 8 cores, the first taking at most 2 pods: the third pod goes to the second node.
    nodes = [
        Node("small", allocatable={CPU: 8000, MEMORY: 2**30, "pods": 2}),
        Node("big", allocatable={CPU: 8000, MEMORY: 2**30, "pods": 110}),
    ]
    workload = pods(*(one_core(f"p{i}") for i in range(4)), every=0.0)
    _, placed = run(workload, nodes, name)
    assert sum(1 for n in placed.values() if n == "small") <= 2
    assert len(placed) == 4


def test_gpu_pods_without_tolerations_use_the_fast_path_and_skip_a_full_node() -> None:
    nodes = [Node(f"g{i}", allocatable={CPU: 4000, MEMORY: 2**34, GPU: 8, "pods": 110}) for i in range(2)]
    workload = pods(*(PodTemplate(f"p{i}", {GPU: 8}, 50.0) for i in range(3)), every=0.0)
    record, placed = run(workload, nodes, "easy")
    assert (placed["p0"], placed["p1"]) == ("g0", "g1") and record.jobs[2].starting_time == 50.0
