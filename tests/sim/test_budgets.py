"""PriorityClasses and PodDisruptionBudgets in ``simulate``'s workload files, and the simulated Eviction API that
enforces the budgets: the shell's part of preemption, driven by a small scheduler that evicts the pods it is told to
(the preemption choices are the schedulers' own, tested with them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeflux.scheduler.interface import ClusterEvent, Decision, EventKind, Evict
from kubeflux.scheduler.objects import CPU, MEMORY, DisruptionBudget, Node
from kubeflux.sim.baselines import available, create
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.command import merge_workloads
from kubeflux.sim.driver import simulate
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.model import Workload

NODES = [Node(f"n{i}", allocatable={CPU: 4000, MEMORY: 2**34}) for i in range(2)]


class EvictingScheduler:
    """FCFS, and at each of ``evictions``' times an :class:`Evict` of each pod named there (through the Eviction
    API unless ``budgets`` is False); keeps the budgets it hears of."""

    def __init__(self, evictions: dict[float, list[str]], *, budgets: bool = True) -> None:
        self.inner = FCFSScheduler()
        self.name = self.inner.name
        self.evictions = dict(evictions)
        self.budgets = budgets
        self.heard: list[tuple[EventKind, DisruptionBudget, float]] = []

    def observe(self, event: ClusterEvent, now: float) -> None:
        if isinstance(event.obj, DisruptionBudget):
            self.heard.append((event.kind, event.obj, now))
        self.inner.observe(event, now)

    def schedule(self, now: float) -> list[Decision]:
        decisions: list[Decision] = list(self.inner.schedule(now))
        for key in self.evictions.pop(now, []):
            decisions.append(Evict(key, "", "default/urgent", f"Preempted by default/urgent at {now:g}", self.budgets))
        return decisions

    def next_wakeup(self, now: float) -> float | None:
        times = [t for t in self.evictions if t > now]
        inner = self.inner.next_wakeup(now)
        if inner is not None:
            times.append(inner)
        return min(times, default=None)


def _pod(name: str, labels: dict[str, str] | None = None, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels or {"app": "web"},
            "annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "100s"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }


def _budget(name: str, **spec: object) -> dict[str, object]:
    spec = {"selector": {"matchLabels": {"app": "web"}}, **spec}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}


def _class(name: str, value: int, **fields: object) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def _workload(tmp_path: Path, *objects: object) -> Workload:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return read_manifests(path)


def _run(workload: Workload, scheduler: EvictingScheduler) -> RunRecord:
    return simulate(workload, NODES, {scheduler.name: scheduler})


def _ends(run: RunRecord) -> dict[str, tuple[str, float | None]]:
    return {p.pod: (p.reason, p.end_time) for p in run.pods}


def test_an_eviction_the_budget_allows_ends_the_pod_preempted_and_the_next_is_refused(tmp_path: Path) -> None:
    workload = _workload(tmp_path, _pod("a"), _pod("b"), _pod("c"), _budget("web", minAvailable=2))
    scheduler = EvictingScheduler({10.0: ["default/a", "default/b"]})
    run = _run(workload, scheduler)
    ends = _ends(run)
    assert ends["default/a"] == ("Preempted", 10.0)  # 3 healthy, 2 needed: one may go
    assert ends["default/b"] == ("Completed", 100.0)  # then 2 healthy, 2 needed
    refused = [p for p in run.problems if "could not evict pod default/b" in p]
    assert refused == [
        "scheduler 'fcfs' could not evict pod default/b: Cannot evict pod as it would violate the pod's disruption "
        "budget. The disruption budget web needs 2 healthy pods and has 2 currently"
    ]


def test_a_plain_delete_ignores_the_budgets_as_kube_schedulers_preemption_does(tmp_path: Path) -> None:
    workload = _workload(tmp_path, _pod("a"), _pod("b"), _budget("web", minAvailable=2))
    run = _run(workload, EvictingScheduler({10.0: ["default/a", "default/b"]}, budgets=False))
    assert _ends(run) == {"default/a": ("Preempted", 10.0), "default/b": ("Preempted", 10.0)}
    assert not [p for p in run.problems if "could not evict" in p]


@pytest.mark.parametrize(
    ("spec", "labels", "evicted"),
    [
        pytest.param({"maxUnavailable": 1}, None, False, id="max-unavailable-of-bare-pods-allows-nothing"),
        pytest.param({"minAvailable": "50%"}, None, False, id="a-percentage-of-bare-pods-allows-nothing"),
        pytest.param({"minAvailable": 0}, None, True, id="min-available-0"),
        pytest.param({"minAvailable": 5}, {"app": "db"}, True, id="a-budget-that-does-not-select-the-pod"),
        pytest.param({"minAvailable": 5, "selector": {}}, {"app": "db"}, False, id="an-empty-selector-selects-all"),
        pytest.param({"minAvailable": 5, "selector": None}, None, True, id="no-selector-selects-none"),
    ],
)
def test_what_each_budget_allows(
    tmp_path: Path, spec: dict[str, object], labels: dict[str, str] | None, evicted: bool
) -> None:
    workload = _workload(tmp_path, _pod("a", labels), _pod("b"), _budget("web", **spec))
    run = _run(workload, EvictingScheduler({10.0: ["default/a"]}))
    assert (_ends(run)["default/a"][0] == "Preempted") is evicted


def test_two_budgets_of_one_pod_refuse_its_eviction(tmp_path: Path) -> None:
    workload = _workload(tmp_path, _pod("a"), _budget("one", minAvailable=0), _budget("two", minAvailable=0))
    run = _run(workload, EvictingScheduler({10.0: ["default/a"]}))
    assert _ends(run)["default/a"][0] == "Completed"
    assert any("more than one PodDisruptionBudget" in p for p in run.problems)


def test_a_pending_pod_is_evicted_whatever_the_budget(tmp_path: Path) -> None:
    workload = _workload(
        tmp_path,
        *(_pod(f"p{i}") for i in range(9)),  # 8 cores: the ninth waits
        _budget("web", minAvailable=100),
    )
    run = _run(workload, EvictingScheduler({10.0: ["default/p8"]}))
    assert _ends(run)["default/p8"] == ("Preempted", 10.0)


def test_every_scheduler_hears_of_the_budgets_at_the_start(tmp_path: Path) -> None:
    workload = _workload(tmp_path, _pod("a"), _budget("web", minAvailable=1))
    scheduler = EvictingScheduler({})
    _run(workload, scheduler)
    assert [(kind, budget.key, budget.min_available, now) for kind, budget, now in scheduler.heard] == [
        (EventKind.ADDED, "default/web", 1, 0.0)
    ]


@pytest.mark.parametrize("name", available())
def test_no_scheduler_fails_on_a_workload_with_budgets(tmp_path: Path, name: str) -> None:
    workload = _workload(tmp_path, _pod("a"), _budget("web", maxUnavailable="10%"))
    scheduler = create(name)
    run = simulate(workload, NODES, {scheduler.name: scheduler})
    assert [p.reason for p in run.pods] == ["Completed"]


# --- reading the files --------------------------------------------------------------------------------------------


def test_pods_and_job_templates_take_priority_and_policy_from_their_class(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**_pod("x")["spec"], "restartPolicy": "Never", "priorityClassName": "polite"}}},  # type: ignore[dict-item]
    }
    workload = _workload(
        tmp_path,
        _pod("urgent", priorityClassName="urgent"),
        job,
        _pod("plain"),
        _class("urgent", 1000),
        _class("polite", 10, preemptionPolicy="Never"),
        _class("batch", -5, globalDefault=True),
    )
    assert workload.problems == []
    templates = {job.id: job.pods[0] for job in workload.jobs}
    assert {k: (t.priority, t.preemption_policy) for k, t in templates.items()} == {
        "default/urgent": (1000, "PreemptLowerPriority"),
        "default/j": (10, "Never"),
        "default/plain": (-5, "PreemptLowerPriority"),  # the global default class
    }
    assert templates["default/plain"].manifest["spec"]["priorityClassName"] == "batch"  # type: ignore[index]
    assert [pc.name for pc in workload.priority_classes] == ["urgent", "polite", "batch"]


def test_a_pod_naming_an_unknown_class_is_refused_and_a_job_rejected(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**_pod("x")["spec"], "restartPolicy": "Never", "priorityClassName": "nope"}}},  # type: ignore[dict-item]
    }
    workload = _workload(tmp_path, _pod("lost", priorityClassName="nope"), job)
    assert workload.problems == [
        'w.yaml: document 1: Pod default/lost: spec.priorityClassName: pods "lost" is forbidden: no PriorityClass '
        "with name nope was found; skipped",
        'w.yaml: document 2: Job default/j: spec.template.spec.priorityClassName: pods "j" is forbidden: no '
        "PriorityClass with name nope was found; rejected",
    ]
    assert [(job.id, bool(job.rejected)) for job in workload.jobs] == [("default/j", True)]


def test_a_pod_giving_its_own_priority_without_a_class_keeps_it(tmp_path: Path) -> None:
    workload = _workload(tmp_path, _pod("a", priority=7), _class("batch", 1, globalDefault=True))
    assert workload.jobs[0].pods[0].priority == 7


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        pytest.param(
            _class("huge", 2_000_000_000),
            "PriorityClass huge: value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
            id="class-value-too-high",
        ),
        pytest.param(
            _class("odd", 1, preemptionPolicy="Sometimes"),
            'PriorityClass odd: preemptionPolicy: Unsupported value: "Sometimes": supported values: '
            '"PreemptLowerPriority", "Never"',
            id="class-policy",
        ),
        pytest.param(
            _class("text", "5"),  # type: ignore[arg-type]
            "PriorityClass text: cannot be handled as a PriorityClass: json: cannot unmarshal string into Go struct "
            "field PriorityClass.value of type int32",
            id="class-value-a-string",
        ),
        pytest.param(
            {**_class("v", 1), "apiVersion": "scheduling.k8s.io/v1beta1"},
            "PriorityClass v: apiVersion: expected 'scheduling.k8s.io/v1', got 'scheduling.k8s.io/v1beta1'",
            id="class-version",
        ),
        pytest.param(
            _budget("web", minAvailable="150%"),
            'PodDisruptionBudget default/web: spec.minAvailable: Invalid value: "150%": must not be greater than 100%',
            id="budget-percentage",
        ),
        pytest.param(
            _budget("web", minAvailable=1, maxUnavailable=1),
            'PodDisruptionBudget default/web: spec: Invalid value: {"MinAvailable":1,"Selector":{"matchLabels":'
            '{"app":"web"}},"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable '
            "cannot be both set",
            id="budget-both-bounds",
        ),
        pytest.param(
            _budget("web", minAvailable=1.5),
            "PodDisruptionBudget default/web: cannot be handled as a PodDisruptionBudget: json: cannot unmarshal "
            "number 1.5 into Go struct field PodDisruptionBudgetSpec.spec.minAvailable of type int32",
            id="budget-fraction",
        ),
        pytest.param(
            _budget("web", selector={"matchExpressions": [{"key": "a", "operator": "In"}]}),
            "PodDisruptionBudget default/web: spec.selector.matchExpressions[0].values: Required value: must be "
            "specified when `operator` is 'In' or 'NotIn'",
            id="budget-selector",
        ),
    ],
)
def test_bad_classes_and_budgets_are_refused_naming_file_and_field(tmp_path: Path, obj: object, problem: str) -> None:
    workload = _workload(tmp_path, _pod("a"), obj)
    assert workload.problems == [f"w.yaml: document 2: {problem}; skipped"]
    assert (workload.priority_classes, workload.budgets) == ([], [])


def test_a_second_global_default_and_a_duplicate_are_refused(tmp_path: Path) -> None:
    workload = _workload(
        tmp_path,
        _class("a", 1, globalDefault=True),
        _class("b", 2, globalDefault=True),
        _budget("web", minAvailable=1),
        _budget("web", minAvailable=2),
    )
    assert workload.problems == [
        "w.yaml: document 2: PriorityClass b: globalDefault: forbidden: PriorityClass a is already marked as "
        "default. Only one default can exist; skipped",
        "w.yaml: document 4: PodDisruptionBudget default/web: metadata.name: defined twice (first in document 3); "
        "skipped",
    ]
    assert [b.min_available for b in workload.budgets] == [1]


def test_merged_workloads_keep_every_files_budgets(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = _workload(tmp_path / "one", _pod("a"), _budget("first", minAvailable=1))
    two = _workload(tmp_path / "two", _pod("b"), _budget("second", minAvailable=1), _class("c", 3))
    merged = merge_workloads([one, two])
    assert sorted(b.key for b in merged.budgets) == ["default/first", "default/second"]
    assert [pc.name for pc in merged.priority_classes] == ["c"]


def test_merged_workloads_say_when_a_class_differs(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = _workload(tmp_path / "one", _pod("a"), _class("c", 3))
    two = _workload(tmp_path / "two", _pod("b"), _class("c", 4))
    merged = merge_workloads([one, two])
    assert [(pc.name, pc.value) for pc in merged.priority_classes] == [("c", 3)]
    assert merged.problems == ["w: PriorityClass c differs from an earlier file's; the first is kept"]
