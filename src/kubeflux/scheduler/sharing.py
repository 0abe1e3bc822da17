"""Resource sharing policies: which nodes, and how much of each, kubeflux may use beside other schedulers.

A policy is a small object with two questions (:class:`SharingPolicy`), looked up by name in
:data:`SHARING_POLICIES` (``shared``, ``exclusive``, ``capped``). Whatever the policy, the pods of every
scheduler are counted on their node, so no node is ever over-committed.

* ``shared`` (default): every node, all of it; other schedulers' pods are accounted.
* ``exclusive``: only nodes labelled :data:`EXCLUSIVE_LABEL` (``kubeflux.io/owner: kubeflux``); others are left
  to other schedulers.
* ``capped``: every node, but kubeflux's own pods together use at most ``fraction`` of each node's allocatable
  (rounded down per resource).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from kubeflux.scheduler.objects import PODS, Node, ResourceList

__all__ = [
    "EXCLUSIVE_LABEL",
    "SHARING_POLICIES",
    "CappedSharing",
    "ExclusiveSharing",
    "SharedSharing",
    "SharingPolicy",
    "sharing_policy",
]

EXCLUSIVE_LABEL: Final = "kubeflux.io/owner"


class SharingPolicy(Protocol):
    @property
    def name(self) -> str: ...

    def admits(self, node: Node) -> bool:
        """Whether kubeflux may place its pods on ``node`` at all."""
        ...

    def share(self, node: Node) -> ResourceList:
        """What kubeflux's own pods may use of ``node`` together."""
        ...


@dataclass(frozen=True, slots=True)
class SharedSharing:
    name: str = "shared"

    def admits(self, node: Node) -> bool:
        return True

    def share(self, node: Node) -> ResourceList:
        return dict(node.allocatable)


@dataclass(frozen=True, slots=True)
class ExclusiveSharing:
    name: str = "exclusive"
    label: str = EXCLUSIVE_LABEL
    value: str = "kubeflux"

    def admits(self, node: Node) -> bool:
        return node.labels.get(self.label) == self.value

    def share(self, node: Node) -> ResourceList:
        return dict(node.allocatable)


@dataclass(frozen=True, slots=True)
class CappedSharing:
    fraction: float = 0.5
    name: str = "capped"

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"capped sharing: fraction must be in (0, 1], got {self.fraction}")

    def admits(self, node: Node) -> bool:
        return True

    def share(self, node: Node) -> ResourceList:
        return {
            name: amount if name == PODS else int(amount * self.fraction) for name, amount in node.allocatable.items()
        }


SHARING_POLICIES: dict[str, Callable[[], SharingPolicy]] = {
    "shared": SharedSharing,
    "exclusive": ExclusiveSharing,
    "capped": CappedSharing,
}


def sharing_policy(name: str) -> SharingPolicy:
    """A policy by name; ValueError naming the known ones otherwise."""
    factory = SHARING_POLICIES.get(name)
    if factory is None:
        raise ValueError(f"unknown sharing policy {name!r}; known: {', '.join(SHARING_POLICIES)}")
    return factory()
