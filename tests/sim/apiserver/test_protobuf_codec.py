"""The protobuf codec against the real Go serializer: bytes Go wrote decode to the JSON Go marshals the same object
to, and what the codec writes decodes back to it.

``data/protobuf/fixtures.json`` was written by the real ``k8s.io/apimachinery`` protobuf serializer at v0.36.2 from
``data/protobuf/objects.json`` (regenerate: ``cd tools/kube/protobuf && go run . fixtures
../../../tests/sim/apiserver/data/protobuf/objects.json ../../../tests/sim/apiserver/data/protobuf/fixtures.json``).
The tests need the protobuf build (``python tools/kube/protobuf_gen.py build/kube/proto``; make runs it).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from kubeflux.sim.apiserver.protobuf import MAGIC, Codec, ProtobufError
from tests.sim.apiserver._built import protobuf_codec

DATA = Path(__file__).parent / "data" / "protobuf"
FIXTURES: list[dict[str, Any]] = json.loads((DATA / "fixtures.json").read_text())


@pytest.fixture(scope="module")
def pb() -> Codec:
    return protobuf_codec()


def _fixture(name: str) -> dict[str, Any]:
    return next(f for f in FIXTURES if f["name"] == name)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["name"] for f in FIXTURES])
def test_go_bytes_decode_to_the_json_go_marshals(pb: Codec, fixture: dict[str, Any]) -> None:
    assert pb.decode(base64.b64decode(fixture["protobuf"])) == fixture["json"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f["name"] for f in FIXTURES])
def test_encoded_objects_decode_back(pb: Codec, fixture: dict[str, Any]) -> None:
    data = pb.encode(fixture["json"], strict=True)
    assert data is not None and data.startswith(MAGIC)
    assert pb.decode(data) == fixture["json"]


def test_pointer_zero_stays_and_empty_strings_vanish(pb: Codec) -> None:
    job = pb.decode(base64.b64decode(_fixture("job-parallelism-0")["protobuf"]))
    assert job["spec"]["parallelism"] == 0  # *int32 set to 0
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["suspend"] is False
    assert "namespace" not in job["spec"]["template"]["metadata"]  # string,omitempty written as "" by Go
    assert "creationTimestamp" not in job["metadata"]  # a zero Time under omitzero
    assert "active" not in job["status"]  # int32,omitempty: 0 on the wire, omitted in JSON
    pod = pb.decode(base64.b64decode(_fixture("pod")["protobuf"]))
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m",
        "memory": "64Mi",
        "nvidia.com/gpu": "1",
    }
    assert pod["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] == "http"
    assert pod["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"] == 8080
    assert pod["metadata"]["ownerReferences"][0]["controller"] is True
    assert pod["metadata"]["deletionTimestamp"] == "2024-05-06T08:00:00Z"
    assert pod["metadata"]["managedFields"][0]["fieldsV1"] == {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
    assert pod["status"]["conditions"][1]["lastProbeTime"] is None  # a non-pointer zero Time: null


def test_times_bytes_and_raw_extensions(pb: Codec) -> None:
    lease = pb.decode(base64.b64decode(_fixture("lease-microtime")["protobuf"]))
    assert lease["spec"]["renewTime"] == "2024-05-06T07:08:09.123456Z"
    assert lease["spec"]["acquireTime"] == "1970-01-01T00:00:00.000000Z"  # the epoch is not the zero time
    secret = pb.decode(base64.b64decode(_fixture("secret-bytes")["protobuf"]))
    assert secret["data"] == {"k": "aGVsbG8=", "empty": "", "bin": "AP8Q"}
    assert secret["stringData"] == {"x": "y"}
    revision = pb.decode(base64.b64decode(_fixture("controllerrevision-rawextension")["protobuf"]))
    assert revision["data"] == {"spec": {"template": {"a": [1, 2.5, "x", None, True]}}}


def test_delete_options_bytes_equal_gos(pb: Codec) -> None:
    """Where Go writes no zero-valued non-pointer field, the codec's bytes are Go's, envelope included."""
    fixture = _fixture("deleteoptions")
    assert pb.encode(fixture["json"]) == base64.b64decode(fixture["protobuf"])


def test_kinds_that_are_not_built_in(pb: Codec) -> None:
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "g"}}
    assert pb.encode(group) is None
    assert not pb.serves_group("scheduling.x-k8s.io/v1alpha1")
    assert pb.serves_group("batch/v1") and pb.knows("v1", "Pod")
    envelope = pb.schema.message_class("k8s.io.apimachinery.pkg.runtime.Unknown")()
    envelope.typeMeta.apiVersion, envelope.typeMeta.kind = "scheduling.x-k8s.io/v1alpha1", "PodGroup"
    with pytest.raises(ProtobufError, match=r'no kind "PodGroup" is registered for version "scheduling\.x-k8s\.io'):
        pb.decode(MAGIC + envelope.SerializeToString())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty data"),
        (b"{}", "expected prefix"),
        (MAGIC, "empty body"),
        (MAGIC + b"\x0a\x05\x0a\x02v1", "envelope"),  # typeMeta says 5 bytes, 4 follow
        (MAGIC + b"\x12\x00", "'Kind' is missing"),
        (MAGIC + b"\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x03\x0a\x05x", "Pod message does not parse"),
        (MAGIC + b"\xff" * 64, "envelope"),
    ],
    ids=["empty", "json", "magic-only", "truncated-envelope", "no-kind", "truncated-object", "garbage"],
)
def test_bad_bodies_name_what_is_wrong(pb: Codec, body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        pb.decode(body)


def test_strict_encoding_names_the_field(pb: Codec) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"priority": "high"}}
    with pytest.raises(ValueError, match=r"spec\.priority"):
        pb.encode(pod, strict=True)
    lenient = pb.encode(pod)  # a response: the field that does not fit is left out, the object is not
    assert lenient is not None
    assert pb.decode(lenient)["metadata"] == {"name": "p"}


def test_watch_frames(pb: Codec) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "resourceVersion": "3"}}
    enveloped = pb.encode(pod)
    assert enveloped is not None
    stream = pb.watch_frame("ADDED", enveloped) + pb.watch_frame("DELETED", enveloped)
    events = pb.read_frames(stream)
    assert [t for t, _ in events] == ["ADDED", "DELETED"]
    assert events[0][1]["metadata"] == {"name": "p", "resourceVersion": "3"}
    assert events[0][1]["spec"] == {"containers": None}  # Go's PodSpec: containers has no omitempty
    with pytest.raises(ProtobufError, match="cut short"):
        pb.read_frames(stream[:-3])
