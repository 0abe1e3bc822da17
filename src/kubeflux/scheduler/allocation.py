"""The allocation: one bound pod as kubeflux counts it, and the ``kubeflux.io/allocation`` annotation that records it.

kubeflux writes :data:`ALLOCATION_ANNOTATION` on every pod it binds (:func:`allocation_annotations`, of
:func:`allocation_text`): JSON with the engine job id, node, cores, gpus, cpu and memory, start and duration. A
restarted kubeflux reads it back (:func:`recorded_allocation`, of :func:`read_allocation`) to put the pod where it
was; the annotation is user-visible, so the text is hostile input and checked field by field. This module is the
only one that knows the annotation's name and format.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, Final

import orjson

from kubeflux.scheduler.objects import CPU, MEMORY, Pod
from kubeflux.scheduler.translate import Placement

__all__ = [
    "ALLOCATION_ANNOTATION",
    "Allocation",
    "AllocationRecord",
    "allocation_annotations",
    "allocation_text",
    "read_allocation",
    "recorded_allocation",
]

ALLOCATION_ANNOTATION: Final = "kubeflux.io/allocation"
"""Written on every pod kubeflux binds: JSON with the engine job id, node, cores, gpus, start and duration."""

_FLOAT_MAX = sys.float_info.max
"""The largest finite float: an ``int`` of seconds beyond it is no time a float can hold (``math.isfinite`` raises
OverflowError on it, and the scheduler's arithmetic on times would too)."""


@dataclass(slots=True, init=False)
class Allocation:
    """One bound pod as kubeflux counts it (its own ``__init__``: compiled, the generated one stays interpreted)."""

    uid: str
    key: str
    node: str
    own: bool
    jobid: int = 0
    """The engine job holding its cores/gpus; 0 when it has none (a fractional pod, or not in the graph)."""
    start: int = 0
    duration: int = 0
    placement: Placement | None = None
    """Where the engine holds it now."""
    named: Placement | None = None
    """The placement its allocation annotation names (written as it was bound, or read when recovered): a replay
    puts it back there first. It differs from :attr:`placement` once a replay had to use other cores (its node
    shrank below them)."""

    def __init__(
        self,
        uid: str,
        key: str,
        node: str,
        own: bool,
        jobid: int = 0,
        start: int = 0,
        duration: int = 0,
        placement: Placement | None = None,
    ) -> None:
        self.uid = uid
        self.key = key
        self.node = node
        self.own = own
        self.jobid = jobid
        self.start = start
        self.duration = duration
        self.placement = self.named = placement


def allocation_text(pod: Pod, alloc: Allocation) -> str:
    """The :data:`ALLOCATION_ANNOTATION` written on ``pod`` as it is bound by ``alloc``: compact JSON with sorted
    keys (``json.dumps(record, sort_keys=True, separators=(",", ":"))``, by orjson ten times faster, one per bound
    pod, except that non-ASCII names are written as they are, not escaped; the same object when read back)."""
    record = {
        "jobid": alloc.jobid,
        "node": alloc.node,
        "cores": list(alloc.placement.cores) if alloc.placement else [],
        "gpus": list(alloc.placement.gpus) if alloc.placement else [],
        "cpu": pod.requests.get(CPU, 0),
        "memory": pod.requests.get(MEMORY, 0),
        "start": alloc.start,
        "duration": alloc.duration,
    }
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:  # an integer past 64 bits (a memory request of over 9.2 EB)
        return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def allocation_annotations(pod: Pod, alloc: Allocation) -> dict[str, str]:
    """The annotations a Bind of ``pod`` by ``alloc`` writes: the :data:`ALLOCATION_ANNOTATION`."""
    return {ALLOCATION_ANNOTATION: allocation_text(pod, alloc)}


@dataclass(frozen=True, slots=True)
class AllocationRecord:
    """What a restarted kubeflux needs of its allocation annotation to put a pod back where it was."""

    start: int
    """Engine time (whole seconds) the allocation started."""
    duration: int
    """Seconds it was planned for (at least 1)."""
    cores: tuple[str, ...]
    """The core vertex names it held on its node."""
    gpus: tuple[str, ...]
    """The gpu vertex names it held there."""


def _whole(data: dict[str, Any], key: str, least: int, horizon: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: expected a whole number of seconds, got {value!r}")
    if not -_FLOAT_MAX <= value <= _FLOAT_MAX or value != int(value):
        raise ValueError(f"{key}: expected a whole number of seconds, got {value!r}")
    whole = int(value)
    if not least <= whole <= horizon:
        raise ValueError(f"{key}: must be between {least} and the graph's horizon {horizon}, got {value!r}")
    return whole


def _names(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{key}: expected a list of vertex names, got {value!r}")
    return tuple(value)


def read_allocation(raw: str, horizon: int) -> AllocationRecord:
    """The record in an allocation annotation's text; raises ValueError saying what is wrong (not JSON, not an
    object, a start or duration that is not a whole number of seconds within ``[0, horizon]``, names that are not
    lists of strings)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    start = _whole(data, "start", 0, horizon)
    duration = _whole(data, "duration", 1, horizon)
    if start + duration > horizon:
        raise ValueError(f"start {start} + duration {duration} is past the graph's horizon {horizon}")
    return AllocationRecord(start, duration, _names(data, "cores"), _names(data, "gpus"))


def recorded_allocation(pod: Pod, horizon: int) -> AllocationRecord | None:
    """The allocation recorded on ``pod`` (None when it carries no :data:`ALLOCATION_ANNOTATION`); raises ValueError
    naming the annotation and saying what is wrong with it (:func:`read_allocation`)."""
    raw = pod.annotations.get(ALLOCATION_ANNOTATION)
    if raw is None:
        return None
    try:
        return read_allocation(raw, horizon)
    except ValueError as exc:
        raise ValueError(f"metadata.annotations[{ALLOCATION_ANNOTATION}]: {exc}") from None
