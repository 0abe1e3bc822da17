"""kubeflux's preemption of whole jobs (:mod:`kubeflux.scheduler.preempting`), on the scheduler core with a
cluster that applies its decisions: the scenarios of issue 31, and a property test over random priority workloads
whose every chosen victim set is checked against the real scheduler; and preemption under odd orders of events
(issue 31's review): a scheduler restarted while the victims are still terminating, a second urgent job arriving
meanwhile; each must evict no more than it needs."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.messages import Evict, Unschedulable
from kubeflux.scheduler.objects import POD_GROUP_LABEL, DisruptionBudget, LabelSelector, Pod, PodGroup
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound, node, pod

LONG = {"kubeflux.io/walltime": "10000"}


def gang(cluster: Cluster, name: str, size: int, cpu: int, t: float, priority: int = 0, **kwargs: object) -> None:
    cluster.tell(ADDED, PodGroup("default", name, size))
    labels = {POD_GROUP_LABEL: name, "app": name}
    members = [
        pod(f"{name}-{i}", cpu, t=t, priority=priority, labels=labels, annotations=dict(LONG), **kwargs)
        for i in range(size)
    ]
    cluster.add(*members)


def full_cluster(**scheduler: object) -> Cluster:
    """8 nodes of 8 cores, filled by four low-priority 2 × 8-core gangs started at 0, 10, 20 and 30 s."""
    cluster = Cluster(KubefluxScheduler(**scheduler), [node(f"n{i}", cores=8) for i in range(8)])  # type: ignore[arg-type]
    for g in range(4):
        gang(cluster, f"low{g}", 2, 8000, t=g * 10)
        assert len(bound(cluster.run(g * 10.0))) == 2
    return cluster


def evicted_groups(cluster: Cluster) -> set[str]:
    return {key.split("/")[1].rsplit("-", 1)[0] for key in cluster.evicted}


def test_an_urgent_gang_evicts_exactly_the_two_gangs_that_lose_least_and_starts_at_once() -> None:
    cluster = full_cluster()
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    decisions = cluster.run(50.0)
    evictions = [d for d in decisions if isinstance(d, Evict)]
    assert {d.preemptor for d in evictions} == {"default/urgent"}
    assert evicted_groups(cluster) == {"low2", "low3"}  # started last: the least work lost, whole gangs
    assert len(cluster.evicted) == 4
    placed = bound(cluster.run(50.0))
    assert sorted(placed) == [f"default/urgent-{i}" for i in range(4)]


def test_a_preemptor_waits_for_its_victims_and_evicts_nothing_more() -> None:
    cluster = full_cluster()
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    cluster.evict = lambda pod, decision: ""  # type: ignore[method-assign]  # victims slow to leave
    first = [d for d in cluster.run(50.0) if isinstance(d, Evict)]
    assert len(first) == 4
    again = cluster.run(51.0)
    assert not [d for d in again if isinstance(d, Evict)]
    said = {d.message for d in again if isinstance(d, Unschedulable)} or {
        told[0] for job in cluster.scheduler.queue.jobs.values() for told in job.told.values()
    }
    assert any("waits for their 4 pod(s) to leave" in message for message in said)


def test_preemption_policy_never_waits() -> None:
    cluster = full_cluster()
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000, preemption_policy="Never")
    assert not [d for d in cluster.run(50.0) if isinstance(d, Evict)]
    assert cluster.evicted == []


def test_the_never_setting_turns_preemption_off() -> None:
    cluster = full_cluster(preemption="never")
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    assert not [d for d in cluster.run(50.0) if isinstance(d, Evict)]


def test_equal_priority_never_preempts() -> None:
    cluster = full_cluster()
    gang(cluster, "same", 4, 8000, t=50, priority=0)
    assert not [d for d in cluster.run(50.0) if isinstance(d, Evict)]


def test_a_disruption_budget_spares_its_gang_and_another_is_chosen() -> None:
    cluster = full_cluster()
    guard = DisruptionBudget("default", "keep-low3", LabelSelector(match_labels=(("app", "low3"),)), min_available=2)
    cluster.tell(ADDED, guard)
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    cluster.run(50.0)
    assert evicted_groups(cluster) == {"low1", "low2"}  # low3 would lose least, but its budget allows nothing


def test_a_higher_tier_is_touched_only_when_the_lowest_is_not_enough() -> None:
    cluster = Cluster(KubefluxScheduler(), [node(f"n{i}", cores=8) for i in range(4)])
    gang(cluster, "mid", 2, 8000, t=0, priority=10)
    cluster.run(0.0)
    gang(cluster, "low", 2, 8000, t=5, priority=1)
    cluster.run(5.0)
    gang(cluster, "urgent", 2, 8000, t=50, priority=100)
    cluster.run(50.0)
    assert evicted_groups(cluster) == {"low"}  # mid lost more work anyway; the lowest tier is enough


def test_a_lone_pod_of_higher_priority_evicts_a_lone_pod_not_a_gang_member() -> None:
    cluster = Cluster(KubefluxScheduler(), [node(f"n{i}", cores=8) for i in range(2)])
    gang(cluster, "pair", 1, 8000, t=0)  # a gang of one on n0
    cluster.add(pod("single", 8000, t=1, annotations=dict(LONG)))
    cluster.run(1.0)
    cluster.add(pod("vip", 4000, t=60, priority=5))
    cluster.run(60.0)
    assert len(cluster.evicted) == 1  # one 8-core job goes: the one started last, which lost least


# --- property: random priority workloads -----------------------------------------------------------------------

JOB = st.tuples(st.integers(1, 3), st.integers(1, 8), st.integers(0, 3))  # (pods, cores each, priority)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=st.lists(JOB, min_size=1, max_size=6),
    urgent=st.tuples(st.integers(1, 3), st.integers(1, 8), st.integers(0, 4)),
)
def test_every_victim_set_is_lower_whole_and_minimal(
    jobs: list[tuple[int, int, int]], urgent: tuple[int, int, int]
) -> None:
    nodes = [node(f"n{i}", cores=8) for i in range(3)]
    cluster = Cluster(KubefluxScheduler(), nodes)
    running: dict[str, tuple[int, list[Pod]]] = {}
    for index, (size, cores, priority) in enumerate(jobs):
        name = f"j{index}"
        gang(cluster, name, size, cores * 1000, t=index, priority=priority)
        cluster.run(float(index))
        if cluster.evicted:  # it preempted earlier jobs: they are gone, it starts now
            for victim in evicted_groups(cluster):
                running.pop(victim, None)
            cluster.evicted.clear()
            cluster.run(float(index))
        placed = [p for p in cluster.pods.values() if p.name.startswith(f"{name}-") and p.node_name]
        if len(placed) == size:
            running[name] = (priority, placed)
        else:  # did not fit: out of the way
            for p in [p for p in cluster.pods.values() if p.name.startswith(f"{name}-")]:
                cluster.delete(p.name)
    size, cores, priority = urgent
    gang(cluster, "urgent", size, cores * 1000, t=100, priority=priority)
    cluster.run(100.0)
    victims = evicted_groups(cluster)
    if not victims:
        return
    for name in victims:
        assert running[name][0] < priority  # never one of equal or higher priority
    evicted = set(cluster.evicted)
    for name in victims:  # whole gangs: every bound member of a victim went
        assert {p.key for p in running[name][1]} <= evicted
    assert len(bound(cluster.run(100.0))) == size  # enough: it starts at once
    for spared in victims:  # minimal: with any one victim kept, the real scheduler cannot start it now
        assert not _starts_now(nodes, running, victims - {spared}, urgent)


def _starts_now(
    nodes: list[object], running: dict[str, tuple[int, list[Pod]]], gone: set[str], urgent: tuple[int, int, int]
) -> bool:
    """Whether the urgent gang binds at once on the nodes with every running job but ``gone`` where it ran
    (preemption off: only whether it fits)."""
    cluster = Cluster(KubefluxScheduler(preemption="never"), nodes)  # type: ignore[arg-type]
    for name, (_, pods) in running.items():
        if name in gone:
            continue
        for p in pods:
            cluster.add(Pod(p.namespace, p.name, p.uid, "other", requests=dict(p.requests), node_name=p.node_name))
    size, cores, priority = urgent
    gang(cluster, "urgent", size, cores * 1000, t=100, priority=priority)
    return len(bound(cluster.run(100.0))) == size


def test_no_cascade_along_falling_priorities() -> None:
    """A evicts B (lower); B's replacement can never evict A back: priorities only fall along evictions."""
    cluster = Cluster(KubefluxScheduler(), [node("n0", cores=8)])
    cluster.add(pod("b", 8000, t=0, priority=1, annotations=dict(LONG)))
    cluster.run(0.0)
    cluster.add(pod("a", 8000, t=10, priority=5, annotations=dict(LONG)))
    cluster.run(10.0)
    assert cluster.evicted == ["default/b"]
    assert bound(cluster.run(10.0)) == {"default/a": "n0"}
    cluster.add(pod("b-again", 8000, t=11, priority=1, annotations=dict(LONG)))
    for t in itertools.count(11):
        if t > 15:
            break
        cluster.run(float(t))
    assert cluster.evicted == ["default/b"]


def test_a_refused_eviction_is_told_back_and_another_job_goes_instead() -> None:
    cluster = full_cluster()
    evict = cluster.evict

    def guarded(pod: Pod, decision: Evict) -> str:  # the cluster's budget for low3 says no (the scheduler's did not)
        if pod.name.startswith("low3-"):
            return "Cannot evict pod as it would violate the pod's disruption budget."
        return evict(pod, decision)

    cluster.evict = guarded  # type: ignore[method-assign]
    cluster.problem = lambda message: None  # type: ignore[method-assign]  # the refusal is said, not a bug
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    cluster.run(50.0)
    assert evicted_groups(cluster) == {"low2"}
    cluster.run(50.0)  # low3 is spared for now: low1 goes instead
    assert evicted_groups(cluster) == {"low1", "low2"}
    assert sorted(bound(cluster.run(50.0))) == [f"default/urgent-{i}" for i in range(4)]


# ---------------------------------------------------------------------------------- odd orders of events


def terminating(cluster: Cluster) -> None:
    """Victims take their graceful termination: an eviction only marks them deleted (deletionTimestamp)."""

    def evict(pod, decision):  # type: ignore[no-untyped-def]
        cluster.evicted.append(pod.key)
        pod.deleted = True
        cluster.tell(MODIFIED, pod)
        return ""

    cluster.evict = evict  # type: ignore[method-assign]


def restarted(cluster: Cluster) -> Cluster:
    """A new scheduler (serve restarted) that lists the same nodes, groups and pods."""
    fresh = Cluster(KubefluxScheduler(), list(cluster.nodes.values()))
    fresh.now = cluster.now
    groups = {p.group for p in cluster.pods.values() if p.group}
    for key in sorted(groups):
        size = sum(1 for p in cluster.pods.values() if p.group == key)
        fresh.tell(ADDED, PodGroup("default", key.split("/")[-1], size))
    for p in cluster.pods.values():
        fresh.pods[p.key] = p
        fresh.tell(ADDED, p)
    fresh.evict = cluster.evict  # type: ignore[method-assign]
    fresh.evicted = cluster.evicted
    return fresh


def urgent_gang_evicting(size: int) -> Cluster:
    """:func:`full_cluster` whose victims terminate gracefully, after an urgent gang of ``size`` 8-core pods arrived at
    50 s and evicted ``size`` pods for its room."""
    cluster = full_cluster()
    terminating(cluster)
    gang(cluster, "urgent", size, 8000, t=50, priority=1000)
    assert len([d for d in cluster.run(50.0) if isinstance(d, Evict)]) == size
    return cluster


def test_a_restarted_scheduler_waits_for_the_victims_already_terminating() -> None:
    cluster = urgent_gang_evicting(4)
    fresh = restarted(cluster)
    again = fresh.run(51.0)
    assert not [d for d in again if isinstance(d, Evict)], "the new core evicted more than the urgent gang needs"
    assert len(cluster.evicted) == 4


def test_a_second_urgent_job_does_not_evict_more_than_the_room_being_freed_leaves() -> None:
    cluster = urgent_gang_evicting(2)
    # restarted: the first urgent gang's victims (2 × 8 cores) still terminating, room for exactly one 2 × 8 gang
    fresh = restarted(cluster)
    assert not [d for d in fresh.run(51.0) if isinstance(d, Evict)]
    assert len(cluster.evicted) == 2
    assert not bound(fresh.run(52.0))


def test_two_urgent_gangs_at_once_each_evict_their_own_victims_and_no_more() -> None:
    cluster = full_cluster()
    terminating(cluster)
    gang(cluster, "urgent", 2, 8000, t=50, priority=1000)
    gang(cluster, "second", 2, 8000, t=50, priority=500)
    evictions = [d for d in cluster.run(50.0) if isinstance(d, Evict)]
    by = {d.preemptor: {e.pod.rsplit("-", 1)[0] for e in evictions if e.preemptor == d.preemptor} for d in evictions}
    assert by == {"default/urgent": {"default/low3"}, "default/second": {"default/low2"}}
    assert not [d for d in cluster.run(51.0) if isinstance(d, Evict)]


def test_jobs_a_budget_guards_alone_are_never_searched() -> None:
    """A budget that allows nothing over thousands of jobs: no search of victim sets, one look per job."""
    from kubeflux.scheduler.objects import DisruptionBudget, LabelSelector
    from kubeflux.scheduler.preemption import RunningPod, VictimJob, choose_victim_jobs

    jobs = [
        VictimJob(f"default/j{i}", 0, float(i), (RunningPod("default", f"j{i}", 0, 0.0, {"tier": "low"}),))
        for i in range(3000)
    ]
    guard = DisruptionBudget("default", "all", LabelSelector((("tier", "low"),)), min_available=3000)
    asked: list[frozenset[str]] = []

    def fits(keys: frozenset[str]) -> bool:
        asked.append(keys)
        return len(keys) >= 2

    assert choose_victim_jobs(10, jobs, fits, [guard], {"default/all": 0}, policy_v1=True) is None
    assert asked == []
    assert choose_victim_jobs(10, jobs, fits, [guard], {"default/all": 2}, policy_v1=True) == (jobs[0], jobs[1])


def test_a_gang_member_two_budgets_select_is_no_victim() -> None:
    """The Eviction API refuses to evict a pod that more than one PodDisruptionBudget selects (an empty selector
    selects the whole namespace): evicting its gang would leave half of it running; another gang is chosen."""
    from kubeflux.scheduler.objects import DisruptionBudget, LabelSelector
    from kubeflux.scheduler.preemption import RunningPod, VictimJob, choose_victim_jobs

    def job(name: str, work: float, labels: dict[str, str]) -> VictimJob:
        pods = tuple(RunningPod("default", f"{name}-{i}", 0, 0.0, labels if i else {}) for i in range(2))
        return VictimJob(f"default/{name}", 0, work, pods)

    cheap, dear = job("cheap", 1.0, {"app": "cheap"}), job("dear", 2.0, {"app": "dear"})
    everything = DisruptionBudget("default", "everything", LabelSelector(), max_unavailable="100%")
    mine = DisruptionBudget("default", "cheap", LabelSelector((("app", "cheap"),)), min_available=0)
    allowed = {"default/everything": 10, "default/cheap": 10}
    chosen = choose_victim_jobs(10, [cheap, dear], lambda keys: bool(keys), [everything, mine], allowed, policy_v1=True)
    assert chosen == (dear,)


def test_a_budget_spent_by_one_urgent_gang_is_not_spent_again_by_the_next_in_the_same_pass() -> None:
    """One PodDisruptionBudget over every low gang allows two pods gone (one gang): two urgent gangs arrive
    together; the first evicts one gang, the second finds the budget spent and waits, evicting nothing (the
    Eviction API would refuse it). Once the victims are gone the budget allows nothing more, so it still waits."""
    from kubeflux.scheduler.objects import DisruptionBudget, LabelSelector, SelectorRequirement

    cluster = full_cluster()
    terminating(cluster)
    low = SelectorRequirement("app", "In", ("low0", "low1", "low2", "low3"))
    cluster.tell(ADDED, DisruptionBudget("default", "lows", LabelSelector((), (low,)), min_available=6))
    gang(cluster, "urgent", 2, 8000, t=50, priority=1000)
    gang(cluster, "second", 2, 8000, t=50, priority=500)
    evictions = [d for d in cluster.run(50.0) if isinstance(d, Evict)]
    assert {d.preemptor for d in evictions} == {"default/urgent"}
    assert {d.pod.rsplit("-", 1)[0] for d in evictions} == {"default/low3"}
    assert not [d for d in cluster.run(51.0) if isinstance(d, Evict)]
