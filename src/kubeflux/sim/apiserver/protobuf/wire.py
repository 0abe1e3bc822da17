"""Kubernetes' protobuf wire form (``k8s.io/apimachinery/pkg/runtime/serializer/protobuf``).

An object is the 4-byte magic ``k8s\\x00`` and a ``runtime.Unknown``: ``typeMeta`` (apiVersion, kind), ``raw`` (the
object's message) and the empty ``contentEncoding`` and ``contentType`` the Go marshaller always writes. A watch
stream (``application/vnd.kubernetes.protobuf;stream=watch``) is frames of a 4-byte big-endian length and a
``meta.v1.WatchEvent`` without magic (the raw serializer): ``type`` and ``object.raw``, which is an enveloped object.

The envelopes are written here byte by byte (three fixed messages; the bytes equal Go's) and read with the
message classes; the objects inside go through :mod:`.convert`.
"""

from __future__ import annotations

from typing import Any

from kubeflux.sim.apiserver.protobuf.convert import from_json, to_json
from kubeflux.sim.apiserver.protobuf.schema import Schema

__all__ = ["MAGIC", "Codec", "ProtobufError"]

MAGIC = b"k8s\x00"
_UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"


class ProtobufError(ValueError):
    """A body that is not a protobuf object this server can read; the message says what is wrong."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes_field(tag: int, data: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(data)) + data


class Codec:
    """Objects (JSON-shaped dicts with ``apiVersion`` and ``kind``) to and from protobuf bodies and watch frames."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._unknown = schema.message_class(_UNKNOWN)
        self._envelopes: dict[tuple[str, str], bytes] = {}

    def knows(self, api_version: str, kind: str) -> bool:
        """Whether ``kind`` is a built-in kind (one a protobuf body or answer may carry)."""
        return self.schema.kind_message(api_version, kind) is not None

    def serves_group(self, api_version: str) -> bool:
        """Whether the group version is a built-in one (a CRD's is not: the real server takes no protobuf there)."""
        return api_version in self.schema.groups

    # -- bodies --------------------------------------------------------------------------------------------------
    def decode(self, data: bytes) -> dict[str, Any]:
        """The object of an enveloped protobuf body; raises :class:`ProtobufError` naming what is wrong."""
        if not data:
            raise ProtobufError("empty data")
        if not data.startswith(MAGIC):
            raise ProtobufError(
                "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
            )
        if len(data) == len(MAGIC):
            raise ProtobufError("empty body")
        from google.protobuf.message import DecodeError

        envelope = self._unknown()
        try:
            envelope.ParseFromString(data[len(MAGIC) :])
        except DecodeError as exc:
            raise ProtobufError(f"the protobuf envelope (runtime.Unknown) does not parse: {exc}") from exc
        api_version, kind = envelope.typeMeta.apiVersion, envelope.typeMeta.kind
        if not kind:
            raise ProtobufError("Object 'Kind' is missing in the protobuf envelope")
        if envelope.contentEncoding:
            raise ProtobufError(f"unsupported content encoding {envelope.contentEncoding!r} in the envelope")
        return self.decode_message(api_version, kind, envelope.raw)

    def decode_message(self, api_version: str, kind: str, raw: bytes) -> dict[str, Any]:
        """The object ``kind`` of the message bytes ``raw`` (no envelope)."""
        name = self.schema.kind_message(api_version, kind)
        if name is None:
            raise ProtobufError(f'no kind "{kind}" is registered for version "{api_version}" in protobuf')
        from google.protobuf.message import DecodeError

        plan = self.schema.plan(name)
        msg = plan.cls()
        try:
            msg.ParseFromString(raw)
        except DecodeError as exc:
            raise ProtobufError(f"the {kind} message does not parse: {exc}") from exc
        try:
            body = to_json(self.schema, plan, msg)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProtobufError(f"the {kind} message: {exc}") from exc
        obj: dict[str, Any] = {"kind": kind, "apiVersion": api_version}
        obj.update(body)
        return obj

    def encode(self, obj: dict[str, Any], strict: bool = False) -> bytes | None:
        """The enveloped body of ``obj``, or None when its kind is not a built-in one (a CRD's: answer JSON).

        Lenient unless ``strict``: a stored field whose value does not fit its Go type is left out (logged)."""
        message = self.message(obj, strict)
        if message is None:
            return None
        return self._envelope(obj["apiVersion"], obj["kind"]) + _bytes_field(0x12, message) + b"\x1a\x00\x22\x00"

    def message(self, obj: dict[str, Any], strict: bool = False) -> bytes | None:
        """The message bytes of ``obj`` without envelope, or None when its kind is not a built-in one."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            return None
        name = self.schema.kind_message(api_version, kind)
        if name is None:
            return None
        plan = self.schema.plan(name)
        msg = plan.cls()
        from_json(self.schema, plan, msg, obj, lenient=not strict)
        data: bytes = msg.SerializeToString()
        return data

    def _envelope(self, api_version: str, kind: str) -> bytes:
        """``magic + Unknown.typeMeta`` for a kind, built once."""
        key = (api_version, kind)
        head = self._envelopes.get(key)
        if head is None:
            type_meta = _bytes_field(0x0A, api_version.encode()) + _bytes_field(0x12, kind.encode())
            head = MAGIC + _bytes_field(0x0A, type_meta)
            self._envelopes[key] = head
        return head

    # -- watch ---------------------------------------------------------------------------------------------------
    @staticmethod
    def watch_frame(type_: str, enveloped: bytes) -> bytes:
        """One frame of a protobuf watch stream: the event ``type_`` of an enveloped object."""
        event = _bytes_field(0x0A, type_.encode()) + _bytes_field(0x12, _bytes_field(0x0A, enveloped))
        return len(event).to_bytes(4, "big") + event

    def read_frames(self, stream: bytes) -> list[tuple[str, dict[str, Any]]]:
        """The events of a protobuf watch stream (for tests and clients of this package)."""
        event_class = self.schema.message_class("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent")
        events: list[tuple[str, dict[str, Any]]] = []
        at = 0
        while at < len(stream):
            if at + 4 > len(stream):
                raise ProtobufError(f"a frame header is cut short at byte {at}")
            size = int.from_bytes(stream[at : at + 4], "big")
            at += 4
            if at + size > len(stream):
                raise ProtobufError(f"a frame of {size} bytes is cut short at byte {at}")
            event = event_class.FromString(stream[at : at + size])
            at += size
            events.append((event.type, self.decode(event.object.raw)))
        return events
