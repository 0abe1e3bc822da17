"""Where the Kubernetes data that ``make`` generates into ``build/kube`` is found (the protobuf schema, the OpenAPI
documents): one lookup, in one order, for every such folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["find_kube_build"]

_CHECKOUT = Path(__file__).resolve().parents[4] / "build" / "kube"
"""``build/kube`` of the source checkout this package runs from."""


def find_kube_build(part: str, marker: str, variable: str) -> Path:
    """The folder ``build/kube/<part>``: ``$<variable>`` if set; else that of this source checkout, or else
    ``<part>/`` of ``$KUBEFLUX_KUBE_DIR`` (the control plane's build folder), if it holds the file ``marker``; else
    ``build/kube/<part>`` under the working directory. It may not exist."""
    configured = os.environ.get(variable)
    if configured:
        return Path(configured)
    checkout = _CHECKOUT / part
    if (checkout / marker).exists():
        return checkout
    kube = os.environ.get("KUBEFLUX_KUBE_DIR")
    if kube and (Path(kube) / part / marker).exists():
        return Path(kube) / part
    return Path.cwd() / "build" / "kube" / part
