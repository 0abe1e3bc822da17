"""The binder's writer threads: each pod's writes on one thread, in order, Bindings first, events about Bindings
done after a burst (the rules are the binder's: :mod:`kubeflux.kube.binder`).

A write is a :class:`Write`; its ``kind`` says in which of its thread's three lanes it waits:

* ``bind`` and ``evict``: sent before anything else, a Binding even while stopping;
* ``advisory`` (a condition, an event decided before the pod's latest Binding: dropped unsent once a later
  Binding is queued) and ``write`` (any other);
* ``after`` (an event about a Binding done): waits while Bindings are queued anywhere or were within
  ``events_quiet`` seconds, unless ``events_backlog`` wait already.

A write given its own data (``together``: a Binding's, an Event's) is taken with the writes of its kind queued
right behind it that have theirs (at most ``pipeline``) and handed with them to ``send_together``, to go back to
back on one connection; any other is sent alone (its ``run``).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from kubeflux.kube.keepalive import PIPELINE

__all__ = ["Write", "Writers"]

log = logging.getLogger("kubeflux.serve")

Data = TypeVar("Data")


class Write(NamedTuple, Generic[Data]):
    """A write queued on a thread."""

    run: Callable[[], None]
    seq: int
    uid: str
    """The pod's."""
    kind: str
    together: Data | None = None
    """The write's own data: it may go with the writes of its kind queued after it (``send_together``)."""


class _Lanes(Generic[Data]):
    """One thread's writes: Bindings and evictions, then conditions, then events about Bindings done."""

    def __init__(self) -> None:
        self.binds: deque[Write[Data]] = deque()
        self.writes: deque[Write[Data]] = deque()
        self.later: deque[Write[Data]] = deque()
        self.ready = threading.Condition()
        self.closed = False


def _taken(lane: deque[Write[Data]], most: int) -> list[Write[Data]]:
    """The write at the head of ``lane`` and, when it has its data, those right behind it that have theirs (at most
    ``most`` in all)."""
    taken = [lane.popleft()]
    if taken[0].together is not None:
        kind = taken[0].kind
        while lane and lane[0].together is not None and lane[0].kind == kind and len(taken) < most:
            taken.append(lane.popleft())
    return taken


class Writers(Generic[Data]):
    """``workers`` threads sending writes (see the module docstring); ``send_together`` sends writes taken together
    (all of one kind), calling :meth:`finished` for each (:meth:`run` for one it sends alone)."""

    def __init__(
        self,
        workers: int,
        send_together: Callable[[list[Write[Data]]], None],
        events_quiet: float,
        events_backlog: int,
        pipeline: int = PIPELINE,
    ) -> None:
        self.send_together = send_together
        self.pipeline = pipeline
        """Writes taken together at most."""
        self.events_quiet = events_quiet
        self.events_backlog = events_backlog
        self.closing = False
        """Stopping: only Bindings are still sent, events about Bindings done no longer wait."""
        self.abandoned = False
        """Stopped past the grace: nothing more is sent."""
        self._lanes: list[_Lanes[Data]] = [_Lanes() for _ in range(workers)]
        self._bind_seq: dict[str, int] = {}
        """Pod uid → the sequence number of its latest Binding queued: older advisory writes for it are stale."""
        self._seq = 0
        self._pending = 0
        self._binding = 0
        """Bindings queued or being sent, on every thread."""
        self._last_bind = 0.0
        """When (monotonic) the last Binding was queued."""
        self._later = 0
        """Events about Bindings done, not written yet."""
        self._idle = threading.Condition()
        self._threads = [
            threading.Thread(target=self._work, args=(lanes,), daemon=True, name=f"binder-{i}")
            for i, lanes in enumerate(self._lanes)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def pending(self) -> int:
        """Writes queued or being sent."""
        return self._pending

    def submit(self, route: str, uid: str, run: Callable[[], None], kind: str, together: Data | None = None) -> None:
        """Queue ``run`` (a write about pod ``uid``) on ``route``'s thread (a pod's key, or what writes of several
        pods share); ``together``: its data, for it to go with others (see the module docstring)."""
        with self._idle:
            self._pending += 1
            self._seq += 1
            seq = self._seq
            if kind == "bind":
                self._bind_seq[uid] = seq
                self._binding += 1
                self._last_bind = time.monotonic()
            elif kind == "after":
                self._later += 1
        lanes = self._lanes[zlib.crc32(route.encode()) % len(self._lanes)]
        lane = lanes.binds if kind in ("bind", "evict") else lanes.later if kind == "after" else lanes.writes
        with lanes.ready:
            lane.append(Write(run, seq, uid, kind, together))
            lanes.ready.notify()

    def forget(self, uid: str) -> None:
        with self._idle:
            self._bind_seq.pop(uid, None)

    def _events_due(self) -> tuple[float, int]:
        """Seconds an event about a Binding done should still wait (0: send it), and how many may go now."""
        if self.closing:
            return 0.0, self.pipeline
        beyond = self._later - self.events_backlog + 1
        if beyond > 0:  # the oldest beyond the backlog go between the Bindings
            return 0.0, min(beyond, self.pipeline)
        if self._binding:
            return self.events_quiet, 0
        wait = self._last_bind + self.events_quiet - time.monotonic()
        return (wait, 0) if wait > 0.0 else (0.0, self.pipeline)

    def _next(self, lanes: _Lanes[Data]) -> list[Write[Data]]:
        """The next writes of a thread: one, or several to go together (see the module docstring); none: stopping
        and nothing is left."""
        with lanes.ready:
            while True:
                if lanes.binds:
                    return _taken(lanes.binds, self.pipeline)
                if lanes.writes:
                    return [lanes.writes.popleft()]
                if lanes.later:
                    wait, due = self._events_due()
                    if due:
                        return _taken(lanes.later, due)
                    lanes.ready.wait(wait)
                elif lanes.closed:
                    return []
                else:
                    lanes.ready.wait()

    def _work(self, lanes: _Lanes[Data]) -> None:
        while True:
            taken = self._next(lanes)
            if not taken:
                return
            if taken[0].together is None:
                self.run(taken[0])
            elif self._sent(taken[0]):
                self.send_together(taken)
            else:
                for write in taken:
                    self.finished(write)

    def _sent(self, write: Write[Data]) -> bool:
        """Whether a write of ``write``'s kind is still sent (while stopping, only Bindings; none past the grace)."""
        return not self.abandoned and (write.kind == "bind" or not self.closing)

    def run(self, write: Write[Data]) -> None:
        """Send one write (unless it is stale or no longer sent), then count it done."""
        try:
            stale = write.kind == "advisory" and self._bind_seq.get(write.uid, -1) > write.seq
            if not stale and self._sent(write):
                write.run()
        except Exception:  # one bad write never stops the writer
            log.exception("writing a decision failed")
        finally:
            self.finished(write)

    def finished(self, write: Write[Data]) -> None:
        """Count ``write`` done (sent or not)."""
        with self._idle:
            self._pending -= 1
            if write.kind == "bind":
                self._binding -= 1
            elif write.kind == "after":
                self._later -= 1
            if not self._pending:
                self._idle.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every write submitted so far is done; whether it is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, grace: float, abandoning: Callable[[], None] = lambda: None) -> None:
        """End the threads once their Bindings are sent (the rest is dropped, :attr:`closing` being set), waiting
        at most ``grace`` seconds before dropping them too (``abandoning`` is called then: the writes under way
        stop where they can)."""
        self.closing = True
        for lanes in self._lanes:
            with lanes.ready:
                lanes.closed = True
                lanes.ready.notify()
        deadline = time.monotonic() + grace
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            log.warning("binder: %d writes not sent within %gs of stopping; dropped", self._pending, grace)
            self.abandoned = True
            abandoning()
            for thread in self._threads:
                thread.join()
