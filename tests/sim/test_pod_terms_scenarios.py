"""Inter-pod anti-affinity through the simulator, from Kubernetes manifests (issue 34): an MPI job with one rank per
node by required anti-affinity starts as a whole gang on distinct nodes under kubeflux, and kube-default keeps its
ranks apart too."""

from __future__ import annotations

from pathlib import Path

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.driver import Simulation
from tests.sim._gangs import group_yaml, nodes_yaml, simulation

RANK = """apiVersion: v1
kind: Pod
metadata:
  name: rank-{i}
  labels: {{app: mpi, scheduling.x-k8s.io/pod-group: mpi}}
  annotations:
    pod-complete.stage.kwok.x-k8s.io/delay: "100s"
    kubeflux.io/duration: "100"
spec:
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {{matchLabels: {{app: mpi}}}}
          topologyKey: kubernetes.io/hostname
  containers:
    - name: main
      image: mpi
      resources: {{requests: {{cpu: "2", memory: 1Gi}}}}"""


def run(tmp_path: Path, scheduler: object, ranks: int) -> Simulation:
    """``ranks`` ranks on a 64-core node and five 8-core ones: without their anti-affinity, lonode would put four
    on one node, and LeastAllocated most of them on the big one."""
    nodes = nodes_yaml(("n0", "64", "128Gi"), *[(f"n{i}", "8", "16Gi") for i in range(1, 6)])
    objects = [group_yaml("mpi", ranks), *(RANK.format(i=i) for i in range(ranks))]
    sim = simulation(tmp_path, nodes, objects, scheduler)  # type: ignore[arg-type]
    sim.run()
    return sim


def test_an_mpi_job_with_one_rank_per_node_starts_whole_on_distinct_nodes(tmp_path: Path) -> None:
    scheduler = KubefluxScheduler()
    sim = run(tmp_path, scheduler, 5)
    pods = list(sim.cluster.pods.values())
    assert len({sp.pod.node_name for sp in pods}) == 5
    assert len({sp.running_at for sp in pods}) == 1  # started together
    matches = [line for line in scheduler.log if line.startswith("Match allocate") and "default/mpi" in line]
    assert len(matches) == 1, matches  # the whole gang in one match: one slot on each of five nodes


def test_kube_default_keeps_the_ranks_apart(tmp_path: Path) -> None:
    sim = run(tmp_path, KubeDefaultScheduler("kubeflux"), 5)
    assert len({sp.pod.node_name for sp in sim.cluster.pods.values()}) == 5
