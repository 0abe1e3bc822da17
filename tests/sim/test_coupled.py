"""Coupled parallel jobs through the real simulator and ``kubeflux simulate``: a job of several pods that must run
together computes from its last required pod's Running; pods that ran before hold their resources idle
(``pods.csv``), allocated and useful utilization differ by that holding, a failed rank takes the others with it,
and a deadlock of idle-holding jobs stops the run and names them."""

from __future__ import annotations

import csv
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from kubeflux.sim.baselines import create
from kubeflux.sim.command import merge_workloads, schedulers_for
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.metrics import POD_COLUMNS, pod_cells, summarize
from kubeflux.sim.pods import Lifecycle, NodeOutage
from kubeflux.sim.records import FinalState, RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import Workload
from tests.sim._helpers import one_core_nodes, trace


def simulate_on(workload: Workload, nodes: int, scheduler: str, **options: object) -> RunRecord:
    cluster = one_core_nodes(nodes)
    opts = SimulationOptions(**options)  # type: ignore[arg-type]
    core = create(scheduler)
    return Simulation(map_to_cluster(workload, cluster), cluster, {core.name: core}, options=opts).run()


# Job 1 holds one of two cores until 100; job 2 (2 ranks, 50 s) arrives at 10. kube-default places one rank at
# once: it holds its core idle until the other rank runs at 100, then both compute to 150.
STAGGERED = trace((0, 1, 100, 100), (10, 2, 50, 50))


def test_kube_default_rank_that_runs_early_holds_its_core_idle_until_the_last_rank_runs() -> None:
    run = simulate_on(STAGGERED, 2, "kube-default")
    job = {j.job_id: j for j in run.jobs}["2"]
    assert (job.first_bind_time, job.starting_time, job.finish_time) == (10, 100, 150)
    assert job.final_state is FinalState.COMPLETED_SUCCESSFULLY
    pods = {p.pod: p for p in run.pods if p.job_id == "2"}
    early, late = pods["default/j2-0"], pods["default/j2-1"]
    assert (early.running_time, early.compute_time, early.end_time) == (10, 100, 150)
    assert (late.running_time, late.compute_time, late.end_time) == (100, 100, 150)
    assert early.reason == late.reason == "Completed"
    # 2 cores over 150 s: job 1 computes 100 core-s, job 2 holds 90 idle then computes 2 x 50.
    summary = summarize(run)
    assert summary["utilization"] == pytest.approx(290 / 300)
    assert summary["useful_utilization"] == pytest.approx(200 / 300)


def test_ranks_bound_together_but_running_after_different_start_delays_compute_from_the_last() -> None:
    lifecycle = Lifecycle(start_delay=1.0, start_jitter=30.0, seed=11)
    run = simulate_on(trace((0, 3, 100, 200)), 3, "kubeflux", lifecycle=lifecycle)
    (job,) = run.jobs
    running = sorted(p.running_time for p in run.pods if p.running_time is not None)
    assert len(running) == 3 and running[0] < running[-1]  # the draws differ
    assert job.starting_time == running[-1] and job.finish_time == running[-1] + 100
    assert {p.compute_time for p in run.pods} == {running[-1]} and {p.end_time for p in run.pods} == {job.finish_time}
    idle = {row[1]: row[POD_COLUMNS.index("idle_time")] for row in (pod_cells(p, 0.0) for p in run.pods)}
    assert sorted(idle.values()) == [pytest.approx(running[-1] - r) for r in reversed(running)]
    summary = summarize(run)  # every core allocated from the bind at 0 to the end; computing only the last 100 s
    assert summary["utilization"] == pytest.approx(1.0)
    assert summary["useful_utilization"] == pytest.approx(100 / job.finish_time)


def test_a_gang_scheduler_starts_the_ranks_together_so_nothing_is_held_idle() -> None:
    run = simulate_on(STAGGERED, 2, "kubeflux")
    job = {j.job_id: j for j in run.jobs}["2"]
    assert (job.first_bind_time, job.starting_time, job.finish_time) == (100, 100, 150)
    assert all(p.running_time == p.compute_time for p in run.pods)
    summary = summarize(run)
    assert summary["utilization"] == summary["useful_utilization"]


def test_without_coupling_each_rank_runs_its_own_run_time_as_the_served_kubelet_does() -> None:
    # j2-0 computes 10 → 60 on its own; j2-1 then takes the core it freed (job 1 still holds the other).
    run = simulate_on(STAGGERED, 2, "kube-default", couple=False)
    ends = {p.pod: p.end_time for p in run.pods if p.job_id == "2"}
    assert ends == {"default/j2-0": 60, "default/j2-1": 110}


def test_a_walltime_kill_counts_from_the_compute_start_for_every_rank() -> None:
    # Job 2 asks 30 s of walltime and needs 50: both ranks are killed at 100 + 30.
    run = simulate_on(trace((0, 1, 100, 100), (10, 2, 50, 30)), 2, "kube-default")
    job = {j.job_id: j for j in run.jobs}["2"]
    assert (job.starting_time, job.finish_time, job.final_state) == (100, 130, FinalState.COMPLETED_WALLTIME_REACHED)
    assert {p.reason for p in run.pods if p.job_id == "2"} == {"DeadlineExceeded"}


def test_a_rank_lost_with_its_node_takes_the_other_ranks_with_it() -> None:
    outage = NodeOutage("n0", down_at=20.0)
    run = simulate_on(trace((0, 2, 100, 100)), 2, "kubeflux", outages=[outage])
    (job,) = run.jobs
    assert (job.starting_time, job.finish_time, job.final_state) == (0, 20, FinalState.COMPLETED_KILLED)
    assert sorted(p.reason for p in run.pods) == ["NodeLost", "PeerFailed"]
    peer = next(p for p in run.pods if p.reason == "PeerFailed")
    assert peer.message == "pod default/j1-0 of the coupled job ended (NodeLost)"


def test_a_crashing_rank_fails_the_job_and_the_others_end_with_it() -> None:
    run = simulate_on(trace((0, 4, 100, 100)), 4, "kubeflux", lifecycle=Lifecycle(pod_failure_fraction=1.0, seed=3))
    (job,) = run.jobs
    assert job.final_state is FinalState.COMPLETED_FAILED
    reasons = sorted(p.reason for p in run.pods)
    assert reasons == ["Error", "PeerFailed", "PeerFailed", "PeerFailed"]
    assert len({p.end_time for p in run.pods}) == 1  # all end when the first rank crashed


def test_the_same_seed_gives_the_same_pods_csv_rows() -> None:
    def pods() -> list[object]:
        lifecycle = Lifecycle(start_delay=1.0, start_jitter=9.0, seed=7)
        return simulate_on(
            trace((0, 3, 40, 40), (5, 2, 20, 20), (6, 1, 10, 10)), 3, "kube-default", lifecycle=lifecycle
        ).pods

    assert pods() == pods()


DEADLOCK = """\
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: a}
spec: {minMember: 2}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: b}
spec: {minMember: 2}
"""


def _rank(group: str, index: int, priority: int) -> str:
    # The first rank of each group has a higher priority: kube-default's queue takes a-0 and b-0 first.
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {group}-{index}
  labels: {{scheduling.x-k8s.io/pod-group: {group}}}
  annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: 60s}}
spec:
  priority: {priority}
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def simulate_cli(tmp_path: Path, workload: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "workload.yaml"
    path.write_text(workload)
    command = [
        sys.executable,
        "-m",
        "kubeflux.cli",
        "simulate",
        "--workload",
        str(path),
        "--out",
        str(tmp_path / "out"),
    ]
    return subprocess.run([*command, *args], capture_output=True, text=True, check=False, timeout=300)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as stream:
        return list(csv.DictReader(stream))


def test_kube_default_placing_half_of_two_gangs_on_two_slots_is_a_deadlock_reported_with_the_jobs(
    tmp_path: Path,
) -> None:
    workload = DEADLOCK + "".join(_rank(g, i, 10 if i == 0 else 0) for g in "ab" for i in range(2))
    result = simulate_cli(
        tmp_path, workload, "--nodes", "1", "--cores-per-node", "2", "-s", "kube-default", "-s", "kubeflux"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = tmp_path / "out"
    problems = (out / "problems.txt").read_text()
    assert "[kube-default] deadlock: the run stopped at 0 s" in problems  # at once, not after the idle guard
    assert "default/a (1 of 2 pods running), default/b (1 of 2 pods running)" in problems
    assert "kubeflux]" not in problems
    stuck = read_csv(out / "kube-default" / "jobs.csv")
    assert [row["final_state"] for row in stuck] == ["NOT_FINISHED", "NOT_FINISHED"]
    pods = {row["pod"]: row for row in read_csv(out / "kube-default" / "pods.csv")}
    assert pods["default/a-0"]["running_time"] == "0.0" and pods["default/a-0"]["compute_time"] == ""
    assert pods["default/a-1"]["bind_time"] == "" and pods["default/a-1"]["resources"] == ""
    assert "Insufficient cpu" in pods["default/a-1"]["message"]  # why it waits, as the scheduler said
    done = read_csv(out / "kubeflux" / "jobs.csv")
    assert [row["final_state"] for row in done] == ["COMPLETED_SUCCESSFULLY"] * 2
    assert sorted(float(row["starting_time"]) for row in done) == [0, 60]


COUPLED_JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {{name: mpi}}
spec:
  completions: 2
  parallelism: 2
  template:
    metadata:
      annotations:
        pod-complete.stage.kwok.x-k8s.io/delay: 30s
        sim.kubeflux.io/coupled: "{coupled}"
    spec:
      restartPolicy: Never
      containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: blocker, annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: 50s}}}}
spec:
  priority: 10
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
"""


@pytest.mark.parametrize(("coupled", "start", "ends"), [("true", 50, {80}), ("false", 0, {30, 60})])
def test_a_job_annotated_coupled_computes_when_its_last_pod_runs(
    tmp_path: Path, coupled: str, start: float, ends: set[float]
) -> None:
    # Two cores; the blocker holds one for 50 s. Coupled, the first pod waits for the second (Running at 50) and
    # both compute to 80; not coupled, the first computes 0 → 30 and the second takes its core, 30 → 60.
    result = simulate_cli(
        tmp_path, COUPLED_JOB.format(coupled=coupled), "--nodes", "1", "--cores-per-node", "2", "-s", "kube-default"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = {row["job_id"]: row for row in read_csv(tmp_path / "out" / "kube-default" / "jobs.csv")}
    assert float(jobs["default/mpi"]["starting_time"]) == start
    pods = [row for row in read_csv(tmp_path / "out" / "kube-default" / "pods.csv") if row["job_id"] == "default/mpi"]
    assert {float(row["end_time"]) for row in pods} == ends


def test_a_coupled_annotation_that_is_not_true_or_false_rejects_the_job_naming_it(tmp_path: Path) -> None:
    result = simulate_cli(
        tmp_path, COUPLED_JOB.format(coupled="yes"), "--nodes", "1", "--cores-per-node", "2", "-s", "kubeflux"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    jobs = {row["job_id"]: row for row in read_csv(tmp_path / "out" / "kubeflux" / "jobs.csv")}
    assert jobs["default/mpi"]["final_state"] == "REJECTED"
    problems = (tmp_path / "out" / "problems.txt").read_text()
    assert 'annotation sim.kubeflux.io/coupled: must be "true" or "false", got \'yes\'' in problems


@pytest.mark.parametrize("scheduler", ["kube-default", "kubeflux", "coscheduling"])
def test_no_two_jobs_of_the_demo_hold_one_resource_over_the_same_span(scheduler: str) -> None:
    # The symptom: uncoupled (couple=False fails this for kube-default), a job's early rank ran and ended
    # on its own, so the job's [start, finish] covered ids another job took meanwhile. Coupled, every rank holds
    # its ids over the whole span.
    data = resources.files("kubeflux") / "data" / "demo"
    with resources.as_file(data) as folder:
        loaded = merge_workloads([load_workload(folder / "hpc-mix.swf"), load_workload(folder / "services.yaml")])
    nodes = uniform_cluster(16, 16, "64Gi")
    workload = map_to_cluster(loaded, nodes)
    schedulers, primary = schedulers_for(scheduler, workload)
    run = Simulation(workload, nodes, schedulers, primary=primary).run()
    holders: dict[int, list[tuple[float, float, str]]] = {}
    for job in run.jobs:
        if job.starting_time is not None:
            end = job.finish_time if job.finish_time is not None else float("inf")
            for rid in job.allocated_resources:
                holders.setdefault(rid, []).append((job.starting_time, end, job.job_id))
    overlaps = [
        (rid, a[2], b[2])
        for rid, spans in holders.items()
        for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False)
        if b[0] < a[1]
    ]
    assert overlaps == []
    figures = summarize(run)
    assert figures["not_finished"] == 0
    if scheduler == "kube-default":  # its ranks that ran early held cores idle: allocated, not useful
        assert float(figures["useful_utilization"]) < float(figures["utilization"]) - 0.1
    else:  # gangs start together: what is allocated computes
        assert figures["useful_utilization"] == figures["utilization"]


def test_a_pod_group_with_fewer_pods_than_its_min_member_never_computes_and_says_so(tmp_path: Path) -> None:
    workload = (
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: short}\nspec: {minMember: 3}\n"
    )
    workload += "".join(_rank("short", i, 0) for i in range(2))
    result = simulate_cli(tmp_path, workload, "--nodes", "2", "--cores-per-node", "4", "-s", "kube-default")
    assert result.returncode == 3, result.stderr[-2000:]  # nothing finished: an error, not a comparison
    assert "no job finished under any scheduler" in result.stdout
    problems = (tmp_path / "out" / "problems.txt").read_text()
    assert "PodGroup default/short has minMember 3 but only 2 pods in the file" in problems
    assert "(or do not exist): default/short (2 of 3 pods running)" in problems
