"""ObjectMeta and ListMeta: the checks every object's metadata gets, resource versions and continue tokens."""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable
from typing import Any

import orjson

from kubeflux.sim.apiserver import errors
from kubeflux.sim.apiserver.errors import Cause
from kubeflux.sim.apiserver.registry import ResourceType
from kubeflux.sim.apiserver.selectors import valid_label_key, valid_label_value

__all__ = [
    "MAX_DEPTH",
    "check_type",
    "clone",
    "decode_continue",
    "encode_continue",
    "metadata_causes",
    "parse_resource_version",
    "too_deep",
    "uid_from_bits",
]

Object = dict[str, Any]


MAX_DEPTH = 100
"""Nesting deeper than this is refused: Kubernetes objects are some twenty levels deep, and the JSON encoder stops
at 255 (an object stored deeper could never be read back, nor any list holding it)."""


def _encoder_depth() -> int:
    """How many nested mappings and lists orjson encodes (254 in orjson 3), found once by trying."""
    value: Any = []
    depth = 1
    while depth < 10_000:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            return depth - 1
        value, depth = [value], depth + 1
    return depth


_ENCODER_DEPTH = _encoder_depth()


class _DepthProbe:
    """Lists nested ``levels`` deep, built once (building them per call cost more than the walk it replaces),
    whose innermost slot takes the value to probe; a lock keeps two threads from sharing the slot."""

    def __init__(self, levels: int) -> None:
        self.inner: list[Any] = [None]
        self.outer = self.inner
        for _ in range(levels - 1):
            self.outer = [self.outer]
        self.lock = threading.Lock()

    def encodes(self, value: Any) -> bool | None:
        """Whether the encoder takes ``value`` at the bottom of the lists: ``None`` when it refuses it for another
        reason than its depth."""
        with self.lock:
            self.inner[0] = value
            try:
                orjson.dumps(self.outer)
            except orjson.JSONEncodeError as exc:
                return False if "Recursion limit" in str(exc) else None
            finally:
                self.inner[0] = None
        return True


_PROBES: dict[int, _DepthProbe] = {}


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests mappings and lists more than ``limit`` levels.

    Asked of every request body, so answered by the JSON encoder (in C; a walk in Python was a third of the
    server's cost of a pod create): ``value`` at the bottom of enough lists to make ``limit`` levels exactly the
    deepest the encoder takes is refused by it if and only if ``value`` is deeper. A value the encoder cannot
    encode for another reason (YAML's non-string keys, binary) is walked instead.
    """
    if 0 <= limit < _ENCODER_DEPTH:
        probe = _PROBES.get(limit)
        if probe is None:
            probe = _PROBES[limit] = _DepthProbe(_ENCODER_DEPTH - limit)
        encodes = probe.encodes(value)
        if encodes is not None:
            return not encodes
    return _walk_too_deep(value, limit)


def _walk_too_deep(value: Any, limit: int) -> bool:
    """:func:`too_deep` by walking ``value`` (iterative: no recursion limit)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def clone(obj: Object) -> Object:
    """A deep copy (through JSON: faster than ``copy.deepcopy`` for these plain trees)."""
    result: Object = orjson.loads(orjson.dumps(obj))
    return result


def check_type(resource: ResourceType, obj: Any, trusted: bool = False) -> Object:
    """``obj`` as a stored object of ``resource``: a mapping of its kind and version with a metadata mapping;
    400 for another kind or version, 422 for metadata that is not a mapping. A ``trusted`` body (built by the
    server's own components from stored objects) is not walked for its depth: that walk is most of the cost of an
    in-process write."""
    if not isinstance(obj, dict):
        raise errors.bad_request(f"the body must be a JSON object (a {resource.kind}), got {type(obj).__name__}")
    if not trusted and too_deep(obj):
        raise errors.bad_request(f"the object is nested more than {MAX_DEPTH} levels deep")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version not in (None, "", resource.api_version):
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({resource.api_version})"
        )
    if kind not in (None, "", resource.kind):
        raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})")
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = meta = {}
    if not isinstance(meta, dict):
        raise errors.invalid(resource.kind, "", [Cause("metadata", "Invalid value: must be an object")])
    problem = "" if trusted else resource.strategy.decode_error(obj)
    if problem:
        raise errors.bad_request(
            f'{resource.kind} in version "{resource.version}" cannot be handled as a {resource.kind}: {problem}'
        )
    stored = resource.from_view(obj) if resource.from_view else obj
    stored.setdefault("metadata", meta)
    return stored


def uid_from_bits(bits: int) -> str:
    """``str(uuid.UUID(int=bits, version=4))`` (the same uid from the same random bits) without building the
    UUID object, a tenth of a pod create's cost in the store."""
    bits = (bits & ~(0xC000 << 48) | 0x8000 << 48) & ~(0xF000 << 64) | 4 << 76
    text = f"{bits:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def metadata_causes(resource: ResourceType, meta: Object, old: Object | None = None) -> list[Cause]:
    """What the real server checks of any ObjectMeta: the name (per the strategy), string maps, finalizers, owners.

    ``old`` is the stored metadata an update replaces (it passed these checks, and an update keeps its name): only
    what changed is checked again, so a write that touches one annotation does not re-check every label."""
    causes = [] if old is not None else resource.strategy.name_causes(meta.get("name", ""), "metadata.name")
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is None:
            continue
        before = old.get(field) if old is not None else None
        if value is before:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            causes.append(Cause(f"metadata.{field}", "Invalid value: must be a map of strings to strings"))
            continue
        kept = before if isinstance(before, dict) else {}
        for key, text in value.items():
            if key in kept and kept[key] == text:
                continue
            if not valid_label_key(key):
                message = f"Invalid value: {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.'"
                causes.append(Cause(f"metadata.{field}", message))
            elif field == "labels" and not valid_label_value(text):
                message = f"Invalid value: {text!r}: a valid label must be at most 63 alphanumerics, '-', '_' or '.'"
                causes.append(Cause("metadata.labels", message))
    for field in ("finalizers",):
        value = meta.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            causes.append(Cause(f"metadata.{field}", "Invalid value: must be a list of strings"))
    refs = meta.get("ownerReferences")
    if refs is not None and (old is None or refs != old.get("ownerReferences")):
        if not isinstance(refs, list):
            causes.append(Cause("metadata.ownerReferences", "Invalid value: must be a list"))
        else:
            for index, ref in enumerate(refs):
                for part in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(ref, dict) or not isinstance(ref.get(part), str) or not ref.get(part):
                        path = f"metadata.ownerReferences[{index}].{part}"
                        causes.append(Cause(path, "Required value", "FieldValueRequired"))
    return causes


_RESOURCE_VERSION = re.compile(r"[0-9]{1,20}")


def parse_resource_version(text: str) -> int:
    """A resourceVersion a client sent: ASCII digits, at most 20 (a uint64); anything else is a 400."""
    if not _RESOURCE_VERSION.fullmatch(text):
        shown = text if len(text) <= 40 else f"{text[:40]}..."
        raise errors.bad_request(f"invalid resource version {shown!r}: must be a non-negative integer")
    return int(text)


def encode_continue(key: str, rv: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"v": "kubeflux/1", "rv": rv, "start": key})).decode()


def decode_continue(token: str) -> str:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        start = data["start"]
        if not isinstance(start, str):
            raise TypeError
        return start
    except Exception as exc:
        raise errors.bad_request(f"invalid continue token {token!r}") from exc
