"""Progress of a simulated run for ``kubeflux simulate``: a live bar on a terminal, a line every few seconds
otherwise (CI logs, ``make demo | tee``), both with an estimate of the time left.

The measure of progress is the share of the workload's jobs submitted so far, which the driver reports with the
virtual time (:data:`kubeflux.sim.driver.Progress`). The estimate of the time left assumes the rest goes at the
pace so far; once every job is submitted the run only drains (running jobs end, waiting ones start), which it
says instead of an estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn

__all__ = ["LINE_EVERY_SECONDS", "ProgressReporter", "eta_seconds"]

LINE_EVERY_SECONDS: Final = 10.0
"""Wall seconds between two progress lines when the output is not a terminal."""


def eta_seconds(elapsed: float, submitted: int, total: int) -> float | None:
    """Wall seconds left if the remaining jobs are submitted at the pace so far; None when nothing is known."""
    if submitted <= 0 or total <= 0 or submitted >= total or elapsed <= 0:
        return None
    return elapsed * (total - submitted) / submitted


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressReporter:
    """Reports one run. Call :meth:`start`, then :meth:`update` as often as the driver likes (it only prints when
    due), then :meth:`stop`. ``interactive``: a rich bar (a terminal); otherwise plain lines on ``console``, the
    first at once and then every ``every`` wall seconds. ``clock`` is for tests."""

    def __init__(
        self,
        label: str,
        total: int,
        console: Console,
        *,
        interactive: bool,
        every: float = LINE_EVERY_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.label = label
        self.total = total
        self.console = console
        self.interactive = interactive
        self.every = every
        self.clock = clock
        self._began = 0.0
        self._next_line = 0.0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def start(self) -> None:
        self._began = self.clock()
        if self.interactive:
            self._bar = Progress(
                TextColumn(escape(self.label)),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} jobs submitted"),
                TextColumn("t={task.fields[now]:.0f}s"),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, now=0.0)
        else:
            self.console.print(f"{escape(self.label)}: simulating {self.total} jobs …", highlight=False)
            self._next_line = self._began + self.every

    def update(self, now: float, submitted: int) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=submitted, now=now)
            return
        wall = self.clock()
        if wall < self._next_line:
            return
        self._next_line = wall + self.every
        self.console.print(self.line(now, submitted, wall - self._began), highlight=False)

    def line(self, now: float, submitted: int, elapsed: float) -> str:
        """One progress line: jobs submitted, virtual time, wall time so far and the estimate left."""
        eta = eta_seconds(elapsed, submitted, self.total)
        if submitted >= self.total:
            left = "all submitted, draining"
        elif eta is None:
            left = "time left unknown yet"
        else:
            left = f"about {_duration(eta)} left"
        share = 100.0 * submitted / self.total if self.total else 100.0
        return (
            f"{escape(self.label)}: {submitted}/{self.total} jobs submitted ({share:.0f} %), "
            f"virtual t={now:.0f}s, {_duration(elapsed)} elapsed, {left}"
        )

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
