"""AppWrappers (``workload.codeflare.dev/v1beta2``) behind Kueue (``docs/kueue.md``): each is one workload of all its
components' pods, held until admitted, its components created on admission with the flavor's node label and
toleration, its quota released once every component is done; bad AppWrappers are refused naming the field
(issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.baselines import create
from kubeflux.sim.driver import Simulation, simulate
from kubeflux.sim.metrics import write_jobs_csv
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import read_cluster
from kubeflux.sim.workloads.manifests import read_manifests
from tests.shared import REPO

EXAMPLE = REPO / "examples" / "workloads" / "kueue-appwrapper.yaml"
SPOT = REPO / "examples" / "clusters" / "kueue-spot.yaml"


def owned(name: str) -> dict[str, Scheduler]:
    scheduler = create(name)
    return {scheduler.name: scheduler}


def run(path: Path, scheduler: str = "kube-default") -> RunRecord:
    return simulate(load_workload(path), read_cluster(SPOT), owned(scheduler))


@pytest.mark.parametrize("scheduler", ["kube-default", "kubeflux", "coscheduling"])
def test_an_app_wrapper_is_admitted_whole_on_one_flavor_and_done_when_all_its_components_are(scheduler: str) -> None:
    record = run(EXAMPLE, scheduler)
    rows = {job.job_id: job for job in record.jobs}
    runs = {key: (row.starting_time, row.finish_time) for key, row in rows.items()}
    assert runs == {
        "default/trainer-workers": (0.0, 300.0),
        "default/trainer-head": (0.0, 100.0),
        "default/evaluator-worker": (1.0, 201.0),
        "default/evaluator-db": (1.0, 201.0),
        "default/report-render": (300.0, 350.0),  # trainer's quota is released at 300 s, not at its head's end
        "default/report-mail": (300.0, 350.0),
    }
    nodes = {pod.pod: pod.node for pod in record.pods}
    assert all(nodes[pod].startswith("od-") for pod in nodes if pod.startswith(("default/trainer", "default/report")))
    assert all(nodes[pod].startswith("spot-") for pod in nodes if pod.startswith("default/evaluator"))  # tolerated
    assert {row.cluster_queue for row in rows.values()} == {"cluster-queue"}
    assert rows["default/report-mail"].admission_time == 300.0 and rows["default/report-mail"].submission_time == 2.0
    assert record.admission["admitted_jobs"] == 3  # three AppWrappers, one Kueue workload each
    assert record.admission["mean_admission_wait"] == pytest.approx((0 + 0 + 298) / 3)


def test_the_components_carry_the_flavor_and_the_app_wrapper_label() -> None:
    sim = Simulation(load_workload(EXAMPLE), read_cluster(SPOT), owned("kube-default"))
    sim.run()
    made = {job.wjob.id: job.wjob.pods[0] for job in sim.cluster.book.jobs}
    evaluator = made["default/evaluator-db"]
    assert evaluator.node_selector == {"instance-type": "spot"}
    assert [t.key for t in evaluator.tolerations] == ["spot"]
    assert evaluator.labels["workload.codeflare.dev/appwrapper"] == "evaluator"
    assert made["default/trainer-head"].node_selector == {"instance-type": "on-demand"}


def test_jobs_csv_gives_each_component_its_app_wrappers_admission(tmp_path: Path) -> None:
    record = run(EXAMPLE)
    write_jobs_csv(record, tmp_path / "jobs.csv")
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    header = lines[0].split(",")
    rows = {line.split(",")[header.index("job_id")]: line.split(",") for line in lines[1:]}
    wait = header.index("admission_wait")
    assert float(rows["default/report-render"][wait]) == float(rows["default/report-mail"][wait]) == 298.0


def test_without_kueue_objects_an_app_wrappers_components_run_at_once(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    wrappers = text[text.index("apiVersion: workload.codeflare.dev") :]
    path = tmp_path / "plain.yaml"
    path.write_text(wrappers)
    record = run(path)
    starts = {job.job_id: job.starting_time for job in record.jobs}
    assert starts["default/report-render"] == 2.0 and starts["default/evaluator-db"] == 1.0


def test_a_preempted_app_wrapper_is_evicted_whole(tmp_path: Path) -> None:
    """A high-priority AppWrapper that needs on-demand evicts the AppWrapper holding its quota, all its components at
    once (withinClusterQueue: LowerPriority); they are admitted again at once on spot, where they all run again."""
    text = EXAMPLE.read_text().replace(
        "  namespaceSelector: {}\n", "  namespaceSelector: {}\n  preemption: {withinClusterQueue: LowerPriority}\n"
    )
    high = """---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: workload.codeflare.dev/v1beta2
kind: AppWrapper
metadata:
  name: urgent
  labels: {kueue.x-k8s.io/queue-name: user-queue}
  annotations: {sim.kubeflux.io/submit-time: "10"}
spec:
  components:
    - template:
        apiVersion: v1
        kind: Pod
        metadata: {name: urgent-0, annotations: {pod-complete.stage.kwok.x-k8s.io/delay: "50s"}}
        spec:
          priorityClassName: urgent
          nodeSelector: {instance-type: on-demand}
          containers: [{name: main, image: busybox, resources: {requests: {cpu: "8"}}}]
"""
    path = tmp_path / "urgent.yaml"
    path.write_text(text + high)
    record = run(path)
    rows = {job.job_id: job for job in record.jobs}
    assert (rows["default/urgent-0"].starting_time, rows["default/urgent-0"].finish_time) == (10.0, 60.0)
    assert rows["default/trainer-workers"].quota_evictions == rows["default/trainer-head"].quota_evictions == 1
    assert rows["default/trainer-head"].finish_time == 111.0  # both run again from 11 s (requeued 1 s after), on spot
    assert rows["default/trainer-workers"].finish_time == 311.0
    preempted = sorted((pod.pod, pod.node[:3]) for pod in record.pods if pod.reason == "Preempted")
    assert preempted == [("default/trainer-head", "od-"), *((f"default/trainer-workers-{i}", "od-") for i in (0, 1))]
    again = [pod.node for pod in record.pods if pod.pod.startswith("default/trainer") and pod.reason == "Completed"]
    assert len(again) == 3 and all(node.startswith("spot-") for node in again)


def component(template: str, extra: str = "") -> str:
    return (
        "apiVersion: workload.codeflare.dev/v1beta2\nkind: AppWrapper\nmetadata: {name: aw, namespace: team}\n"
        f"spec:\n  components:\n    - {extra}template:\n{template}"
    )


POD = (
    "        apiVersion: v1\n        kind: Pod\n        metadata: {name: p}\n"
    "        spec: {containers: [{name: c, image: busybox}]}\n"
)
BAD = {
    "a PyTorchJob": (
        component("        apiVersion: kubeflow.org/v1\n        kind: PyTorchJob\n        metadata: {name: t}\n"),
        "AppWrapper team/aw: spec.components[0].template.kind: 'PyTorchJob' ('kubeflow.org/v1') is not supported: "
        "only batch/v1 Job and v1 Pod components",
    ),
    "another namespace": (
        component(POD.replace("{name: p}", "{name: p, namespace: other}")),
        "AppWrapper team/aw: spec.components[0].template.metadata.namespace: must be the AppWrapper's namespace "
        "'team', got 'other'",
    ),
    "a pod set elsewhere": (
        component(POD, "podSets: [{path: template.spec}]\n      "),
        "AppWrapper team/aw: spec.components[0].podSets[0].path: must be 'template', got 'template.spec'",
    ),
    "a component's own submit time": (
        component(POD.replace("{name: p}", "{name: p, annotations: {sim.kubeflux.io/submit-time: '5'}}")),
        "AppWrapper team/aw: spec.components[0].template.metadata.annotations.sim.kubeflux.io/submit-time: a "
        "component is created when its AppWrapper is",
    ),
    "a bad pod": (
        component(POD.replace("image: busybox", "image: busybox, resources: {requests: {cpu: lots}}")),
        "AppWrapper team/aw: spec.components[0].template.spec.containers[0].resources.requests.cpu:",
    ),
    "no components": (
        "apiVersion: workload.codeflare.dev/v1beta2\nkind: AppWrapper\nmetadata: {name: aw, namespace: team}\n"
        "spec: {components: []}\n",
        "AppWrapper team/aw: spec.components: must list at least one component, got []",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_app_wrapper_is_reported_with_its_field_and_skipped(tmp_path: Path, case: str) -> None:
    text, problem = BAD[case]
    path = tmp_path / "w.yaml"
    path.write_text(text + "---\n" + component(POD.replace("{name: p}", "{name: fine}")).replace("aw,", "ok,"))
    workload = read_manifests(path)
    assert len(workload.problems) == 1 and workload.problems[0].startswith(f"w.yaml: document 1: {problem}"), (
        workload.problems
    )
    assert [job.id for job in workload.jobs] == ["team/fine"]
    assert workload.jobs[0].app_wrapper is not None and workload.jobs[0].app_wrapper.key == "team/ok"


def test_a_refused_app_wrapper_leaves_its_components_names_free(tmp_path: Path) -> None:
    refused = component(POD + "    - template:\n" + POD.replace("{name: p}", "{name: q, namespace: other}"))
    path = tmp_path / "w.yaml"
    path.write_text(refused + "---\n" + component(POD).replace("aw,", "again,"))
    workload = read_manifests(path)
    assert len(workload.problems) == 1 and "spec.components[1].template.metadata.namespace" in workload.problems[0]
    assert [(job.id, job.app_wrapper.key if job.app_wrapper else "") for job in workload.jobs] == [
        ("team/p", "team/again")
    ]


def test_wait_for_pods_ready_evicts_an_app_wrapper_whose_component_never_starts(tmp_path: Path) -> None:
    """waitForPodsReady counts the pods of every component: the trainer's head pod selects nodes that do not exist,
    so 2 minutes after its admission the whole AppWrapper is evicted (its workers too), then deactivated."""
    config = (
        "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  enable: true\n"
        "  blockAdmission: false\n  timeout: 2m\n  requeuingStrategy: {backoffLimitCount: 0}\n---\n"
    )
    text = EXAMPLE.read_text().replace(
        "          containers: [{name: head,",
        "          nodeSelector: {accelerator: gpu}\n          containers: [{name: head,",
    )
    path = tmp_path / "never.yaml"
    path.write_text(config + text)
    record = run(path)
    ended = sorted((pod.pod, pod.end_time, pod.reason) for pod in record.pods if pod.pod.startswith("default/trainer"))
    assert ended == [
        ("default/trainer-head", 120.0, "PodsReadyTimeout"),
        ("default/trainer-workers-0", 120.0, "PodsReadyTimeout"),
        ("default/trainer-workers-1", 120.0, "PodsReadyTimeout"),
    ]
    assert record.admission["pods_ready_timeouts"] == 1
    assert any("deactivated" in problem and "default/trainer" in problem for problem in record.problems)
    rows = {job.job_id: job for job in record.jobs}
    assert rows["default/report-render"].starting_time == 120.0  # the trainer's quota is released at its eviction


def test_a_flavor_must_suit_every_component(tmp_path: Path) -> None:
    """The trainer's second component, its head pod, selects an instance type neither flavor has: the AppWrapper is
    never admitted (its first component alone would fit on-demand), and the run says why."""
    text = EXAMPLE.read_text().replace(
        "          containers: [{name: head,",
        "          nodeSelector: {instance-type: gpu}\n          containers: [{name: head,",
    )
    path = tmp_path / "nowhere.yaml"
    path.write_text(text)
    record = run(path)
    rows = {job.job_id: job for job in record.jobs}
    assert rows["default/trainer-workers"].starting_time is None and rows["default/trainer-head"].starting_time is None
    assert rows["default/trainer-head"].reason == (
        "not admitted by Kueue: flavor on-demand doesn't match node affinity (instance-type=gpu); flavor spot doesn't "
        "match node affinity (instance-type=gpu)"
    )
    assert record.admission["never_admitted"] == 1
