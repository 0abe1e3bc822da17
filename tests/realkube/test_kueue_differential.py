"""The Kueue objects of kubeflux's scenario files (``examples/workloads/kueue-*.yaml``) sent to the real Kueue v0.17's
API (its CRDs on the real kube-apiserver, :mod:`kubeflux.controlplane.kueue`) and to ``cluster serve``'s, with the
same ``kubectl``: both take every ResourceFlavor, ClusterQueue and LocalQueue the files hold (created, then kept
when applied again), default them alike (the CRDs' defaults), refuse the same broken ones naming the same field,
and print the same columns for ``kubectl get`` (issue 33).

The files are written in ``v1beta1``; the real API converts that version through Kueue's conversion webhook, which
the test's Kueue cannot be reached at (no Service: :mod:`kubeflux.controlplane.kueue`), so both are sent the same
objects in ``v1beta2``, converted by ``cluster serve``'s own conversion (:func:`to_v1beta2`): the served cluster
stores ``v1beta1`` and serves ``v1beta2`` as its view."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.controlplane import Binaries, ControlPlane
from kubeflux.controlplane.kueue import kueue_binary, start_kueue
from kubeflux.sim.apiserver.kueue_resources import to_v1beta2
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.workloads.cluster_file import uniform_cluster
from tests.shared import REPO, unavailable

from .conftest import running_plane

EXAMPLES = sorted((REPO / "examples" / "workloads").glob("kueue-*.yaml"))
KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue")


@pytest.fixture(scope="module")
def real(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running_plane(binaries, tmp_path_factory.mktemp("plane")) as started:
        missing = kueue_binary(started)
        if isinstance(missing, str):
            unavailable(missing)
        start_kueue(started)
        yield started


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A served cluster's kubeconfig."""
    server = ApiServer(uniform_cluster(2, 8, "64Gi"), kubelet=True, controllers=True).start()
    path = tmp_path_factory.mktemp("served") / "kubeconfig"
    server.write_kubeconfig(path)
    try:
        yield path
    finally:
        server.stop()


def kueue_documents() -> str:
    """Every Kueue object of the scenario files, each name once (the first file's), in ``v1beta2``, as one YAML
    stream."""
    found: dict[tuple[str, str, str], dict[str, object]] = {}
    for path in EXAMPLES:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                meta = doc["metadata"]
                found.setdefault((doc["kind"], meta.get("namespace", ""), meta["name"]), doc)
    return yaml.safe_dump_all([to_v1beta2(doc) for doc in found.values()], sort_keys=False)


def both(real: ControlPlane, served: Path, *args: str, stdin: str | None = None) -> tuple[str, str]:
    """``kubectl args`` against the real API and the served one: each one's output, or ``error: <stderr>``."""
    kubectl = str(real.binaries.path("kubectl")) if real.binaries is not None else "kubectl"
    said = []
    for kubeconfig in (real.kubeconfig, served):
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        done = subprocess.run([kubectl, *args], env=env, input=stdin, capture_output=True, text=True, timeout=120)
        said.append(done.stdout if done.returncode == 0 else f"error: {done.stderr}")
    return said[0], said[1]


def settled(real: ControlPlane) -> None:
    """Wait until the real Kueue has taken every ClusterQueue (its finalizer ``kueue.x-k8s.io/resource-in-use``
    added): it writes the object back then, each quota in the canonical string form of its quantity (``8`` becomes
    ``"8"``), so comparing before that depends on its timing."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        said = real.kubectl("get", "clusterqueues", "-o", "json", check=False, timeout=60)
        items = json.loads(said)["items"] if said else []
        if items and all("kueue.x-k8s.io/resource-in-use" in item["metadata"].get("finalizers", ()) for item in items):
            return
        time.sleep(0.2)
    raise AssertionError("the real Kueue took no ClusterQueue within 60 s")


def quantities_as_strings(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every ``nominalQuota``, ``borrowingLimit`` and ``lendingLimit`` written as a string, as Kueue
    writes them back (cluster serve keeps what the client sent; both mean the same quantity)."""
    for group in spec.get("resourceGroups", ()):
        for flavor in group.get("flavors", ()):
            for resource in flavor.get("resources", ()):
                for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if field in resource:
                        resource[field] = str(resource[field])
    return spec


def test_both_take_the_scenario_files_kueue_objects_and_print_them_alike(real: ControlPlane, served: Path) -> None:
    namespaces = {"team-a", "team-b", "strict", "best-effort"}
    for name in sorted(namespaces):
        both(real, served, "create", "namespace", name)
    documents = kueue_documents()
    created = both(real, served, "apply", "-f", "-", stdin=documents)
    assert created[0] == created[1], created
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq created" in created[0]
    # applied again: both keep every object (the real server says "configured" of a ClusterQueue whose spec kubectl
    # patches through the CRD's OpenAPI schema, which cluster serve does not publish: it says "unchanged")
    again = both(real, served, "apply", "-f", "-", stdin=documents)
    kept = [[line.split()[0] for line in said.splitlines()] for said in again]
    assert kept[0] == kept[1] == [line.split()[0] for line in created[0].splitlines()], again
    assert all(line.split()[1] in ("unchanged", "configured") for said in again for line in said.splitlines())
    settled(real)
    specs = both(real, served, "get", "clusterqueues,localqueues", "-A", "-o", "json")
    real_specs, served_specs = (
        [quantities_as_strings(item["spec"]) for item in json.loads(said)["items"]] for said in specs
    )
    assert real_specs == served_specs, specs  # the CRDs' defaults filled in alike
    for what in ("resourceflavors", "clusterqueues", "localqueues", "workloads"):
        real_table, served_table = both(real, served, "get", what, "-A")
        assert real_table.splitlines()[:1] == served_table.splitlines()[:1], (what, real_table, served_table)
        names = both(real, served, "get", what, "-A", "-o", "name")
        assert names[0] == names[1], names


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("queueingStrategy: StrictFIFO", "spec.queueingStrategy"),
        ("nominalQuota: 8", "nominalQuota"),
    ],
    ids=["unknown queueing strategy", "quota not a quantity"],
)
def test_both_refuse_a_broken_cluster_queue_naming_the_field(
    real: ControlPlane, served: Path, change: str, field: str
) -> None:
    text = (REPO / "examples" / "workloads" / "kueue-fifo.yaml").read_text().split("\n---\n")[1]
    assert change in text
    text = text.replace("name: strict}", "name: broken}").replace(change, change.split(":")[0] + ": Sometimes")
    broken = yaml.safe_dump(to_v1beta2(yaml.safe_load(text)))
    refused = both(real, served, "create", "-f", "-", stdin=broken)
    assert all(said.startswith("error: ") and field in said for said in refused), refused
