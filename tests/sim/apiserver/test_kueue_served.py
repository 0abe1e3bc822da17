"""Kueue's scenario files (``examples/workloads/kueue-*.yaml``) through ``cluster serve --workload`` (issue 33): the
served cluster runs the simulator's own Kueue layer, so each file gives every job the start, end, placement,
ClusterQueue, admission time and evictions ``simulate`` gives it, and a user sees Kueue's objects over the API as
the real Kueue writes them: suspended Jobs and gated pods until admitted, Workloads with their conditions, the
flavors' node labels and tolerations on the admitted pods, ``kubectl get workloads,clusterqueues``."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubeflux.scheduler.objects import Node
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.command import merge_workloads
from kubeflux.sim.records import RunRecord
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import read_cluster, uniform_cluster
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.model import Workload
from kubeflux.sim.workloads.swf import read_swf
from kubeflux.sim.workloads.tenants import queues_by_user
from tests.shared import REPO

from ._served import JOBS, PODS, both, call, job, replayed
from ._served import served as served_cluster

EXAMPLES = REPO / "examples" / "workloads"
CLUSTERS = REPO / "examples" / "clusters"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"

FILES = {
    "kueue-cohort-reclaim.yaml": "two-8core.yaml",
    "kueue-fifo.yaml": "",
    "kueue-flavors.yaml": "kueue-spot.yaml",
    "kueue-flavor-readmit.yaml": "kueue-spot.yaml",
    "kueue-missing-queue.yaml": "",
    "kueue-pods-ready.yaml": "two-8core.yaml",
    "kueue-fair-sharing.yaml": "",
}
"""Each scenario file with jobs, and the cluster its comment runs it on (``""``: 4 nodes of 8 cores)."""


def nodes_for(cluster: str) -> list[Node]:
    return read_cluster(CLUSTERS / cluster) if cluster else uniform_cluster(4, 8, "64Gi")


def outcome(run: RunRecord) -> list[tuple[object, ...]]:
    """Per job what Kueue and the scheduler made of it: its state, start, end, cores, ClusterQueue, admission time,
    evictions for quota and attempts."""
    return [
        (
            job.job_id,
            job.final_state.value,
            job.starting_time,
            job.finish_time,
            tuple(job.allocated_resources),
            job.cluster_queue,
            job.admission_time,
            job.quota_evictions,
            job.attempts,
        )
        for job in run.jobs
    ]


def same_run(simulated: RunRecord, served: RunRecord) -> None:
    assert outcome(served) == outcome(simulated)
    assert served.admission == simulated.admission
    kueue = sorted(p for p in served.problems if p.startswith("kueue:"))
    assert kueue == sorted(p for p in simulated.problems if p.startswith("kueue:"))


@pytest.mark.parametrize("scheduler", ["kube-default", "kubeflux", "coscheduling"])
@pytest.mark.parametrize("example", list(FILES))
def test_each_kueue_scenario_runs_through_cluster_serve_as_in_the_simulator(example: str, scheduler: str) -> None:
    nodes = nodes_for(FILES[example])
    workload = map_to_cluster(load_workload(EXAMPLES / example), nodes)
    simulated, served = both(workload, nodes, scheduler)
    assert any(job.cluster_queue for job in simulated.jobs), "Kueue held the jobs"
    same_run(simulated, served)


def swf(path: Path, *users: int) -> Path:
    """One 2-processor job of 100 s a user, submitted every 10 s."""
    lines = [f"{n} {n * 10} -1 100 2 -1 -1 2 200 -1 1 {user} 1 -1 1 1 -1 -1" for n, user in enumerate(users, start=1)]
    path.write_text("; MaxProcs: 8\n; MaxNodes: 4\n" + "\n".join(lines) + "\n")
    return path


def test_the_tenants_file_with_a_trace_runs_through_cluster_serve_as_in_the_simulator(tmp_path: Path) -> None:
    """``kueue-tenants.yaml`` holds only queues: a trace's users in its two LocalQueues (``--user-queues``), on 4
    nodes of 2 cores, so that one tenant borrows the other's idle half."""
    nodes = uniform_cluster(4, 2, "16Gi")
    trace = read_swf(swf(tmp_path / "t.swf", 1, 1, 1, 2, 1, 2))
    merged = merge_workloads([trace, load_workload(EXAMPLES / "kueue-tenants.yaml")])
    workload = map_to_cluster(queues_by_user(merged, ("tenant-a", "tenant-b")), nodes)
    simulated, served = both(workload, nodes, "kubeflux")
    assert {job.cluster_queue for job in simulated.jobs} == {"tenant-a-cq", "tenant-b-cq"}
    same_run(simulated, served)


def test_the_seed004_queue_takes_its_namespace_s_unlabelled_jobs_through_cluster_serve(tmp_path: Path) -> None:
    """``kueue-seed004.yaml``'s LocalQueue is named ``default``: Jobs of the namespace that name no queue go to it
    (Kueue's LocalQueueDefaulting) through ``cluster serve`` as in ``simulate``; three 8-GPU Jobs, two nodes."""
    container = "{name: c, image: i, resources: {requests: {cpu: '1', nvidia.com/gpu: '8'}}}"
    jobs = "".join(
        f"---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: j{n}}}\nspec: {{template: {{metadata: "
        f"{{annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: 60s}}}}, spec: {{restartPolicy: Never, "
        f"containers: [{container}]}}}}}}\n"
        for n in range(3)
    )
    (tmp_path / "jobs.yaml").write_text(jobs)
    nodes = uniform_cluster(2, 8, "64Gi", 8)
    merged = merge_workloads([load_workload(tmp_path / "jobs.yaml"), load_workload(EXAMPLES / "kueue-seed004.yaml")])
    simulated, served = both(map_to_cluster(merged, nodes), nodes, "kube-default")
    assert {job.cluster_queue for job in simulated.jobs} == {"seed004"}
    same_run(simulated, served)


# -- what a user sees over the API ---------------------------------------------------------------------------------


def live(workload: Workload, nodes: list[Node], scheduler: str, look: Callable[[ApiServer], None]) -> RunRecord:
    """The run through the API in virtual time, as :func:`both` runs it, the server kept serving once the replay is
    done while ``look`` reads it; the run's record."""
    return replayed(workload, nodes, scheduler, VirtualClock(), serving=look, settle=0.0)


def items(server: ApiServer, path: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = call(server, "GET", path)["items"]
    return found


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in obj["status"].get("conditions") or ()}


def test_the_served_kueue_objects_say_what_kueue_did_as_the_real_kueue_writes_them() -> None:
    """``kueue-flavor-readmit.yaml``: team A's second Job is admitted on on-demand borrowing team B's quota,
    evicted when team B reclaims it, and admitted again at once on spot; over the API its Workload, its Job, its
    pods and the queues say so."""
    nodes = nodes_for("kueue-spot.yaml")
    workload = map_to_cluster(load_workload(EXAMPLES / "kueue-flavor-readmit.yaml"), nodes)
    seen: dict[str, Any] = {}

    def look(server: ApiServer) -> None:
        seen["workloads"] = {
            wl["metadata"]["ownerReferences"][0]["name"]: wl
            for ns in ("team-a", "team-b")
            for wl in items(server, f"{KUEUE}/namespaces/{ns}/workloads")
        }
        seen["queues"] = items(server, f"{KUEUE}/clusterqueues") + items(server, f"{KUEUE}/localqueues")
        seen["job"] = call(server, "GET", "/apis/batch/v1/namespaces/team-a/jobs/a-second")
        seen["pods"] = {p["metadata"]["name"]: p for p in items(server, "/api/v1/namespaces/team-a/pods")}
        seen["events"] = [
            (e["involvedObject"]["name"], e["reason"])
            for e in items(server, "/api/v1/namespaces/team-a/events")
            if e["involvedObject"]["kind"] == "Workload"
        ]

    same_run(both(workload, nodes, "kube-default")[0], live(workload, nodes, "kube-default", look))
    second = seen["workloads"]["a-second"]
    assert second["metadata"]["name"].startswith("job-a-second-")
    assert second["spec"]["queueName"] == "user-queue"
    assert second["metadata"]["ownerReferences"][0]["kind"] == "Job"
    said = conditions(second)
    assert said["Evicted"][:2] == ("False", "QuotaReserved")  # admitted again: "Previously: …", as Kueue writes it
    assert said["Evicted"][2].startswith("Previously: Preempted to accommodate a workload (team-b/b-first)")
    assert said["Preempted"][:2] == ("False", "QuotaReserved")
    assert said["Finished"][:2] == ("True", "Succeeded")
    assert second["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    assert all(conditions(wl)["Finished"][0] == "True" for wl in seen["workloads"].values())
    # the Job was unsuspended on spot: its template has spot's node label and toleration only
    assert seen["job"]["spec"]["suspend"] is False
    template = seen["job"]["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"instance-type": "spot"}
    assert template["tolerations"] == [{"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    name = seen["workloads"]["a-second"]["metadata"]["name"]
    told = sorted(reason for who, reason in seen["events"] if who == name)  # one time: any order
    assert told == ["Admitted", "Admitted", "Preempted", "QuotaReserved", "QuotaReserved"]
    # the queues are back to nothing pending and nothing admitted, each Active
    for queue in seen["queues"]:
        assert queue["status"]["pendingWorkloads"] == 0 and queue["status"]["admittedWorkloads"] == 0
        assert conditions(queue)["Active"][0] == "True"


def test_a_held_job_stays_suspended_and_a_held_pod_gated_with_its_workload_saying_why(tmp_path: Path) -> None:
    """``kueue-missing-queue.yaml``'s Job names a LocalQueue that does not exist: its Job stays ``suspend: true``
    with no pod, its Workload ``QuotaReserved=False`` (``Inactive``); a lone pod of that queue stays gated
    (``SchedulingGated``), never placed, while the pod of the existing queue was ungated and ran."""
    extra = tmp_path / "gated.yaml"
    extra.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: held, labels: {kueue.x-k8s.io/queue-name: no-such-queue}}\n"
        "spec: {restartPolicy: Never, containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}]}\n"
    )
    nodes = nodes_for("")
    merged = merge_workloads([load_workload(EXAMPLES / "kueue-missing-queue.yaml"), load_workload(extra)])
    workload = map_to_cluster(merged, nodes)
    seen: dict[str, Any] = {}

    def look(server: ApiServer) -> None:
        seen["jobs"] = {j["metadata"]["name"]: j for j in items(server, "/apis/batch/v1/namespaces/default/jobs")}
        seen["pods"] = {p["metadata"]["name"]: p for p in items(server, PODS)}
        seen["workloads"] = items(server, f"{KUEUE}/namespaces/default/workloads")

    same_run(both(workload, nodes, "kube-default")[0], live(workload, nodes, "kube-default", look))
    lost = seen["jobs"]["lost"]
    assert lost["spec"]["suspend"] is True
    assert lost["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "no-such-queue"
    assert not [p for p in seen["pods"] if p.startswith("lost")]
    held = seen["pods"]["held"]
    assert held["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    scheduled = [c for c in held["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [(c["status"], c["reason"]) for c in scheduled] == [("False", "SchedulingGated")]
    assert "nodeName" not in held["spec"]
    waiting = {wl["metadata"]["name"].rpartition("-")[0]: conditions(wl) for wl in seen["workloads"]}
    assert waiting["job-lost"]["QuotaReserved"] == ("False", "Inactive", "LocalQueue no-such-queue doesn't exist")
    assert waiting["pod-held"]["QuotaReserved"] == ("False", "Inactive", "LocalQueue no-such-queue doesn't exist")
    ran = [p for name, p in seen["pods"].items() if name not in ("held",) and p["status"].get("phase") == "Succeeded"]
    assert ran and all(not p["spec"].get("schedulingGates") for p in ran)


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_gets_workloads_and_cluster_queues(tmp_path: Path) -> None:
    nodes = nodes_for("two-8core.yaml")
    workload = map_to_cluster(load_workload(EXAMPLES / "kueue-cohort-reclaim.yaml"), nodes)
    printed: dict[str, str] = {}

    def look(server: ApiServer) -> None:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
        for what in ("workloads,clusterqueues", "localqueues", "resourceflavors", "cq", "lq", "kwl"):
            command = [str(KUBECTL), "--cache-dir", str(tmp_path / "cache"), "get", what, "-A"]
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr
            printed[what] = done.stdout

    live(workload, nodes, "kube-default", look)
    lines = printed["workloads,clusterqueues"].splitlines()
    assert lines[0].split() == ["NAMESPACE", "NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED", "AGE"]
    rows = [line.split() for line in lines[1:] if line.startswith("team-")]
    assert len(rows) == 3 and all(row[2] == "user-queue" and row[-2] == "True" for row in rows)
    assert any(line.startswith("NAME") and "COHORT" in line for line in lines)
    assert any(line.split()[:2] == ["clusterqueue.kueue.x-k8s.io/team-a-cq", "team-ab"] for line in lines)
    assert printed["cq"].split()[:3] == ["NAME", "COHORT", "PENDING"]
    assert "team-a" in printed["lq"] and "team-a-cq" in printed["lq"]
    assert "default-flavor" in printed["resourceflavors"]
    short = [line.split()[1] for line in printed["kwl"].splitlines()[1:]]  # Kueue's short name for its Workloads
    assert short == [row[1].removeprefix("workload.kueue.x-k8s.io/") for row in rows]


def test_cluster_serve_puts_a_traces_users_in_their_queues_as_simulate_does(tmp_path: Path) -> None:
    """``--user-queues`` on ``cluster serve`` as on ``simulate``: the same jobs.csv (each job's ClusterQueue, start
    and end) from the same command line; a queue the files do not define is refused, naming it."""
    trace = swf(tmp_path / "t.swf", 1, 2, 3, 4, 1, 1)
    common = ["-w", str(trace), "-w", str(EXAMPLES / "kueue-tenants.yaml"), "--nodes", "4", "--cores-per-node", "2"]
    common += ["--user-queues", "tenant-a,tenant-b", "-s", "kubeflux"]
    cli = [sys.executable, "-m", "kubeflux.cli"]
    simulated = subprocess.run(
        [*cli, "simulate", *common, "-o", str(tmp_path / "sim")], capture_output=True, text=True, timeout=300
    )
    assert simulated.returncode == 0, simulated.stderr
    serve = [*cli, "cluster", "serve", *common, "--clock", "virtual", "--until-done"]
    served = subprocess.run(
        [*serve, "--kubeconfig", str(tmp_path / "k" / "kubeconfig"), "-o", str(tmp_path / "served")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert served.returncode == 0, served.stderr

    def rows(folder: str) -> list[tuple[str, ...]]:
        with (tmp_path / folder / "kubeflux" / "jobs.csv").open() as f:
            return [(r["job_id"], r["cluster_queue"], r["starting_time"], r["finish_time"]) for r in csv.DictReader(f)]

    assert rows("served") == rows("sim")
    assert {row[1] for row in rows("served")} == {"tenant-a-cq", "tenant-b-cq"}
    bad = [arg if arg != "tenant-a,tenant-b" else "tenant-a,team-x" for arg in serve]
    refused = subprocess.run(bad, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    assert "--user-queues: no LocalQueue team-x" in " ".join(refused.stderr.split())


def test_a_suspended_job_not_started_may_change_its_pods_scheduling_directives_only() -> None:
    """What lets Kueue put a flavor on a Job before resuming it (kube-apiserver's
    ``JobMutableNodeSchedulingDirectives``): the template's node selector and tolerations of a suspended Job that
    never started may change; its containers may not, nor may a running Job's selector."""
    server = served_cluster()
    try:
        call(server, "POST", JOBS, job("held", "30s", suspend=True))
        call(server, "POST", JOBS, job("running", "30s"))
        for name, change, allowed in (
            (
                "held",
                {"nodeSelector": {"instance-type": "spot"}, "tolerations": [{"key": "spot", "operator": "Exists"}]},
                True,
            ),
            ("held", {"containers": [{"name": "main", "image": "busybox:1.37"}]}, False),
            ("running", {"nodeSelector": {"instance-type": "spot"}}, False),
        ):
            current = call(server, "GET", f"{JOBS}/{name}")
            current["spec"]["template"]["spec"].update(change)
            try:
                call(server, "PUT", f"{JOBS}/{name}", current)
                outcome = True
            except urllib.error.HTTPError as exc:
                # (the real kube-apiserver names the pod spec of a held Job: tests/realkube/differential)
                where = b"spec.template.spec" if name == "held" else b"spec.template"
                assert exc.code == 422 and where + b": Invalid value: field is immutable" in exc.read()
                outcome = False
            assert outcome is allowed, (name, change)
        template = call(server, "GET", f"{JOBS}/held")["spec"]["template"]["spec"]
        assert template["nodeSelector"] == {"instance-type": "spot"}
    finally:
        server.stop()


@pytest.mark.parametrize("scheduler", ["kube-default", "kubeflux"])
def test_wait_for_pods_ready_suspends_and_resumes_a_job_through_cluster_serve_as_in_the_simulator(
    tmp_path: Path, scheduler: str
) -> None:
    """``kueue-pods-ready.yaml``'s queues and blocking pod with a Job of 4 pods of 4 cores instead of the gang: only
    2 fit beside the blocker, so 2 minutes after each admission the Job is evicted (suspended, its pods deleted) and
    admitted again after its back-off, until the node is free at 400 s: the same runs through both."""
    text = (EXAMPLES / "kueue-pods-ready.yaml").read_text()
    queues = text[: text.index("apiVersion: scheduling.x-k8s.io/v1alpha1")]
    wide = (
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: wide, labels: {kueue.x-k8s.io/queue-name: user-queue}, "
        "annotations: {sim.kubeflux.io/submit-time: '1'}}\nspec: {parallelism: 4, completions: 4, template: "
        "{metadata: {annotations: {pod-complete.stage.kwok.x-k8s.io/delay: 300s}}, spec: {restartPolicy: Never, "
        "containers: [{name: rank, image: mpi, resources: {requests: {cpu: '4'}}}]}}}\n"
    )
    (tmp_path / "wide.yaml").write_text(queues + wide)
    nodes = nodes_for("two-8core.yaml")
    simulated, served = both(map_to_cluster(load_workload(tmp_path / "wide.yaml"), nodes), nodes, scheduler)
    assert simulated.admission["pods_ready_timeouts"] == 2  # at 121 s and 301 s
    assert {job.job_id: job.starting_time for job in simulated.jobs}["default/wide"] == 421.0
    same_run(simulated, served)


def test_a_gang_evicted_for_its_pods_not_ready_keeps_its_workload() -> None:
    """``kueue-pods-ready.yaml``: the gang's pods are deleted at each eviction, its Workload (not owned by them, so
    that the garbage collector leaves it) stays and ends admitted, its evictions said ``Previously: …``."""
    nodes = nodes_for("two-8core.yaml")
    workload = map_to_cluster(load_workload(EXAMPLES / "kueue-pods-ready.yaml"), nodes)
    seen: list[dict[str, Any]] = []
    live(
        workload,
        nodes,
        "kube-default",
        lambda server: seen.extend(items(server, f"{KUEUE}/namespaces/default/workloads")),
    )
    assert [wl["metadata"]["name"].rpartition("-")[0] for wl in seen] == ["podgroup-gang"]
    said = conditions(seen[0])
    assert said["Evicted"] == ("False", "QuotaReserved", "Previously: Exceeded the PodsReady timeout default/gang")
    assert said["Finished"][:2] == ("True", "Succeeded") and said["Admitted"][0] == "True"


def test_gangs_admitted_together_reach_kubeflux_in_kueues_order_as_in_the_simulator(tmp_path: Path) -> None:
    """Two teams of 4 cores each in a cohort, on 4 nodes of 2 cores. Team A's 8-core gang runs (borrowing team B's
    half) until 100 s; team A's 6-core gang (1 s) and team B's 2-core one (2 s) wait. At 100 s both are admitted in
    one cycle, team B's first (it needs no borrowing): as in the simulator, its PodGroup is made first, so kubeflux
    places it first (cores 0-1), though team A's arrived first."""
    text = (tmp_path / "order.yaml").open("w")
    text.write(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n"
        + "".join(
            f"---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {{name: {cq}}}\nspec:\n"
            f"  namespaceSelector: {{}}\n  cohort: ab\n  resourceGroups: [{{coveredResources: [cpu], flavors: "
            f"[{{name: f, resources: [{{name: cpu, nominalQuota: 4}}]}}]}}]\n---\napiVersion: kueue.x-k8s.io/v1beta1\n"
            f"kind: LocalQueue\nmetadata: {{namespace: team-{cq}, name: q}}\nspec: {{clusterQueue: {cq}}}\n"
            for cq in ("a", "b")
        )
    )
    for namespace, name, pods, at in (("team-a", "first", 4, 0), ("team-a", "wide", 3, 1), ("team-b", "small", 1, 2)):
        submit = f"sim.kubeflux.io/submit-time: '{at}'"
        text.write(
            f"---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}, namespace: "
            f"{namespace}, annotations: {{{submit}}}}}\nspec: {{minMember: {pods}}}\n"
        )
        for i in range(pods):
            text.write(
                f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}-{i}, namespace: {namespace}, labels: "
                f"{{kueue.x-k8s.io/queue-name: q, scheduling.x-k8s.io/pod-group: {name}}}, annotations: {{{submit}, "
                "pod-complete.stage.kwok.x-k8s.io/delay: 100s}}\nspec: {containers: [{name: c, image: i, "
                "resources: {requests: {cpu: '2'}}}]}\n"
            )
    text.close()
    nodes = uniform_cluster(4, 2, "16Gi")
    simulated, served = both(map_to_cluster(load_workload(tmp_path / "order.yaml"), nodes), nodes, "kubeflux")
    placed = {job.job_id: (job.starting_time, job.allocated_resources) for job in simulated.jobs}
    assert placed["team-b/small"] == (100.0, [0, 1]) and placed["team-a/wide"] == (100.0, list(range(2, 8)))
    same_run(simulated, served)
