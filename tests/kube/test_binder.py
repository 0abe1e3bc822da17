"""The binder's writes against the simulated cluster over HTTP: what a pod that waits is told, and how often."""

from __future__ import annotations

import orjson

from kubeflux.kube.binder import Binder, BindOutcome, PodRef
from kubeflux.scheduler.interface import Bind, Unschedulable
from kubeflux.scheduler.storage import ClaimBinding

from .conftest import Cluster, condition, eventually, pod


def test_a_pod_told_it_waits_again_and_again_gets_each_condition_but_events_only_within_the_spam_budget(
    cluster: Cluster,
) -> None:
    """client-go's event spam filter, as kube-scheduler's recorder has it: a bucket of events per pod (25 by
    default, refilled one every 5 minutes); the PodScheduled condition always carries the newest message."""
    created = cluster.create(pod("waits", "64", run=None, scheduler="nobody"))
    ref = PodRef("default", "waits", created["metadata"]["uid"])
    binder = Binder(cluster.api, workers=1, interval=0.0, delay=0.0, event_burst=3, event_refill_seconds=3600.0)
    try:
        for number in range(6):
            binder.unschedulable("kubeflux", Unschedulable("default/waits", ref.uid, f"message {number}"), ref)
            assert binder.drain(60)
            assert (condition(cluster.pods()["waits"]) or {}).get("message") == f"message {number}"
    finally:
        binder.stop()
    notes = [e["note"] for e in cluster.events() if e.get("reason") == "FailedScheduling"]
    assert sorted(notes) == ["message 0", "message 1", "message 2"]


def test_scheduled_events_wait_while_bindings_come_and_only_the_oldest_beyond_the_backlog_go_between(
    cluster: Cluster,
) -> None:
    """A burst of Bindings does not share the API server with as many Event writes: the ``Scheduled`` events wait
    while Bindings come (here the burst never goes quiet: an hour), except the oldest beyond the backlog (here 2)."""
    refs = []
    for name in ("a", "b", "c"):
        created = cluster.create(pod(name, "1", run=None, scheduler="nobody"))
        refs.append(PodRef("default", name, created["metadata"]["uid"]))
    binder = Binder(cluster.api, workers=1, events_quiet=3600.0, events_backlog=2)

    def scheduled() -> list[str]:
        return sorted(e["regarding"]["name"] for e in cluster.events() if e.get("reason") == "Scheduled")

    try:
        for ref in refs:
            binder.bind("kubeflux", Bind(f"default/{ref.name}", ref.uid, "node-0000"), ref)
        cluster.wait_for(lambda pods: all(pods[ref.name]["spec"].get("nodeName") for ref in refs))
        eventually(lambda: scheduled() == ["a", "b"])
        assert binder.pending == 1  # c's event waits for the burst to end
    finally:
        binder.stop()
    assert scheduled() == ["a", "b"]  # stopping drops the events not yet written, as every write but a Binding


def test_a_claim_binding_written_over_another_writer_s_change_refuses_the_bind(cluster: Cluster) -> None:
    """kube-scheduler's ``bindAPIUpdate`` updates its assumed copy of a volume (its resourceVersion): a volume
    another binder pre-bound to another claim meanwhile is not taken from it (409), and the pod's Bind is refused
    (the core unreserves it) instead of going to the volume's node without it."""
    core = cluster.core
    read = lambda response: orjson.loads(response.data)  # noqa: E731
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": "local",
        "hostPath": {"path": "/x"},
    }
    pv = read(core.create_persistent_volume({"metadata": {"name": "pv1"}, "spec": spec}, _preload_content=False))
    claim = {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "resources": {"requests": spec["capacity"]}}
    made = {
        name: read(
            core.create_namespaced_persistent_volume_claim(
                "default", {"metadata": {"name": name}, "spec": claim}, _preload_content=False
            )
        )
        for name in ("claim-a", "claim-b")
    }
    ref = {
        "kind": "PersistentVolumeClaim",
        "namespace": "default",
        "name": "claim-a",
        "uid": made["claim-a"]["metadata"]["uid"],
    }
    core.patch_persistent_volume("pv1", {"spec": {"claimRef": ref}})  # another binder, after kubeflux read pv1
    created = cluster.create(pod("b", "1", run=None, scheduler="nobody"))
    uid = created["metadata"]["uid"]
    refused: list[BindOutcome] = []
    binder = Binder(cluster.api, workers=1, on_refused=refused.append)
    steal = ClaimBinding(
        "default/claim-b", made["claim-b"]["metadata"]["uid"], "node-0000", "pv1", pv["metadata"]["resourceVersion"]
    )
    try:
        binder.bind(
            "kubeflux", Bind("default/b", uid, "node-0000", volume_claims=(steal,)), PodRef("default", "b", uid)
        )
        assert binder.drain(60)
    finally:
        binder.stop()
    assert [outcome.reason.split(":")[0] for outcome in refused] == ["409"]
    assert read(core.read_persistent_volume("pv1", _preload_content=False))["spec"]["claimRef"]["name"] == "claim-a"
    assert not cluster.pods()["b"]["spec"].get("nodeName")
