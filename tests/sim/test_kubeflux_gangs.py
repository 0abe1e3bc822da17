"""Gangs, minMember, timeouts, backfill in every resource and rejection: what users of coscheduling, Volcano and
Slurm rely on, as scenarios of Kubernetes manifests run through the real simulator (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim._gangs import group_yaml, nodes_yaml


def pod_yaml(
    name: str,
    cpu: str,
    run: int,
    *,
    submit: float = 0,
    memory: str = "1Gi",
    group: str = "",
    scheduler: str = "",
    node: str = "",
) -> str:
    labels = f"\n  labels: {{scheduling.x-k8s.io/pod-group: {group}}}" if group else ""
    spec = f"\n  schedulerName: {scheduler}" if scheduler else ""
    spec += f"\n  nodeSelector: {{kubernetes.io/hostname: {node}}}" if node else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}{labels}
  annotations:
    sim.kubeflux.io/submit-time: "{submit}"
    pod-complete.stage.kwok.x-k8s.io/delay: "{run}s"
    kubeflux.io/duration: "{run}"
spec:{spec}
  containers:
    - name: main
      image: busybox
      resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}"""


def simulate(tmp_path: Path, nodes: str, *objects: str, backfill: str = "easy", others: bool = False) -> Simulation:
    (tmp_path / "nodes.yaml").write_text(nodes)
    (tmp_path / "workload.yaml").write_text("\n---\n".join(objects))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems, workload.problems
    scheduler = KubefluxScheduler(backfill=backfill)
    schedulers: dict[str, object] = {"kubeflux": scheduler}
    if others:
        schedulers["default-scheduler"] = KubeDefaultScheduler()
    sim = Simulation(
        workload,
        read_cluster(tmp_path / "nodes.yaml"),
        schedulers,  # type: ignore[arg-type]
        primary="kubeflux",
        options=SimulationOptions(keep_events=True),
    )
    sim.run()
    return sim


def started(sim: Simulation) -> dict[str, float | None]:
    """Pod name → when it started running (None: never)."""
    return {sp.pod.name: sp.running_at for sp in sim.cluster.pods.values()}


def placed(sim: Simulation) -> dict[str, str]:
    return {sp.pod.name: sp.pod.node_name for sp in sim.cluster.pods.values()}


def test_an_mpi_launcher_listed_before_its_workers_starts_with_them(tmp_path: Path) -> None:
    # Matched one by one in pod order, the 500m launcher takes a millicore of the first 8-core node and the two
    # 8-core workers no longer fit; the assignment search finds launcher on the 4-core node, a worker on each 8.
    sim = simulate(
        tmp_path,
        nodes_yaml(("n8a", "8", "32Gi"), ("n4", "4", "32Gi"), ("n8b", "8", "32Gi")),
        group_yaml("mpi", 3),
        pod_yaml("launcher", "500m", 60, group="mpi"),
        pod_yaml("worker-0", "8", 60, group="mpi"),
        pod_yaml("worker-1", "8", 60, group="mpi"),
    )
    assert started(sim) == {"launcher": 0.0, "worker-0": 0.0, "worker-1": 0.0}
    where = placed(sim)
    assert where["launcher"] == "n4" and {where["worker-0"], where["worker-1"]} == {"n8a", "n8b"}


def test_min_member_two_of_four_starts_two_at_once_and_the_rest_as_room_frees(tmp_path: Path) -> None:
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "32Gi"), ("n1", "8", "32Gi")),
        group_yaml("pg", 2),
        *(pod_yaml(f"pg-{i}", "8", 100, group="pg") for i in range(4)),
    )
    assert sorted(started(sim).values()) == [0.0, 0.0, 100.0, 100.0]  # type: ignore[type-var]


@pytest.mark.parametrize("backfill", ["easy", "fcfs"])
def test_a_gang_past_its_timeout_starts_as_soon_as_it_fits_beside_another_schedulers_churn(
    tmp_path: Path, backfill: str
) -> None:
    # Two 8-core workers need n0 and n1; n0 is busy until 1000. Its 10 s timeout passes a hundred times while
    # default-scheduler pods come and go on n2; it still starts at 1000, the moment it fits.
    churn = [pod_yaml(f"web-{i}", "1", 5, submit=7 * i, scheduler="default-scheduler", node="n2") for i in range(150)]
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "32Gi"), ("n1", "8", "32Gi"), ("n2", "4", "32Gi")),
        pod_yaml("long", "8", 1000),
        group_yaml("mpi", 2, submit=1, timeout=10),
        pod_yaml("mpi-0", "8", 60, submit=1, group="mpi"),
        pod_yaml("mpi-1", "8", 60, submit=1, group="mpi"),
        *churn,
        backfill=backfill,
        others=True,
    )
    times = started(sim)
    assert times["mpi-0"] == times["mpi-1"] == 1000.0
    assert all(times[f"web-{i}"] == 7.0 * i for i in range(150))


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_a_500m_pod_is_not_backfilled_over_the_heads_reservation(tmp_path: Path, backfill: str) -> None:
    # The head needs the whole 8-core node at 100; a 500m pod of 1000 s fits now by the books but would hold
    # 500 millicores the head needs then (it would start at 1002 instead of 100).
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "32Gi")),
        pod_yaml("a", "4", 100),
        pod_yaml("head", "8", 100, submit=1),
        pod_yaml("fraction", "500m", 1000, submit=2),
        backfill=backfill,
    )
    assert started(sim) == {"a": 0.0, "head": 100.0, "fraction": 200.0}


@pytest.mark.parametrize("backfill", ["easy", "conservative"])
def test_a_memory_heavy_pod_is_not_backfilled_over_a_memory_bound_head(tmp_path: Path, backfill: str) -> None:
    # The head waits for memory, not cores: 12Gi of 16Gi while a pod holds 8Gi until 100. A pod of 6Gi fits now
    # beside the first, but would leave the head 10Gi at 100.
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "16Gi")),
        pod_yaml("a", "1", 100, memory="8Gi"),
        pod_yaml("head", "1", 100, submit=1, memory="12Gi"),
        pod_yaml("greedy", "1", 1000, submit=2, memory="6Gi"),
        backfill=backfill,
    )
    assert started(sim) == {"a": 0.0, "head": 100.0, "greedy": 200.0}


def test_a_gang_larger_than_the_cluster_is_rejected_and_does_not_block_a_fcfs_queue(tmp_path: Path) -> None:
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "32Gi"), ("n1", "8", "32Gi")),
        group_yaml("huge", 3),
        *(pod_yaml(f"huge-{i}", "8", 60, group="huge") for i in range(3)),
        pod_yaml("after", "8", 10, submit=1),
        backfill="fcfs",
    )
    times = started(sim)
    assert times["after"] == 1.0 and all(times[f"huge-{i}"] is None for i in range(3))
    job = next(job for job in sim.cluster.jobs if job.wjob.name == "huge")
    assert job.rejected_reason == (
        "pod group default/huge can never fit: its 3 pods need 24 cpu, 3Gi memory in all; the 2 node(s) available "
        "to kubeflux have 16 cpu, 64Gi memory even when empty (too little cpu)."
    )


def test_a_heterogeneous_gang_at_the_head_of_an_easy_queue_is_not_overtaken_by_later_8_core_pods(
    tmp_path: Path,
) -> None:
    # Sized like its largest member, the gang's three slots needed three 8-core nodes: no reservation, and the
    # later 8-core pods took each node as it freed, for ever. Sized by its members, it reserves t=100.
    sim = simulate(
        tmp_path,
        nodes_yaml(("n0", "8", "32Gi"), ("n1", "8", "32Gi"), ("n2", "2", "32Gi")),
        pod_yaml("a", "8", 100),
        pod_yaml("b", "4", 100),
        group_yaml("mpi", 3, submit=1),
        pod_yaml("launcher", "500m", 100, submit=1, group="mpi"),
        pod_yaml("worker-0", "8", 100, submit=1, group="mpi"),
        pod_yaml("worker-1", "8", 100, submit=1, group="mpi"),
        *(pod_yaml(f"late-{i}", "8", 300, submit=2 + i) for i in range(3)),
    )
    times = started(sim)
    assert times["launcher"] == times["worker-0"] == times["worker-1"] == 100.0
    assert sorted(times[f"late-{i}"] for i in range(3)) == [200.0, 200.0, 500.0]  # type: ignore[type-var]
