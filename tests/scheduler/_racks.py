"""Racks of nodes for the tests of jobs kept in one topology domain."""

from __future__ import annotations

from kubeflux.scheduler.objects import Node
from kubeflux.scheduler.testing import node
from kubeflux.scheduler.topology import RACK_LEVEL

HOST = "kubernetes.io/hostname"


def racks(*sizes: int, cores: int = 16) -> list[Node]:
    """Racks ``r0``, ``r1`` … of ``sizes`` nodes ``n0``, ``n1`` … (numbered across racks)."""
    nodes = []
    for rack, size in enumerate(sizes):
        for _ in range(size):
            name = f"n{len(nodes)}"
            nodes.append(node(name, cores, labels={RACK_LEVEL: f"r{rack}", HOST: name}))
    return nodes
