"""deploy/: the manifests install what ``serve`` needs and no more (the RBAC rules are checked against the API
calls the code in src/kubeflux/kube makes), and the configuration they carry is valid."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import PurePosixPath
from typing import Any

import yaml
from typer.main import get_command

from kubeflux import _native
from kubeflux.cli import app
from kubeflux.kube.config import parse_config
from tests.kube._deploy import CALLS, DEPLOY, calls_in_code
from tests.shared import REPO


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if d]


def _granted() -> set[tuple[str, str, str]]:
    granted = set()
    for document in _documents("rbac.yaml"):
        for rule in document.get("rules") or []:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted |= {(group, resource, verb) for verb in rule["verbs"]}
    return granted


def test_every_call_serve_makes_is_known_to_this_test() -> None:
    unknown = calls_in_code() - set(CALLS)
    assert not unknown, f"add these calls and the permissions they need to CALLS (and deploy/rbac.yaml): {unknown}"


def test_the_role_grants_exactly_what_the_calls_need() -> None:
    needed = set().union(*(CALLS[call] for call in calls_in_code()))
    granted = _granted()
    assert needed - granted == set(), "missing from deploy/rbac.yaml"
    assert granted - needed == set(), "deploy/rbac.yaml grants more than serve uses"


def test_the_kustomization_lists_every_manifest_and_the_config_is_valid() -> None:
    kustomization = _documents("kustomization.yaml")[0]
    manifests = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests
    config_map = _documents("configmap.yaml")[0]
    config = parse_config(yaml.safe_load(config_map["data"]["config.yaml"]), "deploy/configmap.yaml")
    assert config.leader_election.enabled and config.leader_election.namespace == "kubeflux-system"
    deployment = _documents("deployment.yaml")[0]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == config.operations.port
    assert container["args"][:2] == ["serve", "--in-cluster"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    bindings = [d for d in _documents("rbac.yaml") if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert all(b["subjects"][0]["name"] == account for b in bindings)


def test_the_serve_examples_are_read_by_the_cores_readers() -> None:
    from kubeflux.apiobjects.manifests import pod_from_manifest, podgroup_from_manifest

    kinds = []
    for path in sorted((REPO / "examples" / "serve").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not document or document.get("kind") == "ServeConfig":
                continue
            document.setdefault("metadata", {}).setdefault("namespace", "default")
            reader = podgroup_from_manifest if document["kind"] == "PodGroup" else pod_from_manifest
            reader(document)
            kinds.append(document["kind"])
    assert kinds.count("Pod") >= 10 and "PodGroup" in kinds


def _dockerfile_stages() -> list[list[tuple[str, str]]]:
    """deploy/Dockerfile's stages, each a list of (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text(encoding="utf-8"))
    stages: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction.upper(), arguments.strip()))
    return stages


def test_the_image_compiles_the_engine_and_runs_serve_compiled_as_non_root() -> None:
    """What can be checked of deploy/Dockerfile without a Docker engine (none on the test machines, so the image is
    not built here): a build stage with a C compiler compiles the engine with --strict (a failed compile fails the
    build); the runtime stage has no compiler, copies the sources and build/native (the compiled modules and their
    stamp) in the layout kubeflux._native looks for, refuses to be built unless ``kubeflux version`` says
    compiled, runs as the Deployment's non-root user, and its entrypoint takes the Deployment's args."""
    stages = _dockerfile_stages()
    assert len(stages) == 2
    build, runtime = stages
    assert build[0][1].lower().endswith(" as build")
    build_runs = " ".join(arguments for instruction, arguments in build if instruction == "RUN")
    assert "gcc" in build_runs and "tools/build_native.py --strict" in build_runs
    for instruction, arguments in build:
        if instruction == "COPY":  # what the build context must hold (deploy/Dockerfile.dockerignore lets it in)
            assert all((REPO / source).exists() for source in shlex.split(arguments)[:-1]), arguments

    copied = {
        PurePosixPath(words[-2]).name: PurePosixPath(words[-1])
        for instruction, arguments in runtime
        if instruction == "COPY" and (words := shlex.split(arguments))[0] == "--from=build"
    }
    assert {"src", "native", ".venv"} <= set(copied)
    assert copied["native"] == copied["src"].parent / _native.BUILD_DIR.relative_to(_native.SRC.parent).as_posix()
    assert copied["native"].name == _native.BUILD_DIR.name  # the stamp, kubeflux.stamp.json, is in it
    runtime_runs = " ".join(arguments for instruction, arguments in runtime if instruction == "RUN")
    assert "gcc" not in runtime_runs and "apt-get" not in runtime_runs
    assert re.search(r"kubeflux version \| grep -q \"\^kubeflux\.match: compiled", runtime_runs), runtime_runs

    deployment = _documents("deployment.yaml")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    users = [arguments for instruction, arguments in runtime if instruction == "USER"]
    assert users and users[-1].split(":")[0] == str(container["securityContext"]["runAsUser"]) != "0"
    runtime_dict = dict(runtime)
    assert yaml.safe_load(runtime_dict["ENTRYPOINT"]) == ["kubeflux"]
    commands = set(get_command(app).commands)
    assert container["args"][0] in commands
    assert yaml.safe_load(runtime_dict["CMD"])[:2] == ["serve", "--in-cluster"]


def test_the_values_schema_is_what_the_sources_give() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, str(REPO / "tools" / "helm_schema.py"), "--check"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
