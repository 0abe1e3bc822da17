"""Preemption as a user meets it in ``kubeflux simulate`` (issue 31): Jobs in gangs of Kubernetes manifests on a
full cluster, an urgent gang arriving; what ``jobs.csv`` and ``pods.csv`` say afterwards."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from kubeflux.cli import app
from tests.sim._helpers import EIGHT_8CORE, gang_job_yaml, simulate_yaml


def gang_job(name: str, submit: float, run: int, size: int, priority: int = 0, policy: str = "") -> str:
    """A PodGroup of ``size`` and its Job of as many 8-core pods, their run time told to kubeflux."""
    return gang_job_yaml(name, submit, run, size, 8, priority, policy, planned=True)


def run(tmp_path: Path, scheduler: str, *jobs: str) -> tuple[dict[str, dict[str, str]], list[dict[str, str]]]:
    _, jobs_rows, pods_rows = simulate_yaml(tmp_path, scheduler, *jobs)
    return jobs_rows, pods_rows


FULL = [gang_job(f"low{g}", g * 10, 1000, 2) for g in range(4)]


def test_an_urgent_gang_evicts_two_whole_gangs_starts_at_once_and_the_evicted_jobs_restart(tmp_path: Path) -> None:
    jobs, pods = run(tmp_path, "kubeflux", *FULL, gang_job("urgent", 50, 100, 4, priority=1000))
    assert float(jobs["default/urgent"]["starting_time"]) == 50.0
    preempted = [p for p in pods if p["reason"] == "Preempted"]
    assert sorted(p["pod"] for p in preempted) == [f"default/low{g}-{i}" for g in (2, 3) for i in (0, 1)]
    assert {p["phase"] for p in preempted} == {"Failed"} and {p["end_time"] for p in preempted} == {"50.0"}
    for name in ("low2", "low3"):  # their Jobs made new pods, which ran once the urgent gang was done
        assert jobs[f"default/{name}"]["final_state"] == "COMPLETED_SUCCESSFULLY"
        again = [p for p in pods if p["job_id"] == f"default/{name}" and p["reason"] == "Completed"]
        assert len(again) == 2 and all(float(p["running_time"]) >= 150.0 for p in again)
    for name in ("low0", "low1"):
        assert float(jobs[f"default/{name}"]["finish_time"]) == 1000.0 + int(name[-1]) * 10
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    row = summary[0]
    assert (row["preempted_pods"], row["preempted_jobs"]) == (4, 2)
    assert row["work_lost_core_seconds"] == 2 * 8 * (50 - 20) + 2 * 8 * (50 - 30)  # low2's and low3's 8-core pods


def test_a_preemptor_with_policy_never_waits_for_room(tmp_path: Path) -> None:
    jobs, pods = run(tmp_path, "kubeflux", *FULL, gang_job("urgent", 50, 100, 4, priority=1000, policy="Never"))
    assert not [p for p in pods if p["reason"] == "Preempted"]
    assert float(jobs["default/urgent"]["starting_time"]) == 1010.0  # when low0 and low1 are done


def test_equal_priorities_never_preempt(tmp_path: Path) -> None:
    _, pods = run(tmp_path, "kubeflux", *FULL, gang_job("urgent", 50, 100, 4))
    assert not [p for p in pods if p["reason"] == "Preempted"]


def test_the_kubeflux_scheduler_without_preemption(tmp_path: Path) -> None:
    jobs, pods = run(tmp_path, "kubeflux-no-preemption", *FULL, gang_job("urgent", 50, 100, 4, priority=1000))
    assert not [p for p in pods if p["reason"] == "Preempted"]
    assert float(jobs["default/urgent"]["starting_time"]) == 1010.0


def test_an_unknown_preemption_policy_is_refused_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(gang_job("odd", 0, 10, 1, priority=5, policy="Sometimes"))
    args = ["simulate", "-w", str(tmp_path / "bad.yaml"), "--nodes", "1", "--cores-per-node", "8", "-s", "kubeflux"]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert 'spec.preemptionPolicy: Unsupported value: "Sometimes"' in " ".join(result.output.split())


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_guarded_example_keeps_the_budgeted_gang_and_lets_the_patient_and_the_equal_wait(tmp_path: Path) -> None:
    """examples/workloads/urgent-gang-guarded.yaml: PriorityClasses (one with preemptionPolicy Never) and a
    PodDisruptionBudget in the workload file, as users write them."""
    out = tmp_path / "out"
    workload = EXAMPLES / "workloads" / "urgent-gang-guarded.yaml"
    args = ["simulate", "-w", str(workload), "--cluster", str(EIGHT_8CORE)]
    result = CliRunner().invoke(app, [*args, "-s", "kubeflux", "-o", str(out)])
    assert result.exit_code == 0, result.output
    with (out / "kubeflux" / "jobs.csv").open() as f:
        jobs = {row["job_id"]: row for row in csv.DictReader(f)}
    with (out / "kubeflux" / "pods.csv").open() as f:
        preempted = sorted(row["pod"] for row in csv.DictReader(f) if row["reason"] == "Preempted")
    assert preempted == [f"default/low{g}-{i}" for g in (1, 2) for i in (0, 1)]  # low3's budget allows nothing
    assert float(jobs["default/urgent"]["starting_time"]) == 50.0
    assert float(jobs["default/patient"]["starting_time"]) == 150.0  # Never: it waits for the urgent job's room
    assert float(jobs["default/equal"]["starting_time"]) == 1000.0  # priority 0: it waits for low0 to end
    assert float(jobs["default/low3"]["finish_time"]) == 1030.0


def test_the_summary_gives_the_mean_wait_of_each_priority_class(tmp_path: Path) -> None:
    """The guarded example names two PriorityClasses: jobs.csv says which gave each job its priority, and the summary
    (and the table) the mean wait of each, beside that of the jobs no class gave one."""
    out = tmp_path / "out"
    workload = EXAMPLES / "workloads" / "urgent-gang-guarded.yaml"
    args = ["simulate", "-w", str(workload), "--cluster", str(EIGHT_8CORE)]
    result = CliRunner().invoke(app, [*args, "-s", "kubeflux", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "mean wait of started urgent-patient" in result.output
    with (out / "kubeflux" / "jobs.csv").open() as f:
        classes = {row["job_id"]: row["priority_class"] for row in csv.DictReader(f)}
    assert classes["default/urgent"] == "urgent" and classes["default/patient"] == "urgent-patient"
    assert classes["default/low0"] == classes["default/equal"] == ""
    summary = json.loads((out / "summary.json").read_text())[0]
    by_class = {key: value for key, value in summary.items() if key.endswith("]") and "utilization" not in key}
    assert by_class == {
        "started_jobs[]": 5,
        "mean_waiting_time[]": summary["mean_waiting_time_others"],
        "started_jobs[urgent]": 1,
        "mean_waiting_time[urgent]": 0.0,
        "started_jobs[urgent-patient]": 1,
        "mean_waiting_time[urgent-patient]": 90.0,
    }


def test_without_priority_classes_jobs_csv_and_the_summary_are_as_before(tmp_path: Path) -> None:
    """Priorities given without a class (``spec.priority``, as ``--urgent`` gives them): no ``priority_class``
    column, no per-class figures."""
    summary, jobs, _ = simulate_yaml(tmp_path, "kubeflux", *FULL, gang_job("urgent", 50, 100, 4, priority=1000))
    assert "priority_class" not in next(iter(jobs.values()))
    assert not [key for key in summary if key.startswith(("started_jobs[", "mean_waiting_time["))]


IGNORE_DISRUPTIONS = """  backoffLimit: 0
  podFailurePolicy:
    rules:
    - action: Ignore
      onPodConditions: [{type: DisruptionTarget}]
"""


def test_a_preempted_job_that_ignores_disruptions_restarts_beyond_backoff_limit_0_and_one_that_does_not_fails(
    tmp_path: Path,
) -> None:
    """The victims' pods end with the ``DisruptionTarget`` condition: low3's Job says to ignore it (as Job users
    write ``podFailurePolicy`` for preemptible work) and is retried although its ``backoffLimit`` is 0; low2's Job,
    with ``backoffLimit: 0`` and no such rule, fails at the eviction."""
    sturdy = FULL[3].replace("  completions: 2\n", "  completions: 2\n" + IGNORE_DISRUPTIONS)
    fragile = FULL[2].replace("  completions: 2\n", "  completions: 2\n  backoffLimit: 0\n")
    jobs, pods = run(tmp_path, "kubeflux", *FULL[:2], fragile, sturdy, gang_job("urgent", 50, 100, 4, priority=1000))
    assert sorted({p["job_id"] for p in pods if p["reason"] == "Preempted"}) == ["default/low2", "default/low3"]
    assert jobs["default/low3"]["final_state"] == "COMPLETED_SUCCESSFULLY"
    assert float(jobs["default/low3"]["finish_time"]) >= 150.0 + 1000.0  # ran again once the urgent job was done
    assert jobs["default/low2"]["final_state"] == "COMPLETED_FAILED"
    assert float(jobs["default/low2"]["finish_time"]) == 50.0


def test_a_backfilled_low_job_that_overruns_into_an_urgent_reservation_is_preempted_when_the_room_comes(
    tmp_path: Path,
) -> None:
    """``wide`` (priority 1000) needs all 8 nodes; ``busy`` (1000 too: no victim) holds 6 until 1000 s, so ``wide``
    reserves the cluster from then. ``filler`` (priority 0) says it runs 100 s and is backfilled onto the 2 free
    nodes at 2 s, but runs on: at 1000 s it is all that keeps ``wide`` from starting, and is evicted (a reservation
    alone evicts nothing: only a job that would start now preempts). Without preemption ``wide`` waits for it."""
    busy = gang_job("busy", 0, 1000, 6, priority=1000)
    wide = gang_job("wide", 1, 100, 8, priority=1000)
    filler = gang_job("filler", 2, 5000, 2).replace('kubeflux.io/duration: "5000"', 'kubeflux.io/duration: "100"')
    jobs, pods = run(tmp_path / "on", "kubeflux", busy, wide, filler)
    assert float(jobs["default/filler"]["starting_time"]) == 2.0  # backfilled: its own word fits before 1000 s
    preempted = {p["job_id"]: float(p["end_time"]) for p in pods if p["reason"] == "Preempted"}
    assert preempted == {"default/filler": 1000.0}
    assert float(jobs["default/wide"]["starting_time"]) == 1000.0
    jobs, pods = run(tmp_path / "off", "kubeflux-no-preemption", busy, wide, filler)
    assert not [p for p in pods if p["reason"] == "Preempted"]
    assert float(jobs["default/wide"]["starting_time"]) == 5002.0


def gpu_pod(name: str, submit: float, priority: int) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{sim.kubeflux.io/submit-time: "{submit}", pod-complete.stage.kwok.x-k8s.io/delay: "1000s"}}
spec:
  priority: {priority}
  containers:
    - name: train
      image: trainer
      resources: {{requests: {{cpu: "8", memory: 1Gi, nvidia.com/gpu: "4"}}}}
"""


def test_the_work_an_eviction_throws_away_is_counted_in_core_and_gpu_seconds(tmp_path: Path) -> None:
    """Two nodes of 8 cores and 4 gpus, each taken by a low-priority training pod (started at 0 and 10 s); an urgent
    one at 50 s evicts the later: 40 s of 8 cores and 4 gpus thrown away."""
    (tmp_path / "w.yaml").write_text(
        "---\n".join([gpu_pod("a", 0, 0), gpu_pod("b", 10, 0), gpu_pod("urgent", 50, 1000)])
    )
    out = tmp_path / "out"
    nodes = ["--nodes", "2", "--cores-per-node", "8", "--gpus-per-node", "4"]
    result = CliRunner().invoke(
        app, ["simulate", "-w", str(tmp_path / "w.yaml"), *nodes, "-s", "kubeflux", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    row = json.loads((out / "summary.json").read_text())[0]
    assert (row["preempted_pods"], row["preempted_jobs"]) == (1, 1)
    assert (row["work_lost_core_seconds"], row["work_lost_gpu_seconds"]) == (40 * 8, 40 * 4)
