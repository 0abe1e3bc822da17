"""What the tests that need built tools (``make``: tools/kube/build.py) share: where the binaries are, and the
checks that make a test unavailable without them."""

from __future__ import annotations

import os
from pathlib import Path

from kubeflux.sim.apiserver.protobuf import Codec, ProtobufUnavailable, codec
from tests.shared import unavailable

BUILT = Path(os.environ.get("KUBEFLUX_KUBE_DIR") or Path(__file__).resolve().parents[3] / "build" / "kube")
KUBECTL = BUILT / "bin" / "kubectl"


def protobuf_codec() -> Codec:
    """The Kubernetes protobuf codec; the test is unavailable when its schema is not built."""
    try:
        return codec()
    except ProtobufUnavailable as exc:
        unavailable(str(exc))


def require_kubectl() -> None:
    """The built kubectl, and the protobuf codec it speaks by default; the test is unavailable without them."""
    if not os.access(KUBECTL, os.X_OK):
        unavailable(f"no kubectl in {BUILT / 'bin'} (make builds it: tools/kube/build.py)")
    protobuf_codec()
