"""kubeflux's preemption under odd orders of events (issue 31's review): a scheduler restarted while the victims
are still terminating, a second urgent job arriving meanwhile; each must evict no more than it needs."""

from __future__ import annotations

from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.messages import Evict
from kubeflux.scheduler.objects import PodGroup
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster, bound
from tests.scheduler.test_preempting import full_cluster, gang


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


def test_a_restarted_scheduler_waits_for_the_victims_already_terminating() -> None:
    cluster = full_cluster()
    terminating(cluster)
    gang(cluster, "urgent", 4, 8000, t=50, priority=1000)
    assert len([d for d in cluster.run(50.0) if isinstance(d, Evict)]) == 4
    fresh = restarted(cluster)
    again = fresh.run(51.0)
    assert not [d for d in again if isinstance(d, Evict)], "the new core evicted more than the urgent gang needs"
    assert len(cluster.evicted) == 4


def test_a_second_urgent_job_does_not_evict_more_than_the_room_being_freed_leaves() -> None:
    cluster = full_cluster()
    terminating(cluster)
    gang(cluster, "urgent", 2, 8000, t=50, priority=1000)
    assert len([d for d in cluster.run(50.0) if isinstance(d, Evict)]) == 2
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
