"""What ``cluster serve`` answers as the real kube-apiserver v1.36 does, found by the differential sequence
(tests/realkube/test_apiserver_differential.py, which needs the built control plane): access reviews, pod logs,
the OpenAPI v3 documents and their build, list items, Tables, aggregated discovery. These checks run without it."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.openapi import OpenApi
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer

from .conftest import pod_manifest, start_server

ROOT = Path(__file__).resolve().parents[3]
REVIEWS = "/apis/authorization.k8s.io/v1"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ApiServer]:
    server = start_server(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def _call(
    server: ApiServer, method: str, path: str, body: Any = None, accept: str = "application/json"
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        data = None if body is None else orjson.dumps(body)
        headers = {"Accept": accept, "Content-Type": "application/json", "User-Agent": "reviewer/1.0"}
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


# --- authorization.k8s.io -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plural", "spec", "code", "answer"),
    [
        ("selfsubjectaccessreviews", {"resourceAttributes": {"verb": "create", "resource": "pods"}}, 201, True),
        ("selfsubjectaccessreviews", {}, 422, "spec.resourceAttributes"),
        (
            "selfsubjectaccessreviews",
            {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}},
            422,
            "spec.nonResourceAttributes",
        ),
        ("subjectaccessreviews", {"user": "bob", "resourceAttributes": {"verb": "get"}}, 201, True),
        ("subjectaccessreviews", {"resourceAttributes": {"verb": "get"}}, 422, "spec.user"),
    ],
    ids=["self allowed", "self neither", "self both", "another user allowed", "another user unnamed"],
)
def test_access_reviews_answer_as_for_the_admin_with_the_real_validation(
    served: ApiServer, plural: str, spec: dict[str, Any], code: int, answer: Any
) -> None:
    kind = {"selfsubjectaccessreviews": "SelfSubjectAccessReview"}.get(plural, "SubjectAccessReview")
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}
    status, _, data = _call(served, "POST", f"{REVIEWS}/{plural}", body)
    reply = orjson.loads(data)
    assert status == code, reply
    if code == 201:
        assert reply["status"] == {"allowed": answer} and reply["spec"] == spec
        assert reply["metadata"]["managedFields"][0]["manager"] == "reviewer"
    else:
        assert [c["field"] for c in reply["details"]["causes"]] == [answer]


def test_a_rules_review_lists_everything_and_reviews_are_create_only(served: ApiServer) -> None:
    body = {"kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}}
    status, _, data = _call(served, "POST", f"{REVIEWS}/selfsubjectrulesreviews", body)
    rules = orjson.loads(data)["status"]
    assert status == 201 and {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in rules["resourceRules"]
    assert _call(served, "GET", f"{REVIEWS}/selfsubjectaccessreviews")[0] == 405
    resources = orjson.loads(_call(served, "GET", REVIEWS)[2])["resources"]
    assert {r["name"]: r["verbs"] for r in resources}["subjectaccessreviews"] == ["create"]


# --- pods/log -----------------------------------------------------------------------------------------------------


def test_pod_logs_are_empty_after_the_real_container_checks(served: ApiServer) -> None:
    base = "/api/v1/namespaces/default/pods"
    _call(served, "POST", base, pod_manifest("one"))
    two = pod_manifest("two")
    two["spec"]["containers"].append({"name": "side", "image": "busybox"})  # type: ignore[index]
    _call(served, "POST", base, two)
    status, headers, data = _call(served, "GET", f"{base}/one/log")
    assert (status, data, headers["content-type"]) == (200, b"", "text/plain")
    status, _, data = _call(served, "GET", f"{base}/one/log?container=nope")
    assert (status, orjson.loads(data)["message"]) == (400, "container nope is not valid for pod one")
    status, _, data = _call(served, "GET", f"{base}/two/log")
    message = "a container name must be specified for pod two, choose one of: [main side]"
    assert (status, orjson.loads(data)["message"]) == (400, message)
    assert _call(served, "GET", f"{base}/two/log?container=side")[0] == 200
    assert _call(served, "GET", f"{base}/gone/log")[0] == 404


# --- lists, tables, discovery, 404s -------------------------------------------------------------------------------


def test_list_items_have_no_kind_and_tables_carry_what_include_object_asks(served: ApiServer) -> None:
    base = "/api/v1/namespaces/default/pods"
    for name in ("b", "a"):
        _call(served, "POST", base, pod_manifest(name))
    listed = orjson.loads(_call(served, "GET", base)[2])
    assert listed["kind"] == "PodList" and all("kind" not in i and "apiVersion" not in i for i in listed["items"])
    table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    rows = {
        include: [r["object"] for r in orjson.loads(_call(served, "GET", f"{base}?{q}", accept=table)[2])["rows"]]
        for include, q in (("Metadata", ""), ("Object", "includeObject=Object"), ("None", "includeObject=None"))
    }
    assert {o["kind"] for o in rows["Metadata"]} == {"PartialObjectMetadata"}
    assert [o["spec"]["containers"][0]["name"] for o in rows["Object"]] == ["main", "main"]
    assert rows["None"] == [None, None]
    assert _call(served, "GET", f"{base}?includeObject=Everything", accept=table)[0] == 400
    columns = orjson.loads(_call(served, "GET", base, accept=table)[2])["columnDefinitions"]
    assert [c["name"] for c in columns][-1] == "Readiness Gates"


def test_aggregated_discovery_and_the_plain_404_of_an_unknown_group(served: ApiServer) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    status, headers, data = _call(served, "GET", "/apis", accept=accept)
    assert status == 200 and headers["content-type"].endswith("as=APIGroupDiscoveryList")
    groups = {g["metadata"]["name"]: g["versions"][0]["resources"] for g in orjson.loads(data)["items"]}
    jobs = next(r for r in groups["batch"] if r["resource"] == "jobs")
    assert jobs["scope"] == "Namespaced" and jobs["subresources"][0]["subresource"] == "status"
    core = orjson.loads(_call(served, "GET", "/api", accept=accept)[2])["items"][0]["versions"][0]["resources"]
    namespaces = next(r for r in core if r["resource"] == "namespaces")
    assert "deletecollection" not in namespaces["verbs"]
    assert _call(served, "DELETE", "/api/v1/namespaces")[0] == 405
    assert _call(served, "GET", "/apis/nope.example.com/v1")[:3:2] == (404, b"404 page not found\n")
    assert orjson.loads(_call(served, "GET", "/apis/batch/v9")[2])["reason"] == "NotFound"


# --- OpenAPI v3 ---------------------------------------------------------------------------------------------------


def _fake_build(folder: Path) -> Path:
    """A build of two documents, as tools/kube/openapi_gen.py writes them."""
    folder.mkdir()
    pod = {"type": "object", "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]}
    item = {"get": {"operationId": "x"}, "put": {"operationId": "y"}, "parameters": []}
    document = {
        "openapi": "3.0.0",
        "paths": {
            "/api/v1/": item,
            "/api/v1/namespaces/{namespace}/pods/{name}": item,
            "/api/v1/namespaces/{namespace}/pods/{name}/exec": item,
            "/api/v1/namespaces/{namespace}/podtemplates": item,
            "/api/v1/watch/namespaces/{namespace}/services": item,
            "/api/v1/namespaces/{name}/finalize": item,
        },
        "components": {"schemas": {"io.k8s.api.core.v1.Pod": pod}},
    }
    (folder / "api__v1_openapi.json").write_text(json.dumps(document))
    (folder / "version_openapi.json").write_text(json.dumps({"openapi": "3.0.0", "paths": {"/version/": item}}))
    (folder / "stamp.json").write_text("{}")
    return folder


def test_openapi_serves_the_built_documents_kept_to_the_served_resources(tmp_path: Path) -> None:
    openapi = OpenApi(default_registry(), _fake_build(tmp_path / "openapi"))
    index = openapi.index()["paths"]
    url = index["api/v1"]["serverRelativeURL"]
    document = openapi.documents()["api/v1"]
    assert url == f"/openapi/v3/api/v1?hash={hashlib.sha512(document.data).hexdigest().upper()}"
    served = orjson.loads(document.data)
    assert sorted(served["paths"]) == [
        "/api/v1/",
        "/api/v1/namespaces/{namespace}/pods/{name}",
        "/api/v1/namespaces/{name}/finalize",
        "/api/v1/watch/namespaces/{namespace}/services",
    ]
    assert sorted(served["paths"]["/api/v1/watch/namespaces/{namespace}/services"]) == ["get", "parameters"]
    assert "io.k8s.api.core.v1.Pod" in served["components"]["schemas"]
    assert "version" in index and "paths" in orjson.loads(openapi.documents()["apis/batch/v1"].data)  # minimal
    code, headers, data = openapi.answer(["api", "v1"], {"hash": document.hash})
    assert (code, dict(headers)[b"cache-control"], data) == (200, b"public, immutable", document.data)
    code, headers, _ = openapi.answer(["api", "v1"], {"hash": "OLD"})
    assert (code, dict(headers)[b"location"]) == (301, url.encode())
    assert dict(openapi.answer(["api", "v1"], {})[1])[b"cache-control"] == b"no-cache, private"


def test_without_the_build_openapi_serves_minimal_documents_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubeflux.apiserver")
    openapi = OpenApi(default_registry(), tmp_path / "nothing")
    patch = orjson.loads(openapi.documents()["api/v1"].data)["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert patch["patch"]["x-kubernetes-group-version-kind"]["kind"] == "Pod"
    openapi.index()
    assert [r.getMessage() for r in caplog.records if "OpenAPI" in r.getMessage()] == [
        f"no OpenAPI build at {tmp_path / 'nothing'}: /openapi/v3 serves minimal documents "
        "(python tools/kube/openapi_gen.py build/kube/openapi)"
    ]
    with pytest.raises(ApiError) as missing:
        openapi.answer(["apis", "nope.example.com", "v1"], {})
    assert (missing.value.code, missing.value.plain) == (404, b"")


def test_openapi_gen_copies_the_served_groups_and_says_in_one_line_when_go_is_missing(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools" / "kube"))
    try:
        import openapi_gen
    finally:
        sys.path.pop(0)
    assert openapi_gen.wanted("api__v1_openapi.json") and openapi_gen.wanted("apis__batch__v1_openapi.json")
    assert openapi_gen.wanted("apis__batch_openapi.json") and openapi_gen.wanted("version_openapi.json")
    assert not openapi_gen.wanted("apis__networking.k8s.io__v1_openapi.json")
    script = str(ROOT / "tools" / "kube" / "openapi_gen.py")
    env = {"PATH": str(Path(sys.executable).parent)}  # no go on it
    for flags, code in (([], 0), (["--strict"], 1)):
        result = subprocess.run(
            [sys.executable, script, *flags, str(tmp_path)], capture_output=True, text=True, env=env
        )
        assert result.returncode == code and result.stdout.count("\n") == 1, result
        assert "go not found" in result.stdout
    if shutil.which("go") and (ROOT / "build" / "kube" / "openapi" / "stamp.json").exists():
        stamp = json.loads((ROOT / "build" / "kube" / "openapi" / "stamp.json").read_text())
        assert "api__v1_openapi.json" in stamp["files"] and stamp["module"].startswith("k8s.io/kubernetes@")
