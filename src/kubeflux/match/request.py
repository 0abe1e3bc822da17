"""The matcher's working copy of a jobspec's resource tree, with the per-request pruning aggregates."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubeflux.jobspec import Count, Resource


@dataclass(slots=True, eq=False)
class Request:
    type: str
    count: Count
    exclusive: bool | None = None
    with_: list[Request] = field(default_factory=list)
    label: str = ""
    user_data: dict[str, int] = field(default_factory=dict)
    """Aggregate counts of the pruning types this request needs below it (Fluxion's ``user_data``)."""
    shape: int = -1
    """The traverser's number for this request's shape (type, count, exclusivity, label and what is below),
    set on first use; -1 until then (a copy with other fields must reset it)."""

    @property
    def min(self) -> int:
        return self.count.min


def calc_count(request: Request, available: int) -> int:
    """How many of ``request`` to take when ``available`` qualify: Fluxion's ``calc_count``, 0 if too few.

    :meth:`Count.calc` for the common ``+`` counts, here: ``kubeflux.jobspec`` stays pure Python, and this is
    asked on every candidate choice (compiled, the call into it would cost more than the arithmetic)."""
    count = request.count
    low, high = count.min, count.max
    if low > high or low > available:
        return 0
    if count.operator != "+":
        return count.calc(available)
    top = available if available < high else high
    return top - (top - low) % count.operand


def effective_max(request: Request) -> int:
    """The largest count the request could take (Fluxion's ``calc_effective_max``)."""
    return calc_count(request, request.count.max)


def requests_from_jobspec(resources: Iterable[Resource]) -> list[Request]:
    """Copy a parsed jobspec's resources; the copy carries the matcher's per-match annotations."""
    return [
        Request(
            type=resource.type,
            count=resource.count,
            exclusive=resource.exclusive,
            with_=requests_from_jobspec(resource.with_),
            label=resource.label or "",
        )
        for resource in resources
    ]
