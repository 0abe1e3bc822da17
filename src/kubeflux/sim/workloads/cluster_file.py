"""Clusters for the simulator: Kubernetes Node manifests from a file, or a uniform cluster built in code.

:func:`read_cluster` reads what ``kubectl get nodes -o yaml`` prints (a ``v1`` List) or any multi-document YAML of
``v1`` Nodes: ``status.allocatable`` (``capacity`` when absent), labels, taints, ``spec.unschedulable`` and the
``Ready`` condition, through :func:`kubeflux.apiobjects.manifests.node_from_manifest`.
"""

from __future__ import annotations

from pathlib import Path

from kubeflux.apiobjects.manifests import ManifestError, node_from_manifest
from kubeflux.apiobjects.quantity import QuantityError, bytes_
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, PODS, Node
from kubeflux.scheduler.topology import RACK_LEVEL, ZONE_LEVEL
from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.files import check_file
from kubeflux.sim.workloads.yamlfiles import load_documents

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = ZONE_LEVEL
RACK_LABEL = RACK_LEVEL
"""kubeflux's own label for a node's rack: Kubernetes has no well-known one."""

DEFAULT_MAX_PODS = 110
"""kubelet's default ``maxPods``."""


def read_cluster(path: Path | str) -> list[Node]:
    """The Nodes of a YAML file, in file order.

    Raises :class:`WorkloadError` naming the file, the document and the field for a document that is not a valid
    Node (a cluster with a silently missing node would give wrong results), for duplicate node names and for a
    file without nodes.
    """
    path = Path(path)
    check_file(path, "cluster")
    nodes: list[Node] = []
    names: set[str] = set()
    for where, obj in load_documents(path):
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if kind != "Node":
            raise WorkloadError(f"{path.name}: {where}: expected a Node, got kind {kind!r}")
        try:
            node = node_from_manifest(obj)
        except ManifestError as exc:
            raise WorkloadError(f"{path.name}: {where}: {exc}") from exc
        if node.name in names:
            raise WorkloadError(f"{path.name}: {where}: Node {node.name}: metadata.name: defined twice")
        names.add(node.name)
        nodes.append(node)
    if not nodes:
        raise WorkloadError(f"{path.name}: no Node objects")
    return nodes


MAX_NODE_MEMORY = 2**63 - 1
"""The most memory a node may state, in bytes: Kubernetes keeps a quantity's value in an int64."""


def uniform_cluster(
    nodes: int,
    cores_per_node: int,
    memory_per_node: int | str = "256Gi",
    gpus_per_node: int = 0,
    *,
    zones: int = 0,
    racks: int = 0,
    max_pods: int | None = None,
) -> list[Node]:
    """``nodes`` identical nodes named ``node-0000``, ``node-0001`` …

    ``memory_per_node`` is bytes or a Kubernetes quantity (``"256Gi"``); ``gpus_per_node`` adds
    ``nvidia.com/gpu`` when positive. ``zones``/``racks`` > 0 spread the nodes round-robin over zones
    (``zone-0`` …) and in contiguous blocks over racks (``rack-00`` …), as labels. ``pods`` allocatable is
    ``max_pods``, by default the larger of kubelet's 110 and the core count, so that the pod limit never binds
    before the cores do for one-core trace pods.
    """
    if nodes < 0 or cores_per_node < 0 or gpus_per_node < 0:
        raise ValueError("node count, cores and GPUs must not be negative")
    try:
        memory = bytes_(memory_per_node)
    except QuantityError as exc:
        raise ValueError(f"memory_per_node: {exc}") from exc
    if not 0 <= memory <= MAX_NODE_MEMORY:
        raise ValueError(f"memory per node must be between 0 and 8Ei (int64 bytes), got {memory_per_node!r}")
    pods = max_pods if max_pods is not None else max(DEFAULT_MAX_PODS, cores_per_node)
    per_rack = -(-nodes // racks) if racks > 0 else 0
    result = []
    for index in range(nodes):
        name = f"node-{index:04d}"
        allocatable = {CPU: cores_per_node * 1000, MEMORY: memory, PODS: pods}
        if gpus_per_node > 0:
            allocatable[GPU] = gpus_per_node
        labels = {HOSTNAME_LABEL: name}
        if zones > 0:
            labels[ZONE_LABEL] = f"zone-{index % zones}"
        if racks > 0:
            labels[RACK_LABEL] = f"rack-{index // per_rack:02d}"
        result.append(Node(name=name, uid=f"uid-{name}", allocatable=allocatable, labels=labels))
    return result


__all__ = ["HOSTNAME_LABEL", "RACK_LABEL", "ZONE_LABEL", "read_cluster", "uniform_cluster"]
