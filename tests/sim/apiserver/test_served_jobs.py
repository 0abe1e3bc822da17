"""``batch/v1`` Jobs a client creates on the served cluster run under the simulator's Job controller, in virtual time.

Up to ``parallelism`` pods at once until ``completions`` succeeded; a failed pod replaced after the controller's
back-off, the Job failed once more than ``backoffLimit`` pods failed, or when ``activeDeadlineSeconds`` passed;
the Job's status carries the counts and the conditions ``kubectl wait --for=condition=complete`` waits for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver.server import ApiServer
from tests.sim.apiserver._served import JOBS, ORIGIN, PODS, call, conditions, eventually, job, served

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
KUBECTL = shutil.which("kubectl")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ApiServer]:
    """Two nodes of 8 cores in virtual time (:func:`served`)."""
    server = served()
    server.write_kubeconfig(tmp_path / "kubeconfig")
    try:
        yield server
    finally:
        server.stop()


def pod_starts(server: ApiServer, job_name: str) -> list[float]:
    pods = call(server, "GET", f"{PODS}?labelSelector=job-name%3D{job_name}")["items"]
    return sorted(parse_timestamp(p["status"]["startTime"]) - ORIGIN for p in pods if p["status"].get("startTime"))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_applies_the_example_job_and_waits_for_it_to_complete(cluster: ApiServer, tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}

    def kubectl(*args: str) -> str:
        command = [str(KUBECTL), "--cache-dir", str(tmp_path / "cache"), *args]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        return result.stdout

    assert "job.batch/pi created" in kubectl("apply", "-f", str(EXAMPLES / "apiserver" / "job.yaml"))
    assert "condition met" in kubectl("wait", "--for=condition=complete", "job/pi", "--timeout=240s")
    status = call(cluster, "GET", f"{JOBS}/pi")["status"]
    # counts of 0 are left out, as kube-controller-manager writes them (omitempty)
    assert (status["succeeded"], status.get("failed"), status.get("active")) == (4, None, None)
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert pod_starts(cluster, "pi") == [0, 0, 60, 60]  # 4 completions, 2 at a time, 1 min each
    assert parse_timestamp(status["completionTime"]) == ORIGIN + 120


def test_a_job_whose_pods_fail_is_retried_after_back_off_then_fails(cluster: ApiServer) -> None:
    call(cluster, "POST", JOBS, job("crash", "5s", exit_code=1, backoffLimit=1))
    eventually(lambda: ("Failed", "BackoffLimitExceeded") in conditions(cluster, "crash"), "the Job failing")
    status = call(cluster, "GET", f"{JOBS}/crash")["status"]
    assert (status.get("succeeded", 0), status["failed"]) == (0, 2)  # a count of 0 is left out (omitempty)
    assert pod_starts(cluster, "crash") == [0, 15]  # failed at 5 s, replaced after the 10 s back-off


def test_a_job_past_its_deadline_fails_and_its_pods_go(cluster: ApiServer) -> None:
    call(cluster, "POST", JOBS, job("slow", "100s", completions=2, parallelism=2, activeDeadlineSeconds=30))
    eventually(lambda: ("Failed", "DeadlineExceeded") in conditions(cluster, "slow"), "the Job's deadline")
    assert call(cluster, "GET", f"{PODS}?labelSelector=job-name%3Dslow")["items"] == []
    assert call(cluster, "GET", "/kubeflux/time")["now"] == ORIGIN + 30


def test_a_job_whose_pods_the_kubelet_cannot_read_gets_them_created_and_failed_by_the_kubelet(
    cluster: ApiServer,
) -> None:
    """As on a real cluster, the Job controller creates pods from any valid template; kube-default, which does not
    read the simulated-run annotations, binds them, and the kubelet that cannot run them fails them as its admission
    fails a pod (Failed, reason InvalidRunTime, the annotation and its value named): the Job fails after its
    back-off limit. (They stayed Pending and bound, holding their cores, with only a Warning.)"""
    bad = job("huge", "10s", parallelism=2, backoffLimit=1)
    bad["spec"]["template"]["metadata"]["annotations"]["sim.kubeflux.io/exit-code"] = "300"
    call(cluster, "POST", JOBS, bad)
    eventually(lambda: ("Failed", "BackoffLimitExceeded") in conditions(cluster, "huge"), "the Job failing")
    pods = call(cluster, "GET", f"{PODS}?labelSelector=job-name%3Dhuge")["items"]
    said = "metadata.annotations.sim.kubeflux.io/exit-code: must be an integer from 0 to 255, got '300'"
    assert pods and {p["status"]["phase"] for p in pods} == {"Failed"}
    assert {p["status"]["reason"] for p in pods} == {"InvalidRunTime"}
    assert all(p["status"]["message"].startswith("Pod was rejected: Pod default/huge-") for p in pods)
    assert all(p["status"]["message"].endswith(said) for p in pods)
    events = call(cluster, "GET", "/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "InvalidRunTime" and e["type"] == "Warning" and said in e["message"] for e in events)


def test_an_indexed_job_runs_each_index_once_and_replaces_a_failed_pod_under_its_index(cluster: ApiServer) -> None:
    """``completionMode: Indexed``: each pod carries its index (label, annotation, hostname ``job-index``), the
    lowest indexes first; a failed pod is replaced under the same index; the Job completes when every index has
    succeeded, with ``status.completedIndexes``."""
    body = job("ranks", "10s", completions=4, parallelism=2, completionMode="Indexed", backoffLimit=4)
    call(cluster, "POST", JOBS, body)
    eventually(lambda: ("Complete", "CompletionsReached") in conditions(cluster, "ranks"), "the Job completing")
    status = call(cluster, "GET", f"{JOBS}/ranks")["status"]
    assert (status["succeeded"], status.get("failed", 0), status["completedIndexes"]) == (4, 0, "0-3")
    pods = call(cluster, "GET", f"{PODS}?labelSelector=job-name%3Dranks")["items"]
    index = "batch.kubernetes.io/job-completion-index"
    by_index = {p["metadata"]["labels"][index]: p for p in pods}
    assert sorted(by_index) == ["0", "1", "2", "3"]
    for number, pod in by_index.items():
        assert pod["metadata"]["annotations"][index] == number
        assert pod["metadata"]["name"].startswith(f"ranks-{number}-")
        assert pod["spec"]["hostname"] == f"ranks-{number}"
    assert pod_starts(cluster, "ranks") == [0, 0, 10, 10]


def test_an_indexed_job_whose_pods_fail_retries_the_same_indexes(cluster: ApiServer) -> None:
    call(
        cluster,
        "POST",
        JOBS,
        job("flaky", "5s", exit_code=1, completions=3, parallelism=2, completionMode="Indexed", backoffLimit=1),
    )
    eventually(lambda: ("Failed", "BackoffLimitExceeded") in conditions(cluster, "flaky"), "the Job failing")
    pods = call(cluster, "GET", f"{PODS}?labelSelector=job-name%3Dflaky")["items"]
    names = sorted(p["metadata"]["name"].rsplit("-", 1)[0] for p in pods)
    assert names == ["flaky-0", "flaky-1"]  # indexes 0 and 1 failed; index 2 never started (parallelism 2)
