"""Ctrl-C and SIGTERM heard by a long-running command (``kubeflux serve``, ``kubeflux kube up``) without a lock in
the signal handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is, and so inside a
``threading.Event.wait`` too: an ``Event.set`` there takes the event's lock, which the same thread may be holding at
that instant (``Event`` and ``Condition`` use a plain ``Lock``), and the command waits for itself forever. The
window is a few bytecodes a wait, wider when other threads hold the interpreter; it hung ``kubeflux kube up`` once
in a CI run (CPython's gh-126434 shows the same for ``multiprocessing.Event``). Here the handler only stores the
signal's number, and the command's loop looks at it between its sleeps.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable
from types import FrameType

__all__ = ["StopSignals"]


class StopSignals:
    """Installs a handler for ``signals`` (SIGINT and SIGTERM by default) that records the first one heard. Make it
    in the main thread (as ``signal.signal`` requires), before saying that the command runs: a script that signals
    on that line is heard."""

    def __init__(self, signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self.heard: signal.Signals | None = None
        """The first stop signal received, None until then."""
        for sig in signals:
            signal.signal(sig, self._hear)

    def _hear(self, signum: int, frame: FrameType | None) -> None:
        if self.heard is None:
            self.heard = signal.Signals(signum)  # one store, no lock: see the module docstring

    def wait(self, seconds: float) -> bool:
        """Whether a stop signal has come, after sleeping ``seconds`` when none had (a signal does not cut the sleep
        short: the caller's loop answers within ``seconds``)."""
        if self.heard is None:
            time.sleep(seconds)
        return self.heard is not None
