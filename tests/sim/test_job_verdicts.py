"""One validation for ``batch/v1`` Jobs: ``simulate`` and ``cluster serve`` give the same Job the same verdict, in
the words of the real kube-apiserver v1.36 (``pkg/apis/batch/validation``; int32 counts refused when decoding).

Each case is sent to ``cluster serve`` (its HTTP status and message) and read by ``simulate``'s manifest reader
(accepted, or skipped with a problem quoting the same message)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.workloads.manifests import read_manifests
from tests.sim.conftest import Verdict, dry_run, pod, served_and_read

INT32 = "into Go struct field JobSpec.spec.{} of type int32"


def job(name: str = "j", **spec: Any) -> dict[str, Any]:
    template = {
        "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "10s"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {**spec, "template": template}}


def with_restart_policy(body: dict[str, Any], policy: str | None) -> dict[str, Any]:
    """``body`` (a :func:`job`) with its template's ``restartPolicy`` set to ``policy`` (None: left out)."""
    spec = body["spec"]["template"]["spec"]
    spec.pop("restartPolicy")
    if policy is not None:
        spec["restartPolicy"] = policy
    return body


CASES = [
    Verdict("completions-0-completes-at-once", job(completions=0), 201),
    Verdict("parallelism-0-waits", job(parallelism=0, completions=2), 201),
    Verdict("int32-max-completions", job(completions=2**31 - 1), 201),
    Verdict(
        "completions-beyond-int32",
        job(completions=2**31),
        400,
        "json: cannot unmarshal number 2147483648 " + INT32.format("completions"),
    ),
    Verdict(
        "parallelism-beyond-int32",
        job(parallelism=10**12),
        400,
        "json: cannot unmarshal number 1000000000000 " + INT32.format("parallelism"),
    ),
    Verdict(
        "completions-a-fraction",
        job(completions=1.5),
        400,
        "json: cannot unmarshal number 1.5 " + INT32.format("completions"),
    ),
    Verdict(
        "completions-a-string",
        job(completions="3"),
        400,
        "json: cannot unmarshal string " + INT32.format("completions"),
    ),
    Verdict("completions-negative", job(completions=-1), 422, "Invalid value: -1: must be greater than or equal to 0"),
    Verdict(
        "backoff-limit-negative", job(backoffLimit=-3), 422, "Invalid value: -3: must be greater than or equal to 0"
    ),
    Verdict("indexed-without-counts-defaults-to-one", job(completionMode="Indexed"), 201),
    Verdict(
        "indexed-without-completions",
        job(completionMode="Indexed", parallelism=2),
        422,
        "Required value: when completion mode is Indexed",
    ),
    Verdict("indexed-a-million-completions-short-name", job(completions=10**6, completionMode="Indexed"), 201),
    Verdict(
        "indexed-parallelism-beyond-100000",
        job(completions=200_000, parallelism=100_001, completionMode="Indexed"),
        422,
        "Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
    ),
    Verdict(
        "indexed-hostname-beyond-a-dns-label",
        job("a" * 60, completions=10_000, completionMode="Indexed"),
        422,
        "will not able to create pod with invalid DNS label: " + "a" * 60 + "-9999",
    ),
    # the real kube-apiserver v1.36's words (a missing policy is defaulted to Always first); an unknown one is
    # refused twice there, by the pod template's rule and the Job's (simulate says the Job's)
    *(
        Verdict(
            f"restart-policy-{name}",
            with_restart_policy(job(), policy),
            422,
            'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
        )
        for name, policy in (("always", "Always"), ("missing", None))
    ),
    Verdict(
        "restart-policy-unknown",
        with_restart_policy(job(), "Sometimes"),
        422,
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"',
    ),
    Verdict(
        "unknown-completion-mode",
        job(completionMode="Sometimes"),
        422,
        'Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"',
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_simulate_and_cluster_serve_agree_on_a_job(server: ApiServer, tmp_path: Path, case: Verdict) -> None:
    workload = served_and_read(server, "/apis/batch/v1/namespaces/default/jobs", case, tmp_path)
    if case.status == 201:
        assert [j.id for j in workload.jobs] == [f"default/{case.obj['metadata']['name']}"], workload.problems
        assert workload.problems == []
    else:
        assert workload.jobs == []
        assert len(workload.problems) == 1 and case.says in workload.problems[0], workload.problems


def run(tmp_path: Path, body: dict[str, Any]) -> tuple[int, str, list[str]]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(body))
    out = tmp_path / "out"
    args = ["simulate", "-w", str(path), "-s", "fcfs", "--nodes", "1", "--cores-per-node", "4", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    rows = (out / "fcfs" / "jobs.csv").read_text().splitlines() if result.exit_code in (0, 3) else []
    return result.exit_code, " ".join(result.output.split()), [r for r in rows if not r.startswith("#")]


def test_a_job_of_zero_completions_completes_at_once_in_simulate(tmp_path: Path) -> None:
    code, output, rows = run(tmp_path, job(completions=0))
    assert code == 0, output
    assert rows[1].startswith("default/j,") and ",COMPLETED_SUCCESSFULLY,0.000000,0.000000,0.000000," in rows[1]
    [summary] = json.loads((tmp_path / "out" / "summary.json").read_text())
    counts = ("jobs", "succeeded", "failed", "started_jobs", "finished_jobs")
    assert {k: summary[k] for k in counts} == dict.fromkeys(counts, 1) | {"failed": 0}  # it was failed -1, started 0


PARALLELISM_0 = (
    "note: 1 Job(s) have parallelism 0 (first: default/j): a Job never runs a pod until its parallelism is raised, so "
    "they never finish"
)


def test_a_job_of_parallelism_zero_is_said_to_never_run_by_simulate_and_cluster_serve(tmp_path: Path) -> None:
    """The same note from both (cluster serve said nothing), and the same end: nothing ran (exit code 3)."""
    code, output, _ = run(tmp_path, job(parallelism=0, completions=2))
    assert code == 3
    assert PARALLELISM_0 in output
    path = tmp_path / "job.yaml"  # the file run() wrote
    serve = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--clock", "virtual", "--until-done"]
    args = ["-w", str(path), "-s", "fcfs", "--nodes", "1", "--cores-per-node", "4", "-o", str(tmp_path / "served")]
    served = subprocess.run(
        [*serve, *args, "--kubeconfig", str(tmp_path / "kubeconfig")], capture_output=True, text=True, timeout=300
    )
    assert served.returncode == 3, served.stdout + served.stderr
    assert PARALLELISM_0 in " ".join(served.stdout.split())


def cronjob(**counts: Any) -> dict[str, Any]:
    """A CronJob whose Job template has ``counts``."""
    template = job(**counts)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "@hourly", "jobTemplate": {"spec": template["spec"]}},
    }


CRON_INT32 = "into Go struct field JobSpec.spec.jobTemplate.spec.{} of type int32"


@pytest.mark.parametrize(
    ("counts", "status", "says"),
    [
        ({"completions": 3, "parallelism": 2}, 201, ""),
        ({"completions": 2**31}, 400, "json: cannot unmarshal number 2147483648 " + CRON_INT32.format("completions")),
        ({"backoffLimit": "6"}, 400, "json: cannot unmarshal string " + CRON_INT32.format("backoffLimit")),
        (
            {"parallelism": -1},
            422,
            "spec.jobTemplate.spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            {"completionMode": "Indexed"},
            422,
            "spec.jobTemplate.spec.completions: Required value: when completion mode is Indexed",
        ),
    ],
    ids=["valid", "completions-beyond-int32", "backoff-limit-a-string", "parallelism-negative", "indexed-no-count"],
)
def test_a_cronjobs_job_template_is_held_to_a_jobs_rules(
    server: ApiServer, counts: dict[str, Any], status: int, says: str
) -> None:
    """``ValidateJobTemplateSpec``: a CronJob's Job template is validated as a Job's spec (kubeflux.apiobjects.batchjob)
    at its own path, with no name (its Jobs are named when the schedule fires)."""
    got, message = dry_run(server, "/apis/batch/v1/namespaces/default/cronjobs", cronjob(**counts))
    assert (got, says in message) == (status, True), message


def test_a_second_job_or_pod_of_one_name_is_refused(tmp_path: Path) -> None:
    """cluster serve answers 409 AlreadyExists to a second Job (or Pod) of a name; simulate's reader names it and
    skips it, instead of running it as ``default/j.job`` whose pods collide with the first Job's."""
    path = tmp_path / "twice.yaml"
    path.write_text(yaml.safe_dump_all([job(), job(), pod("j"), pod("j")]))
    workload = read_manifests(path)
    assert sorted(j.id for j in workload.jobs) == ["default/j", "default/j.pod"]  # a Pod may share a Job's name
    assert workload.problems == [
        "twice.yaml: document 2: Job default/j: metadata.name: defined twice (first in document 1); skipped",
        "twice.yaml: document 4: Pod default/j: metadata.name: defined twice (first in document 3); skipped",
    ]


def test_an_unknown_restart_policy_is_refused_by_the_pod_rule_and_the_jobs_as_on_the_real_server(
    server: ApiServer,
) -> None:
    """kube-apiserver v1.36 answers a Job template's ``restartPolicy: Sometimes`` with two causes (the pod
    template's three policies, then the Job's two), in double quotes (it quoted ``'Always'`` in Python's way)."""
    status, message = dry_run(server, "/apis/batch/v1/namespaces/default/jobs", with_restart_policy(job(), "Sometimes"))
    field = "spec.template.spec.restartPolicy"
    assert status == 422
    assert message == (
        f'Job.batch "j" is invalid: [{field}: Unsupported value: "Sometimes": supported values: "Always", '
        f'"OnFailure", "Never", {field}: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"]'
    )
