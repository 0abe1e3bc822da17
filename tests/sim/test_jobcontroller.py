"""The Job controller drives any cluster through the public operations of :class:`JobHost`, as a controller of a
real cluster would: it creates pods, deletes them, ends the Job and records Events, and reaches into nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from kubeflux.sim.baselines import create
from kubeflux.sim.clock import EventLoop
from kubeflux.sim.cluster import NodeOutage
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.jobcontroller import JobController
from kubeflux.sim.jobs import SimJob, timing_of
from kubeflux.sim.pods import Lifecycle, TemplateTiming
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob


class RecordingHost:
    """A cluster stand-in that records what the controller asks of it."""

    def __init__(self) -> None:
        self.loop = EventLoop()
        self.calls: list[str] = []
        self.live: dict[str, SimJob] = {}

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        self.calls.append(f"create {name}")
        job.created += 1
        job.active += 1
        self.live[f"default/{name}"] = job

    def delete_pod(self, key: str, reason: str = "Deleted") -> None:
        self.calls.append(f"delete {key} ({reason})")

    def finish_job(self, job: SimJob) -> None:
        self.calls.append(f"finish {job.wjob.name}")
        job.finish = self.loop.now

    def record_event(self, type_: str, reason: str, obj: str, message: str) -> None:
        self.calls.append(f"event {reason} {obj}")


def test_a_job_past_its_deadline_is_ended_through_the_hosts_public_operations() -> None:
    template = PodTemplate(name="work", requests={"cpu": 1000}, run_time=None)
    wjob = WorkloadJob(
        "1", 0.0, JobKind.JOB, "train", pods=[template], completions=3, parallelism=2, active_deadline_seconds=60
    )
    job = SimJob(wjob, 0, 0.0)
    job.timings.append(timing_of(template, wjob, Lifecycle(), {}, "kubeflux"))
    host = RecordingHost()
    controller = JobController(host)
    controller.start(job)
    assert host.calls == ["create train-0", "create train-1"]
    host.loop.step()  # the deadline
    assert host.calls[2:] == ["finish train", "event DeadlineExceeded default/train"]
    assert job.failed_reason == "DeadlineExceeded"


def _run_job(tmp_path: Path, name: str, spec: str, annotations: str, outages: Sequence[NodeOutage] = ()) -> RunRecord:
    """A Job ``name`` (its ``spec`` fields as YAML flow lines, its template's ``annotations`` as a flow mapping's
    content) of one-core pods run by ``simulate`` under kubeflux on one node of 4 cores."""
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(
        f"""apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
{spec}
  template:
    metadata:
      annotations: {{{annotations}}}
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}]
""",
        encoding="utf-8",
    )
    workload = read_manifests(manifest)
    options = SimulationOptions(outages=outages)
    cores = {"kubeflux": create("kubeflux")}
    return simulate(workload, uniform_cluster(1, 4, "16Gi"), cores, primary="kubeflux", options=options)


def test_an_indexed_job_in_the_simulator_runs_the_lowest_indexes_first_each_once(tmp_path: Path) -> None:
    """``completionMode: Indexed`` through ``simulate``: pods named ``job-index-n``, the lowest indexes first, two
    at a time, each index once; the Job ends when every index has succeeded."""
    spec = "  completions: 5\n  parallelism: 2\n  completionMode: Indexed"
    run = _run_job(tmp_path, "ranks", spec, "pod-complete.stage.kwok.x-k8s.io/delay: 10s")
    names = [record.pod.split("/", 1)[1].rsplit("-", 1)[0] for record in sorted(run.pods, key=lambda r: r.created_time)]
    assert names == ["ranks-0", "ranks-1", "ranks-2", "ranks-3", "ranks-4"]
    [job] = run.jobs
    assert job.final_state.value == "COMPLETED_SUCCESSFULLY" and job.finish_time == 30.0


def test_two_pods_failing_at_the_same_instant_both_end_error_before_the_job_fails(tmp_path: Path) -> None:
    """A Job of two pods that segfault together, ``backoffLimit: 0``: the first failure alone exceeds the limit,
    yet the Job controller looks only once both pods have ended at that instant (as a real one syncs after the
    kubelets' reports), so the second ends ``Error`` with its own exit code instead of being deleted."""
    spec = "  completions: 2\n  parallelism: 2\n  backoffLimit: 0"
    annotations = 'pod-complete.stage.kwok.x-k8s.io/delay: 10s, sim.kubeflux.io/exit-code: "139"'
    run = _run_job(tmp_path, "twins", spec, annotations)
    assert sorted((record.reason, record.exit_code, record.end_time) for record in run.pods) == [
        ("Error", 139, 10.0),
        ("Error", 139, 10.0),
    ]
    [job] = run.jobs
    assert job.final_state.value == "COMPLETED_FAILED" and job.finish_time == 10.0


def test_a_plain_job_of_pods_without_a_run_time_runs_under_kubeflux_and_completes(tmp_path: Path) -> None:
    """A Job with no KWOK delay (what ``kubectl create job`` makes): its pods complete as soon as they run, the
    lifecycle's default for a Job's pod. They carry no ``kubeflux.io/walltime`` (a walltime of 0 was refused by
    kubeflux, rejecting the Job), and a pod made at the instant the Job synced, ending at that instant too, makes the
    Job sync again (it used to stay unfinished with all its completions done)."""
    run = _run_job(tmp_path, "plain", "  completions: 3\n  parallelism: 2", "")
    [job] = run.jobs
    assert job.final_state.value == "COMPLETED_SUCCESSFULLY" and job.finish_time == 0.0
    assert sorted(record.phase for record in run.pods) == ["Succeeded"] * 3


class TimedHost(RecordingHost):
    """A :class:`RecordingHost` that notes when each pod was created (virtual seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.created_at: list[float] = []

    def create_pod(self, job: SimJob, timing: TemplateTiming, name: str, index: int | None = None) -> None:
        super().create_pod(job, timing, name, index)
        self.created_at.append(self.loop.now)


def test_a_wide_job_is_created_at_the_client_rate_in_slow_start_syncs_of_500() -> None:
    """kube-controller-manager's pacing (measured on v1.36.2: ~30 pods at once, then 20/s, a ~1 s gap after each
    500, 1,200 pods in ~60 s), in virtual time: 30 at once, 20 a second, the next sync 1 s after the 500th pod."""
    template = PodTemplate(name="work", requests={"cpu": 1000}, run_time=None)
    wjob = WorkloadJob("1", 0.0, JobKind.JOB, "wide", pods=[template], completions=1200, parallelism=1200)
    job = SimJob(wjob, 0, 0.0)
    job.timings.append(timing_of(template, wjob, Lifecycle(), {}, "kubeflux"))
    host = TimedHost()
    controller = JobController(host, rate=Lifecycle(job_client_qps=20.0, job_client_burst=30).job_client_rate())
    controller.start(job)
    assert len(host.created_at) == 30  # the burst, at once
    host.loop.run()
    times = host.created_at
    assert len(times) == 1200 and len(set(host.calls)) == 1200
    expected = [0.0] * 30 + [(k - 29) / 20 for k in range(30, 500)]  # 500th pod at 23.5 s
    gap = expected[-1] + 1.0  # the next sync: the bucket refilled 20 tokens meanwhile
    expected += [gap] * 20 + [gap + (k - 19) / 20 for k in range(20, 500)]
    gap = expected[-1] + 1.0
    expected += [gap] * 20 + [gap + (k - 19) / 20 for k in range(20, 200)]
    assert times == pytest.approx(expected, abs=1e-9)
    assert times[-1] == pytest.approx(58.5)


def test_without_a_client_rate_every_pod_a_job_lacks_is_created_at_once() -> None:
    template = PodTemplate(name="work", requests={"cpu": 1000}, run_time=None)
    wjob = WorkloadJob("1", 0.0, JobKind.JOB, "wide", pods=[template], completions=1200, parallelism=1200)
    job = SimJob(wjob, 0, 0.0)
    job.timings.append(timing_of(template, wjob, Lifecycle(), {}, "kubeflux"))
    host = TimedHost()
    JobController(host).start(job)
    assert host.created_at == [0.0] * 1200


def test_a_fail_job_rule_on_exit_code_42_fails_the_job_at_once(tmp_path: Path) -> None:
    """``podFailurePolicy`` FailJob on exit code 42: the first pod to exit 42 fails the Job (``PodFailurePolicy``)
    though ``backoffLimit`` would allow 6 retries; its other pods are deleted, none is replaced."""
    spec = """  completions: 2
  parallelism: 2
  podFailurePolicy:
    rules:
    - {action: FailJob, onExitCodes: {containerName: c, operator: In, values: [42]}}"""
    annotations = 'pod-complete.stage.kwok.x-k8s.io/delay: 10s, sim.kubeflux.io/exit-code: "42"'
    run = _run_job(tmp_path, "doomed", spec, annotations)
    [job] = run.jobs
    assert job.final_state.value == "COMPLETED_FAILED" and job.finish_time == 10.0
    assert sorted((record.exit_code, record.end_time) for record in run.pods) == [(42, 10.0), (42, 10.0)]
    without = _run_job(tmp_path, "retried", "  completions: 2\n  parallelism: 2\n  backoffLimit: 2", annotations)
    assert len(without.pods) == 4  # the default: both failures count, both retried once, then over the limit


def test_an_ignore_rule_on_disruption_retries_a_disrupted_pod_beyond_backoff_limit_0(tmp_path: Path) -> None:
    """``podFailurePolicy`` Ignore on ``DisruptionTarget``: a pod lost with its node (``DeletionByTaintManager``) is
    not counted towards ``backoffLimit: 0``; its replacement comes after the pod-failure back-off (10 s: the real
    controller's back-off record counts every failure, ignored or not) and completes. Without the rule the Job
    fails at the loss."""
    spec = """  backoffLimit: 0
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions: [{type: DisruptionTarget}]"""
    outage = [NodeOutage("node-0000", 5.0, 6.0)]
    run = _run_job(tmp_path, "sturdy", spec, "pod-complete.stage.kwok.x-k8s.io/delay: 10s", outage)
    [job] = run.jobs
    assert job.final_state.value == "COMPLETED_SUCCESSFULLY" and job.finish_time == 25.0
    assert sorted((record.phase, record.end_time) for record in run.pods) == [("Failed", 5.0), ("Succeeded", 25.0)]
    fragile = _run_job(tmp_path, "fragile", "  backoffLimit: 0", "pod-complete.stage.kwok.x-k8s.io/delay: 10s", outage)
    [job] = fragile.jobs
    assert job.final_state.value == "COMPLETED_FAILED" and job.finish_time == 5.0


def test_simulate_refuses_a_bad_pod_failure_policy_in_the_servers_words(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        """apiVersion: batch/v1
kind: Job
metadata: {name: bad}
spec:
  podFailurePolicy:
    rules: [{action: FailJob, onExitCodes: {containerName: other, operator: In, values: [42]}}]
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
""",
        encoding="utf-8",
    )
    [problem] = read_manifests(manifest).problems
    assert (
        'Job default/bad: spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: "other": must be '
        "one of the container or initContainer names in the pod template" in problem
    )
