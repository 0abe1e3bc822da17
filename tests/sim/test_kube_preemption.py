"""kube-scheduler's DefaultPreemption in the kube-default baselines: scenarios through ``simulate`` a user of
kube-scheduler would recognise, and the rules (PodDisruptionBudgets, preemptionPolicy, nominated nodes) driven
through observe/schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind, Evict, Scheduler, Unschedulable
from kubeflux.scheduler.objects import (
    CPU,
    MEMORY,
    POD_GROUP_LABEL,
    PREEMPT_NEVER,
    DisruptionBudget,
    LabelSelector,
    Node,
    Pod,
    PodGroup,
    PodPhase,
)
from kubeflux.sim.baselines import create
from kubeflux.sim.baselines.coscheduling import CoschedulingScheduler
from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
from kubeflux.sim.baselines.kube_preemption import PREEMPTION_NEVER
from kubeflux.sim.driver import Simulation, SimulationOptions
from kubeflux.sim.pods import KubeEvent
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from tests.sim._helpers import gang_job_yaml, simulate_yaml

GI = 2**30
URGENT = 1000


def eight_core_nodes(count: int) -> list[Node]:
    return [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 64 * GI, "pods": 110}) for i in range(count)]


def low_gang_job(name: str, ranks: int, cores: int, run_time: float = 1000.0, priority: int = 0) -> WorkloadJob:
    """A ``batch/v1`` Job of ``ranks`` coupled pods (it names a PodGroup of ``minMember`` ranks), low priority."""
    template = PodTemplate("rank", {CPU: cores * 1000, MEMORY: GI}, run_time, priority=priority)
    return WorkloadJob(
        id=name,
        submit_time=0.0,
        kind=JobKind.JOB,
        name=name,
        pods=[template],
        parallelism=ranks,
        completions=ranks,
        min_member=ranks,
    )


def urgent_gang(submit: float = 10.0, priority: int = URGENT) -> WorkloadJob:
    """The urgent job: a PodGroup of 4 pods × 8 cores, ``minMember`` 4."""
    pods = [PodTemplate(f"u{i}", {CPU: 8000, MEMORY: GI}, 100.0, priority=priority) for i in range(4)]
    return WorkloadJob(id="urgent", submit_time=submit, kind=JobKind.POD_GROUP, name="urgent", min_member=4, pods=pods)


def run(jobs: list[WorkloadJob], nodes: list[Node], scheduler: Scheduler) -> tuple[RunRecord, list[KubeEvent]]:
    """The jobs simulated on the nodes under the scheduler: its records and the Kubernetes Events written."""
    workload = map_to_cluster(Workload("preemption", jobs), nodes)
    sim = Simulation(workload, nodes, {scheduler.name: scheduler}, options=SimulationOptions(keep_events=True))
    return sim.run(), sim.cluster.kube_events


def preempted(record: RunRecord) -> list[str]:
    return sorted(p.pod for p in record.pods if p.reason == "Preempted")


# --- scenarios through simulate ---------------------------------------------------------------------------


def test_urgent_gang_on_a_full_cluster_evicts_single_pods_and_leaves_half_gangs() -> None:
    # 8 nodes of 8 cores, full with four low-priority 8-rank Jobs of 2 cores a rank: LeastAllocated spreads each
    # Job's ranks one per node. The urgent 4 × 8-core gang needs 4 whole nodes: pod by pod, kube-scheduler evicts
    # the 4 pods on each of 4 nodes, half the ranks of every Job, where two whole Jobs would have made the room.
    nodes = eight_core_nodes(8)
    record, events = run(
        [*(low_gang_job(f"low{i}", 8, 2) for i in range(4)), urgent_gang()], nodes, KubeDefaultScheduler()
    )
    jobs = {j.job_id: j for j in record.jobs}
    assert jobs["urgent"].starting_time == 11.0  # nominated at 10, bound after its 1 s back-off
    evicted = preempted(record)
    assert len(evicted) == 16
    by_job = {job: sum(1 for key in evicted if key.startswith(f"default/{job}-")) for job in ("low0", "low1", "low2")}
    assert by_job == {"low0": 4, "low1": 4, "low2": 4}  # and low3: half of every gang
    # The surviving ranks keep their cores while their Job's replacement ranks (made after the Job's back-off)
    # wait for the urgent gang to end: half-gangs, holding resources a gang cannot use (in an MPI job, idle).
    low = [p for p in record.pods if p.job_id.startswith("low")]
    replacements = [p for p in low if p.created_time > 0.0]
    assert len(replacements) == 16 and {p.bind_time for p in replacements} == {111.0}
    survivors = [p for p in low if p.created_time == 0.0 and p.reason != "Preempted"]
    assert len(survivors) == 16
    held_short = sum(
        2 * (min(r.bind_time or 0.0 for r in replacements if r.job_id == p.job_id) - 10.0) for p in survivors
    )
    assert held_short == 16 * 2 * 101.0  # core-seconds held by half-gangs, from the evictions to the replacements
    # each victim's event names its preemptor and node, as kube-scheduler's does
    notes = [e for e in events if e.reason == "Preempted"]
    assert len(notes) == 16
    assert all(e.message.startswith("Preempted by pod ") and " on node n" in e.message for e in notes)


def test_job_victims_are_recreated_by_their_job_and_finish() -> None:
    nodes = eight_core_nodes(4)
    record, _ = run([low_gang_job("low", 4, 8), urgent_gang()], nodes, KubeDefaultScheduler())
    jobs = {j.job_id: j for j in record.jobs}
    assert preempted(record) == [f"default/low-{i}" for i in range(4)]
    assert jobs["low"].final_state == "COMPLETED_SUCCESSFULLY"
    recreated = sorted(p.pod for p in record.pods if p.job_id == "low" and p.phase == "Succeeded")
    assert recreated == [f"default/low-{i}" for i in range(4, 8)]  # the Job's new pods, after the urgent gang
    assert jobs["low"].finish_time == 111.0 + 1000.0


def test_equal_priority_never_preempts() -> None:
    nodes = eight_core_nodes(4)
    record, events = run(
        [low_gang_job("low", 4, 8, priority=5), urgent_gang(priority=5)], nodes, KubeDefaultScheduler()
    )
    assert preempted(record) == []
    assert {j.job_id: j.starting_time for j in record.jobs}["urgent"] == 1000.0
    told = {e.message for e in events if e.reason == "FailedScheduling" and e.object.startswith("default/u")}
    assert told == {
        "0/4 nodes are available: 4 Insufficient cpu. "
        "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    }


def test_preemption_setting_never_turns_it_off() -> None:
    nodes = eight_core_nodes(4)
    scheduler = KubeDefaultScheduler(preemption=PREEMPTION_NEVER)
    record, events = run([low_gang_job("low", 4, 8), urgent_gang()], nodes, scheduler)
    assert preempted(record) == []
    assert {j.job_id: j.starting_time for j in record.jobs}["urgent"] == 1000.0
    told = {e.message for e in events if e.reason == "FailedScheduling" and e.object.startswith("default/u")}
    assert told == {"0/4 nodes are available: 4 Insufficient cpu."}  # no PostFilter plugin: no preemption part


@pytest.mark.parametrize("name", ["kube-gang", "coscheduling-bare"])
def test_gang_baselines_preempt_pod_by_pod_too(name: str) -> None:
    # kube-gang: v1.36's workload-aware preemption is an alpha gate, off: each member preempts for itself.
    # coscheduling (a bare PodGroup, no minResources): DefaultPreemption runs before Coscheduling's PostFilter.
    scheduler: Scheduler = create(name) if name == "kube-gang" else CoschedulingScheduler()
    nodes = eight_core_nodes(8)
    record, _ = run([*(low_gang_job(f"low{i}", 8, 2) for i in range(4)), urgent_gang()], nodes, scheduler)
    assert len(preempted(record)) == 16
    assert {j.job_id: j.starting_time for j in record.jobs}["urgent"] in (10.0, 11.0)


def test_coscheduling_with_min_resources_never_preempts_for_a_gang() -> None:
    # scheduler-plugins: a PreFilter failure (the resource gap of minResources) is UnschedulableAndUnresolvable "to
    # avoid any preemption attempts": on a full cluster the urgent gang waits for the low Jobs to end.
    nodes = eight_core_nodes(8)
    record, _ = run([*(low_gang_job(f"low{i}", 8, 2) for i in range(4)), urgent_gang()], nodes, create("coscheduling"))
    assert preempted(record) == []
    assert {j.job_id: j.starting_time for j in record.jobs}["urgent"] == 1000.0


# --- the rules, driven through observe/schedule -----------------------------------------------------------


class Harness:
    """Applies a baseline's decisions as the simulator does: Bind runs the pod, Evict ends and deletes it."""

    def __init__(self, scheduler: KubeDefaultScheduler, nodes: list[Node], *, evict: bool = True) -> None:
        self.scheduler = scheduler
        self.evict = evict
        """False: an evicted pod stays, terminating (its deletion not yet seen)."""
        self.pods: dict[str, Pod] = {}
        self.evicted: list[Evict] = []
        self.nominated: dict[str, str] = {}
        for node in nodes:
            scheduler.observe(ClusterEvent(EventKind.ADDED, node), 0.0)

    def add(self, *objects: Pod | DisruptionBudget | PodGroup, now: float = 0.0) -> None:
        for obj in objects:
            if isinstance(obj, Pod):
                self.pods[obj.key] = obj
            self.scheduler.observe(ClusterEvent(EventKind.ADDED, obj), now)

    def run(self, now: float) -> list[Decision]:
        decisions = self.scheduler.schedule(now)
        for d in decisions:
            pod = self.pods.get(d.pod)
            if pod is None:
                continue
            if isinstance(d, Bind):
                pod.node_name, pod.phase = d.node, PodPhase.RUNNING
                self.scheduler.observe(ClusterEvent(EventKind.MODIFIED, pod), now)
            elif isinstance(d, Evict):
                self.evicted.append(d)
                if not self.evict:
                    continue
                pod.phase, pod.deleted = PodPhase.FAILED, True
                del self.pods[pod.key]
                self.scheduler.observe(ClusterEvent(EventKind.DELETED, pod), now)
            elif isinstance(d, Unschedulable):
                self.nominated[d.pod] = d.nominated_node
        return decisions


def running(name: str, cpu: int, node: str, priority: int = 0, **kwargs: object) -> Pod:
    return Pod(
        "default",
        name,
        uid=f"uid-{name}",
        priority=priority,
        requests={CPU: cpu},
        node_name=node,
        phase=PodPhase.RUNNING,
        **kwargs,
    )  # type: ignore[arg-type]


def pending(name: str, cpu: int, priority: int = URGENT, t: float = 0.0, **kwargs: object) -> Pod:
    return Pod("default", name, uid=f"uid-{name}", priority=priority, creation_time=t, requests={CPU: cpu}, **kwargs)  # type: ignore[arg-type]


def small_nodes(*names: str) -> list[Node]:
    return [Node(name, allocatable={CPU: 4000, MEMORY: 16 * GI, "pods": 110}) for name in names]


def messages(decisions: list[Decision]) -> dict[str, str]:
    return {d.pod: d.message for d in decisions if isinstance(d, Unschedulable)}


def test_preemptor_is_nominated_and_bound_once_the_victim_is_gone() -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a"))
    h.add(running("low", 4000, "a"), pending("urgent", 4000))
    decisions = h.run(0.0)
    assert [(e.pod, e.uid, e.preemptor, e.budgets) for e in h.evicted] == [
        ("default/low", "uid-low", "default/urgent", False)
    ]
    assert h.evicted[0].message == "Preempted by pod uid-urgent on node a"
    # the preemption succeeded: the FitError is told without a PostFilter part, and the pod waits nominated
    assert messages(decisions) == {"default/urgent": "0/1 nodes are available: 1 Insufficient cpu."}
    assert h.nominated == {"default/urgent": "a"}
    assert h.run(1.0) == [Bind(pod="default/urgent", uid="uid-urgent", node="a")]  # after its 1 s back-off


def test_nominated_pod_keeps_its_room_from_lower_priority_pods() -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a"))
    h.add(running("low", 4000, "a"), pending("urgent", 4000))
    h.run(0.0)
    h.add(pending("replacement", 4000, priority=0, t=0.5), now=0.5)  # the victim's Job replaces it
    assert messages(h.run(0.5)) == {
        "default/replacement": "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    }
    assert h.run(1.0) == [Bind(pod="default/urgent", uid="uid-urgent", node="a")]


def test_preemption_policy_never_waits() -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a"))
    h.add(running("low", 4000, "a"), pending("polite", 4000, preemption_policy=PREEMPT_NEVER))
    assert messages(h.run(0.0)) == {
        "default/polite": "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    }
    assert h.evicted == [] and h.nominated == {"default/polite": ""}


def guarded_budget(min_available: int | str = 1) -> DisruptionBudget:
    return DisruptionBudget("default", "db", LabelSelector((("app", "db"),)), min_available=min_available)


@pytest.mark.parametrize("with_budget", [False, True], ids=["no-budget", "min-available-1"])
def test_a_budget_with_min_available_moves_preemption_to_another_node(with_budget: bool) -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a", "b"))
    # both victims alike but for their start: without a budget the one that started later (on a) goes
    h.add(running("db", 4000, "a", labels={"app": "db"}), now=5.0)
    h.add(running("batch", 4000, "b"), now=1.0)
    if with_budget:
        h.add(guarded_budget())  # one healthy db pod, at least one available: no disruption allowed
    h.add(pending("urgent", 4000), now=6.0)
    h.run(6.0)
    assert [e.pod for e in h.evicted] == (["default/batch"] if with_budget else ["default/db"])
    assert h.nominated == {"default/urgent": "b" if with_budget else "a"}


def test_a_budget_is_violated_when_nothing_else_will_do() -> None:
    # kube-scheduler prefers victims that violate no budget, but deletes (it does not evict) and so may violate
    h = Harness(KubeDefaultScheduler(), small_nodes("a"))
    h.add(running("db", 4000, "a", labels={"app": "db"}), guarded_budget(), pending("urgent", 4000))
    h.run(0.0)
    assert [e.pod for e in h.evicted] == ["default/db"]


def test_fewest_victims_and_lowest_priorities_are_chosen() -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a", "b", "c"))
    h.add(
        running("a1", 2000, "a", priority=10),
        running("a2", 2000, "a", priority=10),
        running("b1", 4000, "b", priority=50),  # one victim, but of a higher priority
        running("c1", 1000, "c", priority=10),
        running("c2", 3000, "c", priority=20),
        pending("urgent", 3000),
    )
    h.run(0.0)
    # a needs both its pods gone (4 − 3 leaves room for neither), b its one of priority 50, c only c2 (c1 fits
    # back beside the urgent pod): the lowest priority of the most important victim wins over fewer victims
    assert sorted(e.pod for e in h.evicted) == ["default/a1", "default/a2"]
    assert h.nominated["default/urgent"] == "a"


def test_unresolvable_nodes_are_not_candidates() -> None:
    h = Harness(
        KubeDefaultScheduler(), [*small_nodes("a"), Node("cordoned", allocatable={CPU: 8000}, unschedulable=True)]
    )
    h.add(running("low", 4000, "a"), running("low2", 8000, "cordoned"), pending("big", 6000))
    assert messages(h.run(0.0)) == {
        "default/big": "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    }
    assert h.evicted == []


def test_no_second_preemption_while_a_victim_on_the_nominated_node_terminates() -> None:
    h = Harness(KubeDefaultScheduler(), small_nodes("a", "b"), evict=False)
    h.add(running("low-a", 4000, "a"), running("low-b", 4000, "b"), pending("urgent", 4000), now=0.0)
    h.run(0.0)
    assert [e.pod for e in h.evicted] == ["default/low-a"] and h.nominated == {"default/urgent": "a"}
    h.add(Node("c", allocatable={CPU: 1000}), now=1.0)  # an event: the pod is tried again
    assert messages(h.run(1.0)) == {
        "default/urgent": "0/3 nodes are available: 3 Insufficient cpu. "
        "preemption: not eligible due to a terminating pod on the nominated node."
    }
    assert len(h.evicted) == 1 and h.nominated == {"default/urgent": "a"}  # low-b spared; the nomination kept


def test_coscheduling_preempts_pods_held_at_permit_in_memory() -> None:
    s = CoschedulingScheduler()
    h = Harness(s, small_nodes("n"))
    h.add(PodGroup("default", "g", min_member=3, schedule_timeout_seconds=60))
    members = [pending(f"g-{i}", 2000, priority=0, labels={POD_GROUP_LABEL: "g"}) for i in range(3)]
    members[2].scheduler_name = "elsewhere"  # never placed here: the other two wait at Permit
    h.add(*members)
    assert h.run(0.0) == []
    h.add(pending("urgent", 4000, t=1.0), now=1.0)
    decisions = h.run(1.0)
    assert h.evicted == []  # held pods are not bound: rejected in memory, nothing to delete
    assert messages(decisions) == {
        "default/g-0": "preempted",
        "default/g-1": "rejection in Unreserve",
        "default/urgent": "0/1 nodes are available: 1 Insufficient cpu.",
    }
    assert h.nominated["default/urgent"] == "n"
    assert Bind(pod="default/urgent", uid="uid-urgent", node="n") in h.run(2.0)


def test_kube_gang_members_preempt_one_by_one_and_wait_for_their_victims() -> None:
    s = create("kube-gang")
    assert isinstance(s, KubeDefaultScheduler)
    h = Harness(s, small_nodes("a", "b"), evict=False)
    h.add(running("low-a", 4000, "a"), running("low-b", 4000, "b"), PodGroup("default", "g", min_member=2))
    h.add(*(pending(f"g-{i}", 4000, labels={POD_GROUP_LABEL: "g"}) for i in range(2)))
    decisions = h.run(0.0)
    assert sorted(e.pod for e in h.evicted) == ["default/low-a", "default/low-b"]  # one victim per member
    waiting = "pod group is unschedulable, pod group is waiting for preemption to complete"
    assert messages(decisions) == {"default/g-0": waiting, "default/g-1": waiting}
    assert h.nominated == {"default/g-0": "a", "default/g-1": "b"}
    for name in ("low-a", "low-b"):  # the victims go
        victim = h.pods.pop(f"default/{name}")
        victim.deleted = True
        s.observe(ClusterEvent(EventKind.DELETED, victim), 1.0)
    assert {d.pod: d.node for d in h.run(1.0) if isinstance(d, Bind)} == {"default/g-0": "a", "default/g-1": "b"}


# --- the same through `kubeflux simulate` with Kubernetes manifests ----------------------------------------


def simulate_manifests(tmp_path: Path, scheduler: str, *docs: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``kubeflux simulate`` of the manifests on 8 nodes of 8 cores: the summary row and ``pods.csv``."""
    row, _, pods = simulate_yaml(tmp_path, scheduler, *docs)
    return row, pods


SPREAD = [gang_job_yaml(f"low{g}", 0, 1000, 8, 2) for g in range(4)]
"""A full cluster: four low-priority 8-rank Jobs of 2 cores a rank, spread one rank per node."""


def test_kube_default_through_simulate_counts_the_half_gangs_it_makes(tmp_path: Path) -> None:
    row, pods = simulate_manifests(tmp_path, "kube-default", *SPREAD, gang_job_yaml("urgent", 10, 100, 4, 8, 1000))
    # 16 ranks evicted, 4 from each of the 4 Jobs (every gang halved, where 2 whole ones would have made room);
    # each had computed 10 s on 2 cores
    assert (row["preempted_pods"], row["preempted_jobs"]) == (16, 4)
    assert row["work_lost_core_seconds"] == 16 * 2 * 10
    urgent = [p for p in pods if p["job_id"] == "default/urgent"]
    assert {p["running_time"] for p in urgent} == {"11.0"}


def test_kube_default_through_simulate_never_policy_and_the_setting_off(tmp_path: Path) -> None:
    polite = gang_job_yaml("urgent", 10, 100, 4, 8, 1000, policy="Never")
    row, pods = simulate_manifests(tmp_path / "never", "kube-default", *SPREAD, polite)
    assert row["preempted_pods"] == 0
    assert {p["running_time"] for p in pods if p["job_id"] == "default/urgent"} == {"1000.0"}
    urgent = gang_job_yaml("urgent", 10, 100, 4, 8, 1000)
    row, pods = simulate_manifests(tmp_path / "off", "kube-default-no-preemption", *SPREAD, urgent)
    assert row["preempted_pods"] == 0
    assert {p["running_time"] for p in pods if p["job_id"] == "default/urgent"} == {"1000.0"}
