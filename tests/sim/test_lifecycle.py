"""Kubernetes manifests run end to end (reader, cluster, scheduler, driver), checked against Kubernetes' documented
behaviour: the coscheduling PodGroup's ``scheduleTimeoutSeconds``, a Job's back-off and ``activeDeadlineSeconds``,
and the back-off count that a success resets."""

from __future__ import annotations

from pathlib import Path

from kubeflux.scheduler.objects import CPU, MEMORY, Node, PodPhase
from kubeflux.sim.baselines.coscheduling import CoschedulingScheduler
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.podstatus import pod_conditions
from kubeflux.sim.workloads import load_workload


def node(name: str, cores: int) -> Node:
    return Node(name, allocatable={CPU: cores * 1000, MEMORY: 64 * 2**30, "pods": 110})


def pod_yaml(name: str, *, delay: str, submit: float = 0, group: str = "", exit_code: int = 0) -> str:
    labels = f"{{scheduling.x-k8s.io/pod-group: {group}}}" if group else "{}"
    return f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {labels}
  annotations:
    pod-complete.stage.kwok.x-k8s.io/delay: "{delay}"
    sim.kubeflux.io/submit-time: "{submit}"
    sim.kubeflux.io/exit-code: "{exit_code}"
spec:
  containers:
    - name: main
      image: busybox
      resources: {{requests: {{cpu: "1"}}}}
"""


def run_manifests(tmp_path: Path, text: str, nodes: list[Node], scheduler: object) -> Simulation:
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    workload = load_workload(path)
    assert workload.problems == []
    name = scheduler.name  # type: ignore[attr-defined]
    sim = Simulation(workload, nodes, {name: scheduler}, options=SimulationOptions(keep_events=True))  # type: ignore[dict-item]
    sim.run()
    return sim


def test_a_pod_group_times_out_at_permit_releases_its_reservations_and_runs_later_as_a_whole(tmp_path: Path) -> None:
    # One 10-core node; a lone pod holds a core until t=100. PodGroup g (minMember 10, scheduleTimeoutSeconds 20)
    # arrives at t=1: 9 members get a core and wait at Permit, the 10th does not fit (1 missing of 10 is within the
    # plugin's 10 %: no PostFilter rejection). After 20 s of waiting the group is rejected and its cores released;
    # it cycles until the blocker ends, then all 10 are bound at once.
    text = pod_yaml("blocker", delay="100s")
    text += """---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: g
  annotations: {sim.kubeflux.io/submit-time: "1"}
spec:
  minMember: 10
  scheduleTimeoutSeconds: 20
"""
    text += "".join(pod_yaml(f"g-{i}", delay="10s", submit=1, group="g") for i in range(10))
    sim = run_manifests(tmp_path, text, [node("n", 10)], CoschedulingScheduler())
    events = sim.cluster.kube_events
    timeouts = [e for e in events if "rejected due to timeout after waiting 20s at plugin Coscheduling" in e.message]
    assert timeouts and timeouts[0].time == 21.0  # 20 s after the members were held at Permit
    unreserved = {e.object for e in events if e.time == 21.0 and e.message == "rejection in Unreserve"}
    assert len(unreserved) == 8  # the other waiting members, released together
    first = sim.cluster.pod(timeouts[0].object)
    assert pod_conditions(first)[0]["type"] == "PodScheduled"
    scheduled = [e for e in events if e.reason == "Scheduled" and e.object.startswith("default/g-")]
    assert len(scheduled) == 10 and len({e.time for e in scheduled}) == 1  # all or nothing
    bound_at = scheduled[0].time
    assert bound_at >= 100.0  # never before the blocker released its core
    group = next(job for job in sim.cluster.job_records() if job.job_id == "default/g")
    assert (group.final_state, group.starting_time, group.finish_time) == (
        "COMPLETED_SUCCESSFULLY",
        bound_at,
        bound_at + 10.0,
    )
    assert len(timeouts) >= 3  # it timed out again at every cycle while the blocker ran (about every 21-30 s)


def job_yaml(name: str, *, completions: int, parallelism: int, backoff_limit: int, extra: str = "") -> str:
    return f"""---
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}}}
spec:
  completions: {completions}
  parallelism: {parallelism}
  backoffLimit: {backoff_limit}
  {extra}
  template:
    metadata:
      annotations:
        pod-complete.stage.kwok.x-k8s.io/delay: "5s"
        sim.kubeflux.io/exit-code: "1"
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: busybox
          resources: {{requests: {{cpu: "1"}}}}
"""


def test_a_job_that_keeps_failing_is_retried_with_back_off_then_fails_backoff_limit_exceeded(tmp_path: Path) -> None:
    # Kubernetes: failed pods are recreated after an exponential back-off (10 s, 20 s, 40 s …); the Job fails once
    # more than backoffLimit pods failed. Pods fail 5 s after they start.
    sim = run_manifests(
        tmp_path, job_yaml("crash", completions=1, parallelism=1, backoff_limit=2), [node("n", 4)], FCFSScheduler()
    )
    pods = [sim.cluster.pod(f"default/crash-{i}") for i in range(3)]
    assert [sp.created_at for sp in pods] == [0.0, 15.0, 40.0]  # failures at 5, 20: waits of 10 s and 20 s
    assert all(sp.pod.phase is PodPhase.FAILED and sp.exit_code == 1 for sp in pods)
    assert all(sp.pod.labels["batch.kubernetes.io/job-name"] == "crash" for sp in pods)
    record = sim.cluster.job_records()[0]
    assert (record.final_state, record.finish_time, record.attempts) == ("COMPLETED_FAILED", 45.0, 3)


def test_a_job_active_deadline_kills_its_running_pods(tmp_path: Path) -> None:
    # activeDeadlineSeconds counts from the Job's start; then its running pods are terminated and the Job fails
    # with reason DeadlineExceeded.
    text = job_yaml("slow", completions=2, parallelism=2, backoff_limit=6, extra="activeDeadlineSeconds: 3")
    sim = run_manifests(tmp_path, text, [node("n", 4)], FCFSScheduler())
    record = sim.cluster.job_records()[0]
    assert (record.final_state, record.finish_time) == ("COMPLETED_WALLTIME_REACHED", 3.0)
    assert all(sp.finished_at == 3.0 and sp.pod.phase is PodPhase.FAILED for sp in sim.cluster.jobs[0].pods)
    assert any(e.reason == "DeadlineExceeded" and e.object == "default/slow" for e in sim.cluster.kube_events)
    assert sim.cluster.free("n")[CPU] == 4000
