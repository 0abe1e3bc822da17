"""The simulated cluster against Kubernetes' documented pod, Job and node behaviour (KWOK's stages)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, ClusterEvent
from kubeflux.scheduler.objects import CPU, MEMORY, WALLTIME_ANNOTATION, Node, Pod, PodPhase
from kubeflux.sim.clock import EventLoop, Priority
from kubeflux.sim.cluster import Cluster, Lifecycle
from kubeflux.sim.podstatus import pod_conditions, pod_status
from kubeflux.sim.workloads.model import JobKind, PodTemplate, WorkloadJob


def make_cluster(nodes: int = 2, cores: int = 4, lifecycle: Lifecycle | None = None) -> Cluster:
    node_list = [Node(f"n{i}", allocatable={CPU: cores * 1000, MEMORY: 8 * 2**30}) for i in range(nodes)]
    return Cluster(EventLoop(), node_list, lifecycle, primary_scheduler="test", keep_events=True)


def lone_pod(name: str, run_time: float | None = 100.0, exit_code: int = 0, **extra: object) -> WorkloadJob:
    template = PodTemplate(name=name, requests={CPU: 1000}, run_time=run_time, exit_code=exit_code)
    for key, value in extra.items():
        setattr(template, key, value)
    return WorkloadJob(id=name, submit_time=0.0, kind=JobKind.POD, name=name, pods=[template])


def conditions(cluster: Cluster, key: str) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in pod_conditions(cluster.pod(key))}


def test_a_pod_goes_pending_bound_running_succeeded_with_kubelet_conditions() -> None:
    cluster = make_cluster(lifecycle=Lifecycle(start_delay=5.0))
    cluster.submit(lone_pod("p"))
    sp = cluster.pod("default/p")
    assert sp.pod.phase is PodPhase.PENDING and pod_conditions(sp) == []

    cluster.mark_unschedulable("default/p", sp.pod.uid, "0/2 nodes are available: 2 Insufficient cpu.")
    assert conditions(cluster, "default/p") == {"PodScheduled": ("False", "Unschedulable")}
    assert cluster.event_counts["FailedScheduling"] == 1

    cluster.loop.run(until=10.0)
    assert cluster.bind("default/p", sp.pod.uid, "n1") == ""
    assert sp.pod.phase is PodPhase.PENDING and sp.pod.node_name == "n1"
    assert conditions(cluster, "default/p") == {
        "PodScheduled": ("True", ""),
        "Initialized": ("True", ""),
        "ContainersReady": ("False", "ContainersNotReady"),
        "Ready": ("False", "ContainersNotReady"),
    }
    assert pod_status(sp)["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}

    cluster.loop.run(until=15.0)  # the start delay (KWOK's pod-ready stage) has passed
    assert str(sp.pod.phase) == "Running"
    assert conditions(cluster, "default/p")["Ready"] == ("True", "")
    assert pod_status(sp)["containerStatuses"][0]["state"] == {"running": {"startedAt": 15.0}}

    cluster.loop.run()
    assert str(sp.pod.phase) == "Succeeded" and cluster.loop.now == 115.0
    assert conditions(cluster, "default/p")["Ready"] == ("False", "PodCompleted")
    terminated = pod_status(sp)["containerStatuses"][0]["state"]["terminated"]
    assert terminated == {"exitCode": 0, "reason": "Completed", "startedAt": 15.0, "finishedAt": 115.0}
    ready = next(c for c in pod_conditions(sp) if c["type"] == "Ready")
    assert ready["lastTransitionTime"] == 115.0


def test_a_non_zero_exit_code_ends_failed_with_reason_error() -> None:
    cluster = make_cluster()
    cluster.submit(lone_pod("segfault", run_time=30.0, exit_code=139))
    sp = cluster.pod("default/segfault")
    cluster.bind(sp.pod.key, sp.pod.uid, "n0")
    cluster.loop.run()
    assert sp.pod.phase is PodPhase.FAILED
    assert pod_status(sp)["containerStatuses"][0]["state"]["terminated"]["reason"] == "Error"
    assert sp.exit_code == 139
    assert cluster.job_records()[0].final_state == "COMPLETED_FAILED"


def test_active_deadline_seconds_kills_the_pod_with_deadline_exceeded() -> None:
    cluster = make_cluster()
    cluster.submit(lone_pod("slow", run_time=500.0, active_deadline_seconds=60.0))
    sp = cluster.pod("default/slow")
    cluster.bind(sp.pod.key, sp.pod.uid, "n0")
    cluster.loop.run()
    assert sp.pod.phase is PodPhase.FAILED and sp.finished_at == 60.0
    assert pod_status(sp)["reason"] == "DeadlineExceeded"
    assert cluster.free("n0")[CPU] == 4000  # resources come back


def test_kwok_complete_annotation_sets_the_run_time() -> None:
    cluster = make_cluster()
    job = lone_pod("kwok", run_time=None, annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "1m30s"})
    cluster.submit(job)
    sp = cluster.pod("default/kwok")
    assert sp.pod.annotations[WALLTIME_ANNOTATION] == "90"
    cluster.bind(sp.pod.key, sp.pod.uid, "n0")
    cluster.loop.run()
    assert sp.pod.phase is PodPhase.SUCCEEDED and sp.finished_at == 90.0


def test_a_bad_kwok_annotation_rejects_the_job_and_names_the_field() -> None:
    cluster = make_cluster()
    cluster.submit(lone_pod("bad", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "soon"}))
    assert "pod-complete.stage.kwok.x-k8s.io/delay" in cluster.problems[0]
    assert cluster.job_records()[0].final_state == "REJECTED"


def test_binding_to_a_full_node_fails_the_pod_out_of_cpu() -> None:
    cluster = make_cluster(nodes=1, cores=1)
    cluster.submit(lone_pod("a"))
    cluster.submit(lone_pod("b"))
    a, b = cluster.pod("default/a"), cluster.pod("default/b")
    cluster.bind(a.pod.key, a.pod.uid, "n0")
    cluster.bind(b.pod.key, b.pod.uid, "n0")
    assert b.pod.phase is PodPhase.FAILED and pod_status(b)["reason"] == "OutOfcpu"
    assert a.pod.phase is PodPhase.RUNNING


def test_binding_an_unknown_pod_or_node_is_refused() -> None:
    cluster = make_cluster()
    cluster.submit(lone_pod("p"))
    assert "not found" in cluster.bind("default/nope", "", "n0")
    assert "not found" in cluster.bind("default/p", "", "n9")


def test_a_decision_naming_another_uid_than_the_pods_changes_nothing() -> None:
    """A Bind or an Unschedulable for a pod of that name but another uid (a pod deleted and made again) is refused
    as the API server refuses it, whether the pod is looked up by key or handed over by the driver."""
    cluster = make_cluster()
    cluster.submit(lone_pod("p"))
    sp = cluster.pod("default/p")
    assert cluster.bind("default/p", "old-uid", "n0") == "pods 'default/p' not found"
    assert cluster.bind_pod(sp, "old-uid", "n0") == "pods 'default/p' not found"
    cluster.mark_unschedulable("default/p", "old-uid", "0/1 nodes are available.", expected_start=60.0)
    cluster.mark_pod_unschedulable(sp, "old-uid", "0/1 nodes are available.", 60.0)
    assert sp.bound_at is None and not sp.pod.node_name and sp.unschedulable_message == ""
    assert EXPECTED_START_ANNOTATION not in sp.pod.annotations
    assert cluster.bind_pod(sp, sp.pod.uid, "n0") == "" and sp.pod.node_name == "n0"


def job_with_failing_pods(backoff_limit: int) -> WorkloadJob:
    template = PodTemplate(name="retry", requests={CPU: 1000}, run_time=5.0, exit_code=1)
    return WorkloadJob(
        id="1", submit_time=0.0, kind=JobKind.JOB, name="retry", pods=[template], backoff_limit=backoff_limit
    )


def run_binding_everything(cluster: Cluster) -> list[tuple[float, str]]:
    """Bind every new pod at once to n0 (a trivial scheduler) and record (time, pod) creations."""
    created: list[tuple[float, str]] = []

    def bind(key: str) -> None:
        cluster.bind(key, "", "n0")

    def observe(event: ClusterEvent, now: float) -> None:
        if event.kind == "ADDED" and isinstance(event.obj, Pod):
            created.append((now, event.obj.name))
            cluster.loop.schedule(now, Priority.STAGE, bind, event.obj.key)

    cluster.subscribe(observe)
    return created


def test_job_retries_failed_pods_with_back_off_10s_doubling_until_backoff_limit() -> None:
    cluster = make_cluster()
    created = run_binding_everything(cluster)
    cluster.submit(job_with_failing_pods(backoff_limit=3))
    cluster.loop.run()
    # pod fails 5 s after start; replacements after 10 s, 20 s, 40 s; the 4th failure exceeds backoffLimit 3
    assert created == [(0.0, "retry-0"), (15.0, "retry-1"), (40.0, "retry-2"), (85.0, "retry-3")]
    record = cluster.job_records()[0]
    assert record.final_state == "COMPLETED_FAILED"
    assert record.finish_time == 90.0 and record.pods == 4 and record.attempts == 4


def test_job_back_off_is_capped_at_six_minutes() -> None:
    cluster = make_cluster()
    created = run_binding_everything(cluster)
    cluster.submit(job_with_failing_pods(backoff_limit=8))
    cluster.loop.run()
    gaps = [b[0] - a[0] - 5.0 for a, b in pairwise(created)]
    assert gaps == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 360.0, 360.0]


def test_job_runs_completions_with_at_most_parallelism_pods() -> None:
    cluster = make_cluster()
    created = run_binding_everything(cluster)
    template = PodTemplate(name="w", requests={CPU: 1000}, run_time=10.0)
    cluster.submit(
        WorkloadJob(id="j", submit_time=0, kind=JobKind.JOB, name="w", pods=[template], completions=5, parallelism=2)
    )
    cluster.loop.run()
    assert [t for t, _ in created] == [0.0, 0.0, 10.0, 10.0, 20.0]
    record = cluster.job_records()[0]
    assert record.final_state == "COMPLETED_SUCCESSFULLY" and record.finish_time == 30.0


def test_a_node_going_down_fails_and_deletes_its_pods_and_comes_back() -> None:
    cluster = make_cluster()
    events: list[tuple[str, str]] = []
    cluster.subscribe(lambda e, now: events.append((str(e.kind), type(e.obj).__name__)))
    cluster.submit(lone_pod("victim"))
    sp = cluster.pod("default/victim")
    cluster.bind(sp.pod.key, sp.pod.uid, "n1")
    cluster.loop.run(until=20.0)
    cluster.node_down("n1")
    assert not cluster.nodes[1].ready
    assert sp.pod.phase is PodPhase.FAILED and sp.pod.deleted and pod_status(sp)["reason"] == "NodeLost"
    assert ("DELETED", "Pod") in events
    assert cluster.free("n1")[CPU] == 4000
    cluster.node_up("n1")
    assert cluster.nodes[1].ready
    assert cluster.job_records()[0].final_state == "COMPLETED_KILLED"


def test_start_jitter_is_drawn_from_the_seed() -> None:
    def delays(seed: int) -> list[float]:
        cluster = make_cluster(lifecycle=Lifecycle(start_delay=1.0, start_jitter=5.0, seed=seed))
        for n in range(20):
            cluster.submit(lone_pod(f"p{n}"))
        return [cluster.pod(f"default/p{n}").start_delay for n in range(20)]

    assert delays(7) == delays(7)
    assert delays(7) != delays(8)
    assert all(1.0 <= d <= 5.0 for d in delays(7))


def test_failure_injection_fails_the_given_fraction_of_pods() -> None:
    cluster = make_cluster(nodes=50, cores=4, lifecycle=Lifecycle(pod_failure_fraction=0.3, seed=1))
    for n in range(200):
        cluster.submit(lone_pod(f"p{n}"))
    for n in range(200):
        sp = cluster.pod(f"default/p{n}")
        cluster.bind(sp.pod.key, sp.pod.uid, f"n{n % 50}")
    cluster.loop.run()
    failed = sum(1 for n in range(200) if cluster.pod(f"default/p{n}").pod.phase is PodPhase.FAILED)
    assert 40 <= failed <= 80
    assert all(cluster.pod(f"default/p{n}").exit_code in (0, 139) for n in range(200))


def test_lifecycle_rejects_a_bad_fraction() -> None:
    with pytest.raises(ValueError, match="pod_failure_fraction"):
        Lifecycle(pod_failure_fraction=1.5)


def test_nodes_join_leave_and_change_mid_run_with_their_watch_events() -> None:
    """``add_node``, ``remove_node`` and ``update_node`` emit ADDED, DELETED and MODIFIED; a removed node's pods
    fail (NodeLost) and are deleted, and a bind to it is refused; allocatable changes what the kubelet admits."""
    cluster = make_cluster(nodes=1, cores=2)
    seen: list[tuple[str, str]] = []
    cluster.subscribe(lambda event, now: seen.append((event.kind.value, getattr(event.obj, "name", ""))))
    cluster.add_node(Node("n9", allocatable={CPU: 1000, MEMORY: 2**30}))
    assert [node.name for node in cluster.current_nodes()] == ["n0", "n9"]
    cluster.submit(lone_pod("a"))
    cluster.submit(lone_pod("b"))
    a, b = cluster.pod("default/a"), cluster.pod("default/b")
    assert cluster.bind("default/a", a.pod.uid, "n9") == ""

    cluster.update_node("n9", allocatable={CPU: 2000, MEMORY: 2**30}, labels={"zone": "b"})
    assert cluster.free("n9")[CPU] == 1000
    assert cluster.current_nodes()[1].labels == {"zone": "b"}
    assert cluster.bind("default/b", b.pod.uid, "n9") == ""  # room made by the resize
    assert b.pod.phase is PodPhase.RUNNING

    cluster.remove_node("n9")
    assert a.pod.deleted and a.reason == "NodeLost" and b.pod.deleted
    assert [node.name for node in cluster.current_nodes()] == ["n0"]
    assert cluster.free("n0")[CPU] == 2000
    assert ("ADDED", "n9") in seen and ("MODIFIED", "n9") in seen and seen[-1] == ("DELETED", "n9")
    with pytest.raises(ValueError, match="allocatable"):
        cluster.update_node("n0", allocatable={CPU: -1})


@pytest.mark.parametrize("keep_events", [True, False], ids=["events kept", "counted only"])
def test_events_are_counted_per_reason_in_the_order_reasons_first_came(keep_events: bool) -> None:
    nodes = [Node("n0", allocatable={CPU: 1000, MEMORY: 2**30})]
    cluster = Cluster(EventLoop(), nodes, primary_scheduler="test", keep_events=keep_events)
    cluster.submit(lone_pod("a"))
    cluster.submit(lone_pod("b"))
    a, b = cluster.pod("default/a"), cluster.pod("default/b")
    assert cluster.bind("default/a", a.pod.uid, "n0") == ""
    cluster.mark_unschedulable("default/b", b.pod.uid, "0/1 nodes are available: 1 Insufficient cpu.")
    assert cluster.event_counts == {"Scheduled": 1, "FailedScheduling": 1}
    cluster.mark_unschedulable("default/b", b.pod.uid, "still no room")
    cluster.mark_unschedulable("default/b", b.pod.uid, "still no room")  # unchanged: counted all the same
    cluster.mark_unschedulable("default/a", a.pod.uid, "bound already")  # ignored: the pod is bound
    assert cluster.bind("default/b", b.pod.uid, "n1") != ""  # no such node: refused, not counted
    assert list(cluster.event_counts.items()) == [("Scheduled", 1), ("FailedScheduling", 3)]
    assert len(cluster.kube_events) == (4 if keep_events else 0)
