"""``kubeflux serve`` when the real control plane misbehaves or is locked down (issue 28): KWOK running its pods to
completion, deploy/'s RBAC with the API server's audit log as the witness, two replicas under leader election, a
serve process killed with SIGKILL and started again, and — last in this module, because they shake the control
plane itself — the API server restarted, etcd compacted behind a network partition, and the API server restored on
an empty etcd.

The module has one control plane whose API server writes an audit log of every request (Metadata level). Each test
works in a namespace of its own on KWOK nodes of its own (``serve`` schedules only that namespace and the nodes are
deleted after it), and stops every serve, process and proxy it starts.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubeflux.apiobjects.manifests import parse_timestamp
from kubeflux.apiobjects.quantity import canonical_value
from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.command import api_client
from kubeflux.kube.config import parse_config
from kubeflux.kube.replica import Replica
from kubeflux.kube.serve import Serve
from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from tests.realkube._serving import (
    Partition,
    ServeProcess,
    compact,
    current_revision,
    delete_pods,
    kwok_nodes,
    manifest,
    namespace,
    ready_for_pods,
    serve_config,
    start_serve,
    stop_serve,
)
from tests.shared import REPO

from .conftest import Api, client, eventually, phase, running_plane, schedulable

SERVICE_ACCOUNT = "system:serviceaccount:kubeflux-system:kubeflux"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


@pytest.fixture(scope="module")
def plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The conftest's control plane, its API server writing an audit log of every request."""
    folder = tmp_path_factory.mktemp("plane")
    policy = folder / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit = [f"--audit-policy-file={policy}", f"--audit-log-path={folder / 'audit.log'}", "--audit-log-maxsize=0"]
    with running_plane(binaries, folder, apiserver_args=audit) as started:
        yield started


# ---------------------------------------------------------------------------------------------------- helpers


def bound(pods: dict[str, dict[str, Any]], *names: str) -> bool:
    return all(name in pods and pods[name]["spec"].get("nodeName") for name in names)


def ended(p: dict[str, Any]) -> bool:
    return phase(p) in ("Succeeded", "Failed")


def no_allocations(serve: Serve) -> Callable[[], bool]:
    return lambda: not any(core.books.allocations for core in serve.cores)


def held(serve: Serve) -> set[str]:
    """The pods (``namespace/name``) holding an allocation in serve's cores."""
    return {allocation.key for core in serve.cores for allocation in core.books.allocations.values()}


def overbooked(pods: dict[str, dict[str, Any]], capacity: dict[str, int]) -> dict[str, int]:
    """The nodes whose bound, unfinished pods ask more cpu (millicores) than the node has."""
    asked: Counter[str] = Counter()
    for p in pods.values():
        node = p["spec"].get("nodeName")
        if node and not ended(p):
            asked[node] += canonical_value("cpu", p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    return {node: cpu for node, cpu in asked.items() if cpu > capacity.get(node, 0)}


def audit_events(plane: ControlPlane) -> list[dict[str, Any]]:
    lines = (plane.folder / "audit.log").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if line.strip()]


# ---------------------------------------------------------------------------------------------------- KWOK


def test_kwok_runs_and_completes_serves_pods_and_serve_releases_their_cores(plane: ControlPlane, api: Api) -> None:
    """Pods serve places on a KWOK node become Running (KWOK's stages), complete after the delay their annotation
    asks (Succeeded) or go when deleted; serve releases their cores, so a pod needing the whole node binds after."""
    with namespace(api, "kwok-stages") as ns, kwok_nodes(plane, api, "stages", 1, "4") as [node]:
        serve = start_serve(plane.kubeconfig, ns)
        try:
            api.create_pod(ns, manifest("short", "2", run="2s"))
            api.create_pod(ns, manifest("long", "2"))  # runs until deleted
            api.create_pod(ns, manifest("whole", "4"))
            eventually(lambda: phase(api.pods(ns)["short"]) == "Succeeded", lambda: f"short done: {api.pods(ns)}")
            pods = api.pods(ns)
            assert pods["short"]["spec"]["nodeName"] == node
            terminated = pods["short"]["status"]["containerStatuses"][0]["state"]["terminated"]
            assert terminated["reason"] == "Completed"  # it ran, as KWOK runs a container
            eventually(lambda: phase(api.pods(ns)["long"]) == "Running")
            eventually(lambda: held(serve) == {f"{ns}/long"})  # short's cores are free, the whole node is not
            assert not api.pods(ns)["whole"]["spec"].get("nodeName")
            delete_pods(api, ns, "long")
            eventually(lambda: phase(api.pods(ns)["whole"]) == "Running", lambda: f"whole runs: {api.pods(ns)}")
            assert api.pods(ns)["whole"]["spec"]["nodeName"] == node
            assert held(serve) == {f"{ns}/whole"}
            delete_pods(api, ns, "whole")
            eventually(no_allocations(serve))
        finally:
            stop_serve(serve)


# ---------------------------------------------------------------------------------------------------- RBAC


def test_serve_as_deploys_service_account_is_refused_nothing(plane: ControlPlane, api: Api) -> None:
    """deploy/ applied for real (kubectl apply -k), serve run with a token of its ServiceAccount, with leader
    election and the default ``clock: auto``, through binds, waits, events and the Lease: the audit log shows no
    request of it refused (401/403), and every permission the role grants used (or unusable here: no PodGroup CRD
    to watch)."""
    plane.kubectl("apply", "-k", str(REPO / "deploy"))
    token = plane.kubectl("create", "token", "kubeflux", "-n", "kubeflux-system", "--duration=1h").strip()
    kubeconfig = plane.kubeconfig_for("kubeflux-sa", token=token)
    shipped = yaml.safe_load(yaml.safe_load((REPO / "deploy" / "configmap.yaml").read_text())["data"]["config.yaml"])
    election = {**shipped["leaderElection"], "leaseDurationSeconds": 4, "renewDeadlineSeconds": 3}
    with namespace(api, "rbac") as ns, kwok_nodes(plane, api, "rbac", 1, "4"):
        settings = {**shipped, "clock": "auto", "operations": {"enabled": False}, "namespaces": [ns]}
        config = parse_config({**settings, "leaderElection": election})
        replica = Replica(config, api_client(kubeconfig, None, False, 16)).start()
        try:
            api.create_pod(ns, manifest("first", "4", run="3s", walltime="10"))
            api.create_pod(ns, manifest("second", "4", run="1s"))  # waits: expected start, condition, event
            eventually(lambda: all(ended(p) for p in api.pods(ns).values()) and len(api.pods(ns)) == 2)
            reasons = Counter(e["reason"] for e in api.events(ns) if e.get("reportingController") == "kubeflux")
            assert reasons["Scheduled"] == 2 and reasons["FailedScheduling"] >= 1
        finally:
            replica.stop()
            replica.api.close()
    lease = orjson.loads(
        client.CoordinationV1Api(api.client)
        .read_namespaced_lease("kubeflux", "kubeflux-system", _preload_content=False)
        .data
    )
    assert lease["spec"]["holderIdentity"] == ""  # released on stop
    events = audit_events(plane)
    mine = [e for e in events if e["user"].get("username") == SERVICE_ACCOUNT]
    refused = [
        (e["verb"], e["requestURI"], e["responseStatus"].get("code"))
        for e in events
        if e.get("responseStatus", {}).get("code") in (401, 403)
        and (e["user"].get("username") in (SERVICE_ACCOUNT, "system:anonymous") or e["userAgent"][:8] == "kubeflux")
    ]
    assert mine, "no request of the ServiceAccount in the audit log"
    assert refused == []
    assert any(e["requestURI"].rstrip("/") == "/version" for e in mine)  # how it knows the cluster is real
    assert not any("/kubeflux/time" in e["requestURI"] for e in events)
    used = set()
    for e in mine:
        ref = e.get("objectRef")
        if ref:
            resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            used.add((ref.get("apiGroup", ""), resource, e["verb"]))
    granted = set()
    for document in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text()):
        for rule in document.get("rules") or []:
            granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert used <= granted
    unwatchable = {("scheduling.x-k8s.io", "podgroups", "watch"), ("scheduling.k8s.io", "podgroups", "watch")}
    unused = {
        ("", "pods/eviction", "create"),  # only when a core preempts (tests/realkube/test_serve_preemption.py)
        ("resource.k8s.io", "resourceclaims/status", "patch"),  # only for pods with claims (test_serve_dra.py)
        ("resource.k8s.io", "resourceclaims", "patch"),  # (its finalizer)
        ("resource.k8s.io", "resourceclaims", "get"),  # only after a conflict (test_serve_dra_claims.py)
        ("", "persistentvolumeclaims", "patch"),  # only for pods whose claims wait for a first consumer
        ("", "persistentvolumes", "patch"),  # (test_serve_volumes.py)
    }
    assert granted - used <= unwatchable | unused, "granted but never used"


# ---------------------------------------------------------------------------------------------------- leader election


def _lease_spec(api: Api, namespace: str) -> dict[str, Any]:
    response = client.CoordinationV1Api(api.client).read_namespaced_lease("kubeflux", namespace, _preload_content=False)
    spec: dict[str, Any] = orjson.loads(response.data)["spec"]
    return spec


def renewed_twice(api: Api, namespace: str) -> None:
    """Until the Lease's holder renewed it twice more (a standby has had time to look at it)."""
    for _ in range(2):
        last = _lease_spec(api, namespace)["renewTime"]
        eventually(lambda last=last: _lease_spec(api, namespace)["renewTime"] != last)


def test_a_standby_takes_over_a_dead_leaders_lease_when_it_expires_and_a_released_one_at_once(
    plane: ControlPlane, api: Api
) -> None:
    """Two replicas on the real API server: the leader crashes (its elector stopped without releasing) and the
    standby takes over once the Lease expires, not before; that leader stops cleanly (released) and a third takes
    over at once. Each takeover counts one ``leaseTransitions``, as client-go counts them."""
    lease_seconds, retry = 4.0, 0.3
    election = {
        "enabled": True,
        "resourceNamespace": "leases",
        "leaseDurationSeconds": lease_seconds,
        "renewDeadlineSeconds": 3,
        "retryPeriodSeconds": retry,
    }
    replicas: list[Replica] = []

    def replica(identity: str) -> Replica:
        config = serve_config("leases", leaderElection=election)
        made = Replica(config, api_client(plane.kubeconfig, None, False, 16), identity=identity).start()
        replicas.append(made)
        return made

    def leads(made: Replica) -> Callable[[], bool]:
        return lambda: made.elector is not None and made.elector.leading.is_set()

    with namespace(api, "leases") as ns, kwok_nodes(plane, api, "leases", 1, "4"):
        try:
            first = replica("first")
            eventually(leads(first))
            second = replica("second")
            assert _lease_spec(api, ns)["leaseTransitions"] == 0
            renewed_twice(api, ns)
            assert not leads(second)()  # a Lease renewed is not taken
            crashed = time.monotonic()
            first.stop(release=False)  # a crash: the Lease is left to expire
            last_renewal = parse_timestamp(_lease_spec(api, ns)["renewTime"])
            eventually(leads(second))
            waited = time.monotonic() - crashed
            spec = _lease_spec(api, ns)
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("second", 1)
            # not before the Lease expired: the standby's acquireTime is a full lease after the last renewal (both
            # stamped by this machine's clock, so a slow stop() or a loaded machine cannot make it look early) ...
            expired_after = parse_timestamp(spec["acquireTime"]) - last_renewal
            assert expired_after >= lease_seconds - 0.01, expired_after
            # ... and soon after (a ceiling only a hang reaches)
            assert waited <= lease_seconds + 20.0, waited
            api.create_pod(ns, manifest("after-crash", "1"))
            eventually(lambda: bound(api.pods(ns), "after-crash"))
            third = replica("third")
            renewed_twice(api, ns)
            assert not leads(third)()
            second.stop()  # clean: released
            released = time.monotonic()
            eventually(leads(third))
            assert time.monotonic() - released < lease_seconds - 2 * retry  # at once, not when it would expire
            spec = _lease_spec(api, ns)
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("third", 2)
        finally:
            for made in replicas:
                made.stop()
                made.api.close()


# ---------------------------------------------------------------------------------------------------- kill -9


def test_serve_killed_mid_burst_restarts_without_double_booking(plane: ControlPlane, api: Api, tmp_path: Path) -> None:
    """serve as a process, SIGKILLed while a burst of pods is being bound, started again: it recovers the
    allocations of the pods bound before the kill from their ``kubeflux.io/allocation`` annotations (its books show
    them, it binds only the rest), no node is ever asked more cpu than it has, and every pod is bound in the end."""
    with namespace(api, "kill-nine") as ns, kwok_nodes(plane, api, "kill", 2, "4") as nodes:
        capacity = {node: 4000 for node in nodes}
        config = tmp_path / "serve.yaml"
        settings = serve_config(ns).model_dump(by_alias=True, mode="json")
        config.write_text(yaml.safe_dump({**settings, "operations": {"enabled": True, "port": 0}}))
        seen_overbooked: list[dict[str, int]] = []
        watching = threading.Event()

        def watch_books() -> None:  # the invariant, checked all along
            while not watching.wait(0.05):
                with contextlib.suppress(Exception):
                    if over := overbooked(api.pods(ns), capacity):
                        seen_overbooked.append(over)

        checker = threading.Thread(target=watch_books, daemon=True)
        checker.start()
        names = [f"p-{i:02d}" for i in range(16)]  # 16 one-cpu pods for 8 cpus: half wait
        first = ServeProcess(plane.kubeconfig, config)
        second: ServeProcess | None = None
        try:
            eventually(lambda: first.said("caches synced"), lambda: "\n".join(first.lines))

            def burst() -> None:  # a pod every 0.2 s (a workload's pace, not a wait): the kill lands amid them
                for name in names:
                    api.create_pod(ns, manifest(name, "1"))
                    time.sleep(0.2)

            creating = threading.Thread(target=burst)
            creating.start()
            eventually(lambda: sum(bool(p["spec"].get("nodeName")) for p in api.pods(ns).values()) >= 3)
            assert first.end(signal.SIGKILL) == -signal.SIGKILL
            creating.join()  # (seconds after the kill: a Binding sent just before it has landed by now)
            before = {n for n, p in api.pods(ns).items() if p["spec"].get("nodeName")}
            assert 3 <= len(before) < 8  # killed mid-burst, with cpus left to fill
            second = ServeProcess(plane.kubeconfig, config)
            eventually(lambda: second is not None and second.said("caches synced"), lambda: "\n".join(second.lines))
            eventually(lambda: sum(bool(p["spec"].get("nodeName")) for p in api.pods(ns).values()) == 8)
            pods = api.pods(ns)
            assert all(ALLOCATION_ANNOTATION in pods[n]["metadata"]["annotations"] for n in before)
            eventually(lambda: second is not None and second.metric("kubeflux_graph_allocations{") == 8)
            # the others were recovered; the count follows the binder's answers, a moment after the API shows a bind
            eventually(lambda: second is not None and second.metric("kubeflux_binds_total{") == 8 - len(before))
            running = [n for n, p in pods.items() if p["spec"].get("nodeName")]
            delete_pods(api, ns, *running)  # the 8 waiting ones bind in their place
            eventually(lambda: bound(api.pods(ns), *(set(names) - set(running))), lambda: f"{api.pods(ns)}")
            assert second.end(signal.SIGTERM) == 0
        finally:
            watching.set()
            checker.join()
            first.end(signal.SIGKILL)
            if second is not None:
                second.end(signal.SIGKILL)
        assert seen_overbooked == []


# ---------------------------------------------------------------------------------------- the control plane shaken
# These run last in the module: they restart the API server, and the last one wipes etcd.


def test_serve_goes_on_across_an_api_server_restart(plane: ControlPlane, api: Api) -> None:
    """The API server restarted under a running serve: it relists, releases the pod deleted once the server is
    back, schedules the new ones, and leaks nothing."""
    with namespace(api, "restart") as ns, kwok_nodes(plane, api, "restart", 1, "4"):
        serve = start_serve(plane.kubeconfig, ns)
        try:
            pods_reflector = serve.reflectors[-1]
            api.create_pod(ns, manifest("a", "2"))
            api.create_pod(ns, manifest("b", "2"))
            eventually(lambda: held(serve) == {f"{ns}/a", f"{ns}/b"})
            relists = pods_reflector.relists
            plane.restart_apiserver()
            delete_pods(api, ns, "a")
            api.create_pod(ns, manifest("c", "2", run="1s"))
            eventually(lambda: phase(api.pods(ns)["c"]) == "Succeeded", lambda: f"c done: {api.pods(ns)}")
            assert pods_reflector.relists > relists
            eventually(lambda: held(serve) == {f"{ns}/b"})
            delete_pods(api, ns, "b")
            eventually(no_allocations(serve))
        finally:
            stop_serve(serve)


def test_serve_cut_off_while_etcd_is_compacted_catches_up(plane: ControlPlane, api: Api, tmp_path: Path) -> None:
    """serve cut off from the API server (a partition) while its pods are deleted, new ones created and etcd
    compacted past every version serve saw (POST /v3/kv/compaction, physical): once healed, it lists again from
    its last version, releases the deleted pods (known only from the relist: tombstones), binds the new ones and
    leaks nothing."""
    partition = Partition(plane.ports["kube-apiserver"])
    with namespace(api, "compaction") as ns, kwok_nodes(plane, api, "compaction", 1, "4"):
        serve = start_serve(partition.kubeconfig(plane, tmp_path / "partitioned.kubeconfig"), ns)
        try:
            pods_reflector = serve.reflectors[-1]
            for name in ("a", "b"):
                api.create_pod(ns, manifest(name, "2"))
            eventually(lambda: held(serve) == {f"{ns}/a", f"{ns}/b"})
            seen = int(pods_reflector.version)
            partition.cut()
            delete_pods(api, ns, "a", "b")
            api.create_pod(ns, manifest("c", "4", run="1s"))  # the whole node: only if a and b were released
            eventually(lambda: not api.pods(ns).keys() - {"c"})
            revision = current_revision(plane)
            assert revision > seen
            compact(plane, revision)
            partition.heal()
            eventually(lambda: phase(api.pods(ns)["c"]) == "Succeeded", lambda: f"c done: {api.pods(ns)}")
            eventually(no_allocations(serve))
            assert int(pods_reflector.version) >= revision
        finally:
            stop_serve(serve)
            partition.close()


def test_serve_relists_when_the_api_server_comes_back_on_an_empty_etcd(plane: ControlPlane, api: Api) -> None:
    """The API server restored onto an empty etcd (its resourceVersions restart lower): a watch from serve's last
    version would wait silently forever; serve relists instead (the list answers 504 "Too large resource version",
    so it lists the new history), releases every pod the new cluster does not have, and schedules the new pods on
    the nodes created again."""
    with namespace(api, "wiped") as ns, kwok_nodes(plane, api, "wiped", 1, "4") as [node]:
        serve = start_serve(plane.kubeconfig, ns)
        try:
            api.create_pod(ns, manifest("before", "4"))
            eventually(lambda: held(serve) == {f"{ns}/before"})
            plane.restart_apiserver(empty_etcd=True)
            assert ns not in plane.kubectl("get", "namespaces", "-o", "name")
            # kube-controller-manager and KWOK v0.8 (client-go) do not notice: their watches from the old history
            # wait silently (seen here: no ServiceAccount made for a new namespace in 120 s). Started again.
            for name in ("kube-controller-manager", "kwok"):
                plane.components[name].stop()
            plane.start_controller_manager()
            plane.start_kwok()
            api.namespace(ns)
            ready_for_pods(api, ns)
            plane.add_kwok_nodes(1, cpu="4", prefix="wiped-")
            eventually(lambda: node in api.nodes() and schedulable(api.nodes()[node]), lambda: "the node Ready again")
            api.create_pod(ns, manifest("after", "4", run="1s"))  # the whole node: only if "before" was released
            eventually(lambda: phase(api.pods(ns)["after"]) == "Succeeded", lambda: f"after done: {api.pods(ns)}")
            assert api.pods(ns)["after"]["spec"]["nodeName"] == node
            eventually(no_allocations(serve))
        finally:
            stop_serve(serve)
