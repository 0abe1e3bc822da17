"""Kueue's documented behaviour, run through the simulator in front of different schedulers: the example files
``examples/workloads/kueue-*.yaml`` a user would recognise (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import Simulation, simulate
from kubeflux.sim.metrics import JOBS_COLUMNS, summarize, write_jobs_csv
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import read_cluster
from tests.shared import REPO

EXAMPLES = REPO / "examples" / "workloads"
CLUSTERS = REPO / "examples" / "clusters"
SCHEDULERS = ["kube-default", "kubeflux", "coscheduling"]


def run(example: str, scheduler: str, nodes: list[Node] | None = None) -> RunRecord:
    workload = load_workload(EXAMPLES / example)
    cluster = nodes if nodes is not None else read_cluster(CLUSTERS / "two-8core.yaml")
    return simulate(workload, cluster, owned(scheduler))


def run_file(path: Path, scheduler: str) -> RunRecord:
    return simulate(load_workload(path), read_cluster(CLUSTERS / "two-8core.yaml"), owned(scheduler))


def owned(name: str) -> dict[str, Scheduler]:
    """The scheduler ``name`` by the ``schedulerName`` it owns."""
    scheduler = create(name)
    return {scheduler.name: scheduler}


def jobs_of(record: RunRecord) -> dict[str, tuple[float | None, float | None]]:
    return {job.job_id: (job.starting_time, job.finish_time) for job in record.jobs}


def uniform(count: int, cores: int) -> list[Node]:
    return [Node(f"n{i}", allocatable={CPU: cores * 1000, MEMORY: 32 * 2**30}) for i in range(count)]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_borrowing_queue_is_preempted_when_the_lender_reclaims_its_quota(scheduler: str) -> None:
    record = run("kueue-cohort-reclaim.yaml", scheduler)
    jobs = jobs_of(record)
    assert jobs["team-a/a-first"] == (0.0, 300.0)
    assert jobs["team-b/b-first"] == (100.0, 200.0)  # reclaimed at once from team A's borrowing Job
    assert jobs["team-a/a-second"] == (200.0, 500.0)  # evicted at 100 s, borrows again once team B is done
    rows = {job.job_id: job for job in record.jobs}
    assert rows["team-a/a-second"].quota_evictions == 1 and rows["team-a/a-second"].attempts == 2
    assert rows["team-a/a-second"].admission_time == 1.0
    # Kueue's admission wait, per admission from the creation or the last requeuing: a-first 0 s, b-first 0 s,
    # a-second 0 s then 99 s (requeued at 101 s, a second after its eviction, admitted again at 200 s)
    assert record.admission["mean_admission_wait"] == pytest.approx(99 / 4)
    preempted = [pod for pod in record.pods if pod.reason == "Preempted"]
    assert [(pod.pod, pod.end_time) for pod in preempted] == [("team-a/a-second-0", 100.0)]
    summary = summarize(record)
    assert summary["quota_preemptions"] == 1 and summary["quota_preemptions[team-a-cq]"] == 1
    assert summary["borrowed_share[team-a-cq:cpu]"] > 0 and summary["borrowed_share[team-b-cq:cpu]"] == 0


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_strict_fifo_blocks_behind_a_head_that_does_not_fit_while_best_effort_lets_the_next_in(scheduler: str) -> None:
    record = run("kueue-fifo.yaml", scheduler, uniform(4, 8))
    starts = {job: start for job, (start, _) in jobs_of(record).items()}
    assert starts["strict/big"] == starts["best-effort/big"] == 100.0
    assert starts["strict/small"] == 100.0  # behind the head
    assert starts["best-effort/small"] == 2.0  # the head set aside
    rows = {job.job_id: job for job in record.jobs}
    assert rows["strict/small"].admission_time == 100.0 and rows["best-effort/small"].admission_time == 2.0
    summary = summarize(record)
    assert summary["mean_admission_wait[strict]"] == pytest.approx((0 + 99 + 98) / 3)
    assert summary["mean_admission_wait[best-effort]"] == pytest.approx(99 / 3)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_pods_admitted_on_a_tainted_flavor_get_its_toleration_and_node_labels(scheduler: str) -> None:
    record = run("kueue-flavors.yaml", scheduler, read_cluster(CLUSTERS / "kueue-spot.yaml"))
    nodes = {pod.job_id: pod.node for pod in record.pods}
    assert nodes["default/job-0"].startswith("od-") and nodes["default/job-1"].startswith("od-")
    assert nodes["default/job-2"].startswith("spot-") and nodes["default/job-3"].startswith("spot-")
    assert jobs_of(record)["default/job-4"] == (100.0, 200.0)  # waited for quota, then on-demand again
    assert all(job.final_state.value == "COMPLETED_SUCCESSFULLY" for job in record.jobs)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_job_evicted_and_admitted_again_on_another_flavor_runs_with_that_flavors_labels_only(scheduler: str) -> None:
    """Team A's second Job borrows team B's on-demand quota, is evicted when team B reclaims it, and is admitted
    again on spot once requeued (a second after its eviction): its new pod selects the spot nodes (not on-demand,
    whose label the first admission added) and tolerates their taint."""
    workload = load_workload(EXAMPLES / "kueue-flavor-readmit.yaml")
    sim = Simulation(workload, read_cluster(CLUSTERS / "kueue-spot.yaml"), owned(scheduler))
    record = sim.run()
    pods = [(pod.pod, pod.node, pod.created_time, pod.end_time, pod.reason) for pod in record.pods]
    second = [pod for pod in pods if pod[0].startswith("team-a/a-second")]
    assert len(second) == 2, pods
    (_, first_node, _, first_end, first_reason), (_, node, created, end, reason) = second
    assert first_node.startswith("od-") and (first_end, first_reason) == (100.0, "Preempted")
    assert node.startswith("spot-") and (created, end, reason) == (101.0, 401.0, "Completed")  # requeued 1 s after
    assert jobs_of(record)["team-b/b-first"] == (100.0, 200.0)
    assert sim.kueue is not None
    job = next(job for job in sim.cluster.book.jobs if job.wjob.id == "team-a/a-second")
    template = job.wjob.pods[0]
    assert template.node_selector == {"instance-type": "spot"}
    assert [t.key for t in template.tolerations] == ["spot"]


def test_without_the_flavor_toleration_a_tainted_flavor_is_skipped(tmp_path: Path) -> None:
    text = (EXAMPLES / "kueue-flavors.yaml").read_text()
    untolerated = text.replace('  tolerations: [{key: spot, operator: Equal, value: "true", effect: NoSchedule}]\n', "")
    assert untolerated != text
    path = tmp_path / "untolerated.yaml"
    path.write_text(untolerated)
    workload = load_workload(path)
    record = simulate(workload, read_cluster(CLUSTERS / "kueue-spot.yaml"), owned("kube-default"))
    starts = {job: start for job, (start, _) in jobs_of(record).items()}
    assert starts == {
        "default/job-0": 0.0,
        "default/job-1": 1.0,
        "default/job-2": 100.0,
        "default/job-3": 101.0,
        "default/job-4": 200.0,
    }


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_workload_naming_a_missing_local_queue_waits_and_is_reported(scheduler: str) -> None:
    record = run("kueue-missing-queue.yaml", scheduler)
    rows = {job.job_id: job for job in record.jobs}
    lost = rows["default/lost"]
    assert lost.final_state.value == "NOT_FINISHED" and lost.starting_time is None
    assert lost.cluster_queue == "(no-such-queue)" and lost.admission_time is None
    assert lost.reason == "not admitted by Kueue: LocalQueue no-such-queue doesn't exist"
    assert rows["default/queued"].cluster_queue == "cluster-queue" and rows["default/queued"].finish_time == 10.0
    assert rows["default/unqueued"].cluster_queue == "" and rows["default/unqueued"].finish_time == 10.0
    assert [p for p in record.problems if p.startswith("kueue:")] == [
        "kueue: 1 workload(s) never admitted: default/lost: LocalQueue no-such-queue doesn't exist"
    ]
    summary = summarize(record)
    assert summary["never_admitted"] == 1 and summary["admitted_jobs"] == 1


def test_without_kueue_objects_the_label_is_ignored_and_the_outputs_are_as_before(tmp_path: Path) -> None:
    text = (EXAMPLES / "kueue-missing-queue.yaml").read_text()
    jobs_only = text[text.index("apiVersion: batch/v1") :]  # the Job and pods, labels kept, no Kueue object
    path = tmp_path / "labelled.yaml"
    path.write_text(jobs_only)
    workload = load_workload(path)
    assert workload.kueue is None
    record = simulate(workload, read_cluster(CLUSTERS / "two-8core.yaml"), owned("kube-default"))
    assert all(job.finish_time == 10.0 for job in record.jobs)  # "lost" runs: nothing holds it
    assert record.admission == {}
    assert not any(key.startswith(("admitted", "quota", "mean_admission")) for key in summarize(record))
    write_jobs_csv(record, tmp_path / "jobs.csv")
    assert (tmp_path / "jobs.csv").read_text().splitlines()[0] == ",".join(JOBS_COLUMNS)
    with_kueue = run("kueue-missing-queue.yaml", "kube-default")
    write_jobs_csv(with_kueue, tmp_path / "kueue.csv")
    header = (tmp_path / "kueue.csv").read_text().splitlines()[0]
    assert header == ",".join((*JOBS_COLUMNS, "cluster_queue", "admission_wait", "quota_evictions"))


def _with_deadline(tmp_path: Path, seconds: int) -> Path:
    """``kueue-cohort-reclaim.yaml`` with ``activeDeadlineSeconds`` on team A's borrowing Job (evicted at 100 s,
    held until team B's Job ends at 200 s)."""
    text = (EXAMPLES / "kueue-cohort-reclaim.yaml").read_text()
    head, tail = text.split("  name: a-second\n")
    changed = head + "  name: a-second\n" + tail.replace("spec:\n", f"spec:\n  activeDeadlineSeconds: {seconds}\n", 1)
    path = tmp_path / "deadline.yaml"
    path.write_text(changed)
    return path


def test_an_evicted_jobs_deadline_stops_while_it_is_held_and_counts_again_from_its_readmission(tmp_path: Path) -> None:
    """Kubernetes stops a suspended Job's ``activeDeadlineSeconds`` timer and starts it again when the Job resumes
    (its ``startTime`` reset): the deadline of 150 s would fall at 151 s, while Kueue holds the Job; it falls 150 s
    after its admission again (200 s), and its quota is released then."""
    workload = load_workload(_with_deadline(tmp_path, 150))
    sim = Simulation(workload, read_cluster(CLUSTERS / "two-8core.yaml"), owned("kube-default"))
    record = sim.run()
    rows = {job.job_id: job for job in record.jobs}
    second = rows["team-a/a-second"]
    assert (second.starting_time, second.finish_time) == (200.0, 350.0)
    assert second.final_state.value == "COMPLETED_WALLTIME_REACHED"
    assert sim.kueue is not None and sim.kueue.admitter.admitted == {}  # no finished job holds quota
    assert all(not queue for queue in sim.kueue.admitter.pending.values())
    used = sim.kueue.series.points["team-a-cq"][-1][1]
    assert used.get("cpu", 0) == 0


def test_an_evicted_job_readmitted_in_time_meets_a_deadline_counted_from_its_readmission(tmp_path: Path) -> None:
    record = run_file(_with_deadline(tmp_path, 320), "kube-default")
    second = {job.job_id: job for job in record.jobs}["team-a/a-second"]
    assert (second.starting_time, second.finish_time) == (200.0, 500.0)  # 321 s from its first start: not failed
    assert second.final_state.value == "COMPLETED_SUCCESSFULLY"


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_wait_for_pods_ready_requeues_a_gang_that_did_not_start(scheduler: str) -> None:
    """Kueue admits the 4 x 4-core gang on quota, but a pod it does not hold takes one node until 400 s: the gang
    cannot start whole; 2 minutes after each admission it is evicted (PodsReadyTimeout) and queued again after
    60 s, then 120 s (backoffBaseSeconds 60, doubling); admitted at 421 s, it starts and runs."""
    record = run("kueue-pods-ready.yaml", scheduler)
    gang = {job.job_id: job for job in record.jobs}["default/gang"]
    assert (gang.starting_time, gang.finish_time, gang.attempts) == (421.0, 521.0, 3)
    assert gang.final_state.value == "COMPLETED_SUCCESSFULLY" and gang.admission_time == 1.0
    timed_out = sorted({(pod.created_time, pod.end_time) for pod in record.pods if pod.job_id == "default/gang"})
    assert timed_out == [(1.0, 121.0), (181.0, 301.0), (421.0, 521.0)]
    assert sum(pod.reason == "PodsReadyTimeout" for pod in record.pods) == 2  # one per eviction; its peers follow
    summary = summarize(record)
    assert summary["pods_ready_timeouts"] == 2 and summary["quota_preemptions"] == 0
    assert record.problems == []


def variant(tmp_path: Path, example: str, old: str, new: str) -> Path:
    """The example file ``example`` with ``old`` replaced by ``new`` (once at least), written under ``tmp_path``."""
    text = (EXAMPLES / example).read_text()
    assert old in text
    path = tmp_path / example
    path.write_text(text.replace(old, new))
    return path


def test_without_wait_for_pods_ready_the_admitted_gang_waits_for_the_node(tmp_path: Path) -> None:
    record = run_file(variant(tmp_path, "kueue-pods-ready.yaml", "enable: true", "enable: false"), "coscheduling")
    gang = {job.job_id: job for job in record.jobs}["default/gang"]
    assert (gang.starting_time, gang.finish_time, gang.attempts) == (400.0, 500.0, 1)
    assert "pods_ready_timeouts" not in summarize(record)


def test_wait_for_pods_ready_deactivates_a_workload_past_its_backoff_limit(tmp_path: Path) -> None:
    path = variant(tmp_path, "kueue-pods-ready.yaml", "backoffLimitCount: 3", "backoffLimitCount: 1")
    record = run_file(path, "kubeflux")
    gang = {job.job_id: job for job in record.jobs}["default/gang"]
    assert gang.finish_time is None and gang.final_state.value == "NOT_FINISHED"
    assert gang.reason == "deactivated: its pods not ready in time after 1 requeuing(s) (backoffLimitCount) (Kueue)"
    assert max(pod.end_time or 0.0 for pod in record.pods if pod.job_id == "default/gang") == 301.0
    assert record.problems == ["kueue: 1 workload(s) deactivated, their pods not ready in time too often: default/gang"]
    assert summarize(record)["pods_ready_timeouts"] == 2
