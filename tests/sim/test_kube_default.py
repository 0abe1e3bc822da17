"""The kube-scheduler-like baseline, driven directly through observe/schedule with hand-made pods and nodes."""

from __future__ import annotations

import pytest

from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Reject, Unschedulable
from kubeflux.scheduler.objects import Node, Pod, PodPhase, Taint
from kubeflux.sim.baselines.kube_default import QUEUE_CLASSIC, KubeDefaultScheduler, num_feasible_nodes_to_find

GI = 1024**3
NO_VICTIMS_1 = "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
"""DefaultPreemption's part of the message on one node where no pod is of lower priority."""


def make_node(name: str, cpu: int = 4000, memory: int = 16 * GI, **kwargs: object) -> Node:
    return Node(name, allocatable={"cpu": cpu, "memory": memory, "pods": 110}, **kwargs)  # type: ignore[arg-type]


def make_pod(name: str, cpu: int = 1000, memory: int = GI, t: float = 0.0, **kwargs: object) -> Pod:
    return Pod("default", name, uid=f"uid-{name}", creation_time=t, requests={"cpu": cpu, "memory": memory}, **kwargs)  # type: ignore[arg-type]


def add(scheduler: KubeDefaultScheduler, *objects: Node | Pod, now: float = 0.0) -> None:
    for obj in objects:
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), now)


def binds(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod.split("/")[1]: d.node for d in decisions if isinstance(d, Bind)}


def messages(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod.split("/")[1]: d.message for d in decisions if isinstance(d, Unschedulable | Reject)}


NUM_TO_FIND_CASES = [
    ("small-cluster-all", 50, 0, 50),
    ("hundred-all", 100, 0, 100),
    ("150-floor-100", 150, 0, 100),
    ("1000-adaptive-42pct", 1000, 0, 420),
    ("5000-adaptive-10pct", 5000, 0, 500),
    ("6000-min-5pct", 6000, 0, 300),
    ("explicit-30pct", 1000, 30, 300),
    ("explicit-100pct", 5000, 100, 5000),
]


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"), [c[1:] for c in NUM_TO_FIND_CASES], ids=[c[0] for c in NUM_TO_FIND_CASES]
)
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_least_allocated_prefers_the_emptiest_node_counting_other_schedulers_pods() -> None:
    s = KubeDefaultScheduler()
    add(s, make_node("busy"), make_node("half"), make_node("idle"))
    foreign = [
        make_pod("f1", 3000, scheduler_name="other", node_name="busy", phase=PodPhase.RUNNING),
        make_pod("f2", 2000, scheduler_name="other", node_name="half", phase=PodPhase.RUNNING),
    ]
    add(s, *foreign, make_pod("mine", 1000))
    assert s.schedule(0.0) == [Bind(pod="default/mine", uid="uid-mine", node="idle")]


def test_queue_order_priority_then_arrival_and_exact_message() -> None:
    s = KubeDefaultScheduler()
    add(s, make_node("n", cpu=2000))
    add(s, make_pod("early", 2000, t=1.0), make_pod("late-but-urgent", 2000, t=2.0, priority=10))
    decisions = s.schedule(3.0)
    assert binds(decisions) == {"late-but-urgent": "n"}
    assert messages(decisions) == {"early": f"0/1 nodes are available: 1 Insufficient cpu. {NO_VICTIMS_1}"}


def test_message_counts_each_filter_reason() -> None:
    s = KubeDefaultScheduler()
    add(
        s,
        make_node("cordoned", unschedulable=True),
        make_node("tainted", taints=(Taint("dedicated", "hpc"),)),
        make_node("wrong-label", labels={"disk": "hdd"}),
        make_node("small", cpu=500, labels={"disk": "ssd"}),
        make_node("small-too", cpu=500, memory=GI // 2, labels={"disk": "ssd"}),
    )
    add(s, make_pod("p", 1000, GI, node_selector={"disk": "ssd"}))
    assert messages(s.schedule(0.0)) == {
        # each node reports its first failing plugin; Go's string sort puts "2 …" after every "1 …"
        "p": "0/5 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu. "
        # every node fails where removing pods cannot help (a static filter, or more cpu than it has)
        "preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    }


def test_message_with_no_nodes() -> None:
    s = KubeDefaultScheduler()
    add(s, make_pod("p"))
    assert messages(s.schedule(0.0)) == {"p": "no nodes available to schedule pods"}


def test_retry_after_release_waits_for_back_off() -> None:
    s = KubeDefaultScheduler(queue=QUEUE_CLASSIC)  # v1.36 pops the backoff queue at once: test_kube_scheduler_v136
    add(s, make_node("n", cpu=1000))
    add(s, make_pod("first", 1000, t=0.0), make_pod("second", 1000, t=1.0))
    assert binds(s.schedule(0.0)) == {"first": "n"}
    assert s.next_wakeup(0.0) is None  # nothing can change without an event
    s.observe(ClusterEvent(EventKind.MODIFIED, make_pod("first", 1000, node_name="n", phase=PodPhase.SUCCEEDED)), 0.5)
    assert s.schedule(0.5) == []  # still backing off (1 s after the failure)
    assert s.next_wakeup(0.5) == 1.0
    assert binds(s.schedule(1.0)) == {"second": "n"}


def test_back_off_stays_capped_after_thousands_of_failures() -> None:
    # A pod that fails every cycle (a coscheduling gang that keeps cycling does this for days of virtual time)
    # must keep the 10 s cap: 2**1100 would overflow a float.
    s = KubeDefaultScheduler(queue=QUEUE_CLASSIC)
    add(s, make_node("n", cpu=1000), make_node("x", cpu=500), make_pod("big", 2000))
    now = 0.0
    for _ in range(1100):
        assert messages(s.schedule(now)) == {
            "big": "0/2 nodes are available: 2 Insufficient cpu. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
        }
        s.observe(ClusterEvent(EventKind.MODIFIED, make_node("x", cpu=500)), now)  # an event: a retry is due
        wake = s.next_wakeup(now)
        assert wake is not None and wake - now <= 10.0
        now = wake
    assert now == 1.0 + 2.0 + 4.0 + 8.0 + 10.0 * 1096


def test_retry_when_a_node_arrives() -> None:
    s = KubeDefaultScheduler()
    add(s, make_pod("p"))
    s.schedule(0.0)
    assert s.schedule(5.0) == []  # no event, no retry
    add(s, make_node("late"), now=5.0)
    assert binds(s.schedule(5.0)) == {"p": "late"}


def test_deleted_pending_pod_is_forgotten_and_deleted_pod_frees_its_node() -> None:
    s = KubeDefaultScheduler()
    add(s, make_node("n", cpu=1000))
    add(s, make_pod("bound", 1000, node_name="n", phase=PodPhase.RUNNING), make_pod("gone", 500))
    s.observe(ClusterEvent(EventKind.DELETED, make_pod("gone", 500)), 0.0)
    add(s, make_pod("waiting", 1000, t=1.0))
    assert messages(s.schedule(0.0)) == {"waiting": f"0/1 nodes are available: 1 Insufficient cpu. {NO_VICTIMS_1}"}
    s.observe(ClusterEvent(EventKind.DELETED, make_pod("bound", 1000, node_name="n")), 2.0)
    assert binds(s.schedule(2.0)) == {"waiting": "n"}


def test_terminating_pod_holds_its_node_until_removed_and_a_terminating_pending_pod_is_not_scheduled() -> None:
    # kube-scheduler's cache keeps a pod whose deletion is held (a finalizer, its grace period) until the object
    # goes: its cpu still counts. A pending pod being deleted is skipped (skipPodSchedule).
    s = KubeDefaultScheduler(preemption="never")
    add(s, make_node("n", cpu=1000))
    add(s, make_pod("old", 1000, node_name="n", phase=PodPhase.RUNNING), make_pod("doomed", 500, deleted=True))
    s.observe(
        ClusterEvent(EventKind.MODIFIED, make_pod("old", 1000, node_name="n", phase=PodPhase.RUNNING, deleted=True)),
        0.0,
    )
    add(s, make_pod("waiting", 1000, t=1.0))
    assert messages(s.schedule(0.0)) == {"waiting": "0/1 nodes are available: 1 Insufficient cpu."}
    s.observe(ClusterEvent(EventKind.DELETED, make_pod("old", 1000, node_name="n", deleted=True)), 2.0)
    assert binds(s.schedule(2.0)) == {"waiting": "n"}


def test_only_owned_pods_are_scheduled() -> None:
    s = KubeDefaultScheduler("kube-default")
    add(s, make_node("n"), make_pod("theirs"), make_pod("ours", scheduler_name="kube-default"))
    assert binds(s.schedule(0.0)) == {"ours": "n"}


def test_ties_go_to_the_first_node_in_scan_order_and_zones_interleave() -> None:
    s = KubeDefaultScheduler()
    zone = "topology.kubernetes.io/zone"
    add(
        s,
        make_node("a1", labels={zone: "a"}),
        make_node("a2", labels={zone: "a"}),
        make_node("b1", labels={zone: "b"}),
        make_node("b2", labels={zone: "b"}),
    )
    add(s, *(make_pod(f"p{i}", t=i) for i in range(4)))
    assert binds(s.schedule(0.0)) == {"p0": "a1", "p1": "b1", "p2": "a2", "p3": "b2"}


def test_sampling_starts_where_the_previous_cycle_stopped() -> None:
    s = KubeDefaultScheduler()
    add(s, *(make_node(f"n{i:03d}") for i in range(200)))  # 200 nodes: look for 100 feasible ones
    add(s, make_pod("p0", t=0), make_pod("p1", t=1))
    assert binds(s.schedule(0.0)) == {"p0": "n000", "p1": "n100"}


def test_seeded_tie_breaking_is_reproducible() -> None:
    def run(seed: int) -> dict[str, str]:
        s = KubeDefaultScheduler(seed=seed)
        add(s, *(make_node(f"n{i}") for i in range(8)), *(make_pod(f"p{i}", t=i) for i in range(4)))
        return binds(s.schedule(0.0))

    assert run(7) == run(7)
    assert len(set(run(7).values())) == 4


def test_seeded_tie_breaking_draws_anew_when_the_cluster_returns_to_a_state_it_was_in() -> None:
    s = KubeDefaultScheduler(seed=7)
    add(s, *(make_node(f"n{i}") for i in range(8)))
    chosen = []
    for i in range(6):
        pod = make_pod(f"p{i}", t=i)
        add(s, pod, now=float(i))
        [node] = binds(s.schedule(float(i))).values()
        chosen.append(node)
        pod.node_name, pod.phase = node, PodPhase.SUCCEEDED
        s.observe(ClusterEvent(EventKind.MODIFIED, pod), float(i))  # the cluster is empty again
    assert len(set(chosen)) > 1


def test_pods_without_requests_are_scored_as_100m_and_200mi() -> None:
    s = KubeDefaultScheduler()
    add(s, make_node("n0", cpu=1000, memory=GI), make_node("n1", cpu=1000, memory=GI))
    add(s, Pod("default", "empty-0", uid="e0"), Pod("default", "empty-1", uid="e1", creation_time=1.0))
    assert binds(s.schedule(0.0)) == {"empty-0": "n0", "empty-1": "n1"}


def test_reject_never_fits_option() -> None:
    s = KubeDefaultScheduler(reject_never_fits=True)
    add(s, make_node("n", cpu=2000), make_pod("huge", 8000), make_pod("later", 2000, t=1.0))
    add(s, make_pod("filler", 2000, scheduler_name="x", node_name="n", phase=PodPhase.RUNNING))
    decisions = s.schedule(0.0)
    assert isinstance(decisions[0], Reject)
    assert decisions[0].message.endswith("No node could ever host the pod, even empty.")
    assert isinstance(decisions[1], Unschedulable)  # "later" fits an empty node: not rejected


def test_scale_5000_nodes_10000_pods() -> None:
    """The SchedulingBasic shape of kube-scheduler's scheduler_perf; a few seconds in pure Python + NumPy."""
    s = KubeDefaultScheduler()
    add(s, *(make_node(f"n{i:04d}", cpu=32000, memory=128 * GI) for i in range(5000)))
    add(s, *(make_pod(f"p{j:05d}", 1000 + (j % 4) * 500, (2 + j % 3) * GI, t=j) for j in range(10000)))
    decisions = s.schedule(0.0)
    assert sum(isinstance(d, Bind) for d in decisions) == 10000


def test_end_to_end_through_the_simulation_driver() -> None:
    driver = pytest.importorskip("kubeflux.sim.driver")
    from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

    nodes = [make_node(f"n{i}", cpu=2000) for i in range(2)]
    jobs = [
        WorkloadJob(
            id=f"j{i}",
            submit_time=float(i),
            kind=JobKind.POD,
            name=f"j{i}",
            pods=[PodTemplate(name=f"j{i}", requests={"cpu": 2000}, run_time=10.0)],
        )
        for i in range(3)
    ]
    scheduler = KubeDefaultScheduler()
    record = driver.simulate(Workload("w", jobs), nodes, {scheduler.name: scheduler})
    starts = {job.job_id: job.starting_time for job in record.jobs}
    assert starts == {"j0": 0.0, "j1": 1.0, "j2": 10.0}  # j2 waits for j0's node, retried on its release
