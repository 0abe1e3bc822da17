"""The served cluster's Job controller as kube-controller-manager v1.36's, for what a user sees (measured on the real
control plane with the same manifests): pods named by ``generateName`` ``<job>-`` with the Job's labels, its
controller reference and the ``batch.kubernetes.io/job-tracking`` finalizer (removed once counted); a template's
``nodeName`` kept; ``parallelism`` changed after creation honoured, ``parallelism: 0`` accepted with no pods;
``suspend`` and resume; ``ttlSecondsAfterFinished``; the status fields and their order of appearance; and
``cluster serve --no-controllers job``."""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob
from tests.sim.apiserver._served import JOBS, ORIGIN, PODS, call, conditions, eventually, job, served

TRACKING = "batch.kubernetes.io/job-tracking"


@pytest.fixture
def cluster() -> Iterator[ApiServer]:
    server = served()
    try:
        yield server
    finally:
        server.stop()


def pods_of(server: ApiServer, name: str) -> list[dict[str, Any]]:
    return list(call(server, "GET", f"{PODS}?labelSelector=job-name%3D{name}")["items"])


def status(server: ApiServer, name: str) -> dict[str, Any]:
    return dict(call(server, "GET", f"{JOBS}/{name}").get("status") or {})


def test_a_plain_job_gets_pods_as_kube_controller_manager_makes_them(cluster: ApiServer) -> None:
    plain = job("plain", "10s", completions=3, parallelism=2)
    del plain["spec"]["template"]["metadata"]["annotations"]["sim.kubeflux.io/exit-code"]
    created = call(cluster, "POST", JOBS, plain)
    uid = created["metadata"]["uid"]
    eventually(lambda: len(pods_of(cluster, "plain")) == 2, "two pods")
    for pod in pods_of(cluster, "plain"):
        meta = pod["metadata"]
        assert meta["generateName"] == "plain-" and len(meta["name"]) == len("plain-") + 5
        assert meta["labels"] == {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "plain",
            "controller-uid": uid,
            "job-name": "plain",
        }
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "plain",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["finalizers"] == [TRACKING]
    eventually(lambda: ("Complete", "CompletionsReached") in conditions(cluster, "plain"), "the Job completing")
    done = status(cluster, "plain")
    assert [c["type"] for c in done["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert done["succeeded"] == 3 and "active" not in done and parse_timestamp(done["completionTime"]) == ORIGIN + 20
    pods = pods_of(cluster, "plain")
    assert len(pods) == 3 and all("finalizers" not in p["metadata"] for p in pods)  # counted, then released
    events = call(cluster, "GET", "/api/v1/namespaces/default/events")["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["kind"] == "Job"]
    assert reasons.count("SuccessfulCreate") == 3 and reasons.count("Completed") == 1


def test_a_running_job_counts_its_active_and_ready_pods() -> None:
    """Seen in wall time (virtual time would jump past it): two pods Running and Ready, none finished yet."""
    with ApiServer(
        uniform_cluster(1, 8, "8Gi"), kubelet=True, controllers=True, schedulers=[create("kube-default")]
    ) as server:
        call(server, "POST", JOBS, job("steady", "600s", completions=3, parallelism=2))
        deadline = time.monotonic() + 60
        while status(server, "steady").get("ready") != 2:
            assert time.monotonic() < deadline, status(server, "steady")
            time.sleep(0.02)
        running = status(server, "steady")
    assert (running["active"], running["ready"], running["terminating"]) == (2, 2, 0)
    assert running["uncountedTerminatedPods"] == {} and "succeeded" not in running and "failed" not in running
    assert list(running) == ["startTime", "active", "terminating", "uncountedTerminatedPods", "ready"]  # Go's order


def test_a_job_without_a_run_time_completes_as_soon_as_its_pods_run(cluster: ApiServer) -> None:
    """``kubectl create job`` makes no KWOK delay: each pod completes when it runs, as the simulator's Job pods;
    no ``kubeflux.io/walltime`` of 0 is written into it."""
    body = job("quick", "0s", completions=2)
    body["spec"]["template"]["metadata"] = {}
    call(cluster, "POST", JOBS, body)
    eventually(lambda: ("Complete", "CompletionsReached") in conditions(cluster, "quick"), "the Job completing")
    assert all(
        "kubeflux.io/walltime" not in (p["metadata"].get("annotations") or {}) for p in pods_of(cluster, "quick")
    )
    assert call(cluster, "GET", "/kubeflux/time")["now"] == ORIGIN


def test_parallelism_changed_after_creation_is_honoured_and_zero_runs_no_pod(cluster: ApiServer) -> None:
    call(cluster, "POST", JOBS, job("grow", "100s", completions=4, parallelism=0))
    eventually(lambda: "startTime" in status(cluster, "grow"), "the Job synced")
    assert pods_of(cluster, "grow") == [] and "active" not in status(cluster, "grow")
    for parallelism in (1, 2):
        call(cluster, "PATCH", f"{JOBS}/grow", {"spec": {"parallelism": parallelism}}, "application/merge-patch+json")
        eventually(lambda p=parallelism: len(pods_of(cluster, "grow")) == p, f"{parallelism} pods")  # type: ignore[misc]
    eventually(lambda: status(cluster, "grow").get("active") == 2, "two active")


def test_a_template_node_name_is_kept(cluster: ApiServer) -> None:
    body = job("pinned", "10s")
    body["spec"]["template"]["spec"]["nodeName"] = "node-0001"
    call(cluster, "POST", JOBS, body)
    eventually(lambda: ("Complete", "CompletionsReached") in conditions(cluster, "pinned"), "the Job completing")
    [pod] = pods_of(cluster, "pinned")
    assert pod["spec"]["nodeName"] == "node-0001" and pod["status"]["phase"] == "Succeeded"


def test_a_suspended_job_runs_nothing_until_resumed(cluster: ApiServer) -> None:
    call(cluster, "POST", JOBS, job("later", "10s", suspend=True))
    eventually(lambda: ("Suspended", "JobSuspended") in conditions(cluster, "later"), "the Job suspended")
    assert pods_of(cluster, "later") == [] and "startTime" not in status(cluster, "later")
    call(cluster, "PATCH", f"{JOBS}/later", {"spec": {"suspend": False}}, "application/merge-patch+json")
    eventually(lambda: ("Complete", "CompletionsReached") in conditions(cluster, "later"), "the Job completing")
    suspended = next(c for c in status(cluster, "later")["conditions"] if c["type"] == "Suspended")
    assert (suspended["status"], suspended["reason"]) == ("False", "JobResumed")


def test_a_finished_job_goes_after_its_ttl(cluster: ApiServer) -> None:
    call(cluster, "POST", JOBS, job("brief", "10s", ttlSecondsAfterFinished=30))
    eventually(lambda: not call(cluster, "GET", JOBS)["items"], "the Job deleted")
    assert call(cluster, "GET", "/kubeflux/time")["now"] == ORIGIN + 40
    eventually(lambda: pods_of(cluster, "brief") == [], "its pods deleted")


def test_no_controllers_job_leaves_jobs_alone() -> None:
    with ApiServer(uniform_cluster(1, 4, "8Gi"), controllers=True, disabled_controllers=["job"]) as server:
        assert server.controllers == {
            "podgroup",
            "disruption",
            "resourcequota",
            "persistentvolume-binder",
            "resourceclaim",
            "garbagecollector",
            "namespace",
        }
        assert server.job_controller is None
        call(server, "POST", JOBS, job("waits", "10s"))
        assert call(server, "GET", f"{JOBS}/waits").get("status") == {} and pods_of(server, "waits") == []
    with pytest.raises(ValueError, match="unknown controller"):
        ApiServer(controllers=True, disabled_controllers=["jobs"])
    replayed = WorkloadJob(id="j", submit_time=0, kind=JobKind.JOB, name="j", pods=[PodTemplate("j", {}, 1.0)])
    with pytest.raises(ValueError, match="cannot be turned off"):
        ApiServer(controllers=True, disabled_controllers=["job"], workload=Workload("w", [replayed]))


def refusal(server: ApiServer, name: str, spec: dict[str, Any]) -> str:
    """The message of a 422 answer to a merge patch of the Job's spec."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        call(server, "PATCH", f"{JOBS}/{name}", {"spec": spec}, "application/merge-patch+json")
    assert refused.value.code == 422
    return str(json.loads(refused.value.read())["message"])


def test_a_job_is_labelled_as_its_pods_and_its_completions_are_immutable(cluster: ApiServer) -> None:
    """As the real API server answers (measured): the Job gets its template's labels; ``completions`` of a
    NonIndexed Job cannot change; an Indexed Job's only in tandem with ``parallelism``."""
    created = call(cluster, "POST", JOBS, job("fixed", "10s", completions=2))
    assert created["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "fixed"
    patch = "application/merge-patch+json"
    assert "spec.completions: Invalid value: 5: field is immutable" in refusal(cluster, "fixed", {"completions": 5})
    call(cluster, "POST", JOBS, job("ranks", "10s", completions=3, parallelism=2, completionMode="Indexed"))
    assert "can only be modified in tandem with spec.parallelism" in refusal(cluster, "ranks", {"completions": 4})
    both = call(cluster, "PATCH", f"{JOBS}/ranks", {"spec": {"completions": 4, "parallelism": 3}}, patch)
    assert both["spec"]["completions"] == 4


def test_a_job_of_many_pods_gets_them_at_the_client_rate_500_a_sync() -> None:
    """kube-controller-manager's client sends 20 requests a second after a burst of 30, and a sync creates at most
    500 pods (``MaxPodCreateDeletePerSync``), the next coming a second after its last (``syncJobBatchPeriod``): a Job
    of 1,200 pods gets 30 at once, then 20 a virtual second, the 500th at 23.5 s, the next 20 at once at 24.5 s (the
    bucket refilled), … the last at 58.5 s (none fits the one small node, so no pod ends meanwhile; the scheduler
    says so, which lets virtual time go on). ``creationTimestamp`` has whole seconds: the pods per second."""
    server = served(1, 1, "1Gi")
    try:
        call(server, "POST", JOBS, job("wide", "10s", completions=1200, parallelism=1200))
        eventually(lambda: len(pods_of(server, "wide")) == 1200, "1,200 pods")
        made = sorted(parse_timestamp(p["metadata"]["creationTimestamp"]) - ORIGIN for p in pods_of(server, "wide"))
        per_second = [made.count(float(second)) for second in range(59)]
        sync = [29] + [20] * 23 + [11]  # a capped sync after the first: 20 at once on its first half second
        assert per_second == [49] + [20] * 22 + [11] + sync + sync[:9] + [11], per_second
        assert status(server, "wide")["active"] == 1200
    finally:
        server.stop()


IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def test_a_deleted_pod_of_a_job_ignoring_disruptions_is_replaced_beyond_backoff_limit_0() -> None:
    """``podFailurePolicy`` Ignore on ``DisruptionTarget``, ``backoffLimit: 0``: a running pod deleted by its user
    ends ``Failed`` with ``DisruptionTarget`` (the kubelet's last status, before the Job controller lets it go), is
    not counted, and is replaced after the pod-failure back-off (10 s); the Job goes on (without the rule it would
    fail at once). In wall time: virtual time would jump past the pod's run before the deletion."""
    with ApiServer(
        uniform_cluster(1, 8, "8Gi"), kubelet=True, controllers=True, schedulers=[create("kube-default")]
    ) as server:
        call(server, "POST", JOBS, job("sturdy", "600s", backoffLimit=0, podFailurePolicy=IGNORE_DISRUPTION))
        assert call(server, "GET", f"{JOBS}/sturdy")["spec"]["podReplacementPolicy"] == "Failed"
        deadline = time.monotonic() + 60
        while status(server, "sturdy").get("ready") != 1:
            assert time.monotonic() < deadline, status(server, "sturdy")
            time.sleep(0.05)
        [first] = pods_of(server, "sturdy")
        call(server, "DELETE", f"{PODS}/{first['metadata']['name']}")
        deleted = time.monotonic()
        while (
            len(pods_of(server, "sturdy")) != 1
            or pods_of(server, "sturdy")[0]["metadata"]["uid"] == first["metadata"]["uid"]
        ):
            assert time.monotonic() < deadline + 60, pods_of(server, "sturdy")
            time.sleep(0.1)
        replaced = time.monotonic()
        done = status(server, "sturdy")
    assert replaced - deleted >= 10 - 1  # the back-off counts the ignored failure, as the real controller's
    assert "failed" not in done and not done.get("conditions") and done["active"] == 1


def test_a_fail_job_rule_on_exit_code_42_fails_the_job_at_once(cluster: ApiServer) -> None:
    """``podFailurePolicy`` FailJob on exit code 42: the first pods to exit 42 fail the Job (``PodFailurePolicy``,
    the rule's message), though ``backoffLimit`` (6) would have them retried."""
    policy = {
        "rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}}]
    }
    call(
        cluster, "POST", JOBS, job("doomed", "10s", exit_code=42, completions=2, parallelism=2, podFailurePolicy=policy)
    )
    eventually(lambda: ("Failed", "PodFailurePolicy") in conditions(cluster, "doomed"), "the Job failing")
    done = status(cluster, "doomed")
    assert [(c["type"], c["reason"]) for c in done["conditions"]] == [
        ("FailureTarget", "PodFailurePolicy"),
        ("Failed", "PodFailurePolicy"),
    ]
    message = done["conditions"][1]["message"]
    assert message.startswith("Container main for pod default/doomed-")
    assert message.endswith(" failed with exit code 42 matching FailJob rule at index 0")
    assert done["failed"] == 2 and len(pods_of(cluster, "doomed")) == 2
    events = call(cluster, "GET", "/api/v1/namespaces/default/events")["items"]
    assert [e["message"] for e in events if e["reason"] == "PodFailurePolicy"] == [message]
