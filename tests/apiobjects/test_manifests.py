"""Kubernetes manifests → scheduler objects: requests as Kubernetes computes them, constraints, clear errors."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from kubeflux.apiobjects.manifests import (
    ManifestError,
    node_from_manifest,
    parse_timestamp,
    pod_from_manifest,
    pod_to_manifest,
    podgroup_from_manifest,
)
from kubeflux.scheduler.objects import NodeSelectorRequirement, NodeSelectorTerm, PodPhase, Taint, Toleration
from kubeflux.scheduler.validation import InvalidObject

GI = 1024**3


def container(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any):
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def pod(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **metadata}, "spec": spec}


REQUEST_CASES = [
    (
        "containers-summed",
        {"containers": [container("a", {"cpu": "500m", "memory": "1Gi"}), container("b", {"cpu": "1.5"})]},
        {"cpu": 2000, "memory": GI},
    ),
    (
        "init-container-bigger-than-sum",
        {"containers": [container("a", {"cpu": "1"})], "initContainers": [container("i", {"cpu": "3"})]},
        {"cpu": 3000},
    ),
    (
        "init-container-smaller-than-sum",
        {
            "containers": [container("a", {"cpu": "1", "memory": "2Gi"}), container("b", {"cpu": "1"})],
            "initContainers": [container("i", {"cpu": "1500m", "memory": "1Gi"})],
        },
        {"cpu": 2000, "memory": 2 * GI},
    ),
    (
        "limits-default-requests",
        {"containers": [container("a", None, {"cpu": "2", "nvidia.com/gpu": 1}), container("b", {"cpu": "1"})]},
        {"cpu": 3000, "nvidia.com/gpu": 1},
    ),
    (
        "request-wins-over-limit",
        {"containers": [container("a", {"cpu": "1"}, {"cpu": "4"})]},
        {"cpu": 1000},
    ),
    (
        "sidecar-added-to-containers",  # Kubernetes 1.29+: restartable init containers run beside the app
        {
            "containers": [container("app", {"cpu": "1"})],
            "initContainers": [container("proxy", {"cpu": "500m"}, restartPolicy="Always")],
        },
        {"cpu": 1500},
    ),
    (
        "init-after-sidecar-needs-both",
        {
            "containers": [container("app", {"cpu": "1"})],
            "initContainers": [
                container("proxy", {"cpu": "500m"}, restartPolicy="Always"),
                container("migrate", {"cpu": "2"}),
            ],
        },
        {"cpu": 2500},
    ),
    (
        "overhead-added",
        {"containers": [container("a", {"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}},
        {"cpu": 1250, "memory": 120 * 1024**2},
    ),
    ("no-resources", {"containers": [{"name": "a", "image": "x"}]}, {}),
]


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in REQUEST_CASES], ids=[c[0] for c in REQUEST_CASES])
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_from_manifest(pod(spec)).requests == expected


FULL_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: lammps-0
  namespace: hpc
  uid: 1234
  creationTimestamp: "2024-05-01T12:00:00Z"
  deletionTimestamp: "2024-05-01T13:00:00Z"
  labels: {scheduling.x-k8s.io/pod-group: lammps}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: lammps, uid: x, controller: true}
spec:
  schedulerName: fluence
  priority: 100
  nodeName: node-3
  activeDeadlineSeconds: 600
  nodeSelector: {node.kubernetes.io/instance-type: hpc6a}
  tolerations:
  - {key: dedicated, operator: Equal, value: hpc, effect: NoSchedule}
  - {operator: Exists}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [node-9]}
        - matchExpressions:
          - {key: cores, operator: Gt, values: ["32"]}
  containers:
  - name: main
    image: lammps
    resources: {requests: {cpu: 4, memory: 8Gi}}
status:
  phase: Running
"""


def test_full_pod() -> None:
    result = pod_from_manifest(yaml.safe_load(FULL_POD.replace("uid: 1234", "uid: '1234'")))
    assert (result.namespace, result.name, result.uid, result.key) == ("hpc", "lammps-0", "1234", "hpc/lammps-0")
    assert result.scheduler_name == "fluence"
    assert result.priority == 100
    assert result.creation_time == parse_timestamp("2024-05-01T12:00:00Z") == 1714564800.0
    assert result.deleted
    assert result.phase is PodPhase.RUNNING
    assert result.node_name == "node-3"
    assert result.owner == "Job/lammps"
    assert result.active_deadline_seconds == 600.0
    assert result.group == "hpc/lammps"
    assert result.node_selector == {"node.kubernetes.io/instance-type": "hpc6a"}
    assert result.tolerations == (
        Toleration(key="dedicated", operator="Equal", value="hpc", effect="NoSchedule"),
        Toleration(operator="Exists"),
    )
    assert result.required_node_affinity == (
        NodeSelectorTerm(
            match_expressions=(NodeSelectorRequirement("zone", "In", ("a", "b")),),
            match_fields=(NodeSelectorRequirement("metadata.name", "NotIn", ("node-9",)),),
        ),
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("cores", "Gt", ("32",)),)),
    )
    assert result.requests == {"cpu": 4000, "memory": 8 * GI}


def test_defaults_for_a_bare_pod() -> None:
    result = pod_from_manifest({"metadata": {"name": "x"}, "spec": {"containers": []}})
    assert result.namespace == "default"
    assert result.scheduler_name == "default-scheduler"
    assert result.phase is PodPhase.PENDING
    assert not result.deleted and result.owner == "" and result.group is None


def test_unquoted_yaml_timestamp_is_read() -> None:
    manifest = yaml.safe_load("metadata: {name: x, creationTimestamp: 2024-05-01T12:00:00Z}\nspec: {containers: []}")
    assert pod_from_manifest(manifest).creation_time == 1714564800.0


ERROR_CASES = [
    (
        "bad-cpu",
        {"metadata": {"name": "web", "namespace": "prod"}, "spec": {"containers": [container("a", {"cpu": "1K"})]}},
        "Pod prod/web: spec.containers[0].resources.requests.cpu: invalid quantity '1K'",
    ),
    (
        "bad-init-memory",
        {"metadata": {"name": "web"}, "spec": {"containers": [], "initContainers": [container("i", {"memory": "x"})]}},
        "Pod default/web: spec.initContainers[0].resources.requests.memory",
    ),
    (
        "negative-request",
        {"metadata": {"name": "web"}, "spec": {"containers": [container("a", {"cpu": "-1"})]}},
        "must be non-negative",
    ),
    ("no-name", {"metadata": {}, "spec": {}}, "metadata.name: required"),
    ("wrong-kind", {"kind": "Service", "metadata": {"name": "s"}}, "kind: expected Pod, got 'Service'"),
    (
        "bad-operator",
        {"metadata": {"name": "w"}, "spec": {"tolerations": [{"key": "k", "operator": "Maybe"}]}},
        "spec.tolerations[0].operator: must be Equal or Exists",
    ),
    (
        "bad-affinity-operator",
        {
            "metadata": {"name": "w"},
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
                        }
                    }
                }
            },
        },
        "nodeSelectorTerms[0].matchExpressions[0].operator: must be one of In, NotIn",
    ),
    ("bad-phase", {"metadata": {"name": "w"}, "status": {"phase": "Sleeping"}}, "status.phase: unknown phase"),
    ("labels-not-strings", {"metadata": {"name": "w", "labels": {"a": 1}}}, "metadata.labels.a"),
    ("bad-timestamp", {"metadata": {"name": "w", "creationTimestamp": "yesterday"}}, "metadata.creationTimestamp"),
    ("not-a-mapping", ["a"], "Pod: expected a mapping"),
    ("status-not-a-mapping", {"metadata": {"name": "w"}, "status": "Running"}, "status: expected a mapping, got str"),
]


@pytest.mark.parametrize(("manifest", "fragment"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_errors_name_object_and_field(manifest: Any, fragment: str) -> None:
    with pytest.raises(ManifestError) as info:
        pod_from_manifest(manifest)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


NODE = """
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {topology.kubernetes.io/zone: a}
spec:
  unschedulable: true
  taints:
  - {key: dedicated, value: hpc, effect: NoSchedule}
  - {key: node.kubernetes.io/not-ready, effect: NoExecute}
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "110"}
  allocatable: {cpu: 63500m, memory: 250Gi, pods: "110", nvidia.com/gpu: "4"}
  conditions:
  - {type: MemoryPressure, status: "False"}
  - {type: Ready, status: "False"}
"""


def test_node() -> None:
    node = node_from_manifest(yaml.safe_load(NODE))
    assert node.name == "node-1"
    assert node.allocatable == {"cpu": 63500, "memory": 250 * GI, "pods": 110, "nvidia.com/gpu": 4}
    assert node.labels == {"topology.kubernetes.io/zone": "a"}
    assert node.taints == (
        Taint("dedicated", "hpc", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
    )
    assert node.unschedulable
    assert not node.ready


def test_node_defaults_capacity_and_ready() -> None:
    node = node_from_manifest({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}})
    assert node.allocatable == {"cpu": 2000}
    assert node.ready and not node.unschedulable and node.taints == ()


def test_node_bad_taint() -> None:
    with pytest.raises(ManifestError, match=r"Node n: spec.taints\[0\].effect: must be one of"):
        node_from_manifest({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Never"}]}})


def test_podgroup() -> None:
    group = podgroup_from_manifest(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "lammps", "namespace": "hpc", "creationTimestamp": "2024-05-01T12:00:00.250000Z"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 30},
        }
    )
    assert (group.key, group.min_member, group.schedule_timeout_seconds) == ("hpc/lammps", 4, 30.0)
    assert group.creation_time == pytest.approx(1714564800.25)


def test_podgroup_needs_min_member() -> None:
    with pytest.raises(ManifestError, match=r"PodGroup default/g: spec\.minMember: must be a positive integer"):
        podgroup_from_manifest({"metadata": {"name": "g"}, "spec": {}})


def _native(policy: object) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "ranks", "namespace": "hpc"},
        "spec": {"schedulingPolicy": policy},
    }


def test_kubernetes_own_podgroup_gang_min_count_and_basic_policy() -> None:
    assert podgroup_from_manifest(_native({"gang": {"minCount": 4}})).min_member == 4
    basic = podgroup_from_manifest(_native({"basic": {}}))
    assert (basic.key, basic.min_member, basic.schedule_timeout_seconds) == ("hpc/ranks (scheduling.k8s.io)", 1, None)
    member = pod_from_manifest(
        {"metadata": {"name": "r0", "namespace": "hpc"}, "spec": {"schedulingGroup": {"podGroupName": "ranks"}}}
    )
    assert member.group == basic.key  # a coscheduling group named ranks would be another one
    assert pod_from_manifest(pod_to_manifest(member)).group == basic.key


@pytest.mark.parametrize(
    ("policy", "problem"),
    [
        ({}, r"spec\.schedulingPolicy: exactly one of basic and gang must be set"),
        ({"basic": {}, "gang": {"minCount": 2}}, r"spec\.schedulingPolicy: exactly one of basic and gang"),
        ({"gang": {}}, r"spec\.schedulingPolicy\.gang\.minCount: must be a positive integer, got None"),
        ({"gang": {"minCount": "4"}}, r"spec\.schedulingPolicy\.gang\.minCount: must be a positive integer"),
    ],
)
def test_kubernetes_own_podgroup_with_a_bad_policy_names_the_field(policy: object, problem: str) -> None:
    with pytest.raises(ManifestError, match=rf"PodGroup hpc/ranks: {problem}"):
        podgroup_from_manifest(_native(policy))


def test_pod_to_manifest_round_trip() -> None:
    original = pod_from_manifest(yaml.safe_load(FULL_POD.replace("uid: 1234", "uid: '1234'")))
    manifest = pod_to_manifest(original)
    assert manifest["apiVersion"] == "v1" and manifest["kind"] == "Pod"
    assert manifest["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "8Gi"}
    back = pod_from_manifest(yaml.safe_load(yaml.safe_dump(manifest)))
    for field in ("namespace", "name", "uid", "scheduler_name", "priority", "creation_time", "requests", "labels"):
        assert getattr(back, field) == getattr(original, field), field
    for field in ("node_selector", "tolerations", "required_node_affinity", "node_name", "phase"):
        assert getattr(back, field) == getattr(original, field), field
    assert back.active_deadline_seconds == original.active_deadline_seconds


def resizing(status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A running pod: app asks 2 cpu in its spec, a sidecar 500m; ``status`` says what the kubelet holds."""
    return {
        **pod(
            {
                "nodeName": "w1",
                "containers": [container("app", {"cpu": "2", "memory": "1Gi"})],
                "initContainers": [container("log", {"cpu": "500m"}, restartPolicy="Always")],
                **spec,
            }
        ),
        "status": {"phase": "Running", **status},
    }


def held(name: str, cpu: str, allocated: str | None = None, memory: str = "1Gi") -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if allocated is not None:
        status["allocatedResources"] = {"cpu": allocated}
    return status


RESIZE_CASES = [
    ("no-status-resources", {"containerStatuses": [{"name": "app"}]}, 2500, ""),
    ("resized-down-done", {"containerStatuses": [held("app", "1")]}, 2500, ""),  # the spec's 2 is the larger
    ("growing-in-progress", {"containerStatuses": [held("app", "3", "3")]}, 3500, ""),
    ("allocated-above-actual", {"containerStatuses": [held("app", "1", "4")]}, 4500, ""),
    (
        "infeasible-counts-what-runs",
        {
            "containerStatuses": [held("app", "1")],
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}],
        },
        1500,
        "Infeasible",
    ),
    ("older-status-resize", {"containerStatuses": [held("app", "1")], "resize": "Infeasible"}, 1500, "Infeasible"),
    (
        "sidecar-resized",
        {"containerStatuses": [held("app", "2")], "initContainerStatuses": [held("log", "1500m", memory="0")]},
        3500,
        "",
    ),
    (
        "in-progress-condition",
        {"containerStatuses": [held("app", "1")], "conditions": [{"type": "PodResizeInProgress", "status": "True"}]},
        2500,
        "InProgress",
    ),
]


@pytest.mark.parametrize(("status", "cpu", "resize"), [c[1:] for c in RESIZE_CASES], ids=[c[0] for c in RESIZE_CASES])
def test_an_in_place_resize_is_counted_as_kube_scheduler_counts_it(
    status: dict[str, Any], cpu: int, resize: str
) -> None:
    """kube-scheduler's ``PodRequests`` with status resources: per container (and sidecar), the maximum of the spec's
    request and what the kubelet holds (``resources.requests``, ``allocatedResources``); once the resize is
    Infeasible, only what the kubelet holds."""
    result = pod_from_manifest(resizing(status))
    assert (result.requests["cpu"], result.resize) == (cpu, resize)
    assert result.requests["memory"] == GI


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"conditions": [{"type": "PodResizePending", "status": "True", "reason": "Later"}]}, "status.conditions[0]"),
        ({"resize": "Soon"}, "status.resize"),
        ({"containerStatuses": [held("app", "-1")]}, "status.containerStatuses[0].resources.requests.cpu"),
        ({"containerStatuses": [{"name": "app", "resources": []}]}, "status.containerStatuses[0].resources"),
    ],
)
def test_a_bad_resize_status_names_its_field(status: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(f"Pod default/p: {field}")):
        pod_from_manifest(resizing(status))


def test_a_creation_time_before_1970_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"metadata\.creationTimestamp: must not be before 1970"):
        pod_from_manifest(pod({"containers": []}, creationTimestamp="1969-12-31T23:59:59Z"))


def test_manifest_errors_are_the_checks_the_python_api_gets() -> None:
    """One set of rules for both doors: a manifest error is an :class:`InvalidObject`, like the core's."""
    with pytest.raises(InvalidObject):
        podgroup_from_manifest({"metadata": {"name": "g"}, "spec": {"minMember": 0}})
