"""serve's pipelined writes (HTTP/1.1, several requests on one connection before their answers are read) on the
real kube-apiserver and on ``cluster serve``, in the same session: every Binding answered in order, a refusal in
the middle of a pipeline only its own, more than a pipeline holds in rounds, and the events pipelined too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kubernetes import client

from kubeflux.apiobjects.decisions import binding, scheduler_event
from kubeflux.controlplane import ControlPlane
from kubeflux.kube import keepalive
from kubeflux.kube.command import api_client
from kubeflux.kube.rest import RawApi
from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store


@pytest.fixture(params=["real", "served"])
def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """The real API server's admin kubeconfig, or ``cluster serve``'s."""
    if request.param == "real":
        plane: ControlPlane = request.getfixturevalue("plane")
        yield plane.kubeconfig
        return
    server = ApiServer([], settings=ServerSettings(), store=Store(default_registry())).start()
    try:
        yield server.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        server.stop()


def test_pipelined_bindings_and_events_are_each_answered_in_order(
    kubeconfig: Path, request: pytest.FixtureRequest
) -> None:
    api = api_client(kubeconfig, None, False, 4)
    core = client.CoreV1Api(api)
    raw = RawApi(api)
    namespace = f"pipelined-{request.node.callspec.id}"
    core.create_namespace({"metadata": {"name": namespace}}, _preload_content=False)
    try:
        count = keepalive.PIPELINE + 8  # two rounds
        names = [f"p{i}" for i in range(count)]
        uids = {}
        for name in names:
            manifest = {
                "metadata": {"name": name},
                "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]},
            }
            created = orjson.loads(core.create_namespaced_pod(namespace, manifest, _preload_content=False).data)
            uids[name] = created["metadata"]["uid"]
        raw.create_namespaced_pod_binding("p7", namespace, binding("p7", uids["p7"], "node-first"))  # bound already
        answers = list(
            raw.create_namespaced_pod_bindings(
                [(name, namespace, binding(name, uids[name], "node-a")) for name in names]
            )
        )
        assert raw._writes is not None  # pipelined: not fallen back to urllib3's one request at a time
        refused = [i for i, answer in enumerate(answers) if not isinstance(answer, bytes)]
        assert refused == [7]
        assert isinstance(answers[7], client.ApiException) and answers[7].status == 409
        pods = orjson.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
        assert placed == {name: "node-first" if name == "p7" else "node-a" for name in names}

        events = [
            (
                namespace,
                scheduler_event(
                    {"namespace": namespace, "name": name, "uid": uids[name]},
                    name=f"{name}.scheduled",
                    at=0.0,
                    controller="kubeflux",
                    instance="test",
                    action="Binding",
                    reason="Scheduled",
                    note=f"Successfully assigned {namespace}/{name} to node-a",
                    type_="Normal",
                ),
            )
            for name in names[:5]
        ]
        assert all(isinstance(answer, bytes) for answer in raw.create_namespaced_events(events))
        listed = client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
        assert sorted(e["regarding"]["name"] for e in orjson.loads(listed.data)["items"]) == names[:5]
    finally:
        core.delete_namespace(namespace, _preload_content=False)
        raw.close()
        api.close()
