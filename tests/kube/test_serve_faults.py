"""``serve`` when the cluster misbehaves: dropped watches, 410 Gone with pods deleted during the gap, binds lost to a
race, pods that vanish between match and bind, and objects its readers refuse. Each time: it recovers, nothing is
double-bound, no allocation leaks (the pods that should fit afterwards do), and the other pods keep being placed.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from kubeflux.kube.binder import Binder
from kubeflux.kube.serve import Serve

from .conftest import CEILING, Cluster, condition, eventually, phase, pod, start_cluster


def _drop_watches(cluster: Cluster) -> None:
    """End every watch the server has open (as a restarting API server or a load balancer does)."""
    for watcher in list(cluster.server.app.streams.open):
        watcher.close()


def _forget_history(cluster: Cluster) -> None:
    """Compact the server's watch cache: a watch from any version seen so far gets 410 Gone."""
    store = cluster.server.store
    for collection in store.collections.values():
        collection.compacted = store.rv
        collection.events.clear()


def _bound(pods: dict[str, dict[str, Any]], *names: str) -> bool:
    return all(bool(pods[n]["spec"].get("nodeName")) for n in names)


def _waits(pods: dict[str, dict[str, Any]], name: str) -> bool:
    return (condition(pods[name]) or {}).get("reason") == "Unschedulable" and not pods[name]["spec"].get("nodeName")


def test_a_dropped_watch_is_opened_again_and_later_pods_are_scheduled(cluster: Cluster) -> None:
    with cluster.serve() as serve:
        cluster.create(pod("a", "4", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "a"))
        pods_reflector = serve.reflectors[-1]
        watches = pods_reflector.watches
        cluster.server.call(lambda: _drop_watches(cluster))
        cluster.create(pod("b", "4", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "a", "b"))
        assert pods_reflector.watches > watches
        assert pods_reflector.relists == 1  # the history was still there: no relist needed
        eventually(lambda: serve.bound == 2)  # counted once its binder thread has the reply
        assert serve.binder.refused == 0


def test_410_gone_relists_and_releases_the_pods_deleted_during_the_gap(cluster: Cluster) -> None:
    for name in ("a", "b"):
        cluster.create(pod(name, "8", run=None))
    cluster.create(pod("c", "8", run=None))
    with cluster.serve() as serve:
        cluster.wait_for(lambda pods: _bound(pods, "a", "b") and _waits(pods, "c"))
        pods_reflector = serve.reflectors[-1]

        def gap() -> None:  # all at once on the server: serve cannot see the delete through its watch
            _drop_watches(cluster)
            store = cluster.server.store
            store.delete(store.registry.find("", "v1", "pods"), "default", "a", grace=0)
            _forget_history(cluster)

        cluster.server.call(gap)
        cluster.wait_for(lambda pods: "a" not in pods and _bound(pods, "b", "c"))
        assert pods_reflector.relists >= 2
        eventually(lambda: serve.bound == 3)  # counted once its binder thread has the reply
        assert serve.binder.refused == 0
        eventually(lambda: {a.node for a in serve.cores[0].books.allocations.values()} == {"node-0000"})
        eventually(lambda: len(serve.cores[0].books.allocations) == 2)


def _before_bind(serve: Serve, act: Any) -> None:
    """Run ``act(name, node)`` just before serve's next Binding is sent (once): a race it loses. The binder's
    threads must be serve's own (``binding.process: false``): the race is set up in this process."""
    assert isinstance(serve.binder, Binder)
    real = serve.binder.writer.create_namespaced_pod_bindings  # a pod with no claim: its Binding may go pipelined
    done: list[bool] = []

    def racing(bindings: list[tuple[str, str, Any]]) -> Any:
        if not done:
            done.append(True)
            name, _, body = bindings[0]
            act(name, body["target"]["name"])
        return real(bindings)

    serve.binder.writer.create_namespaced_pod_bindings = racing  # type: ignore[method-assign]


def test_a_bind_lost_to_another_scheduler_is_unreserved_and_the_pod_counted_where_it_runs(two_nodes: Cluster) -> None:
    cluster = two_nodes
    with cluster.serve(binding={"process": False}) as serve:
        eventually(serve.synced.is_set)

        def other_scheduler_wins(name: str, chosen: str) -> None:
            cluster.bind(name, "node-0001" if chosen == "node-0000" else "node-0000")

        _before_bind(serve, other_scheduler_wins)
        cluster.create(pod("race", "8", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "race"))
        # at least once: a refusal that reaches serve before the watch shows the pod bound elsewhere queues it
        # again, and its next Bind (after the back-off) is refused too
        eventually(lambda: serve.binder.refused >= 1)
        # 32 cores, 8 taken by the race's winner: three more 8-core pods fit, a fourth waits — so kubeflux neither
        # leaked the allocation it lost nor forgot the pod the other scheduler placed
        for name in ("p1", "p2", "p3", "p4"):
            cluster.create(pod(name, "8", run=None))
        cluster.wait_for(lambda pods: sum(_bound(pods, n) for n in ("p1", "p2", "p3", "p4")) == 3)
        cluster.wait_for(lambda pods: any(_waits(pods, n) for n in ("p1", "p2", "p3", "p4")))
        eventually(lambda: serve.bound == 3)  # counted once its binder thread has the reply


def test_a_pod_deleted_between_match_and_bind_leaks_nothing(cluster: Cluster) -> None:
    with cluster.serve(binding={"process": False}) as serve:
        eventually(serve.synced.is_set)

        def deleted(name: str, chosen: str) -> None:
            cluster.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)

        _before_bind(serve, deleted)
        cluster.create(pod("gone", "16", run=None))
        eventually(lambda: serve.binder.refused >= 1)
        cluster.create(pod("a", "8", run=None))
        cluster.create(pod("b", "8", run=None))
        cluster.wait_for(lambda pods: _bound(pods, "a", "b"))
        assert "gone" not in cluster.pods()


def test_bad_objects_get_failed_scheduling_naming_the_field_and_the_others_are_scheduled(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pods_type = cluster.server.store.registry.find("", "v1", "pods")
    assert pods_type is not None
    # the API server refuses an unparseable quantity; let one in, as an older server or a bug might
    monkeypatch.setattr(pods_type.strategy, "validate", lambda obj: [])
    monkeypatch.setattr(pods_type.strategy, "decode_error", lambda obj: "")
    cluster.create(pod("bad-cpu", "8 cores"))
    monkeypatch.undo()
    cluster.create(pod("bad-duration", "1", annotations={"kubeflux.io/duration": "forever"}))
    cluster.create(pod("good", "4"))
    with cluster.serve():
        cluster.wait_for(lambda pods: phase(pods["good"]) == "Succeeded")

        def notes() -> dict[str, str]:
            return {
                e["regarding"]["name"]: e.get("note", "")
                for e in cluster.events()
                if e.get("reason") == "FailedScheduling"
            }

        eventually(lambda: {"bad-cpu", "bad-duration"} <= set(notes()))
        assert "spec.containers[0].resources.requests.cpu" in notes()["bad-cpu"]
        assert "kubeflux.io/duration" in notes()["bad-duration"]
        pods = cluster.pods()
        assert not pods["bad-cpu"]["spec"].get("nodeName") and not pods["bad-duration"]["spec"].get("nodeName")
        # the server refuses any write to a pod it finds invalid, the condition too: the event is what is told
        assert condition(pods["bad-duration"])["reason"] == "Unschedulable"  # type: ignore[index]


def test_stopping_while_the_api_server_is_gone_ends_promptly(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path)
    serve = cluster.serve()
    try:
        for index in range(20):
            cluster.create(pod(f"wait-{index}", "16", run=None))  # one runs, the others are told why they wait
        cluster.wait_for(lambda pods: sum(bool(p["spec"].get("nodeName")) for p in pods.values()) == 1)
    finally:
        cluster.api.close()
        cluster.server.stop()
    stopping = threading.Thread(target=serve.stop)
    stopping.start()
    stopping.join(CEILING)
    assert not stopping.is_alive(), "serve did not stop without its API server"


def test_a_server_restarted_with_a_new_history_is_relisted_and_the_pods_it_lost_are_released(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server comes back on the same address with an older history (etcd restored from a backup, here a
    new simulated cluster): serve's watches fail with the server gone, its relist asks for versions the new one has
    not reached and gets 504 "Too large resource version", and it lists from scratch; the pods the new history does
    not have are released, the ones it has are placed."""
    caplog.set_level(logging.INFO, logger="kubeflux.serve")
    # As on the real server, a watch from a version the second server has not reached waits silently and only a
    # list says 504: serve's reflector relists after the failed watch (the server was gone), as client-go's does.
    first = start_cluster(tmp_path / "first", fresh_wait=0.3)
    second: Cluster | None = None
    try:
        with first.serve() as serve:
            for name in ("a", "b"):
                first.create(pod(name, "8", run=None))
            first.wait_for(lambda pods: _bound(pods, "a", "b"))
            for index in range(300):  # the first history runs well ahead of what the second one will reach
                first.core.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
            ahead = first.server.store.rv
            pods_reflector = serve.reflectors[-1]
            eventually(lambda: int(pods_reflector.version or 0) >= ahead)  # a bookmark brought it there
            relists = pods_reflector.relists
            port = first.server.port
            first.api.close()
            first.server.stop()
            second = start_cluster(tmp_path / "second", port=port, fresh_wait=0.3)
            assert second.server.store.rv < ahead
            second.create(pod("x", "8", run=None))
            second.wait_for(lambda pods: _bound(pods, "x"))
            assert pods_reflector.relists > relists
            assert any("504 Too large resource version" in record.getMessage() for record in caplog.records)
            eventually(lambda: {a.key for a in serve.cores[0].books.allocations.values()} == {"default/x"})
            for name in ("y", "z"):  # 16 cores, x holds 8: y fits, z waits (a and b left nothing behind)
                second.create(pod(name, "8", run=None))
            second.wait_for(lambda pods: _bound(pods, "y") and _waits(pods, "z"))
    finally:
        if second is not None:
            second.api.close()
            second.server.stop()
        else:
            first.api.close()
            first.server.stop()
