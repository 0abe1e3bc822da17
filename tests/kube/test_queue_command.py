"""``kubeflux queue`` against ``kubeflux cluster serve`` over HTTP (its in-process kubeflux scheduler), and the
expected start's readable twin on the pods it writes. (Against a real ``kubeflux serve`` process on the real control
plane: tests/realkube/test_queue_command.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.kube.command import api_client
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

TOKEN = "queue-test-token"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Cluster]:
    """``cluster serve`` of one 4-core node with kubeflux in the process, a bearer token, and a kubeconfig."""
    clock = WallClock(1.0)
    server = ApiServer(
        uniform_cluster(1, 4, "64Gi"),
        settings=ServerSettings(token=TOKEN, bookmark_seconds=0.2),
        store=Store(default_registry(), clock=clock),
        kubelet=True,
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


def test_a_server_that_is_no_url_is_said_without_a_traceback() -> None:
    result = _queue("--server", "http://[::1")
    assert result.exit_code == 1 and "--server 'http://[::1': not a URL kubeflux queue can ask" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_missing_kubeconfig_is_exit_2(tmp_path: Path) -> None:
    result = _queue("--kubeconfig", str(tmp_path / "nope"))
    assert result.exit_code == 2 and "no such file" in result.output


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
