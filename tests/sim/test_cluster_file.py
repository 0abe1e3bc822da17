from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Taint
from kubeflux.sim.workloads import WorkloadError
from kubeflux.sim.workloads.cluster_file import RACK_LABEL, ZONE_LABEL, read_cluster, uniform_cluster

CLUSTERS = Path(__file__).resolve().parents[2] / "examples" / "clusters"


def test_kubectl_list_of_kwok_gpu_nodes() -> None:
    nodes = read_cluster(CLUSTERS / "four-gpu-nodes.yaml")
    assert [n.name for n in nodes] == ["kwok-node-0", "kwok-node-1", "kwok-node-2", "kwok-node-3"]
    assert nodes[0].allocatable == {CPU: 5000, MEMORY: 256 * 2**30, GPU: 8, PODS: 110}
    assert nodes[0].taints == (Taint("kwok.x-k8s.io/node", "fake", "NoSchedule"),)
    assert nodes[1].labels["topology.kubernetes.io/zone"] == "zone-1"


def test_multi_document_nodes_with_taints_and_cordon() -> None:
    nodes = read_cluster(CLUSTERS / "cpu-nodes.yaml")
    assert [n.allocatable[CPU] for n in nodes] == [16000] * 4
    assert [n.unschedulable for n in nodes] == [False, False, False, True]
    assert nodes[2].taints == (Taint("dedicated", "hpc", "NoSchedule"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
            "cluster.yaml: document 1: expected a Node, got kind 'Pod'",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n"
            "apiVersion: v1\nkind: Node\nmetadata: {name: m}\nstatus: {allocatable: {cpu: many}}\n",
            "cluster.yaml: document 2: Node m: status.allocatable.cpu: invalid quantity 'many'",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n",
            "cluster.yaml: document 2: Node n: metadata.name: defined twice",
        ),
        ("# nothing here\n", "cluster.yaml: no Node objects"),
    ],
    ids=["not-a-node", "bad-quantity", "duplicate", "empty"],
)
def test_bad_cluster_files_name_document_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(WorkloadError) as info:
        read_cluster(path)
    assert str(info.value).startswith(message)


def test_uniform_cluster() -> None:
    nodes = uniform_cluster(6, 32, "128Gi", 4, zones=2, racks=3)
    assert [n.name for n in nodes[:3]] == ["node-0000", "node-0001", "node-0002"]
    assert nodes[0].allocatable == {CPU: 32000, MEMORY: 128 * 2**30, PODS: 110, GPU: 4}
    assert [n.labels[ZONE_LABEL] for n in nodes] == ["zone-0", "zone-1"] * 3
    assert [n.labels[RACK_LABEL] for n in nodes] == ["rack-00", "rack-00", "rack-01", "rack-01", "rack-02", "rack-02"]
    big = uniform_cluster(1, 256, 2**40)
    assert big[0].allocatable[PODS] == 256 and GPU not in big[0].allocatable  # pods never bind before cores
    with pytest.raises(ValueError, match="memory_per_node"):
        uniform_cluster(1, 1, "lots")
