"""Pod groups and nodes as YAML, for the simulator tests of gangs (kubeflux's and the baselines'), and a run of such
files."""

from __future__ import annotations

from pathlib import Path

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests


def nodes_yaml(*shapes: tuple[str, str, str]) -> str:
    """Nodes from (name, cpu, memory)."""
    return "\n---\n".join(
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}\n"
        f"status: {{allocatable: {{cpu: '{cpu}', memory: {memory}, pods: '110'}}}}"
        for name, cpu, memory in shapes
    )


def group_yaml(name: str, min_member: int, *, submit: float = 0, timeout: int | None = None) -> str:
    extra = f"\n  scheduleTimeoutSeconds: {timeout}" if timeout is not None else ""
    return f"""apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: {name}
  annotations: {{sim.kubeflux.io/submit-time: "{submit}"}}
spec:
  minMember: {min_member}{extra}"""


def simulation(tmp_path: Path, nodes: str, objects: list[str], scheduler: Scheduler) -> Simulation:
    """A simulation of the workload ``objects`` (YAML documents) on the cluster ``nodes`` (YAML) under ``scheduler``
    (named ``kubeflux``, the primary), events kept; the workload must read without a problem."""
    (tmp_path / "nodes.yaml").write_text(nodes)
    (tmp_path / "workload.yaml").write_text("\n---\n".join(objects))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems, workload.problems
    return Simulation(
        workload,
        read_cluster(tmp_path / "nodes.yaml"),
        {"kubeflux": scheduler},
        primary="kubeflux",
        options=SimulationOptions(keep_events=True),
    )
