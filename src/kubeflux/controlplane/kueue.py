"""The real Kueue (``sigs.k8s.io/kueue/cmd/kueue``, built by ``tools/kube/build.py``) in front of a
:class:`~kubeflux.controlplane.harness.ControlPlane`, run outside a cluster as its release manifests run it inside one:

    plane.start()  # etcd and kube-apiserver
    plane.start_controller_manager()
    start_kueue(plane)  # its CRDs installed, then its controller manager

What a Deployment in ``kueue-system`` would have, the harness provides: the namespace with the (empty) Secret in
which Kueue's certificate rotator keeps its certificates, the CustomResourceDefinitions of the same module
(``build/kube/kueue-crds``) with the conversion webhook its release patches in (Kueue's rotator injects its CA there
and is not ready until it has), and the kubelet's part, the rotator's Secret copied into the certificate folder it
watches. Kueue runs as the admin (the
RBAC its release grants it is wider than any test needs), on loopback, with no leader election, no metrics server
and no visibility API server, and manages ``batch/v1`` Jobs only.

No webhook is registered with the API server: Kueue's webhooks (which suspend a Job labelled
``kueue.x-k8s.io/queue-name`` at its creation and validate Kueue's objects) would need a Service it can reach, which a
loopback control plane has not. A Job is created suspended instead (``spec.suspend: true``), which is what the
mutating webhook does to it; Kueue's Job reconciler does the rest (a Workload, admission, then ``suspend: false``
with the flavor's node selector). The conversion webhook is never called as long as clients use the storage version
(``kueue.x-k8s.io/v1beta2``).
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any, Final

import yaml

from kubeflux.controlplane.harness import ControlPlane, ControlPlaneError, free_port

__all__ = ["KUEUE_NAMESPACE", "start_kueue"]

KUEUE_NAMESPACE: Final = "kueue-system"
_SECRET: Final = "kueue-webhook-server-cert"
_SERVICE: Final = "kueue-webhook-service"
_CONVERTED: Final = (
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
)
"""The CRDs whose conversion webhook Kueue's certificate rotator injects its CA into (``pkg/util/cert``): as in its
release (``config/components/crd/kustomization.yaml``), each has one."""


def kueue_binary(plane: ControlPlane) -> Path | str:
    """Kueue's executable in ``plane``'s binaries, or why there is none (one line)."""
    assert plane.binaries is not None
    path = plane.binaries.path("kueue")
    crds = plane.binaries.folder / "kueue-crds"
    if not os.access(path, os.X_OK) or not crds.is_dir():
        return f"no Kueue in {plane.binaries.folder} (run `make kube`: tools/kube/build.py builds it)"
    return path


def _crds(folder: Path) -> list[dict[str, Any]]:
    documents = []
    for path in sorted(folder.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["metadata"]["name"] in _CONVERTED:
            service = {"namespace": KUEUE_NAMESPACE, "name": _SERVICE, "path": "/convert"}
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {"clientConfig": {"service": service}, "conversionReviewVersions": ["v1"]},
            }
        documents.append(crd)
    return documents


def _configuration(certificates: Path, webhook: int, health: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "leaderElection": {"leaderElect": False},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certificates)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
    }


def start_kueue(plane: ControlPlane, *args: str) -> None:
    """Install Kueue's CRDs and start its controller manager (component ``kueue``, stopped with the plane; ``args``
    added to its command line); returns once it serves (``/readyz`` of its main manager)."""
    found = kueue_binary(plane)
    if isinstance(found, str):
        raise ControlPlaneError(found)
    assert plane.binaries is not None
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
    # the empty Secret its release makes (config/components/internalcert), which the rotator fills
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": _SECRET, "namespace": KUEUE_NAMESPACE}}
    crds = _crds(plane.binaries.folder / "kueue-crds")
    for items in ([namespace], [secret, *crds]):  # the namespace first: its Secret is refused before
        listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        plane.kubectl("apply", "--server-side", "--field-manager=kubeflux-kueue", "-f", "-", input=listed)
    _wait_established(plane)
    folder = plane.folder / "kueue"
    certificates = folder / "certificates"
    certificates.mkdir(parents=True, exist_ok=True)
    plane.on_free_port(("kueue", "kueue-health"), lambda: _start(plane, found, folder, certificates, args))


def _wait_established(plane: ControlPlane, seconds: float = 60.0) -> None:
    """Wait until the API server has established the CRDs Kueue converts. ``kubectl wait`` fails at once, rather than
    waiting, on a CRD whose status has no conditions yet (seen under load), so it is asked again until the time is up
    (then its error is raised)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            plane.kubectl("wait", "--for=condition=established", f"--timeout={seconds:g}s", "crd", *_CONVERTED)
            return
        except ControlPlaneError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _start(plane: ControlPlane, binary: Path, folder: Path, certificates: Path, args: tuple[str, ...]) -> None:
    webhook = plane.ports.setdefault("kueue", free_port())
    health = plane.ports.setdefault("kueue-health", free_port())
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(_configuration(certificates, webhook, health), sort_keys=False))
    argv = [str(binary), f"--config={config}", f"--kubeconfig={plane.kubeconfig}", *args]
    log = plane.folder / "logs" / "kueue.log"

    def ready() -> bool:
        _mount_secret(plane, certificates)
        # the bootstrap manager (certificates) answers /readyz too, with no checks: the main one starts after it
        started = log.is_file() and "Starting manager" in log.read_text(errors="replace")
        return started and plane.fetch(f"http://127.0.0.1:{health}/readyz") == b"ok"

    plane.run_component("kueue", argv, ready)


def _mount_secret(plane: ControlPlane, certificates: Path) -> None:
    """The kubelet's part: the rotator's Secret, once it exists, as files in the folder Kueue's webhook server reads
    its certificate from (the rotator waits for them before it says the certificates are ready)."""
    if (certificates / "tls.key").is_file():
        return
    body = plane.fetch(f"{plane.server}/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{_SECRET}")
    data = json.loads(body).get("data") or {} if body else {}
    if not {"tls.crt", "tls.key"} <= data.keys():
        return
    for name in ("ca.crt", "tls.crt", "tls.key"):  # the key last: its presence says all are written
        if name in data:
            staged = certificates / f".{name}"
            staged.write_bytes(base64.b64decode(data[name]))
            staged.rename(certificates / name)
