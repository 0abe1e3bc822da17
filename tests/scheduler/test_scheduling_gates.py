"""Pods with ``spec.schedulingGates`` (how Kueue and other controllers hold pods back): kubeflux never places one,
shows it as ``gated``, and places it in the next pass once its last gate is removed, as kube-scheduler's
SchedulingGates plugin does."""

from __future__ import annotations

import dataclasses

import pytest

from kubeflux.apiobjects.manifests import ManifestError, pod_from_manifest
from kubeflux.apiobjects.queuejobs import queue_by_job
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import Bind
from kubeflux.scheduler.messages import GATED_MESSAGE
from kubeflux.scheduler.objects import POD_GROUP_LABEL, PodGroup
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, node, pod

KUEUE_GATE = "kueue.x-k8s.io/admission"


def _ungate(cluster: Cluster, name: str, **changes: object) -> None:
    """Remove every gate of ``default/<name>`` (Kueue's admission: it may add a node selector at the same time)."""
    before = cluster.pods[f"default/{name}"]
    after = dataclasses.replace(before, scheduling_gates=(), **changes)  # type: ignore[arg-type]
    cluster.pods[after.key] = after
    cluster.tell(MODIFIED, after)


def test_a_gated_pod_waits_shown_as_gated_and_starts_in_the_pass_after_its_gates_go() -> None:
    scheduler = KubefluxScheduler()
    flavor = {"example.com/flavor": "on-demand"}
    cluster = Cluster(scheduler, [node("w0"), node("w1", labels=flavor)])
    cluster.add(pod("held", 1000, scheduling_gates=(KUEUE_GATE, "example.com/quota")), pod("free", 1000))
    assert len(bound(cluster.run())) == 1
    assert bound(cluster.run(5.0)) == {}
    [row] = scheduler.queued(5.0)
    assert (row.job, row.state, row.pods) == ("default/held", "gated", ("default/held",))
    assert row.reason == f"{GATED_MESSAGE} (example.com/quota, {KUEUE_GATE})" and row.waited == 5.0
    assert len(scheduler.queue.gated) == 1 and not scheduler.queue.by_pod

    _ungate(cluster, "held", node_selector=flavor)  # Kueue's admission also puts its flavor's selector on the pod
    assert bound(cluster.run(6.0)) == {"default/held": "w1"}
    assert not scheduler.queue.gated and scheduler.queued(6.0) == []


def test_removing_one_gate_of_two_keeps_the_pod_gated() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    cluster.add(pod("held", 1000, scheduling_gates=("a.example.com/one", "b.example.com/two")))
    cluster.run()
    before = cluster.pods["default/held"]
    cluster.tell(MODIFIED, dataclasses.replace(before, scheduling_gates=("b.example.com/two",)))
    assert bound(cluster.run(1.0)) == {}
    assert [row.state for row in scheduler.queued(1.0)] == ["gated"]


def test_a_gang_waits_for_its_gated_members_and_starts_whole() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1"), node("w2")])
    cluster.tell(ADDED, PodGroup("default", "g", 3))
    members = [
        pod(f"g-{i}", 2000, labels={POD_GROUP_LABEL: "g"}, scheduling_gates=(KUEUE_GATE,) if i else ())
        for i in range(3)
    ]
    cluster.add(*members)
    assert bound(cluster.run()) == {}
    rows = [(row.job, row.state, row.pods) for row in scheduler.queued(0.0)]
    assert rows == [
        ("default/g", "incomplete", ("default/g-0",)),
        ("default/g", "gated", ("default/g-1", "default/g-2")),
    ]
    _ungate(cluster, "g-1")
    assert bound(cluster.run(1.0)) == {}  # still one member short
    _ungate(cluster, "g-2")
    decisions = cluster.run(2.0)
    assert sorted(bound(decisions)) == ["default/g-0", "default/g-1", "default/g-2"]
    assert all(isinstance(d, Bind) for d in decisions if d.pod.startswith("default/g-"))


def test_a_gated_pod_deleted_before_its_gates_go_is_forgotten() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    cluster.add(pod("held", 1000, scheduling_gates=(KUEUE_GATE,)))
    cluster.run()
    cluster.delete("held")
    assert not scheduler.queue.gated and scheduler.queued(1.0) == []


def test_another_schedulers_gated_pod_is_not_kubefluxs_to_show() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1")])
    cluster.add(pod("theirs", 1000, scheduler="default-scheduler", scheduling_gates=(KUEUE_GATE,)))
    cluster.run()
    assert not scheduler.queue.gated


def test_scheduling_gates_are_read_from_the_manifest_and_a_gate_that_is_no_object_is_named() -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"schedulingGates": [{"name": KUEUE_GATE}], "containers": [{"name": "c"}]},
    }
    assert pod_from_manifest(manifest).scheduling_gates == (KUEUE_GATE,)
    manifest["spec"]["schedulingGates"] = ["kueue"]  # type: ignore[index]
    with pytest.raises(ManifestError, match=r"spec\.schedulingGates\[0\]"):
        pod_from_manifest(manifest)


def test_kubeflux_queue_gathers_a_jobs_gated_pods_under_the_job() -> None:
    scheduler = KubefluxScheduler()
    cluster = Cluster(scheduler, [node("w1", cores=1)])
    cluster.add(pod("busy", 1000))
    cluster.add(*(pod(f"pi-{i}", 1000, owner="Job/pi", scheduling_gates=(KUEUE_GATE,)) for i in range(2)))
    cluster.add(pod("pi-2", 1000, owner="Job/pi", t=1.0))
    cluster.run(3.0)
    [job] = queue_by_job([scheduler], 3.0, "serve")["schedulers"][0]["jobs"]
    assert (job["kind"], job["job"], sorted(job["pods"])) == (
        "Job",
        "default/pi",
        ["default/pi-0", "default/pi-1", "default/pi-2"],
    )
