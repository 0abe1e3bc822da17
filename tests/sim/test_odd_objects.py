"""Odd objects built through the Python API get the same clear answer from the simulator compiled (mypyc) and pure.

Compiled, the simulator's hot modules check every value they read against its annotation, so a float where a
field says ``int`` would fail as a bare ``TypeError: int object expected; got float`` where the pure sources went
on or named the field. Nodes and workload jobs are therefore checked first (a ValueError naming the field), a bad
resource request still rejects only its job, and a scheduler's decision that fails with a TypeError is ignored
and named in the run's problems.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

import kubeflux.scheduler
import kubeflux.sim
from kubeflux.scheduler.interface import Bind, ClusterEvent, Decision, EventKind
from kubeflux.scheduler.objects import CPU, MEMORY, Node, Pod
from kubeflux.sim.baselines.easy import EasyScheduler
from kubeflux.sim.clock import EventLoop
from kubeflux.sim.cluster import Cluster
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import FinalState, RunRecord
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob


def _node(name: Any = "n0", **allocatable: Any) -> Node:
    return Node(name, allocatable={CPU: 4000, MEMORY: 2**33, **allocatable})


def _job(template: dict[str, Any] | None = None, **fields: Any) -> WorkloadJob:
    pod = PodTemplate(**{"name": "p", "requests": {CPU: 1000}, "run_time": 10.0, **(template or {})})
    return WorkloadJob(**{"id": "1", "submit_time": 0.0, "kind": JobKind.TRACE, "name": "j1", "pods": [pod], **fields})


def _run(job: WorkloadJob, nodes: list[Node] | None = None) -> RunRecord:
    scheduler = EasyScheduler()
    return simulate(Workload("w", [job]), nodes or [_node()], {scheduler.name: scheduler})


@pytest.mark.parametrize(
    ("node", "field"),
    [
        (_node(cpu=4000.0), "allocatable[cpu]"),
        (_node(cpu=True), "allocatable[cpu]"),
        (_node(cpu="4"), "allocatable[cpu]"),
        (_node(5), "name"),
        (Node("n0", allocatable={CPU: 4000}, labels={"zone": 5}), "labels[zone]"),
    ],
    ids=["cpu a float", "cpu a bool", "cpu a string", "name a number", "label value a number"],
)
def test_an_odd_node_is_refused_naming_its_field(node: Node, field: str) -> None:
    with pytest.raises(ValueError, match=f"Node .*{re.escape(field)}: must"):
        _run(_job(), [node])


def test_a_node_updated_with_an_odd_amount_is_refused_naming_its_field() -> None:
    cluster = Cluster(EventLoop(), [_node()])
    with pytest.raises(ValueError, match=r"allocatable\[cpu\]: must be a whole number"):
        cluster.update_node("n0", allocatable={CPU: 1.5})
    assert cluster.nodes[0].allocatable[CPU] == 4000  # unchanged


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (_job(min_member=1.0), "min_member"),
        (_job(requested_time="60"), "requested_time"),
        (_job(namespace=None), "namespace"),
        (_job(template={"scheduler_name": None}), r"pods\[0\]\.scheduler_name"),
        (_job(template={"priority": 1.5}), r"pods\[0\]\.priority"),
        (_job(template={"exit_code": 1.0}), r"pods\[0\]\.exit_code"),
        (_job(template={"run_time": "10"}), r"pods\[0\]\.run_time"),
        (_job(template={"active_deadline_seconds": "5"}), r"pods\[0\]\.active_deadline_seconds"),
        (_job(template={"annotations": {"a": 1}}), r"pods\[0\]\.annotations\[a\]"),
    ],
    ids=["minMember a float", "walltime a string", "namespace None", "scheduler None", "priority a float",
         "exit code a float", "run time a string", "deadline a string", "annotation value a number"],
)  # fmt: skip
def test_a_workload_job_with_an_odd_field_is_refused_naming_it(job: WorkloadJob, field: str) -> None:
    with pytest.raises(ValueError, match=rf"workload job '1': {field}: must"):
        _run(job)


def _without(template_field: str) -> WorkloadJob:
    job = _job()
    delattr(job.pods[0], template_field)  # a slot never set: reading it raises AttributeError
    return job


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (_job(min_member=True), "min_member: must be an integer, got True"),
        (_job(template={"labels": {5: "x"}}), r"pods\[0\]\.labels\[5\]: must map strings to strings, got 5: 'x'"),
        (_without("priority"), r"pods\[0\]\.priority: must be an integer, got None"),
        (_without("labels"), r"pods\[0\]\.labels: must be a mapping, got None"),
    ],
    ids=["minMember a bool", "label key a number", "priority missing", "labels missing"],
)  # fmt: skip
def test_a_workload_job_says_which_field_is_odd_and_what_it_holds(job: WorkloadJob, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^workload job '1': {message}$"):
        _run(job)


@pytest.mark.parametrize("amount", [1000.0, True, "1"], ids=["a float", "a bool", "a string"])
def test_an_odd_request_rejects_only_its_job_naming_the_field(amount: object) -> None:
    record = _run(_job(template={"requests": {CPU: amount}}))
    assert [job.final_state for job in record.jobs] == [FinalState.REJECTED]
    assert record.problems == [f"job 1: pod 'p': requests['cpu'] must be a non-negative integer, got {amount!r}"]
    assert record.jobs[0].requested_number_of_resources == 1


def test_whole_numbers_where_seconds_are_floats_run_as_floats_do() -> None:
    as_ints = _run(_job(submit_time=0, template={"run_time": 10, "active_deadline_seconds": 5}, requested_time=20))
    as_floats = _run(_job(template={"active_deadline_seconds": 5.0}, requested_time=20.0))
    assert [(j.final_state, j.starting_time, j.finish_time) for j in as_ints.jobs] == [
        (j.final_state, j.starting_time, j.finish_time) for j in as_floats.jobs
    ]
    assert as_ints.jobs[0].final_state is FinalState.COMPLETED_WALLTIME_REACHED


class _BindsTo:
    """A scheduler written against the interface alone (no kubeflux base class): binds every pod to ``node``."""

    name = "duck"

    def __init__(self, node: Any, uid: bool = True) -> None:
        self.node, self.uid, self.pending = node, uid, list[Pod]()

    def observe(self, event: ClusterEvent, now: float) -> None:
        if isinstance(event.obj, Pod) and event.kind is EventKind.ADDED:
            self.pending.append(event.obj)

    def schedule(self, now: float) -> list[Decision]:
        decisions: list[Decision] = [Bind(p.key, p.uid if self.uid else None, self.node) for p in self.pending]  # type: ignore[arg-type]
        self.pending = []
        return decisions

    def next_wakeup(self, now: float) -> float | None:
        return None


def test_a_duck_typed_scheduler_runs_its_jobs() -> None:
    scheduler = _BindsTo("n0")
    record = simulate(Workload("w", [_job()]), [_node()], {scheduler.name: scheduler})
    assert [(j.final_state, j.starting_time) for j in record.jobs] == [(FinalState.COMPLETED_SUCCESSFULLY, 0.0)]


def test_a_decision_with_a_field_not_of_its_type_is_refused() -> None:
    """Compiled, the decision classes check their fields' types as they are made: a Bind to node ``None`` raises
    TypeError in the scheduler's own code, at the line that makes it. The pure sources make it and ask the cluster
    for node None, which refuses the Binding (a FailedBinding event): the pod waits."""
    scheduler = _BindsTo(None)
    if kubeflux.scheduler.COMPILED:
        with pytest.raises(TypeError, match="got None"):
            simulate(Workload("w", [_job()]), [_node()], {scheduler.name: scheduler})
        return
    record = simulate(Workload("w", [_job()]), [_node()], {scheduler.name: scheduler})
    assert [j.final_state for j in record.jobs] == [FinalState.NOT_FINISHED]
    assert [p for p in record.problems if "sent an invalid decision" in p] == []
