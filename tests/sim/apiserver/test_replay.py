"""A workload replayed through the API in virtual time gives the schedule ``kubeflux simulate`` gives.

Each case runs the same files twice: in the simulator (``simulate``'s driver), and through the served cluster
(``cluster serve --clock virtual --workload … --until-done``: objects created through the store at their submit
times, the in-process schedulers binding through ``pods/binding``, the simulated kubelet writing pod status), and
compares every job's record: final state, first bind, start, end, and the cores it ran on (so its nodes).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.command import merge_workloads
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import read_cluster, uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import Workload
from tests.shared import REPO, SHARED
from tests.sim.apiserver._served import both, replayed, schedule

EXAMPLES = REPO / "examples"
DEMO = REPO / "src" / "kubeflux" / "data" / "demo"
HPC2N = SHARED / "traces" / "HPC2N-2002-2.2.first3170.swf"
ONE_WORKER = EXAMPLES / "clusters" / "one-worker.yaml"

CASES = {
    "seed-000-pi-demo": ([EXAMPLES / "workloads" / "pi-demo.yaml"], ONE_WORKER),
    "mixed-jobs-on-cpu-nodes": ([EXAMPLES / "workloads" / "mixed-jobs.yaml"], EXAMPLES / "clusters" / "cpu-nodes.yaml"),
    "mixed-jobs-on-4x16": ([EXAMPLES / "workloads" / "mixed-jobs.yaml"], (4, 16)),
    "small-swf": ([EXAMPLES / "workloads" / "small.swf"], (4, 16)),
    "apiserver-pod": ([EXAMPLES / "apiserver" / "pod.yaml"], (4, 16)),
    "apiserver-job": ([EXAMPLES / "apiserver" / "job.yaml"], (4, 16)),
    "apiserver-podgroup": ([EXAMPLES / "apiserver" / "podgroup.yaml"], (4, 16)),
    "demo-workload": ([DEMO / "hpc-mix.swf", DEMO / "services.yaml"], (16, 16)),
    "urgent-gang-preempts": ([EXAMPLES / "workloads" / "urgent-gang.yaml"], EXAMPLES / "clusters" / "eight-8core.yaml"),
    "urgent-gang-guarded": (
        [EXAMPLES / "workloads" / "urgent-gang-guarded.yaml"],
        EXAMPLES / "clusters" / "eight-8core.yaml",
    ),
    "urgent-gang-timed": (  # a class and budgets created and deleted mid-run
        [EXAMPLES / "workloads" / "urgent-gang-timed.yaml"],
        EXAMPLES / "clusters" / "eight-8core.yaml",
    ),
}


def nodes_of(cluster: Path | tuple[int, int]) -> list[Node]:
    return read_cluster(cluster) if isinstance(cluster, Path) else uniform_cluster(*cluster, "64Gi")


SCHEDULERS = ("coscheduling", "easy", "fcfs", "kube-default", "kubeflux-conservative", "kubeflux-fcfs")
RUNS = [("kubeflux", case) for case in sorted(CASES)] + [
    (scheduler, case) for scheduler in SCHEDULERS for case in sorted(CASES) if case != "demo-workload"
]
RUNS.append(("kube-default", "demo-workload"))  # PodGroup status writes once made it retry earlier than simulate


@pytest.mark.parametrize(("scheduler", "case"), RUNS)
def test_the_api_in_virtual_time_gives_the_simulators_schedule(scheduler: str, case: str) -> None:
    files, cluster = CASES[case]
    nodes = nodes_of(cluster)
    workload = map_to_cluster(merge_workloads([load_workload(f) for f in files]), nodes)
    simulated, served = both(workload, nodes, scheduler)
    assert schedule(served) == schedule(simulated)
    assert served.utilization_series == simulated.utilization_series
    assert served.queue_series == simulated.queue_series


def test_the_seed_demo_through_the_api_runs_two_pods_at_a_time_and_survives_segfaults() -> None:
    nodes = read_cluster(ONE_WORKER)
    workload = map_to_cluster(load_workload(EXAMPLES / "workloads" / "pi-demo.yaml"), nodes)
    _, served = both(workload, nodes)
    runs = {job.job_id: (job.starting_time, job.finish_time, job.final_state.value) for job in served.jobs}
    assert sorted(start for start, _, _ in runs.values()) == [0, 0, 30, 30, 60, 60, 120, 120]
    assert {state for job, (_, _, state) in runs.items() if "segfault" in job} == {"COMPLETED_FAILED"}
    assert {state for job, (_, _, state) in runs.items() if "segfault" not in job} == {"COMPLETED_SUCCESSFULLY"}


@pytest.mark.skipif(not HPC2N.is_file(), reason="the HPC2N trace is in ../shared/traces on the project's machines")
def test_the_start_of_hpc2n_through_the_api_gives_the_simulators_schedule() -> None:
    # The first 150 jobs (gangs of up to 100 pods on 120 nodes of 2 cores, EASY reservations); the whole trace is
    # timed against the simulator by benchmarks/virtual_time.py.
    nodes = uniform_cluster(120, 2, "64Gi")
    workload = map_to_cluster(load_workload(HPC2N), nodes)
    workload.jobs = workload.jobs[:150]
    simulated, served = both(workload, nodes)
    assert schedule(served) == schedule(simulated)


def test_cluster_serve_until_done_writes_the_report_simulate_writes(tmp_path: Path) -> None:
    workload = str(EXAMPLES / "workloads" / "pi-demo.yaml")
    common = ["--cluster", str(ONE_WORKER), "--workload", workload, "--scheduler", "kubeflux"]
    cli = [sys.executable, "-m", "kubeflux.cli"]
    served = subprocess.run(
        [*cli, "cluster", "serve", *common, "--clock", "virtual", "--until-done", "--out", str(tmp_path / "served")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert served.returncode == 0, served.stderr
    assert "kubeflux cluster: stopped" in served.stdout and f"report: {tmp_path / 'served'}" in served.stdout
    simulated = subprocess.run(
        [*cli, "simulate", *common, "--out", str(tmp_path / "simulated")], capture_output=True, text=True, timeout=600
    )
    assert simulated.returncode == 0, simulated.stderr
    jobs_csv = Path("kubeflux") / "jobs.csv"
    assert (tmp_path / "served" / jobs_csv).read_text() == (tmp_path / "simulated" / jobs_csv).read_text()
    pods_csv = Path("kubeflux") / "pods.csv"  # pi-demo's Jobs are not coupled: the same pods at the same times
    assert (tmp_path / "served" / pods_csv).read_text() == (tmp_path / "simulated" / pods_csv).read_text()
    assert (tmp_path / "served" / "index.html").is_file()


def test_a_gang_that_can_never_fit_stops_the_served_run_as_it_stops_the_simulators() -> None:
    # 3 pods (1.5, 0.25 and 0.25 cores), minMember 3, on two 1-core nodes: enough room in all (the minResources
    # check passes), but no node for the big pod, so coscheduling cycles wait, reject, retry for ever; after
    # IDLE_WAKEUP_LIMIT time points of nothing but its wake-ups, both runs stop and say so.
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

    sizes = (1500, 250, 250)
    pods = [PodTemplate(name=f"big-{k}", requests={"cpu": cpu}, run_time=10.0) for k, cpu in enumerate(sizes)]
    big = WorkloadJob(id="big", submit_time=0.0, kind=JobKind.POD_GROUP, name="big", min_member=3, pods=pods)
    solo_pod = PodTemplate(name="solo", requests={"cpu": 1000}, run_time=100.0)
    solo = WorkloadJob(id="solo", submit_time=5.0, kind=JobKind.POD, name="solo", pods=[solo_pod])
    nodes = uniform_cluster(2, 1, "8Gi")
    simulated, served = both(Workload("w", [big, solo]), nodes, "coscheduling")
    assert schedule(served) == schedule(simulated)
    assert {job.job_id: job.final_state.value for job in served.jobs} == {
        "big": "NOT_FINISHED",
        "solo": "COMPLETED_SUCCESSFULLY",
    }
    assert served.problems == simulated.problems
    assert "(3 pod(s) still pending)" in served.problems[0]


def test_kube_default_placing_half_of_two_gangs_is_the_same_deadlock_through_the_api() -> None:
    # Two PodGroups of 2 one-core pods on one 2-core node; the first pod of each has the higher priority, so
    # kube-default binds a-0 and b-0: both hold a core idle, waiting for a pod that fits nowhere.
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

    def group(name: str) -> WorkloadJob:
        pods = [
            PodTemplate(name=f"{name}-{k}", requests={"cpu": 1000}, run_time=60.0, priority=10 - 10 * k)
            for k in range(2)
        ]
        return WorkloadJob(id=name, submit_time=0.0, kind=JobKind.POD_GROUP, name=name, min_member=2, pods=pods)

    nodes = uniform_cluster(1, 2, "8Gi")
    simulated, served = both(Workload("w", [group("a"), group("b")]), nodes, "kube-default")
    assert schedule(served) == schedule(simulated)
    assert {job.final_state.value for job in served.jobs} == {"NOT_FINISHED"}
    assert served.problems == simulated.problems and served.stopped == simulated.stopped == served.problems[0]
    assert served.problems[0].startswith("deadlock: the run stopped at 0 s: 2 coupled job(s) hold resources idle")
    served_pods = {p.pod: (p.running_time, p.compute_time) for p in served.pods}
    assert served_pods == {p.pod: (p.running_time, p.compute_time) for p in simulated.pods}
    assert served_pods["default/a-0"] == (0.0, None)


def test_a_replay_in_accelerated_wall_time_runs_the_seed_demo_to_its_end() -> None:
    # In wall time the schedule is as precise as the event loop's timers: only the outcome is compared.
    from kubeflux.wallclock import WallClock

    nodes = read_cluster(ONE_WORKER)
    workload = map_to_cluster(load_workload(EXAMPLES / "workloads" / "pi-demo.yaml"), nodes)
    run = replayed(workload, nodes, "kubeflux", WallClock(speed=400))
    states = {job.job_id: job.final_state.value for job in run.jobs}
    assert len(states) == 8
    assert all(state == "COMPLETED_FAILED" for job, state in states.items() if "segfault" in job)
    assert all(state == "COMPLETED_SUCCESSFULLY" for job, state in states.items() if "segfault" not in job)


def test_a_failed_pod_of_a_coupled_job_ends_its_peers_as_in_the_simulator() -> None:
    # A PodGroup of minMember 2 computes together (coupled): when b-1 fails at 30 s (its activeDeadlineSeconds),
    # b-0 cannot go on (an MPI rank lost) and ends PeerFailed at the same instant, in the simulator and through the
    # API alike (one Cluster model).
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

    pods = [
        PodTemplate(name="b-0", requests={"cpu": 1000}, run_time=100.0),
        PodTemplate(name="b-1", requests={"cpu": 1000}, run_time=100.0, active_deadline_seconds=30.0),
    ]
    job = WorkloadJob(id="b", submit_time=0.0, kind=JobKind.POD_GROUP, name="b", min_member=2, pods=pods)
    solo = WorkloadJob(
        id="solo", submit_time=0.0, kind=JobKind.POD, name="solo", pods=[PodTemplate("solo", {"cpu": 1000}, 50.0)]
    )
    nodes = uniform_cluster(2, 2, "8Gi")
    simulated, served = both(Workload("w", [job, solo]), nodes, "coscheduling")
    simulated_pods = {p.pod: (p.running_time, p.end_time, p.phase, p.reason) for p in simulated.pods}
    assert simulated_pods["default/b-0"][1:] == (30.0, "Failed", "PeerFailed")
    assert {p.pod: (p.running_time, p.end_time, p.phase, p.reason) for p in served.pods} == simulated_pods
    assert schedule(served) == schedule(simulated)


def test_a_coupled_jobs_unbound_peers_are_deleted_through_the_api_when_it_fails() -> None:
    # A PodGroup of minMember 2 and three pods, one too big for any node: coscheduling binds b-0 and b-1, which
    # compute together; b-1 fails at 30 s (its activeDeadlineSeconds), so the job fails there: b-0 ends PeerFailed,
    # and b-2, never bound, ends and is deleted, in the simulator and, through the API, in the served cluster.
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

    pods = [
        PodTemplate(name="b-0", requests={"cpu": 1000}, run_time=100.0),
        PodTemplate(name="b-1", requests={"cpu": 1000}, run_time=100.0, active_deadline_seconds=30.0),
        PodTemplate(name="b-2", requests={"cpu": 64000}, run_time=100.0),
    ]
    job = WorkloadJob(id="b", submit_time=0.0, kind=JobKind.POD_GROUP, name="b", min_member=2, pods=pods)
    left: dict[str, str] = {}

    def pods_left(server: ApiServer) -> None:
        pods_resource = server.store.registry.find("", "v1", "pods")
        assert pods_resource is not None
        left.update({obj["metadata"]["name"]: obj["status"]["phase"] for obj in server.store.objects(pods_resource)})

    simulated, served = both(Workload("w", [job]), uniform_cluster(2, 2, "8Gi"), "coscheduling", pods_left)
    outcome = {p.pod: (p.bind_time, p.end_time, p.phase, p.reason) for p in simulated.pods}
    assert outcome["default/b-2"] == (None, 30.0, "Failed", "PeerFailed")
    assert {p.pod: (p.bind_time, p.end_time, p.phase, p.reason) for p in served.pods} == outcome
    assert left == {"b-0": "Failed", "b-1": "Failed"}  # b-2 is not left Pending
    assert schedule(served) == schedule(simulated)


def test_a_coupled_workload_gives_simulates_records_through_the_api_by_construction() -> None:
    # A trace job of three ranks whose second is killed 20 s after its bind (the others end PeerFailed), a coupled
    # Job (its template says so) of two pods, a lone pod and a Job killed at its deadline after them: every job's and
    # every pod's record (start,
    # end, state, reason, cores) is the same through simulate and through cluster serve's replay, since both are the
    # one Cluster's.
    from kubeflux.sim.jobs import COUPLED_ANNOTATION
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob

    ranks = [PodTemplate(name=f"mpi-{k}", requests={"cpu": 1000}, run_time=60.0) for k in range(3)]
    ranks[1].active_deadline_seconds = 20.0
    trace = WorkloadJob(id="mpi", submit_time=0.0, kind=JobKind.TRACE, name="mpi", pods=ranks)
    coupled = PodTemplate(name="pair", requests={"cpu": 2000}, run_time=40.0, annotations={COUPLED_ANNOTATION: "true"})
    pair = WorkloadJob(id="pair", submit_time=5.0, kind=JobKind.JOB, name="pair", pods=[coupled], parallelism=2)
    pair.completions = 2
    solo = WorkloadJob(
        id="solo", submit_time=10.0, kind=JobKind.POD, name="solo", pods=[PodTemplate("solo", {"cpu": 3000}, 15.0)]
    )
    late = WorkloadJob(
        id="late", submit_time=10.0, kind=JobKind.JOB, name="late", pods=[PodTemplate("late", {"cpu": 1000}, 100.0)]
    )
    late.active_deadline_seconds = 30.0  # its Job controller kills its pod then: the cluster hears why first
    nodes = uniform_cluster(2, 4, "8Gi")
    simulated, served = both(Workload("w", [trace, pair, solo, late]), nodes, "kubeflux")
    states = {job.job_id: job.final_state.value for job in simulated.jobs}
    assert states.pop("late") == "COMPLETED_WALLTIME_REACHED"
    assert [(p.end_time, p.reason) for p in served.pods if p.job_id == "late"] == [(40.0, "DeadlineExceeded")]
    assert states == {
        "mpi": "COMPLETED_WALLTIME_REACHED",
        "pair": "COMPLETED_SUCCESSFULLY",
        "solo": "COMPLETED_SUCCESSFULLY",
    }
    assert [p.reason for p in simulated.pods if p.job_id == "mpi"] == ["PeerFailed", "DeadlineExceeded", "PeerFailed"]
    assert served.jobs == simulated.jobs
    assert served.pods == simulated.pods
    assert served.utilization_series == simulated.utilization_series
    assert served.queue_series == simulated.queue_series
