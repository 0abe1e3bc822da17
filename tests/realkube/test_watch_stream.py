"""serve reads a watch of the real kube-apiserver straight from the connection (its chunks, not urllib3's reads):
the events come whole and in order, the stream the server ends at its timeout ends cleanly, and the client's pool
serves the next request."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from kubeflux.kube.reflector import (
    SYNCED,
    EventQueue,
    RawEvent,
    Reflector,
    _connection_reader,
    _lines,
    watched_resources,
)

from .conftest import CEILING, Api


def test_a_pod_watch_of_the_real_api_server_is_read_from_its_connection(api: Api) -> None:
    namespace = api.namespace("watch-stream")
    response = api.core.list_namespaced_pod(namespace, watch=True, timeout_seconds=3, _preload_content=False)
    read = _connection_reader(response)
    assert read is not None, "the watch fell back to urllib3's reads (its response's shape changed?)"
    names = [f"p{i}" for i in range(40)]

    def create() -> None:
        for name in names:
            manifest = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
            api.create_pod(namespace, manifest)

    creator = threading.Thread(target=create)
    creator.start()
    try:
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in _lines(response, read)]  # till its timeout
    finally:
        creator.join()
        response.close()
    assert seen == [("ADDED", name) for name in names]
    assert sorted(api.pods(namespace)) == sorted(names)  # the client goes on after the stream it did not read


def test_a_reflector_on_the_real_api_server_delivers_its_pods_without_managed_fields(api: Api) -> None:
    """kube-apiserver records every pod's writers (``managedFields``); serve's reflector drops them as it lists and
    watches, as kube-scheduler's informers do, and keeps the rest."""
    namespace = api.namespace("reflector-strip")
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    manifest = {"metadata": {"name": "listed", "labels": {"app": "a"}}, "spec": spec}
    assert api.create_pod(namespace, manifest)["metadata"]["managedFields"]  # the server records them: this can fail
    (pods,) = [resource for resource in watched_resources(api.client) if resource.kind == "Pod"]
    events = EventQueue()
    reflector = Reflector(pods, events, timeout_seconds=30)
    reflector.start()
    try:
        taken = _until(events, lambda e: e.type == SYNCED)
        api.create_pod(namespace, {**manifest, "metadata": {"name": "watched", "labels": {"app": "b"}}})
        taken += _until(events, lambda e: e.obj.get("metadata", {}).get("name") == "watched")
    finally:
        reflector.stop()
    ours = [e for e in taken if e.obj.get("metadata", {}).get("namespace") == namespace]
    assert [(e.type, e.obj["metadata"]["name"]) for e in ours] == [("ADDED", "listed"), ("ADDED", "watched")]
    for event in ours:
        meta = event.obj["metadata"]
        assert "managedFields" not in meta
        assert meta["labels"] and meta["uid"] and meta["resourceVersion"] and event.obj["spec"]["containers"]


def _until(events: EventQueue, last: Callable[[RawEvent], bool]) -> list[RawEvent]:
    """The events taken up to and with the first ``last`` holds for (the cluster's other pods come too)."""
    taken: list[RawEvent] = []
    while not taken or not last(taken[-1]):
        taken.append(events.get(timeout=CEILING))
    return taken


def test_a_reflector_lists_the_real_api_server_in_pages_and_misses_no_pod(api: Api) -> None:
    """With a page smaller than the list (``watch.pageSize``; 10,000 by default), the reflector follows kube-apiserver's
    continue tokens to the list's end: every pod once, then SYNCED, and the watch goes on from the list's version."""
    namespace = api.namespace("reflector-pages")
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    names = [f"p{i}" for i in range(7)]
    for name in names:
        api.create_pod(namespace, {"metadata": {"name": name}, "spec": spec})
    (pods,) = [resource for resource in watched_resources(api.client) if resource.kind == "Pod"]
    asked: list[dict[str, object]] = []

    def call(**query: object) -> object:
        asked.append(query)
        return pods.call(**query)

    events = EventQueue()
    reflector = Reflector(dataclasses.replace(pods, call=call), events, page_size=2, timeout_seconds=30)
    reflector.start()
    try:
        taken = _until(events, lambda e: e.type == SYNCED)
        api.create_pod(namespace, {"metadata": {"name": "after"}, "spec": spec})
        taken += _until(events, lambda e: e.obj.get("metadata", {}).get("name") == "after")
    finally:
        reflector.stop()
    ours = [e.obj["metadata"]["name"] for e in taken if e.obj.get("metadata", {}).get("namespace") == namespace]
    assert sorted(ours[:-1]) == names and ours[-1] == "after"  # each listed pod once, then the watched one
    lists = [query for query in asked if not query.get("watch")]
    assert all(query["limit"] == 2 for query in lists)
    assert len([query for query in lists if query.get("_continue")]) >= len(names) // 2  # it did page
