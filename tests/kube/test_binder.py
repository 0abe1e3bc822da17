"""The binder's writes against the simulated cluster over HTTP: what a pod that waits is told, and how often."""

from __future__ import annotations

from kubeflux.kube.binder import Binder, PodRef
from kubeflux.scheduler.interface import Unschedulable

from .conftest import Cluster, condition, pod


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
