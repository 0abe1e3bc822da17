"""What a match walk is given and how it fails: the job's window and kind (:class:`JobMeta`), Fluxion's error
numbers (:class:`Errno`, :class:`MatchFailure`) and the prune filters (:class:`PruningFilters`).

Plain values shared by every part of the engine. Must never touch the graph or any schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final

ANY_TYPE: Final = "ALL"


class AllocType(IntEnum):
    ALLOCATE = 0
    ALLOCATE_ORELSE_RESERVE = 1
    SATISFIABILITY = 2


@dataclass(slots=True, init=False)
class JobMeta:
    jobid: int
    at: int
    duration: int
    alloc_type: AllocType = AllocType.ALLOCATE
    now: int = 0

    def __init__(
        self, jobid: int, at: int, duration: int, alloc_type: AllocType = AllocType.ALLOCATE, now: int = 0
    ) -> None:  # (written out: see docs/native.md)
        self.jobid = jobid
        self.at = at
        self.duration = duration
        self.alloc_type = alloc_type
        self.now = now


class Errno(Enum):
    """Why a match failed: the error numbers Fluxion reports and that decide its output."""

    EBUSY = "EBUSY"
    """Not now: the resources are busy (or down)."""
    ENODEV = "ENODEV"
    """Never: the request cannot be satisfied by this graph."""
    EINVAL = "EINVAL"
    """A malformed request (e.g. exclusivity conflicts under a slot)."""
    ENOENT = "ENOENT"
    ERANGE = "ERANGE"


class MatchFailure(Exception):
    def __init__(self, errno: Errno, message: str = "") -> None:
        super().__init__(message or errno.value)
        self.errno = errno


class PruningFilters:
    """Which aggregate counts each vertex type tracks for its subtree (``--prune-filters``)."""

    def __init__(self, spec: str = "ALL:core,ALL:node") -> None:
        self.anchors: dict[str, set[str]] = {}
        self.total: set[str] = set()
        self._order_types: dict[str, str | None] = {}
        for pair in spec.split(","):
            if not pair.strip():
                continue
            anchor, sep, low = pair.partition(":")
            anchor, low = anchor.strip(), low.strip()
            if not sep or not anchor or not low:
                raise ValueError(f"invalid prune filter {pair!r}: expected HIGH:LOW such as ALL:core")
            self.add(anchor, low)

    def add(self, anchor: str, low: str) -> None:
        if anchor == ANY_TYPE:
            for types in self.anchors.values():
                types.discard(low)
            self.anchors.setdefault(ANY_TYPE, set()).add(low)
        elif low not in self.anchors.get(ANY_TYPE, set()):
            self.anchors.setdefault(anchor, set()).add(low)
        self.total.add(low)
        self._order_types.clear()

    def types_for(self, vertex_type: str) -> list[str]:
        out = sorted(self.anchors.get(vertex_type, ()))
        if vertex_type != ANY_TYPE and ANY_TYPE in self.anchors:
            out.extend(sorted(self.anchors[ANY_TYPE]))
        return out

    def order_type(self, vertex_type: str) -> str | None:
        """The type whose free count at ``now`` weighs an edge into a vertex of ``vertex_type`` (``first``'s explore
        order), None when its filter tracks nothing.

        Fluxion's filter on a vertex tracks every type the anchors name for it except its own, a type absent below
        the vertex with total 0, and the weight is the free count of the last of them (by name). Ours keeps only
        the types present below; so the weight type comes from this list, not from the filter: a socket's filter
        ends with ``node``, none of which is below it, so a used socket weighs 0, not its free cores."""
        if vertex_type not in self._order_types:
            types = sorted({type for type in self.types_for(vertex_type) if type != vertex_type})
            self._order_types[vertex_type] = types[-1] if types else None
        return self._order_types[vertex_type]
