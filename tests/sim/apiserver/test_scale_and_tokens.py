"""The ``scale`` subresource and ServiceAccount tokens on the served cluster, through the official client and kubectl:
``kubectl scale`` and ``kubectl create token`` work, and a requested token is a bearer token a server with a token
accepts for as long as it is valid."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from kubeflux.sim.apiserver.app import ServerSettings
from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.resources import default_registry
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.store import Store
from kubeflux.sim.apiserver.tls import make_certificates
from kubeflux.sim.apiserver.tokens import TokenIssuer
from tests.sim.apiserver._built import KUBECTL, require_kubectl

kubernetes = pytest.importorskip("kubernetes")
Object = dict[str, Any]
DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "m", "image": "nginx"}]}},
    },
}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[ApiServer]:
    """A server with TLS and a token, as ``cluster serve --tls --token T`` runs."""
    tls = make_certificates(tmp_path / "pki", "127.0.0.1")
    server = ApiServer([], settings=ServerSettings(token="admin-token"), tls=tls).start()
    try:
        server.write_kubeconfig(tmp_path / "kubeconfig")
        yield server
    finally:
        server.stop()


def _client(kubeconfig: Path, token: str | None = None) -> Any:
    config = yaml.safe_load(kubeconfig.read_text())
    if token is not None:
        config["users"][0]["user"]["token"] = token
    return kubernetes.config.new_client_from_config_dict(config)


def test_the_official_client_reads_and_patches_a_deployments_scale(secured: ApiServer, tmp_path: Path) -> None:
    client = _client(tmp_path / "kubeconfig")
    try:
        apps = kubernetes.client.AppsV1Api(client)
        apps.create_namespaced_deployment("default", DEPLOYMENT, _preload_content=False)
        scale = apps.read_namespaced_deployment_scale("web", "default")
        assert (scale.spec.replicas, scale.status.selector) == (1, "app=web")
        patched = apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
        assert patched.spec.replicas == 3
        deployment = orjson.loads(apps.read_namespaced_deployment("web", "default", _preload_content=False).data)
        assert deployment["spec"]["replicas"] == 3 and deployment["metadata"]["generation"] == 2
        assert "scale" in [m.get("subresource") for m in deployment["metadata"]["managedFields"]]
        with pytest.raises(kubernetes.client.ApiException) as refused:
            apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": -1}})
        assert refused.value.status == 422
    finally:
        client.close()


def test_a_requested_token_authenticates_while_its_account_exists(secured: ApiServer, tmp_path: Path) -> None:
    admin = _client(tmp_path / "kubeconfig")
    try:
        core = kubernetes.client.CoreV1Api(admin)
        core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
        answer = core.create_namespaced_service_account_token("robot", "default", {"spec": {}})
        assert answer.spec.expiration_seconds == 3600
        assert answer.spec.audiences == ["https://kubernetes.default.svc.cluster.local"]
        token = answer.status.token
        robot = _client(tmp_path / "kubeconfig", token)
        try:
            names = [
                n.metadata.name
                for n in kubernetes.client.CoreV1Api(robot).list_namespaced_service_account("default").items
            ]
            assert "robot" in names
            core.delete_namespaced_service_account("robot", "default")
            with pytest.raises(kubernetes.client.ApiException) as refused:
                kubernetes.client.CoreV1Api(robot).list_namespaced_service_account("default")
            assert refused.value.status == 401
        finally:
            robot.close()
        forged = _client(tmp_path / "kubeconfig", token[:-4] + "AAAA")
        try:
            with pytest.raises(kubernetes.client.ApiException) as refused:
                kubernetes.client.CoreV1Api(forged).list_namespace()
            assert refused.value.status == 401
        finally:
            forged.close()
    finally:
        admin.close()


def test_a_token_expires_and_a_pod_bound_one_ends_with_its_pod() -> None:
    now = [1_800_000_000.0]
    store = Store(default_registry(), clock=lambda: now[0])
    find = store.registry.find
    accounts, pods = find("", "v1", "serviceaccounts"), find("", "v1", "pods")
    store.create(accounts, "default", {"metadata": {"name": "robot"}})
    pod = {
        "metadata": {"name": "p"},
        "spec": {"serviceAccountName": "robot", "containers": [{"name": "m", "image": "b"}]},
    }
    store.create(pods, "default", pod)
    issuer = TokenIssuer()
    plain = issuer.request(store, accounts, "default", "robot", {"spec": {"expirationSeconds": 600}}, "")
    bound_ref = {"apiVersion": "v1", "kind": "Pod", "name": "p"}
    bound = issuer.request(store, accounts, "default", "robot", {"spec": {"boundObjectRef": bound_ref}}, "")
    subject = "system:serviceaccount:default:robot"
    user = issuer.identity(plain["status"]["token"], store)
    assert user is not None and user["username"] == subject
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    assert TokenIssuer().identity(plain["status"]["token"], store) is None  # another server's key
    elsewhere = issuer.request(store, accounts, "default", "robot", {"spec": {"audiences": ["vault"]}}, "")
    assert issuer.identity(elsewhere["status"]["token"], store) is None  # not meant for the API server
    assert issuer.identity(elsewhere["status"]["token"], store, ["vault"]) is not None
    now[0] += 600
    assert issuer.identity(plain["status"]["token"], store) is None
    pod_user = issuer.identity(bound["status"]["token"], store)
    assert pod_user is not None and pod_user["extra"]["authentication.kubernetes.io/pod-name"] == ["p"]
    store.delete(pods, "default", "p")
    assert issuer.identity(bound["status"]["token"], store) is None
    with pytest.raises(ApiError) as refused:
        issuer.request(store, accounts, "default", "robot", {"spec": {"expirationSeconds": 599}}, "")
    assert refused.value.code == 422


def test_kubectl_scale_and_create_token(secured: ApiServer, tmp_path: Path) -> None:
    """The real kubectl v1.36 at its defaults (protobuf bodies: ``create serviceaccount``, ``create token``)."""
    require_kubectl()

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(KUBECTL), "--kubeconfig", str(tmp_path / "kubeconfig"), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    applied = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(tmp_path / "kubeconfig"), "apply", "-f", "-"],
        input=orjson.dumps({"apiVersion": "apps/v1", "kind": "Deployment", **DEPLOYMENT}).decode(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert applied.returncode == 0, applied.stderr
    assert kubectl("scale", "deployment", "web", "--replicas=4").stdout.strip() == "deployment.apps/web scaled"
    assert kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "4"
    refused = kubectl("scale", "deployment", "web", "--replicas=2", "--current-replicas=1")
    assert refused.returncode != 0 and "Expected replicas to be 1, was 4" in refused.stderr
    assert kubectl("create", "serviceaccount", "robot").returncode == 0
    token = kubectl("create", "token", "robot", "--duration=20m").stdout.strip()
    assert token.count(".") == 2
    short = kubectl("create", "token", "robot", "--duration=5m")
    assert "may not specify a duration less than 10 minutes" in short.stderr
    as_robot = kubectl("--token", token, "get", "serviceaccount", "robot", "-o", "name")
    assert as_robot.stdout.strip() == "serviceaccount/robot", as_robot.stderr
    whoami = kubectl("--token", token, "auth", "whoami").stdout
    assert "system:serviceaccount:default:robot" in whoami and "system:serviceaccounts:default" in whoami
    assert "kubernetes-admin" in kubectl("auth", "whoami").stdout
    elsewhere = kubectl("create", "token", "robot", "--audience=vault").stdout.strip()
    refused = kubectl("--token", elsewhere, "get", "serviceaccount", "robot")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr
