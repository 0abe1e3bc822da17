"""PodDisruptionBudgets and PriorityClasses that come and go during a ``kubeflux simulate`` run (issue 31): a
workload file times them as it times jobs (``sim.kubeflux.io/submit-time``, and ``sim.kubeflux.io/delete-time``),
and preemption follows: a budget created before an urgent gang arrives spares its gang, one created after does not;
an urgent gang that every budget blocks starts when the budget is deleted; pods naming a class created mid-run get
its priority and preempt, those created before it are forbidden as the real API server forbids them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.model import Lifetime
from tests.sim._helpers import gang_job_yaml, simulate_yaml

FULL = [gang_job_yaml(f"low{g}", g * 10, 1000, 2, planned=True) for g in range(4)]
"""Four low-priority 2 × 8-core gangs filling the 8 nodes of 8 cores, started at 0, 10, 20 and 30 s."""


def urgent(name: str = "urgent", submit: float = 50, ranks: int = 2, priority: int = 1000) -> str:
    return gang_job_yaml(name, submit, 100, ranks, priority=priority, planned=True)


def budget(
    name: str, groups: list[str], min_available: int, created: float | None, deleted: float | None = None
) -> str:
    times = {"sim.kubeflux.io/submit-time": created, "sim.kubeflux.io/delete-time": deleted}
    annotations = ", ".join(f'{key}: "{value}"' for key, value in times.items() if value is not None)
    return f"""apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, annotations: {{{annotations}}}}}
spec:
  minAvailable: {min_available}
  selector:
    matchExpressions: [{{key: scheduling.x-k8s.io/pod-group, operator: In, values: [{", ".join(groups)}]}}]
"""


def priority_class(name: str, value: int, created: float, *, default: bool = False) -> str:
    return f"""apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {name}, annotations: {{sim.kubeflux.io/submit-time: "{created}"}}}}
value: {value}
globalDefault: {str(default).lower()}
"""


def with_class(job: str, name: str) -> str:
    """A gang Job of :func:`gang_job_yaml` (priority 0) whose pods name the PriorityClass ``name`` instead."""
    return job.replace("priority: 0", f"priorityClassName: {name}")


def preempted(pods: list[dict[str, str]]) -> list[str]:
    return sorted({p["job_id"].split("/")[1] for p in pods if p["reason"] == "Preempted"})


def test_a_budget_created_before_the_urgent_gang_spares_its_gang_and_another_goes(tmp_path: Path) -> None:
    _, jobs, pods = simulate_yaml(tmp_path, "kubeflux", budget("keep", ["low3"], 2, 40), *FULL, urgent())
    assert preempted(pods) == ["low2"]  # low3 would lose least, but its budget exists since 40 s
    assert float(jobs["default/urgent"]["starting_time"]) == 50.0


def test_a_budget_created_after_the_urgent_gang_preempted_changes_nothing(tmp_path: Path) -> None:
    _, jobs, pods = simulate_yaml(tmp_path, "kubeflux", budget("keep", ["low3"], 2, 60), *FULL, urgent())
    assert preempted(pods) == ["low3"]
    assert float(jobs["default/urgent"]["starting_time"]) == 50.0


def test_an_urgent_gang_every_budget_blocks_preempts_when_the_budget_is_deleted(tmp_path: Path) -> None:
    lows = [f"low{g}" for g in range(4)]
    _, jobs, pods = simulate_yaml(tmp_path, "kubeflux", budget("all", lows, 8, None, 300), *FULL, urgent())
    assert preempted(pods) == ["low3"]  # at 300 s: still the one that loses least
    assert float(jobs["default/urgent"]["starting_time"]) == 300.0
    assert {p["end_time"] for p in pods if p["reason"] == "Preempted"} == {"300.0"}


def test_kube_default_also_follows_a_budget_created_mid_run(tmp_path: Path) -> None:
    """kube-scheduler's DefaultPreemption prefers victims whose eviction violates no budget: low3's since 40 s."""
    one_rank = urgent(ranks=1)
    _, _, without = simulate_yaml(tmp_path / "a", "kube-default", *FULL, one_rank)
    _, _, guarded = simulate_yaml(tmp_path / "b", "kube-default", budget("keep", ["low3"], 2, 40), *FULL, one_rank)
    assert preempted(without) == ["low3"]
    assert preempted(guarded) != ["low3"] and len(preempted(guarded)) == 1


def test_pods_of_a_class_created_mid_run_get_its_priority_and_preempt(tmp_path: Path) -> None:
    docs = [priority_class("urgent", 1000, 40), *FULL, with_class(urgent(priority=0), "urgent")]
    summary, jobs, pods = simulate_yaml(tmp_path, "kubeflux", *docs)
    assert jobs["default/urgent"]["priority"] == "1000" and jobs["default/urgent"]["priority_class"] == "urgent"
    assert float(jobs["default/urgent"]["starting_time"]) == 50.0
    assert preempted(pods) == ["low3"]
    assert summary["mean_waiting_time[urgent]"] == 0.0


def test_pods_naming_a_class_before_it_exists_are_forbidden(tmp_path: Path) -> None:
    docs = [priority_class("urgent", 1000, 40), *FULL, with_class(urgent("early", 35, priority=0), "urgent")]
    _, jobs, pods = simulate_yaml(tmp_path, "kubeflux", *docs)
    assert jobs["default/early"]["final_state"] == "REJECTED"
    assert "no PriorityClass with name urgent was found" in jobs["default/early"]["metadata"]
    assert preempted(pods) == []


def test_a_default_class_created_mid_run_gives_later_pods_its_priority(tmp_path: Path) -> None:
    """A ``globalDefault`` class from 45 s: the gang at 50 s that names none gets its 100 and preempts a low gang;
    the low gangs, admitted before, keep priority 0."""
    docs = [priority_class("batch", 100, 45, default=True), *FULL, urgent(priority=0).replace("priority: 0", "")]
    _, jobs, pods = simulate_yaml(tmp_path, "kubeflux", *docs)
    assert jobs["default/urgent"]["priority"] == "100" and jobs["default/urgent"]["priority_class"] == "batch"
    assert {jobs[f"default/low{g}"]["priority"] for g in range(4)} == {"0"}
    assert preempted(pods) == ["low3"]


def test_the_times_are_read_and_checked_as_jobs_are(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "---\n".join(
            [
                budget("later", ["low0"], 1, 10, 50),
                budget("backwards", ["low1"], 1, 50, 50),
                budget("bad", ["low2"], 1, None, -5),
                priority_class("urgent", 1000, 40),
                *FULL,
            ]
        )
    )
    workload = read_manifests(path)
    assert workload.lifetimes == {
        "PodDisruptionBudget default/later": Lifetime(10.0, 50.0),
        "PriorityClass urgent": Lifetime(40.0, None),
    }
    problems = "\n".join(workload.problems)
    assert (
        "PodDisruptionBudget default/backwards: metadata.annotations.sim.kubeflux.io/delete-time: must be after its "
        "submit time (50 s), got 50; skipped"
    ) in problems
    assert "PodDisruptionBudget default/bad: metadata.annotations.sim.kubeflux.io/delete-time: " in problems
    assert [b.name for b in workload.budgets] == ["later"]


@pytest.mark.parametrize("scheduler", ["kubeflux", "kube-default"])
def test_a_budget_deleted_before_the_first_job_guards_nothing(tmp_path: Path, scheduler: str) -> None:
    """The run begins at the first submission (1 s here): a budget deleted at 0.5 s is never in it."""
    lows = [f"low{g}" for g in range(4)]
    late = [job.replace('submit-time: "0"', 'submit-time: "1"') for job in FULL]
    docs = [budget("gone", lows, 8, None, 0.5), *late, urgent(ranks=1 if scheduler == "kube-default" else 2)]
    _, jobs, pods = simulate_yaml(tmp_path, scheduler, *docs)
    assert preempted(pods)
    assert float(jobs["default/urgent"]["starting_time"]) <= 51.0  # kube-default binds a second after it preempts
