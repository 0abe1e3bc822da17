"""kube-scheduler v1.36's queue in the kube-default baseline (``queue="v1.36"``), its own gang scheduling
(``kube-gang``), and the simulated cluster's Job-controller delay and pod-end jitter: what the fidelity page measured
on the real control plane, checked case by case."""

from __future__ import annotations

from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Unschedulable
from kubeflux.scheduler.objects import GPU, POD_GROUP_LABEL, Node, Pod, PodGroup, PodPhase
from kubeflux.sim.baselines import available, create
from kubeflux.sim.baselines.kube_default import QUEUE_CLASSIC, QUEUE_V136, KubeDefaultScheduler
from kubeflux.sim.baselines.kube_gang import KubeGangScheduler
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

GI = 1024**3


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, allocatable={"cpu": 5000, "memory": 256 * GI, "pods": 110, GPU: gpus})


def pod(name: str, t: float = 0.0, node_name: str = "", group: str | None = None, **kwargs: object) -> Pod:
    labels = {POD_GROUP_LABEL: group} if group else {}
    return Pod(
        "default",
        name,
        uid=f"uid-{name}",
        creation_time=t,
        requests={"cpu": 10, GPU: 8},
        node_name=node_name,
        labels=labels,
        **kwargs,  # type: ignore[arg-type]
    )


def add(scheduler: KubeDefaultScheduler, *objects: Node | Pod | PodGroup, now: float = 0.0) -> None:
    for obj in objects:
        scheduler.observe(ClusterEvent(EventKind.ADDED, obj), now)


def end(scheduler: KubeDefaultScheduler, name: str, node_name: str, now: float) -> None:
    ended = pod(name, node_name=node_name, phase=PodPhase.SUCCEEDED)
    scheduler.observe(ClusterEvent(EventKind.MODIFIED, ended), now)


def binds(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod.split("/")[1]: d.node for d in decisions if isinstance(d, Bind)}


def failed(decisions: list[Decision]) -> list[str]:
    return [d.pod.split("/")[1] for d in decisions if isinstance(d, Unschedulable)]


def test_kube_default_runs_the_classic_queue_and_v136_is_an_option() -> None:
    made = create("kube-default")
    assert isinstance(made, KubeDefaultScheduler) and made.queue == QUEUE_CLASSIC
    assert KubeDefaultScheduler(queue=QUEUE_V136).queue == QUEUE_V136
    assert "kube-gang" in available()


def test_a_release_retries_a_pod_still_backing_off_at_once_the_backoff_queue_popped_when_nothing_is_active() -> None:
    s = KubeDefaultScheduler(queue=QUEUE_V136)
    add(s, node("n"), pod("running", node_name="n"), pod("waiting"))
    assert failed(s.schedule(0.0)) == ["waiting"]
    assert s.next_wakeup(0.0) is None  # it waits for an event, never for a timer
    end(s, "running", "n", 0.5)  # backing off until 1 s, but nothing else is active: SchedulerPopFromBackoffQ
    assert binds(s.schedule(0.5)) == {"waiting": "n"}


def test_at_a_release_the_pod_that_failed_fewer_times_goes_first_each_failure_restarting_the_back_off() -> None:
    """``old`` failed three times (back-off 1, 2, 4 s from its last failure at 0.4 s: expiry 4 s); ``young``, created
    at 1 s, once (expiry 2 s). When a node frees at 1.5 s both are backing off: the backoff queue pops the soonest
    expiry, ``young``, though ``old`` came first."""
    s = KubeDefaultScheduler(queue=QUEUE_V136)
    add(s, node("n"), pod("running", node_name="n"), pod("old", t=0.0))
    for now in (0.0, 0.2, 0.4):
        if now:
            s.observe(ClusterEvent(EventKind.MODIFIED, node("n")), now)  # an event that does not help
        assert failed(s.schedule(now)) == ["old"]
    add(s, pod("young", t=1.0), now=1.0)
    assert failed(s.schedule(1.0)) == ["young"]
    end(s, "running", "n", 1.5)
    decisions = s.schedule(1.5)
    assert binds(decisions) == {"young": "n"} and failed(decisions) == ["old"]


def test_a_pod_done_backing_off_goes_before_one_still_backing_off_whole_seconds_deciding() -> None:
    """``a`` failed at 0.2 s (expiry 1 s: done from the window of 2 s on), ``b`` at 1.3 s (expiry 2 s). At 2.1 s ``a``
    is in the active queue and takes the node; at 1.9 s both were still backing off, and ``a``'s expiry is sooner."""
    for now, winner in ((2.1, "a"), (1.9, "a")):
        s = KubeDefaultScheduler(queue=QUEUE_V136)
        add(s, node("n"), pod("running", node_name="n"), pod("a", t=0.2), now=0.2)
        assert failed(s.schedule(0.2)) == ["a"]
        add(s, pod("b", t=1.3), now=1.3)
        assert failed(s.schedule(1.3)) == ["b"]
        end(s, "running", "n", now)
        assert binds(s.schedule(now)) == {winner: "n"}


def test_an_event_that_comes_while_the_queue_is_worked_through_can_split_a_pair() -> None:
    """Two nodes run ``x-0`` and ``x-1``; the pair ``p-0``, ``p-1`` and the younger ``q`` and ``r`` wait, done backing
    off. Scheduling cycles of 1 ms: when both nodes free at one instant, the pair takes them in its first two
    cycles. When the second frees 1.5 ms after the first, ``p-1`` has failed meanwhile (its back-off restarted,
    it is in the backoff queue), and ``q``, not yet tried, is still in the active queue: it takes the node."""

    def waiting() -> KubeDefaultScheduler:
        s = KubeDefaultScheduler(queue=QUEUE_V136, cycle_seconds=0.001)
        add(s, node("n0"), node("n1"), pod("x-0", node_name="n0"), pod("x-1", node_name="n1"))
        add(s, pod("p-0", t=0.0), pod("p-1", t=0.0), pod("q", t=0.2), pod("r", t=0.3), now=0.3)
        now, told = 0.3, []
        while (wake := s.next_wakeup(now)) is not None or not told:
            told += failed(s.schedule(now))
            now = wake if wake is not None else now
        assert sorted(told) == ["p-0", "p-1", "q", "r"]
        return s

    def run(s: KubeDefaultScheduler, ends: dict[str, float]) -> dict[str, float]:
        started: dict[str, float] = {}
        now = 2.5
        for name, at in sorted(ends.items(), key=lambda item: item[1]):
            while (wake := s.next_wakeup(now)) is not None and wake < at:
                started |= {pod: wake for pod in binds(s.schedule(wake))}
                now = wake
            end(s, name, "n" + name[-1], at)
            now = at
            started |= {pod: at for pod in binds(s.schedule(at))}
        while (wake := s.next_wakeup(now)) is not None and len(started) < 2:
            started |= {pod: wake for pod in binds(s.schedule(wake))}
            now = wake
        return started

    assert set(run(waiting(), {"x-0": 2.5, "x-1": 2.5})) == {"p-0", "p-1"}
    assert set(run(waiting(), {"x-0": 2.5, "x-1": 2.5015})) == {"p-0", "q"}


def gang(s: KubeGangScheduler, name: str, t: float, size: int = 2) -> None:
    s.observe(ClusterEvent(EventKind.ADDED, PodGroup("default", name, min_member=size, creation_time=t)), t)
    add(s, *(pod(f"{name}-{i}", t=t, group=name) for i in range(size)), now=t)


def test_a_gang_is_placed_whole_or_not_at_all_and_a_blocked_gang_is_retried_at_every_event() -> None:
    s = KubeGangScheduler(seed=1)
    add(s, node("n0"), node("n1"), node("n2"))
    gang(s, "a", 0.0)
    gang(s, "b", 0.0)
    decisions = s.schedule(0.0)
    assert set(binds(decisions)) == {"a-0", "a-1"} and sorted(failed(decisions)) == ["b-0", "b-1"]
    s.observe(ClusterEvent(EventKind.MODIFIED, node("n2")), 1.0)  # the busy loop: retried, still one node short
    assert sorted(failed(s.schedule(1.0))) == ["b-0", "b-1"]
    end(s, "a-0", binds(decisions)["a-0"], 2.0)
    assert set(binds(s.schedule(2.0))) == {"b-0", "b-1"}


def test_freed_room_goes_to_a_blocked_gang_drawn_by_the_seed_not_the_oldest() -> None:
    def first_started(seed: int) -> str:
        s = KubeGangScheduler(seed=seed)
        add(s, node("n0"), node("n1"))
        for index, name in enumerate(("g0", "g1", "g2", "g3", "g4")):
            gang(s, name, float(index))
            s.schedule(float(index))
        end(s, "g0-0", "n0", 10.0)
        end(s, "g0-1", "n1", 10.0)
        return sorted(binds(s.schedule(10.0)))[0].split("-")[0]

    drawn = {first_started(seed) for seed in range(12)}
    assert first_started(3) == first_started(3)  # deterministic per seed
    assert len(drawn) > 1 and drawn <= {"g1", "g2", "g3", "g4"}


def _job(index: int, run: float) -> WorkloadJob:
    template = PodTemplate(name=f"j{index}", requests={"cpu": 10, GPU: 8}, run_time=run)
    return WorkloadJob(id=f"j{index}", submit_time=0.0, kind=JobKind.JOB, name=f"j{index}", pods=[template])


def test_the_job_controller_completes_a_job_its_sync_delay_after_the_last_pod_and_pods_end_jittered() -> None:
    workload = Workload("w", [_job(0, 72.0), _job(1, 72.0)])
    plain = simulate(workload, [node("n0"), node("n1")], {"default-scheduler": create("kube-default")})
    assert [j.finish_time for j in plain.jobs] == [72.0, 72.0]
    lifecycle = Lifecycle(job_sync_delay=1.0, end_jitter=0.01, seed=7)
    runs = [
        simulate(
            workload,
            [node("n0"), node("n1")],
            {"default-scheduler": create("kube-default")},
            options=SimulationOptions(lifecycle=lifecycle),
        )
        for _ in range(2)
    ]
    finishes = [j.finish_time for j in runs[0].jobs]
    assert finishes == [j.finish_time for j in runs[1].jobs]  # seeded
    assert all(f is not None and 73.0 <= f <= 73.01 for f in finishes) and finishes[0] != finishes[1]


def test_pods_that_failed_at_one_instant_keep_the_order_they_were_tried_in_not_their_names() -> None:
    """PrioritySort compares priority, then the timestamp, and nothing else: kube-scheduler's serial cycles stamp
    the pods one after another, so ``job-9`` (created first, tried first) stays ahead of ``job-10`` though its name
    sorts after (the hostile review of the v1.36 queue: names in order gave the demo's kube-default 4 h more)."""
    s = KubeDefaultScheduler(queue=QUEUE_V136)
    add(s, node("n"), pod("running", node_name="n"), pod("job-9", t=0.0), pod("job-10", t=1.0), now=2.0)
    assert failed(s.schedule(2.0)) == ["job-9", "job-10"]
    end(s, "running", "n", 20.0)
    assert binds(s.schedule(20.0)) == {"job-9": "n"}
