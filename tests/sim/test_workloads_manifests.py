from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, GPU, POD_GROUP_LABEL
from kubeflux.sim.workloads import JobKind, WorkloadError
from kubeflux.sim.workloads.manifests import read_manifests

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return path


def pod(name: str, *, annotations: str = "", labels: str = "", cpu: str = "1", extra: str = "") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{{labels}}}
  annotations: {{{annotations}}}
spec:
  {extra}
  containers:
    - name: c
      image: busybox
      resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def test_example_workload_reads_every_kind() -> None:
    workload = read_manifests(EXAMPLES / "mixed-jobs.yaml")
    assert workload.problems == []
    jobs = {job.id: job for job in workload.jobs}
    assert [job.id for job in workload.jobs] == [  # ordered by submit time
        "default/preprocess",
        "default/web-frontend",
        "default/lammps",
        "default/flaky",
        "default/train",
    ]
    pre = jobs["default/preprocess"]
    assert (pre.kind, pre.completions, pre.parallelism, pre.backoff_limit) == (JobKind.JOB, 4, 2, 2)
    assert pre.pods[0].run_time == 90.0  # "1m30s"
    assert pre.pods[0].requests == {CPU: 4000, "memory": 8 * 2**30}
    assert pre.requested_processors == 8  # 4 cores x parallelism 2
    group = jobs["default/lammps"]
    assert (group.kind, group.min_member, group.schedule_timeout_seconds, group.submit_time) == (
        JobKind.POD_GROUP,
        3,
        60.0,
        10.0,
    )
    assert [p.name for p in group.pods] == ["lammps-0", "lammps-1", "lammps-2"]
    assert all(p.run_time == 300.0 and p.labels[POD_GROUP_LABEL] == "lammps" for p in group.pods)
    other = jobs["default/web-frontend"]
    assert other.pods[0].scheduler_name == "default-scheduler" and other.pods[0].run_time is None
    flaky = jobs["default/flaky"]
    assert (flaky.pods[0].exit_code, flaky.pods[0].run_time, flaky.submit_time) == (139, 20.0, 20.0)
    train = jobs["default/train"]
    assert train.pods[0].requests == {CPU: 2000, GPU: 1}  # limits become requests
    assert (train.pods[0].run_time, train.pods[0].run_time_jitter) == (600.0, 720.0)
    assert train.active_deadline_seconds == 3600.0
    assert train.pods[0].scheduler_name == ""  # no schedulerName: the scheduler under test


def test_job_defaults_follow_kubernetes_and_kwok(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """apiVersion: batch/v1
kind: Job
metadata: {name: wq, namespace: team}
spec:
  parallelism: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: 250m}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: plain}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x}]
""",
    )
    jobs = {job.id: job for job in read_manifests(path).jobs}
    wq = jobs["team/wq"]
    assert (wq.completions, wq.parallelism, wq.backoff_limit, wq.namespace) == (3, 3, 6, "team")
    assert wq.pods[0].run_time == 0.0  # KWOK's pod-complete stage has no delay by default
    assert wq.requested_processors == 3  # 250m counts as one core per pod
    plain = jobs["default/plain"]
    assert (plain.completions, plain.parallelism, plain.submit_time) == (1, 1, 0.0)


def test_a_job_whose_pods_name_a_podgroup_is_that_gang(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: train}
spec: {minMember: 4, scheduleTimeoutSeconds: 10}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completions: 4
  parallelism: 4
  template:
    metadata:
      labels: {scheduling.x-k8s.io/pod-group: train}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]
""",
    )
    workload = read_manifests(path)
    assert workload.problems == []
    assert len(workload.jobs) == 1
    job = workload.jobs[0]
    assert (job.kind, job.min_member, job.schedule_timeout_seconds) == (JobKind.JOB, 4, 10.0)


def test_bad_documents_are_reported_with_document_index_and_field(tmp_path: Path) -> None:
    docs = [
        pod("ok", annotations='"sim.kubeflux.io/submit-time": "7"'),
        pod("bad-cpu", cpu="lots"),
        pod("bad-delay", annotations='"pod-complete.stage.kwok.x-k8s.io/delay": "ten seconds"'),
        pod("bad-exit", annotations='"sim.kubeflux.io/exit-code": "-3"'),
        pod("bad-time", annotations='"sim.kubeflux.io/submit-time": "yesterday"'),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n",
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {completions: -1, template: {spec: {}}}\n",
        pod("orphan", labels="scheduling.x-k8s.io/pod-group: nowhere"),
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: empty}\nspec: {minMember: 0}\n",
    ]
    workload = read_manifests(write(tmp_path, "---\n".join(docs)))
    assert workload.problems == [
        "w.yaml: document 2: Pod default/bad-cpu: spec.containers[0].resources.requests.cpu: invalid quantity 'lots': "
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'; skipped",
        "w.yaml: document 3: Pod default/bad-delay: metadata.annotations.pod-complete.stage.kwok.x-k8s.io/delay: "
        "invalid duration 'ten seconds': expected a number followed by one of ns, us, ms, s, m, h "
        "(a Go duration such as 60s or 1m30s); rejected",
        "w.yaml: document 4: Pod default/bad-exit: metadata.annotations.sim.kubeflux.io/exit-code: "
        "must be an integer from 0 to 255, got '-3'; rejected",
        "w.yaml: document 5: Pod default/bad-time: metadata.annotations.sim.kubeflux.io/submit-time: "
        "must be a non-negative number of seconds, got 'yesterday'; skipped",
        "w.yaml: document 6: kind 'ConfigMap' is not a workload object; skipped",
        "w.yaml: document 7: Job default/j: spec.completions: Invalid value: -1: must be greater than or equal to 0; "
        "skipped",
        "w.yaml: document 9: PodGroup default/empty: spec.minMember: must be a positive integer, got 0; skipped",
        "w.yaml: document 8: Pod default/orphan names PodGroup default/nowhere, which the file does not define; "
        "it runs as a lone pod",
    ]
    # a pod whose run-time annotations no kubelet can read is kept, rejected (kubeflux's scheduler rejects it too)
    kept = [(job.id, job.submit_time, bool(job.rejected)) for job in workload.jobs]
    assert kept == [
        ("default/bad-delay", 0.0, True),
        ("default/bad-exit", 0.0, True),
        ("default/orphan", 0.0, False),
        ("default/ok", 7.0, False),
    ]


def test_list_items_are_named_in_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "apiVersion: v1\nkind: List\nitems:\n"
        "  - {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: x}]}}\n"
        "  - {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: 3}}\n",
    )
    workload = read_manifests(path)
    assert [job.id for job in workload.jobs] == ["default/a"]
    assert workload.problems == [
        "w.yaml: document 1, items[1]: Pod default/b: spec.containers: expected a list, got int; skipped"
    ]


def test_podgroup_short_of_members_is_reported(tmp_path: Path) -> None:
    pg = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 3}\n"
    member = pod("g-0", labels="scheduling.x-k8s.io/pod-group: g")
    workload = read_manifests(write(tmp_path, pg + "---\n" + member))
    assert workload.jobs[0].min_member == 3 and len(workload.jobs[0].pods) == 1
    assert workload.problems == [
        "w.yaml: document 1: PodGroup default/g has minMember 3 but only 1 pods in the file; it can never be scheduled"
    ]


def test_kubernetes_own_podgroup_and_pods_naming_it_in_scheduling_group_are_one_gang(tmp_path: Path) -> None:
    group = "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: ranks}\n"
    group += "spec: {schedulingPolicy: {gang: {minCount: 2}}}\n"
    members = [pod(f"rank-{i}", extra="schedulingGroup: {podGroupName: ranks}") for i in range(3)]
    workload = read_manifests(write(tmp_path, "---\n".join([group, *members])))
    [job] = workload.jobs
    assert (job.kind, job.id, job.min_member, len(job.pods)) == (JobKind.POD_GROUP, "default/ranks", 2, 3)
    assert all(p.labels[POD_GROUP_LABEL] == "ranks" for p in job.pods) and not workload.problems


def test_broken_yaml_raises_with_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n")
    with pytest.raises(WorkloadError, match=r"w.yaml:\d+: invalid YAML"):
        read_manifests(path)


def test_an_indexed_job_needs_completions_and_a_known_mode(tmp_path: Path) -> None:
    job = """apiVersion: batch/v1
kind: Job
metadata: {name: ranks}
spec:
  {spec}
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""
    indexed = read_manifests(write(tmp_path, job.replace("{spec}", "completions: 3\n  completionMode: Indexed")))
    assert indexed.jobs[0].indexed and indexed.jobs[0].completions == 3
    for spec, problem in (
        (
            "completionMode: Indexed\n  parallelism: 2",
            "spec.completions: Required value: when completion mode is Indexed",
        ),
        ("completions: 2\n  completionMode: Sometimes", 'spec.completionMode: Unsupported value: "Sometimes"'),
    ):
        workload = read_manifests(write(tmp_path, job.replace("{spec}", spec)))
        assert not workload.jobs and problem in workload.problems[0]


def test_a_jobs_profile_is_its_container_images(tmp_path: Path) -> None:
    job = """apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  template:
    metadata:
      annotations: {pod-complete.stage.kwok.x-k8s.io/delay: "90s"}
    spec:
      restartPolicy: Never
      containers:
        - {name: main, image: "trainer:v2"}
        - {name: side, image: "sidecar:1"}
        - {name: more, image: "trainer:v2"}
"""
    jobs = {j.id: j for j in read_manifests(write(tmp_path, job + "---\n" + pod("lone"))).jobs}
    assert jobs["default/train"].profile_name() == "trainer:v2+sidecar:1"
    assert jobs["default/lone"].profile_name() == "busybox"
    lammps = {j.id: j for j in read_manifests(EXAMPLES / "mixed-jobs.yaml").jobs}["default/lammps"]
    assert lammps.profile_name() == "lammps"  # a PodGroup of three pods of one image: named once


def test_a_gated_pod_or_job_is_rejected_naming_its_gates_since_nothing_in_simulate_removes_them(tmp_path: Path) -> None:
    gated = "schedulingGates: [{name: kueue.x-k8s.io/admission}]"
    job = f"""apiVersion: batch/v1
kind: Job
metadata: {{name: j}}
spec:
  template:
    spec:
      restartPolicy: Never
      {gated}
      containers: [{{name: c, image: busybox}}]
"""
    workload = read_manifests(write(tmp_path, "---\n".join([pod("held", extra=gated), pod("open"), job])))
    rejected = {job.id: job.rejected for job in workload.jobs}
    assert rejected["default/open"] == ""
    for key in ("default/held", "default/j"):
        assert "spec.schedulingGates: held by kueue.x-k8s.io/admission" in rejected[key]
    assert len(workload.problems) == 2
