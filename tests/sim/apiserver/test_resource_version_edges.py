"""Hostile use of the served cluster's answer to a list or watch from a resourceVersion it has not reached (wait up to
3 s, then 504 "Too large resource version"): odd versions, and a waiting request in virtual time."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._served import ORIGIN, PODS, binding, call, eventually, now, phases, pi


def _status(server: ApiServer, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize(
    "version",
    [
        pytest.param("%C2%B2", id="a-superscript-two"),  # '²'.isdigit() is True, int('²') raises
        pytest.param("9" * 5000, id="five-thousand-digits"),  # past Python's 4300-digit int() limit
    ],
)
@pytest.mark.parametrize("watch", [False, True], ids=["list", "watch"])
def test_a_resource_version_that_is_no_number_is_a_400_not_a_500(
    apiserver: ApiServer, version: str, watch: bool
) -> None:
    """``str.isdigit`` lets through what ``int`` refuses: both reach an unhandled ValueError, answered 500
    InternalError ("an error on the server (ValueError: invalid literal for int() ...)"). A client's bad version
    should be a 400 BadRequest as '-1' and 'abc' are (or, for the huge one, the 504 of a version not reached)."""
    query = f"?resourceVersion={version}" + ("&watch=1&timeoutSeconds=1" if watch else "")
    code, body = _status(apiserver, f"/api/v1/namespaces/default/pods{query}")
    if code == 200:  # a watch's error is an ERROR event in a 200 stream
        body = orjson.dumps(orjson.loads(body.splitlines()[0])["object"])
        code = orjson.loads(body)["code"]
    assert code in (400, 504), body[:300]


def test_a_list_waiting_for_a_version_does_not_stop_virtual_time_from_reaching_it(tmp_path: Path) -> None:
    """In virtual time the next write (here: the running pod's end, 30 simulated seconds on) comes only when the
    clock jumps, and the clock jumps only when no request is in flight. A list from the next version is such a
    request for its whole 3 s wait: time stands still, the version is never reached, and the list gets 504 although
    the server would have reached the version at once. The waiting request should not hold the clock (as an open
    watch does not), and the list be answered 200 with the pod Succeeded."""
    server = ApiServer(uniform_cluster(1, 16, "64Gi"), kubelet=True, controllers=True, clock=VirtualClock(ORIGIN))
    server.start()
    try:
        call(server, "POST", PODS, pi("solo", 30, scheduler="external"))
        call(server, "POST", f"{PODS}/solo/binding", binding("solo"))
        eventually(lambda: phases(server)["solo"] == "Running", "the bound pod running")
        current = int(call(server, "GET", PODS)["metadata"]["resourceVersion"])
        began = now(server)
        code, body = _status(server, f"{PODS}?resourceVersion={current + 1}")
        assert (code, now(server) - began) != (504, 0.0), "the waiting list held virtual time; 504 after 3 s"
        assert code == 200 and [p["status"]["phase"] for p in orjson.loads(body)["items"]] == ["Succeeded"]
    finally:
        server.stop()


def test_a_streaming_list_from_a_version_not_reached_is_refused_not_answered_with_older_state(
    apiserver: ApiServer,
) -> None:
    """client-go's streaming list (a watch with ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan``) from a
    version the server has not reached: it waits the 3 s, then streams the current objects and an initial-events-end
    bookmark at the current version, lower than asked, i.e. it claims "not older than" for an older state. As the
    plain list and watch do, it should end with the 504 ResourceVersionTooLarge (an ERROR event)."""
    listed = _status(apiserver, "/api/v1/namespaces/default/pods")[1]
    future = int(orjson.loads(listed)["metadata"]["resourceVersion"]) + 1000
    query = "watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    query += f"&resourceVersion={future}&timeoutSeconds=1"
    code, body = _status(apiserver, f"/api/v1/namespaces/default/pods?{query}")
    events = [orjson.loads(line) for line in body.splitlines() if line.strip()]
    assert code == 200 and events, body[:300]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert not bookmarks or int(bookmarks[0]["object"]["metadata"]["resourceVersion"]) >= future, events
    assert events[-1]["type"] == "ERROR" and events[-1]["object"]["code"] == 504, events
