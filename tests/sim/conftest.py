"""What the tests that send one object to ``cluster serve`` and to ``simulate``'s readers share: a served cluster
of one node (no scheduler, no kubelet), a dry-run create that answers with its status and message, and a case of
such a test (:class:`Verdict`)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.model import Workload
from tests.sim.apiserver.conftest import start_server


@dataclass(frozen=True)
class Verdict:
    """One object (``obj``) and ``cluster serve``'s answer to it: ``status`` 201, 400 (not decodable) or 422
    (invalid), its message holding ``says``; ``field``: the field it names."""

    name: str
    obj: dict[str, Any]
    status: int
    says: str = ""
    field: str = ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    served = start_server(tmp_path_factory.mktemp("serve"), nodes=1)
    try:
        yield served
    finally:
        served.stop()


def dry_run(server: ApiServer, collection: str, body: dict[str, Any]) -> tuple[int, str]:
    """``POST`` of ``body`` to ``collection`` (``/api/v1/namespaces/default/pods``) with ``dryRun=All``: the status
    and the message of the answer."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("POST", f"{collection}?dryRun=All", json.dumps(body), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read()).get("message", "")
    finally:
        connection.close()


def served_and_read(server: ApiServer, collection: str, case: Verdict, folder: Path) -> Workload:
    """Send ``case.obj`` to ``cluster serve`` (its answer must be ``case``'s) and read it with ``simulate``'s manifest
    reader: the workload, for the caller to check that the reader gave the same verdict."""
    status, message = dry_run(server, collection, case.obj)
    assert status == case.status, message
    assert case.says in message
    path = folder / "w.yaml"
    path.write_text(yaml.safe_dump(case.obj))
    return read_manifests(path)


def pod(name: str = "p", namespace: str | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    """A pod of one 1-core container: the body the verdict tables vary (``spec``: fields of its spec)."""
    meta: dict[str, Any] = {"name": name, "annotations": annotations or {}}
    if namespace is not None:
        meta["namespace"] = namespace
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container], **spec}}
