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
