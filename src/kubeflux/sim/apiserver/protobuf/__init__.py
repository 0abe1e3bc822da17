"""Kubernetes protobuf for the simulated API server: bodies and answers of built-in kinds as real clients send them.

Real clients at their default flags (kube-scheduler, kube-controller-manager, KWOK, several kubectl commands) write
built-in objects as ``application/vnd.kubernetes.protobuf`` and prefer it in answers. The server keeps storing the
JSON-shaped dicts it always has: :class:`Codec` turns a protobuf body into the JSON its Go object marshals to, and a
stored object back into protobuf, from a schema built at build time (``tools/kube/protobuf_gen.py``; see
:mod:`.schema` for where it is found). Without the build, :func:`codec` raises :class:`ProtobufUnavailable` whose
message says how to build it, and the server answers protobuf bodies with 415 and every answer in JSON.
"""

from __future__ import annotations

from kubeflux.sim.apiserver.protobuf.schema import (
    BUILD_COMMAND,
    ProtobufUnavailable,
    Schema,
    find_build,
    load_schema,
)
from kubeflux.sim.apiserver.protobuf.wire import MAGIC, Codec, ProtobufError

__all__ = [
    "BUILD_COMMAND",
    "MAGIC",
    "Codec",
    "ProtobufError",
    "ProtobufUnavailable",
    "Schema",
    "codec",
    "find_build",
    "load_schema",
]

_codec: Codec | None = None


def codec() -> Codec:
    """The codec of the default build (loaded once); raises :class:`ProtobufUnavailable`."""
    global _codec
    if _codec is None:
        _codec = Codec(load_schema())
    return _codec
