"""The Kubernetes protobuf schema as built by ``tools/kube/protobuf_gen.py``: message classes and field plans.

The build folder holds ``kubernetes.binpb`` (a ``FileDescriptorSet`` of ``k8s.io/api`` and ``k8s.io/apimachinery``,
compiled by protoc) and ``types.json`` (what the Go types add: JSON names, pointers, ``omitempty``, inlining, the
registered kinds). It is found at ``$KUBEFLUX_PROTO_DIR`` if set, else at ``build/kube/proto`` of the source
checkout this package runs from, else at ``proto/`` of ``$KUBEFLUX_KUBE_DIR`` (the control plane's build folder),
else at ``build/kube/proto`` under the working directory. Message classes come from
the ``protobuf`` runtime's descriptor pool; no Python is generated.

A :class:`FieldPlan` is one proto field of one message with everything the converters need to turn it into the JSON
its Go field marshals to and back; plans are built on first use of a message and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from kubeflux.sim.apiserver.kubebuild import find_kube_build

__all__ = [
    "BUILD_COMMAND",
    "FieldPlan",
    "MessagePlan",
    "ProtobufUnavailable",
    "Schema",
    "Shape",
    "find_build",
    "load_schema",
]

BUILD_COMMAND = "python tools/kube/protobuf_gen.py build/kube/proto"
"""How to build what this module loads (``make`` runs it)."""
SPECIAL_TYPES = frozenset({"Time", "MicroTime", "Quantity", "IntOrString", "RawExtension", "FieldsV1", "Duration"})
"""The Go types with their own JSON form that :mod:`.convert` knows; a build naming another is refused."""


class ProtobufUnavailable(Exception):
    """The build is missing or unusable; the message says why and how to build it."""


class Shape(Enum):
    """How a proto field holds its value."""

    SCALAR = "scalar"
    BYTES = "bytes"
    MESSAGE = "message"
    LIST = "list"
    MAP = "map"


@dataclass(slots=True, eq=False)
class FieldPlan:
    """One field of a message: its proto name and number, and its Go field's JSON behaviour."""

    name: str
    """The Python attribute (the proto field name)."""
    number: int
    json: str
    """The JSON key ("" for an inlined struct, whose keys are its parent's)."""
    shape: Shape
    pointer: bool = False
    nilable: bool = False
    """A Go pointer, slice, map or ``[]byte``: absent on the wire is nil (``null``, or omitted with omitempty)."""
    omitempty: bool = False
    omitzero: bool = False
    inline: bool = False
    message: str = ""
    """For message values (fields, list items, map values): the message's full name."""
    item_bytes: bool = False
    """For lists and maps: the items or values are ``bytes`` (base64 in JSON)."""
    zero: Any = None
    """The value a non-pointer scalar has when absent ("", 0, False)."""
    sub: MessagePlan | None = None
    """The plan of :attr:`message`, set on first use (:meth:`Schema.sub`)."""


@dataclass(slots=True, eq=False)
class MessagePlan:
    """One message: its class, its fields by number and JSON key, and the fields that have JSON when absent."""

    name: str
    cls: Callable[[], Any]
    special: str = ""
    list_wrapper: bool = False
    """A Go named slice (``ExtraValue``, ``Verbs``): JSON is the list of its one repeated field ``items``."""
    by_number: dict[int, FieldPlan] = field(default_factory=dict)
    by_json: dict[str, FieldPlan] = field(default_factory=dict)
    inlined: tuple[FieldPlan, ...] = ()
    absent: tuple[FieldPlan, ...] = ()


def find_build() -> Path:
    """The build folder (see the module docstring); it may not exist."""
    return find_kube_build("proto", "kubernetes.binpb", "KUBEFLUX_PROTO_DIR")


class Schema:
    """The loaded build: message classes and plans by full name, and the proto message of each registered kind."""

    def __init__(self, descriptors: bytes, types: dict[str, Any]) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        files = descriptor_pb2.FileDescriptorSet.FromString(descriptors)
        self._pool = descriptor_pool.DescriptorPool()
        for file in files.file:
            self._pool.Add(file)
        self._factory = message_factory.GetMessageClass
        self.kinds: dict[str, str] = types["kinds"]
        """``apiVersion/kind`` (``v1/Pod``, ``batch/v1/Job``) -> proto message full name."""
        self._go: dict[str, dict[str, Any]] = types["messages"]
        unknown = {m["special"] for m in self._go.values() if m.get("special")} - SPECIAL_TYPES
        if unknown:
            raise ProtobufUnavailable(f"the build names Go types this server cannot convert: {sorted(unknown)}")
        self._plans: dict[str, MessagePlan] = {}
        self.groups = frozenset(key.rsplit("/", 1)[0] for key in self.kinds)
        """The group versions (``v1``, ``batch/v1``) of built-in kinds."""

    def message_class(self, name: str) -> Any:
        """The message class of the full name ``name`` (``KeyError`` if the build has no such message)."""
        return self._factory(self._pool.FindMessageTypeByName(name))

    def kind_message(self, api_version: str, kind: str) -> str | None:
        return self.kinds.get(f"{api_version}/{kind}")

    def plan(self, name: str) -> MessagePlan:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._build(name)
            self._plans[name] = plan
        return plan

    def sub(self, f: FieldPlan) -> MessagePlan:
        """The plan of the messages field ``f`` holds."""
        plan = f.sub
        if plan is None:
            plan = f.sub = self.plan(f.message)
        return plan

    def _build(self, name: str) -> MessagePlan:
        descriptor = self._pool.FindMessageTypeByName(name)
        go = self._go.get(name, {})
        plan = MessagePlan(name, self._factory(descriptor), go.get("special", ""), bool(go.get("list")))
        go_fields: dict[str, dict[str, Any]] = go.get("fields") or {}
        for fd in descriptor.fields:
            info = go_fields.get(str(fd.number))
            if info is None and go_fields:
                continue  # not a field of the Go type: never on the wire from Go
            info = info or {"json": fd.name, "pointer": True, "nilable": True, "omitempty": True}
            plan_field = _field(fd, info)
            plan.by_number[fd.number] = plan_field
            if plan_field.inline:
                plan.inlined += (plan_field,)
            else:
                plan.by_json[plan_field.json] = plan_field
        plan.absent = tuple(f for f in plan.by_number.values() if _has_json_when_absent(f))
        return plan


def _field(fd: Any, info: dict[str, Any]) -> FieldPlan:
    bytes_type, message_type = fd.TYPE_BYTES, fd.TYPE_MESSAGE
    plan = FieldPlan(
        fd.name,
        fd.number,
        info.get("json", fd.name),
        Shape.SCALAR,
        pointer=bool(info.get("pointer")),
        nilable=bool(info.get("nilable")),
        omitempty=bool(info.get("omitempty")),
        omitzero=bool(info.get("omitzero")),
        inline=bool(info.get("inline")),
    )
    if fd.is_repeated and fd.type == message_type and fd.message_type.GetOptions().map_entry:
        value = fd.message_type.fields_by_name["value"]
        plan.shape = Shape.MAP
        plan.item_bytes = value.type == bytes_type
        plan.message = value.message_type.full_name if value.type == message_type else ""
    elif fd.is_repeated:
        plan.shape = Shape.LIST
        plan.item_bytes = fd.type == bytes_type
        plan.message = fd.message_type.full_name if fd.type == message_type else ""
    elif fd.type == message_type:
        plan.shape = Shape.MESSAGE
        plan.message = fd.message_type.full_name
    elif fd.type == bytes_type:
        plan.shape = Shape.BYTES
    else:
        plan.zero = fd.default_value
    return plan


def _has_json_when_absent(f: FieldPlan) -> bool:
    """Whether Go marshals this field when the wire does not carry it: a non-pointer struct always (omitempty never
    omits a struct), a nil or zero value unless omitempty/omitzero says to omit it."""
    if f.shape is Shape.MESSAGE and not f.pointer and not f.nilable:
        return not f.omitzero
    return not (f.omitempty or f.omitzero)


_loaded: Schema | ProtobufUnavailable | None = None


def load_schema(folder: Path | None = None) -> Schema:
    """The schema of ``folder`` (default: :func:`find_build`), loaded once; raises :class:`ProtobufUnavailable`."""
    global _loaded
    if folder is None and _loaded is not None:
        if isinstance(_loaded, ProtobufUnavailable):
            raise _loaded
        return _loaded
    where = folder or find_build()
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        result: Schema | ProtobufUnavailable = ProtobufUnavailable(
            "the protobuf runtime is not installed (pip install 'protobuf>=5.29')"
        )
    else:
        try:
            descriptors = (where / "kubernetes.binpb").read_bytes()
            types = orjson.loads((where / "types.json").read_bytes())
            result = Schema(descriptors, types)
        except ProtobufUnavailable as exc:
            result = exc
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
            result = ProtobufUnavailable(
                f"the Kubernetes protobuf schema is not built at {where} ({type(exc).__name__}); build it with "
                f"`{BUILD_COMMAND}` (make does), or point KUBEFLUX_PROTO_DIR at a build"
            )
    if folder is None:
        _loaded = result
    if isinstance(result, ProtobufUnavailable):
        raise result
    return result
