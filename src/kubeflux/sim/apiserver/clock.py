"""The served cluster's clocks: wall time, wall time accelerated ``speed`` times, or virtual time.

Simulated time is Unix seconds. Object timestamps (creation, conditions, events, deletion, leases), the kubelet's
stage delays and the schedulers' ``now`` all read the clock (``clock()``); every timer of the served cluster (a
kubelet stage, a Job's deadline, a scheduler's wake-up, a replayed submission) is set through
:meth:`Clock.call_later` (a virtual clock also :meth:`VirtualClock.call_at`), in simulated seconds, with a tie order
(:class:`kubeflux.sim.clock.Priority`, the simulator's).

* :class:`~kubeflux.wallclock.WallClock` (``--clock wall``, ``--speed X``; the one ``kubeflux serve`` keeps too):
  simulated time starts at the wall time the server started and runs ``speed`` times faster; a timer waits
  ``seconds / speed`` of wall time on the event loop, and :class:`WallEvents` runs the served cluster's
  :class:`~kubeflux.sim.clock.EventLoop` on it.
* :class:`VirtualClock` (``--clock virtual``): simulated time stands still while the cluster works and jumps to
  the next timer when it is quiescent. Timers are cancellable entries of the simulator's
  :class:`~kubeflux.sim.clock.EventLoop`, keyed ``(time, priority, sequence)``; :meth:`VirtualClock.advance`
  runs every timer of the next time point. *When* to advance is not the clock's business:
  :mod:`kubeflux.sim.apiserver.pacer` decides (the quiescence rule).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from kubeflux.apiobjects.manifests import format_timestamp
from kubeflux.sim.clock import EventLoop, Handle, Priority

__all__ = ["Callback", "Clock", "Loop", "Timer", "VirtualClock", "WallEvents", "time_document"]

Loop = asyncio.AbstractEventLoop
"""The server's asyncio loop (a :class:`Clock` timer's callback runs on it)."""
Callback = Callable[..., Any]
"""A timer's callback, called with the timer's arguments."""


class Timer(Protocol):
    """What :meth:`Clock.call_later` returns (an :class:`asyncio.TimerHandle` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """The served cluster's time (see the module docstring)."""

    @property
    def mode(self) -> str:
        """``wall`` or ``virtual``."""
        ...

    @property
    def speed(self) -> float:
        """How many simulated seconds pass per wall second (0 in virtual time: it is not a rate)."""
        ...

    def __call__(self) -> float:
        """The simulated time now (Unix seconds)."""
        ...

    def call_later(self, loop: Loop, delay: float, priority: Priority, callback: Callback, *args: Any) -> Timer:
        """Run ``callback(*args)`` on ``loop`` ``delay`` simulated seconds from now (a negative delay: now)."""
        ...


class _Timer:
    """One timer of a :class:`VirtualClock`: an entry of its :class:`~kubeflux.sim.clock.EventLoop`, and whether it
    counts in :attr:`VirtualClock.working`."""

    __slots__ = ("args", "callback", "clock", "handle", "pending", "working")

    def __init__(self, clock: VirtualClock, working: bool, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.clock = clock
        self.working = working
        self.callback = callback
        self.args = args
        self.pending = True
        self.handle: Handle | None = None

    def _done(self) -> None:
        self.pending = False
        if not self.working:
            self.clock._wakeups -= 1

    def cancel(self) -> None:
        if self.pending:
            self._done()
            assert self.handle is not None
            self.handle.cancel()


def _run(timer: _Timer) -> None:
    timer._done()
    timer.callback(*timer.args)


class VirtualClock:
    """Virtual time: stands still until :meth:`advance` jumps it to the next timer.

    The timers are entries of an :class:`~kubeflux.sim.clock.EventLoop` (:attr:`events`), the simulator's, set with
    :meth:`~kubeflux.sim.clock.EventLoop.schedule_cancellable`. ``origin`` (Unix seconds, default the wall time
    now, whole seconds) is the simulated time at the start. Timers run on the loop of whoever calls :meth:`advance`
    (the pacer, on the server's loop); ``loop`` arguments are accepted for the :class:`Clock` interface and not
    used.
    """

    def __init__(self, origin: float | None = None) -> None:
        start = float(int(time.time())) if origin is None else float(origin)
        if not math.isfinite(start) or start < 0:
            raise ValueError(f"the virtual clock's origin must be a non-negative time, got {origin}")
        self.origin = start
        self.events = EventLoop(start)
        """The timers, in the simulator's ``(time, priority, sequence)`` order."""
        self.jumps = 0
        """How many time points :meth:`advance` has run."""
        self._wakeups = 0
        """Schedulers' wake-ups set and not yet run nor cancelled."""
        self.scheduled: Callable[[], None] | None = None
        """Called whenever a timer is set (the pacer sets it to notice new work while idle)."""
        self.jumped: list[Callable[[float], None]] = []
        """Called with the new time at each jump, before its timers run (periodic work that must not itself make
        time jump, such as lease heartbeats, rides on the time points that happen anyway)."""

    @property
    def mode(self) -> str:
        return "virtual"

    @property
    def speed(self) -> float:
        return 0.0

    @property
    def now(self) -> float:
        return self.events.now

    @property
    def working(self) -> int:
        """Entries pending other than schedulers' wake-ups (timers, and the served cluster's own entries on
        :attr:`events`): 0 means that only a scheduler's own timers can still change anything."""
        return len(self.events) - self._wakeups

    def catch_up(self) -> None:
        """Nothing: virtual time is where the last time point left it (see :class:`WallEvents`)."""

    def arm(self) -> None:
        """Entries may have been set on :attr:`events` directly: tell the pacer (:attr:`scheduled`)."""
        if self.scheduled is not None:
            self.scheduled()

    def __call__(self) -> float:
        return self.events.now

    def call_at(self, when: float, priority: Priority, callback: Callback, *args: Any) -> Timer:
        """Run ``callback(*args)`` at simulated time ``when`` (not before now)."""
        if math.isnan(when):
            raise ValueError("cannot set a timer at NaN")
        working = priority < Priority.WAKEUP
        timer = _Timer(self, working, callback, args)
        events = self.events
        timer.handle = events.schedule_cancellable(max(when, events.now), int(priority), _run, timer)
        if not working:
            self._wakeups += 1
        if self.scheduled is not None:
            self.scheduled()
        return timer

    def call_later(self, loop: Loop, delay: float, priority: Priority, callback: Callback, *args: Any) -> Timer:
        return self.call_at(self.events.now + max(delay, 0.0), priority, callback, *args)

    def next_time(self) -> float:
        """The time of the next timer that is not cancelled, or ``inf`` when none is left."""
        return self.events.peek()

    def advance(self) -> float | None:
        """Jump to the next time point and run its timers (those they set for the same time too), in
        ``(priority, sequence)`` order. Returns the new time, or None when no timer is left."""
        events = self.events
        at = events.peek()
        if at == math.inf:
            return None
        events.now = at
        self.jumps += 1
        for listener in list(self.jumped):
            listener(at)
        if events.peek() == at:  # a listener may have cancelled the time point's timers
            events.run_time_point()
        return at


class WallEvents:
    """The simulator's :class:`~kubeflux.sim.clock.EventLoop` (:attr:`events`) in wall time (a
    :class:`~kubeflux.wallclock.WallClock`): an entry runs on ``loop`` when the clock reaches its time.

    It is the served cluster's :class:`Clock` in wall time, as a :class:`VirtualClock` is in virtual time: every
    timer (:meth:`call_later`: a Job's sync, a scheduler's wake-up, a replayed submission) and every stage of the
    cluster's pods is an entry of the one loop, in the simulator's ``(time, priority, sequence)`` order. Whoever sets
    entries on :attr:`events` directly calls :meth:`catch_up` first (the loop's time becomes the clock's, once every
    entry due by then has run) and :meth:`arm` after (an asyncio timer for the earliest entry); a
    :class:`VirtualClock` has the same two calls, so the served cluster (:class:`kubeflux.sim.cluster.Cluster`) runs
    on either.
    """

    def __init__(self, clock: Clock, loop: asyncio.AbstractEventLoop) -> None:
        self.clock, self.loop = clock, loop
        self.mode, self.speed = clock.mode, clock.speed
        """The wall clock's (a clock's mode and speed never change)."""
        self.events = EventLoop(clock())
        self._timer: asyncio.TimerHandle | None = None
        self._armed = math.inf

    def __call__(self) -> float:
        return self.clock()

    def call_later(self, loop: Loop, delay: float, priority: Priority, callback: Callback, *args: Any) -> Timer:
        """An entry ``delay`` simulated seconds from now (``loop`` is :attr:`loop`: accepted for the
        :class:`Clock` interface)."""
        events = self.events
        at = max(self.clock(), events.now) + max(delay, 0.0)
        handle = events.schedule_cancellable(at, int(priority), _call, (callback, args))
        self.arm()
        return handle

    def catch_up(self) -> None:
        """Run every entry due by now, then bring :attr:`events`' time to now."""
        events, now = self.events, self.clock()
        while events.peek() <= now:
            events.run_time_point()
        events.now = max(events.now, now)

    def arm(self) -> None:
        """Set (or bring forward) the asyncio timer of the earliest entry."""
        at = self.events.peek()
        if at >= self._armed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._armed = at
        self._timer = self.loop.call_later(max(at - self.clock(), 0.0) / self.clock.speed, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed = None, math.inf
        try:
            self.catch_up()
        finally:  # an entry that raised leaves the rest of its time point for the next firing
            self.arm()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._armed = None, math.inf


def _call(payload: tuple[Callable[..., Any], tuple[Any, ...]]) -> None:
    callback, args = payload
    callback(*args)


def time_document(clock: Clock, now: float) -> dict[str, Any]:
    """What ``GET /kubeflux/time`` answers: the simulated time ``now`` (Unix seconds and RFC 3339), the clock's
    mode and speed."""
    return {"now": now, "time": format_timestamp(now), "speed": clock.speed, "clock": clock.mode}
