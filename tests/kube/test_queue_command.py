"""``kubeflux queue`` against ``kubeflux cluster serve`` over HTTP (its in-process kubeflux scheduler), and the
expected start's readable twin on the pods it writes. (Against a real ``kubeflux serve`` process on the real control
plane: tests/realkube/test_queue_command.py.)"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.kube.command import api_client
from kubeflux.kube.operations import OperationsServer, ServeMetrics
from kubeflux.kube.queue_command import waited_text
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.interface import EXPECTED_START_ANNOTATION, EXPECTED_START_TIME_ANNOTATION, rfc3339
from kubeflux.scheduler.translate import DURATION_ANNOTATION
from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from kubeflux.wallclock import WallClock
from tests.kube.conftest import Cluster, eventually, pod
from tests.shared import unboxed

TOKEN = "queue-test-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Cluster]:
    """``cluster serve`` of one 4-core node with kubeflux in the process (and the Job controller), a bearer token,
    and a kubeconfig."""
    clock = WallClock(1.0)
    server = ApiServer(
        uniform_cluster(1, 4, "64Gi"),
        settings=ServerSettings(token=TOKEN, bookmark_seconds=0.2),
        store=Store(default_registry(), clock=clock),
        kubelet=True,
        controllers=True,
        lifecycle=Lifecycle(),
        clock=clock,
        schedulers=[KubefluxScheduler("kubeflux")],
    ).start()
    path = server.write_kubeconfig(tmp_path / "kubeconfig")
    cluster = Cluster(server, path, api_client(path, None, False, 4))
    try:
        yield cluster
    finally:
        cluster.api.close()
        server.stop()


def _queue(*args: str) -> Any:
    result = CliRunner().invoke(app, ["queue", *args], env={"COLUMNS": "220"})
    return result


def _timed(name: str, cpu: str, seconds: int) -> dict[str, Any]:
    return pod(name, cpu, run=None, annotations={DURATION_ANNOTATION: f"{seconds}s"})


def test_the_queue_of_cluster_serves_scheduler_in_order_with_its_reservation(served: Cluster) -> None:
    served.create(_timed("long", "4", 3600))
    served.wait_for(lambda pods: bool(pods["long"]["spec"].get("nodeName")))
    served.create(_timed("next", "2", 60))
    served.create(_timed("after", "4", 60))

    def listed() -> list[dict[str, Any]] | None:
        result = _queue("--kubeconfig", str(served.kubeconfig), "-o", "json")
        assert result.exit_code == 0, result.output
        (scheduler,) = json.loads(result.output)["schedulers"]
        jobs: list[dict[str, Any]] = scheduler["jobs"]
        return jobs if [j["job"] for j in jobs] == ["default/next", "default/after"] and jobs[0]["reason"] else None

    first, second = eventually_value(listed)
    assert first["state"] == "reserved" and first["reserved"] == {"cpu": "2"}
    assert "Insufficient cpu" in first["reason"] and second["reason"]
    start = first["expectedStart"]
    assert first["expectedStartTime"] == rfc3339(start)
    # the pod carries the same start, in seconds and (written in the same update) in RFC 3339
    served.wait_for(lambda pods: EXPECTED_START_ANNOTATION in pods["next"]["metadata"].get("annotations", {}))
    notes = served.pods()["next"]["metadata"]["annotations"]
    assert float(notes[EXPECTED_START_ANNOTATION]) == start
    assert notes[EXPECTED_START_TIME_ANNOTATION] == rfc3339(start)

    table = _queue("--kubeconfig", str(served.kubeconfig))
    assert table.exit_code == 0, table.output
    assert "kubeflux: 2 jobs waiting" in table.output and "default/next" in table.output
    assert rfc3339(start).replace("T", " ") in table.output and "reserved" in table.output


def eventually_value(what: Any) -> Any:
    """``what()``'s first true value (:func:`eventually`)."""
    found: list[Any] = [None]

    def look() -> bool:
        found[0] = what()
        return bool(found[0])

    eventually(look)
    return found[0]


def test_without_its_token_cluster_serve_refuses_and_the_command_says_how_to_authenticate(served: Cluster) -> None:
    result = _queue("--server", served.server.url)
    assert result.exit_code == 1
    assert "401 Unauthorized: give the server's kubeconfig with --kubeconfig" in result.output


def test_nothing_listening_is_exit_1_naming_the_port_and_the_flag() -> None:
    result = _queue("--server", "http://127.0.0.1:9")
    assert result.exit_code == 1
    assert "cannot reach http://127.0.0.1:9/kubeflux/queue" in result.output and "--operations-port" in result.output


def test_a_server_given_as_host_and_port_is_asked_over_http() -> None:
    result = _queue("--server", "127.0.0.1:9")
    assert result.exit_code == 1 and "cannot reach http://127.0.0.1:9/kubeflux/queue" in result.output


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ("http://[::1", "--server 'http://[::1': not a URL kubeflux queue can ask"),
        ("ftp://x", "--server 'ftp://x': not an http or https URL"),
        ("http://a b", "--server 'http://a b': not a URL kubeflux queue can ask: URL can't contain control"),
        ("http://a\nb", "--server 'http://a\\nb': not a URL kubeflux queue can ask: URL can't contain control"),
    ],
    ids=["broken", "another scheme", "a space", "a newline"],
)
def test_a_server_that_is_no_url_is_exit_2_without_a_traceback(server: str, says: str) -> None:
    result = _queue("--server", server)
    assert result.exit_code == 2 and says in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "garbage"])
def test_an_unusable_kubeconfig_is_exit_2_saying_what_it_is(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "kubeconfig"
    says = {
        "missing": "no such file",
        "directory": "is a directory, not a kubeconfig file",
        "fifo": "is a named pipe (FIFO), not a regular file",  # and no hang waiting for a writer
        "garbage": "--kubeconfig " + str(path) + ": ",
    }[kind]
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "garbage":
        path.write_text("\x00\x01 not: [a kubeconfig")
    result = _queue("--kubeconfig", str(path))
    assert result.exit_code == 2 and says in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("interval", ["inf", "1e10", "nan"])
def test_an_interval_past_a_day_is_exit_2_saying_the_longest(interval: str) -> None:
    """Only ``--interval``'s lower bound was checked: ``time.sleep`` overflowed on ``inf`` or ``1e10``."""
    result = _queue("--server", "http://127.0.0.1:9", "--watch", "-i", interval, "--iterations", "2")
    assert result.exit_code == 2, result.output
    assert unboxed("Input should be less than or equal to 86400") in unboxed(result.output)
    assert unboxed("(0.1 to 86400, a day)") in unboxed(_queue("--help").output)


def test_a_scheduler_the_server_does_not_run_is_exit_3(served: Cluster) -> None:
    result = _queue("--kubeconfig", str(served.kubeconfig), "--scheduler", "nope")
    assert result.exit_code == 3
    assert "--scheduler nope: no such scheduler at cluster serve (it runs: kubeflux)" in result.output


def test_the_exit_codes_are_in_the_help() -> None:
    result = _queue("--help")
    help_text = " ".join(result.output.replace("│", "").split())
    assert "Exit codes: 0 shown (also a baseline scheduler listed as keeping no queue); 1 the server" in help_text
    assert "2 bad options" in help_text and "3 --scheduler names no scheduler" in help_text


def test_a_serve_that_is_not_ready_is_said_not_ready_not_empty() -> None:
    document = {"schedulers": [{"name": "kubeflux", "jobs": []}], "source": "kubeflux serve", "now": 0}
    server = OperationsServer(
        "127.0.0.1", 0, ServeMetrics(), lambda: True, lambda: "informers not synced: pods", lambda: document
    ).start()
    try:
        result = _queue("--server", f"http://127.0.0.1:{server.port}")
    finally:
        server.stop()
    assert result.exit_code == 1
    assert "is not ready (informers not synced: pods): its queue cannot be shown yet" in result.output
    assert "empty" not in result.output


def test_watch_retries_a_failed_refresh_with_one_line_each() -> None:
    result = _queue("--server", "127.0.0.1:9", "--watch", "-i", "0.1", "--iterations", "2")
    lines = [line for line in result.output.splitlines() if line]
    assert result.exit_code == 1, result.output
    failures = [line for line in lines if "cannot reach http://127.0.0.1:9/kubeflux/queue" in line]
    assert len(failures) == 2 and "(retrying every 0.1 s)" in failures[0]
    assert "retrying" not in failures[1]  # the last refresh: nothing is retried after it
    assert "object at 0x" not in result.output and "Connection refused" in failures[0]


def test_a_piped_table_keeps_its_width(served: Cluster) -> None:
    served.create(_timed("long", "4", 3600))
    served.wait_for(lambda pods: bool(pods["long"]["spec"].get("nodeName")))
    served.create(_timed("next", "2", 60))

    def row() -> str:
        result = CliRunner().invoke(app, ["queue", "--kubeconfig", str(served.kubeconfig)], env={"COLUMNS": None})
        return next((line for line in result.output.splitlines() if "default/next" in line and "cpu" in line), "")

    line = eventually_value(lambda: row() if "Insufficient cpu" in row() else "")
    assert len(line) > 80 and "reserved" in line


def test_watch_prints_one_json_document_a_refresh(served: Cluster) -> None:
    result = _queue("--kubeconfig", str(served.kubeconfig), "-o", "json", "--watch", "-i", "0.1", "--iterations", "3")
    assert result.exit_code == 0, result.output
    documents = [json.loads(line) for line in result.output.splitlines()]
    assert len(documents) == 3 and all(d["source"] == "cluster serve" for d in documents)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.9, "59s"), (61, "1m01s"), (3 * 3600 + 7 * 60, "3h07m"), (2 * 86400 + 4 * 3600, "2d04h")],
)
def test_waited_reads_as_people_say_it(seconds: float, text: str) -> None:
    assert waited_text(seconds) == text


def test_the_queue_shows_one_row_per_waiting_job_with_its_pod_count(served: Cluster) -> None:
    """A Job of three waiting pods is one row (kind Job, 3 pods), as Kueue's and Volcano's users see a workload; a
    lone pod is a row of its own. (Each of the Job's pods was a row, named after the pod.)"""
    served.create(_timed("long", "4", 3600))
    served.wait_for(lambda pods: bool(pods["long"]["spec"].get("nodeName")))
    pod_manifest = _timed("unused", "1", 60)
    template = {"metadata": {"annotations": pod_manifest["metadata"]["annotations"]}, "spec": pod_manifest["spec"]}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "work"},
        "spec": {"parallelism": 3, "completions": 3, "template": template},
    }
    client.BatchV1Api(served.api).create_namespaced_job("default", job, _preload_content=False)
    served.create(_timed("solo", "2", 60))
    kubeconfig = str(served.kubeconfig)

    def listed() -> list[dict[str, Any]] | None:
        result = _queue("--kubeconfig", kubeconfig, "-o", "json")
        assert result.exit_code == 0, result.output
        (scheduler,) = json.loads(result.output)["schedulers"]
        jobs: list[dict[str, Any]] = scheduler["jobs"]
        return jobs if sorted(len(j["pods"]) for j in jobs) == [1, 3] else None

    jobs = {j["kind"]: j for j in eventually_value(listed)}
    assert sorted(jobs) == ["Job", "Pod"]
    assert jobs["Job"]["job"] == "default/work" and all(p.startswith("default/work-") for p in jobs["Job"]["pods"])
    assert jobs["Pod"]["job"] == "default/solo" and jobs["Pod"]["pods"] == ["default/solo"]
    assert sorted(j["position"] for j in jobs.values()) == [1, 2]
    table = _queue("--kubeconfig", kubeconfig)
    assert table.exit_code == 0, table.output
    assert "kubeflux: 2 jobs waiting" in table.output
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.output.splitlines() if "│" in line]
    rows = {row[1]: row[2] for row in cells if row[0].isdigit()}  # JOB (kind and name) → PODS
    assert rows == {"Job default/work": "3", "Pod default/solo": "1"}
