"""Hostile use of ``kubeflux sweep``: grid files a user gets wrong, reports that merge what they should not, a sweep
interrupted or losing a worker, and a Dask address that is not one."""

from __future__ import annotations

import csv
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import kubeflux.sim.sweep as sweep
from kubeflux.cli import app
from kubeflux.sim.sweep import Outcome, SweepError, Task, execute, load_grid, plan
from tests.shared import unboxed


def _trace(path: Path, jobs: int, seed: int = 0) -> Path:
    """An SWF trace of ``jobs`` jobs of 1-16 cores and 10-300 s for a 4 x 16 core machine."""
    rng = random.Random(seed)
    lines = ["; MaxProcs: 64", "; MaxNodes: 4"]
    submit = 0
    for number in range(1, jobs + 1):
        procs, run = rng.randint(1, 16), rng.randint(10, 300)
        submit += rng.randint(1, 20)
        lines.append(f"{number} {submit} -1 {run} {procs} -1 -1 {procs} {run * 2} -1 1 1 1 -1 1 1 -1 -1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _grid(folder: Path, **fields: Any) -> Path:
    if not (folder / "trace.swf").exists():
        _trace(folder / "trace.swf", 8)
    grid = {
        "name": "review",
        "workloads": ["trace.swf"],
        "schedulers": ["easy"],
        "clusters": [{"nodes": 4, "coresPerNode": 16}],
        **fields,
    }
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(grid, allow_unicode=True), encoding="utf-8")
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _sweep(*args: str) -> Any:
    return CliRunner().invoke(app, ["sweep", *args])


# ------------------------------------------------------------------------------------------ grid files and --out


def test_a_grid_name_with_square_brackets_is_printed_not_taken_for_markup(tmp_path: Path) -> None:
    """``name: "[/]"`` (or any name with a closing bracket tag) crashes the command with rich's MarkupError after
    every run is done: the name is printed unescaped."""
    grid = _grid(tmp_path, name="[/] nightly")
    result = _sweep(str(grid), "--out", str(tmp_path / "out"), "--workers", "1")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0
    assert "[/] nightly" in result.output


def test_a_grid_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    """A grid saved as Latin-1 (or a binary file given by mistake): UnicodeDecodeError escapes ``load_grid`` and the
    command shows a traceback instead of an error naming the file."""
    grid = tmp_path / "grid.yaml"
    grid.write_bytes("name: caf\xe9\nworkloads: [t.swf]\n".encode("latin-1"))
    with pytest.raises(SweepError, match=r"grid\.yaml"):
        load_grid(grid)


def test_an_out_folder_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """``--out report.csv`` (a file): FileExistsError escapes as a traceback."""
    grid = _grid(tmp_path)
    taken = tmp_path / "report.csv"
    taken.write_text("x\n", encoding="utf-8")
    result = _sweep(str(grid), "--out", str(taken), "--workers", "1")
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2 and "report.csv" in result.output


def test_an_out_folder_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """``-o FILE/sub``: NotADirectoryError from ``out.mkdir`` was a traceback."""
    grid = _grid(tmp_path)
    taken = tmp_path / "report.csv"
    taken.write_text("x\n", encoding="utf-8")
    result = _sweep(str(grid), "--out", str(taken / "sub"), "--workers", "1")
    expected = f"--out {taken / 'sub'}: cannot be the output folder: Not a directory"
    assert result.exit_code == 2 and unboxed(expected) in unboxed(result.output)


def test_workers_far_beyond_the_machine_s_cores_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--workers 100000`` started thousands of processes (memory exhausted) before the first run ended."""

    def no_runs(*args: object, **kwargs: object) -> list[Outcome]:
        raise AssertionError("--workers 100000 was taken: the runs were started")  # not 100,000 processes

    monkeypatch.setattr(sweep, "execute", no_runs)
    grid = _grid(tmp_path)
    cores = os.cpu_count() or 1
    result = _sweep(str(grid), "--out", str(tmp_path / "out"), "--workers", "100000")
    assert result.exit_code == 2
    expected = f"--workers must be at most {8 * cores:,} (8 per core; this machine has {cores} cores)"
    assert unboxed(expected) in unboxed(result.output)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("workers", "tasks", "processes"),
    [(100_000, 3, 3), (4, 10, 4), (1, 0, 1), (16, 16, 16)],
    ids=["capped-by-the-runs", "capped-by-workers", "at-least-one", "as-many"],
)
def test_a_local_pool_has_no_more_processes_than_runs(workers: int, tasks: int, processes: int) -> None:
    assert sweep.pool_size(workers, tasks) == processes


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"seeds": [0, 0]}, "seeds", id="a-seed-twice"),
        pytest.param({"policies": ["lonode", "lonode"]}, "policies", id="a-policy-twice"),
        pytest.param({"workloads": ["trace.swf", "./trace.swf"]}, "workloads", id="a-workload-twice"),
        pytest.param({"seeds": [True]}, "seeds", id="a-boolean-seed"),
        pytest.param({"clusters": [{"nodes": True, "coresPerNode": 16}]}, "nodes", id="a-boolean-node-count"),
        pytest.param({"startDelay": float("inf")}, "startDelay", id="an-infinite-start-delay"),
        pytest.param(
            {"startDelay": 1e18}, r"startDelay: must be at most 31,536,000 s \(a year\)", id="a-start-delay-of-1e18"
        ),
    ],
)
def test_a_grid_with_a_mistake_names_the_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    """Accepted today: a seed/policy/workload named twice runs the same run twice and counts it twice in the
    means (``runs`` 2 for one run); ``true`` is taken for seed 1 / one node; ``.inf`` gives an infinite makespan
    and a NaN utilisation in the report. The scheduler list already refuses a name given twice."""
    grid = _grid(tmp_path, **change)
    with pytest.raises(SweepError, match=field):
        loaded, base = load_grid(grid)
        plan(loaded, base)


def test_two_workloads_with_the_same_file_name_are_not_merged_in_the_report(tmp_path: Path) -> None:
    """``a/trace.swf`` and ``b/trace.swf`` are two workloads, but both are labelled ``trace.swf``: the summary
    averages the two as if they were seeds of one point (``runs`` 2, a mean of two different traces). Same for two
    clusters whose label is the same (``4x16c`` with two memory sizes)."""
    _trace(tmp_path / "a" / "trace.swf", 8, seed=1)
    _trace(tmp_path / "b" / "trace.swf", 12, seed=2)
    clusters = [{"nodes": 4, "coresPerNode": 16}, {"nodes": 4, "coresPerNode": 16, "memoryPerNode": "1Gi"}]
    grid = _grid(tmp_path, workloads=["a/trace.swf", "b/trace.swf"], clusters=clusters)
    out = tmp_path / "out"
    result = _sweep(str(grid), "--out", str(out), "--workers", "1")
    if result.exit_code == 2:  # refusing the grid, naming the clash, is as good
        assert "trace.swf" in result.output
        return
    assert result.exit_code == 0, result.output
    summary = _rows(out / "sweep-summary.csv")
    assert len(summary) == 4, [(r["workload"], r["cluster"], r["runs"]) for r in summary]


# ---------------------------------------------------------------------------------------------------- running


def _fake_simulate(marks: Path, die_on_seed: int | None = None) -> Any:
    """A stand-in for one simulation (inherited by the forked pool workers): marks that it started, takes a
    moment, and (``die_on_seed``) kills its worker process as an out-of-memory kill would."""

    def simulate(task: Task) -> tuple[dict[str, Any], str]:
        (marks / task.key).touch()
        if task.seed == die_on_seed:
            os._exit(137)
        time.sleep(0.2)
        return {"jobs": 1, "mean_waiting_time": 0.0}, "job_id\n"

    return simulate


@pytest.mark.skipif(sys.platform != "linux", reason="the pool workers must be forked to inherit the stand-in")
def test_ctrl_c_stops_the_sweep_instead_of_running_every_remaining_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while 40 runs wait on 2 local processes: the pool's exit waits for every submitted run to finish
    (their results then thrown away), so the sweep goes on for the whole remaining grid. Measured with the real
    command: SIGINT to its process group after 4 of 16 runs took 13 s to exit (the 12 others all ran) and only 4
    were recorded."""
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(sweep, "_simulate", _fake_simulate(marks))
    loaded, base = load_grid(_grid(tmp_path, seeds=list(range(40))))

    def interrupt(outcome: Outcome) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(plan(loaded, base), workers=2, on_done=interrupt)
    started = len(list(marks.iterdir()))
    assert started <= 8, f"{started} of 40 runs were started after Ctrl-C"


@pytest.mark.skipif(sys.platform != "linux", reason="the pool workers must be forked to inherit the stand-in")
def test_a_worker_that_dies_fails_its_own_run_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One local worker killed (out of memory) breaks the ProcessPoolExecutor: every run not yet finished, on every
    worker, is reported "the worker running it was lost" (16 of 16 here), not only the run it was running."""
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(sweep, "_simulate", _fake_simulate(marks, die_on_seed=3))
    loaded, base = load_grid(_grid(tmp_path, seeds=list(range(16))))
    outcomes = execute(plan(loaded, base), workers=2)
    failed = sorted(o.point["seed"] for o in outcomes if o.error)
    assert failed == [3], f"failed seeds: {failed}"


def test_a_killed_sweep_leaves_no_worker_processes_behind(tmp_path: Path) -> None:
    """``kill PID`` (SIGTERM) of a sweep on 2 local processes ends the command at once, but its two pool workers
    stay for ever (orphaned, idle, holding their memory)."""
    _trace(tmp_path / "trace.swf", 300)
    grid = _grid(tmp_path, schedulers=["kubeflux"], seeds=list(range(12)))
    command = [sys.executable, "-m", "kubeflux.cli", "sweep", str(grid), "--out", str(tmp_path / "out")]
    runner = subprocess.Popen([*command, "--workers", "2"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert runner.stdout is not None
        while not runner.stdout.readline().startswith("[1/"):  # one run done: the workers are up
            assert runner.poll() is None, "the sweep ended before its first run"
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
        deadline = time.monotonic() + 20  # a ceiling: exiting workers take well under a second
        while _session(runner.pid):
            assert time.monotonic() < deadline, f"left behind: {_session(runner.pid)}"
            time.sleep(0.2)
    finally:
        for pid in _session(runner.pid):
            os.kill(pid, signal.SIGKILL)
        if runner.stdout is not None:
            runner.stdout.close()


def _session(sid: int) -> list[int]:
    """The processes still alive in session ``sid``."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                alive.append(int(entry.name))
    return alive


def test_a_failed_run_names_the_user_s_workload_file_not_a_temporary_copy(tmp_path: Path) -> None:
    """A workload the reader refuses fails each of its runs with an error naming the worker's scratch copy
    (``/tmp/kubeflux-sweep-XXXX/bad.swf``), a path the user never had; it should name the grid's file."""
    (tmp_path / "bad.swf").write_text("not a workload\n", encoding="utf-8")
    loaded, base = load_grid(_grid(tmp_path, workloads=["bad.swf"]))
    [outcome] = execute(plan(loaded, base), workers=1)
    last = outcome.error.strip().splitlines()[-1]
    assert "kubeflux-sweep-" not in last and "bad.swf" in last, last


def test_every_task_sent_to_dask_does_not_carry_its_own_copy_of_the_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each Task holds the workload's bytes and the nodes, and ``client.map`` serialises each task apart: 60 runs of
    a 0.65 MB trace send 60 copies (39 MB) to the Dask scheduler up front; a real archive trace (tens of MB) x
    seeds x schedulers is gigabytes. The workload should go once (scattered) and the tasks refer to it."""
    distributed = pytest.importorskip("distributed")
    trace = _trace(tmp_path / "trace.swf", 12_000)
    grid = _grid(tmp_path, schedulers=["easy", "kubeflux"], seeds=list(range(30)))
    sent: list[int] = []

    def measured(original: Any) -> Any:
        def call(self: Any, function: Any, *args: Any, **kwargs: Any) -> Any:
            for arg in args:
                for item in arg if isinstance(arg, list | tuple) else [arg]:
                    try:
                        sent.append(len(pickle.dumps(item)))
                    except Exception:  # a Dask future or other handle: a reference, not data
                        sent.append(0)
            return original(self, function, *args, **kwargs)

        return call

    monkeypatch.setattr(distributed.Client, "map", measured(distributed.Client.map))
    monkeypatch.setattr(distributed.Client, "submit", measured(distributed.Client.submit))
    monkeypatch.setattr(sweep, "_simulate", lambda task: ({"jobs": 1}, "job_id\n"))  # the runs do not matter here
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address="127.0.0.1:0"
    ) as dask:
        result = _sweep(str(grid), "--out", str(tmp_path / "out"), "--dask", dask.scheduler_address)
    assert result.exit_code == 0, result.output
    assert sum(sent) < 5 * trace.stat().st_size, f"{len(sent)} arguments serialise to {sum(sent) / 1e6:.1f} MB"


def test_a_dask_address_that_is_not_one_is_a_clear_error(tmp_path: Path) -> None:
    """``--dask scheduler:8786`` without a scheme works, but ``--dask my-scheduler`` (no port) or ``--dask
    http://...`` (a dashboard URL pasted) raise ValueError from distributed: a traceback, exit 1."""
    pytest.importorskip("distributed")
    grid = _grid(tmp_path)
    for address in ("my-scheduler", "http://127.0.0.1:8787"):
        result = _sweep(str(grid), "--out", str(tmp_path / "out"), "--dask", address)
        assert isinstance(result.exception, SystemExit), f"{address}: {result.exception!r}"
        assert result.exit_code == 2 and "--dask" in result.output


def test_two_custom_match_policies_are_two_runs_not_one(tmp_path: Path) -> None:
    """A run's key is its grid point's slugs cut to 40 characters plus a hash of the workload, nodes and lifecycle,
    not of the policy: ``policy=high node_centric=true node_exclusive=true`` and ``...=false`` share one key. Both
    runs write the same ``runs/<key>/`` and the report shows the last one's numbers for both policies (and a
    resumed sweep takes either for done once the other is). Seen: identical rows, down to ``seconds``."""
    policies = [
        "policy=high node_centric=true node_exclusive=true",
        "policy=high node_centric=true node_exclusive=false",
    ]
    loaded, base = load_grid(_grid(tmp_path, schedulers=["kubeflux"], policies=policies))
    tasks = plan(loaded, base)
    assert len({task.key for task in tasks}) == 2, [task.key for task in tasks]


def test_a_gzipped_batsim_workload_is_read_or_named_in_a_clear_error(tmp_path: Path) -> None:
    """Format detection gunzips (a gzipped Batsim JSON is detected as Batsim), and SWF and manifests are read
    gzipped, but the Batsim reader opens the file as UTF-8 text: ``kubeflux simulate --workload w.json.gz`` and
    every sweep run of it fail with "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x8b", naming no file."""
    import gzip
    import json

    from kubeflux.sim.workloads import WorkloadError, load_workload

    batsim = {
        "nb_res": 4,
        "jobs": [{"id": 1, "subtime": 0, "walltime": 100, "res": 2, "profile": "p"}],
        "profiles": {"p": {"type": "delay", "delay": 60}},
    }
    path = tmp_path / "w.json.gz"
    path.write_bytes(gzip.compress(json.dumps(batsim).encode()))
    try:
        workload = load_workload(path)
    except WorkloadError as error:
        assert "w.json.gz" in str(error)
    else:
        assert len(workload.jobs) == 1


def test_a_damaged_run_summary_is_run_again_not_a_crash_of_every_later_report(tmp_path: Path) -> None:
    """A ``runs/<key>/summary.json`` left empty (written without fsync before a power cut, a full disk, an
    editor): the run counts as done, and ``collect`` raises JSONDecodeError: every later ``kubeflux sweep`` of the
    grid ends in a traceback and no report until the user finds and deletes the file."""
    grid = _grid(tmp_path, seeds=[0, 1])
    out = tmp_path / "out"
    assert _sweep(str(grid), "--out", str(out), "--workers", "1").exit_code == 0
    damaged = sorted((out / "runs").glob("*/summary.json"))[0]
    damaged.write_text("", encoding="utf-8")
    again = _sweep(str(grid), "--out", str(out), "--workers", "1")
    assert isinstance(again.exception, SystemExit) or again.exception is None, repr(again.exception)
    assert again.exit_code == 0
    assert {row["status"] for row in _rows(out / "sweep.csv")} == {"ok"}
