"""Where a command's time goes: named phases, each with its wall and CPU seconds (``kubeflux simulate -v``).

timer = PhaseTimer()
with timer.phase("read workload"):
    ...
for line in timer.lines():
    print(line)  # "read workload           1.92 s wall   1.90 s CPU"
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class PhaseTimer:
    """Phases in the order they ended: (name, wall seconds, CPU seconds of this process); ``beside``: phases that
    ran at the same time in a child process (:mod:`kubeflux.sim.output.parallel`), left out of the total."""

    phases: list[tuple[str, float, float]] = field(default_factory=list)
    beside: list[tuple[str, float, float]] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body as ``name`` (recorded even when it raises)."""
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.phases.append((name, time.perf_counter() - wall, time.process_time() - cpu))

    def lines(self) -> list[str]:
        """One line per phase, then those of a child process, then the total of this process's, aligned."""
        total = ("total", sum(p[1] for p in self.phases), sum(p[2] for p in self.phases))
        rows = [*self.phases, *((f"{name} (in a child, meanwhile)", w, c) for name, w, c in self.beside), total]
        width = max((len(name) for name, _, _ in rows), default=0)
        return [f"{name:<{width}}  {wall:8.2f} s wall  {cpu:8.2f} s CPU" for name, wall, cpu in rows]


__all__ = ["PhaseTimer"]
