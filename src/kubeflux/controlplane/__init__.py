"""The real Kubernetes control plane kubeflux is tested against (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, kubectl, KWOK), built by ``make`` from the published Go modules (``tools/kube/build.py``)
and started on loopback by :class:`ControlPlane` — for the tests, and for users (``kubeflux kube up``)."""

from kubeflux.controlplane.binaries import COMPONENTS, Binaries, find_binaries
from kubeflux.controlplane.harness import ControlPlane, ControlPlaneError, free_port, process_family

__all__ = [
    "COMPONENTS",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "find_binaries",
    "free_port",
    "process_family",
]
