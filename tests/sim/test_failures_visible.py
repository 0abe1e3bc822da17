"""``kubeflux simulate`` does not hide failures: jobs.csv says why a job was rejected, failed or never finished,
the table never crowns a run that left jobs waiting, a run with unfinished jobs warns, and a comparison in which
nothing finished exits non-zero."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.command import NOTHING_RAN
from kubeflux.sim.report import summary_table

CLUSTER = """apiVersion: v1
kind: Node
metadata: {name: w1}
status:
  allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
"""


def _pod(name: str, cpu: str, run: str = "30s", exit_code: int = 0, selector: str = "") -> str:
    spec = f"  nodeSelector: {{{selector}}}\n" if selector else ""
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{pod-complete.stage.kwok.x-k8s.io/delay: {run}, sim.kubeflux.io/exit-code: "{exit_code}"}}
spec:
{spec}  restartPolicy: Never
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def _simulate(tmp_path: Path, pods: list[str], *schedulers: str) -> tuple[int, str, Path]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER, encoding="utf-8")
    (tmp_path / "pods.yaml").write_text("---\n".join(pods), encoding="utf-8")
    out = tmp_path / "out"
    args = ["simulate", "--cluster", str(tmp_path / "cluster.yaml"), "--workload", str(tmp_path / "pods.yaml")]
    for name in schedulers:
        args += ["--scheduler", name]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    return result.exit_code, result.output, out


def _metadata(out: Path, scheduler: str) -> dict[str, str]:
    with (out / scheduler / "jobs.csv").open(encoding="utf-8") as stream:
        return {row["job_id"]: row["metadata"] for row in csv.DictReader(stream)}


def test_jobs_csv_says_why_a_job_was_rejected_or_failed_and_a_waiting_job_is_warned_of(tmp_path: Path) -> None:
    pods = [
        _pod("fine", "4"),
        _pod("huge", "64"),  # more than any node: kubeflux rejects it
        _pod("crash", "4", exit_code=1),
        _pod("nowhere", "1", selector="zone: mars"),  # no node has the label: kube-default keeps it pending
    ]
    code, output, out = _simulate(tmp_path, pods, "kubeflux", "kube-default")
    assert code == 0, output
    kubeflux = _metadata(out, "kubeflux")
    assert kubeflux["default/fine"] == ""
    assert kubeflux["default/huge"].startswith("rejected: ") and "cpu" in kubeflux["default/huge"]
    assert kubeflux["default/crash"].startswith("failed: pod crash: ") and "(exit code 1)" in kubeflux["default/crash"]
    kube_default = _metadata(out, "kube-default")
    assert kube_default["default/nowhere"].startswith("not finished: a pod still waited: ")
    said = " ".join(output.split())
    assert "warning: kube-default: " in said and " jobs never finished" in said


def test_nothing_finished_anywhere_is_an_error_not_a_comparison(tmp_path: Path) -> None:
    code, output, _ = _simulate(tmp_path, [_pod("huge", "64")], "kubeflux")
    assert code == NOTHING_RAN
    assert "no job finished under any scheduler" in output


def test_a_run_that_left_jobs_waiting_is_never_shown_as_best() -> None:
    rows = [
        {"scheduler": "short", "jobs": 3, "not_finished": 2, "mean_waiting_time": 0.0, "makespan": 10.0},
        {"scheduler": "whole", "jobs": 3, "not_finished": 0, "mean_waiting_time": 50.0, "makespan": 90.0},
    ]
    table = summary_table(rows)
    cells = {column.header: list(column.cells) for column in table.columns}
    assert cells["mean wait of started"] == ["0 s", "[green]50.0 s[/green]"]
    assert cells["not finished"] == ["2", "0"]


def test_a_page_where_nothing_ran_points_at_a_file_the_run_wrote(tmp_path: Path) -> None:
    """The page's 'Nothing ran' alert named problems.txt, which a run whose input had no problem does not write."""
    code, _, out = _simulate(tmp_path, [_pod("huge", "64")], "fcfs")
    assert code == NOTHING_RAN and not (out / "problems.txt").exists()
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Nothing ran: the job was rejected by fcfs (the metadata column of jobs.csv says why)." in page
    assert "problems.txt" not in page
    assert _metadata(out, "fcfs")["default/huge"].startswith("rejected: ")


def test_a_workload_in_which_every_job_failed_says_nothing_succeeded_and_exits_as_nothing_ran(tmp_path: Path) -> None:
    """Every pod exits 1: the run "finished" every job, and it exited 0 with a table of figures and no word."""
    code, output, out = _simulate(tmp_path, [_pod("crash", "4", exit_code=1), _pod("also", "4", exit_code=2)], "fcfs")
    said = " ".join(output.split())
    assert code == NOTHING_RAN, output
    assert (
        "error: nothing succeeded: no job succeeded under any scheduler: 2 failed; first: default/crash: failed: "
        in said
    )
    assert "(exit code 1)" in said
    assert (out / "fcfs" / "jobs.csv").is_file()  # the outputs are written all the same, as when nothing ran


def _cluster_serve(tmp_path: Path, pods: list[str]) -> subprocess.CompletedProcess[str]:
    """``cluster serve`` replaying ``pods`` under kubeflux in virtual time to the end (the files ``_simulate``
    wrote: run it first)."""
    args = ["--cluster", str(tmp_path / "cluster.yaml"), "--workload", str(tmp_path / "pods.yaml"), "-s", "kubeflux"]
    serve = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--clock", "virtual", "--until-done"]
    command = [*serve, *args, "--out", str(tmp_path / "served"), "--kubeconfig", str(tmp_path / "kubeconfig")]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("pods", "says"),
    [
        (
            [_pod("huge", "64")],
            "error: no job finished under any scheduler: every job was rejected; first: default/huge:",
        ),
        (
            [_pod("crash", "4", exit_code=1)],
            "error: nothing succeeded: no job succeeded under any scheduler: 1 failed;",
        ),
    ],
    ids=["every-job-rejected", "every-job-failed"],
)
def test_a_cluster_serve_replay_where_nothing_ran_says_it_and_exits_as_simulate(
    tmp_path: Path, pods: list[str], says: str
) -> None:
    """The replay wrote its report and exited 0 without a word; simulate exits 3 for the same workload."""
    code, output, _ = _simulate(tmp_path, pods, "kubeflux")
    assert code == NOTHING_RAN and says in " ".join(output.split()), output
    served = _cluster_serve(tmp_path, pods)
    assert served.returncode == NOTHING_RAN, served.stdout + served.stderr
    assert says in " ".join(served.stdout.split())
    assert (tmp_path / "served" / "index.html").is_file()  # the report is written all the same
