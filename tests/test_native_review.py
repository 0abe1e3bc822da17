"""The compiled engine and scheduler (mypyc) must answer as the pure-Python sources do, bad input included.

Compiled code checks every value it reads against its annotation (a ``str`` field holding ``None`` raises
``TypeError: str object expected; got None``) where the pure sources went on, so an object the scheduler core's
validation (:mod:`kubeflux.scheduler.validation`, pure) does not look at crashes the compiled scheduler only. The
objects here are what a user of the Python API or of the simulator can build; what comes from manifests
(``kubeflux serve``, workload and cluster files) is checked field by field by
:mod:`kubeflux.apiobjects.manifests` first.

Each was a difference found in review (a TypeError compiled, or a crash of the pure sources too): validation
now names the field (:mod:`kubeflux.scheduler.validation`, and :meth:`KubefluxScheduler.observe` for the fields it
reads before validating), compiled and pure alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence

import pytest

import kubeflux.match
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
from tests.shared import REPO

COMPILED = kubeflux.match.COMPILED


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


HOSTILE = [
    # (id, objects, the field a rejection must name)
    ("duration annotation an int", [_pod(annotations={"kubeflux.io/duration": 60})], "duration"),
    ("duration annotation a float", [_pod(annotations={"kubeflux.io/duration": 60.5})], "duration"),
    ("node selector value an int", [_pod(node_selector={"zone": 5})], "node_selector"),
    ("uid None", [_pod(uid=None)], "uid"),
    ("node name None", [_pod(node_name=None)], "node_name"),
    ("deleted an int", [_pod(deleted=1)], "deleted"),
    ("creation time an int past float", [_pod(creation_time=10**400)], "creation_time"),
    ("deadline an int past float", [_pod(active_deadline_seconds=10**400)], "active_deadline_seconds"),
    ("node label value an int", [_node(labels={"zone": 5}), _pod(node_selector={"zone": "5"})], "labels"),
    ("node taints a list", [_node(taints=[Taint("k", "v")]), _pod()], "taints"),
    ("node taint value an int", [_node(taints=(Taint("k", 5),)), _pod()], "taints"),
    ("node unschedulable a string", [_node(unschedulable="yes"), _pod()], "unschedulable"),
    ("node ready None", [_node(ready=None), _pod()], "ready"),
    ("policy annotation an int", [_pod(annotations={"kubeflux.io/match-policy": 5})], "match-policy"),
    ("phase a plain string", [_pod(phase="Pending")], "phase"),
    ("tolerations a list", [_pod(tolerations=[Toleration("k", "Exists")])], "tolerations"),
    (
        "affinity values a list",
        [_pod(required_node_affinity=(NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ["a"]),)),))],
        "required_node_affinity",
    ),
    ("node name an int", [_node(name=7), _pod()], "name"),
    (
        "allocation annotation an int on a bound pod",
        [_pod(node_name="n0", phase=PodPhase.RUNNING, annotations={"kubeflux.io/allocation": 5})],
        "allocation",
    ),
    (
        "group timeout an int past float",
        [PodGroup("default", "g", 1, schedule_timeout_seconds=10**400), _member("a")],
        "schedule_timeout_seconds",
    ),
    (
        "group creation time an int past float",
        [PodGroup("default", "g", 1, creation_time=10**400), _member("a")],
        "creation_time",
    ),
]


@pytest.mark.parametrize(
    ("objects", "field"),
    [pytest.param(objects, field, id=name) for name, objects, field in HOSTILE],
)
def test_an_odd_object_from_the_python_api_is_scheduled_or_rejected_naming_its_field(
    objects: list[Node | Pod | PodGroup], field: str
) -> None:
    """Never an exception out of ``observe`` or ``schedule``: the pure sources take these objects (or reject
    them naming the field); the compiled scheduler must do the same."""
    for decision in _play(objects):  # a rejection says why: the field, or the nodes that do not admit the pod
        if isinstance(decision, Reject):
            assert field in decision.message or "nodes are available" in decision.message


@pytest.mark.parametrize(
    ("objects", "field"),
    [
        ([PodGroup("default", "g", "2"), _member("a"), _member("b")], "min_member"),
        ([PodGroup("default", "g", 2.0), _member("a"), _member("b")], "min_member"),
        ([PodGroup("default", "g", 2, schedule_timeout_seconds="60"), _member("a")], "schedule_timeout_seconds"),
        ([_node(allocatable={CPU: 8000.0}), _pod()], "allocatable[cpu]"),
        ([_pod(requests={CPU: "1"})], "requests[cpu]"),
        ([_pod(priority=1.5)], "priority"),
        ([_pod(creation_time="0")], "creation_time"),
    ],
    ids=[
        "minMember a string",
        "minMember a float",
        "timeout a string",
        "cpu a float",
        "request a string",
        "priority a float",
        "creation time a string",
    ],
)
def test_values_validation_checks_get_the_same_clear_error_compiled(
    objects: list[Node | Pod | PodGroup], field: str
) -> None:
    """What validation does check reaches no compiled code first: the same rejection naming the field."""
    messages = [d.message for d in _play(objects) if isinstance(d, Reject | Unschedulable)]
    assert messages and all(field in message or "no nodes available" in message for message in messages)


@pytest.mark.skipif(not COMPILED, reason="compares the compiled engine with the pure one; this run is pure")
def test_whole_workloads_run_compiled_give_the_pure_runs_answers() -> None:
    """Some cases of tools/native_diff.py (all of them: ``python tools/native_diff.py --compare``): every job's
    and pod's times, nodes, resource ids and messages the same compiled and pure (KUBEFLUX_PURE=1)."""
    only = "kubeflux-conservative-0"  # every kind of workload, on uniform and mixed nodes: 8 runs
    command = [sys.executable, str(REPO / "tools" / "native_diff.py"), "--json", "--seeds", "1", "--only", only]
    compiled = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    pure_env = {**os.environ, "KUBEFLUX_PURE": "1"}
    pure = json.loads(subprocess.run(command, env=pure_env, capture_output=True, text=True, check=True).stdout)
    assert compiled["engine"].count("compiled (mypyc") == 3 and "KUBEFLUX_PURE" in pure["engine"]
    assert compiled["digests"] and compiled["digests"] == pure["digests"]


def test_a_users_subclass_of_kubeflux_schedules_as_kubeflux_does() -> None:
    """The scheduler core is a class users (and tests/sim/test_status_updates.py) extend, e.g. to count what it is
    told; compiled, its classes allow interpreted subclasses (``@mypyc_attr(allow_interpreted_subclasses=True)``)."""

    class Counting(KubefluxScheduler):
        def __init__(self) -> None:
            super().__init__("kubeflux")
            self.seen = 0

        def observe(self, event: ClusterEvent, now: float) -> None:
            self.seen += 1
            super().observe(event, now)

    scheduler = Counting()
    for obj in (_node(), _pod()):
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), 0.0)
    assert scheduler.seen == 2
    assert [type(decision).__name__ for decision in scheduler.schedule(1.0)] == ["Bind"]
