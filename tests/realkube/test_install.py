"""Installed as users install schedulers: deploy/'s kustomize manifests (``kubectl kustomize``, built into the real
kubectl) and the Helm chart (``deploy/helm/kubeflux``, rendered and linted by the Helm that ``make kube`` builds) pass
the real API server's validation (``kubectl apply --dry-run=server``), render the same objects and the same RBAC, and
once installed give serve's ServiceAccount what serve needs and nothing more (``kubectl auth can-i --as``).

One control plane for the module; each install has a namespace and cluster-scoped names of its own.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.kube.config import ServeConfig, parse_config
from tests.kube._deploy import CALLS, CHART, DEPLOY, calls_in_code
from tests.shared import unavailable

from .conftest import running_plane

HA_VALUES = CHART / "ci" / "ha-values.yaml"
VALUES = {"default": (), "ha": (HA_VALUES,)}
"""The chart's values files under test: its defaults (one replica), and high availability (two, leader election)."""

Triple = tuple[str, str, str]


class Helm:
    """The built Helm, with its cache, config and data in a folder of its own (never the user's)."""

    def __init__(self, path: Path, home: Path) -> None:
        self.path = path
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.path), *map(str, args)]
        result = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=120)
        assert not check or result.returncode == 0, f"helm {' '.join(argv[1:])}: {result.stderr}"
        return result

    def template(
        self, values: tuple[Path, ...], *, release: str = "kubeflux", namespace: str = "kubeflux-system"
    ) -> str:
        files = [arg for path in values for arg in ("--values", str(path))]
        return self.run("template", release, CHART, "--namespace", namespace, *files).stdout


@pytest.fixture(scope="module")
def helm(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    path = binaries.path("helm")
    if not os.access(path, os.X_OK):
        unavailable(f"no Helm in {path.parent} (run `make kube`: tools/kube/build.py builds it)")
    return Helm(path, tmp_path_factory.mktemp("helm"))


def _documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _kustomize(binaries: Binaries) -> str:
    argv = [str(binaries.path("kubectl")), "kustomize", str(DEPLOY)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _one(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}s"
    return found[0]


def _granted(documents: list[dict[str, Any]], kind: str) -> set[Triple]:
    """What the ``kind`` (ClusterRole or Role) objects grant: (API group, resource, verb) triples."""
    return {
        (group, resource, verb)
        for document in documents
        if document["kind"] == kind
        for rule in document.get("rules") or []
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _config(documents: list[dict[str, Any]]) -> ServeConfig:
    config_map = _one(documents, "ConfigMap")
    return parse_config(yaml.safe_load(config_map["data"]["config.yaml"]), config_map["metadata"]["name"])


def _pod_spec(documents: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _one(documents, "Deployment")["spec"]["template"]["spec"]
    return spec


# ---------------------------------------------------------------------------------------------------- rendering


@pytest.mark.parametrize("values", VALUES)
def test_the_chart_lints_clean(helm: Helm, values: str) -> None:
    files = [arg for path in VALUES[values] for arg in ("--values", str(path))]
    result = helm.run("lint", "--strict", CHART, *files)
    assert "0 chart(s) failed" in result.stdout, result.stdout


def test_kustomize_renders_every_manifest(binaries: Binaries) -> None:
    kinds = sorted(d["kind"] for d in _documents(_kustomize(binaries)))
    expected = ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Namespace", "Role", "RoleBinding"]
    assert kinds == [*expected, "ServiceAccount"]


@pytest.mark.parametrize("values", VALUES)
def test_the_chart_renders_what_deploy_installs(helm: Helm, binaries: Binaries, values: str) -> None:
    """Released as ``kubeflux`` in ``kubeflux-system``, the chart renders deploy/'s objects (bar the Namespace, which
    ``helm install --create-namespace`` makes) under the same names, with the same RBAC rules, the same
    configuration and the same pod; its defaults differ only in running one replica without leader election (and
    so without the Lease's Role)."""
    kustomized = _documents(_kustomize(binaries))
    chart = _documents(helm.template(VALUES[values]))
    ha = values == "ha"

    def names(documents: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]) for d in documents}

    expected = {n for n in names(kustomized) if n[0] != "Namespace" and (ha or n[0] not in ("Role", "RoleBinding"))}
    assert names(chart) == expected

    # RBAC: exactly deploy/rbac.yaml's grants (which tests/kube/test_deploy.py checks against serve's calls)
    assert _granted(chart, "ClusterRole") == _granted(kustomized, "ClusterRole")
    assert _granted(chart, "Role") == (_granted(kustomized, "Role") if ha else set())
    account = _pod_spec(chart)["serviceAccountName"]
    for binding in (d for d in chart if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "kubeflux-system"}]
        assert binding["roleRef"]["name"] in {d["metadata"]["name"] for d in chart if d["kind"].endswith("Role")}

    # the configuration, as serve reads it
    config, kustomized_config = _config(chart), _config(kustomized)
    if ha:
        assert config == kustomized_config
    else:
        assert not config.leader_election.enabled
        assert config.model_copy(update={"leader_election": kustomized_config.leader_election}) == kustomized_config

    # the pod
    deployment = _one(chart, "Deployment")
    assert deployment["spec"]["replicas"] == (2 if ha else 1)
    pod, kustomized_pod = _pod_spec(chart), _pod_spec(kustomized)
    container, kustomized_container = pod["containers"][0], kustomized_pod["containers"][0]
    assert container.pop("imagePullPolicy") == "IfNotPresent"
    assert container == kustomized_container
    assert {k: v for k, v in pod.items() if k != "containers"} == {
        k: v for k, v in kustomized_pod.items() if k != "containers"
    }
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/port"] == str(config.operations.port)
    assert len(template["annotations"]["kubeflux.io/config-checksum"]) == 64
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["labels"].items()


def test_the_chart_sets_what_its_values_say(helm: Helm) -> None:
    values = [
        "--set", "image.repository=registry.example/kubeflux", "--set", "image.tag=dev",
        "--set", "verbosity=2", "--set", "config.namespaces={hpc,ml}",
        "--set-json", 'config.schedulers=[{"name":"flux-a","queuePolicy":"conservative"},{"name":"flux-b"}]',
        "--set-json", 'nodeSelector={"node-role.kubernetes.io/control-plane":""}',
        "--set-json", 'tolerations=[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]',
        "--set", "resources.requests.cpu=2",
    ]  # fmt: skip
    documents = _documents(helm.run("template", "hpc", CHART, "--namespace", "sched", *values).stdout)
    config = _config(documents)
    assert [s.name for s in config.schedulers] == ["flux-a", "flux-b"]
    assert config.schedulers[0].queue_policy.value == "conservative"
    assert config.namespaces == ["hpc", "ml"]
    pod = _pod_spec(documents)
    assert pod["containers"][0]["image"] == "registry.example/kubeflux:dev"
    assert pod["containers"][0]["args"][-1] == "-vv"
    assert pod["containers"][0]["resources"]["requests"]["cpu"] == 2
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["effect"] == "NoSchedule"
    assert pod["serviceAccountName"] == "hpc-kubeflux"
    assert {d["metadata"].get("namespace", "sched") for d in documents} == {"sched"}


def test_more_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    result = helm.run("template", "kubeflux", CHART, "--set", "replicas=2", check=False)
    assert result.returncode != 0
    assert "leaderElection.enabled" in result.stderr


@pytest.mark.parametrize(
    ("setting", "path"),
    [
        ("config.schedulers[0].queuePolicy=eas", "/config/schedulers/0/queuePolicy"),
        ("config.nodes.socketsDefault=-1", "/config/nodes/socketsDefault"),
        ("config.scheduler=kubeflux", "/config"),
        ("imagee.tag=x", "imagee"),
        ("operationsPort=0", "/operationsPort"),
        ("leaderElection.enabled=yes", "/leaderElection/enabled"),
    ],
)
def test_a_bad_value_is_refused_with_its_path(helm: Helm, setting: str, path: str) -> None:
    """values.schema.json (tools/helm_schema.py, from serve's own config model) stops a typo at lint and install,
    naming where it is, before a pod that would refuse its config at start is rolled out."""
    for verb in (("lint", "--strict", CHART), ("template", "kubeflux", CHART)):
        result = helm.run(*verb, "--set", setting, check=False)
        assert result.returncode != 0, f"helm {verb[0]} accepted {setting}"
        assert path in result.stdout + result.stderr, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------------- on the server


@pytest.fixture(scope="module")
def plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The API groups serve reads all served: coscheduling's PodGroup CRD installed, and Kubernetes' own PodGroups
    (``scheduling.k8s.io/v1alpha2``) enabled, so ``kubectl auth can-i`` resolves every resource it is asked about."""
    gates = {"GenericWorkload": True, "GangScheduling": True}
    runtime = {"scheduling.k8s.io/v1alpha2": "true"}
    folder = tmp_path_factory.mktemp("plane")
    with running_plane(binaries, folder, crds=True, feature_gates=gates, runtime_config=runtime) as started:
        yield started


@pytest.fixture(scope="module")
def kubeflux_system(plane: ControlPlane) -> str:
    """deploy/'s namespace, made as ``kubectl apply -k deploy/`` makes it (a server-side dry run of its other objects
    needs it to exist)."""
    plane.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"))
    return "kubeflux-system"


def test_kustomize_passes_a_server_side_dry_run(plane: ControlPlane, kubeflux_system: str) -> None:
    out = plane.kubectl("apply", "--dry-run=server", "-k", str(DEPLOY))
    assert out.count("(server dry run)") == 8, out


@pytest.mark.parametrize("values", VALUES)
def test_the_chart_passes_a_server_side_dry_run(
    plane: ControlPlane, helm: Helm, kubeflux_system: str, values: str
) -> None:
    rendered = helm.template(VALUES[values])
    out = plane.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)
    assert out.count("(server dry run)") == len(_documents(rendered)), out


def _can(plane: ControlPlane, account: str, verb: str, group: str, resource: str, namespace: str | None) -> bool:
    """``kubectl auth can-i`` as ``account`` (``namespace:name``): may it ``verb`` the ``resource`` (``pods/binding``:
    a subresource) of ``group``, in ``namespace`` (None: every namespace, and cluster-scoped resources)?"""
    resource, _, subresource = resource.partition("/")
    argv = ["auth", "can-i", verb, f"{resource}.{group}" if group else resource]
    argv += [f"--subresource={subresource}"] if subresource else []
    argv += ["-n", namespace] if namespace else ["--all-namespaces"]
    argv += [f"--as=system:serviceaccount:{account}", "--kubeconfig", str(plane.kubeconfig)]
    assert plane.binaries is not None
    result = subprocess.run([str(plane.binaries.path("kubectl")), *argv], capture_output=True, text=True, timeout=60)
    # a resource the server does not serve would be asked about without its group: a wrong answer
    assert "doesn't have a resource type" not in result.stderr, result.stderr
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


NEVER: tuple[tuple[str, str, str, str | None], ...] = (
    ("delete", "", "nodes", None),
    ("patch", "", "nodes", None),
    ("get", "", "secrets", None),
    ("list", "", "secrets", None),
    ("get", "", "configmaps", None),
    ("create", "", "pods", None),
    ("delete", "", "pods", None),
    ("update", "", "pods", None),
    ("create", "scheduling.x-k8s.io", "podgroups", None),
    ("delete", "scheduling.k8s.io", "podgroups", None),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", None),
    ("impersonate", "", "serviceaccounts", None),
    ("update", "coordination.k8s.io", "leases", "kube-system"),  # another component's Lease
    ("delete", "coordination.k8s.io", "leases", None),
)
"""What serve never does, as (verb, group, resource, namespace): its account must not be able to."""


def _check_permissions(plane: ControlPlane, account: str, *, leases: bool) -> None:
    """The account may do every call serve makes (tests/kube/test_deploy.py's table of them), the Lease's only in
    its own namespace (and none without leader election), and nothing in :data:`NEVER`."""
    namespace = account.split(":")[0]
    needed: set[Triple] = set().union(*(CALLS[call] for call in calls_in_code()))
    for group, resource, verb in sorted(needed):
        if group == "coordination.k8s.io":
            assert _can(plane, account, verb, group, resource, namespace) == leases, (verb, resource, namespace)
            assert not _can(plane, account, verb, group, resource, "default"), (verb, resource, "default")
        else:
            assert _can(plane, account, verb, group, resource, None), (verb, group, resource)
    for verb, group, resource, where in NEVER:
        assert not _can(plane, account, verb, group, resource, where), (verb, group, resource, where)


def test_installed_with_kustomize_serve_may_do_what_it_needs_and_no_more(
    plane: ControlPlane, kubeflux_system: str
) -> None:
    out = plane.kubectl("apply", "-k", str(DEPLOY))
    assert "deployment.apps/kubeflux created" in out or "deployment.apps/kubeflux unchanged" in out, out
    _check_permissions(plane, f"{kubeflux_system}:kubeflux", leases=True)


@pytest.mark.parametrize("values", VALUES)
def test_installed_with_helm_serve_may_do_what_it_needs_and_no_more(
    plane: ControlPlane, helm: Helm, values: str
) -> None:
    release, namespace = f"kf-{values}", f"kf-{values}-system"
    files = [arg for path in VALUES[values] for arg in ("--values", str(path))]
    result = helm.run(
        "install", release, CHART, "--namespace", namespace, "--create-namespace", *files,
        "--kubeconfig", plane.kubeconfig,
    )  # fmt: skip
    assert "STATUS: deployed" in result.stdout, result.stdout
    assert "schedulerName: kubeflux" in result.stdout  # NOTES.txt
    deployment = plane.kubectl("-n", namespace, "get", "deployment", f"{release}-kubeflux", "-o", "json")
    assert '"replicas": ' + ("2" if values == "ha" else "1") in deployment
    _check_permissions(plane, f"{namespace}:{release}-kubeflux", leases=values == "ha")
