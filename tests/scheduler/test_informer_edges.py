"""Informer edge cases a real cluster produces and the simulator cannot: re-created pods, in-place resizes, pods the
graph cannot take yet, restarts, corrupt annotations and objects built badly through the Python API. Each test
drives the core with events, as a shell would, and checks the books against the pods the cluster holds."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.apiobjects.manifests import node_from_manifest, pod_from_manifest
from kubeflux.match.engine import MatchOp
from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.graphview import GraphView, first_placement
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, PodWarning, Reject
from kubeflux.scheduler.objects import CPU, MEMORY, POD_GROUP_LABEL, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.testing import ADDED, DELETED, MODIFIED, Cluster, bound, messages, node, pod
from kubeflux.scheduler.translate import (
    DURATION_ANNOTATION,
    POLICY_ANNOTATION,
    node_spec,
    pod_jobspec,
)
from kubeflux.scheduler.validation import InvalidObject


def books_match(cluster: Cluster) -> None:
    """The books equal a count of the cluster's pods: every bound, unfinished pod once, by its current requests;
    the engine holds one job per pod it took, and the queue holds only pods that exist and wait."""
    scheduler = cluster.scheduler
    live = {p.uid: p for p in cluster.pods.values() if not p.phase.terminal and not p.deleted}
    running = {uid: p for uid, p in live.items() if p.node_name}
    assert set(scheduler.books.ledger.bookings) == set(running)
    for uid, p in running.items():
        booking = scheduler.books.ledger.bookings[uid]
        assert (booking.node, booking.requests) == (p.node_name, p.requests)
    for name in cluster.nodes:
        used = {res: amount for res, amount in scheduler.books.ledger.on(name).items() if amount}
        expected: dict[str, int] = {}
        for p in running.values():
            if p.node_name == name:
                for res, amount in {**p.requests, "pods": 1}.items():
                    expected[res] = expected.get(res, 0) + amount
        assert used == {res: amount for res, amount in expected.items() if amount}, name
    assert set(scheduler.books.allocations) == set(running)
    assert set(scheduler.queue.by_pod) <= {uid for uid, p in live.items() if not p.node_name}
    graph = scheduler.books.graph
    if graph is not None:
        held = {alloc.jobid for alloc in scheduler.books.allocations.values() if alloc.jobid}
        reserved = {jobid for job in scheduler.queue.jobs.values() for jobid in job.reservations}
        assert set(graph.engine.jobs) == held | reserved


def running(name: str, cpu: int, on: str, *, scheduler: str = "default-scheduler", **kwargs: Any) -> Pod:
    p = pod(name, cpu, scheduler=scheduler, **kwargs)
    p.node_name, p.phase = on, PodPhase.RUNNING
    return p


# --- 1. a pod re-created under its name with a new UID ------------------------------------------------------


def test_a_statefulset_pod_recreated_while_its_old_self_ran_releases_the_old_allocation_first() -> None:
    """web-0 runs on w1 (2 of 2 cores); the relist folds its DELETE and the new web-0's ADD into one MODIFIED with
    a new UID. The old one's cores go first: the new web-0 is placed at once, on w1, and nothing is counted
    twice."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("web-0", 2000))
    assert bound(cluster.run()) == {"default/web-0": "w1"}
    again = Pod("default", "web-0", "uid-web-0-b", "kubeflux", creation_time=1.0, requests={CPU: 2000})
    cluster.pods["default/web-0"] = again
    cluster.tell(MODIFIED, again)
    assert bound(cluster.run(1.0)) == {"default/web-0": "w1"}
    books_match(cluster)
    assert cluster.scheduler.books.graph is not None and len(cluster.scheduler.books.graph.engine.jobs) == 1


def test_a_pod_recreated_bound_while_its_old_self_waited_leaves_no_queue_entry() -> None:
    """web-0 waits (the node is full); it is re-created, and another scheduler binds the new one at once. The old
    UID leaves the queue (it would otherwise be placed later as a ghost), the new one is counted where it runs."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("big", 2000), pod("web-0", 1000, t=1))
    cluster.run()
    assert "uid-web-0" in cluster.scheduler.queue.by_pod
    again = running("web-0", 1000, "w2")
    again.uid = "uid-web-0-b"
    cluster.nodes["w2"] = node("w2", cores=2)
    cluster.tell(ADDED, cluster.nodes["w2"])
    cluster.pods["default/web-0"] = again
    cluster.tell(MODIFIED, again)
    cluster.end("big")
    assert bound(cluster.run(2.0)) == {}
    assert not cluster.scheduler.queue.by_pod
    books_match(cluster)


@pytest.mark.parametrize("order", ["new-then-tombstone", "tombstone-then-new", "tombstone-twice"])
def test_a_late_tombstone_of_the_old_uid_never_releases_the_new_pod(order: str) -> None:
    """A watch may deliver the old pod's DELETED after the new pod's ADDED (or twice): the new pod keeps its
    allocation, and the node is never offered twice."""
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("db-0", 2000))
    cluster.run()
    old = cluster.pods.pop("default/db-0")
    old.deleted = True
    new = Pod("default", "db-0", "uid-db-0-b", "kubeflux", creation_time=1.0, requests={CPU: 2000})
    cluster.pods["default/db-0"] = new
    if order == "new-then-tombstone":
        cluster.tell(ADDED, new)
        cluster.tell(DELETED, old)
    else:
        cluster.tell(DELETED, old)
        if order == "tombstone-twice":
            cluster.tell(DELETED, old)
        cluster.tell(ADDED, new)
    assert bound(cluster.run(1.0)) == {"default/db-0": "w1"}
    cluster.tell(DELETED, old)
    cluster.add(pod("other", 1000, t=2))
    assert bound(cluster.run(2.0)) == {}
    books_match(cluster)


# --- 2. in-place resize -------------------------------------------------------------------------------------


def resized_manifest(name: str, spec_cpu: str, held_cpu: str, *, node_name: str, resize: str = "") -> dict[str, Any]:
    """A running pod whose spec asks ``spec_cpu`` while the kubelet reports it holds ``held_cpu``."""
    status: dict[str, Any] = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "main", "resources": {"requests": {"cpu": held_cpu}}, "allocatedResources": {"cpu": held_cpu}}
        ],
    }
    if resize in ("Deferred", "Infeasible"):
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": resize}]
    elif resize == "InProgress":
        status["conditions"] = [{"type": "PodResizeInProgress", "status": "True"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": node_name,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": spec_cpu}}}],
        },
        "status": status,
    }


@pytest.mark.parametrize(
    ("resize", "counted"),
    [("", 3000), ("InProgress", 3000), ("Deferred", 3000), ("Infeasible", 1000)],
)
def test_a_resizing_pod_counts_as_kube_scheduler_counts_it(resize: str, counted: int) -> None:
    """kube-scheduler's rule (``PodRequests`` with status resources): while a resize from 1 to 3 cores is pending or
    in progress the pod counts the larger of the two; once Infeasible, what the kubelet holds."""
    p = pod_from_manifest(resized_manifest("app", "3", "1", node_name="w1", resize=resize))
    assert p.requests == {CPU: counted}
    assert p.resize == resize


def test_a_running_pod_resized_up_takes_its_new_cores_and_no_pod_is_placed_in_them() -> None:
    """app runs on w1 with 1 of 4 cores; it is resized to 3 (in progress). The books and the engine count 3, so a
    2-core kubeflux pod does not fit beside it and goes to w2; when app shrinks back to 1, w1 takes the next."""
    cluster = Cluster(KubefluxScheduler(), [node("w1"), node("w2")])
    app = pod_from_manifest(resized_manifest("app", "1", "1", node_name="w1"))
    cluster.pods[app.key] = app
    cluster.tell(ADDED, app)
    cluster.run()
    grown = pod_from_manifest(resized_manifest("app", "3", "1", node_name="w1", resize="InProgress"))
    cluster.pods[app.key] = grown
    cluster.tell(MODIFIED, grown)
    cluster.add(pod("hpc", 2000, t=1))
    assert bound(cluster.run(1.0)) == {"default/hpc": "w2"}
    graph = cluster.scheduler.books.graph
    assert graph is not None and graph.busy_cores("w1", 1) == 3
    books_match(cluster)
    shrunk = pod_from_manifest(resized_manifest("app", "1", "1", node_name="w1"))
    cluster.pods[app.key] = shrunk
    cluster.tell(MODIFIED, shrunk)
    cluster.add(pod("next", 3000, t=2))
    assert bound(cluster.run(2.0)) == {"default/next": "w1"}
    assert graph.busy_cores("w1", 2) == 4
    books_match(cluster)


def test_a_resize_beyond_the_free_cores_is_counted_in_the_books_and_replayed_when_room_frees() -> None:
    """kubeflux's own pod holds 2 of w1's 4 cores; another scheduler's pod there grows from 2 to 3 cores (the
    kubelet has not said Infeasible yet). The engine cannot hold 3 of the 2 free cores: the pod stays counted in
    the books (w1 is over-committed there, so nothing is placed on it) and takes its cores when kubeflux's pod
    ends."""
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(pod("mine", 2000))
    cluster.run()
    web = running("web", 2000, "w1")
    cluster.add(web)
    cluster.run(1.0)
    web.requests = {CPU: 3000}
    cluster.tell(MODIFIED, web)
    cluster.add(pod("small", 1000, t=2))
    decisions = cluster.scheduler.schedule(2.0)
    assert bound(decisions) == {} and "Insufficient cpu" in messages(decisions)["default/small"]
    assert any("Could not put pod default/web" in line for line in cluster.scheduler.log)
    cluster.end("mine")
    cluster.run(3.0)
    graph = cluster.scheduler.books.graph
    assert graph is not None and graph.busy_cores("w1", 3) == 4  # web's 3 cores, then small's
    assert cluster.pods["default/small"].node_name == "w1"
    books_match(cluster)


# --- 3. a bound pod the graph cannot take yet -------------------------------------------------------------


def test_a_pod_the_graph_refused_is_put_in_when_the_node_exclusive_pod_beside_it_ends() -> None:
    """A ``lonodex`` pod of kubeflux holds w1 whole; another scheduler's pod is bound beside it (the books have
    room, the engine refuses: the node is held whole). When the exclusive pod ends, the other pod is put in the
    graph before anything is matched, so the next ``lonodex`` pod goes to w2, not beside it."""
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1"), node("w2")])
    cluster.add(pod("whole", 1000, annotations={POLICY_ANNOTATION: "lonodex"}), pod("busy", 4000, t=0.5))
    assert bound(cluster.run()) == {"default/whole": "w1", "default/busy": "w2"}
    cluster.add(running("web", 1000, "w1"))
    cluster.run(1.0)
    assert scheduler.books.graph is not None and scheduler.books.graph.unrecorded == {"w1"}
    cluster.end("whole")
    cluster.end("busy")
    cluster.add(pod("next", 1000, t=2, annotations={POLICY_ANNOTATION: "lonodex"}))
    assert bound(cluster.run(2.0)) == {"default/next": "w2"}
    assert scheduler.books.graph.unrecorded == set()
    assert scheduler.books.graph.busy_cores("w1", 2) == 1
    books_match(cluster)


def test_while_a_pod_is_not_in_the_graph_node_exclusive_matches_avoid_its_node() -> None:
    """The engine holds nothing on w1, yet the informer knows a bound pod there that it could not put in the graph
    (:attr:`GraphView.unrecorded`): a ``lonodex`` match must not take w1 as if it were empty; a ``lonode`` match
    may share it."""
    graph = GraphView([node_spec(node("w1")), node_spec(node("w2"))], "lonode", 3600, deque())
    graph.unrecorded = {"w1"}
    spec = pod_jobspec(pod("p", 1000), 60)
    assert spec is not None
    whole = graph.match(MatchOp.ALLOCATE, spec, "whole", 0, set(), "lonodex")
    assert whole.matched and first_placement(whole).node == "w2"
    shared = graph.match(MatchOp.ALLOCATE, spec, "shared", 0, set(), "lonode")
    assert shared.matched and first_placement(shared).node == "w1"


# --- 4. a started gang stays started across a restart -----------------------------------------------------


@pytest.mark.parametrize("replacement_first", [False, True])
def test_a_restarted_scheduler_places_a_started_gangs_replacement_alone(replacement_first: bool) -> None:
    """A gang of 4 (minMember 4) runs; one member is deleted and re-created, and kubeflux restarts before placing
    it. The new kubeflux finds 3 members bound: the gang has started, so the replacement is placed alone, at once
    (not held waiting for 4 pending members), even when the informer lists it before the bound ones."""
    nodes = [node("w1"), node("w2")]
    first = Cluster(KubefluxScheduler(), nodes)
    group = PodGroup("default", "mpi", min_member=4)
    first.tell(ADDED, group)
    first.add(*(pod(f"mpi-{i}", 2000, labels={POD_GROUP_LABEL: "mpi"}) for i in range(4)))
    assert len(bound(first.run())) == 4
    first.delete("mpi-3")
    replacement = pod("mpi-3", 2000, t=5, labels={POD_GROUP_LABEL: "mpi"})
    replacement.uid = "uid-mpi-3-b"
    first.pods[replacement.key] = replacement

    again = Cluster(KubefluxScheduler(), nodes)
    listed = list(first.pods.values())
    if replacement_first:
        listed.sort(key=lambda p: bool(p.node_name))
    again.tell(ADDED, group)
    again.add(*listed)
    assert bound(again.run(6.0)) == {"default/mpi-3": "w2"}
    books_match(again)


# --- 5. corrupt allocation annotations ------------------------------------------------------------------------

CORRUPT = {
    "infinity": '{"start": Infinity, "duration": 60, "cores": ["core0"]}',
    "huge": '{"start": 1e30, "duration": 60}',
    "nan": '{"start": NaN, "duration": 60}',
    "negative": '{"start": -5, "duration": 60}',
    "zero-duration": '{"start": 0, "duration": 0}',
    "string-start": '{"start": "0", "duration": 60}',
    "list-start": '{"start": [0], "duration": 60}',
    "non-object": "[1, 2, 3]",
    "not-json": "{start: 0",
    "core-names-not-strings": '{"start": 0, "duration": 60, "cores": [0, 1]}',
    "cores-not-a-list": '{"start": 0, "duration": 60, "cores": "core0"}',
    "deeply-nested": "[" * 100_000,
}


@pytest.mark.parametrize("raw", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_allocation_annotation_is_reported_and_the_pod_still_counted(raw: str) -> None:
    """A restarted kubeflux finds two of its pods on w1; one's allocation annotation is corrupt. Nothing raises;
    the good one is put back on its own cores, the corrupt one on free ones, counted by its requests, and it gets
    one warning (log line and event); a 1-core pod then does not fit on the full node."""
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=3)])
    good = running("good", 1000, "w1", scheduler="kubeflux")
    good.annotations = {ALLOCATION_ANNOTATION: json.dumps({"start": 0, "duration": 600, "cores": ["core2"]})}
    bad = running("bad", 2000, "w1", scheduler="kubeflux")
    bad.annotations = {ALLOCATION_ANNOTATION: raw}
    cluster.add(good, bad, pod("late", 1000, t=1))
    decisions = cluster.run(1.0)
    warnings = [d for d in decisions if isinstance(d, PodWarning)]
    assert [(w.pod, w.reason) for w in warnings] == [("default/bad", "InvalidAllocation")]
    assert ALLOCATION_ANNOTATION in warnings[0].message
    assert any("default/bad" in line and ALLOCATION_ANNOTATION in line for line in scheduler.log)
    assert bound(decisions) == {} and "default/late" in messages(decisions)
    graph = scheduler.books.graph
    assert graph is not None and graph.busy_cores("w1", 1) == 3
    good_alloc = scheduler.books.allocations["uid-good"]
    assert good_alloc.placement is not None and good_alloc.placement.cores == ("core2",)
    cluster.tell(MODIFIED, bad)  # said once
    assert not [d for d in cluster.run(2.0) if isinstance(d, PodWarning)]
    books_match(cluster)


# --- 6. objects built badly through the Python API --------------------------------------------------------

BAD_PODS: dict[str, tuple[dict[str, Any], str]] = {
    "nan-cpu": ({"requests": {CPU: math.nan}}, "requests[cpu]"),
    "inf-memory": ({"requests": {CPU: 1000, MEMORY: math.inf}}, "requests[memory]"),
    "negative-cpu": ({"requests": {CPU: -1000}}, "requests[cpu]"),
    "fractional-cpu": ({"requests": {CPU: 1000.5}}, "requests[cpu]"),
    "bool-gpu": ({"requests": {CPU: 1000, "nvidia.com/gpu": True}}, "requests[nvidia.com/gpu]"),
    "more-cores-than-any-node": ({"requests": {CPU: 10**30}}, "requests[cpu]"),
    "nan-deadline": ({"active_deadline_seconds": math.nan}, "active_deadline_seconds"),
    "inf-deadline": ({"active_deadline_seconds": math.inf}, "active_deadline_seconds"),
    "negative-deadline": ({"active_deadline_seconds": -1.0}, "active_deadline_seconds"),
    "nan-creation": ({"creation_time": math.nan}, "creation_time"),
    "inf-creation": ({"creation_time": math.inf}, "creation_time"),
}


def bad_pod(name: str, fields: dict[str, Any], scheduler: str = "kubeflux") -> Pod:
    p = Pod("default", name, f"uid-{name}", scheduler, requests={CPU: 1000})
    for attribute, value in fields.items():
        setattr(p, attribute, value)
    return p


@pytest.mark.parametrize(("fields", "field"), BAD_PODS.values(), ids=BAD_PODS.keys())
def test_a_bad_pod_of_kubeflux_is_rejected_naming_the_field_and_the_rest_is_scheduled(
    fields: dict[str, Any], field: str
) -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(bad_pod("bad", fields), pod("good", 1000, t=1))
    decisions = cluster.run()
    [reject] = [d for d in decisions if isinstance(d, Reject)]
    assert reject.pod == "default/bad" and reject.message.startswith(f"Pod default/bad: {field}: ")
    assert bound(decisions) == {"default/good": "w1"}
    assert "uid-bad" not in cluster.scheduler.queue.by_pod


@pytest.mark.parametrize(("fields", "field"), BAD_PODS.values(), ids=BAD_PODS.keys())
def test_a_bad_pod_of_another_scheduler_is_reported_and_kept_out_of_the_books(
    fields: dict[str, Any], field: str
) -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    other = bad_pod("web", fields, scheduler="default-scheduler")
    other.node_name, other.phase = "w1", PodPhase.RUNNING
    cluster.add(other, pod("good", 4000, t=1))
    decisions = scheduler.schedule(0.0)
    [warning] = [d for d in decisions if isinstance(d, PodWarning)]
    assert warning.pod == "default/web" and warning.message.startswith(f"Pod default/web: {field}: ")
    assert bound(decisions) == {"default/good": "w1"}
    assert "uid-web" not in scheduler.books.ledger.bookings


def test_a_bad_pod_fixed_later_is_scheduled() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    broken = bad_pod("p", {"requests": {CPU: math.nan}})
    cluster.add(broken)
    assert [type(d) for d in cluster.run()] == [Reject]
    broken.requests = {CPU: 1000}
    cluster.tell(MODIFIED, broken)
    assert bound(cluster.run(1.0)) == {"default/p": "w1"}


@pytest.mark.parametrize(
    ("allocatable", "field"),
    [
        ({CPU: math.nan}, "allocatable[cpu]"),
        ({CPU: -4000}, "allocatable[cpu]"),
        ({CPU: 4000, MEMORY: 1.5}, "allocatable[memory]"),
    ],
)
def test_a_bad_node_is_logged_and_kept_out_of_the_graph(allocatable: dict[str, Any], field: str) -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    cluster.tell(ADDED, Node("bad", uid="bad", allocatable=allocatable))
    cluster.add(*(pod(f"p{i}", 4000, t=i) for i in range(2)))
    decisions = cluster.run()
    assert bound(decisions) == {"default/p0": "w1"}
    assert any(line.startswith(f"Node bad: {field}: ") for line in scheduler.log)
    assert scheduler.books.graph is not None and "bad" not in scheduler.books.graph.specs
    cluster.nodes["bad"] = node("bad")  # fixed: it joins the graph
    cluster.tell(MODIFIED, cluster.nodes["bad"])
    assert bound(cluster.run(1.0)) == {"default/p1": "bad"}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"min_member": 0}, "min_member"),
        ({"min_member": 2.5}, "min_member"),
        ({"schedule_timeout_seconds": math.nan}, "schedule_timeout_seconds"),
        ({"schedule_timeout_seconds": -10.0}, "schedule_timeout_seconds"),
        ({"creation_time": math.inf}, "creation_time"),
    ],
)
def test_a_bad_pod_group_rejects_its_pods_until_it_is_fixed(fields: dict[str, Any], field: str) -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    group = PodGroup("default", "mpi", min_member=2)
    for attribute, value in fields.items():
        setattr(group, attribute, value)
    cluster.tell(ADDED, group)
    cluster.add(*(pod(f"mpi-{i}", 1000, labels={POD_GROUP_LABEL: "mpi"}) for i in range(2)))
    decisions = cluster.run()
    rejects = {d.pod: d.message for d in decisions if isinstance(d, Reject)}
    assert set(rejects) == {"default/mpi-0", "default/mpi-1"}
    assert all(m.startswith(f"PodGroup default/mpi: {field}: ") for m in rejects.values())
    cluster.tell(MODIFIED, PodGroup("default", "mpi", min_member=2))
    assert set(bound(cluster.run(1.0))) == {"default/mpi-0", "default/mpi-1"}


# --- hostile event orders ----------------------------------------------------------------------------------


def decisions_of(kind: type, decisions: list[Decision]) -> list[Decision]:
    return [d for d in decisions if isinstance(d, kind)]


def test_odd_event_orders_never_leak_or_double_count() -> None:
    """MODIFIED before ADDED, DELETED twice, a tombstone without uid, a bound pod seen before its node, a pod
    ending before it was seen bound: the books match the cluster after each step."""
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    early = running("early", 1000, "w2")  # bound to a node not seen yet
    cluster.pods[early.key] = early
    cluster.tell(MODIFIED, early)  # MODIFIED before any ADDED
    cluster.nodes["w2"] = node("w2")
    cluster.tell(ADDED, cluster.nodes["w2"])
    cluster.run()
    books_match(cluster)
    cluster.add(pod("a", 1000, t=1))
    cluster.run(1.0)
    cluster.delete("a")
    cluster.tell(DELETED, Pod("default", "a", "uid-a", "kubeflux", requests={CPU: 1000}))  # twice
    cluster.tell(DELETED, Pod("default", "a", "", "kubeflux"))  # and a tombstone without uid
    cluster.run(2.0)
    books_match(cluster)
    ghost = running("ghost", 1000, "w1")
    ghost.phase = PodPhase.SUCCEEDED
    cluster.tell(MODIFIED, ghost)  # ended before it was ever seen
    cluster.run(3.0)
    books_match(cluster)
    assert sum(isinstance(d, Bind) for d in cluster.run(4.0)) == 0


def test_a_bad_pod_groups_pods_wait_for_a_group_again_when_it_is_deleted() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=0))
    cluster.add(*(pod(f"mpi-{i}", 1000, labels={POD_GROUP_LABEL: "mpi"}) for i in range(2)))
    assert len(decisions_of(Reject, cluster.run())) == 2
    cluster.tell(DELETED, PodGroup("default", "mpi", min_member=0))
    assert set(messages(cluster.run(1.0))) == {"default/mpi-0", "default/mpi-1"}  # waiting for the group
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=2))
    assert set(bound(cluster.run(2.0))) == {"default/mpi-0", "default/mpi-1"}


def test_a_pod_with_labels_that_are_not_a_mapping_is_rejected() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(bad_pod("odd", {"labels": None}), pod("good", 1000, t=1))
    decisions = cluster.run()
    assert [d.message.split(":")[:2] for d in decisions_of(Reject, decisions)] == [["Pod default/odd", " labels"]]
    assert bound(decisions) == {"default/good": "w1"}


# --- a small property: random event orders around re-creation and resize ------------------------------------

Op = tuple[str, int, int]
ops = st.lists(
    st.tuples(
        st.sampled_from(["ours", "other", "recreate", "resize", "end", "delete", "late-tombstone", "restart"]),
        st.integers(0, 5),
        st.sampled_from([500, 1000, 2000, 3000]),
    ),
    min_size=3,
    max_size=30,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_any_order_of_recreations_resizes_and_tombstones_keeps_the_books_true(steps: list[Op]) -> None:
    """Pods named p0…p5 come and go: kubeflux's pending ones, another scheduler's bound ones, re-created under their
    name with a new UID (pending or bound), resized in place, ended, deleted (with tombstones delivered late, after
    the re-created pod), and kubeflux restarted. After every step the books equal the cluster's pods and the engine
    holds, node by node, exactly the whole cores of the pods running there."""
    nodes = [node("w1"), node("w2")]
    cluster = Cluster(KubefluxScheduler(), nodes)
    tombstones: list[Pod] = []
    serial = 0

    def room(name: str) -> int:
        used = sum(
            p.requests.get(CPU, 0) for p in cluster.pods.values() if p.node_name == name and not p.phase.terminal
        )
        return cluster.nodes[name].allocatable[CPU] - used

    def fresh(key: str, cpu: int, on: str | None) -> Pod:
        nonlocal serial
        serial += 1
        name = key.split("/")[1]
        made = pod(name, cpu, scheduler="default-scheduler" if on else "kubeflux", t=float(serial))
        made.uid = f"uid-{name}-{serial}"
        if on:
            made.node_name, made.phase = on, PodPhase.RUNNING
        return made

    for step, (op, index, cpu) in enumerate(steps, start=1):
        key = f"default/p{index}"
        current = cluster.pods.get(key)
        target = next((name for name in cluster.nodes if room(name) >= cpu), None)
        if op in ("ours", "other") and current is None:
            made = fresh(key, cpu, target if op == "other" else None)
            if op == "other" and target is None:
                continue
            cluster.pods[key] = made
            cluster.tell(MODIFIED if step % 2 else ADDED, made)  # MODIFIED before ADDED, as a relist may
        elif op == "recreate" and current is not None:
            old = cluster.pods.pop(key)
            tombstones.append(old)
            gone_room = target if current.node_name == "" or target is not None else current.node_name
            made = fresh(key, cpu, gone_room if index % 2 else None)
            if made.node_name and room(made.node_name) < cpu:
                made = fresh(key, cpu, None)
            cluster.pods[key] = made
            cluster.tell(MODIFIED, made)  # the relist folded DELETED + ADDED into one update
        elif op == "resize" and current is not None and current.node_name:
            if room(current.node_name) + current.requests[CPU] >= cpu:
                current.requests = {CPU: cpu}
                cluster.tell(MODIFIED, current)
        elif op == "end" and current is not None and current.node_name:
            cluster.end(f"p{index}")
            cluster.pods.pop(key)
        elif op == "delete" and current is not None:
            cluster.delete(f"p{index}")
            tombstones.append(current)
            cluster.tell(DELETED, current)  # twice
        elif op == "late-tombstone" and tombstones:
            cluster.tell(DELETED, tombstones[index % len(tombstones)])
        elif op == "restart":
            cluster.scheduler = KubefluxScheduler()
            for n in cluster.nodes.values():
                cluster.tell(ADDED, n)
            for p in cluster.pods.values():
                cluster.tell(ADDED, p)
        cluster.run(float(step))
        books_match(cluster)
        graph = cluster.scheduler.books.graph
        assert graph is not None
        for name in cluster.nodes:
            cores = sum(p.requests[CPU] // 1000 for p in cluster.pods.values() if p.node_name == name)
            assert graph.busy_cores(name, step) == cores, (name, step)


def test_a_node_claiming_more_cores_than_any_graph_holds_is_kept_out() -> None:
    """A node reporting ``cpu: 1e30`` would make the engine build vertices for ever; it is refused like any bad
    quantity, through the manifest reader and through the Python API alike."""
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    cluster.tell(ADDED, Node("huge", uid="huge", allocatable={CPU: 10**33}))
    cluster.add(pod("p", 1000))
    assert bound(cluster.run()) == {"default/p": "w1"}
    assert any(line.startswith("Node huge: allocatable[cpu]: more than") for line in scheduler.log)
    with pytest.raises(InvalidObject, match=r"Node huge: status\.allocatable\.cpu: more than"):
        node_from_manifest({"metadata": {"name": "huge"}, "status": {"allocatable": {"cpu": "1e30"}}})


@pytest.mark.parametrize(
    ("annotation", "value"), [(DURATION_ANNOTATION, "-1"), (DURATION_ANNOTATION, "nan"), (POLICY_ANNOTATION, "bogus")]
)
def test_a_bad_duration_or_policy_annotation_on_a_pod_that_must_wait_is_rejected_not_raised(
    annotation: str, value: str
) -> None:
    """Found by fuzzing: a pod that did not fit now reached the reservation with its bad annotation unread, and
    the error escaped the scheduling pass. It is now rejected when it is observed, naming the annotation."""
    cluster = Cluster(KubefluxScheduler(), [node("w1")])
    cluster.add(pod("full", 4000))
    cluster.run()
    cluster.add(pod("bad", 1000, t=1, annotations={annotation: value}), pod("next", 1000, t=2))
    decisions = cluster.run(1.0)
    [reject] = decisions_of(Reject, decisions)
    assert reject.pod == "default/bad" and annotation in reject.message
    assert "default/next" in messages(decisions)


# --- a small property: garbage through the Python API never raises and never reaches the books ------------------

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**40), 10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=2),
)
maybe = st.sampled_from([1000, 2000, 0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.dictionaries(st.sampled_from([CPU, MEMORY, "nvidia.com/gpu", "", "x"]), st.one_of(maybe, junk)),
    created=st.one_of(st.just(0.0), junk),
    deadline=st.one_of(st.none(), st.just(60.0), junk),
    allocatable=st.one_of(maybe, junk),
    annotation=st.one_of(st.none(), st.text(max_size=30), st.sampled_from(list(CORRUPT.values())[:-1])),
    bound_by_other=st.booleans(),
)
def test_garbage_through_the_python_api_never_raises_and_never_reaches_the_books(
    requests: dict[str, Any],
    created: Any,
    deadline: Any,
    allocatable: Any,
    annotation: str | None,
    bound_by_other: bool,
) -> None:
    scheduler = KubefluxScheduler()
    scheduler.observe(ClusterEvent(ADDED, node("w1")), 0.0)
    scheduler.observe(ClusterEvent(ADDED, Node("w2", uid="w2", allocatable={CPU: allocatable})), 0.0)
    odd = Pod("default", "odd", "uid-odd", "default-scheduler" if bound_by_other else "kubeflux", requests=requests)
    odd.creation_time, odd.active_deadline_seconds = created, deadline
    if bound_by_other:
        odd.node_name, odd.phase = "w1", PodPhase.RUNNING
    recovered = running("recovered", 1000, "w1", scheduler="kubeflux")
    if annotation is not None:
        recovered.annotations = {ALLOCATION_ANNOTATION: annotation}
    for p in (odd, recovered, pod("good", 1000, t=1)):
        scheduler.observe(ClusterEvent(ADDED, p), 1.0)
    decisions = scheduler.schedule(1.0)
    odd_cpu = requests.get(CPU)
    room_taken = type(odd_cpu) is int and odd_cpu > 2000  # a valid odd pod (2001m: 3 cores) leaves good no room
    assert "default/good" in bound(decisions) or room_taken
    for booking in scheduler.books.ledger.bookings.values():
        assert all(type(amount) is int and amount >= 0 for amount in booking.requests.values())
    assert "uid-recovered" in scheduler.books.ledger.bookings


def test_a_rejected_gang_is_queued_again_and_placed_when_a_node_is_added() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=2), node("w2", cores=2)])
    cluster.tell(ADDED, PodGroup("default", "mpi", min_member=3))
    cluster.add(*(pod(f"mpi-{i}", 2000, labels={POD_GROUP_LABEL: "mpi"}) for i in range(3)))
    assert all(isinstance(d, Reject) for d in cluster.run())
    cluster.nodes["w3"] = node("w3", cores=2)
    cluster.tell(ADDED, cluster.nodes["w3"])
    assert bound(cluster.run(1.0)) == {"default/mpi-0": "w1", "default/mpi-1": "w2", "default/mpi-2": "w3"}


def test_a_rejected_pod_is_queued_again_when_a_nodes_capacity_is_raised() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("big", 4000))
    decisions = cluster.run()
    assert [type(d) for d in decisions] == [Reject]
    cluster.nodes["w1"] = node("w1", cores=4)
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert bound(cluster.run(1.0)) == {"default/big": "w1"}


def test_a_rejected_pod_that_still_never_fits_after_a_node_change_is_rejected_again_not_bound() -> None:
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=2)])
    cluster.add(pod("big", 4000))
    cluster.run()
    cluster.nodes["w1"] = node("w1", cores=2, labels={"zone": "a"})
    cluster.tell(MODIFIED, cluster.nodes["w1"])
    assert [type(d) for d in cluster.run(1.0)] == [Reject]


def test_a_rejected_gang_stays_rejected_whole_when_the_shell_writes_a_members_status() -> None:
    # Three 16-core members on one 16-core node: rejected as never fitting. kubeflux serve then writes
    # PodScheduled=False on a member (a status-only update): the member must not be queued alone, splitting the
    # gang into one rejected member and others waiting for a minMember they cannot reach.
    cluster = Cluster(KubefluxScheduler(), [node("w1", cores=16)])
    cluster.tell(ADDED, PodGroup("default", "wide", min_member=3))
    cluster.add(*(pod(f"wide-{i}", 16_000, labels={POD_GROUP_LABEL: "wide"}) for i in range(3)))
    assert [type(d) for d in cluster.run()] == [Reject, Reject, Reject]
    status_only = dataclasses.replace(cluster.pods["default/wide-0"])
    cluster.tell(MODIFIED, status_only)
    assert cluster.run(1.0) == []
    relabelled = dataclasses.replace(status_only, labels={**status_only.labels, "tier": "hpc"})
    cluster.tell(MODIFIED, relabelled)  # a change placing reads: the whole gang is reconsidered (and still too big)
    assert [type(d) for d in cluster.run(2.0)] == [Reject, Reject, Reject]
