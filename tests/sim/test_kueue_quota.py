"""Kueue's quota arithmetic and admission core (:mod:`kubeflux.sim.kueue`), without a cluster: named cases from
Kueue's documentation, and properties over generated queues and workloads (quota never exceeded, every workload
that fits its queue's quota admitted once the others are done), then the same through the simulator."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeflux.scheduler.objects import CPU, MEMORY, LabelSelector, Node
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import Simulation
from kubeflux.sim.kueue.admission import Admitted, Admitter, Decision, Evicted
from kubeflux.sim.kueue.objects import (
    ClusterQueue,
    KueueObjects,
    LocalQueue,
    QueueingStrategy,
    ReclaimWithinCohort,
    RequeuingTimestamp,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WaitForPodsReady,
    WithinClusterQueue,
)
from kubeflux.sim.kueue.quota import QuotaBook
from kubeflux.sim.kueue.workload import QueuedWorkload
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob

FR = ("default", CPU)


def queue(
    name: str,
    nominal: int,
    borrowing: int | None = None,
    lending: int | None = None,
    cohort: str = "all",
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    reclaim: ReclaimWithinCohort = ReclaimWithinCohort.NEVER,
    within: WithinClusterQueue = WithinClusterQueue.NEVER,
) -> ClusterQueue:
    group = ResourceGroup((CPU,), (("default", {CPU: ResourceQuota(nominal, borrowing, lending)}),))
    return ClusterQueue(name, (group,), cohort, strategy, LabelSelector(), within, reclaim)


def objects(*queues: ClusterQueue) -> KueueObjects:
    return KueueObjects(
        {"default": ResourceFlavor("default")},
        {cq.name: cq for cq in queues},
        {f"{cq.name}/q": LocalQueue(cq.name, "q", cq.name) for cq in queues},
    )


def workload(ref: int, cq: str, cpu: int, priority: int = 0) -> QueuedWorkload:
    return QueuedWorkload(f"{cq}/w{ref}", ref, cq, "q", priority, 0.0, {CPU: cpu, "pods": 1})


def settled(admitter: Admitter, now: float) -> list[Decision]:
    """The cycles at ``now`` as the layer runs them: each eviction done (its pods gone) before the next cycle."""
    decisions: list[Decision] = []
    while made := admitter.cycle(now):
        decisions += made
        for decision in made:
            if isinstance(decision, Evicted):
                admitter.evicted(decision.workload.ref, now)
    return decisions


# -- quota arithmetic (Kueue's resource_node.go) ------------------------------------------------------------------
def test_without_a_cohort_a_queue_has_its_nominal_quota() -> None:
    book = QuotaBook([queue("a", 10, cohort="")])
    book.add("a", {FR: 4})
    assert book.available("a", FR) == 6


def test_a_queue_borrows_the_idle_quota_of_its_cohort_up_to_its_borrowing_limit() -> None:
    book = QuotaBook([queue("a", 10, borrowing=3), queue("b", 10)])
    assert book.available("a", FR) == 13
    assert book.available("b", FR) == 20
    book.add("b", {FR: 15})
    assert book.available("a", FR) == 5  # b borrowed 5 of a's
    assert book.borrowing("b", FR) and not book.borrowing("a", FR)


def test_a_lending_limit_keeps_the_rest_of_the_nominal_quota_for_its_queue() -> None:
    book = QuotaBook([queue("a", 10, lending=4), queue("b", 10)])
    assert book.available("b", FR) == 14  # a lends only 4
    book.add("b", {FR: 14})
    assert book.available("a", FR) == 6  # its guaranteed 6; what it lent is used
    assert book.available("b", FR) == 0


# -- the admission core -------------------------------------------------------------------------------------------
def test_reclaim_within_cohort_evicts_the_most_recently_admitted_borrower_only() -> None:
    admitter = Admitter(objects(queue("a", 4), queue("b", 4, reclaim=ReclaimWithinCohort.ANY)))
    for ref in (1, 2, 3):
        admitter.add(workload(ref, "a", 2), float(ref))
    assert [type(d).__name__ for d in admitter.cycle(3.0)] == ["Admitted"] * 3  # 6 of a's 4 + b's 4
    admitter.add(workload(4, "b", 4), 4.0)
    decisions = settled(admitter, 4.0)
    evicted = [d.workload.ref for d in decisions if isinstance(d, Evicted)]
    admitted = [d.workload.ref for d in decisions if isinstance(d, Admitted)]
    assert evicted == [3] and admitted == [4]  # a keeps its nominal 4
    assert "reclamation within the cohort" in next(d.message for d in decisions if isinstance(d, Evicted))


def test_no_reclaim_without_the_policy_the_lender_waits() -> None:
    admitter = Admitter(objects(queue("a", 4), queue("b", 4)))
    for ref in (1, 2):
        admitter.add(workload(ref, "a", 4), 0.0)
    admitter.cycle(0.0)
    admitter.add(workload(3, "b", 4), 1.0)
    assert admitter.cycle(1.0) == []
    admitter.finish(2)
    assert [d.workload.ref for d in admitter.cycle(2.0)] == [3]


def test_within_cluster_queue_lower_priority_is_preempted_for_a_higher_one() -> None:
    admitter = Admitter(objects(queue("a", 4, cohort="", within=WithinClusterQueue.LOWER_PRIORITY)))
    admitter.add(workload(1, "a", 4, priority=0), 0.0)
    admitter.cycle(0.0)
    admitter.add(workload(2, "a", 4, priority=0), 1.0)
    assert admitter.cycle(1.0) == []  # equal priority: no preemption
    admitter.add(workload(3, "a", 4, priority=10), 2.0)
    decisions = admitter.cycle(2.0)
    assert [(type(d).__name__, d.workload.ref) for d in decisions] == [("Evicted", 1)]  # the preemptor waits
    assert admitter.usage("a") == {FR: 4} and "Pending the preemption of 1 workload(s)" in admitter.workloads[3].why
    assert admitter.cycle(2.0) == []  # its victim still holds the quota
    admitter.evicted(1, 2.0)  # its pods are gone
    assert [(type(d).__name__, d.workload.ref) for d in admitter.cycle(2.0)] == [("Admitted", 3)]
    assert admitter.workloads[1].timestamp == 0.0  # requeued in its place: its creation orders it


def test_a_higher_priority_workload_is_admitted_first() -> None:
    admitter = Admitter(objects(queue("a", 4, cohort="")))
    admitter.add(workload(1, "a", 4, priority=0), 0.0)
    admitter.add(workload(2, "a", 4, priority=5), 1.0)
    assert [d.workload.ref for d in admitter.cycle(1.0)] == [2]


def test_a_workload_that_ends_while_it_waits_is_forgotten_never_admitted_and_holds_no_quota() -> None:
    admitter = Admitter(objects(queue("a", 4, cohort="")))
    for ref in (1, 2, 3):
        admitter.add(workload(ref, "a", 4), float(ref))
    assert [d.workload.ref for d in admitter.cycle(3.0)] == [1]
    admitter.forget(2)  # failed while it waited (a held Job's end)
    admitter.forget(1)  # ended while admitted: its quota back
    assert [d.workload.ref for d in admitter.cycle(4.0)] == [3]
    admitter.forget(3)
    assert admitter.cycle(5.0) == [] and admitter.usage("a") == {FR: 0} and admitter.waiting() == []


@pytest.mark.parametrize(
    ("timestamp", "order"), [(RequeuingTimestamp.EVICTION, [3, 1]), (RequeuingTimestamp.CREATION, [1, 3])]
)
def test_a_workload_whose_pods_were_not_ready_waits_out_its_backoff_then_queues_by_its_strategy(
    timestamp: RequeuingTimestamp, order: list[int]
) -> None:
    """w1 (created at 0 s) is admitted and times out at 10 s; w3 (created at 5 s) waits meanwhile: requeued, w1
    queues behind w3 by its eviction's time, before it by its creation. Timed out again past backoffLimitCount 1,
    it is deactivated."""
    kueue = objects(queue("a", 4, cohort=""))
    kueue.wait_for_pods_ready = WaitForPodsReady(10.0, timestamp, backoff_limit_count=1, backoff_base_seconds=5)
    admitter = Admitter(kueue)
    for ref, at in ((1, 0.0), (2, 1.0), (3, 5.0)):
        admitter.add(workload(ref, "a", 4), at)
        admitter.cycle(at)
    assert admitter.time_out(1, 10.0) == 15.0  # backoffBaseSeconds x 2^0
    assert [d.workload.ref for d in admitter.cycle(10.0)] == [2]  # its quota released; it is in no queue
    assert [wl.ref for wl in admitter.waiting()] == [3, 1]  # pending, then backing off
    assert admitter.requeue(1) and not admitter.requeue(1)
    assert [wl.ref for _, wl in admitter.pending["a"]] == order
    admitter.forget(2)
    assert [d.workload.ref for d in admitter.cycle(16.0)] == order[:1]
    if order[0] != 1:
        admitter.forget(order[0])
        assert [d.workload.ref for d in admitter.cycle(17.0)] == [1]
    assert admitter.time_out(1, 30.0) is None
    assert admitter.workloads[1].deactivated and admitter.waiting()[0].ref == 1  # deactivated: waits for ever


# -- properties ---------------------------------------------------------------------------------------------------
QUEUES = st.lists(
    st.tuples(
        st.integers(1, 8),  # nominal
        st.one_of(st.none(), st.integers(0, 8)),  # borrowing limit
        st.one_of(st.none(), st.integers(0, 8)),  # lending limit (capped at the nominal)
        st.sampled_from(list(QueueingStrategy)),
        st.sampled_from(list(ReclaimWithinCohort)),
        st.sampled_from(list(WithinClusterQueue)),
    ),
    min_size=1,
    max_size=3,
)
WORKLOADS = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 8), st.integers(0, 2)), min_size=1, max_size=12)


QueueSpec = tuple[int, int | None, int | None, QueueingStrategy, ReclaimWithinCohort, WithinClusterQueue]


def _queues(specs: list[QueueSpec]) -> list[ClusterQueue]:
    return [
        queue(f"q{i}", nominal, borrowing, None if lending is None else min(lending, nominal), "all", *policies)
        for i, (nominal, borrowing, lending, *policies) in enumerate(specs)
    ]


def _lends(spec: QueueSpec) -> int:
    """What a member lends its cohort: its lending limit (at most its nominal quota), else all its nominal quota."""
    nominal, _borrowing, lending, *_ = spec
    return nominal if lending is None else min(lending, nominal)


def _ceilings(specs: list[QueueSpec]) -> list[int]:
    """The most each queue may ever use, from the specs alone (Kueue's arithmetic, not the book's): its nominal
    quota plus what it may borrow, the others' lending capped by its borrowing limit."""
    ceilings = []
    for i, (nominal, borrowing, *_) in enumerate(specs):
        pool = sum(_lends(other) for j, other in enumerate(specs) if j != i)
        ceilings.append(nominal + (pool if borrowing is None else min(borrowing, pool)))
    return ceilings


def _within_quota(book: QuotaBook, specs: list[QueueSpec]) -> None:
    """Every queue within its nominal quota plus its borrowing limit, and the cohort lending no more than its
    members lend (usage beyond what a member keeps for itself, its nominal minus what it lends)."""
    lendable = used = 0
    for i, (spec, ceiling) in enumerate(zip(specs, _ceilings(specs), strict=True)):
        usage = book.usage[f"q{i}"].get(FR, 0)
        assert 0 <= usage <= ceiling, (i, usage, ceiling)
        kept = spec[0] - _lends(spec)
        lendable += _lends(spec)
        used += max(0, usage - kept)
    assert used <= lendable


@settings(max_examples=200, deadline=None)
@given(QUEUES, WORKLOADS, st.randoms(use_true_random=False))
def test_quota_is_never_exceeded_and_every_workload_that_fits_is_admitted_in_the_end(
    specs: list[QueueSpec],
    loads: list[tuple[int, int, int]],
    rnd: object,
) -> None:
    queues = _queues(specs)
    admitter = Admitter(objects(*queues))
    for ref, (which, cpu, priority) in enumerate(loads):
        cq = queues[which % len(queues)]
        admitter.add(workload(ref, cq.name, cpu, priority), float(ref))
        admitter.cycle(float(ref))
        _within_quota(admitter.book, specs)
        if ref % 3 == 2 and admitter.admitted:  # one ends now and then
            admitter.finish(sorted(admitter.admitted)[0])
    now = float(len(loads))
    for _ in range(10 * len(loads) + 10):  # drain: whatever is admitted ends
        admitter.cycle(now)
        _within_quota(admitter.book, specs)
        if not admitter.admitted:
            break
        for ref in list(admitter.admitted):
            admitter.finish(ref)
        now += 1.0
    for cq, ceiling in zip(queues, _ceilings(specs), strict=True):
        # only what can never fit waits, and in a StrictFIFO queue what waits behind it
        waiting = [wl for _, wl in admitter.pending[cq.name]]
        if cq.queueing_strategy is QueueingStrategy.STRICT_FIFO:
            waiting = waiting[:1]
        for wl in waiting:
            assert wl.requests[CPU] > ceiling, (wl.key, wl.requests, ceiling, wl.why)


def _job(index: int, namespace: str, cores: int, submit: float, run: float) -> WorkloadJob:
    pod = PodTemplate(name=f"j{index}", requests={CPU: cores * 1000}, run_time=run)
    return WorkloadJob(
        id=f"{namespace}/j{index}",
        submit_time=submit,
        kind=JobKind.POD,
        name=f"j{index}",
        namespace=namespace,
        pods=[pod],
        requested_processors=cores,
        queue_name="q",
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(1, 4), st.integers(0, 20), st.integers(1, 50)), max_size=10),
    st.integers(4, 8),
    st.one_of(st.none(), st.integers(0, 4)),
    st.sampled_from(["kube-default", "kubeflux"]),
)
def test_through_the_simulator_every_job_runs_and_quota_holds(
    jobs: list[tuple[int, int, int, int]], nominal: int, borrowing: int | None, scheduler_name: str
) -> None:
    queues = [
        queue("q0", nominal * 1000, None if borrowing is None else borrowing * 1000, reclaim=ReclaimWithinCohort.ANY),
        queue("q1", nominal * 1000),
    ]
    kueue = objects(*queues)
    work = [_job(i, f"q{which}", cores, submit, run) for i, (which, cores, submit, run) in enumerate(jobs)]
    nodes = [Node(f"n{i}", allocatable={CPU: 8000, MEMORY: 2**34}) for i in range(2)]
    scheduler = create(scheduler_name)
    sim = Simulation(Workload("prop", work, kueue=kueue), nodes, {scheduler.name: scheduler})
    record = sim.run()
    assert sim.kueue is not None
    for name, points in sim.kueue.series.points.items():
        quota = kueue.cluster_queues[name].quotas()[FR]
        top = None if quota.borrowing_limit is None else quota.nominal + quota.borrowing_limit
        for _at, used, _borrowed in points:
            assert top is None or used.get(CPU, 0) <= top
            assert used.get(CPU, 0) <= 2 * nominal * 1000  # the whole cohort's quota
    assert all(job.finish_time is not None for job in record.jobs), record.problems
    assert record.admission["never_admitted"] == 0


def test_the_share_is_kueues_weighted_dominant_resource_share() -> None:
    """What a ClusterQueue borrows above its nominal quota, × 1000 / what its cohort lends (nominal − guaranteed
    quota of every member), divided by its weight; 0 without borrowing or a cohort; infinite borrowing at weight 0."""
    book = QuotaBook([queue("a", 4), queue("b", 6, lending=2), queue("alone", 8, cohort="")])
    assert book.lendable == {"all": {CPU: 4 + 2}}
    book.add("a", {FR: 7})
    assert book.share("a", 1.0) == pytest.approx(3 * 1000 / 6)
    assert book.share("a", 2.0) == pytest.approx(3 * 1000 / 6 / 2)
    assert book.share("a", 1.0, {FR: 1}) == pytest.approx(4 * 1000 / 6)  # with a workload admitted
    assert book.share("a", 0.0) == float("inf")
    assert book.share("b", 0.0) == 0.0  # within its nominal quota, at any weight
    book.add("alone", {FR: 8})
    assert book.share("alone", 1.0) == 0.0
