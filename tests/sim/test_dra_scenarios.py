"""Dynamic Resource Allocation through the simulator, from Kubernetes manifests (issue 34): pods asking GPUs through
ResourceClaims (their own, or made from a ResourceClaimTemplate for each pod) get devices of one node that the CEL
selectors take, the claims' allocation written, and devices given back when the pods end, never given twice; under
kubeflux and under the kube-default baseline alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.devices import ResourceClaim
from kubeflux.scheduler.interface import ClusterEvent, EventKind, Scheduler
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim._dra_yaml import DEVICES, NOTEBOOK, TRAINER, claim_pod, gpu_slice, one_gpu_template
from tests.sim._gangs import group_yaml, nodes_yaml, simulation
from tests.sim._kueue_yaml import FLAVOR, cluster_queue, local_queue


@pytest.mark.parametrize(
    "scheduler", [KubefluxScheduler, lambda: KubeDefaultScheduler("kubeflux")], ids=["kubeflux", "kube-default"]
)
def test_pods_asking_two_gpus_through_claims_get_two_gpus_of_one_node_and_the_claims_allocation(
    tmp_path: Path, scheduler: Callable[[], Scheduler]
) -> None:
    """Three trainers each ask two GPUs of 40Gi or more from a template: only n2's four qualify (n1's are 16Gi, n0
    has none), so two run at once and the third starts when one ends and its claim (made for it) is deleted; a
    notebook's own claim takes one of n1's small GPUs."""
    nodes = nodes_yaml(("n0", "32", "64Gi"), ("n1", "16", "64Gi"), ("n2", "16", "64Gi"))
    objects = [
        DEVICES,
        gpu_slice("n1", 2, "16Gi", "t4"),
        gpu_slice("n2", 4, "80Gi", "h100"),
        *(TRAINER.format(i=i) for i in range(3)),
        NOTEBOOK,
    ]
    sim = simulation(tmp_path, nodes, objects, scheduler())
    written: list[tuple[float, ResourceClaim]] = []

    def record(event: ClusterEvent, now: float) -> None:
        if isinstance(event.obj, ResourceClaim) and event.kind is EventKind.MODIFIED and event.obj.allocation:
            written.append((now, event.obj))

    sim.cluster.subscribe(record)
    sim.run()
    pods = {sp.pod.name: sp for sp in sim.cluster.book.pods.values()}
    assert {name: sp.pod.node_name for name, sp in pods.items()} == {
        "trainer-0": "n2",
        "trainer-1": "n2",
        "trainer-2": "n2",
        "notebook": "n1",
    }
    assert [pods[f"trainer-{i}"].running_at for i in range(3)] == [0.0, 0.0, 100.0]
    claims = {claim.name: (claim.node, [d.device for d in claim.allocation or ()]) for _, claim in written}
    made = {f"trainer-{i}": pods[f"trainer-{i}"].pod.resource_claims[0].claim for i in range(3)}
    assert all(name.startswith(f"{pod}-gpus-") and len(name) == len(pod) + 11 for pod, name in made.items())
    assert claims[made["trainer-0"]] == ("n2", ["gpu-0", "gpu-1"])
    assert claims[made["trainer-1"]] == ("n2", ["gpu-2", "gpu-3"])
    assert claims[made["trainer-2"]][0] == "n2" and len(claims[made["trainer-2"]][1]) == 2
    assert claims["one-gpu"] == ("n1", ["gpu-0"])
    waited = [e.message for e in sim.cluster.kube_events if e.object == "default/trainer-2" and e.reason != "Scheduled"]
    assert waited and waited[0].startswith("0/3 nodes are available: 3 cannot allocate all claims."), waited
    assert sim.cluster.claims is not None
    assert sim.cluster.claims.claims["default/one-gpu"].allocation is None  # deallocated when the notebook ended
    assert not any(key.startswith("default/trainer") for key in sim.cluster.claims.claims)  # deleted with their pods


def test_a_bad_selector_in_the_workload_is_reported_naming_the_field(tmp_path: Path) -> None:
    bad = DEVICES.replace('device.driver == "gpu.example.com"', "device.driver ==")
    (tmp_path / "workload.yaml").write_text(bad)
    workload = read_manifests(tmp_path / "workload.yaml")
    (problem,) = workload.problems
    assert "DeviceClass gpu.example.com: spec.selectors[0].cel.expression: Invalid value" in problem


@pytest.mark.parametrize(
    "scheduler", [KubefluxScheduler, lambda: KubeDefaultScheduler("kubeflux")], ids=["kubeflux", "kube-default"]
)
@pytest.mark.parametrize(
    "expression",
    [
        '10 / device.attributes["gpu.example.com"].idx > 1',
        '[1][device.attributes["gpu.example.com"].idx + 3] == 1',
        'device.attributes["gpu.example.com"].idx - 9223372036854775807 - 2 < 0',
    ],
    ids=["division-by-zero", "index", "overflow"],
)
def test_a_selector_failing_at_run_time_fails_its_pod_and_the_simulation_goes_on(
    tmp_path: Path, scheduler: Callable[[], Scheduler], expression: str
) -> None:
    """A claim whose selector divides by a device attribute that is 0 (or indexes past a list, or overflows):
    the real API server accepts it, and only its pod fails (the simulator once crashed, under both schedulers);
    the notebook asking no selector is bound."""
    bad = DEVICES.replace("name: one-gpu}", "name: bad}").replace(
        "exactly: {deviceClassName: gpu.example.com}",
        f"exactly: {{deviceClassName: gpu.example.com, selectors: [{{cel: {{expression: '{expression}'}}}}]}}",
    )
    evil = NOTEBOOK.replace("name: notebook", "name: evil").replace(
        "resourceClaimName: one-gpu", "resourceClaimName: bad"
    )
    devices = gpu_slice("n1", 2, "80Gi", "h100").replace("attributes: {model:", "attributes: {idx: {int: 0}, model:")
    nodes = nodes_yaml(("n0", "16", "64Gi"), ("n1", "16", "64Gi"))
    sim = simulation(tmp_path, nodes, [DEVICES, bad.split("---")[-1], devices, evil, NOTEBOOK], scheduler())
    sim.run()
    pods = {sp.pod.name: sp for sp in sim.cluster.book.pods.values()}
    assert pods["notebook"].pod.node_name == "n1" and not pods["evil"].pod.node_name
    said = [e.message for e in sim.cluster.kube_events if e.object == "default/evil"]
    assert said and "CEL runtime error on device gpu.example.com/n1/gpu-0" in said[0], said


ONE_GPU_EACH = one_gpu_template("one-gpu-each")


def test_a_gang_whose_members_each_ask_a_gpu_starts_at_once_on_two_nodes_of_one_gpu_each(tmp_path: Path) -> None:
    """Either node has the cores for both members but one GPU: each member sees the GPU the one before it took
    (kube-scheduler places them one by one too), so the gang starts at once, one member on each node."""
    nodes = nodes_yaml(("n0", "16", "64Gi"), ("n1", "16", "64Gi"))
    objects = [
        DEVICES,
        ONE_GPU_EACH,
        gpu_slice("n0", 1, "80Gi", "h100"),
        gpu_slice("n1", 1, "80Gi", "h100"),
        group_yaml("pair", 2),
        *(claim_pod(f"member-{i}", "one-gpu-each", seconds=100, template=True, group="pair") for i in range(2)),
    ]
    sim = simulation(tmp_path, nodes, objects, KubefluxScheduler())
    sim.run()
    pods = {sp.pod.name: sp for sp in sim.cluster.book.pods.values()}
    assert {name: (sp.pod.node_name, sp.running_at) for name, sp in pods.items()} == {
        "member-0": ("n0", 0.0),
        "member-1": ("n1", 0.0),
    }


def test_a_dra_object_defined_twice_or_a_container_naming_no_claim_entry_is_reported(tmp_path: Path) -> None:
    """As a second pod of a name is: the second object is reported and skipped, never silently replacing the
    first; a container's ``resources.claims`` must name one of the pod's ``spec.resourceClaims``."""
    orphan = NOTEBOOK.replace("claims: [{name: gpu}]", "claims: [{name: gpus}]")
    (tmp_path / "workload.yaml").write_text(
        "\n---\n".join([DEVICES, DEVICES, gpu_slice("n1", 1, "16Gi", "t4"), orphan])
    )
    workload = read_manifests(tmp_path / "workload.yaml")
    defined_twice = "metadata.name: defined twice (first in document {}); skipped"
    assert workload.problems == [
        f"workload.yaml: document 4: DeviceClass gpu.example.com: {defined_twice.format(1)}",
        f"workload.yaml: document 5: ResourceClaimTemplate default/two-big-gpus: {defined_twice.format(2)}",
        f"workload.yaml: document 6: ResourceClaim default/one-gpu: {defined_twice.format(3)}",
        "workload.yaml: document 8: Pod default/notebook: spec.containers[0].resources.claims[0]: Not found: "
        '"gpus": must be one of the names in pod.spec.resourceClaims; skipped',
    ]


def test_a_lone_pod_held_by_kueue_exists_gated_with_its_claim_from_its_submission(tmp_path: Path) -> None:
    """A lone pod of a LocalQueue whose ClusterQueue is full waits for admission as Kueue's webhook leaves it: created
    at its submission, held by Kueue's scheduling gate, and its claim made from its template then (kube-controller-
    manager's resourceclaim controller makes a gated pod's claim); admitted when the first pod ends, it loses the
    gate and keeps its claim, which is then allocated."""

    def queued(i: int, submitted: int) -> str:
        """Trainer ``i`` (2 cores, two GPUs from a template, 100 s) of the LocalQueue ``q``, submitted then."""
        text = TRAINER.format(i=i).replace(', memory: 1Gi"', '"').replace('"2", memory: 1Gi', '"2"')
        text = text.replace("metadata:\n", "metadata:\n  labels: {kueue.x-k8s.io/queue-name: q}\n", 1)
        return text.replace("annotations:\n", f"annotations:\n    sim.kubeflux.io/submit-time: '{submitted}'\n", 1)

    first, claiming = queued(0, 0), queued(1, 5)
    objects = [
        DEVICES,
        gpu_slice("n0", 4, "80Gi", "h100"),
        FLAVOR,
        cluster_queue("cq", 2),
        local_queue("default", "cq"),
    ]
    nodes = nodes_yaml(("n0", "8", "64Gi"))
    sim = simulation(tmp_path, nodes, [*objects, first, claiming], KubefluxScheduler())
    seen: list[tuple[float, str, str, tuple[str, ...]]] = []

    def record(event: ClusterEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, ResourceClaim) and event.kind is EventKind.ADDED and obj.name.startswith("trainer-1-"):
            seen.append((now, "claim", obj.name, ()))
        elif getattr(obj, "name", "") == "trainer-1" and not isinstance(obj, ResourceClaim):
            seen.append((now, event.kind.name, getattr(obj, "node_name", ""), getattr(obj, "scheduling_gates", ())))

    sim.cluster.subscribe(record)
    sim.run()
    trainer = sim.cluster.book.pod("default/trainer-1")
    made = trainer.pod.resource_claims[0].claim
    assert trainer.pod.creation_time == 5.0 and trainer.running_at == 100.0
    assert seen[:2] == [(5.0, "claim", made, ()), (5.0, "ADDED", "", ("kueue.x-k8s.io/admission",))]
    assert (100.0, "MODIFIED", "", ()) in seen  # released by Kueue's admission when trainer-0 ended


LEFT_ALLOCATED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: left-on-n0}
spec:
  devices:
    requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n0, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n0]}]}]"""


def test_a_claim_left_allocated_on_a_cordoned_node_is_freed_and_its_pod_runs_on_another(tmp_path: Path) -> None:
    """A claim left allocated on n0 (a take-back that failed after a refused Binding), n0 cordoned since: the pod
    naming the claim may go only where its claim is, and would wait for ever; kubeflux frees the claim, as
    kube-scheduler's DynamicResources PostFilter does, and the pod runs on n1 with n1's GPU."""
    cordoned = nodes_yaml(("n0", "4", "16Gi")).replace("\nstatus:", "\nspec: {unschedulable: true}\nstatus:")
    nodes = f"{cordoned}\n---\n{nodes_yaml(('n1', '4', '16Gi'))}"
    objects = [
        DEVICES,
        gpu_slice("n0", 1, "16Gi", "t4"),
        gpu_slice("n1", 1, "16Gi", "t4"),
        LEFT_ALLOCATED,
        claim_pod("p", "left-on-n0", seconds=50),
    ]
    sim = simulation(tmp_path, nodes, objects, KubefluxScheduler())
    sim.run()
    (placed,) = sim.cluster.book.pods.values()
    assert placed.pod.node_name == "n1"
    waited = [e.message for e in sim.cluster.kube_events if e.object == "default/p" and e.reason != "Scheduled"]
    assert waited == [
        "0/2 nodes are available: 1 node(s) were unschedulable, 1 resourceclaim not available on the node."
    ]
    assert sim.cluster.claims is not None
    assert sim.cluster.claims.claims["default/left-on-n0"].allocation is None  # freed again when the pod ended
