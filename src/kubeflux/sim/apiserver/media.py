"""Content negotiation: which form an answer takes (JSON or protobuf, the object or its metadata only) and the
request bodies in protobuf.

Go clients at their default flags send ``Accept: application/vnd.kubernetes.protobuf,application/json``: they prefer
protobuf and decode whatever the answer's ``Content-Type`` says. The metadata client (the garbage collector's and
the quota controller's informers) asks for ``application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;
g=meta.k8s.io;v=v1`` (``...List`` for a list), then the same in JSON, then plain JSON, and must get a
``meta.k8s.io/v1`` ``PartialObjectMetadata``: a full object in protobuf is an error to it. As the real server does
(``k8s.io/apiserver/pkg/endpoints/handlers/negotiation``), the first acceptable entry in the client's order (highest
``q`` first) wins: protobuf of a built-in kind, or of a PartialObjectMetadata of any kind; JSON otherwise. A CRD's
objects (``scheduling.x-k8s.io`` PodGroups) are never protobuf, and a protobuf body for a CRD is 415 as on a real
server. Tables (``as=Table``) stay with :mod:`.tables`.

The JSON path costs one substring test per request: an ``Accept`` that mentions neither protobuf nor
PartialObjectMetadata is JSON without parsing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.protobuf import BUILD_COMMAND, Codec, ProtobufError, ProtobufUnavailable, codec
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.watch import WatchEvent

__all__ = ["JSON_OUTPUT", "PROTOBUF", "Output", "Renderer", "negotiate"]

log = logging.getLogger("kubeflux.apiserver")

PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON = "application/json"
META_VERSION = "meta.k8s.io/v1"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"


@dataclass(frozen=True, slots=True)
class Output:
    """The form of an answer."""

    protobuf: bool = False
    metadata: str = ""
    """``PartialObjectMetadata`` or ``PartialObjectMetadataList`` when the client asked for metadata only."""

    @property
    def content_type(self) -> str:
        return PROTOBUF if self.protobuf else JSON

    @property
    def stream_content_type(self) -> str:
        return PROTOBUF + ";stream=watch" if self.protobuf else JSON


JSON_OUTPUT = Output()


def _entries(accept: str) -> list[tuple[str, dict[str, str]]]:
    """The media ranges of ``accept`` with their parameters, highest ``q`` first (stable)."""
    ranked: list[tuple[float, int, str, dict[str, str]]] = []
    for index, entry in enumerate(accept.split(",")):
        media, *rest = entry.split(";")
        params: dict[str, str] = {}
        for param in rest:
            key, _, value = param.partition("=")
            params[key.strip().lower()] = value.strip()
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 0.0
        if q > 0:
            ranked.append((-q, index, media.strip().lower(), params))
    ranked.sort()
    return [(media, params) for _, _, media, params in ranked]


def negotiate(accept: str, builtin: bool, protobuf_ready: bool = True) -> Output:
    """The form of the answer to a client sending ``accept`` about a resource whose kind is ``builtin`` or not.

    Without the protobuf build (``protobuf_ready`` False), protobuf entries are skipped: JSON is acceptable to
    every client that asks for protobuf."""
    if "protobuf" not in accept and PARTIAL not in accept:
        return JSON_OUTPUT
    for media, params in _entries(accept):
        as_ = params.get("as", "")
        if as_ and (as_ not in (PARTIAL, PARTIAL_LIST) or params.get("g") != "meta.k8s.io" or params.get("v") != "v1"):
            continue  # a Table (tables.py), or a transform this server does not make
        if media == PROTOBUF:
            if protobuf_ready and (builtin or as_):
                return Output(True, as_)
        elif media in (JSON, "application/*", "*/*"):
            return Output(False, as_)
    return JSON_OUTPUT


def partial(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a ``meta.k8s.io/v1`` ``PartialObjectMetadata``."""
    return {"kind": PARTIAL, "apiVersion": META_VERSION, "metadata": obj.get("metadata", {})}


def partial_list(listed: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": META_VERSION,
        "metadata": listed.get("metadata", {}),
        "items": [partial(item) for item in listed.get("items", [])],
    }


class Renderer:
    """Answers and request bodies in the negotiated form; loads the protobuf codec (``load``) on first need."""

    def __init__(self, load: Callable[[], Codec] = codec) -> None:
        self._load = load
        self._codec: Codec | None = None
        self._unavailable = ""

    @property
    def codec(self) -> Codec | None:
        """The codec, or None without the build (the reason is logged once)."""
        if self._codec is None and not self._unavailable:
            try:
                self._codec = self._load()
            except ProtobufUnavailable as exc:
                self._unavailable = str(exc)
                log.warning("protobuf is not served: %s", exc)
        return self._codec

    def output(self, accept: str, api_version: str) -> Output:
        """:func:`negotiate` for a resource of ``api_version``."""
        if "protobuf" not in accept:
            return negotiate(accept, False, False)
        codec = self.codec
        return negotiate(accept, codec is not None and codec.serves_group(api_version), codec is not None)

    def error_output(self, accept: str) -> Output:
        """The form of a ``Status`` answer (a built-in kind everywhere)."""
        return self.output(accept, "v1") if "protobuf" in accept else JSON_OUTPUT

    def shape(self, body: Any, output: Output, is_list: bool) -> Any:
        """``body`` as the client asked: its metadata only, or as it is; 406 when the asked kind does not fit."""
        if not output.metadata or not isinstance(body, dict) or body.get("kind") == "Status":
            return body
        if (output.metadata == PARTIAL_LIST) != is_list:
            what = "a list" if is_list else "not a list"
            raise errors.not_acceptable(f"you requested {output.metadata}, but the requested object is {what}")
        return partial_list(body) if is_list else partial(body)

    def encode(self, body: Any, output: Output) -> tuple[bytes, str]:
        """The bytes and content type of ``body``: protobuf when asked and its kind is built-in, else JSON."""
        if output.protobuf and isinstance(body, dict) and self._codec is not None:
            data = self._codec.encode(body)
            if data is not None:
                return data, PROTOBUF
        return (body if isinstance(body, bytes) else orjson.dumps(body)), JSON

    def event(self, type_: str, obj: dict[str, Any], output: Output) -> bytes:
        """One watch event of ``obj`` (already shaped) in the stream's form: a frame or a JSON line."""
        if output.protobuf and self._codec is not None:
            data = self._codec.encode(obj)
            if data is not None:
                return self._codec.watch_frame(type_, data)
        return orjson.dumps({"type": type_, "object": obj}) + b"\n"

    def watch_event(self, resource: ResourceType, type_: str, event: WatchEvent, output: Output) -> bytes:
        """A stored watch event in ``output``'s form, encoded once per form and shared by every watcher."""
        if output is JSON_OUTPUT:
            return event.line(resource, type_)
        return event.encoded(
            resource, type_, output, lambda obj: self.event(type_, self.shape(obj, output, False), output)
        )

    def bookmark(self, resource: ResourceType, rv: int, output: Output, initial_end: bool = False) -> bytes:
        """A BOOKMARK event at ``rv``; ``initial_end``: the one that ends a streaming list's initial events."""
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}
        if output is JSON_OUTPUT:
            return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"
        return self.event("BOOKMARK", self.shape(obj, output, False), output)

    def decode(self, data: bytes, api_version: str) -> Any:
        """A protobuf request body for a resource of ``api_version``; 415 without the build or for a CRD, 400 for a
        body that does not decode."""
        codec = self.codec
        if codec is None:
            raise errors.unsupported_media_type(
                PROTOBUF,
                f"{JSON}, application/yaml (protobuf is not built on this server: {self._unavailable} "
                f"Build it with `{BUILD_COMMAND}`)",
            )
        if not codec.serves_group(api_version):
            raise errors.unsupported_media_type(PROTOBUF, f"{JSON}, application/yaml")
        try:
            return codec.decode(data)
        except ProtobufError as exc:
            raise errors.bad_request(f"the protobuf body could not be decoded: {exc}") from exc
