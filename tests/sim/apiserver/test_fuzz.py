"""Malformed and mutated requests: the server always answers (never a 5xx, never a dropped connection) and still
holds every object it acknowledged."""

from __future__ import annotations

import http.client
import random
from typing import Any

import orjson

from kubeflux.sim.apiserver.server import ApiServer

from .conftest import pod_manifest

PATHS = [
    "/api/v1/namespaces/default/pods",
    "/api/v1/namespaces/default/pods/{name}",
    "/api/v1/namespaces/default/pods/{name}/status",
    "/api/v1/namespaces/default/pods/{name}/binding",
    "/api/v1/namespaces/default/bindings",
    "/api/v1/namespaces/nowhere/pods",
    "/api/v1/pods",
    "/api/v1/nodes/{name}",
    "/apis/batch/v1/namespaces/default/jobs",
    "/apis/batch/v1/namespaces/default/jobs/{name}/status",
    "/api/v1/namespaces/default/events",
    "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/{name}/status",
    "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
    "/apis/events.k8s.io/v1/namespaces/default/events",
    "/apis/apps/v1/namespaces/default/replicasets",
    "/apis/unknown.io/v1/things",
    "/api/v1/namespaces/default/pods/{name}/exec",
    "/api/v2/pods",
    "/api",
    "/apis/batch",
    "/openapi/v3/apis/batch/v1",
    "/%ff%fe",
]
CONTENT_TYPES = [
    "application/json",
    "application/yaml",
    "application/merge-patch+json",
    "application/json-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
]
QUERIES = [
    "",
    "?labelSelector=app%20in%20(a,",
    "?labelSelector=a!=b,c",
    "?fieldSelector=spec.nodeName%3D%3D",
    "?fieldSelector=bogus=1",
    "?limit=-3",
    "?limit=2&continue=garbage",
    "?resourceVersion=abc",
    "?resourceVersion=99999999&resourceVersionMatch=Exact",
    "?watch=true&timeoutSeconds=1&resourceVersion=1",
    "?watch=true&sendInitialEvents=true",
    "?gracePeriodSeconds=x",
    "?propagationPolicy=Sideways",
]


def _job(name: str) -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
    return {"metadata": {"name": name}, "spec": {"template": template}, "status": {"conditions": [{"type": "x"}]}}


def _event(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": name},
        "reason": "Fuzz",
        "message": "m",
        "type": "Normal",
    }


def _mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    """A random change somewhere in a JSON tree: a key dropped, a value replaced by another type, a list emptied."""
    junk = [None, -1, 3.5, "", "x" * 70, [], {}, True, {"a": [1, {"b": None}]}, "-1", "1e999", "Ω"]
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(list(value))
        mutated = dict(value)
        choice = rng.random()
        if choice < 0.2:
            del mutated[key]
        elif choice < 0.5:
            mutated[key] = rng.choice(junk)
        else:
            mutated[key] = _mutate(rng, value[key], depth + 1)
        return mutated
    if isinstance(value, list) and value and depth < 6:
        index = rng.randrange(len(value))
        return [*value[:index], _mutate(rng, value[index], depth + 1), *value[index + 1 :]]
    return rng.choice(junk)


REAL_INTERNAL_ERRORS = (
    b'"target.name: Required value"',
    b'"resourceVersion should not be set on objects to be created"',
)


def _body(rng: random.Random, name: str) -> bytes:
    valid = rng.choice([pod_manifest(name, labels={"app": "fuzz"}), _job(name), _event(name)])
    choice = rng.random()
    if choice < 0.35:
        return orjson.dumps(_mutate(rng, valid))
    if choice < 0.5:
        return orjson.dumps(valid)[: rng.randrange(1, 60)]
    if choice < 0.6:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if choice < 0.7:
        return b"- [unbalanced\n: yaml: {"
    if choice < 0.8:
        return orjson.dumps([{"op": rng.choice(["add", "remove", "move", "test", "bogus"]), "path": "/spec/x/0"}])
    if choice < 0.85:
        return orjson.dumps({"metadata": {"name": name}, "target": {"name": rng.choice(["node-0000", "", 7])}})
    return orjson.dumps(valid)


def test_random_and_mutated_requests_never_break_the_server(apiserver: ApiServer) -> None:
    rng = random.Random(20261125)
    connection = http.client.HTTPConnection("127.0.0.1", apiserver.port, timeout=60)
    acknowledged: set[str] = set()
    deleted: set[str] = set()
    for number in range(1000):
        name = rng.choice(["a", "b", "c", "Bad_Name", "node-0000", "x" * 300, f"p{number % 40}"])
        method = rng.choice(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"])
        path = rng.choice(PATHS).format(name=name) + rng.choice(QUERIES)
        body = _body(rng, name) if method in ("POST", "PUT", "PATCH", "DELETE") else b""
        headers = {"Content-Type": rng.choice(CONTENT_TYPES)}
        if rng.random() < 0.2:  # interleave valid creates, which must all survive what follows
            method, path, headers = "POST", PATHS[0], {"Content-Type": "application/json"}
            body = orjson.dumps(pod_manifest(f"p{number}", labels={"app": "fuzz"}))
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        # 504 Timeout "Too large resource version" is the real server's answer to a version from the future
        too_large = response.status == 504 and b"Too large resource version" in data
        # and the real server answers these two mistakes with a 500 (tests/realkube/test_apiserver_differential.py)
        internal = response.status == 500 and any(m in data for m in REAL_INTERNAL_ERRORS)
        assert response.status < 500 or too_large or internal, (method, path, body[:200], data[:300])
        # a path of a group nobody serves is the real server's plain-text 404 (and a missing OpenAPI document an
        # empty one); every other refusal is a Status
        page_not_found = response.status == 404 and data in (b"404 page not found\n", b"")
        if response.status >= 400 and method != "HEAD" and data and not page_not_found:
            status = orjson.loads(data)
            assert status["kind"] == "Status" and status["code"] == response.status
        if method == "POST" and response.status == 201 and path.endswith("/default/pods"):
            acknowledged.add(orjson.loads(data)["metadata"]["name"])
        if method == "DELETE" and response.status == 200:  # one object, or a collection's deleted items
            answer = orjson.loads(data)
            for item in answer.get("items", [answer]):
                if item.get("kind") in ("Pod", None) and item.get("metadata", {}).get("namespace") == "default":
                    deleted.add(item["metadata"]["name"])
    # every collection still lists, as objects and as the Tables kubectl asks for
    for path in ("/api/v1/pods", "/apis/batch/v1/jobs", "/api/v1/events", "/apis/events.k8s.io/v1/events"):
        for accept in ("application/json", "application/json;as=Table;v=v1;g=meta.k8s.io"):
            connection.request("GET", path, headers={"Accept": accept})
            response = connection.getresponse()
            assert response.status == 200, (path, accept, response.read()[:300])
            response.read()
    # an oversized body is refused, and the connection still serves
    connection.request("POST", "/api/v1/namespaces/default/pods", body=b" " * (4 * 1024 * 1024))
    response = connection.getresponse()
    response.read()
    assert response.status == 413
    connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", apiserver.port, timeout=60)
    connection.request("GET", "/api/v1/namespaces/default/pods")
    listed = {p["metadata"]["name"] for p in orjson.loads(connection.getresponse().read())["items"]}
    assert acknowledged, "the fuzzer should have created some pods"
    assert acknowledged - deleted <= listed
    connection.close()


def test_yaml_aliases_and_deep_nesting_are_refused_not_expanded(apiserver: ApiServer) -> None:
    bomb = b"a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nmetadata: {name: bomb}\n"
    deep = b'{"metadata": {"name": "deep"}, "spec": ' + b'{"a": ' * 900 + b"1" + b"}" * 900 + b"}"
    connection = http.client.HTTPConnection("127.0.0.1", apiserver.port, timeout=60)
    for body, content_type, method, path in (
        (bomb, "application/yaml", "POST", "/api/v1/namespaces/default/configmaps"),
        (deep, "application/json", "POST", "/api/v1/namespaces/default/configmaps"),
        (b"[" * 5000 + b"]" * 5000, "application/json", "POST", "/api/v1/namespaces/default/configmaps"),
        (b"a:\n" + b"  " * 3000 + b"- 1\n", "application/yaml", "POST", "/api/v1/namespaces/default/configmaps"),
    ):
        connection.request(method, path, body=body, headers={"Content-Type": content_type})
        response = connection.getresponse()
        data = response.read()
        assert 400 <= response.status < 500, (response.status, data[:300])
    connection.request("POST", "/api/v1/namespaces/default/configmaps", body=b'{"metadata": {"name": "x"}}')
    response = connection.getresponse()
    response.read()
    assert response.status == 201
    connection.close()
