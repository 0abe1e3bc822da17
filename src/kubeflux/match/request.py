"""The matcher's working copy of a jobspec's resource tree, with the per-request pruning aggregates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNBOUNDED = 2**32 - 1
"""Fluxion's UINT_MAX: the max of a count given as ``{min: N}`` alone."""


@dataclass(slots=True, eq=False)
class Request:
    type: str
    min: int
    max: int = 0
    operator: str = "+"
    operand: int = 1
    exclusive: bool | None = None
    with_: list[Request] = field(default_factory=list)
    label: str = ""
    user_data: dict[str, int] = field(default_factory=dict)
    """Aggregate counts of the pruning types this request needs below it (Fluxion's ``user_data``)."""

    def __post_init__(self) -> None:
        if self.max == 0:
            self.max = self.min


def calc_count(request: Request, available: int) -> int:
    """How many of ``request`` to take when ``available`` qualify: Fluxion's ``calc_count``, 0 if too few."""
    if request.min > request.max or request.min > available:
        return 0
    count = 0
    current = request.min
    if request.operator == "+":
        step = request.operand
        if step <= 0:
            return current
        top = min(available, request.max)
        return current + (top - current) // step * step
    if request.operator == "*":
        while current <= available and current <= request.max:
            count = current
            if request.operand < 2:
                break
            current *= request.operand
        return count
    if request.operator == "^":
        if request.operand < 2:
            return current
        while current <= available and current <= request.max:
            count = current
            current = current**request.operand
        return count
    return 0


def effective_max(request: Request) -> int:
    """The largest count the request could take (Fluxion's ``calc_effective_max``)."""
    return calc_count(request, request.max)


def requests_from_jobspec(resources: Any) -> list[Request]:
    """Copy a parsed jobspec's resources (:class:`kubeflux.jobspec.Resource` or plain mappings)."""
    return [_request(resource) for resource in resources]


def _request(resource: Any) -> Request:
    if isinstance(resource, dict):
        count = resource["count"]
        if isinstance(count, dict):
            low = int(count["min"])
            high = int(count.get("max", UNBOUNDED if len(count) == 1 else low))
            operator = str(count.get("operator", "+"))
            operand = int(count.get("operand", 1))
        else:
            low = high = int(count)
            operator, operand = "+", 1
        exclusive = resource.get("exclusive")
        return Request(
            type=str(resource["type"]),
            min=low,
            max=high,
            operator=operator,
            operand=operand,
            exclusive=None if exclusive is None else bool(exclusive),
            with_=[_request(child) for child in resource.get("with", ()) or ()],
            label=str(resource.get("label") or ""),
        )
    count = resource.count
    return Request(
        type=resource.type,
        min=count.min,
        max=count.max,
        operator=count.operator,
        operand=count.operand,
        exclusive=resource.exclusive,
        with_=[_request(child) for child in resource.with_],
        label=resource.label or "",
    )
