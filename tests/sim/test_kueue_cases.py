"""Named cases of Kueue's documented behaviour (``docs/kueue.md``), each a small workload file run through the
simulator: the Kueue objects, the workloads (lone pods, PodGroups, Jobs) and what Kueue does with them, as the
start and end of each job, or why it is never admitted (issue 33)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import simulate
from kubeflux.sim.workloads import load_workload
from tests.sim._kueue_yaml import EVERY_NAMESPACE, FLAVOR, cluster_queue, job, local_queue, pod, pod_group


def cohort(name: str, cpu: int, policy: str = "") -> str:
    return cluster_queue(name, cpu, spec=f"{EVERY_NAMESPACE}  cohort: shared\n{policy}")


@dataclass(frozen=True)
class Case:
    documents: list[str]
    runs: dict[str, tuple[float, float]]
    """Job id → (start, end)."""
    never: dict[str, str] | None = None
    """Job id → why Kueue never admits it."""


def _within(policy: str) -> list[str]:
    """A queue of 4 cores preempting within by ``policy``: wa (2 cores) runs until 3 s; wp (4 cores, created at 1 s)
    does not fit and is set aside; wn (2 cores, created at 2 s, 100 s) fits and is admitted. When wa ends, wp needs
    wn's cores: wn is of wp's priority, created after it."""
    spec = f"{EVERY_NAMESPACE}  preemption: {{withinClusterQueue: {policy}}}\n"
    return [
        FLAVOR,
        cluster_queue("cq", 4, spec=spec),
        local_queue("default", "cq"),
        pod("wa", 2, 0, 3),
        pod("wp", 4, 1, 10),
        pod("wn", 2, 2, 100),
    ]


NOT_SELECTED = "Workload namespace doesn't match ClusterQueue cq selector"
CASES = {
    "lower-or-newer-equal-priority preempts an equal-priority workload created after it": Case(
        _within("LowerOrNewerEqualPriority"),
        {"default/wa": (0.0, 3.0), "default/wp": (3.0, 13.0), "default/wn": (13.0, 113.0)},
    ),
    "lower-priority never preempts an equal priority: wp waits for wn": Case(
        _within("LowerPriority"),
        {"default/wa": (0.0, 3.0), "default/wn": (2.0, 102.0), "default/wp": (102.0, 112.0)},
    ),
    "no namespaceSelector selects no namespace": Case(
        [FLAVOR, cluster_queue("cq", 4, spec=""), local_queue("default", "cq"), pod("p", 1, 0, 10)],
        {},
        {"default/p": NOT_SELECTED},
    ),
    "an empty namespaceSelector selects every namespace": Case(
        [FLAVOR, cluster_queue("cq", 4), local_queue("default", "cq"), pod("p", 1, 0, 10)],
        {"default/p": (0.0, 10.0)},
    ),
    "a namespaceSelector on kubernetes.io/metadata.name selects the namespaces it names": Case(
        [
            FLAVOR,
            cluster_queue("cq", 4, spec="  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}\n"),
            local_queue("team-a", "cq"),
            local_queue("team-b", "cq"),
            pod("p", 1, 0, 10, namespace="team-a"),
            pod("p", 1, 0, 10, namespace="team-b"),
        ],
        {"team-a/p": (0.0, 10.0)},
        {"team-b/p": NOT_SELECTED},
    ),
    "a namespaceSelector on a label a Namespace object of the file gives selects that namespace": Case(
        [
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {team: a}}\n",
            FLAVOR,
            cluster_queue("cq", 4, spec="  namespaceSelector: {matchLabels: {team: a}}\n"),
            local_queue("team-a", "cq"),
            local_queue("team-b", "cq"),
            pod("p", 1, 0, 10, namespace="team-a"),
            pod("p", 1, 0, 10, namespace="team-b"),
        ],
        {"team-a/p": (0.0, 10.0)},
        {"team-b/p": NOT_SELECTED},
    ),
    "a ClusterQueue naming a missing flavor is inactive": Case(
        [FLAVOR, cluster_queue("cq", 4, flavor="gone"), local_queue("default", "cq"), pod("p", 1, 0, 10)],
        {},
        {"default/p": "ClusterQueue cq is inactive: flavor gone not found"},
    ),
    "the pods resource counts a PodGroup's pods: 3 never fit a quota of 2, a lone pod waits for a group of 2": Case(
        [
            FLAVOR,
            cluster_queue("cq", 16, pods=2),
            local_queue("default", "cq"),
            *pod_group("g2", 2, 0, 10),
            *pod_group("g3", 3, 0, 10),
            pod("p", 1, 1, 10),
        ],
        {"default/g2": (0.0, 10.0), "default/p": (10.0, 20.0)},
        {"default/g3": "insufficient quota for pods in flavor default-flavor"},
    ),
    "heads that need not borrow are admitted first, before a higher priority that would borrow": Case(
        [
            FLAVOR,
            cohort("a", 4),
            cohort("b", 4),
            local_queue("team-a", "a"),
            local_queue("team-b", "b"),
            pod("a0", 4, 0, 100, namespace="team-a"),
            pod("a1", 2, 1, 10, namespace="team-a", priority=10),
            pod("b1", 4, 1, 100, namespace="team-b"),
        ],
        {"team-a/a0": (0.0, 100.0), "team-b/b1": (1.0, 101.0), "team-a/a1": (100.0, 110.0)},
    ),
    "a Job evicted keeps its completions: 1 of 4 done before, 3 after": Case(
        [
            FLAVOR,
            cohort("a", 8),
            cohort("b", 8, "  preemption: {reclaimWithinCohort: Any}\n"),
            local_queue("team-a", "a"),
            local_queue("team-b", "b"),
            pod("first", 8, 0, 300, namespace="team-a"),
            job("steps", "team-a", 8, 1, 50, completions=4),
            pod("reclaim", 8, 100, 100, namespace="team-b"),
        ],
        {"team-a/first": (0.0, 300.0), "team-b/reclaim": (100.0, 200.0), "team-a/steps": (200.0, 350.0)},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_kueue_case(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    path = tmp_path / "case.yaml"
    path.write_text("---\n".join(case.documents))
    workload = load_workload(path)
    assert workload.problems == []
    scheduler = create("kube-default")
    nodes = [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 2**35}) for i in range(4)]
    record = simulate(workload, nodes, {scheduler.name: scheduler})
    runs = {job.job_id: (job.starting_time, job.finish_time) for job in record.jobs if job.finish_time is not None}
    assert runs == case.runs
    never = {job.job_id: job.reason for job in record.jobs if job.finish_time is None}
    assert never == {key: f"not admitted by Kueue: {why}" for key, why in (case.never or {}).items()}
