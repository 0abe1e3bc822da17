"""One piece of output work in a forked child while the parent does another (``kubeflux simulate``'s CSV files while
it draws the plots): on two cores the outputs of an LCG run take the time of the longer half, not of both.

:func:`start` forks (the child shares the run's records copy-on-write, writes its files, sends its phase times back
through a pipe and leaves with ``os._exit``); :meth:`Forked.join` waits for it and adds its phases to the parent's
timer. Where forking is not safe or not useful — no ``os.fork`` (Windows), one core, other threads alive (a forked
child gets only the calling thread, and the locks the others held stay locked) — or when the child fails (its
traceback goes to stderr), the work runs in the parent instead, so the files are always written.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from kubeflux.sim.output.timing import PhaseTimer

Work = Callable[[PhaseTimer], None]


def can_fork() -> bool:
    """Whether a child may run work beside this process: fork exists, two cores or more, no other thread."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


@dataclass
class Forked:
    """Work started by :func:`start`: in a child (``pid``), or not yet run (``pid`` None)."""

    work: Work
    pid: int | None
    reader: int | None

    def join(self, timer: PhaseTimer) -> None:
        """Wait for the child and take its phases; run the work here if it did not run or failed."""
        if self.pid is None or self.reader is None:
            self.work(timer)
            return
        with os.fdopen(self.reader, "rb") as stream:
            sent = stream.read()
        _, status = os.waitpid(self.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            self.work(timer)
            return
        timer.beside.extend((name, wall, cpu) for name, wall, cpu in json.loads(sent or b"[]"))


def start(work: Work, *, parallel: bool = True) -> Forked:
    """Start ``work`` in a forked child when :func:`can_fork` (and ``parallel``); else leave it for :meth:`join`."""
    if not (parallel and can_fork()):
        return Forked(work, None, None)
    sys.stdout.flush()
    sys.stderr.flush()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work, report its phases, leave without running the parent's exit handlers
        os.close(reader)
        code = 1
        try:
            timer = PhaseTimer()
            work(timer)
            with os.fdopen(writer, "wb") as stream:
                stream.write(json.dumps(timer.phases).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(writer)
    return Forked(work, pid, reader)


__all__ = ["Forked", "can_fork", "start"]
