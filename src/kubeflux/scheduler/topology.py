"""Topology levels from node labels: the domains (zones, racks, blocks …) above the nodes in kubeflux's graph.

A level is a node label (``topology.kubernetes.io/zone``, ``topology.kubeflux.io/rack``, Kueue's
``cloud.provider.com/topology-rack`` …); its vertex type is the label's name without a ``topology-`` prefix
(``zone``, ``rack``, ``block``). The levels are ordered top first, as a Kueue ``Topology`` lists them, and nodes
become ``cluster → zone → rack → node → …``: a node's domain at each level is named by its label's value. A domain
is identified by its whole path (two racks called ``r1`` in two zones are two racks), as Kueue identifies them.

* **Only the levels some node carries are in the graph** (:func:`present_levels`): a cluster whose nodes carry none
  of the configured labels gets exactly the graph it had without levels (``cluster → node``), and its schedules do
  not change. When the first node carrying a level's label comes, or the last one goes, every node moves in place
  (:meth:`kubeflux.scheduler.books.ClusterBooks.put_node`), with its pods.
* **A node without a level's label** (when others carry it) is put in that level's :data:`UNKNOWN` domain, reported
  once. A pod that asks for one domain of a level never goes to its unknown domain (Kueue and KAI leave such nodes
  out of topology-aware placement).
* ``kubernetes.io/hostname`` is the node itself, not a level above it: listed as a level it is left out. A pod
  group whose topology annotation requires it (the whole group on one node) is refused with that reason (required
  pod affinity among its members on the hostname asks the same, and is placed as such:
  :mod:`kubeflux.scheduler.confining`); preferring it places the group anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_LEVELS",
    "HOSTNAME_LEVEL",
    "RESERVED_TYPES",
    "UNKNOWN",
    "Request",
    "check_levels",
    "domains_of",
    "level_type",
    "present_levels",
]

ZONE_LEVEL: Final = "topology.kubernetes.io/zone"
RACK_LEVEL: Final = "topology.kubeflux.io/rack"
"""kubeflux's own label for a node's rack (Kubernetes has no well-known one; the simulator's clusters write it)."""
DEFAULT_LEVELS: Final = (ZONE_LEVEL, RACK_LEVEL)
"""The levels a scheduler reads unless told others: the zone, then the rack (as Kueue's examples list a block, then
a rack, above the host)."""
HOSTNAME_LEVEL: Final = "kubernetes.io/hostname"
"""The node level in Kueue's Topology objects: not a level of kubeflux's graph (requiring it is refused)."""
UNKNOWN: Final = "_unknown"
"""The name of a level's domain for nodes without its label (no label value can be it: a value starts with a letter
or digit)."""
RESERVED_TYPES: Final = frozenset({"cluster", "node", "socket", "core", "gpu", "memory", "slot"})
"""Vertex types the graph and the pods' jobspecs already use: no level may take one."""
_LABEL_KEY = re.compile(r"\A([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")


def level_type(label: str) -> str:
    """The vertex type of level ``label``: its name, without a ``topology-`` prefix (``zone``, ``rack``)."""
    name = label.rsplit("/", 1)[-1]
    return name.removeprefix("topology-") or name


def check_levels(levels: Iterable[str]) -> tuple[str, ...]:
    """``levels`` as a tuple, ``kubernetes.io/hostname`` left out; ValueError naming the level for a label that is
    not a label key, is listed twice, or whose type is reserved or another level's."""
    kept: list[str] = []
    types: dict[str, str] = {}
    for label in levels:
        if label == HOSTNAME_LEVEL:
            continue
        if not isinstance(label, str) or _LABEL_KEY.match(label) is None:
            raise ValueError(f"topology level {label!r}: not a label key (an optional DNS prefix and '/', then a name)")
        kind = level_type(label)
        if kind in RESERVED_TYPES:
            raise ValueError(f"topology level {label!r}: its type {kind!r} is a vertex type the graph already uses")
        if kind in types:
            raise ValueError(f"topology levels {types[kind]!r} and {label!r} would both be {kind!r} vertices")
        types[kind] = label
        kept.append(label)
    return tuple(kept)


def present_levels(levels: tuple[str, ...], carried: Mapping[str, object]) -> tuple[str, ...]:
    """The configured ``levels`` that some node carries (``carried``: level → a truthy value when some node has its
    label), in order."""
    return tuple(label for label in levels if carried.get(label))


def domains_of(labels: Mapping[str, str], levels: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """A node's (vertex type, domain name) at each of ``levels``, top first (:data:`UNKNOWN` where it has no such
    label, or a value no vertex can be named: empty or with a ``/``)."""
    result: list[tuple[str, str]] = []
    for label in levels:
        value = labels.get(label)
        result.append((level_type(label), value if value and "/" not in value else UNKNOWN))
    return tuple(result)


@dataclass(frozen=True, slots=True)
class Request:
    """What a job asks (:func:`kubeflux.scheduler.confining.job_request`): one domain of ``level`` (a node label),
    ``required`` or preferred, as ``annotation`` says."""

    level: str
    required: bool
    annotation: str
