"""The binder's writes against the simulated cluster over HTTP: what a pod that waits is told, and how often."""

from __future__ import annotations

from kubeflux.kube.binder import Binder, PodRef
from kubeflux.scheduler.interface import Bind, Unschedulable

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
