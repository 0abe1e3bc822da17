"""A discrete-event core in virtual time, as small as SimPy's.

An :class:`EventLoop` holds a heap of pending entries keyed by ``(time, priority, sequence)``. ``sequence`` is
a counter incremented by every :meth:`EventLoop.schedule`, so entries at the same time and priority run in the
order they were scheduled and equal inputs always give equal traces (no dict or hash order is involved).

Tie order at one time point (lower runs first), chosen the way Batsim orders a time stamp: every event of a
time stamp is applied before the scheduler is asked for decisions, and resources freed at ``t`` are visible to a
job submitted at ``t``:

1. :attr:`Priority.RELEASE` — a pod ends (Succeeded, Failed, deadline, deleted): its resources come back.
2. :attr:`Priority.NODE` — a node goes down, comes back, is cordoned.
3. :attr:`Priority.STAGE` — other pod lifecycle stages (bound → Running), Job retries after back-off.
4. :attr:`Priority.ARRIVAL` — workload submissions, in workload order.
5. :attr:`Priority.WAKEUP` — a scheduler's ``next_wakeup``.

The simulation driver then calls every scheduler's ``schedule(now)`` once for the whole time point.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Final


class Priority(IntEnum):
    """Tie order of entries scheduled for the same virtual time (lower first)."""

    RELEASE = 0
    NODE = 1
    STAGE = 2
    ARRIVAL = 3
    WAKEUP = 4


Callback = Callable[[Any], None]

_heappush: Final = heapq.heappush
_heappop: Final = heapq.heappop
"""Final: compiled, a C static each (``heapq.heappush`` is two lookups at each call)."""


class EventLoop:
    """Virtual time and a heap of callbacks.

    Times are float seconds. An entry is ``callback(payload)`` at ``at``; entries are never cancelled — a callback
    that may have become stale checks its payload (e.g. a pod attempt number) and returns.
    """

    __slots__ = ("_heap", "_sequence", "now", "processed")

    def __init__(self, start: float = 0.0) -> None:
        self.now: float = start
        """The current virtual time: the time of the entry being (or last) processed."""
        self.processed: int = 0
        """How many entries have run (the run's event count)."""
        self._heap: list[tuple[float, int, int, Callback, Any]] = []
        self._sequence = 0
        """The next entry's sequence number."""

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        """Run ``callback(payload)`` at virtual time ``at`` (not before ``now``)."""
        if not at >= self.now:  # before now, or NaN
            raise ValueError(f"cannot schedule at {at}: the clock is already at {self.now}")
        sequence = self._sequence
        self._sequence = sequence + 1
        _heappush(self._heap, (at, priority, sequence, callback, payload))

    def peek(self) -> float:
        """The time of the next entry, or ``inf`` when none is left."""
        return self._heap[0][0] if self._heap else math.inf

    def step(self) -> None:
        """Advance to the next entry and run it. Raises IndexError when nothing is scheduled."""
        at, _priority, _seq, callback, payload = _heappop(self._heap)
        self.now = at
        self.processed += 1
        callback(payload)

    def run_time_point(self) -> float:
        """Run every entry of the next time point, including entries they add for that same time, and return
        the time. Raises IndexError when nothing is scheduled."""
        heap = self._heap
        at = heap[0][0]
        self.now = at
        pop = _heappop
        count = 0
        while heap and heap[0][0] == at:
            entry = pop(heap)
            count += 1
            entry[3](entry[4])
        self.processed += count
        return at

    def run(self, until: float | None = None) -> None:
        """Run entries until none is left or the next one is later than ``until`` (then ``now`` becomes
        ``until``)."""
        heap = self._heap
        while heap and (until is None or heap[0][0] <= until):
            self.step()
        if until is not None and until > self.now:
            self.now = until

    def __len__(self) -> int:
        return len(self._heap)


__all__ = ["Callback", "EventLoop", "Priority"]
