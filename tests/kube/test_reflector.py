"""A reflector stops promptly whatever it is doing, even when stopped in the instant its watch is being opened (then
:meth:`Reflector.stop` finds no response to shut down: the thread must see the stop itself, or it reads the watch
until the server ends it, minutes later)."""

from __future__ import annotations

import dataclasses
import queue
import threading
from typing import Any

from kubeflux.kube.reflector import SYNCED, RawEvent, Reflector, watched_resources

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

    events: queue.Queue[RawEvent] = queue.Queue()
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
    events: queue.Queue[RawEvent] = queue.Queue()
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
