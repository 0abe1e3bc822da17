"""``cluster serve`` speaking protobuf over HTTP as client-go does: bodies, answers, lists, watches, metadata-only
requests, errors, and what it refuses (a CRD in protobuf, bodies that do not decode, no build)."""

from __future__ import annotations

import base64
import http.client
import json
from pathlib import Path

import orjson
import pytest

from kubeflux.sim.apiserver.media import Renderer
from kubeflux.sim.apiserver.protobuf import BUILD_COMMAND, MAGIC, Codec, ProtobufUnavailable
from kubeflux.sim.apiserver.server import ApiServer
from tests.sim.apiserver._built import protobuf_codec
from tests.sim.apiserver.conftest import start_server

PROTOBUF = "application/vnd.kubernetes.protobuf"
GO_CLIENT = f"{PROTOBUF},application/json"
"""What client-go sends at its default flags."""
METADATA = (
    f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
)
"""What client-go's metadata client (the garbage collector's informers) sends for one object or a watch."""
METADATA_LIST = METADATA.replace("PartialObjectMetadata;", "PartialObjectMetadataList;")
FIXTURES = {
    f["name"]: f for f in json.loads((Path(__file__).parent / "data" / "protobuf" / "fixtures.json").read_text())
}


@pytest.fixture(scope="module")
def pb() -> Codec:
    return protobuf_codec()


def request(
    server: ApiServer, method: str, path: str, body: bytes = b"", content_type: str = PROTOBUF, accept: str = GO_CLIENT
) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        headers = {"Accept": accept, "Content-Type": content_type}
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        connection.close()


def go_bytes(name: str) -> bytes:
    """The bytes the real Go serializer wrote for fixture ``name``."""
    return base64.b64decode(FIXTURES[name]["protobuf"])


def test_go_bodies_are_created_and_answered_in_protobuf(apiserver: ApiServer, pb: Codec) -> None:
    status, content_type, body = request(
        apiserver, "POST", "/api/v1/namespaces/default/configmaps", go_bytes("configmap-binarydata")
    )
    assert (status, content_type) == (201, PROTOBUF)
    created = pb.decode(body)
    assert created["kind"] == "ConfigMap" and created["metadata"]["uid"]
    assert created["binaryData"] == {"bin": "AAEC/w=="}
    status, content_type, body = request(
        apiserver, "GET", "/api/v1/namespaces/default/configmaps/c", accept="application/json"
    )
    assert (status, content_type) == (200, "application/json")
    stored = orjson.loads(body)
    assert stored["data"] == {"a": "b", "e": ""} and stored["binaryData"] == {"bin": "AAEC/w=="}


def test_a_job_with_parallelism_zero_keeps_it(apiserver: ApiServer, pb: Codec) -> None:
    status, _, body = request(
        apiserver, "POST", "/apis/batch/v1/namespaces/default/jobs", go_bytes("job-parallelism-0")
    )
    assert status == 201, body
    status, _, body = request(apiserver, "GET", "/apis/batch/v1/namespaces/default/jobs/j", accept="application/json")
    job = orjson.loads(body)
    assert job["spec"]["parallelism"] == 0
    assert "namespace" not in job["spec"]["template"]["metadata"]


def test_binding_delete_options_and_status_errors(apiserver: ApiServer, pb: Codec) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    data = pb.encode(pod, strict=True)
    assert data is not None
    assert request(apiserver, "POST", "/api/v1/namespaces/default/pods", data)[0] == 201
    binding = pb.encode(
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": "node-0000"}}
    )
    assert binding is not None
    status, content_type, body = request(apiserver, "POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert (status, content_type) == (201, PROTOBUF)
    assert pb.decode(body)["status"] == "Success"
    again = request(apiserver, "POST", "/api/v1/namespaces/default/pods/p/binding", binding)
    assert again[:2] == (409, PROTOBUF)
    assert pb.decode(again[2])["reason"] == "Conflict"
    status, _, body = request(apiserver, "DELETE", "/api/v1/namespaces/default/pods/p", go_bytes("deleteoptions"))
    assert status == 409 and "Precondition failed: UID in precondition: u" in pb.decode(body)["message"]
    options = pb.encode({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}, strict=True)
    assert options is not None
    assert request(apiserver, "DELETE", "/api/v1/namespaces/default/pods/p", options)[0] == 200
    status, content_type, body = request(apiserver, "GET", "/api/v1/namespaces/default/pods/p")
    assert (status, content_type) == (404, PROTOBUF)
    assert pb.decode(body)["reason"] == "NotFound"


def test_lists_and_watches_in_protobuf(apiserver: ApiServer, pb: Codec) -> None:
    for name in ("a", "b"):
        data = pb.encode({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
        assert data is not None
        request(apiserver, "POST", "/api/v1/namespaces/default/configmaps", data)
    status, content_type, body = request(apiserver, "GET", "/api/v1/namespaces/default/configmaps")
    assert (status, content_type) == (200, PROTOBUF)
    listed = pb.decode(body)
    assert listed["kind"] == "ConfigMapList" and [i["data"]["k"] for i in listed["items"]] == ["a", "b"]
    query = (
        "watch=true&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    )
    status, content_type, body = request(apiserver, "GET", f"/api/v1/namespaces/default/configmaps?{query}")
    assert (status, content_type) == (200, f"{PROTOBUF};stream=watch")
    events = pb.read_frames(body)
    assert [(t, o["metadata"]["name"]) for t, o in events[:2]] == [("ADDED", "a"), ("ADDED", "b")]
    assert events[2][0] == "BOOKMARK"
    assert events[2][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_an_expired_watch_is_one_error_frame(tmp_path: Path, pb: Codec) -> None:
    server = start_server(tmp_path, cache_size=2)
    try:
        for name in "abc":
            data = pb.encode({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
            assert data is not None
            request(server, "POST", "/api/v1/namespaces/default/configmaps", data)
        status, _, body = request(server, "GET", "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1")
    finally:
        server.stop()
    assert status == 200
    [(kind, error)] = pb.read_frames(body)
    assert kind == "ERROR" and error["kind"] == "Status" and error["code"] == 410


def test_metadata_only_requests(apiserver: ApiServer, pb: Codec) -> None:
    data = pb.encode({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "labels": {"a": "b"}}})
    assert data is not None
    request(apiserver, "POST", "/api/v1/namespaces/default/configmaps", data)
    status, content_type, body = request(
        apiserver, "GET", "/api/v1/namespaces/default/configmaps", accept=METADATA_LIST
    )
    assert (status, content_type) == (200, PROTOBUF)
    listed = pb.decode(body)
    assert listed["kind"] == "PartialObjectMetadataList" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert listed["items"][0]["metadata"]["labels"] == {"a": "b"}
    json_only = METADATA.split(",", 1)[1]
    status, content_type, body = request(apiserver, "GET", "/api/v1/namespaces/default/configmaps/m", accept=json_only)
    assert (status, content_type) == (200, "application/json")
    assert orjson.loads(body)["kind"] == "PartialObjectMetadata" and "data" not in orjson.loads(body)
    status, _, body = request(
        apiserver, "GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1", accept=METADATA
    )
    [(kind, obj)] = pb.read_frames(body)
    assert kind == "ADDED" and obj["kind"] == "PartialObjectMetadata" and obj["metadata"]["name"] == "m"
    assert request(apiserver, "GET", "/api/v1/namespaces/default/configmaps/m", accept=METADATA_LIST)[0] == 406
    # a CRD's objects: PartialObjectMetadata in protobuf, the objects themselves in JSON
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g"},
        "spec": {"minMember": 1},
    }
    podgroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
    assert request(apiserver, "POST", podgroups, orjson.dumps(group), "application/json")[0] == 201
    assert request(apiserver, "GET", podgroups)[1] == "application/json"
    status, content_type, body = request(apiserver, "GET", podgroups, accept=METADATA_LIST)
    assert (status, content_type) == (200, PROTOBUF)
    assert pb.decode(body)["items"][0]["metadata"]["name"] == "g"


def test_refusals(apiserver: ApiServer, pb: Codec) -> None:
    podgroups = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
    status, _, body = request(apiserver, "POST", podgroups, go_bytes("configmap-binarydata"), accept="application/json")
    assert status == 415 and orjson.loads(body)["reason"] == "UnsupportedMediaType"
    configmaps = "/api/v1/namespaces/default/configmaps"
    for bad, why in (
        (b"{}", "expected prefix"),
        (MAGIC + b"\x0a\x05\x0a\x02v1", "envelope"),
        (go_bytes("pod")[:-7], "does not parse"),
    ):
        status, _, body = request(apiserver, "POST", configmaps, bad, accept="application/json")
        assert status == 400 and why in orjson.loads(body)["message"], body


def test_without_the_build_protobuf_bodies_get_415_saying_how_to_build(apiserver: ApiServer) -> None:
    def missing() -> Codec:
        raise ProtobufUnavailable("the Kubernetes protobuf schema is not built at /nowhere")

    apiserver.app.media = Renderer(load=missing)
    status, content_type, body = request(apiserver, "POST", "/api/v1/namespaces/default/configmaps", MAGIC + b"x")
    assert (status, content_type) == (415, "application/json")
    assert BUILD_COMMAND in orjson.loads(body)["message"]
    status, content_type, _ = request(apiserver, "GET", "/api/v1/namespaces/default/configmaps")
    assert (status, content_type) == (200, "application/json")  # answers fall back to JSON, which Go clients take
