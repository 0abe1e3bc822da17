"""Strategies of the resources that hold data rather than workloads: ConfigMaps, Secrets and events.k8s.io Events,
with the checks of k8s.io/kubernetes' ``pkg/apis/core/validation`` and ``pkg/apis/events`` that clients meet."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from kubeflux.apiobjects.quantity import QuantityError, parse_quantity
from kubeflux.apiobjects.rules import NAME_PART_RULE
from kubeflux.sim.apiserver.errors import Cause, not_supported
from kubeflux.sim.apiserver.registry import Object, Strategy

__all__ = [
    "ConfigMapStrategy",
    "SecretStrategy",
    "config_key_causes",
    "events_v1_causes",
    "events_v1_update_causes",
    "json_type",
    "quantity_error",
]

_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def config_key_causes(data: Any, path: str) -> list[Cause]:
    """Keys of a ConfigMap's or Secret's data: ``[-._a-zA-Z0-9]+``, at most 253 characters, not ``.`` or ``..``."""
    if not isinstance(data, dict):
        return []
    causes = []
    for key in data:
        if not isinstance(key, str) or len(key) > 253 or not _CONFIG_KEY.match(key) or key in (".", ".."):
            message = (
                f"Invalid value: \"{key}\": a valid config key must consist of alphanumeric characters, '-', '_' or "
                "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
            )
            causes.append(Cause(f"{path}[{key}]", message))
    return causes


def _string_map_error(value: Any, kind: str, field: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, dict):
        return (
            f"json: cannot unmarshal {json_type(value)} into Go struct field {kind}.{field} of type map[string]string"
        )
    for item in value.values():
        if item is not None and not isinstance(item, str):  # (a null value decodes to "", as Go's does)
            return f"json: cannot unmarshal {json_type(item)} into Go struct field {kind}.{field} of type string"
    return ""


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "null"


def _immutable_causes(new: Object, old: Object, fields: tuple[str, ...]) -> list[Cause]:
    if not old.get("immutable"):
        return []
    causes = []
    for field in fields:
        if new.get(field) != old.get(field):
            causes.append(Cause(field, "Forbidden: field is immutable when `immutable` is set", "FieldValueForbidden"))
    if not new.get("immutable"):
        causes.append(
            Cause("immutable", "Forbidden: field is immutable when `immutable` is set", "FieldValueForbidden")
        )
    return causes


class ConfigMapStrategy(Strategy):
    def decode_error(self, obj: Object) -> str:
        return _string_map_error(obj.get("data"), "ConfigMap", "data")

    def canonicalize(self, obj: Object) -> None:
        data = obj.get("data")
        if isinstance(data, dict) and None in data.values():  # Go decodes a null map value as the zero value
            obj["data"] = {key: "" if value is None else value for key, value in data.items()}

    def validate(self, obj: Object) -> list[Cause]:
        causes = config_key_causes(obj.get("data"), "data") + config_key_causes(obj.get("binaryData"), "binaryData")
        data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
        for key in set(data) & set(binary) if isinstance(binary, dict) else ():
            causes.append(Cause(f"data[{key}]", f'Invalid value: "{key}": duplicate of key present in binaryData'))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        return _immutable_causes(new, old, ("data", "binaryData")) + self.validate(new)


_SECRET_REQUIRED = {
    "kubernetes.io/basic-auth": (),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
}


class SecretStrategy(Strategy):
    """``stringData`` is written into ``data`` (base64) on every write and never stored; ``type`` defaults to
    ``Opaque`` and may not change."""

    def decode_error(self, obj: Object) -> str:
        problem = _string_map_error(obj.get("data"), "Secret", "data") or _string_map_error(
            obj.get("stringData"), "Secret", "stringData"
        )
        if problem:
            return problem
        for value in (obj.get("data") or {}).values():
            if value is None:  # decodes to no bytes
                continue
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                position = next((i for i, c in enumerate(value) if not (c.isalnum() or c in "+/=")), len(value))
                return f"illegal base64 data at input byte {position}"
        return ""

    @staticmethod
    def _fold(obj: Object) -> None:
        data = obj.get("data")
        if isinstance(data, dict) and None in data.values():  # no bytes: stored (protobuf) and shown as ""
            obj["data"] = {key: "" if value is None else value for key, value in data.items()}
        strings = obj.pop("stringData", None)
        if isinstance(strings, dict) and strings:
            data = dict(obj.get("data") or {})
            data.update(
                {k: base64.b64encode(("" if v is None else str(v)).encode()).decode() for k, v in strings.items()}
            )
            obj["data"] = data
        obj.setdefault("type", "Opaque")

    def prepare_create(self, obj: Object, now: str) -> None:
        self._fold(obj)

    def validate(self, obj: Object) -> list[Cause]:
        self._fold(obj)
        data = obj.get("data") or {}
        causes = config_key_causes(data, "data")
        secret_type = obj.get("type")
        if secret_type == "kubernetes.io/basic-auth" and not ({"username", "password"} & set(data)):
            causes += [Cause("data[username]", "Required value", "FieldValueRequired")]
            causes += [Cause("data[password]", "Required value", "FieldValueRequired")]
        for key in _SECRET_REQUIRED.get(str(secret_type), ()):
            if key not in data:
                causes.append(Cause(f"data[{key}]", "Required value", "FieldValueRequired"))
        return causes

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        self._fold(new)
        causes = []
        if new.get("type") != old.get("type"):
            causes.append(Cause("type", f'Invalid value: "{new.get("type")}": field is immutable'))
        return causes + _immutable_causes(new, old, ("data",)) + self.validate(new)


def quantity_error(resources: Any) -> str:
    """The decode error of a map of quantities (``requests``, ``capacity`` ...); ``""`` when all parse."""
    if not isinstance(resources, dict):
        return ""
    for value in resources.values():
        try:
            parse_quantity(value)
        except QuantityError:
            return "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    return ""


_NAME_PART = NAME_PART_RULE


def events_v1_causes(obj: Object) -> list[Cause]:
    """What an events.k8s.io/v1 Event must carry (the stored core form): eventTime, reportingController (a
    qualified name), reportingInstance, action, reason, and a type of Normal or Warning."""
    causes = []
    if not obj.get("eventTime"):
        causes.append(Cause("eventTime", "Required value", "FieldValueRequired"))
    controller = obj.get("reportingComponent")
    if not controller:  # required, and (as the real server also says) not a qualified name
        causes.append(Cause("reportingController", "Required value", "FieldValueRequired"))
        causes.append(Cause("reportingController", 'Invalid value: "": name part must be non-empty'))
        causes.append(Cause("reportingController", f'Invalid value: "": {_NAME_PART}'))
    elif not isinstance(controller, str) or not _QUALIFIED.match(controller.rsplit("/", 1)[-1]):
        causes.append(Cause("reportingController", f'Invalid value: "{controller}": must be a qualified name'))
    for field in ("reportingInstance", "action", "reason"):
        if not obj.get(field):
            causes.append(Cause(field, "Required value", "FieldValueRequired"))
    if obj.get("type") not in ("Normal", "Warning"):
        causes.append(not_supported("type", obj.get("type"), ("Normal", "Warning")))
    return causes


_V1_IMMUTABLE = (  # stored name → what the real server names in the cause (its validation runs on core Events)
    ("involvedObject", "involvedObject"),
    ("reason", "reason"),
    ("message", "message"),
    ("source", "source"),
    ("firstTimestamp", "firstTimestamp"),
    ("eventTime", "eventTime"),
    ("action", "action"),
    ("related", "related"),
    ("reportingComponent", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("type", "type"),
)


def events_v1_update_causes(new: Object, old: Object) -> list[Cause]:
    """An events.k8s.io/v1 update may change only the series, count and last timestamps."""
    return [
        Cause(shown, f"Invalid value: {_go_value(new.get(field))}: field is immutable")
        for field, shown in _V1_IMMUTABLE
        if new.get(field) != old.get(field)
    ]


def _go_value(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)
