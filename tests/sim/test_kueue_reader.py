"""Kueue's objects in a workload file: read as Kueue's webhooks take them, refused with the file, the document, the
object and the field (the rest of the file still runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, MEMORY, Node, Taint, Toleration
from kubeflux.sim.baselines import create
from kubeflux.sim.command import merge_workloads
from kubeflux.sim.driver import simulate
from kubeflux.sim.kueue.objects import QueueingStrategy, ReclaimWithinCohort, ResourceQuota
from kubeflux.sim.workloads.manifests import read_manifests
from tests.shared import REPO

FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: default-flavor}\n"


def cluster_queue(spec: str, name: str = "cq") -> str:
    return f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: {name}}}\nspec:\n{spec}"


GOOD = """  cohort: all
  resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
        - name: default-flavor
          resources:
            - {name: cpu, nominalQuota: 9, borrowingLimit: "1.5", lendingLimit: 4}
            - {name: memory, nominalQuota: 36Gi}
"""


def read(tmp_path: Path, *documents: str) -> tuple[object, list[str]]:
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join(documents))
    workload = read_manifests(path)
    return workload.kueue, workload.problems


def test_the_examples_read_without_problems() -> None:
    for path in sorted((REPO / "examples" / "workloads").glob("kueue-*.yaml")):
        workload = read_manifests(path)
        assert workload.kueue, path
        assert workload.problems == [], path
        unqueued = {"default/unqueued", "default/outside-kueue"}  # work Kueue does not hold, on purpose
        assert all(job.queue_name for job in workload.jobs if job.id not in unqueued), path


def test_a_cluster_queue_reads_as_kueue_defaults_it(tmp_path: Path) -> None:
    kueue, problems = read(tmp_path, FLAVOR, cluster_queue(GOOD))
    assert problems == []
    assert kueue is not None
    cq = kueue.cluster_queues["cq"]  # type: ignore[attr-defined]
    assert cq.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert cq.reclaim_within_cohort is ReclaimWithinCohort.NEVER
    assert cq.namespace_selector is None  # no selector: no namespace (Kueue's nil selector)
    assert cq.quotas() == {
        ("default-flavor", CPU): ResourceQuota(9000, 1500, 4000),
        ("default-flavor", MEMORY): ResourceQuota(36 * 2**30),
    }


def test_a_flavor_keeps_its_labels_taints_and_tolerations(tmp_path: Path) -> None:
    flavor = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: spot}\nspec:\n"
        "  nodeLabels: {instance-type: spot}\n  nodeTaints: [{key: spot, value: 'true', effect: NoSchedule}]\n"
        "  tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]\n"
    )
    kueue, problems = read(tmp_path, flavor)
    assert problems == []
    read_flavor = kueue.flavors["spot"]  # type: ignore[attr-defined]
    assert read_flavor.node_labels == {"instance-type": "spot"}
    assert read_flavor.node_taints == (Taint("spot", "true", "NoSchedule"),)
    assert read_flavor.tolerations == (Toleration("spot", "Exists", "", "NoSchedule"),)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param(
            GOOD.replace("cohort: all", "cohort: ''"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: must be nil when "
            "cohort is empty",
            id="borrowing-without-cohort",
        ),
        pytest.param(
            GOOD.replace("lendingLimit: 4", "lendingLimit: 10"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: must be less than or "
            "equal to the nominalQuota",
            id="lending-above-nominal",
        ),
        pytest.param(
            GOOD.replace("{name: memory, nominalQuota: 36Gi}", "{name: gpu, nominalQuota: 1}"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[1].name: must be memory (the covered "
            "resources in order), got 'gpu'",
            id="resources-out-of-order",
        ),
        pytest.param(
            GOOD.replace("nominalQuota: 9,", "nominalQuota: -1,"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: must be greater than "
            "or equal to 0, got -1",
            id="negative-quota",
        ),
        pytest.param(
            GOOD + "  queueingStrategy: Fastest\n",
            "ClusterQueue cq: spec.queueingStrategy: must be one of StrictFIFO, BestEffortFIFO, got 'Fastest'",
            id="strategy",
        ),
        pytest.param(
            GOOD + "  preemption: {reclaimWithinCohort: Sometimes}\n",
            "ClusterQueue cq: spec.preemption.reclaimWithinCohort: must be one of Never, LowerPriority, Any, got "
            "'Sometimes'",
            id="reclaim-policy",
        ),
        pytest.param(
            GOOD + "  fairSharing: {weight: -1}\n",
            "ClusterQueue cq: spec.fairSharing.weight: must be greater than or equal to 0, got -1",
            id="negative-weight",
        ),
        pytest.param(
            GOOD + "  fairSharing: {weight: heavy}\n",
            "ClusterQueue cq: spec.fairSharing.weight: invalid quantity 'heavy'",
            id="weight-quantity",
        ),
        pytest.param(
            GOOD.replace("nominalQuota: 36Gi", "nominalQuota: lots"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[1].nominalQuota: not a quantity",
            id="quantity",
        ),
        pytest.param(  # a valid quantity; before, the run ended in an OverflowError after its last job
            GOOD.replace("nominalQuota: 9,", "nominalQuota: '1e400',"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: too large: Kueue holds "
            "quotas as 64-bit integers, got '1e400'",
            id="quota-beyond-int64",
        ),
        pytest.param(
            GOOD + "  stopPolicy: HoldAndDrain\n",
            "ClusterQueue cq: spec.stopPolicy: not modelled (the simulator would admit otherwise than Kueue), got "
            "'HoldAndDrain'",
            id="stop-policy",
        ),
        pytest.param(
            GOOD + "  admissionChecks: [never-ready-check]\n",
            "ClusterQueue cq: spec.admissionChecks: not modelled",
            id="admission-checks",
        ),
        pytest.param(
            GOOD + "  flavorFungibility: {whenCanBorrow: TryNextFlavor}\n",
            "ClusterQueue cq: spec.flavorFungibility.whenCanBorrow: not modelled",
            id="flavor-fungibility",
        ),
        pytest.param(
            GOOD + "  preemption: {borrowWithinCohort: {policy: LowerPriority}}\n",
            "ClusterQueue cq: spec.preemption.borrowWithinCohort.policy: not modelled",
            id="borrow-within-cohort",
        ),
        pytest.param(
            GOOD + "  preemption: {reclaimWithinCohrt: Any}\n",
            "ClusterQueue cq: spec.preemption.reclaimWithinCohrt: unknown field",
            id="typo-in-preemption",
        ),
        pytest.param(
            GOOD.replace("borrowingLimit:", "borowingLimit:"),
            "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].borowingLimit: unknown field",
            id="typo-in-a-quota",
        ),
    ],
)
def test_a_bad_cluster_queue_is_reported_with_its_field_and_skipped(tmp_path: Path, spec: str, problem: str) -> None:
    kueue, problems = read(tmp_path, FLAVOR, cluster_queue(spec), cluster_queue(GOOD, "other"))
    assert len(problems) == 1
    assert problems[0].startswith(f"w.yaml: document 2: {problem}"), problems[0]
    assert problems[0].endswith("; skipped")
    assert list(kueue.cluster_queues) == ["other"]  # type: ignore[attr-defined]


def test_a_local_queue_needs_its_cluster_queue_and_a_name_once(tmp_path: Path) -> None:
    local = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {namespace: team, name: q}\nspec: {}\n"
    good = local.replace("spec: {}", "spec: {clusterQueue: cq}")
    _, problems = read(tmp_path, local, good, good)
    assert problems == [
        "w.yaml: document 1: LocalQueue team/q: spec.clusterQueue: required; skipped",
        "w.yaml: document 3: LocalQueue team/q: metadata.name: defined twice (first in document 2); skipped",
    ]


def test_what_a_cluster_queue_does_without_a_field_may_be_given(tmp_path: Path) -> None:
    spec = GOOD + "  stopPolicy: None\n  flavorFungibility: {whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor}\n"
    spec += "  preemption: {borrowWithinCohort: {policy: Never}}\n  admissionChecks: []\n"
    _, problems = read(tmp_path, FLAVOR, cluster_queue(spec))
    assert problems == []


def test_a_held_local_queue_is_refused_as_not_modelled(tmp_path: Path) -> None:
    local = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: q}\n"
    _, problems = read(tmp_path, local + "spec: {clusterQueue: cq, stopPolicy: Hold}\n")
    assert problems == [
        "w.yaml: document 1: LocalQueue default/q: spec.stopPolicy: not modelled (the simulator would admit otherwise "
        "than Kueue), got 'Hold'; skipped"
    ]


def test_a_wrong_api_version_is_named(tmp_path: Path) -> None:
    _, problems = read(tmp_path, FLAVOR.replace("v1beta1", "v1alpha1"))
    assert problems == [
        "w.yaml: document 1: ResourceFlavor default-flavor: apiVersion: expected 'kueue.x-k8s.io/v1beta1', got "
        "'kueue.x-k8s.io/v1alpha1'; skipped"
    ]


def test_a_file_without_kueue_objects_has_none(tmp_path: Path) -> None:
    kueue, _ = read(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n")
    assert kueue is None


CONFIG = (
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  enable: true\n"
    "  blockAdmission: false\n"
)


def test_a_configuration_gives_wait_for_pods_ready_with_kueues_defaults(tmp_path: Path) -> None:
    kueue, problems = read(tmp_path, CONFIG)
    assert problems == []
    wait = kueue.wait_for_pods_ready  # type: ignore[attr-defined]
    assert (wait.timeout, wait.timestamp.value, wait.backoff_limit_count) == (300.0, "Eviction", None)
    assert [wait.backoff(n) for n in (1, 2, 3, 7, 8)] == [60.0, 120.0, 240.0, 3600.0, 3600.0]  # capped at the max
    strategy = (
        "  timeout: 90s\n  requeuingStrategy: {timestamp: Creation, backoffBaseSeconds: 5, backoffMaxSeconds: 12}\n"
    )
    kueue, _ = read(tmp_path, CONFIG + strategy)
    wait = kueue.wait_for_pods_ready  # type: ignore[attr-defined]
    assert (wait.timeout, wait.timestamp.value, [wait.backoff(n) for n in (1, 2, 3)]) == (90.0, "Creation", [5, 10, 12])


FAIR = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfairSharing:\n  enable: true\n"


def test_a_configuration_gives_fair_sharing_and_a_cluster_queue_its_weight(tmp_path: Path) -> None:
    kueue, problems = read(tmp_path, FAIR, cluster_queue(GOOD + "  fairSharing: {weight: 2500m}\n"), FLAVOR)
    assert problems == []
    fair = kueue.fair_sharing  # type: ignore[attr-defined]
    assert [s.value for s in fair.strategies] == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    assert kueue.cluster_queues["cq"].fair_weight == 2.5  # type: ignore[attr-defined]
    kueue, _ = read(tmp_path, FAIR + "  preemptionStrategies: [LessThanInitialShare]\n")
    assert [s.value for s in kueue.fair_sharing.strategies] == ["LessThanInitialShare"]  # type: ignore[attr-defined]
    kueue, _ = read(tmp_path, FAIR.replace("true", "false"), FLAVOR)
    assert kueue.fair_sharing is None  # type: ignore[attr-defined]


def test_a_cohort_object_is_refused_as_not_modelled(tmp_path: Path) -> None:
    cohort = "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: all}\nspec: {parent: root}\n"
    _, problems = read(tmp_path, FLAVOR, cohort)
    assert problems == [
        "w.yaml: document 2: Cohort all: kind: not modelled: hierarchical cohorts (a Cohort object, its quotas and "
        "fairSharing weight); a ClusterQueue's spec.cohort names a flat cohort; skipped"
    ]


BAD_CONFIGURATIONS = {
    "blockAdmission left to Kueue's default": (
        CONFIG.replace("  blockAdmission: false\n", ""),
        "waitForPodsReady.blockAdmission: must be false: blocking admissions until pods are ready is not modelled "
        "(Kueue's default is true), got None",
    ),
    "a timeout that is no duration": (CONFIG + "  timeout: soon\n", "waitForPodsReady.timeout: invalid duration"),
    "a negative backoffLimitCount": (
        CONFIG + "  requeuingStrategy: {backoffLimitCount: -1}\n",
        "waitForPodsReady.requeuingStrategy.backoffLimitCount: must be an integer from 0 to 2147483647, got -1",
    ),
    "an unknown timestamp": (
        CONFIG + "  requeuingStrategy: {timestamp: Now}\n",
        "waitForPodsReady.requeuingStrategy.timestamp: must be one of Eviction, Creation, got 'Now'",
    ),
    "fair sharing strategies in an order Kueue refuses": (
        FAIR + "  preemptionStrategies: [LessThanInitialShare, LessThanOrEqualToFinalShare]\n",
        "fairSharing.preemptionStrategies: must be [LessThanOrEqualToFinalShare] or [LessThanInitialShare] or "
        "[LessThanOrEqualToFinalShare, LessThanInitialShare], got [LessThanInitialShare, LessThanOrEqualToFinalShare]",
    ),
    "an unknown fair sharing strategy": (
        FAIR + "  preemptionStrategies: [Fairest]\n",
        "fairSharing.preemptionStrategies[0]: must be one of LessThanOrEqualToFinalShare, LessThanInitialShare, got "
        "'Fairest'",
    ),
    "admission fair sharing": (
        FAIR + "admissionFairSharing: {usageHalfLifeTime: 10m}\n",
        "admissionFairSharing: not modelled",
    ),
    "the objects' API for the configuration's": (
        CONFIG.replace("config.kueue", "kueue"),
        "apiVersion: expected 'config.kueue.x-k8s.io/v1beta1', got 'kueue.x-k8s.io/v1beta1'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CONFIGURATIONS))
def test_a_bad_configuration_is_reported_with_its_field_and_skipped(tmp_path: Path, case: str) -> None:
    text, problem = BAD_CONFIGURATIONS[case]
    kueue, problems = read(tmp_path, FLAVOR, text)
    assert len(problems) == 1 and problems[0].startswith(f"w.yaml: document 2: Configuration: {problem}"), problems
    assert kueue.wait_for_pods_ready is None  # type: ignore[attr-defined]


LABELLED_JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: j, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  template:
    metadata: {annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 100s}}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
"""


def test_a_kueue_object_two_files_define_otherwise_is_named(tmp_path: Path) -> None:
    """Two -w files, one cluster: a ClusterQueue both define alike is one object; one they define otherwise is
    named (the first file's kept), as a PriorityClass is; before, the second was dropped silently."""
    first, second, same = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    first.write_text("---\n".join([FLAVOR, cluster_queue(GOOD)]))
    second.write_text(cluster_queue(GOOD.replace("nominalQuota: 9,", "nominalQuota: 5,")))
    same.write_text("---\n".join([FLAVOR, cluster_queue(GOOD)]))
    merged = merge_workloads([read_manifests(first), read_manifests(same)])
    assert merged.problems == []
    merged = merge_workloads([read_manifests(first), read_manifests(second)])
    assert merged.problems == ["b: ClusterQueue cq differs from an earlier file's; the first is kept"]
    assert merged.kueue is not None
    assert merged.kueue.cluster_queues["cq"].quotas()[("default-flavor", CPU)].nominal == 9000


def test_labelled_jobs_wait_when_every_kueue_object_is_refused(tmp_path: Path) -> None:
    """The file's only Kueue object, a LocalQueue without its ClusterQueue, is refused: Kueue still runs, so the Job
    labelled for that queue waits (its LocalQueue does not exist) instead of running as if Kueue were absent."""
    local = "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: lq}\nspec: {}\n"
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([local, LABELLED_JOB]))
    workload = read_manifests(path)
    assert workload.kueue is not None
    scheduler = create("kube-default")
    nodes = [Node("n0", allocatable={CPU: 8000, MEMORY: 2**34})]
    record = simulate(workload, nodes, {scheduler.name: scheduler})
    assert [(job.starting_time, job.reason) for job in record.jobs] == [
        (None, "not admitted by Kueue: LocalQueue lq doesn't exist")
    ]


def test_a_pod_group_whose_pods_name_different_local_queues_is_rejected(tmp_path: Path) -> None:
    """One Kueue workload has one queue: a PodGroup whose pods name two LocalQueues (or one and none) is rejected,
    named, rather than put in the first one's queue."""
    group = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: gang}\nspec: {minMember: 3}\n"
    pods = [
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: g{i}\n"
        f"  labels: {{scheduling.x-k8s.io/pod-group: gang{label}}}\n"
        "spec: {containers: [{name: c, image: busybox}]}\n"
        for i, label in enumerate([", kueue.x-k8s.io/queue-name: lq", ", kueue.x-k8s.io/queue-name: lq-other", ""])
    ]
    path = tmp_path / "w.yaml"
    path.write_text("---\n".join([group, *pods]))
    workload = read_manifests(path)
    why = "its pods name different LocalQueues (kueue.x-k8s.io/queue-name: none, lq, lq-other)"
    assert [job.rejected for job in workload.jobs] == [why]
    assert workload.problems == [f"w.yaml: document 1: PodGroup default/gang: {why}"]
