"""One verdict for a Pod, a PodGroup or a Node, whichever door it comes through: ``simulate``'s readers refuse what
``cluster serve`` refuses (the real kube-apiserver's rules: :mod:`kubeflux.apiobjects.rules`), in the same words,
naming the file, the document and the field; and a pod whose run-time annotations no kubelet can read is rejected
by both, never bound (so it never holds resources).

Each case is sent to ``cluster serve`` (its HTTP status and message, ``dryRun``) and read by ``simulate``'s readers
(the manifest reader, the cluster file reader).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import read_cluster, uniform_cluster
from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim.apiserver._served import ORIGIN, PODS, call, eventually
from tests.sim.conftest import Verdict, pod, served_and_read

SUBDOMAIN = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
INIT = {"name": "i", "image": "busybox"}
LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"


def group(name: str = "g", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1, **spec},
    }


CASES = [
    # (a pod's priority within int32 but without its PriorityClass is forbidden by the Priority admission, on the
    # real server and on cluster serve; simulate reads a workload's pods as admitted: tests/sim/apiserver/
    # test_priority_admission.py and the replay, which names a class for it)
    *(
        Verdict(
            f"pod-priority-{name}",
            pod(priority=value),
            400,
            f"json: cannot unmarshal number {value} into Go struct field PodSpec.spec.priority of type int32",
            "spec.priority",
        )
        for name, value in (("beyond-int32", 2**31), ("below-int32", -(2**31) - 1))
    ),
    Verdict(
        "pod-deadline-beyond-int64",
        pod(activeDeadlineSeconds=2**63),
        400,
        "json: cannot unmarshal number 9223372036854775808 into Go struct field PodSpec.spec.activeDeadlineSeconds "
        "of type int64",
        "spec.activeDeadlineSeconds",
    ),
    Verdict("pod-name-not-dns", pod("Web_0"), 422, f"Invalid value: 'Web_0': {SUBDOMAIN}", "metadata.name"),
    Verdict("pod-name-with-dots-is-a-subdomain", pod("web.0"), 201),
    # an init container's restartPolicy as kube-apiserver v1.36 has it (ContainerRestartRules, on by default since
    # 1.35): Never and OnFailure are a plain init container's; simulate refused them, saying "only 'Always'"
    *(
        Verdict(f"init-container-restart-policy-{policy}", pod(initContainers=[{**INIT, "restartPolicy": policy}]), 201)
        for policy in ("Never", "OnFailure", "Always")
    ),
    Verdict(
        "init-container-restart-policy-unknown",
        pod(initContainers=[{**INIT, "restartPolicy": "Sometimes"}]),
        422,
        'Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"',
        "spec.initContainers[0].restartPolicy",
    ),
    Verdict("pod-node-name-not-dns", pod(nodeName="Node_1"), 422, f"'Node_1': {SUBDOMAIN}", "spec.nodeName"),
    Verdict("podgroup-name-not-dns", group("Gang_A"), 422, f"'Gang_A': {SUBDOMAIN}", "metadata.name"),
    Verdict("podgroup-min-member-int32-max", group(minMember=2**31 - 1), 201),
    *(
        Verdict(
            f"podgroup-{name}-beyond-int32",
            group(**{field: 2**31}),
            422,
            "must be at most 2147483647 (an int32), got 2147483648",
            f"spec.{field}",
        )
        for name, field in (("min-member", "minMember"), ("timeout", "scheduleTimeoutSeconds"))
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_simulate_and_cluster_serve_agree_on_an_object(server: ApiServer, tmp_path: Path, case: Verdict) -> None:
    kind = case.obj["kind"]
    collection = PODS if kind == "Pod" else "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
    workload = served_and_read(server, collection, case, tmp_path)
    if case.status == 201:
        assert workload.skipped == 0, workload.problems
    else:
        assert workload.skipped == 1
        where = f"w.yaml: document 1: {kind} default/{case.obj['metadata']['name']}: {case.field}: "
        assert workload.problems[0].startswith(where), workload.problems
        assert case.says.removeprefix("Invalid value: ") in workload.problems[0]


def test_a_namespace_that_is_no_dns_label_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(pod("p", namespace="team.a")))
    workload = read_manifests(path)
    assert workload.problems == [f"w.yaml: document 1: Pod team.a/p: metadata.namespace: 'team.a': {LABEL}, and "
                                 "must start and end with an alphanumeric character; skipped"]  # fmt: skip


def test_a_job_named_beyond_dns_is_refused_as_the_api_server_does(tmp_path: Path) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "Nightly_Run"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
    }
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(job))
    [problem] = read_manifests(path).problems
    assert problem.startswith(f"w.yaml: document 1: Job default/Nightly_Run: metadata.name: 'Nightly_Run': {SUBDOMAIN}")


def test_simulate_says_the_file_document_and_field_and_exits_2_under_strict(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump_all([pod("ok", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "5s"}),
                                        pod("big", priority=2**31)]))  # fmt: skip
    args = ["simulate", "-w", str(path), "-s", "fcfs", "--nodes", "1", "--cores-per-node", "2", "--strict"]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split()).replace("│", "").replace(" ", "")
    assert "w.yaml:document2:Poddefault/big:spec.priority:json:cannotunmarshalnumber2147483648" in said


def test_a_cluster_file_node_named_beyond_dns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "GPU_Node"}, "status": {"capacity": {"cpu": "4"}}}
    path.write_text(yaml.safe_dump(node))
    with pytest.raises(WorkloadError, match=r"Node GPU_Node: metadata\.name: 'GPU_Node': a lowercase RFC 1123"):
        read_cluster(path)


# --- run-time annotations: rejected, never bound ---------------------------------------------------------------

BAD_RUN_TIMES = [
    ("go-duration-overflow", "pod-complete.stage.kwok.x-k8s.io/delay", "99999999999h", "beyond Go's limit"),
    ("exponent-is-no-go-duration", "pod-complete.stage.kwok.x-k8s.io/delay", "1e400s", "expected a number followed"),
    ("beyond-100-years", "pod-complete.stage.kwok.x-k8s.io/delay", "900000h", "must be at most 3,153,600,000 s"),
    ("exit-code-beyond-255", "sim.kubeflux.io/exit-code", "300", "must be an integer from 0 to 255, got '300'"),
]


@pytest.fixture(scope="module")
def scheduled() -> Iterator[ApiServer]:
    """One node of 2 cores in virtual time, its kubelet, and kubeflux scheduling in the process."""
    server = ApiServer(
        uniform_cluster(1, 2, "8Gi"), kubelet=True, schedulers=[create("kubeflux")], clock=VirtualClock(ORIGIN)
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("key", "value", "says"), [c[1:] for c in BAD_RUN_TIMES], ids=[c[0] for c in BAD_RUN_TIMES])
def test_a_pod_no_kubelet_can_run_is_rejected_by_both_and_holds_nothing(
    scheduled: ApiServer, tmp_path: Path, key: str, value: str, says: str
) -> None:
    name = f"bad-{len(call(scheduled, 'GET', PODS)['items'])}"
    bad = pod(name, annotations={key: value}, schedulerName="kubeflux")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # the whole node
    call(scheduled, "POST", PODS, bad)
    reason = f"Pod default/{name}: metadata.annotations.{key}: "

    def refused() -> bool:
        events = call(scheduled, "GET", "/api/v1/namespaces/default/events")["items"]
        return any(e["reason"] == "FailedScheduling" and e["message"].startswith(reason) for e in events)

    eventually(refused, "kubeflux's FailedScheduling naming the annotation")
    events = call(scheduled, "GET", "/api/v1/namespaces/default/events")["items"]
    message = next(
        e["message"] for e in events if e["reason"] == "FailedScheduling" and e["message"].startswith(reason)
    )
    assert says in message
    assert not call(scheduled, "GET", f"{PODS}/{name}")["spec"].get("nodeName"), "never bound"
    good = pod(f"good-{name}", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "1s"}, schedulerName="kubeflux")
    good["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    call(scheduled, "POST", PODS, good)
    eventually(lambda: call(scheduled, "GET", f"{PODS}/good-{name}")["status"].get("phase") == "Succeeded",
               "a pod of the whole node runs: the rejected one holds nothing")  # fmt: skip
    # simulate's reader gives the same verdict, in the same words: rejected (not skipped), naming file and document
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(bad))
    workload = read_manifests(path)
    [job] = workload.jobs
    assert job.rejected == message
    assert workload.problems == [f"w.yaml: document 1: {message}; rejected"]
    assert workload.skipped == 0


@pytest.fixture(scope="module")
def kube_default() -> Iterator[ApiServer]:
    """One node of 2 cores in virtual time, its kubelet, and kube-default (which reads no run-time annotation)."""
    server = ApiServer(
        uniform_cluster(1, 2, "8Gi"), kubelet=True, schedulers=[create("kube-default")], clock=VirtualClock(ORIGIN)
    ).start()
    try:
        yield server
    finally:
        server.stop()


OTHER_RUN_TIMES = [
    *BAD_RUN_TIMES,
    ("jitter-below-the-delay", "pod-complete.stage.kwok.x-k8s.io/jitter-delay", "1s", "must not be below the delay"),
]


@pytest.mark.parametrize(
    ("key", "value", "says"), [c[1:] for c in OTHER_RUN_TIMES], ids=[c[0] for c in OTHER_RUN_TIMES]
)
@pytest.mark.parametrize("bound_by", ["kube-default", "node-name"])
def test_a_pod_bound_by_another_scheduler_that_no_kubelet_can_run_is_failed_naming_the_annotation(
    kube_default: ApiServer, key: str, value: str, says: str, bound_by: str
) -> None:
    """kube-default (or a real kube-scheduler, or ``nodeName`` given at creation) does not read the run-time
    annotations kubeflux's admission refuses: the kubelet fails the pod as a kubelet fails a pod it cannot admit
    (it stayed Pending on its node with a FailedCreatePodSandBox warning)."""
    name = f"bad-{len(call(kube_default, 'GET', PODS)['items'])}"
    annotations = {key: value}
    if key.endswith("jitter-delay"):
        annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = "5s"
    bad = pod(name, annotations=annotations, **({"nodeName": "node-0"} if bound_by == "node-name" else {}))
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"  # the whole node
    call(kube_default, "POST", PODS, bad)
    eventually(lambda: call(kube_default, "GET", f"{PODS}/{name}")["status"].get("phase") == "Failed", "Failed")
    status = call(kube_default, "GET", f"{PODS}/{name}")["status"]
    assert status["reason"] == "InvalidRunTime"
    message = status["message"]
    assert message.startswith(f"Pod was rejected: Pod default/{name}: metadata.annotations.{key}: ")
    assert says in message and repr(value) in message  # the annotation and its value
    events = call(kube_default, "GET", "/api/v1/namespaces/default/events")["items"]
    warned = [e for e in events if e["involvedObject"]["name"] == name and e["reason"] == "InvalidRunTime"]
    assert [(e["type"], e["message"]) for e in warned] == [("Warning", message.removeprefix("Pod was rejected: "))]
    good = pod(f"good-{name}", annotations={"pod-complete.stage.kwok.x-k8s.io/delay": "1s"})
    good["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    call(kube_default, "POST", PODS, good)
    eventually(lambda: call(kube_default, "GET", f"{PODS}/good-{name}")["status"].get("phase") == "Succeeded",
               "a pod of the whole node runs: the failed one holds nothing")  # fmt: skip
