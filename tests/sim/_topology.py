"""Clusters of racks and jobs as YAML, for the simulator tests of topology (placement, baselines, penalties)."""

from __future__ import annotations

from kubeflux.scheduler.topology import RACK_LEVEL, ZONE_LEVEL
from tests.sim._helpers import gang_job_yaml


def cluster_yaml(racks: int, per_rack: int, cores: int = 16, *, zoned: bool = False) -> str:
    """``racks`` racks (``rack-0`` …) of ``per_rack`` nodes ``node-0`` … (numbered across racks); ``zoned``: each
    rack in a zone of its own (``zone-0`` …)."""
    docs = []
    for index in range(racks * per_rack):
        zone = f", {ZONE_LEVEL}: zone-{index // per_rack}" if zoned else ""
        docs.append(
            f"""apiVersion: v1
kind: Node
metadata:
  name: node-{index}
  labels: {{kubernetes.io/hostname: node-{index}, {RACK_LEVEL}: rack-{index // per_rack}{zone}}}
status:
  allocatable: {{cpu: "{cores}", memory: 64Gi, pods: "110"}}
"""
        )
    return "---\n".join(docs)


def job_yaml(
    name: str,
    submit: float,
    run: int,
    ranks: int,
    *,
    rack: str = "",
    topology: str = "",
    cores: int = 16,
    memory: str = "1Gi",
) -> str:
    """A Job of ``ranks`` pods of ``cores`` and ``memory`` (a PodGroup of them unless ``rack`` pins them to a
    rack)."""
    return gang_job_yaml(
        name,
        submit,
        run,
        ranks,
        cores,
        None,
        group=not rack,
        node_selector=f"{{{RACK_LEVEL}: {rack}}}" if rack else "",
        pod_annotations=f"kueue.x-k8s.io/podset-{topology}-topology: {RACK_LEVEL}" if topology else "",
        memory=memory,
    )


FILLERS = (job_yaml("fill-a", 0, 100, 2, rack="rack-0"), job_yaml("fill-b", 0, 100, 2, rack="rack-1"))
"""Two nodes of rack-0 and two of rack-1 busy: 4 free nodes over two racks, and rack-2's 4."""
