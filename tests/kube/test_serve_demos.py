"""The seed's demos end to end through the API: 4 pods of 8 cores on one 16-core node, scheduled by ``serve``.

What Fluence's informer demo showed (seed 000): two pods run, two wait; when the first two complete — or, in the
second demo, segfault — their cores are released and the waiting ones are bound. Here the waiting ones must also
say why (``PodScheduled=False/Unschedulable``, a ``FailedScheduling`` event), and a pod of the default scheduler on
the same node is counted. Checked on the cluster's record afterwards (bind and end times), never on a race.
"""

from __future__ import annotations

from typing import Any

from kubeflux.apiobjects.manifests import format_timestamp, parse_timestamp

from .conftest import Cluster, condition, ended, eventually, no_allocations, phase, pod


def _interval(p: dict[str, Any]) -> tuple[float, float]:
    """When the pod held its node: from its bind to its container's end (simulated seconds)."""
    scheduled = condition(p)
    assert scheduled is not None and scheduled["status"] == "True", p["status"]
    start = parse_timestamp(scheduled["lastTransitionTime"])
    terminated = (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated")
    end = parse_timestamp(terminated["finishedAt"]) if terminated else float("inf")
    return start, end


def _most_cores_held(pods: dict[str, dict[str, Any]], cores: dict[str, int]) -> int:
    """The most cores the pods held together at any moment, from their bind and end times."""
    changes: list[tuple[float, int]] = []
    for name, p in pods.items():
        start, end = _interval(p)
        changes += [(start, cores[name]), (end, -cores[name])]
    held = most = 0
    for _, change in sorted(changes, key=lambda c: (c[0], c[1])):  # an end before a start at the same second
        held += change
        most = max(most, held)
    return most


def _failed_scheduling(cluster: Cluster) -> dict[str, list[str]]:
    notes: dict[str, list[str]] = {}
    for event in cluster.events():
        if event.get("reason") == "FailedScheduling":
            notes.setdefault(event["regarding"]["name"], []).append(event.get("note", ""))
    return notes


def _end(cluster: Cluster, name: str, exit_code: int) -> None:
    """The pod's container exits with ``exit_code``, as its kubelet reports it (the test decides when)."""
    stamp = format_timestamp(float(int(cluster.server.clock())))  # whole seconds, as the kubelet and binding stamp
    terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error", "finishedAt": stamp}
    status = {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": "pi",
                "image": "perl:5.34",
                "ready": False,
                "restartCount": 0,
                "imageID": "",
                "state": {"terminated": terminated},
            }
        ],
    }
    cluster.core.patch_namespaced_pod_status(name, "default", {"status": status}, _preload_content=False)


def _run_demo(cluster: Cluster, exit_code: int) -> dict[str, dict[str, Any]]:
    names = [f"pi-{index}" for index in range(4)]
    with cluster.serve() as serve:
        for name in names[:2]:  # the first two run until the test ends them
            cluster.create(pod(name, "8", run=None))
        cluster.wait_for(lambda pods: all(phase(pods[n]) == "Running" for n in names[:2]))
        for name in names[2:]:
            cluster.create(pod(name, "8", exit_code=exit_code or None))
        cluster.wait_for(lambda pods: all(_waits(pods[n]) for n in names[2:]))  # two wait, and say why
        for name in names[:2]:
            _end(cluster, name, exit_code)
        cluster.wait_for(lambda pods: len(pods) == 4 and ended(pods))
        eventually(no_allocations(serve))
    pods = cluster.pods()
    assert _most_cores_held(pods, dict.fromkeys(names, 8)) == 16
    waited = _failed_scheduling(cluster)
    assert sorted(waited) == ["pi-2", "pi-3"], waited
    assert all("Insufficient cpu" in note for notes in waited.values() for note in notes)
    first_end = min(_interval(pods[n])[1] for n in ("pi-0", "pi-1"))
    assert all(_interval(pods[n])[0] >= first_end for n in ("pi-2", "pi-3"))
    assert serve.bound == 4 and serve.binder.refused == 0
    return pods


def _waits(p: dict[str, Any]) -> bool:
    scheduled = condition(p)
    return scheduled is not None and scheduled["reason"] == "Unschedulable" and not p["spec"].get("nodeName")


def test_demo_one_two_run_two_wait_and_are_bound_when_the_first_two_complete(cluster: Cluster) -> None:
    pods = _run_demo(cluster, exit_code=0)
    assert {phase(p) for p in pods.values()} == {"Succeeded"}


def test_demo_two_pods_that_segfault_release_their_cores_too(cluster: Cluster) -> None:
    pods = _run_demo(cluster, exit_code=139)
    assert {phase(p) for p in pods.values()} == {"Failed"}


def test_a_waiting_pod_says_why_until_it_is_bound(cluster: Cluster) -> None:
    for name in ("a", "b"):  # they run until deleted, planned for an hour
        cluster.create(pod(name, "8", run=None, annotations={"kubeflux.io/duration": "3600"}))
    cluster.create(pod("c", "8"))
    with cluster.serve():
        cluster.wait_for(lambda pods: (condition(pods["c"]) or {}).get("reason") == "Unschedulable")
        waiting = cluster.pods()["c"]
        assert condition(waiting)["status"] == "False"  # type: ignore[index]
        assert "Insufficient cpu" in condition(waiting)["message"]  # type: ignore[index]
        assert not waiting["spec"].get("nodeName")
        # EASY: the head of the queue holds a reservation, and the pod says when it expects to start
        cluster.wait_for(lambda pods: "kubeflux.io/expected-start" in (pods["c"]["metadata"].get("annotations") or {}))
        cluster.core.delete_namespaced_pod("a", "default")
        cluster.wait_for(lambda pods: phase(pods["c"]) == "Succeeded")
        assert "kubeflux.io/expected-start" not in (cluster.pods()["c"]["metadata"].get("annotations") or {})
        assert cluster.pods()["b"]["spec"]["nodeName"] == "node-0000"


def test_a_default_scheduler_pod_on_the_node_is_counted(cluster: Cluster) -> None:
    cluster.create(pod("web", "8", scheduler="default-scheduler", run=None))
    cluster.bind("web", "node-0000")  # placed by another scheduler: 8 of the 16 cores are taken
    names = [f"pi-{index}" for index in range(4)]
    for name in names:
        cluster.create(pod(name, "8"))
    with cluster.serve():
        cluster.wait_for(lambda pods: all(phase(pods[n]) == "Succeeded" for n in names))
    pods = cluster.pods()
    assert _most_cores_held(pods, {"web": 8, **dict.fromkeys(names, 8)}) == 16
    assert phase(pods["web"]) == "Running"


def test_allocations_are_annotated_on_the_bound_pods_for_recovery(cluster: Cluster) -> None:
    cluster.create(pod("a", "8", run=None))
    with cluster.serve() as serve:
        cluster.wait_for(lambda pods: phase(pods["a"]) == "Running")
        eventually(lambda: serve.bound == 1)  # counted once its binder thread has the reply
    annotations = cluster.pods()["a"]["metadata"]["annotations"]
    assert "kubeflux.io/allocation" in annotations
    # a new serve (a restart) recovers the allocation: the node has 8 cores left, so of two 8-core pods one waits
    cluster.create(pod("b", "8", run=None))
    cluster.create(pod("c", "8", run=None))
    with cluster.serve() as restarted:
        cluster.wait_for(
            lambda pods: bool(pods["b"]["spec"].get("nodeName")) or bool(pods["c"]["spec"].get("nodeName"))
        )
        cluster.wait_for(
            lambda pods: any((condition(pods[n]) or {}).get("reason") == "Unschedulable" for n in ("b", "c"))
        )
        assert restarted.bound == 1


def test_a_burst_of_more_pods_than_the_queue_depth_is_all_bound(cluster: Cluster) -> None:
    for index in range(40):
        cluster.create(pod(f"small-{index}", "100m", run=None))
    with cluster.serve(schedulers=[{"queueDepth": 8}]) as serve:
        cluster.wait_for(lambda pods: all(p["spec"].get("nodeName") for p in pods.values()))
        eventually(lambda: serve.bound == 40)  # the watch may show the last bind before its binder thread counts it
        assert serve.binder.refused == 0
