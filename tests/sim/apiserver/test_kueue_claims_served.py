"""Kueue and Dynamic Resource Allocation together, through ``cluster serve`` (the served API in virtual time) as in
``simulate`` (rev34y #4): Jobs and lone pods of a LocalQueue whose pods ask GPUs through ResourceClaimTemplates.

A lone pod of a LocalQueue exists from its submission, held by Kueue's scheduling gate (the served cluster creates
it so, as Kueue's webhook does), and the resourceclaim controller makes its claim then, gated or not; its creation
time is its place in kubeflux's and kube-scheduler's queues once admitted. The simulator made it on admission: a
lone pod and a Job admitted at one instant were then tried in the other order, and their pods took other GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim._dra_yaml import DEVICE, DEVICES, SLICE, one_gpu_template
from tests.sim._gangs import nodes_yaml
from tests.sim._kueue_yaml import FLAVOR, cluster_queue, job, local_queue

from ._served import both, schedule

ONE_GPU = one_gpu_template("one-gpu")
CLAIMS = "      resourceClaims: [{name: gpus, resourceClaimTemplateName: %s}]\n"
LONE_POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: q}}
  annotations: {{sim.kubeflux.io/submit-time: '{at}', pod-complete.stage.kwok.x-k8s.io/delay: {seconds}s}}
spec:
  resourceClaims: [{{name: gpus, resourceClaimTemplateName: {template}}}]
  containers: [{{name: main, image: busybox, resources: {{requests: {{cpu: '{cpu}'}}, claims: [{{name: gpus}}]}}}}]"""


def gpus(node: str, count: int, model: str, memory: str) -> str:
    devices = "\n".join(DEVICE.format(i=i, model=model, memory=memory) for i in range(count))
    return SLICE.format(node=node, devices=devices)


def files(tmp_path: Path, documents: list[str]) -> tuple[Path, Path]:
    """The workload file of ``documents`` behind a ClusterQueue of 8 cores, on n0 (8 cores, two 16Gi GPUs) and n1 (8
    cores, four 80Gi GPUs): only n1's GPUs are big enough for the template ``two-big-gpus``."""
    head = [DEVICES, ONE_GPU, gpus("n0", 2, "t4", "16Gi"), gpus("n1", 4, "h100", "80Gi")]
    head += [FLAVOR, cluster_queue("cq", 8), local_queue("default", "cq")]
    (tmp_path / "w.yaml").write_text("\n---\n".join([*head, *documents]))
    (tmp_path / "nodes.yaml").write_text(nodes_yaml(("n0", "8", "64Gi"), ("n1", "8", "64Gi")))
    return tmp_path / "w.yaml", tmp_path / "nodes.yaml"


def runs(tmp_path: Path, documents: list[str], scheduler: str) -> tuple[RunRecord, RunRecord]:
    workload_file, nodes_file = files(tmp_path, documents)
    workload = read_manifests(workload_file)
    assert not workload.problems
    return both(workload, read_cluster(nodes_file), scheduler)


def rev34y() -> list[str]:
    """rev34y's file: 6 Jobs of 2 pods at once (1 or 2 cores each, a GPU or two big ones each from a template),
    and 4 lone pods of 2 cores and a GPU, every 2 s. At 70 s p1 and p2 end: j2 (created then, on admission) and p3
    (created gated at 7 s) are admitted together, p3 first in the queues; where each goes decides whether j3's two
    pods find n1's four big GPUs free at 81 s."""
    documents = []
    for i in range(6):
        template = "two-big-gpus" if i % 3 == 0 else "one-gpu"
        spec = CLAIMS % template
        documents.append(job(f"j{i}", "default", 1 + i % 2, 3.0 * i, 40 + 10 * i, 2, parallelism=2, pod_spec=spec))
    documents += [LONE_POD.format(name=f"p{i}", at=2 * i + 1, seconds=30, template="one-gpu", cpu=2) for i in range(4)]
    return documents


@pytest.mark.parametrize("scheduler", ["kubeflux", "kube-default"])
def test_kueue_jobs_and_lone_pods_with_claim_templates_run_through_cluster_serve_as_in_the_simulator(
    tmp_path: Path, scheduler: str
) -> None:
    simulated, served = runs(tmp_path, rev34y(), scheduler)
    assert schedule(served) == schedule(simulated)
    j3 = next(job for job in served.jobs if job.job_id == "default/j3")
    assert j3.finish_time is not None
    # the lone pod p3 was created at 7 s and j2's pods at 70 s: p3 is placed first, j2 where it can
    p3, j2 = (next(job for job in served.jobs if job.job_id == f"default/{n}") for n in ("p3", "j2"))
    assert p3.starting_time == j2.starting_time == 70.0
    assert all(job.final_state.name == "COMPLETED_SUCCESSFULLY" for job in served.jobs)


@st.composite
def kueue_claims_files(draw: st.DrawFn) -> list[str]:
    """A few Jobs and lone pods of the queue, each asking a GPU or two big ones from a template, submitted every 5 s
    and running whole tens of seconds, so that ends and admissions often fall at one instant."""
    documents = []
    for i in range(draw(st.integers(1, 4))):
        template = draw(st.sampled_from(["one-gpu", "two-big-gpus"]))
        at, seconds = draw(st.integers(0, 4)) * 5, draw(st.integers(1, 4)) * 10
        cpu, pods = draw(st.integers(1, 3)), draw(st.integers(1, 2))
        documents.append(job(f"j{i}", "default", cpu, at, seconds, pods, parallelism=pods, pod_spec=CLAIMS % template))
    for i in range(draw(st.integers(1, 4))):
        template = draw(st.sampled_from(["one-gpu", "two-big-gpus"]))
        at, seconds, cpu = draw(st.integers(0, 4)) * 5, draw(st.integers(1, 4)) * 10, draw(st.integers(1, 3))
        documents.append(LONE_POD.format(name=f"p{i}", at=at, seconds=seconds, template=template, cpu=cpu))
    return documents


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(documents=kueue_claims_files(), scheduler=st.sampled_from(["kubeflux", "kube-default"]))
def test_small_kueue_files_with_claims_run_through_cluster_serve_as_in_the_simulator(
    tmp_path: Path, documents: list[str], scheduler: str
) -> None:
    simulated, served = runs(tmp_path, documents, scheduler)
    assert schedule(served) == schedule(simulated)
