"""Kueue's preemption for quota as the real Kueue (v0.17) decides it, each a small workload run through the
simulator (issue 33, review rev33): an admission cycle issues evictions and its preemptor waits for them, a
workload may not preempt in its own queue in order to borrow, Kueue's attempt without borrowing first, the flavor
where preemption finds victims, and the pods' required node affinity choosing the flavor."""

from __future__ import annotations

from pathlib import Path

from kubeflux.scheduler.objects import CPU, MEMORY, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from tests.sim._kueue_yaml import EVERY_NAMESPACE, FLAVOR, cluster_queue, job, local_queue

LOWER = "  preemption: {withinClusterQueue: LowerPriority}\n"
RECLAIM = "  preemption: {withinClusterQueue: LowerPriority, reclaimWithinCohort: Any}\n"


def run(tmp_path: Path, documents: list[str], nodes: int = 4, cores: int = 8) -> RunRecord:
    path = tmp_path / "kueue.yaml"
    path.write_text("---\n".join(documents))
    workload = load_workload(path)
    assert workload.problems == []
    scheduler = create("kube-default")
    machines = [Node(f"n{i}", allocatable={CPU: cores * 1000, MEMORY: 2**36}) for i in range(nodes)]
    return simulate(workload, machines, {scheduler.name: scheduler})


def runs(record: RunRecord) -> dict[str, tuple[float | None, float | None]]:
    return {job.job_id: (job.starting_time, job.finish_time) for job in record.jobs}


def in_cohort(name: str, cpu: int, policy: str = "") -> str:
    return cluster_queue(name, cpu, spec=f"{EVERY_NAMESPACE}  cohort: shared\n{policy}")


def test_preemptions_that_undo_each_other_do_not_loop_at_one_instant(tmp_path: Path) -> None:
    """Four queues of 16 cores in a cohort, each preempting lower priorities within and reclaiming any borrower. At
    10 s, ns3's j224 (24 cores, priority 100) can borrow, and ns2's j225 reclaims what it borrowed; before, each
    eviction was instant and its victim queued again at once, so j224 was admitted again, preempted again, and so
    on: 41 preemptions at 10 s until a guard stopped the cycle. Now the cycle issues the eviction, j225 waits for it
    and takes the room, and j224, queued again a second later, waits for room."""
    queues = [in_cohort(f"cq{i}", 16, RECLAIM) for i in range(4)]
    locals_ = [local_queue(f"ns{i}", f"cq{i}") for i in range(4)]
    at_0 = [("ns2", "j66", 2, 100), ("ns0", "j76", 16, 100), ("ns2", "j159", 2, 10), ("ns2", "j161", 2, 10)]
    at_0 += [("ns3", "j196", 2, 100), ("ns1", "j267", 2, 100), ("ns1", "j36", 8, 0)]
    at_10 = [("ns2", "j55", 24, 10), ("ns2", "j91", 4, 0), ("ns2", "j225", 4, 0), ("ns3", "j224", 24, 100)]
    at_10 += [("ns3", "j153", 24, 0), ("ns3", "j190", 24, 0), ("ns3", "j228", 8, 0)]
    jobs = [job(name, ns, cpu, 0, 5000, priority=prio) for ns, name, cpu, prio in at_0]
    jobs += [job(name, ns, cpu, 10, 1000, priority=prio) for ns, name, cpu, prio in at_10]
    record = run(tmp_path, [FLAVOR, *queues, *locals_, *jobs], nodes=2, cores=32)
    assert record.problems == []
    assert record.admission["quota_preemptions"] == 1
    rows = {row.job_id: row for row in record.jobs}
    assert rows["ns3/j224"].quota_evictions == 1 and rows["ns3/j224"].starting_time == 1011.0
    assert (rows["ns2/j225"].starting_time, rows["ns2/j225"].finish_time) == (10.0, 1010.0)


def test_a_workload_above_its_nominal_quota_does_not_preempt_its_own_queue_to_borrow(tmp_path: Path) -> None:
    """cq-a (4 cores, preempting lower priorities) and an idle cq-b (4) in a cohort; high (priority 100) asks 6
    cores, more than cq-a's nominal quota: Kueue considers preemption only within the nominal quota (without
    borrowWithinCohort or fair sharing), so high waits for low instead of evicting it to borrow."""
    documents = [FLAVOR, in_cohort("cq-a", 4, LOWER), in_cohort("cq-b", 4), local_queue("a", "cq-a")]
    documents += [job("low", "a", 4, 0, 1000), job("high", "a", 6, 10, 100, priority=100)]
    record = run(tmp_path, documents)
    assert runs(record) == {"a/low": (0.0, 1000.0), "a/high": (1000.0, 1100.0)}
    assert record.admission["quota_preemptions"] == 0


def test_preemption_without_borrowing_reclaims_and_preempts_within_the_nominal_quota(tmp_path: Path) -> None:
    """A cohort of cq-a (4 cores), cq-b (none: it only borrows) and cq-c (4). a/low (2 cores) and c/c1 (2) run,
    b/x borrows 4: the cohort's 8 cores are used. a/p (priority 100, 4 cores) comes: cq-a uses less than its nominal
    quota, so Kueue first tries without borrowing over every candidate: evicting x alone leaves p borrowing,
    evicting low too lets it fit cq-a's own 4 cores. Both are evicted and p runs at once (before, p waited for the
    others to end, as it would have borrowed)."""
    documents = [FLAVOR, in_cohort("cq-a", 4, RECLAIM), in_cohort("cq-b", 0), in_cohort("cq-c", 4)]
    documents += [local_queue("a", "cq-a"), local_queue("b", "cq-b"), local_queue("c", "cq-c")]
    documents += [job("low", "a", 2, 0, 1000), job("c1", "c", 2, 0, 1000), job("x", "b", 4, 1, 1000)]
    documents += [job("p", "a", 4, 10, 100, priority=100)]
    record = run(tmp_path, documents)
    assert runs(record)["a/p"] == (10.0, 110.0)
    rows = {row.job_id: row for row in record.jobs}
    assert rows["a/low"].quota_evictions == rows["b/x"].quota_evictions == 1
    assert rows["a/low"].starting_time == 11.0  # queued again a second later: cq-a's 4 + what cq-c lends
    # cq-b only borrows: no quota use (its usage over a nominal quota of 0), rather than 0.0, which reads as idle
    assert "quota_use[cq-b:cpu]" not in record.admission and record.admission["borrowed_share[cq-b:cpu]"] == 1.0


TWO_FLAVORS = """apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - {name: f1, resources: [{name: cpu, nominalQuota: 4}]}
        - {name: f2, resources: [{name: cpu, nominalQuota: 4}]}
"""


def flavor(name: str, labels: str = "{}") -> str:
    header = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"
    return f"{header}metadata: {{name: {name}}}\nspec: {{nodeLabels: {labels}}}\n"


def test_preemption_is_tried_on_each_flavor_and_the_one_with_victims_kept(tmp_path: Path) -> None:
    """One queue with flavors f1 and f2 of 4 cores each: a (priority 5) takes f1, b (priority 0) f2; h (priority 3,
    4 cores) can preempt nobody on f1 but b on f2: Kueue simulates the preemption on each flavor and keeps f2, where
    h runs at once (before, it tried f1 only and waited for a to end)."""
    documents = [flavor("f1"), flavor("f2"), TWO_FLAVORS, local_queue("default", "cq")]
    documents += [job("a", "default", 4, 0, 1000, priority=5), job("b", "default", 4, 1, 1000)]
    documents += [job("h", "default", 4, 10, 100, priority=3)]
    record = run(tmp_path, documents)
    assert runs(record)["default/h"] == (10.0, 110.0)
    rows = {row.job_id: row for row in record.jobs}
    assert (rows["default/a"].quota_evictions, rows["default/b"].quota_evictions) == (0, 1)


AFFINITY = """      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions: [{key: instance-type, operator: In, values: [spot]}]
"""


def test_the_flavor_follows_the_pods_required_node_affinity(tmp_path: Path) -> None:
    """Flavors on-demand then spot (by the nodes' instance-type); a Job whose pods require instance-type spot
    through their node affinity is given spot, where its pod runs (before, only the nodeSelector was looked at: it
    was given on-demand and its pod never found a node, its quota held)."""
    documents = [flavor("on-demand", "{instance-type: on-demand}"), flavor("spot", "{instance-type: spot}")]
    documents.append(TWO_FLAVORS.replace("f1", "on-demand").replace("f2", "spot"))
    documents += [local_queue("default", "cq"), job("j", "default", 2, 0, 100, pod_spec=AFFINITY)]
    path = tmp_path / "kueue.yaml"
    path.write_text("---\n".join(documents))
    scheduler = create("kube-default")
    nodes = [
        Node(f"{kind}-{i}", allocatable={CPU: 8000, MEMORY: 2**36}, labels={"instance-type": kind})
        for kind in ("on-demand", "spot")
        for i in range(2)
    ]
    record = simulate(load_workload(path), nodes, {scheduler.name: scheduler})
    assert runs(record) == {"default/j": (0.0, 100.0)}
    assert [pod.node[:5] for pod in record.pods] == ["spot-"]
