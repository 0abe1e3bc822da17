"""Strategies of the objects the cluster's controllers keep beside the workloads: Leases, PriorityClasses,
ServiceAccounts, Endpoints and EndpointSlices, and PodDisruptionBudgets."""

from __future__ import annotations

import ipaddress
from typing import Any

from kubeflux.apiobjects.disruption import budget_decode_error, budget_problems
from kubeflux.apiobjects.priority import PriorityClass, class_decode_error, class_problems, second_default
from kubeflux.apiobjects.rules import unmarshal_error
from kubeflux.sim.apiserver.errors import ApiError, Cause, not_supported
from kubeflux.sim.apiserver.registry import (
    PRIORITY_CLASSES,
    Lookup,
    Strategy,
    fill_zeros,
    list_of_objects_causes,
    path_segment_causes,
    required,
)

__all__ = [
    "EndpointSliceStrategy",
    "EndpointsStrategy",
    "LeaseStrategy",
    "PodDisruptionBudgetStrategy",
    "PriorityClassStrategy",
    "ServiceAccountStrategy",
    "endpoint_ip_causes",
]

Object = dict[str, Any]


def _named_by_validation(name: str, path: str) -> list[Cause]:
    """No check of the name apart from the strategy's validation (which words it as the real server does)."""
    return []


class LeaseStrategy(Strategy):
    def validate(self, obj: Object) -> list[Cause]:
        spec = obj.get("spec") or {}
        if not isinstance(spec, dict):
            return [Cause("spec", "Invalid value: must be an object")]
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int) or duration <= 0):
            return [Cause("spec.leaseDurationSeconds", f"Invalid value: {duration!r}: must be greater than 0")]
        return []


class PriorityClassStrategy(Strategy):
    """``scheduling.k8s.io/v1``: held to :mod:`kubeflux.apiobjects.priority`'s checks (the workload files' too);
    ``value`` and ``preemptionPolicy`` never change."""

    tracks_generation = True
    name_causes = staticmethod(_named_by_validation)

    def decode_error(self, obj: Object) -> str:
        return class_decode_error(obj) or ""

    def prepare_create(self, obj: Object, now: str) -> None:
        obj.setdefault("value", 0)
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def admit(self, obj: Object, lookup: Lookup) -> None:
        classes = (PriorityClass.from_object(pc) for pc in lookup.every(PRIORITY_CLASSES))
        refused = second_default(PriorityClass.from_object(obj), classes)
        if refused is not None:
            name = obj["metadata"]["name"]
            message = f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: {refused}'
            raise ApiError(403, "Forbidden", message, "priorityclasses", name, "scheduling.k8s.io")

    def validate(self, obj: Object) -> list[Cause]:
        return [Cause(p.field, p.message, p.reason) for p in class_problems(obj)]

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        if new.get("value") != old.get("value"):
            return [Cause("value", "Forbidden: may not be changed in an update.", "FieldValueForbidden")]
        return self.validate(new)


class ServiceAccountStrategy(Strategy):
    """A namespace's identities (each namespace's ``default`` is made with it, as kube-controller-manager's
    ServiceAccount controller makes it); their lists of secrets are lists of objects."""

    def decode_error(self, obj: Object) -> str:
        for name, go_type in (("secrets", "ObjectReference"), ("imagePullSecrets", "LocalObjectReference")):
            value = obj.get(name)
            if value is not None and not isinstance(value, list):
                return unmarshal_error(value, f"ServiceAccount.{name}", f"[]v1.{go_type}")
        return ""

    def validate(self, obj: Object) -> list[Cause]:
        return list_of_objects_causes(obj, "", ("secrets", "imagePullSecrets"))


def endpoint_ip_causes(address: Any, path: str) -> list[Cause]:
    """An Endpoints address's ``ip`` as ``validateEndpointAddress`` checks it: an IP (checked twice, by two
    validators, each saying so), not unspecified, loopback or link-local."""
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else None
    except ValueError:
        ip = None
    if ip is None:
        invalid = Cause(path, f'Invalid value: "{address or ""}": must be a valid IP address')
        return [invalid, invalid]
    problems = (
        (ip.is_unspecified, f"may not be unspecified ({address})"),
        (ip.is_loopback, "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
        (ip.is_link_local, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
    )
    return [Cause(path, f'Invalid value: "{address}": {message}') for bad, message in problems if bad]


_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _default_ports(ports: Any, **defaults: str) -> None:
    """Ports of Endpoints or an EndpointSlice: the protocol defaults to TCP (and ``defaults`` besides)."""
    for port in ports if isinstance(ports, list) else ():
        if isinstance(port, dict):
            for name, value in {"protocol": "TCP", **defaults}.items():
                if port.get(name) is None:
                    port[name] = value


def _port_causes(ports: Any, path: str, *, port_required: bool) -> list[Cause]:
    """Ports of Endpoints or an EndpointSlice: a known protocol; a number in 1-65535."""
    causes = []
    for index, port in enumerate(ports if isinstance(ports, list) else ()):
        if not isinstance(port, dict):
            continue
        if port.get("protocol") not in _PROTOCOLS:
            causes.append(not_supported(f"{path}[{index}].protocol", port.get("protocol"), _PROTOCOLS))
        number = port.get("port")
        if number is None and not port_required:
            continue
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
            message = f"Invalid value: {number!r}: must be between 1 and 65535, inclusive"
            causes.append(Cause(f"{path}[{index}].port", message))
    return causes


class EndpointsStrategy(Strategy):
    """A Service's addresses as the endpoints controller writes them: each subset's addresses have an ``ip``."""

    def canonicalize(self, obj: Object) -> None:
        subsets = obj.get("subsets")
        for subset in subsets if isinstance(subsets, list) else ():
            if isinstance(subset, dict):
                _default_ports(subset.get("ports"))

    def validate(self, obj: Object) -> list[Cause]:
        causes = list_of_objects_causes(obj, "", ("subsets",))
        if causes:
            return causes
        for index, subset in enumerate(obj.get("subsets") or ()):
            path = f"subsets[{index}]"
            causes += list_of_objects_causes(subset, f"{path}.", ("addresses", "notReadyAddresses", "ports"))
            if causes:
                continue
            for field in ("addresses", "notReadyAddresses"):
                for at, address in enumerate(subset.get(field) or ()):
                    causes += endpoint_ip_causes(address.get("ip"), f"{path}.{field}[{at}].ip")
            causes += _port_causes(subset.get("ports"), f"{path}.ports", port_required=True)
        return causes


_ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")


class EndpointSliceStrategy(Strategy):
    """``discovery.k8s.io/v1``: an address type (which no update changes), endpoints of one to 100 addresses."""

    tracks_generation = True

    def canonicalize(self, obj: Object) -> None:
        if obj.get("endpoints") is None:
            obj["endpoints"] = []
        for endpoint in obj["endpoints"] if isinstance(obj["endpoints"], list) else ():
            if isinstance(endpoint, dict) and endpoint.get("conditions") is None:
                endpoint["conditions"] = {}  # a struct, not a pointer: Go shows it empty
        _default_ports(obj.get("ports"), name="")

    def validate(self, obj: Object) -> list[Cause]:
        kind = obj.get("addressType")
        if not kind:
            causes = [required("addressType")]
        elif kind not in _ADDRESS_TYPES:
            causes = [not_supported("addressType", kind, _ADDRESS_TYPES)]
        else:
            causes = []
        causes += list_of_objects_causes(obj, "", ("endpoints", "ports"))
        if causes:
            return causes
        for index, endpoint in enumerate(obj.get("endpoints") or ()):
            addresses = endpoint.get("addresses")
            if not isinstance(addresses, list) or not addresses:
                causes.append(
                    Cause(
                        f"endpoints[{index}].addresses",
                        "Required value: must contain at least 1 address",
                        "FieldValueRequired",
                    )
                )
        return causes + _port_causes(obj.get("ports"), "ports", port_required=False)

    def validate_update(self, new: Object, old: Object) -> list[Cause]:
        causes = self.validate(new)
        if new.get("addressType") != old.get("addressType"):
            causes.append(Cause("addressType", f'Invalid value: "{new.get("addressType")}": field is immutable'))
        return causes


class PodDisruptionBudgetStrategy(Strategy):
    """``policy/v1``: decoded and validated by :mod:`kubeflux.apiobjects.disruption` (the workload files' too); the
    disruption controller keeps the status (whose counts Go always shows)."""

    has_status = True
    tracks_generation = True
    name_causes = staticmethod(path_segment_causes)  # the real server takes any name a path can hold ("A")

    def prepare_create(self, obj: Object, now: str) -> None:
        obj["status"] = {}

    def canonicalize(self, obj: Object) -> None:
        fill_zeros(
            obj, "status", dict.fromkeys(("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"), 0)
        )

    def decode_error(self, obj: Object) -> str:
        return budget_decode_error(obj) or ""

    def validate(self, obj: Object) -> list[Cause]:
        return [Cause(p.field, p.message, p.reason) for p in budget_problems(obj)]
