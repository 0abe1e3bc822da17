"""The served cluster's bounds: ``cluster serve --memory-budget`` refuses nodes that would not fit before building
them, and ``--max-objects`` bounds the store as etcd's quota bounds a real one: a create beyond it gets etcd's
answer as kube-apiserver passes it on (500, ``etcdserver: mvcc: database space exceeded``), Events expire oldest
first, and the Job controller says ``FailedCreate`` and backs off, so that a Job of a billion completions under
virtual time leaves the store bounded and the server answering."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
from pathlib import Path

import orjson
import pytest

from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.jobs import api_backoff
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import SPACE_EXCEEDED, Store
from kubeflux.sim.baselines import create
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.sim.apiserver._served import JOBS, ORIGIN, PODS, call, eventually, job, now

SERVE = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve"]


def _pod(name: str = "") -> dict[str, object]:
    meta = {"name": name} if name else {"generateName": "p-"}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=120)


def test_a_store_refuses_creates_beyond_its_quota_with_etcds_answer() -> None:
    """As kube-apiserver answers when etcd is full: 500, no reason, etcd's words; a delete makes room again."""
    store = Store(default_registry(), max_objects=40)
    pods = store.registry.find("", "v1", "pods")
    assert pods is not None
    with pytest.raises(ApiError) as refused:
        for _ in range(100):
            store.create(pods, "default", _pod())
    assert store.quota.count() == 40  # every object counts, the cluster's own too
    assert refused.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": SPACE_EXCEEDED,
        "code": 500,
    }
    victim = next(iter(store.collection_of(pods).objects.values()))["metadata"]["name"]
    store.delete(pods, "default", victim, grace=0)
    store.create(pods, "default", _pod("again"))
    with pytest.raises(ApiError, match="database space exceeded"):
        store.create(pods, "default", _pod())


def test_events_beyond_their_quota_expire_oldest_first() -> None:
    store = Store(default_registry(), max_objects=30)
    events = store.registry.find("", "v1", "events")
    assert events is not None
    for index in range(100):
        body = {"metadata": {"generateName": "x."}, "involvedObject": {"name": "x"}, "message": f"event {index}"}
        store.create(events, "default", body, trusted=True)
    kept = [e["message"] for e in store.collection_of(events).objects.values()]
    assert kept == [f"event {index}" for index in range(70, 100)]


def test_a_job_of_a_billion_completions_under_virtual_time_fills_the_quota_not_the_memory() -> None:
    """The Job controller's 500 pods a second are virtual seconds: only the store's bound stops the flood. The pods
    ask for more than the one node has, so they stay pending and only the controller's back-off moves time."""
    clock = VirtualClock(ORIGIN)
    server = ApiServer(
        uniform_cluster(1, 1, "1Gi"),
        kubelet=True,
        controllers=True,
        schedulers=[create("kube-default")],
        clock=clock,
        store=Store(default_registry(), clock=clock, max_objects=1_200),
    ).start()
    try:
        call(server, "POST", JOBS, job("flood", "1s", completions=10**9, parallelism=10**9))

        def refused() -> bool:
            events = call(server, "GET", "/api/v1/namespaces/default/events")["items"]
            return any(e["reason"] == "FailedCreate" and e["message"].endswith(SPACE_EXCEEDED) for e in events)

        eventually(refused, "a FailedCreate event saying the store is full")
        failed = next(
            e
            for e in call(server, "GET", "/api/v1/namespaces/default/events")["items"]
            if e["reason"] == "FailedCreate"
        )
        assert failed["type"] == "Warning" and failed["message"] == f"Error creating: {SPACE_EXCEEDED}"
        assert failed["involvedObject"]["kind"] == "Job" and failed["involvedObject"]["name"] == "flood"
        stored = len(call(server, "GET", PODS)["items"])
        assert 1_000 < stored < 1_200
        later = now(server) + 30
        eventually(lambda: now(server) > later, "virtual time going on past the back-off")  # the server answers
        assert len(call(server, "GET", PODS)["items"]) <= stored + 1  # a delete would have made room; none did
        assert server.store.quota.count() <= 1_200
        assert server.store.event_quota.count() <= 1_200
        with pytest.raises(urllib.error.HTTPError) as answer:
            call(server, "POST", PODS, _pod("mine"))
        assert answer.value.code == 500
        assert orjson.loads(answer.value.read())["message"] == SPACE_EXCEEDED
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--nodes", "1000000000", "--cores-per-node", "4"],
            "--nodes 1,000,000,000 x --cores-per-node 4 with --max-objects 250,000 would need about 7,631.4 GiB of "
            "memory, more than the budget of 8.0 GiB; make it smaller, or raise --memory-budget",
        ),
        (
            ["--nodes", "20000", "--cores-per-node", "64", "-s", "kubeflux", "--memory-budget", "2Gi"],
            "--nodes 20,000 x --cores-per-node 64 with 1 in-process scheduler(s) and --max-objects 250,000 would need "
            "about 4.1 GiB of memory, more than the budget of 2.0 GiB",
        ),
        (
            ["--nodes", "1", "--cores-per-node", "4", "--max-objects", "100000000"],
            "would need about 763.0 GiB of memory, more than the budget of 8.0 GiB",
        ),
        (
            ["--nodes", "100", "--cores-per-node", "4", "--max-objects", "250"],
            "--max-objects 250 leaves no room: 100 nodes take 200 objects with their leases",
        ),
        (["--nodes", "1", "--cores-per-node", "4", "--memory-budget", "0"], "--memory-budget must be positive"),
        (["--nodes", "1", "--cores-per-node", "4", "--max-objects", "0"], "--max-objects must be positive"),
    ],
    ids=["nodes-1e9", "graph-beyond-budget", "max-objects-beyond-budget", "no-room-for-nodes", "budget-0", "objects-0"],
)
def test_cluster_serve_refuses_what_would_not_fit_before_building_it(args: list[str], says: str) -> None:
    """``--nodes 1000000000`` took 5 GB in 18 s before it was refused (issue 30's hostile review); now it is refused
    at once, with the estimate, and exit code 2 as ``simulate`` refuses it."""
    result = _serve(*args)
    assert result.returncode == 2, result.stderr
    assert says in " ".join(result.stderr.replace("│", "").split())


def test_cluster_serve_reads_a_workload_only_as_far_as_the_budget(tmp_path: Path) -> None:
    trace = tmp_path / "many.swf"
    trace.write_text("".join(f"{i} {i} 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n" for i in range(1, 5001)))
    result = _serve(
        "--nodes", "1", "--cores-per-node", "4", "-w", str(trace), "--memory-budget", "110Mi", "--max-objects", "1000"
    )
    assert result.returncode == 2, result.stderr
    message = " ".join(result.stderr.split())
    assert f"{trace}: reading stopped at line 3186, after 3,186 jobs" in message


def test_the_job_controllers_back_off_stays_bounded_after_any_number_of_failures() -> None:
    """A Job refused by a full store fails a sync on each event of its pods: after 1,024 failures the back-off
    (1 s doubled per failure) overflowed a float, and the controller's callback died for every Job."""
    assert [api_backoff(n) for n in (1, 2, 3, 7)] == [1.0, 2.0, 4.0, 60.0]
    assert api_backoff(1_025) == api_backoff(10**6) == 60.0


def test_a_namespace_is_made_with_its_service_account_or_refused_whole_when_the_store_is_full() -> None:
    """A namespace comes with its ``default`` ServiceAccount (the ServiceAccount controller's). With room for one
    object left, the namespace was stored, then its account refused: the client got etcd's 500 for a namespace
    that exists, and the namespace never had its account. Now it is refused whole, as any create beyond the quota,
    and made whole once there is room."""
    server = ApiServer(uniform_cluster(1, 1, "1Gi"), store=Store(default_registry(), max_objects=40)).start()
    try:
        made: list[str] = []
        with pytest.raises(urllib.error.HTTPError):
            while True:
                made.append(call(server, "POST", PODS, _pod())["metadata"]["name"])
        call(server, "DELETE", f"{PODS}/{made.pop()}")  # room for one object
        with pytest.raises(urllib.error.HTTPError) as answer:
            call(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
        assert answer.value.code == 500
        assert orjson.loads(answer.value.read())["message"] == SPACE_EXCEEDED
        names = [n["metadata"]["name"] for n in call(server, "GET", "/api/v1/namespaces")["items"]]
        assert "team" not in names  # nothing was made
        call(server, "DELETE", f"{PODS}/{made.pop()}")  # room for two
        call(server, "POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
        account = call(server, "GET", "/api/v1/namespaces/team/serviceaccounts/default")
        assert account["metadata"]["namespace"] == "team"
    finally:
        server.stop()
