"""A reflector stops promptly whatever it is doing, even when stopped in the instant its watch is being opened (then
:meth:`Reflector.stop` finds no response to shut down: the thread must see the stop itself, or it reads the watch
until the server ends it, minutes later)."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from kubeflux.kube.reflector import SYNCED, EventQueue, RawEvent, Reflector, watched_resources

from .conftest import CEILING, Cluster, pod


def test_a_reflector_stopped_while_its_watch_opens_ends(cluster: Cluster) -> None:
    cluster.create(pod("p", "1"))
    (pods,) = [resource for resource in watched_resources(cluster.api) if resource.kind == "Pod"]
    stopper: list[threading.Thread] = []

    def call(**query: Any) -> Any:
        if query.get("watch"):  # stop() runs to its end before the watch's response reaches the reflector
            stopping = threading.Thread(target=reflector.stop)
            stopping.start()
            stopper.append(stopping)
            while not reflector.stopped:
                threading.Event().wait(0.01)
        return pods.call(**query)

    events = EventQueue()
    reflector = Reflector(dataclasses.replace(pods, call=call), events, timeout_seconds=300)
    reflector.start()
    taken = [events.get(timeout=CEILING) for _ in range(2)]
    assert [(e.kind, e.type) for e in taken] == [("Pod", "ADDED"), ("Pod", SYNCED)]
    while not stopper:
        threading.Event().wait(0.01)
    stopper[0].join(timeout=CEILING)
    assert not stopper[0].is_alive()
    reflector._thread.join(timeout=CEILING)  # stop() waits 10 s at most; the thread must end, not read for 300 s
    assert not reflector._thread.is_alive()
    assert reflector.watches == 0  # the watch opened after the stop was closed unread


def test_the_objects_a_reflector_delivers_carry_no_managed_fields(cluster: Cluster) -> None:
    """As kube-scheduler's informers keep them: the server's record of writers is dropped as each object is read,
    listed or watched, and nothing else of it."""
    created = cluster.create(pod("listed", "1", labels={"app": "a"}))
    assert created["metadata"].get("managedFields")  # the server does record them: the test can fail
    (pods,) = [resource for resource in watched_resources(cluster.api) if resource.kind == "Pod"]
    events = EventQueue()
    reflector = Reflector(pods, events, timeout_seconds=30)
    reflector.start()
    try:
        taken = [events.get(timeout=CEILING) for _ in range(2)]
        cluster.create(pod("watched", "1", labels={"app": "b"}))
        taken.append(events.get(timeout=CEILING))
    finally:
        reflector.stop()
    assert [(e.type, e.obj.get("metadata", {}).get("name")) for e in taken] == [
        ("ADDED", "listed"),
        (SYNCED, None),
        ("ADDED", "watched"),
    ]
    for event in (taken[0], taken[2]):
        meta = event.obj["metadata"]
        assert "managedFields" not in meta
        assert meta["labels"] and meta["uid"] and meta["resourceVersion"] and event.obj["spec"]["containers"]


def test_a_reflector_lists_in_pages_and_misses_no_pod(cluster: Cluster) -> None:
    """With a page smaller than the list (``watch.pageSize``; 10,000 by default), the reflector follows the continue
    tokens to the list's end: every pod once, then SYNCED, and the watch goes on from the list's version."""
    names = [f"p{i}" for i in range(7)]
    for name in names:
        cluster.create(pod(name, "1"))
    (pods,) = [resource for resource in watched_resources(cluster.api) if resource.kind == "Pod"]
    asked: list[dict[str, Any]] = []

    def call(**query: Any) -> Any:
        asked.append(query)
        return pods.call(**query)

    events = EventQueue()
    reflector = Reflector(dataclasses.replace(pods, call=call), events, page_size=2, timeout_seconds=30)
    reflector.start()
    try:
        taken = [events.get(timeout=CEILING) for _ in range(len(names) + 1)]
        cluster.create(pod("after", "1"))
        taken.append(events.get(timeout=CEILING))
    finally:
        reflector.stop()
    assert [e.type for e in taken] == ["ADDED"] * len(names) + [SYNCED, "ADDED"]
    listed = [e.obj["metadata"]["name"] for e in taken[: len(names)]]
    assert sorted(listed) == names and taken[-1].obj["metadata"]["name"] == "after"
    lists = [query for query in asked if not query.get("watch")]
    assert all(query["limit"] == 2 for query in lists)
    assert len([query for query in lists if query.get("_continue")]) == 3  # pages of 2, 2, 2 and 1


def test_a_full_queue_holds_the_reflector_back_and_loses_nothing(cluster: Cluster) -> None:
    """``watch.queueCapacity``: a reflector whose loop is behind waits while the queue holds that many events
    (memory stays bounded), then delivers the rest in order; stopped while it waits, it ends promptly."""
    names = [f"p{i}" for i in range(7)]
    for name in names:
        cluster.create(pod(name, "1"))
    (pods,) = [resource for resource in watched_resources(cluster.api) if resource.kind == "Pod"]
    events = EventQueue(capacity=3)
    reflector = Reflector(pods, events, timeout_seconds=30)
    reflector.start()
    try:
        deadline = threading.Event()
        while events.qsize() < 3 and not deadline.wait(0.01):
            pass
        deadline.wait(0.3)  # the reflector had time to go past the capacity, were it not held back
        assert events.qsize() == 3
        events.offer(RawEvent("Pod", "WAKE", {}))  # the loop's own wake-up is not queued beyond the capacity
        assert events.qsize() == 3
        taken = [events.get(timeout=CEILING) for _ in range(len(names) + 1)]
    finally:
        reflector.stop()
    assert [e.type for e in taken] == ["ADDED"] * len(names) + [SYNCED]
    assert sorted(e.obj["metadata"]["name"] for e in taken[: len(names)]) == names

    held = Reflector(pods, EventQueue(capacity=1), timeout_seconds=30)
    held.start()
    while held.out.qsize() < 1:
        threading.Event().wait(0.01)
    held.stop()  # waiting on the full queue: it sees the stop
    held._thread.join(timeout=CEILING)
    assert not held._thread.is_alive()
