"""Volumes through the simulator, from Kubernetes manifests (issue 34): a pod whose claim waits for its first consumer
runs where its class may provision, and the claim gets the node the scheduler chose
(``volume.kubernetes.io/selected-node``); a second pod of the claim follows it there; a pod whose ``Immediate``
claim nothing binds never runs. kubeflux and the kube-default baseline alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.storage import PersistentVolumeClaim
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim._volume_yaml import NODES, POD, STORAGE


@pytest.mark.parametrize("scheduler", ["kubeflux", "kube-default"])
def test_a_claim_waiting_for_its_first_consumer_gets_the_node_the_scheduler_chose(
    tmp_path: Path, scheduler: str
) -> None:
    nodes = [NODES.format(name=f"n{i}", zone=zone) for i, zone in enumerate("aabb")]
    (tmp_path / "nodes.yaml").write_text("\n---\n".join(nodes))
    pods = [POD.format(name="first", claim="data", at=0), POD.format(name="second", claim="data", at=10)]
    pods.append(POD.format(name="stuck", claim="never", at=0))
    (tmp_path / "workload.yaml").write_text("\n---\n".join([STORAGE, *pods]))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems, workload.problems
    core = KubefluxScheduler() if scheduler == "kubeflux" else KubeDefaultScheduler("kubeflux")
    sim = Simulation(
        workload,
        read_cluster(tmp_path / "nodes.yaml"),
        {"kubeflux": core},  # type: ignore[dict-item]
        primary="kubeflux",
        options=SimulationOptions(until=500.0),
    )
    sim.run()
    placed = {sp.pod.name: sp.pod.node_name for sp in sim.cluster.pods.values()}
    assert placed["first"] in ("n2", "n3")  # zone b, where the class provisions
    assert placed["second"] == placed["first"]  # the claim's node
    assert not placed["stuck"]
    claim = sim.storage["PersistentVolumeClaim default/data"]
    assert isinstance(claim, PersistentVolumeClaim) and claim.selected_node == placed["first"]


def test_a_claim_of_a_workload_file_naming_no_class_gets_the_default_class(tmp_path: Path) -> None:
    """As the API server's DefaultStorageClass admission stores it: the claim is of the class annotated the
    default (the file lists it after the claim)."""
    default = STORAGE.split("---")[0].replace(
        "{name: zonal}", "{name: zonal, annotations: {storageclass.kubernetes.io/is-default-class: 'true'}}"
    )
    plain = """apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: plain}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}"""
    (tmp_path / "workload.yaml").write_text("\n---\n".join([plain, default]))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems, workload.problems
    claims = [obj for obj in workload.storage if isinstance(obj, PersistentVolumeClaim)]
    assert [c.storage_class for c in claims] == ["zonal"]


def test_storage_objects_of_a_workload_file_are_checked_as_the_served_api_server_checks_them(tmp_path: Path) -> None:
    """What ``cluster serve`` would refuse (422) is reported naming the file, the object and the field, and left
    out, never read as something else nor a crash."""
    bad = """apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: typo}
spec:
  accessModes: [ReadWriteOnePod]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: negative}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: -1Gi}}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n0}
spec:
  drivers: [{name: csi.example.com, nodeID: n0, allocatable: [1]}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec:
  drivers: [{name: csi.example.com, nodeID: n1, allocatable: {count: -1}}]"""
    (tmp_path / "workload.yaml").write_text(bad)
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.storage
    said = "\n".join(workload.problems)
    for field in (
        'PersistentVolumeClaim typo: spec.accessModes: Unsupported value: "ReadWriteOnePod"',
        "PersistentVolumeClaim negative: spec.resources[storage]: Invalid value",
        "CSINode n0: spec.drivers[0].allocatable: Invalid value: must be an object",
        "CSINode n1: spec.drivers[0].allocatable.count: Invalid value: -1",
    ):
        assert field in said
    assert all(problem.startswith("workload.yaml") for problem in workload.problems)
