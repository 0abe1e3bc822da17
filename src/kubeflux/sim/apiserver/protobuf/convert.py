"""Protobuf messages to the JSON their Go objects marshal to, and JSON to messages, driven by :mod:`.schema` plans.

Decoding follows Go: a gogo-generated ``Marshal`` writes every non-pointer field (an empty string or a 0 is on the
wire) and a pointer, slice, map or ``[]byte`` only when it is set, and ``encoding/json`` then omits a zero value only
where the field says ``omitempty`` (a struct never) or ``omitzero``, and writes ``null`` for a nil one that says
neither. So ``parallelism: 0`` (a ``*int32``) stays and ``namespace: ""`` (a ``string,omitempty``) vanishes.
The types with their own JSON form map to scalars: Quantity -> string, Time -> RFC 3339 seconds (``null`` when
zero), MicroTime -> RFC 3339 microseconds, Duration -> Go's ``1h2m3s``, IntOrString -> int or string,
RawExtension and FieldsV1 -> the JSON they carry; ``bytes`` are base64.

Encoding is the inverse for the JSON the server stores: keys that no field has are dropped, as Go's decoder drops
them, ``null`` is absent. :func:`from_json` is lenient when asked (responses: a stored value of the wrong type
loses that field, not the object) and strict otherwise (raising :class:`ValueError` naming the field).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from kubeflux.sim.apiserver.protobuf.schema import FieldPlan, MessagePlan, Schema, Shape

__all__ = ["from_json", "to_json"]

log = logging.getLogger("kubeflux.apiserver")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# -- types with their own JSON form ------------------------------------------------------------------------------
def _moment(seconds: int, micros: int = 0) -> datetime:
    return _EPOCH + timedelta(seconds=seconds, microseconds=micros)


def _rfc3339(moment: datetime, micro: bool) -> str:
    text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
    if micro:
        return f"{text}{moment.second:02d}.{moment.microsecond:06d}Z"
    return f"{text}{moment.second:02d}Z"


def _time_json(msg: Any) -> Any:
    if not msg.HasField("seconds") and not msg.HasField("nanos"):
        return None  # Go's zero time: Time.Unmarshal of no bytes; MarshalJSON writes null
    return _rfc3339(_moment(msg.seconds), micro=False)


def _micro_time_json(msg: Any) -> Any:
    if not msg.HasField("seconds") and not msg.HasField("nanos"):
        return None
    return _rfc3339(_moment(msg.seconds, msg.nanos // 1000), micro=True)


def _parse_time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"a time must be an RFC 3339 string, got {value!r}")
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"a time must carry its offset: {value!r}")
    return moment


def _set_time(msg: Any, value: Any) -> None:
    delta = _parse_time(value) - _EPOCH
    msg.seconds = delta.days * 86400 + delta.seconds
    msg.nanos = 0


def _set_micro_time(msg: Any, value: Any) -> None:
    delta = _parse_time(value) - _EPOCH
    msg.seconds = delta.days * 86400 + delta.seconds
    msg.nanos = delta.microseconds * 1000


def _quantity_json(msg: Any) -> Any:
    return msg.string if msg.string else "0"


def _set_quantity(msg: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"a quantity must be a string or a number, got {value!r}")
    msg.string = value if isinstance(value, str) else str(value)


def _int_or_string_json(msg: Any) -> Any:
    return msg.strVal if msg.type == 1 else msg.intVal


def _set_int_or_string(msg: Any, value: Any) -> None:
    if isinstance(value, str):
        msg.type, msg.strVal = 1, value
    elif isinstance(value, int) and not isinstance(value, bool):
        msg.type, msg.intVal = 0, value
    else:
        raise ValueError(f"must be an integer or a string, got {value!r}")


def _embedded(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"embedded JSON does not parse: {exc}") from exc


def _raw_json(msg: Any) -> Any:
    return _embedded(msg.raw) if msg.HasField("raw") else None


def _set_raw(msg: Any, value: Any) -> None:
    msg.raw = orjson.dumps(value)


def _fields_json(msg: Any) -> Any:
    return _embedded(msg.Raw) if msg.HasField("Raw") else None


def _set_fields(msg: Any, value: Any) -> None:
    msg.Raw = orjson.dumps(value)


_UNITS = (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", 10**6), ("us", 10**3), ("µs", 10**3))
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def _duration_json(msg: Any) -> Any:
    """Go's ``time.Duration.String`` of the nanoseconds."""
    nanos: int = msg.duration
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 10**9:
        for unit, size in (("ms", 10**6), ("µs", 10**3), ("ns", 1)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, rest = divmod(nanos, 3600 * 10**9)
    minutes, rest = divmod(rest, 60 * 10**9)
    text = _decimal(rest, 10**9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    return f"{sign}{minutes}m{text}" if minutes else sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")


def _set_duration(msg: Any, value: Any) -> None:
    if not isinstance(value, str):
        raise ValueError(f"a duration must be a string like '1h2m', got {value!r}")
    text, sign = (value[1:], -1) if value.startswith("-") else (value.lstrip("+"), 1)
    if text == "0":
        msg.duration = 0
        return
    total, at = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != at:
            break
        at = match.end()
        size = dict(_UNITS).get(match.group(2), 1)
        total += float(match.group(1)) * size
    if at != len(text) or not text:
        raise ValueError(f"invalid duration {value!r}")
    msg.duration = sign * round(total)


_SPECIAL: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], None]]] = {
    "Time": (_time_json, _set_time),
    "MicroTime": (_micro_time_json, _set_micro_time),
    "Quantity": (_quantity_json, _set_quantity),
    "IntOrString": (_int_or_string_json, _set_int_or_string),
    "RawExtension": (_raw_json, _set_raw),
    "FieldsV1": (_fields_json, _set_fields),
    "Duration": (_duration_json, _set_duration),
}


# -- wire -> JSON ------------------------------------------------------------------------------------------------
_SCALAR = Shape.SCALAR


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def to_json(schema: Schema, plan: MessagePlan, msg: Any) -> Any:
    """The JSON value Go marshals the object ``msg`` (a message of ``plan``) to."""
    if plan.special:
        return _SPECIAL[plan.special][0](msg)
    if plan.list_wrapper:  # present means non-nil (a map value decodes to an empty, non-nil slice)
        return list(msg.items)
    out: dict[str, Any] = {}
    fields = plan.by_number
    for fd, value in msg.ListFields():
        f = fields.get(fd.number)
        if f is None:
            continue
        if f.shape is _SCALAR:  # most fields: inlined here
            if value or f.pointer or not (f.omitempty or f.omitzero):
                out[f.json] = value
        else:
            _put(schema, f, value, out)
    for f in plan.absent:  # present, these always have their key (omitempty ones are not in absent)
        if (f.json not in out) if not f.inline else not msg.HasField(f.name):
            _put_absent(schema, f, out)
    return out


def _put(schema: Schema, f: FieldPlan, value: Any, out: dict[str, Any]) -> None:
    shape = f.shape
    if shape is Shape.MESSAGE:
        _put_message(schema, f, value, out)
    elif shape is Shape.LIST:
        if f.message:
            plan = schema.sub(f)
            out[f.json] = [to_json(schema, plan, item) for item in value]
        else:
            out[f.json] = [_b64(item) for item in value] if f.item_bytes else list(value)
    elif shape is Shape.MAP:
        if f.message:
            plan = schema.sub(f)
            out[f.json] = {key: to_json(schema, plan, item) for key, item in value.items()}
        elif f.item_bytes:
            out[f.json] = {key: _b64(item) for key, item in value.items()}
        else:
            out[f.json] = dict(value)
    elif value or not (f.omitempty or f.omitzero):  # bytes: present means non-nil
        out[f.json] = _b64(value)


def _put_message(schema: Schema, f: FieldPlan, value: Any, out: dict[str, Any]) -> None:
    converted = to_json(schema, schema.sub(f), value)
    if f.inline:
        if isinstance(converted, dict):
            out.update(converted)
        return
    if (converted is None and f.omitzero) or (converted == [] and f.omitempty and not f.pointer):
        return  # a zero Time under omitzero; an empty named slice under omitempty
    out[f.json] = converted


def _put_absent(schema: Schema, f: FieldPlan, out: dict[str, Any]) -> None:
    if f.inline:
        if not f.pointer:
            _put_message(schema, f, schema.sub(f).cls(), out)
    elif f.pointer or f.nilable:
        out[f.json] = None
    elif f.shape is Shape.MESSAGE:
        plan = schema.sub(f)
        _put_message(schema, f, plan.cls(), out)
    else:
        out[f.json] = f.zero


# -- JSON -> wire ------------------------------------------------------------------------------------------------
def from_json(schema: Schema, plan: MessagePlan, msg: Any, value: Any, lenient: bool = False, at: str = "") -> None:
    """Fill ``msg`` (a message of ``plan``) from the JSON ``value``.

    Strict (the default) raises :class:`ValueError` naming the first field whose value does not fit; lenient
    skips such a field and logs it at debug level."""
    if plan.special:
        _SPECIAL[plan.special][1](msg, value)
        return
    if plan.list_wrapper:
        _expect(value, list, at)
        msg.items.extend(value)
        return
    _expect(value, dict, at)
    by_json = plan.by_json
    for key, item in value.items():
        f = by_json.get(key)
        if f is None or item is None:
            continue
        try:
            if f.shape is _SCALAR:  # most fields: inlined here
                if item.__class__ is bool and f.zero.__class__ is not bool:
                    raise TypeError(f"must be a {type(f.zero).__name__}, got {item!r}")
                setattr(msg, f.name, item)
            else:
                _set(schema, f, msg, item, lenient, f"{at}.{key}" if at else key)
        except (TypeError, ValueError, AttributeError, binascii.Error) as exc:
            where = f"{at}.{key}" if at else key
            if not lenient:
                raise ValueError(str(exc) if str(exc).startswith(where) else f"{where}: {exc}") from exc
            log.debug("protobuf: %s.%s dropped: %s", plan.name, key, exc)
    for f in plan.inlined:
        from_json(schema, schema.sub(f), getattr(msg, f.name), value, lenient, at)


def _expect(value: Any, kind: type[list[Any]] | type[dict[str, Any]], at: str) -> None:
    """Raise :class:`ValueError` unless ``value`` is a JSON array (``list``) or object (``dict``), as ``kind`` says."""
    if not isinstance(value, kind):
        what = "a list" if kind is list else "an object"
        raise ValueError(f"{at or 'the value'}: must be {what}, got {type(value).__name__}")


def _set(schema: Schema, f: FieldPlan, msg: Any, value: Any, lenient: bool, at: str) -> None:
    shape = f.shape
    if shape is Shape.MESSAGE:
        sub = getattr(msg, f.name)
        sub.SetInParent()
        from_json(schema, schema.sub(f), sub, value, lenient, at)
    elif shape is Shape.LIST:
        _expect(value, list, at)
        container = getattr(msg, f.name)
        if f.message:
            plan = schema.sub(f)
            for index, item in enumerate(value):
                from_json(schema, plan, container.add(), item if item is not None else {}, lenient, f"{at}[{index}]")
        else:
            container.extend([base64.b64decode(item, validate=True) for item in value] if f.item_bytes else value)
    elif shape is Shape.MAP:
        _expect(value, dict, at)
        container = getattr(msg, f.name)
        if f.message:
            plan = schema.sub(f)
            for key, item in value.items():
                from_json(schema, plan, container[key], item, lenient, f"{at}.{key}")
        else:
            for key, item in value.items():
                container[key] = base64.b64decode(item, validate=True) if f.item_bytes else item
    else:
        if not isinstance(value, str):
            raise TypeError(f"{at}: bytes must be a base64 string, got {type(value).__name__}")
        setattr(msg, f.name, base64.b64decode(value, validate=True))
