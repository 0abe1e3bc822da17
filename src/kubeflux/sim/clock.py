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

An entry set with :meth:`EventLoop.schedule_cancellable` returns a :class:`Handle` whose :meth:`~Handle.cancel`
drops it: it never runs, is not counted, and neither :meth:`EventLoop.peek` nor :meth:`EventLoop.run_time_point`
ever stops at its time. The served cluster's virtual clock (:mod:`kubeflux.sim.apiserver.clock`) is this loop with
such entries. A cancelled entry leaves the heap lazily (when it reaches the top, or when cancelled entries are
most of the heap), so the plain :meth:`EventLoop.schedule` the simulator uses costs nothing more.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from enum import IntEnum
from heapq import heappop, heappush
from typing import Any, Final


class Priority(IntEnum):
    """Tie order of entries scheduled for the same virtual time (lower first)."""

    RELEASE = 0
    NODE = 1
    STAGE = 2
    ARRIVAL = 3
    WAKEUP = 4


Callback = Callable[[Any], None]


_PENDING: Final = 0
_DONE: Final = 1
_CANCELLED: Final = 2


class Handle:
    """An entry of :meth:`EventLoop.schedule_cancellable`: :meth:`cancel` drops it if it has not run yet."""

    __slots__ = ("_loop", "_state", "callback", "payload")

    def __init__(self, loop: EventLoop, callback: Callback, payload: Any) -> None:
        self._loop = loop
        self._state = _PENDING
        self.callback = callback
        self.payload = payload

    @property
    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def cancel(self) -> None:
        """Drop the entry; nothing when it has already run or been cancelled."""
        if self._state == _PENDING:
            self._state = _CANCELLED
            self._loop._cancelled_entry()


def _fire(handle: Handle) -> None:
    """The callback of every cancellable entry: runs the handle's callback unless it was cancelled (a cancelled
    entry that reaches a time point is popped here and taken back out of the loop's count)."""
    if handle._state == _PENDING:
        handle._state = _DONE
        handle.callback(handle.payload)
    else:
        loop = handle._loop
        loop._cancelled -= 1
        loop.processed -= 1


class EventLoop:
    """Virtual time and a heap of callbacks.

    Times are float seconds. An entry is ``callback(payload)`` at ``at``. Entries of :meth:`schedule` are never
    cancelled — a callback that may have become stale checks its payload (e.g. a pod attempt number) and returns;
    entries of :meth:`schedule_cancellable` can be (see the module docstring).
    """

    __slots__ = ("_cancelled", "_heap", "_sequence", "now", "processed")

    def __init__(self, start: float = 0.0) -> None:
        self.now: float = start
        """The current virtual time: the time of the entry being (or last) processed."""
        self.processed: int = 0
        """How many entries have run (the run's event count)."""
        self._heap: list[tuple[float, int, int, Callback, Any]] = []
        self._sequence = 0
        """The next entry's sequence number."""
        self._cancelled = 0
        """Cancelled entries still in the heap."""

    def schedule(self, at: float, priority: int, callback: Callback, payload: Any = None) -> None:
        """Run ``callback(payload)`` at virtual time ``at`` (not before ``now``)."""
        if not at >= self.now:  # before now, or NaN
            raise ValueError(f"cannot schedule at {at}: the clock is already at {self.now}")
        sequence = self._sequence
        self._sequence = sequence + 1
        heappush(self._heap, (at, priority, sequence, callback, payload))

    def schedule_cancellable(self, at: float, priority: int, callback: Callback, payload: Any = None) -> Handle:
        """:meth:`schedule`, returning a :class:`Handle` that can drop the entry."""
        handle = Handle(self, callback, payload)
        self.schedule(at, priority, _fire, handle)
        return handle

    def _cancelled_entry(self) -> None:
        """A handle was cancelled: count it, and rebuild the heap without the cancelled entries once they are most
        of it (as asyncio does), so that cancelled timers far in the future do not pile up."""
        self._cancelled += 1
        heap = self._heap
        if self._cancelled > 64 and 2 * self._cancelled > len(heap):
            kept = [entry for entry in heap if not (entry[3] is _fire and entry[4]._state == _CANCELLED)]
            heapq.heapify(kept)
            heap[:] = kept
            self._cancelled = 0

    def _drop_cancelled(self) -> None:
        """Pop the cancelled entries off the top of the heap."""
        heap = self._heap
        while heap and heap[0][3] is _fire and heap[0][4]._state == _CANCELLED:
            heappop(heap)
            self._cancelled -= 1

    def peek(self) -> float:
        """The time of the next entry, or ``inf`` when none is left."""
        if self._cancelled:
            self._drop_cancelled()
        return self._heap[0][0] if self._heap else math.inf

    def step(self) -> None:
        """Advance to the next entry and run it. Raises IndexError when nothing is scheduled."""
        if self._cancelled:
            self._drop_cancelled()
        at, _priority, _seq, callback, payload = heappop(self._heap)
        self.now = at
        self.processed += 1
        callback(payload)

    def run_time_point(self) -> float:
        """Run every entry of the next time point, including entries they add for that same time, and return
        the time. Raises IndexError when nothing is scheduled."""
        if self._cancelled:
            self._drop_cancelled()
        heap = self._heap
        at = heap[0][0]
        self.now = at
        pop = heappop
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
        while len(self) > 0 and (until is None or self.peek() <= until):
            self.step()
        if until is not None and until > self.now:
            self.now = until

    def __len__(self) -> int:
        """How many entries are pending (cancelled ones excluded)."""
        return len(self._heap) - self._cancelled


__all__ = ["Callback", "EventLoop", "Handle", "Priority"]
