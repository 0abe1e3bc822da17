"""Issue 30's hostile inputs to ``kubeflux simulate``, one named case each: the error text and the exit code.

Every input is bounded and named: out-of-range numbers are errors naming the file, line and field; sizes beyond
the memory budget are refused before anything is allocated, with the estimate; a folder or a FIFO has its own
message; ``--strict`` fails on skipped lines; a PodGroup gets the verdict ``cluster serve`` gives it; pods
without a run time are explained; and without a cluster the SWF header's platform is used."""

from __future__ import annotations

import http.client
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.workloads.limits import MAX_SECONDS
from tests.sim.apiserver.conftest import start_server

SWF_HEADER = "; MaxNodes: 4\n; MaxProcs: 16\n"
GOOD_SWF_LINE = "1 0 0 10 4 -1 -1 4 100 -1 1 1 1 1 1 1 -1 -1\n"
CLUSTER = ("--nodes", "2", "--cores-per-node", "4")


def swf_line(number: int, submit: str = "5", run: str = "10", requested_time: str = "100") -> str:
    return f"{number} {submit} 0 {run} 4 -1 -1 4 {requested_time} -1 1 1 1 1 1 1 -1 -1\n"


def pod(name: str, *, labels: str = "{}", annotations: str = "{}") -> str:
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {labels}, annotations: {annotations}}}\n"
        "spec:\n  containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]\n"
    )


def job(completions: int) -> str:
    return (
        f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: j}}\nspec:\n  completions: {completions}\n"
        "  template:\n    spec:\n      restartPolicy: Never\n"
        "      containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]\n"
    )


MIN_MEMBER_0 = (
    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 0}\n---\n"
    + pod(
        "p0", labels="{scheduling.x-k8s.io/pod-group: g}", annotations="{pod-complete.stage.kwok.x-k8s.io/delay: 10s}"
    )
)


def simulate(tmp_path: Path, *args: str | Path) -> tuple[int, str]:
    """Exit code and output, line breaks and click's box taken out (words joined by one space)."""
    result = CliRunner().invoke(app, ["simulate", *map(str, args), "-o", str(tmp_path / "out")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(re.sub("[│╭╮╰╯─]", " ", result.output).split())


@dataclass(frozen=True)
class Case:
    name: str
    file: str
    text: str
    args: tuple[str, ...]
    code: int
    says: tuple[str, ...]


CASES = [
    Case(
        "swf-run-time-1e400",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE + swf_line(2, run="1e400"),
        ("-s", "fcfs", "--strict"),
        2,
        ("t.swf:4: field 4 (run_time) must be a finite number, got '1e400'",),
    ),
    Case(
        "swf-submit-time-1e23",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE + swf_line(2, submit="1e23"),
        ("-s", "fcfs", "--strict"),
        2,
        (f"t.swf:4: field 2 (submit_time) must be at most {MAX_SECONDS:,} s (100 years), got '1e23'",),
    ),
    Case(
        "swf-nan-requested-time",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE + swf_line(2, requested_time="nan"),
        ("-s", "fcfs", "--strict"),
        2,
        ("t.swf:4: field 9 (requested_time) must be a finite number, got 'nan'",),
    ),
    Case(
        "swf-bad-line-skipped-and-counted",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE + "not a job line\n",
        ("-s", "fcfs"),
        0,
        ("1 input problem(s), 1 line(s)/document(s) skipped; first: t.swf:4: expected 18 fields, found 4",),
    ),
    Case(
        "swf-bad-line-strict",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE + "not a job line\n",
        ("-s", "fcfs", "--strict"),
        2,
        ("error: --strict: 1 input problem(s), 1 line(s)/document(s) skipped",),
    ),
    Case(
        "nodes-1e9-over-budget",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE,
        ("-s", "fcfs", "--nodes", "1000000000", "--cores-per-node", "4"),
        2,
        (
            "--nodes 1000000000 x --cores-per-node 4 would need about 9,536.7 GiB of memory, more than the budget "
            "of 8.0 GiB",
        ),
    ),
    Case(
        "cores-per-node-beyond-a-graph-node",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE,
        ("-s", "fcfs", "--nodes", "1", "--cores-per-node", "100000"),
        2,
        ("at most 65,536 cores and GPUs per node",),
    ),
    Case(
        "job-completions-1e9-over-budget",
        "job.yaml",
        job(1_000_000_000),
        ("-s", "fcfs", *CLUSTER),
        2,
        ("1 jobs (1,000,000,000 pods) on 2 nodes under 1 scheduler(s) would need about 1,907.4 GiB of memory",),
    ),
    Case(
        "job-completions-beyond-int32",
        "job.yaml",
        job(2**31),
        ("-s", "fcfs", "--strict", *CLUSTER),
        2,
        (
            "Job default/j: spec.completions: json: cannot unmarshal number 2147483648 into Go struct field "
            "JobSpec.spec.completions of type int32",
        ),
    ),
    Case(
        "submit-time-annotation-inf",
        "pod.yaml",
        pod("p", annotations="{sim.kubeflux.io/submit-time: 'inf', pod-complete.stage.kwok.x-k8s.io/delay: 1s}"),
        ("-s", "fcfs", "--strict", *CLUSTER),
        2,
        ("metadata.annotations.sim.kubeflux.io/submit-time: must be a finite number of seconds, got 'inf'",),
    ),
    Case(
        "run-time-annotation-too-long",
        "pod.yaml",
        pod("p", annotations="{pod-complete.stage.kwok.x-k8s.io/delay: " + "9" * 400 + "h}"),
        ("-s", "fcfs", "--strict", *CLUSTER),
        2,
        ("pod-complete.stage.kwok.x-k8s.io/delay: invalid duration", "beyond Go's limit of about 292 years"),
    ),
    Case(
        "pod-without-run-time-explained",
        "pod.yaml",
        pod("p"),
        ("-s", "fcfs", *CLUSTER),
        3,
        (
            "note: 1 pod(s) have no run time (annotation pod-complete.stage.kwok.x-k8s.io/delay)",
            "1 of 1 jobs never finished: 1 pod(s) without a run time still run",
        ),
    ),
    Case(
        "pod-with-default-runtime-finishes",
        "pod.yaml",
        pod("p"),
        ("-s", "fcfs", "--default-runtime", "60", *CLUSTER),
        0,
        ("fcfs: 1 jobs, 1 pods bound",),
    ),
    Case(
        "min-member-0-says-what-cluster-serve-says",
        "mm0.yaml",
        MIN_MEMBER_0,
        ("-s", "kubeflux", *CLUSTER),
        3,
        (
            "mm0.yaml: document 1: PodGroup default/g: spec.minMember: must be a positive integer, got 0; skipped",
            "every job was rejected; first: default/p0: its PodGroup default/g is invalid",
        ),
    ),
    Case(
        "min-member-0-strict",
        "mm0.yaml",
        MIN_MEMBER_0,
        ("-s", "kubeflux", "--strict", *CLUSTER),
        2,
        ("error: --strict: 2 input problem(s), 1 line(s)/document(s) skipped",),
    ),
    Case(
        "platform-from-the-swf-header",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE,
        ("-s", "fcfs"),
        0,
        ("platform: 4 nodes × 4 cores from t.swf's header (MaxNodes: 4, MaxProcs: 16)",),
    ),
    Case(
        "memory-per-node-negative",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE,
        ("-s", "fcfs", "--nodes", "4", "--cores-per-node", "4", "--memory-per-node=-5Gi"),
        2,
        ("memory per node must be between 0 and 8Ei (int64 bytes), got '-5Gi'",),
    ),
    Case(
        "memory-per-node-1e400",
        "t.swf",
        SWF_HEADER + GOOD_SWF_LINE,
        ("-s", "fcfs", "--nodes", "4", "--cores-per-node", "4", "--memory-per-node=1e400"),
        2,
        ("memory per node must be between 0 and 8Ei (int64 bytes), got '1e400'",),
    ),
    Case(
        "no-platform-no-cluster",
        "t.swf",
        GOOD_SWF_LINE,
        ("-s", "fcfs"),
        2,
        ("the workload states no platform (an SWF header's MaxNodes/MaxProcs, a Batsim nb_res)",),
    ),
    Case(
        "unreadable-platform-said",
        "t.swf",
        "; MaxNodes: -4\n; MaxProcs: nan\n" + GOOD_SWF_LINE,
        ("-s", "fcfs"),
        2,
        (
            "states no platform",
            "t.swf: header MaxNodes: must be a positive integer, got '-4'",
            "t.swf: header MaxProcs: must be a positive integer, got 'nan'",
        ),
    ),
    Case(
        "platform-key-twice-strict",
        "t.swf",
        "; MaxNodes: 4\n; MaxNodes: 8\n" + GOOD_SWF_LINE,
        ("-s", "fcfs", "--nodes", "4", "--cores-per-node", "4", "--strict"),
        2,
        ("t.swf: header MaxNodes: stated more than once, differently ('4', '8')",),
    ),
    Case(
        "batsim-integer-of-5000-digits",
        "w.json",
        '{"nb_res": ' + "9" * 5000 + ', "jobs": []}',
        ("-s", "fcfs", "--nodes", "4", "--cores-per-node", "4"),
        2,
        ("w.json: invalid JSON: an integer of more than 4,300 digits",),  # not "use sys.set_int_max_str_digits()"
    ),
    Case(
        "unreadable-nb-res-said",
        "w.json",
        '{"nb_res": 0, "jobs": [{"id": "1", "subtime": 0, "res": 1, "profile": "p"}], '
        '"profiles": {"p": {"type": "delay", "delay": 5}}}',
        ("-s", "fcfs"),
        2,
        ("states no platform", "w.json: nb_res: must be a positive integer, got 0"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input(tmp_path: Path, case: Case) -> None:
    path = tmp_path / case.file
    path.write_text(case.text, encoding="utf-8")
    code, output = simulate(tmp_path, "-w", path, *case.args)
    assert code == case.code, output
    for words in case.says:
        assert words in output, output
    assert "Traceback" not in output


def test_the_report_says_how_many_lines_were_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE + "not a job line\n" + swf_line(2, run="1e400"))
    code, _ = simulate(tmp_path, "-w", path, "-s", "fcfs")
    assert code == 0
    assert "t.swf (2 line(s)/document(s) skipped: see problems.txt)" in (tmp_path / "out" / "index.html").read_text()
    problems = (tmp_path / "out" / "problems.txt").read_text()
    assert "t.swf:4: expected 18 fields" in problems and "t.swf:5: field 4 (run_time)" in problems


def test_the_platform_is_the_first_line_of_the_output(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE)
    result = CliRunner().invoke(app, ["simulate", "-w", str(path), "-s", "fcfs", "-o", str(tmp_path / "out")])
    assert result.exit_code == 0
    assert result.output.splitlines()[0].startswith("platform: 4 nodes × 4 cores from t.swf's header")


def test_every_scheduler_is_compared_by_default(tmp_path: Path) -> None:
    from kubeflux.sim.baselines import available

    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE + swf_line(2))
    code, _ = simulate(tmp_path, "-w", path)
    assert code == 0
    rows = json.loads((tmp_path / "out" / "summary.json").read_text())
    names = [row["scheduler"] for row in rows]
    assert names[0] == "kubeflux" and sorted(names) == sorted(n for n, info in available().items() if info.in_all)


def test_all_beside_a_named_scheduler_runs_each_once(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE)
    code, _ = simulate(tmp_path, "-w", path, "-s", "easy", "-s", "all")
    assert code == 0
    names = [row["scheduler"] for row in json.loads((tmp_path / "out" / "summary.json").read_text())]
    assert names[0] == "easy" and len(names) == len(set(names))


@pytest.mark.parametrize("kind", ["folder", "fifo", "missing", "broken-link"])
def test_a_path_that_is_no_file_has_its_own_message(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "w.swf"
    expected = {
        "folder": "is a folder, not a workload file",
        "fifo": "is a named pipe (FIFO), not a regular file",
        "missing": "w.swf: no such file",
        "broken-link": "a broken symbolic link",
    }[kind]
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "broken-link":
        path.symlink_to(tmp_path / "gone")
    code, output = simulate(tmp_path, "-w", path, *CLUSTER)
    assert code == 2 and expected in output, output


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_says_permission_denied(tmp_path: Path) -> None:
    path = tmp_path / "w.swf"
    path.write_text(GOOD_SWF_LINE)
    path.chmod(0)
    code, output = simulate(tmp_path, "-w", path, *CLUSTER)
    assert code == 2 and "w.swf: cannot read: permission denied" in output


def test_a_cluster_folder_has_its_own_message(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE)
    code, output = simulate(tmp_path, "-w", path, "--cluster", tmp_path)
    assert code == 2 and "is a folder, not a cluster file" in output


def test_min_member_0_gets_the_words_cluster_serve_answers_with(tmp_path: Path) -> None:
    """One validation: the problem simulate reports is the message of cluster serve's 422 for the same object."""
    path = tmp_path / "mm0.yaml"
    path.write_text(MIN_MEMBER_0)
    simulate(tmp_path, "-w", path, "-s", "kubeflux", *CLUSTER)
    problems = (tmp_path / "out" / "problems.txt").read_text()
    server = start_server(tmp_path, nodes=1)
    try:
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"minMember": 0},
        }
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request(
            "POST",
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
            json.dumps(group),
            {"Content-Type": "application/json"},
        )
        answer = connection.getresponse()
        status = json.loads(answer.read())
        connection.close()
    finally:
        server.stop()
    assert answer.status == 422
    cause = status["details"]["causes"][0]
    assert cause["field"] == "spec.minMember"
    assert f"PodGroup default/g: {cause['field']}: must be a positive integer, got 0" in problems
    assert "must be a positive integer, got 0" in cause["message"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("jobs=1000000000", "jobs and max_size: at most 10,000,000 and 1,000,000, got 1,000,000,000 and 64"),
        ("max_size=1000000000,sizes=uniform", "got 100 and 1,000,000,000"),
        ("mean_runtime=nan", "mean_runtime: must be a finite number of seconds, got nan"),
        ("mean_interarrival=1e23", "mean_interarrival: must be at most 3,153,600,000 s (100 years), got 1e+23"),
    ],
    ids=["jobs-1e9", "max-size-1e9", "runtime-nan", "interarrival-1e23"],
)
def test_synthetic_specs_are_bounded_before_generating(tmp_path: Path, spec: str, says: str) -> None:
    code, output = simulate(tmp_path, "--synthetic", spec, "-s", "fcfs", *CLUSTER)
    assert code == 2 and says in output, output


def test_the_memory_budget_counts_every_scheduler_run(tmp_path: Path) -> None:
    """``--scheduler all`` keeps 8 runs' records until the outputs are written: measured 1,106 MiB at peak for
    ``jobs=20000`` on 64 x 16 cores (254 MiB under fcfs alone), so a 1 GiB budget refuses all 8 and lets one run."""
    from kubeflux.sim.inputs import check_budget, scheduler_names
    from kubeflux.sim.workloads.cluster_file import uniform_cluster
    from kubeflux.sim.workloads.synthetic import generate, parse_spec

    eight = [arg for name in scheduler_names(None)[:8] for arg in ("-s", name)]  # all, as the figures were measured
    code, output = simulate(
        tmp_path, "--synthetic", "jobs=20000", *eight, "--memory-budget", "1Gi", "--nodes", "64",
        "--cores-per-node", "16",
    )  # fmt: skip
    assert code == 2, output
    assert "under 8 scheduler(s) would need about 1.2 GiB of memory, more than the budget of 1.0 GiB" in output
    workload = generate(parse_spec("jobs=20000"), seed=0)
    check_budget(workload, uniform_cluster(64, 16, "64Gi", 0), ["kubeflux"], 2**30)  # one run fits


@pytest.mark.parametrize(
    ("budget", "says"),
    [
        ("1e400", "--memory-budget must be at most 8Ei (2^63 - 1 bytes), got '1e400'"),
        ("0", "--memory-budget must be positive, got '0'"),
        ("1Ki", "--memory-budget must be at least 96Mi, what the command needs before any input, got '1Ki'"),
    ],
    ids=["beyond-int64", "zero", "below-the-command"],
)
def test_a_memory_budget_out_of_range_is_refused(tmp_path: Path, budget: str, says: str) -> None:
    """A budget of 1e400 bytes would turn the check off without a word."""
    code, output = simulate(tmp_path, "--synthetic", "jobs=10", "-s", "fcfs", "--memory-budget", budget, *CLUSTER)
    assert code == 2 and says in " ".join(output.split()), output


def test_an_estimate_close_to_the_budget_reads_apart_from_it() -> None:
    from kubeflux.sim.workloads.limits import budget_problem

    problem = budget_problem("the run", 3_565_158_400 + 2**20, 3_565_158_400)  # both "3.3 GiB"
    assert problem is not None and "about 3,401 MiB of memory, more than the budget of 3,400 MiB" in problem


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (
            swf_line(2, run="-1"),
            "1 job(s) rejected by the reader; first: t.swf:4: unknown run time (SWF field 4 is -1)",
        ),
        (swf_line(2, run="-7"), "1 job(s) rejected by the reader; first: t.swf:4: negative run time"),
    ],
    ids=["run-time-minus-1", "run-time-negative"],
)
def test_strict_fails_on_jobs_the_reader_rejected(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE + line)
    code, output = simulate(tmp_path, "-w", path, "-s", "fcfs", "--strict")
    assert code == 2 and f"error: --strict: {says}" in output, output
    code, output = simulate(tmp_path, "-w", path, "-s", "fcfs", "--force")
    assert code == 0, output  # without --strict the job is kept, REJECTED in jobs.csv


BOM = "\ufeff"
BATSIM = json.dumps(
    {
        "nb_res": 4,
        "jobs": [{"id": 1, "subtime": 0, "res": 1, "profile": "p"}],
        "profiles": {"p": {"type": "delay", "delay": 5}},
    }
)
POD_5S = pod("p", annotations="{pod-complete.stage.kwok.x-k8s.io/delay: 5s}")
NUMBER_CASES = [
    Case("swf-underscore-digits", "t.swf", SWF_HEADER + swf_line(1, run="1_000"), ("--strict",), 2,
         ("t.swf:3: field 4 (run_time) is not a number: '1_000'",)),
    Case("swf-arabic-indic-digits", "t.swf", SWF_HEADER + swf_line(1, submit="١٢"), ("--strict",), 2,
         ("t.swf:3: field 2 (submit_time) is not a number: '١٢'",)),
    Case("swf-400-digit-value-cut", "t.swf", SWF_HEADER + swf_line(1, submit="9" * 400), ("--strict",), 2,
         ("t.swf:3: field 2 (submit_time) must be a finite number of seconds, got '999999999999999999999999999"
          "999999999999… (402 characters)",)),
    Case("exit-code-other-digits", "pod.yaml", pod("p", annotations="{sim.kubeflux.io/exit-code: '\u0663'}"),
         ("--strict", *CLUSTER), 2, ("sim.kubeflux.io/exit-code: must be an integer from 0 to 255, got '٣'",)),
    Case("submit-time-underscore", "pod.yaml", pod("p", annotations="{sim.kubeflux.io/submit-time: '1_0'}"),
         ("--strict", *CLUSTER), 2,
         ("sim.kubeflux.io/submit-time: must be a non-negative number of seconds, got '1_0'",)),
    Case("swf-with-byte-order-mark", "t.swf", BOM + SWF_HEADER + GOOD_SWF_LINE, ("--strict",), 0,
         ("platform: 4 nodes × 4 cores from t.swf's header",)),
    Case("yaml-with-byte-order-mark", "pod.yaml", BOM + POD_5S, ("--strict", *CLUSTER), 0, ("1 jobs, 1 pods bound",)),
    Case("batsim-with-byte-order-mark", "w.json", BOM + BATSIM, ("--strict",), 0,
         ("platform: 4 nodes × 1 core from w.json's nb_res (4)",)),
]  # fmt: skip


@pytest.mark.parametrize("case", NUMBER_CASES, ids=[case.name for case in NUMBER_CASES])
def test_numbers_are_ascii_and_a_byte_order_mark_is_no_text(tmp_path: Path, case: Case) -> None:
    path = tmp_path / case.file
    path.write_text(case.text, encoding="utf-8")
    code, output = simulate(tmp_path, "-w", path, "-s", "fcfs", *case.args)
    assert code == case.code, output
    for words in case.says:
        assert words in output, output


def header(nodes: str, procs: str) -> str:
    return f"; MaxNodes: {nodes}\n; MaxProcs: {procs}\n"


@dataclass(frozen=True)
class Files:
    name: str
    files: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    code: int
    says: str


SEVERAL_FILES = [
    Files("headers-agree", (("a.swf", header("4", "16")), ("b.swf", header("4", "16"))), (), 0,
          "platform: 4 nodes × 4 cores from a.swf's header (MaxNodes: 4, MaxProcs: 16), as b.swf's header "
          "(MaxNodes: 4, MaxProcs: 16)"),
    Files("headers-conflict", (("a.swf", header("4", "16")), ("b.swf", header("8", "16"))), (), 2,
          "a.swf's header (MaxNodes: 4, MaxProcs: 16) and b.swf's header (MaxNodes: 8, MaxProcs: 16) state "
          "different platforms"),
    Files("second-file-states-the-platform", (("a.swf", ""), ("b.swf", header("4", "16"))), (), 0,
          "platform: 4 nodes × 4 cores from b.swf's header (MaxNodes: 4, MaxProcs: 16)"),
    Files("header-value-unreadable-warns", (("a.swf", header("four", "16")),), (), 0,
          "warning: 1 input problem(s), 0 line(s)/document(s) skipped; first: a.swf: header MaxNodes: must be a "
          "positive integer, got 'four'"),
    Files("header-value-unreadable-strict", (("a.swf", header("4", "-16")),), ("--strict",), 2,
          "error: --strict: 1 input problem(s), 0 line(s)/document(s) skipped; first: a.swf: header MaxProcs: must "
          "be a positive integer, got '-16'"),
    Files("header-value-other-digits", (("a.swf", header("٤", "16")),), ("--strict",), 2,
          "a.swf: header MaxNodes: must be a positive integer, got '٤'"),
    Files("same-file-twice", (("a.swf", header("4", "16")), ("a.swf", "")), (), 2,
          "a.swf: the same file is given twice; give each workload file once"),
]  # fmt: skip


@pytest.mark.parametrize("case", SEVERAL_FILES, ids=[case.name for case in SEVERAL_FILES])
def test_several_workload_files(tmp_path: Path, case: Files) -> None:
    args: list[str | Path] = []
    for name, text in case.files:
        path = tmp_path / name
        path.write_text(text + GOOD_SWF_LINE if not path.exists() else path.read_text())
        args += ["-w", path]
    code, output = simulate(tmp_path, *args, "-s", "fcfs", *case.args)
    assert code == case.code, output
    assert case.says in output, output


def test_two_files_of_one_name_keep_their_jobs_apart(tmp_path: Path) -> None:
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.swf").write_text(SWF_HEADER + GOOD_SWF_LINE)
    code, output = simulate(tmp_path, "-w", tmp_path / "x" / "t.swf", "-w", tmp_path / "y" / "t.swf", "-s", "fcfs")
    assert code == 0, output
    rows = [r.split(",")[0] for r in (tmp_path / "out" / "fcfs" / "jobs.csv").read_text().splitlines()[1:]]
    assert sorted(r for r in rows if not r.startswith("#")) == ["t#1:1", "t#2:1"]


def test_problems_txt_lists_an_input_problem_once_whatever_the_schedulers(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text(SWF_HEADER + GOOD_SWF_LINE + "not a job line\n")
    code, output = simulate(tmp_path, "-w", path, "-s", "fcfs", "-s", "easy", "-s", "kubeflux")
    assert code == 0, output
    assert (tmp_path / "out" / "problems.txt").read_text() == "t.swf:4: expected 18 fields, found 4\n"


def test_a_trace_beyond_the_budget_is_refused_before_it_is_all_read(tmp_path: Path) -> None:
    """The reader stops at the first job beyond what the budget allows (:class:`ReadBudget`), so a 57 MB SWF no
    longer peaks at 665 MB before the check: the count in the message is where it stopped, short of the 5,000 jobs
    of the file; with two files, the second has what the first left."""
    from kubeflux.sim.workloads.limits import PROCESS_BYTES, ReadBudget, job_bytes
    from kubeflux.sim.workloads.swf import read_swf

    trace = tmp_path / "many.swf"
    trace.write_text(SWF_HEADER + "".join(swf_line(number) for number in range(1, 5001)))
    budget = PROCESS_BYTES + 1_000 * job_bytes(2)  # 1,000 jobs under two schedulers
    code, output = simulate(tmp_path, "-w", trace, "-s", "fcfs", "-s", "easy", "--memory-budget", str(budget))
    assert code == 2, output
    assert (
        f"{trace}: reading stopped at line 1003, after 1,001 jobs: under 2 scheduler(s), more than 1,000 jobs need "
        "more than the memory budget of 105 MiB (at least 9,216 bytes a job, beside 96 MiB for the command); make "
        "the workload smaller, or raise --memory-budget"
    ) in output
    first = tmp_path / "first.swf"
    first.write_text(SWF_HEADER + "".join(swf_line(number) for number in range(1, 601)))
    code, output = simulate(
        tmp_path, "-w", first, "-w", trace, "-s", "fcfs", "-s", "easy", "--memory-budget", str(budget)
    )
    assert code == 2 and "reading stopped at line 403, after 401 jobs (beside 600 in the files before it)" in output
    fits = ReadBudget(PROCESS_BYTES + 5_000 * job_bytes(2), runs=2)
    assert len(read_swf(trace, budget=fits).jobs) == 5_000
    with pytest.raises(Exception, match="after 1,001 jobs"):
        read_swf(trace, limit=2_000, budget=ReadBudget(budget, runs=2))
    assert len(read_swf(trace, limit=10, budget=ReadBudget(budget, runs=2)).jobs) == 10
