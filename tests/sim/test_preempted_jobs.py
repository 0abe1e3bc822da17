"""What becomes of a preempted job in ``kubeflux simulate`` (issue 31): a trace job is requeued whole, as Slurm's
``PreemptMode=REQUEUE`` does, and waits from its first submission; bare pods (a PodGroup's, a lone pod) end
killed, as nothing would recreate them; ``--urgent`` marks a seeded fraction of a trace's jobs urgent."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind, Evict
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, Pod
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import simulate
from kubeflux.sim.metrics import summarize
from kubeflux.sim.records import FinalState, RunRecord
from kubeflux.sim.urgent import URGENT_PRIORITY, Urgent, mark_urgent, parse_urgent, with_priority
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

NODES = [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 2**34}) for i in range(2)]


def trace_job(number: int, submit: float, processors: int, run: float) -> WorkloadJob:
    return WorkloadJob(
        id=str(number),
        submit_time=submit,
        kind=JobKind.TRACE,
        name=f"job-{number}",
        requested_processors=processors,
        run_time=run,
        requested_time=run,
    )


def bare_group(name: str, size: int, run: float) -> WorkloadJob:
    """A PodGroup of ``size`` bare 8-core pods (no controller) submitted at 0."""
    pods = [PodTemplate(f"{name}-{i}", {CPU: 8000}, run, labels={POD_GROUP_LABEL: name}) for i in range(size)]
    return WorkloadJob(id=f"default/{name}", submit_time=0, kind=JobKind.POD_GROUP, name=name, pods=pods, min_member=2)


def lone_pod(name: str, run: float) -> WorkloadJob:
    pods = [PodTemplate(name, {CPU: 8000}, run)]
    return WorkloadJob(id=f"default/{name}", submit_time=0, kind=JobKind.POD, name=name, pods=pods)


# A 16-core trace job (a gang of two 8-core pods) fills the cluster from 0 to 1000; an urgent 8-core job arrives at 100.
GANG_THEN_URGENT = Workload("t", [trace_job(1, 0, 16, 1000), trace_job(2, 100, 8, 50)])


def run(workload: Workload, scheduler: str, urgent: set[str], *others: tuple[str, object]) -> RunRecord:
    core = create(scheduler)
    marked = with_priority(map_to_cluster(workload, NODES), urgent, URGENT_PRIORITY)
    return simulate(marked, NODES, {core.name: core, **dict(others)})  # type: ignore[dict-item]


def test_a_trace_gang_preempted_by_an_urgent_job_is_requeued_whole_and_waits_from_its_first_submission() -> None:
    record = run(GANG_THEN_URGENT, "kubeflux", {"2"})
    jobs = {job.job_id: job for job in record.jobs}
    urgent, requeued = jobs["2"], jobs["1"]
    assert (urgent.starting_time, urgent.finish_time, urgent.priority) == (100, 150, URGENT_PRIORITY)
    # resubmitted whole at 100 with the submit time it had, it runs again once the urgent job is done
    assert requeued.final_state is FinalState.COMPLETED_SUCCESSFULLY
    assert (requeued.submission_time, requeued.starting_time, requeued.finish_time) == (0, 150, 1150)
    assert (requeued.first_bind_time, requeued.attempts, requeued.pods, requeued.priority) == (150, 2, 4, 0)
    ended = {pod.pod: (pod.reason, pod.end_time) for pod in record.pods if pod.job_id == "1"}
    assert ended == {  # evicted whole: both ranks Preempted, none PeerFailed
        "default/job-1-0": ("Preempted", 100),
        "default/job-1-1": ("Preempted", 100),
        "default/job-1-0-r1": ("Completed", 1150),
        "default/job-1-1-r1": ("Completed", 1150),
    }
    last = [pod.resources for pod in record.pods if pod.pod.endswith("-r1")]
    assert requeued.allocated_resources == sorted(last[0] + last[1])  # where its last attempt ran
    assert (100, 1) in record.queue_series and record.queue_series[-1] == (150, 0)  # queued again from 100 to 150
    summary = summarize(record)
    assert (summary["preempted_pods"], summary["preempted_jobs"]) == (2, 1)
    assert summary["work_lost_core_seconds"] == 2 * 8 * 100
    assert (summary["urgent_started_jobs"], summary["mean_waiting_time_urgent"]) == (1, 0)
    assert (summary["other_started_jobs"], summary["mean_waiting_time_others"]) == (1, 150)


def test_without_preemption_the_urgent_job_waits_and_nothing_is_requeued() -> None:
    record = run(GANG_THEN_URGENT, "kubeflux-no-preemption", {"2"})
    jobs = {job.job_id: job for job in record.jobs}
    assert (jobs["2"].starting_time, jobs["1"].finish_time, jobs["1"].attempts) == (1000, 1000, 1)
    assert summarize(record)["mean_waiting_time_urgent"] == 900


class EvictOnce:
    """A scheduler of no pod of its own that evicts the pod ``key`` at ``at``, as kube-scheduler's pod-by-pod
    preemption takes one rank of an MPI job."""

    name = "evictor"

    def __init__(self, key: str, at: float) -> None:
        self.key, self.at, self.uid, self.done = key, at, "", False

    def observe(self, event: ClusterEvent, now: float) -> None:
        if isinstance(event.obj, Pod) and event.obj.key == self.key and event.kind is not EventKind.DELETED:
            self.uid = event.obj.uid

    def schedule(self, now: float) -> list[Decision]:
        if now < self.at or self.done:
            return []
        self.done = True
        return [Evict(self.key, self.uid, "default/urgent", "Preempted by default/urgent", budgets=False)]

    def next_wakeup(self, now: float) -> float | None:
        return None if self.done else self.at


def test_one_rank_evicted_takes_the_others_down_at_once_their_work_is_lost_too_and_the_job_is_requeued() -> None:
    workload = Workload("t", [trace_job(1, 0, 16, 1000)])
    record = run(workload, "kubeflux", set(), ("evictor", EvictOnce("default/job-1-0", 100)))
    ended = {pod.pod: (pod.reason, pod.end_time) for pod in record.pods}
    assert ended["default/job-1-0"] == ("Preempted", 100) and ended["default/job-1-1"] == ("PeerFailed", 100)
    (job,) = record.jobs
    assert (job.attempts, job.starting_time, job.finish_time, job.final_state) == (
        2,
        100,
        1100,
        FinalState.COMPLETED_SUCCESSFULLY,
    )
    summary = summarize(record)
    assert (summary["preempted_pods"], summary["preempted_jobs"]) == (1, 1)
    assert summary["work_lost_core_seconds"] == 2 * 8 * 100  # the rank that died with the evicted one lost its work


@pytest.mark.parametrize("bare", [bare_group("low", 2, 1000), lone_pod("low", 1000)], ids=["pod-group", "lone-pod"])
def test_bare_pods_preempted_end_killed_and_are_not_requeued(bare: WorkloadJob) -> None:
    size = len(bare.pods)
    workload = Workload("t", [bare, trace_job(2, 100, 16, 50)])  # the urgent job needs the whole cluster
    record = run(workload, "kubeflux", {"2"})
    jobs = {job.job_id: job for job in record.jobs}
    low = jobs["default/low"]
    assert (low.final_state, low.finish_time, low.attempts, low.pods) == (FinalState.COMPLETED_KILLED, 100, 1, size)
    assert low.reason.endswith(": Preempted (exit code 137)")
    assert {pod.reason for pod in record.pods if pod.job_id == "default/low"} == {"Preempted"}
    assert jobs["2"].starting_time == 100


def test_urgent_jobs_are_a_seeded_fraction_of_the_jobs_that_have_pods() -> None:
    jobs = [trace_job(n, n, 1, 10) for n in range(1, 41)] + [trace_job(99, 0, 64, 10)]  # 99: larger than the cluster
    mapped = map_to_cluster(Workload("t", jobs), NODES)

    def chosen(seed: int) -> set[str]:
        marked = mark_urgent(mapped, Urgent(0.25, 7), seed)
        return {job.id for job in marked.jobs if job.pods and job.pods[0].priority == 7}

    assert len(chosen(1)) == 10 and "99" not in chosen(1)  # a quarter of the 40 jobs that can run
    assert chosen(1) == chosen(1) and chosen(1) != chosen(2)
    assert mark_urgent(mapped, Urgent(0.01), 1) is mapped  # rounds to no job
    assert {p.priority for job in mapped.jobs for p in job.pods} == {0}  # the input is left as it was


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.1", Urgent(0.1, 1000)), (" 0.25:5000", Urgent(0.25, 5000)), ("1:-3", Urgent(1.0, -3)), ("0", Urgent(0.0))],
)
def test_the_urgent_option_reads_a_fraction_and_a_priority(text: str, expected: Urgent) -> None:
    assert parse_urgent(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("1.5", "FRACTION must be a number from 0 to 1"),
        ("nan", "FRACTION must be a number from 0 to 1"),
        ("ten", "FRACTION must be a number from 0 to 1"),
        ("0.1:high", "PRIORITY must be an integer from -2,147,483,648 to 1,000,000,000"),
        ("0.1:1000000001", "PRIORITY must be an integer"),
    ],
)
def test_a_bad_urgent_option_is_refused_naming_it(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_urgent(text)
    swf = tmp_path / "t.swf"
    swf.write_text("1 0 0 10 4 -1 -1 4 100 -1 1 1 1 1 1 1 -1 -1\n")
    args = ["simulate", "-w", str(swf), "--nodes", "1", "--cores-per-node", "4", "-s", "fcfs", "--urgent", text]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and words in " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())


def test_simulate_urgent_writes_each_jobs_priority_and_the_waits_of_urgent_jobs_and_others(tmp_path: Path) -> None:
    swf = tmp_path / "t.swf"
    swf.write_text("".join(f"{n} {10 * n} 0 100 8 -1 -1 8 100 -1 1 1 1 1 1 1 -1 -1\n" for n in range(1, 21)))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(swf), "--nodes", "2", "--cores-per-node", "8", "-s", "kubeflux", "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "--urgent", "0.2:500", "--seed", "3"])
    assert result.exit_code == 0, result.output
    with (out / "kubeflux" / "jobs.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    urgent = [row for row in rows if row["priority"] == "500"]
    assert len(urgent) == 4 and {row["priority"] for row in rows} == {"0", "500"}
    (summary,) = json.loads((out / "summary.json").read_text())
    assert (summary["urgent_started_jobs"], summary["other_started_jobs"]) == (4, 16)
    waits = [float(row["waiting_time"]) for row in urgent]
    assert summary["mean_waiting_time_urgent"] == pytest.approx(sum(waits) / 4)
    assert "20 % of its jobs urgent (priority 500, seed 3)" in (out / "index.html").read_text()
