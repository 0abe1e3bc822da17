"""What the real API server refuses in a field of any kind of object, in its words: one source for ``simulate``'s
readers (:mod:`kubeflux.apiobjects.manifests`, :mod:`kubeflux.apiobjects.batchjob`) and ``cluster serve``'s
strategies, so that the same object gets the same verdict from both.

* **Names** (``apimachinery/pkg/util/validation``): an object's name is a DNS-1123 subdomain (at most 253
  characters: ``a-z``, ``0-9``, ``-`` and ``.``, starting and ending with an alphanumeric; pods, nodes, Jobs,
  PodGroups ... and a pod's ``spec.nodeName``), a namespace's and a container's a DNS-1123 label (at most 63, no
  ``.``). :func:`dns_subdomain_problem` and :func:`dns_label_problem` give the rule broken, or None.
* **Go integers**: a field of Go type ``int32`` (a pod's ``spec.priority``, a Job's counts) or ``int64``
  (``activeDeadlineSeconds``) holding a string, a fraction or a number beyond the type is a decoding error (a 400
  ``BadRequest``, the whole object refused): :func:`int_decode_error` writes it as the server does, ``json: cannot
  unmarshal number 2147483648 into Go struct field PodSpec.spec.priority of type int32`` (a number of more than
  :data:`~kubeflux.scheduler.units.ECHO_LIMIT` digits cut).
* **Label keys and values** (``apimachinery/pkg/api/validate/content``): :func:`label_key_problems` and
  :func:`label_value_problems` give every rule broken, in the server's words, as a label selector's validation
  reports them (``name part must be non-empty``, then the regular expression).
* **Volume sources**: a pod's volume and a PersistentVolume have exactly one source; :func:`extra_source` names the
  second one present in the order the server checks them (:data:`POD_VOLUME_SOURCES`, :data:`PV_SOURCES`), which
  it refuses with ``Forbidden: may not specify more than 1 volume type``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from kubeflux.scheduler.units import clip

__all__ = [
    "DNS_LABEL_RULE",
    "DNS_SUBDOMAIN_EXAMPLES",
    "DNS_SUBDOMAIN_RULE",
    "MAX_INT32",
    "MAX_INT64",
    "NAME_PART_RULE",
    "POD_VOLUME_SOURCES",
    "PV_SOURCES",
    "TOO_MANY_SOURCES",
    "dns_label_problem",
    "dns_subdomain_problem",
    "extra_source",
    "go_value",
    "int_decode_error",
    "json_kind",
    "label_key_problems",
    "label_value_problems",
    "qualified_name_problems",
    "unmarshal_error",
]

MAX_INT32: Final = 2**31 - 1
MAX_INT64: Final = 2**63 - 1
_LIMITS: Final = {"int32": MAX_INT32, "int64": MAX_INT64}

DNS_LABEL_RULE: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character"
)
DNS_SUBDOMAIN_RULE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character"
)
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def dns_label_problem(name: str) -> str | None:
    """:data:`DNS_LABEL_RULE` when ``name`` is no DNS-1123 label (or longer than 63 characters), else None."""
    return None if len(name) <= 63 and _DNS_LABEL.match(name) else DNS_LABEL_RULE


def dns_subdomain_problem(name: str) -> str | None:
    """:data:`DNS_SUBDOMAIN_RULE` when ``name`` is no DNS-1123 subdomain (or longer than 253 characters), else
    None."""
    return None if len(name) <= 253 and _DNS_SUBDOMAIN.match(name) else DNS_SUBDOMAIN_RULE


NAME_PART_RULE: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
"""The rule of a qualified name's name part (a label key's, a condition type's), in the server's words."""


def _json_number(value: int | float) -> str:  # int too: compiled, a float parameter refuses an int past any float
    """A JSON number as Go's decoder echoes it (``1.5``, ``3000000000``), cut when long."""
    text = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return clip(text)


def json_kind(value: Any) -> str:
    """What Go's decoder calls a JSON value in its errors: ``number 1.5``, ``string``, ``bool``, ``object`` ..."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {_json_number(value)}"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string"


def int_decode_error(go_struct: str, path: str, value: Any, go_type: str = "int32") -> str | None:
    """The decoding error of ``value`` in the field at ``path`` (``spec.priority``) of the Go struct ``go_struct``
    (``PodSpec``) of Go type ``go_type`` (``int32`` or ``int64``), or None when it fits (``null`` fits: Go leaves
    the pointer nil)."""
    if value is None:
        return None
    limit = _LIMITS[go_type]
    if not isinstance(value, bool) and isinstance(value, int) and -limit - 1 <= value <= limit:
        return None
    return unmarshal_error(value, f"{go_struct}.{path}", go_type)


def unmarshal_error(value: Any, field: str, go_type: str) -> str:
    """Go's ``UnmarshalTypeError`` for ``value`` in ``field`` (the Go struct, then the JSON path:
    ``PodSpec.spec.priority``) of Go type ``go_type``: a number into an integer (``int32``, ``int64``) that it
    does not fit shows its literal (``number 1.5``), any other value only its JSON kind (``number``, ``object``)."""
    kind = json_kind(value) if go_type in _LIMITS else json_kind(value).split(" ", 1)[0]
    return f"json: cannot unmarshal {kind} into Go struct field {field} of type {go_type}"


def _regex_error(message: str, pattern: str, *examples: str) -> str:
    """``validation.RegexError``: the rule, its examples and the regular expression."""
    shown = "".join(f"'{example}',  or " for example in examples)[: -len(" or ")] if examples else ""
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


_LABEL_KEY_FORMAT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(_LABEL_KEY_FORMAT + r"\Z")
_LABEL_KEY_RULE: Final = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
    _LABEL_KEY_FORMAT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_FORMAT: Final = f"({_LABEL_KEY_FORMAT})?"
_LABEL_VALUE = re.compile(_LABEL_VALUE_FORMAT + r"\Z")
_LABEL_VALUE_RULE: Final = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character",
    _LABEL_VALUE_FORMAT,
    "MyValue",
    "my_value",
    "12345",
)
DNS_SUBDOMAIN_EXAMPLES: Final = (  # what the real server adds to DNS_SUBDOMAIN_RULE in most messages
    " (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def go_value(value: Any) -> str:
    """A value as ``field.Invalid``, ``Duplicate`` and ``NotSupported`` echo it in the server's messages: strings
    quoted, numbers as written, lists and maps as compact JSON (a map's keys sorted, as Go writes them)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ",".join(go_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{go_value(str(k))}:{go_value(v)}" for k, v in sorted(value.items())) + "}"
    if value is None:
        return "null"
    return str(value).lower() if isinstance(value, bool) else str(value)


def qualified_name_problems(key: str, what: str = "a qualified name") -> list[str]:
    """``IsQualifiedName``: an optional DNS-1123 subdomain prefix and ``/``, then a name of 1 to 63 characters;
    every rule broken, in the server's words (empty: valid). ``what`` names it in the message about its shape
    (``a valid label key`` for a label's key, :func:`label_key_problems`)."""
    problems: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return [f"{what} {_LABEL_KEY_RULE} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                problems.append("prefix part must be no more than 253 characters")
            if dns_subdomain_problem(prefix[:253]) is not None:
                problems.append(f"prefix part {DNS_SUBDOMAIN_RULE}{DNS_SUBDOMAIN_EXAMPLES}")
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if not _LABEL_KEY.match(name):
        problems.append(f"name part {_LABEL_KEY_RULE}")
    return problems


def label_key_problems(key: str) -> list[str]:
    """``IsLabelKey``: :func:`qualified_name_problems`, said of a label key."""
    return qualified_name_problems(key, "a valid label key")


def label_value_problems(value: str) -> list[str]:
    """``IsLabelValue``: at most 63 characters, empty or alphanumeric at both ends with ``-``, ``_``, ``.`` between."""
    problems = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _LABEL_VALUE.match(value):
        problems.append(_LABEL_VALUE_RULE)
    return problems


POD_VOLUME_SOURCES: Final = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "configMap",
    "csi",
    "ephemeral",
    "image",
)
"""A pod volume's sources, in the order ``validateVolumeSource`` checks them."""
PV_SOURCES: Final = (
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
)
"""A PersistentVolume's sources, in the order ``ValidatePersistentVolumeSpec`` checks them."""
TOO_MANY_SOURCES: Final = "Forbidden: may not specify more than 1 volume type"


def extra_source(fields: Mapping[str, Any], sources: tuple[str, ...]) -> str | None:
    """The second of ``sources`` set (not null) in ``fields`` (a volume, a PersistentVolume's spec): the field the
    server refuses with :data:`TOO_MANY_SOURCES`; None when at most one is set."""
    seen = False
    for name in sources:
        if fields.get(name) is not None:
            if seen:
                return name
            seen = True
    return None
