"""What users send the scheduler core from the Python API, checked by :mod:`kubeflux.scheduler.validation` (and
:meth:`KubefluxScheduler.observe` for the fields it reads before validating): an odd object is scheduled or
rejected naming its field, never an exception out of ``observe`` or ``schedule``, compiled and pure alike.

Compiled code checks every value it reads against its annotation (a ``str`` field holding ``None`` raises
``TypeError: str object expected; got None``) where the pure sources went on, so an object validation does not
look at would crash the compiled scheduler only. What comes from manifests (``kubeflux serve``, workload and
cluster files) is checked field by field by :mod:`kubeflux.apiobjects.manifests` first. Each case was a
difference found in review (a TypeError compiled, or a crash of the pure sources too).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind, Reject, Unschedulable
from kubeflux.scheduler.objects import (
    CPU,
    MEMORY,
    POD_GROUP_LABEL,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PodPhase,
    Taint,
    Toleration,
)


def _node(name: object = "n0", **fields: object) -> Node:
    fields.setdefault("allocatable", {CPU: 8000, MEMORY: 32 * 2**30, "pods": 110})
    return Node(name, uid=f"uid-{name}", **fields)


def _pod(name: str = "p0", **fields: object) -> Pod:
    fields.setdefault("requests", {CPU: 1000})
    fields.setdefault("scheduler_name", "kubeflux")
    fields.setdefault("uid", f"uid-{name}")
    return Pod("default", name, **fields)


def _member(name: str) -> Pod:
    return _pod(name, labels={POD_GROUP_LABEL: "g"})


def _play(objects: Sequence[Node | Pod | PodGroup]) -> list[Decision]:
    """Tell a fresh kubeflux (EASY backfilling) a node ``n0`` of 8 cores unless ``objects`` hold a node, then
    ``objects``; the decisions of two scheduling passes."""
    scheduler = KubefluxScheduler("kubeflux", backfill="easy")
    if not any(isinstance(obj, Node) for obj in objects):
        scheduler.observe(ClusterEvent(EventKind.ADDED, _node()), 0.0)
    for obj in objects:
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), 0.0)
    return scheduler.schedule(1.0) + scheduler.schedule(2.0)


TAKEN = False
"""The pure sources take the object (or reject it naming the field): any rejection names the field, or the nodes
that do not admit the pod."""
REFUSED = True
"""Validation checks the field: the pod is refused, naming it (or saying no node is available)."""

CASES = [
    # (id, objects, the field a rejection must name, whether the pod must be refused)
    ("duration annotation an int", [_pod(annotations={"kubeflux.io/duration": 60})], "duration", TAKEN),
    ("duration annotation a float", [_pod(annotations={"kubeflux.io/duration": 60.5})], "duration", TAKEN),
    ("node selector value an int", [_pod(node_selector={"zone": 5})], "node_selector", TAKEN),
    ("uid None", [_pod(uid=None)], "uid", TAKEN),
    ("node name None", [_pod(node_name=None)], "node_name", TAKEN),
    ("deleted an int", [_pod(deleted=1)], "deleted", TAKEN),
    ("creation time an int past float", [_pod(creation_time=10**400)], "creation_time", TAKEN),
    ("deadline an int past float", [_pod(active_deadline_seconds=10**400)], "active_deadline_seconds", TAKEN),
    ("node label value an int", [_node(labels={"zone": 5}), _pod(node_selector={"zone": "5"})], "labels", TAKEN),
    ("node taints a list", [_node(taints=[Taint("k", "v")]), _pod()], "taints", TAKEN),
    ("node taint value an int", [_node(taints=(Taint("k", 5),)), _pod()], "taints", TAKEN),
    ("node unschedulable a string", [_node(unschedulable="yes"), _pod()], "unschedulable", TAKEN),
    ("node ready None", [_node(ready=None), _pod()], "ready", TAKEN),
    ("policy annotation an int", [_pod(annotations={"kubeflux.io/match-policy": 5})], "match-policy", TAKEN),
    ("phase a plain string", [_pod(phase="Pending")], "phase", TAKEN),
    ("tolerations a list", [_pod(tolerations=[Toleration("k", "Exists")])], "tolerations", TAKEN),
    ("toleration value an int", [_pod(tolerations=(Toleration("k", "Equal", 5),))], "tolerations", TAKEN),
    ("toleration a mapping", [_pod(tolerations=({"key": "k", "operator": "Exists"},))], "tolerations", TAKEN),
    (
        "affinity values a list",
        [_pod(required_node_affinity=(NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ["a"]),)),))],
        "required_node_affinity",
        TAKEN,
    ),
    ("node name an int", [_node(name=7), _pod()], "name", TAKEN),
    (
        "allocation annotation an int on a bound pod",
        [_pod(node_name="n0", phase=PodPhase.RUNNING, annotations={"kubeflux.io/allocation": 5})],
        "allocation",
        TAKEN,
    ),
    (
        "group timeout an int past float",
        [PodGroup("default", "g", 1, schedule_timeout_seconds=10**400), _member("a")],
        "schedule_timeout_seconds",
        TAKEN,
    ),
    (
        "group creation time an int past float",
        [PodGroup("default", "g", 1, creation_time=10**400), _member("a")],
        "creation_time",
        TAKEN,
    ),
    ("minMember a string", [PodGroup("default", "g", "2"), _member("a"), _member("b")], "min_member", REFUSED),
    ("minMember a float", [PodGroup("default", "g", 2.0), _member("a"), _member("b")], "min_member", REFUSED),
    (
        "timeout a string",
        [PodGroup("default", "g", 2, schedule_timeout_seconds="60"), _member("a")],
        "schedule_timeout_seconds",
        REFUSED,
    ),
    ("cpu a float", [_node(allocatable={CPU: 8000.0}), _pod()], "allocatable[cpu]", REFUSED),
    ("request a string", [_pod(requests={CPU: "1"})], "requests[cpu]", REFUSED),
    ("priority a float", [_pod(priority=1.5)], "priority", REFUSED),
    ("creation time a string", [_pod(creation_time="0")], "creation_time", REFUSED),
]


@pytest.mark.parametrize(
    ("objects", "field", "refused"),
    [pytest.param(objects, field, refused, id=name) for name, objects, field, refused in CASES],
)
def test_an_odd_object_from_the_python_api_is_scheduled_or_rejected_naming_its_field(
    objects: list[Node | Pod | PodGroup], field: str, refused: bool
) -> None:
    decisions = _play(objects)
    if refused:  # the same rejection compiled: what validation checks reaches no compiled code first
        told = [d.message for d in decisions if isinstance(d, Reject | Unschedulable)]
        assert told and all(field in message or "no nodes available" in message for message in told)
    else:  # a rejection says why: the field, or the nodes that do not admit the pod
        for decision in decisions:
            if isinstance(decision, Reject):
                assert field in decision.message or "nodes are available" in decision.message


@pytest.mark.parametrize(
    ("cpu_millis", "says"),
    [
        (100_000_000_000_000, "more than 65536 whole units, got 100000000000"),
        (10**400, "got 1000000000000000000000000000000000000000… (398 characters)"),
    ],
    ids=["cores-as-written", "400-digit-cut"],
)
def test_a_node_too_big_for_the_graph_is_said_in_its_own_units(cpu_millis: int, says: str) -> None:
    """The hostile review of issue 30: a cpu of 100000000000 was echoed as its millicores (1000x the input), and
    1e400 as 400 digits across the terminal."""
    from kubeflux.scheduler.validation import node_size_problem

    found = node_size_problem({"cpu": cpu_millis})
    assert found is not None and found[0] == "cpu" and says in found[1], found
