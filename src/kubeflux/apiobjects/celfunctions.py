"""Functions of Kubernetes' CEL environment that the ``common-expression-language`` library lacks, registered by
:mod:`kubeflux.apiobjects.devicecel` beside its quantities and versions (:data:`FUNCTIONS`):

* ``ip(s)``, ``cidr(s)``, ``url(s)`` (``k8s.io/apiserver/pkg/cel/library/ip.go``, ``cidr.go``, ``urls.go``) as maps
  ``{"kubeflux.ip": "<canonical text>"}`` (``kubeflux.cidr``, ``kubeflux.url``), equal when their texts are, with
  their methods: ``family``, ``isUnspecified``, ``isLoopback``, ``isLinkLocalMulticast``, ``isLinkLocalUnicast``,
  ``isGlobalUnicast``, ``ip.isCanonical``; ``containsIP``, ``containsCIDR``, ``ip``, ``masked``, ``prefixLength``;
  ``isURL``, ``getScheme``, ``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``, ``getQuery``;
* ``format`` (cel-go's ``ext.Strings``: ``%s``, ``%d``, ``%f``, ``%e``, ``%x``, ``%X``, ``%o``, ``%b``, ``%%``),
  ``lists.range``, ``flatten``, and ``matches`` called as a function;
* what :mod:`kubeflux.apiobjects.celrewrite` rewrites macros into: ``kubeflux_pairs``, ``kubeflux_map``,
  ``kubeflux_merge``, ``kubeflux_sort_by``.

A value of the wrong kind raises ValueError (``no such overload``), which the claim reports.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

__all__ = ["FUNCTIONS"]

IP_KEY: Final = "kubeflux.ip"
CIDR_KEY: Final = "kubeflux.cidr"
URL_KEY: Final = "kubeflux.url"

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _overload(name: str) -> ValueError:
    return ValueError(f"no such overload: {name}")


def _address(text: object) -> _Address:
    if not isinstance(text, str) or "%" in text:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string")
    try:
        found = ipaddress.ip_address(text)
    except ValueError as exc:
        raise ValueError(f"IP Address {text!r} parse error during conversion from string") from exc
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return found


def _network(text: object) -> _Network:
    if not isinstance(text, str):
        raise ValueError(f"network address {text!r} parse error during conversion from string")
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise ValueError(f"network address {text!r} parse error during conversion from string") from exc


def _held(value: object, key: str) -> str:
    if isinstance(value, Mapping) and isinstance(value.get(key), str):
        return str(value[key])
    raise _overload(key.removeprefix("kubeflux."))


def _ip(value: object) -> dict[str, str]:
    """``ip(s)``, and ``cidr.ip()``: a CIDR's address."""
    if isinstance(value, Mapping) and CIDR_KEY in value:
        text = _held(value, CIDR_KEY).partition("/")[0]
        return {IP_KEY: str(_address(text))}
    return {IP_KEY: str(_address(value))}


def _cidr(text: object) -> dict[str, str]:
    _network(text)
    address, _, length = str(text).partition("/")
    return {CIDR_KEY: f"{_address(address)}/{int(length)}"}


def _ip_test(test: Callable[[_Address], bool]) -> Callable[[object], bool]:
    return lambda value: test(ipaddress.ip_address(_held(value, IP_KEY)))


def _contains_ip(cidr: object, other: object) -> bool:
    network = _network(_held(cidr, CIDR_KEY))
    address = ipaddress.ip_address(_held(other, IP_KEY)) if isinstance(other, Mapping) else _address(other)
    return address.version == network.version and address in network


def _contains_cidr(cidr: object, other: object) -> bool:
    network = _network(_held(cidr, CIDR_KEY))
    inner = _network(_held(other, CIDR_KEY) if isinstance(other, Mapping) else other)
    return inner.version == network.version and inner.subnet_of(network)  # type: ignore[arg-type]


def _masked(cidr: object) -> dict[str, str]:
    return {CIDR_KEY: str(_network(_held(cidr, CIDR_KEY)))}


def _is_canonical(text: object) -> bool:
    return str(_address(text)) == text


# ====================================================================== urls


def _url(text: object) -> dict[str, str]:
    if not _is_url(text):
        raise ValueError(f"URL {text!r} parse error during conversion from string")
    return {URL_KEY: str(text)}


def _is_url(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        parts = urlsplit(text)
    except ValueError:
        return False
    return bool(parts.scheme) or text.startswith("/")


def _url_part(part: Callable[[Any], object]) -> Callable[[object], Any]:
    return lambda value: part(urlsplit(_held(value, URL_KEY)))


def _port(parts: Any) -> str:
    netloc = str(parts.netloc).rpartition("@")[2]
    host_end = netloc.rfind("]")
    colon = netloc.rfind(":")
    return netloc[colon + 1 :] if colon > host_end else ""


def _host(parts: Any) -> str:
    netloc = str(parts.netloc).rpartition("@")[2]
    port = _port(parts)
    return netloc[: len(netloc) - len(port) - 1] if port else netloc


# ====================================================================== strings and lists

_CLAUSE = re.compile(r"%(?:\.(\d+))?([sdfeExXob%])")


def _format(template: object, args: object) -> str:
    if not isinstance(template, str) or not isinstance(args, list):
        raise _overload("format")
    values = iter(args)

    def clause(match: re.Match[str]) -> str:
        precision, kind = match.group(1), match.group(2)
        if kind == "%":
            return "%"
        try:
            value = next(values)
        except StopIteration as exc:
            raise ValueError(f"index {len(args)} out of range") from exc
        return _formatted(kind, value, int(precision) if precision is not None else 6)

    return _CLAUSE.sub(clause, template)


def _formatted(kind: str, value: object, precision: int) -> str:
    if kind == "s":
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value) if not isinstance(value, bytes) else value.decode()
    if kind in "fe" or kind == "E":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(
                f"error during formatting: fixed-point clause can only be used on doubles, was given {value!r}"
            )
        return f"{float(value):.{precision}{kind}}"
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"error during formatting: decimal clause can only be used on integers, was given {value!r}")
    return format(value, {"d": "d", "x": "x", "X": "X", "o": "o", "b": "b"}[kind])


def _flatten(items: object, depth: int = 1) -> list[Any]:
    if not isinstance(items, list) or depth < 0:
        raise _overload("flatten")
    found: list[Any] = []
    for item in items:
        found.extend(_flatten(item, depth - 1) if isinstance(item, list) and depth > 0 else [item])
    return found


def _range(count: object) -> list[int]:
    if type(count) is not int:
        raise _overload("lists.range")
    return list(range(count))


def _matches(text: object, pattern: object) -> bool:
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise _overload("matches")
    return re.search(pattern, text) is not None


# ====================================================================== what the rewritten macros call


def _pairs(over: object) -> list[list[Any]]:
    if isinstance(over, list):
        return [[index, item] for index, item in enumerate(over)]
    if isinstance(over, Mapping):
        return [[key, value] for key, value in over.items()]
    raise ValueError("no such overload: comprehension over a value that is not a list or map")


def _to_map(pairs: list[list[Any]]) -> dict[Any, Any]:
    return {key: value for key, value in pairs}


def _merge(entries: list[Any]) -> dict[Any, Any]:
    merged: dict[Any, Any] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ValueError("transformMapEntry: the expression must give a map")
        for key, value in entry.items():
            if key in merged:
                raise ValueError(f"insert failed: key {key!r} already exists")
            merged[key] = value
    return merged


def _sort_by(items: list[Any], keys: list[Any]) -> list[Any]:
    return [item for _, item in sorted(zip(keys, items, strict=True), key=lambda pair: pair[0])]


FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "ip": _ip,
    "ip.isCanonical": _is_canonical,
    "family": lambda value: ipaddress.ip_address(_held(value, IP_KEY)).version,
    "isUnspecified": _ip_test(lambda address: address.is_unspecified),
    "isLoopback": _ip_test(lambda address: address.is_loopback),
    "isLinkLocalMulticast": _ip_test(lambda address: address.is_multicast and address.is_link_local),
    "isLinkLocalUnicast": _ip_test(lambda address: address.is_link_local and not address.is_multicast),
    "isGlobalUnicast": _ip_test(
        lambda address: (
            not (address.is_unspecified or address.is_loopback or address.is_multicast or address.is_link_local)
            and address != ipaddress.ip_address("255.255.255.255")
        )
    ),
    "cidr": _cidr,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "masked": _masked,
    "prefixLength": lambda value: _network(_held(value, CIDR_KEY)).prefixlen,
    "url": _url,
    "isURL": _is_url,
    "getScheme": _url_part(lambda parts: parts.scheme),
    "getHost": _url_part(lambda parts: str(parts.netloc).rpartition("@")[2]),  # with the port, as Go's URL.Host
    "getHostname": _url_part(lambda parts: _host(parts).strip("[]")),
    "getPort": _url_part(_port),
    "getEscapedPath": _url_part(lambda parts: parts.path),
    "getQuery": _url_part(lambda parts: parse_qs(parts.query, keep_blank_values=True)),
    "format": _format,
    "flatten": _flatten,
    "lists.range": _range,
    "matches": _matches,
    "kubeflux_pairs": _pairs,
    "kubeflux_map": _to_map,
    "kubeflux_merge": _merge,
    "kubeflux_sort_by": _sort_by,
}
"""Each function by the name an expression calls it."""
