"""kube-scheduler's filters and its FailedScheduling message, case by case."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.constraints import (
    feasible_nodes,
    filter_node,
    fit_error_message,
    never_fits,
    node_affinity,
    node_resources_fit,
    node_unschedulable,
    taint_toleration,
    toleration_tolerates,
)
from kubeflux.scheduler.objects import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration

GI = 1024**3


def make_pod(**kwargs: object) -> Pod:
    return Pod(namespace="default", name="p", **kwargs)  # type: ignore[arg-type]


TOLERATION_CASES = [
    ("equal-match", Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
    ("equal-other-value", Toleration("k", "Equal", "w", "NoSchedule"), Taint("k", "v", "NoSchedule"), False),
    ("exists-any-value", Toleration("k", "Exists", "", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
    ("empty-effect-any-effect", Toleration("k", "Exists"), Taint("k", "v", "NoExecute"), True),
    ("other-effect", Toleration("k", "Exists", "", "NoExecute"), Taint("k", "v", "NoSchedule"), False),
    ("empty-key-exists-all", Toleration("", "Exists"), Taint("anything", "x", "NoExecute"), True),
    ("other-key", Toleration("j", "Exists"), Taint("k", "", "NoSchedule"), False),
    ("empty-value-equal", Toleration("k"), Taint("k", "", "NoSchedule"), True),
]


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"), [c[1:] for c in TOLERATION_CASES], ids=[c[0] for c in TOLERATION_CASES]
)
def test_toleration_tolerates(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration_tolerates(toleration, taint) is expected


TAINT_CASES = [
    ("no-taints", (), (), True, None),
    ("untolerated", (Taint("dedicated", "hpc"),), (), True, "node(s) had untolerated taint(s)"),
    ("tolerated", (Taint("dedicated", "hpc"),), (Toleration("dedicated", "Equal", "hpc"),), True, None),
    ("prefer-no-schedule-ignored", (Taint("soft", "", "PreferNoSchedule"),), (), True, None),
    ("no-execute", (Taint("gone", "", "NoExecute"),), (), True, "node(s) had untolerated taint(s)"),
    (
        "first-untolerated-reported",
        (Taint("a", "1"), Taint("b", "2")),
        (Toleration("a", "Exists"),),
        True,
        "node(s) had untolerated taint(s)",
    ),
    ("not-ready", (), (), False, "node(s) had untolerated taint(s)"),
    ("not-ready-tolerated", (), (Toleration("node.kubernetes.io/not-ready", "Exists"),), False, None),
]


@pytest.mark.parametrize(
    ("taints", "tolerations", "ready", "expected"), [c[1:] for c in TAINT_CASES], ids=[c[0] for c in TAINT_CASES]
)
def test_taint_toleration(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], ready: bool, expected: str | None
) -> None:
    node = Node("n", taints=taints, ready=ready)
    assert taint_toleration(make_pod(tolerations=tolerations), node) == expected


def test_node_unschedulable() -> None:
    cordoned = Node("n", unschedulable=True)
    assert node_unschedulable(make_pod(), cordoned) == "node(s) were unschedulable"
    tolerant = make_pod(tolerations=(Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),))
    assert node_unschedulable(tolerant, cordoned) is None
    assert node_unschedulable(make_pod(), Node("n")) is None


def req(key: str, operator: str, *values: str) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(key, operator, values)


LABELS = {"zone": "a", "cores": "64", "gpu": "true"}
AFFINITY_CASES = [
    ("selector-match", {"zone": "a"}, (), True),
    ("selector-miss", {"zone": "b"}, (), False),
    ("selector-missing-label", {"rack": "1"}, (), False),
    ("in", {}, (NodeSelectorTerm((req("zone", "In", "a", "b"),)),), True),
    ("in-miss", {}, (NodeSelectorTerm((req("zone", "In", "c"),)),), False),
    ("notin", {}, (NodeSelectorTerm((req("zone", "NotIn", "b"),)),), True),
    ("notin-missing-label", {}, (NodeSelectorTerm((req("rack", "NotIn", "1"),)),), True),
    ("exists", {}, (NodeSelectorTerm((req("gpu", "Exists"),)),), True),
    ("does-not-exist", {}, (NodeSelectorTerm((req("gpu", "DoesNotExist"),)),), False),
    ("gt", {}, (NodeSelectorTerm((req("cores", "Gt", "32"),)),), True),
    ("lt", {}, (NodeSelectorTerm((req("cores", "Lt", "32"),)),), False),
    ("gt-not-a-number", {}, (NodeSelectorTerm((req("zone", "Gt", "1"),)),), False),
    ("terms-ored", {}, (NodeSelectorTerm((req("zone", "In", "z"),)), NodeSelectorTerm((req("gpu", "Exists"),))), True),
    ("requirements-anded", {}, (NodeSelectorTerm((req("zone", "In", "a"), req("gpu", "DoesNotExist"))),), False),
    ("empty-term-matches-nothing", {}, (NodeSelectorTerm(),), False),
    ("field-name", {}, (NodeSelectorTerm(match_fields=(req("metadata.name", "In", "n"),)),), True),
    ("field-name-notin", {}, (NodeSelectorTerm(match_fields=(req("metadata.name", "NotIn", "n"),)),), False),
    ("selector-and-affinity", {"zone": "a"}, (NodeSelectorTerm((req("gpu", "DoesNotExist"),)),), False),
]


@pytest.mark.parametrize(
    ("selector", "affinity", "fits"), [c[1:] for c in AFFINITY_CASES], ids=[c[0] for c in AFFINITY_CASES]
)
def test_node_affinity(selector: dict[str, str], affinity: tuple[NodeSelectorTerm, ...], fits: bool) -> None:
    pod = make_pod(node_selector=selector, required_node_affinity=affinity)
    expected = None if fits else "node(s) didn't match Pod's node affinity/selector"
    assert node_affinity(pod, Node("n", labels=LABELS)) == expected


ALLOC = {"cpu": 4000, "memory": 8 * GI, "pods": 2, "nvidia.com/gpu": 2}
FIT_CASES = [
    ("fits", {"cpu": 1000}, {}, []),
    ("exactly-full", {"cpu": 4000, "memory": 8 * GI}, {}, []),
    ("cpu", {"cpu": 3000}, {"cpu": 2000}, ["Insufficient cpu"]),
    ("cpu-and-memory", {"cpu": 5000, "memory": 9 * GI}, {}, ["Insufficient cpu", "Insufficient memory"]),
    ("gpu", {"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2}, ["Insufficient nvidia.com/gpu"]),
    ("unknown-resource", {"example.com/fpga": 1}, {}, ["Insufficient example.com/fpga"]),
    ("too-many-pods-first", {"cpu": 9000}, {"pods": 2}, ["Too many pods", "Insufficient cpu"]),
    ("zero-request-only-pod-count", {}, {"cpu": 4000, "pods": 1}, []),
]


@pytest.mark.parametrize(("requests", "used", "reasons"), [c[1:] for c in FIT_CASES], ids=[c[0] for c in FIT_CASES])
def test_node_resources_fit(requests: dict[str, int], used: dict[str, int], reasons: list[str]) -> None:
    assert node_resources_fit(make_pod(requests=requests), Node("n", allocatable=ALLOC), used) == reasons


def test_node_without_pod_limit_is_not_limited() -> None:
    assert node_resources_fit(make_pod(), Node("n", allocatable={"cpu": 1000}), {"pods": 500}) == []


def test_filter_node_stops_at_first_failing_plugin() -> None:
    node = Node("n", allocatable={"cpu": 1000}, taints=(Taint("a", "b"),), unschedulable=True)
    pod = make_pod(requests={"cpu": 2000}, node_selector={"x": "y"})
    assert filter_node(pod, node) == ["node(s) were unschedulable"]
    node.unschedulable = False
    assert filter_node(pod, node) == ["node(s) had untolerated taint(s)"]
    node.taints = ()
    assert filter_node(pod, node) == ["node(s) didn't match Pod's node affinity/selector"]
    pod.node_selector = {}
    assert filter_node(pod, node) == ["Insufficient cpu"]


MESSAGE_CASES = [
    (
        "counted-and-sorted",
        5,
        ["Insufficient cpu", "Insufficient cpu", "node(s) had untolerated taint(s)"] * 1
        + ["node(s) had untolerated taint(s)"] * 2,
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s).",
    ),
    (
        "string-sort-puts-10-before-2",
        12,
        ["node(s) were unschedulable"] * 2 + ["Insufficient memory"] * 10,
        "0/12 nodes are available: 10 Insufficient memory, 2 node(s) were unschedulable.",
    ),
    ("no-nodes", 0, [], "no nodes available to schedule pods"),
]


@pytest.mark.parametrize(
    ("num_nodes", "reasons", "expected"), [c[1:] for c in MESSAGE_CASES], ids=[c[0] for c in MESSAGE_CASES]
)
def test_fit_error_message(num_nodes: int, reasons: list[str], expected: str) -> None:
    assert fit_error_message(num_nodes, reasons) == expected


def test_fit_error_message_pre_and_post_filter() -> None:
    assert (
        fit_error_message(3, {"Insufficient cpu": 3}, pre_filter_message="podGroup ns/g failed recently")
        == "0/3 nodes are available: podGroup ns/g failed recently."
    )
    assert fit_error_message(3, {"Insufficient cpu": 3}, post_filter_message="extra") == (
        "0/3 nodes are available: 3 Insufficient cpu. extra"
    )


def test_feasible_nodes_and_never_fits() -> None:
    nodes = [Node(f"n{i}", allocatable={"cpu": 4000, "nvidia.com/gpu": i}) for i in range(3)]
    gpu_pod = make_pod(requests={"cpu": 1000, "nvidia.com/gpu": 2})
    assert [n.name for n in feasible_nodes(gpu_pod, nodes)] == ["n2"]
    assert feasible_nodes(gpu_pod, nodes, {"n2": {"cpu": 3500}}) == []
    assert never_fits(gpu_pod, nodes) is None  # n2 could take it once empty
    greedy = make_pod(requests={"nvidia.com/gpu": 8})
    assert never_fits(greedy, nodes) == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. No node could ever host the pod, even empty."
    )
