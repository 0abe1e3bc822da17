"""A workload file with Dynamic Resource Allocation or storage objects runs through ``cluster serve --workload`` as in
the simulator: its DeviceClasses, ResourceSlices, ResourceClaimTemplates and ResourceClaims, and its StorageClasses
and PersistentVolumeClaims, are posted before its first job, so every job starts and ends at the same times under
kubeflux and kube-default alike (rev34x finding 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim._dra_yaml import DEVICES, TRAINER, claim_pod, gpu_slice
from tests.sim._gangs import nodes_yaml
from tests.sim._volume_yaml import NODES, STORAGE
from tests.sim._volume_yaml import POD as VOLUME_POD

from ._served import both


def timeline(run: RunRecord) -> dict[str, tuple[object, ...]]:
    return {job.job_id: (job.final_state.name, job.starting_time, job.finish_time) for job in run.jobs}


@pytest.mark.parametrize("scheduler", ["kubeflux", "kube-default"])
def test_a_workload_asking_gpus_through_claims_runs_through_cluster_serve_as_in_the_simulator(
    tmp_path: Path, scheduler: str
) -> None:
    (tmp_path / "nodes.yaml").write_text(nodes_yaml(("n0", "16", "64Gi"), ("n1", "16", "64Gi"), ("n2", "16", "64Gi")))
    objects = [DEVICES, gpu_slice("n1", 2, "16Gi", "t4"), gpu_slice("n2", 4, "80Gi", "h100")]
    objects += [TRAINER.format(i=i) for i in range(3)] + [
        claim_pod(f"notebook-{i}", "one-gpu", seconds=40, at=5 * i) for i in range(2)
    ]
    (tmp_path / "workload.yaml").write_text("\n---\n".join(objects))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems
    simulated, served = both(workload, read_cluster(tmp_path / "nodes.yaml"), scheduler)
    assert {state for state, _, _ in timeline(simulated).values()} == {"COMPLETED_SUCCESSFULLY"}
    assert timeline(served) == timeline(simulated)
    assert served.problems == simulated.problems == []


@pytest.mark.parametrize("scheduler", ["kubeflux", "kube-default"])
def test_a_workload_with_persistent_volume_claims_runs_through_cluster_serve_as_in_the_simulator(
    tmp_path: Path, scheduler: str
) -> None:
    nodes = [NODES.format(name=f"n{i}", zone=zone) for i, zone in enumerate("aabb")]
    (tmp_path / "nodes.yaml").write_text("\n---\n".join(nodes))
    pods = [VOLUME_POD.format(name="first", claim="data", at=0), VOLUME_POD.format(name="second", claim="data", at=10)]
    (tmp_path / "workload.yaml").write_text("\n---\n".join([STORAGE, *pods]))
    workload = read_manifests(tmp_path / "workload.yaml")
    assert not workload.problems
    simulated, served = both(workload, read_cluster(tmp_path / "nodes.yaml"), scheduler)
    assert {state for state, _, _ in timeline(simulated).values()} == {"COMPLETED_SUCCESSFULLY"}
    assert timeline(served) == timeline(simulated)
