"""A trace's users as Kueue tenants (``simulate --user-queues``, :mod:`kubeflux.sim.workloads.tenants`): the SWF
user field read, the mapping rule, bad option values named, and a run in which each tenant's jobs are admitted
by its own ClusterQueue (issue 33)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.command import merge_workloads
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.swf import read_swf
from kubeflux.sim.workloads.tenants import default_local_queues, parse_queues, queue_of_user, queues_by_user
from tests.shared import REPO, SHARED

TENANTS = REPO / "examples" / "workloads" / "kueue-tenants.yaml"
HEADER = "; MaxProcs: 8\n; MaxNodes: 4\n"


def swf(path: Path, *users: int) -> Path:
    """One 2-processor job a user (job n at n·10 s), 18 fields each."""
    lines = [f"{n} {n * 10} -1 100 2 -1 -1 2 200 -1 1 {user} 1 -1 1 1 -1 -1" for n, user in enumerate(users, start=1)]
    path.write_text(HEADER + "\n".join(lines) + "\n")
    return path


def test_the_swf_user_field_is_kept_and_unknown_users_are_empty(tmp_path: Path) -> None:
    jobs = read_swf(swf(tmp_path / "t.swf", 7, -1, 12)).jobs
    assert [job.user for job in jobs] == ["7", "", "12"]


def test_users_go_to_the_queue_of_their_id_mod_the_number_of_queues() -> None:
    queues = ("tenant-a", "tenant-b", "tenant-c")
    assert [queue_of_user(u, queues) for u in ("0", "1", "2", "3", "17")] == [
        "tenant-a",
        "tenant-b",
        "tenant-c",
        "tenant-a",
        "tenant-c",
    ]
    assert queue_of_user("", queues) == "tenant-a"  # unknown user: the first queue
    assert queue_of_user("alice", queues) == queue_of_user("alice", queues)  # a name: stable, one of them
    assert queue_of_user("alice", queues) in queues


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "name at least one LocalQueue"),
        ("tenant-a,Tenant_B", "'Tenant_B' is not a LocalQueue name"),
        ("tenant-a,tenant-a", "named twice"),
    ],
)
def test_bad_queue_lists_are_refused_naming_the_option(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="--user-queues") as caught:
        parse_queues(text)
    assert says in str(caught.value)


def test_a_queue_the_workload_does_not_define_is_refused_with_the_queues_it_has(tmp_path: Path) -> None:
    trace = read_swf(swf(tmp_path / "t.swf", 1, 2))
    with pytest.raises(ValueError, match=r"no LocalQueue tenant-a, tenant-b in namespace default .*give a --workload"):
        queues_by_user(trace, ("tenant-a", "tenant-b"))

    merged = merge_workloads([trace, load_workload(TENANTS)])
    with pytest.raises(ValueError, match=r"no LocalQueue team-x .*default/tenant-a, default/tenant-b"):
        queues_by_user(merged, ("tenant-a", "team-x"))
    assigned = queues_by_user(merged, ("tenant-a", "tenant-b"))
    assert [job.queue_name for job in assigned.jobs] == ["tenant-b", "tenant-a"]
    assert [job.queue_name for job in merged.jobs] == ["", ""]  # a new workload; the one given is unchanged


def test_simulate_with_user_queues_admits_each_tenants_jobs_in_its_cluster_queue(tmp_path: Path) -> None:
    """Four 2-core jobs of users 1, 2, 3, 4 on 4 nodes of 2 cores: the odd users' jobs are tenant-b's, the even
    users' tenant-a's, and jobs.csv names the ClusterQueue that admitted each."""
    trace = swf(tmp_path / "t.swf", 1, 2, 3, 4)
    out = tmp_path / "out"
    args = ["simulate", "-w", str(trace), "-w", str(TENANTS), "--nodes", "4", "--cores-per-node", "2"]
    result = CliRunner().invoke(app, [*args, "--user-queues", "tenant-a,tenant-b", "-s", "kubeflux", "-o", str(out)])
    assert result.exit_code == 0, result.output
    with (out / "kubeflux" / "jobs.csv").open() as f:
        queues = {row["job_id"].rpartition(":")[2]: row["cluster_queue"] for row in csv.DictReader(f)}
    assert queues == {"1": "tenant-b-cq", "2": "tenant-a-cq", "3": "tenant-b-cq", "4": "tenant-a-cq"}
    summary = json.loads((out / "summary.json").read_text())[0]
    assert summary["admitted_jobs[tenant-a-cq]"] == 2 and summary["admitted_jobs[tenant-b-cq]"] == 2


def test_simulate_names_a_bad_user_queues_value(tmp_path: Path) -> None:
    trace = swf(tmp_path / "t.swf", 1)
    args = ["simulate", "-w", str(trace), "--user-queues", "tenant-a", "-s", "kubeflux", "-o", str(tmp_path / "o")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0
    assert "--user-queues: no LocalQueue tenant-a" in result.output


def test_jobs_without_a_queue_go_to_their_namespace_s_default_local_queue(tmp_path: Path) -> None:
    """Kueue's LocalQueueDefaulting: seed 004's 50 Jobs name no LocalQueue; beside a file whose LocalQueue in their
    namespace is named ``default``, every one is admitted by its ClusterQueue before its pods exist."""
    out = tmp_path / "out"
    kueue = REPO / "examples" / "workloads" / "kueue-seed004.yaml"
    args = ["simulate", "--preset", "seed004-jobs", "-w", str(kueue), "-s", "kube-default", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())[0]
    assert summary["admitted_jobs[seed004]"] == 50 and summary["never_admitted"] == 0
    with (out / "kube-default" / "jobs.csv").open() as f:
        assert {row["cluster_queue"] for row in csv.DictReader(f)} == {"seed004"}


def test_the_default_local_queue_takes_only_unlabelled_jobs_of_its_own_namespace(tmp_path: Path) -> None:
    """Only ``batch/v1`` Jobs (Kueue's ``batch/job`` integration, on by default): a plain Pod (the ``pod``
    integration is off by default) and a Job naming another queue or in another namespace keep what they name."""
    queues = (
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: f}\n---\n"
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n  namespaceSelector: {}\n"
        "  resourceGroups: [{coveredResources: [cpu],\n"
        "    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]}]\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {namespace: team-a, name: default}\n"
        "spec: {clusterQueue: cq}\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {namespace: team-a, name: other}\nspec: {clusterQueue: cq}\n"
    )
    pod_spec = "{containers: [{name: c, image: i, resources: {requests: {cpu: '1'}}}], restartPolicy: Never}"
    jobs = "".join(
        f"---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}, namespace: {ns}{labels}}}\n"
        f"spec: {{template: {{spec: {pod_spec}}}}}\n"
        for name, ns, labels in (
            ("plain", "team-a", ""),
            ("labelled", "team-a", ", labels: {kueue.x-k8s.io/queue-name: other}"),
            ("elsewhere", "team-b", ""),
        )
    )
    pod = f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: lone, namespace: team-a}}\nspec: {pod_spec}\n"
    (tmp_path / "w.yaml").write_text(queues + jobs + pod)
    workload = default_local_queues(load_workload(tmp_path / "w.yaml"))
    assert {job.name: job.queue_name for job in workload.jobs} == {
        "plain": "default",
        "labelled": "other",
        "elsewhere": "",
        "lone": "",
    }


def test_user_queues_refuses_work_it_cannot_split_by_user(tmp_path: Path) -> None:
    """A Batsim workload (no users), a workload of Kubernetes kinds only, and a LocalQueue leading to a missing
    ClusterQueue are refused before the run; a queue name with dots (a DNS subdomain) is a LocalQueue name."""
    kth = SHARED / "traces" / "KTH-SP2-1996-2.1-cln.first1000.batsim.json"
    if kth.is_file():
        batsim = merge_workloads([load_workload(kth), load_workload(TENANTS)])
        with pytest.raises(ValueError, match=r"no trace job names a user .*all 1,000 would go to tenant-a"):
            queues_by_user(batsim, ("tenant-a", "tenant-b"))
    (tmp_path / "lost.yaml").write_text(
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {namespace: default, name: team.a}\n"
        "spec: {clusterQueue: nowhere}\n"
    )
    lost = merge_workloads([read_swf(swf(tmp_path / "t.swf", 1)), load_workload(tmp_path / "lost.yaml")])
    assert parse_queues("team.a") == ("team.a",)
    with pytest.raises(ValueError, match=r"LocalQueue team\.a leads to ClusterQueue nowhere, which is not defined"):
        queues_by_user(lost, ("team.a",))
    jobs_only = load_workload(REPO / "examples" / "workloads" / "kueue-cohort-reclaim.yaml")
    with pytest.raises(ValueError, match="no trace jobs"):
        queues_by_user(merge_workloads([jobs_only, load_workload(TENANTS)]), ("tenant-a",))
