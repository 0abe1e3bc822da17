"""Wall time, or wall time ``speed`` times faster: the clock of ``kubeflux serve`` and ``kubeflux cluster serve``.

One type for both shells: ``cluster serve --clock wall --speed X`` serves its cluster on a :class:`WallClock`, and
``serve`` run against it reads the same clock back (``GET /kubeflux/time``: the time and speed it publishes) and
keeps its own :class:`WallClock` from there. Simulated time is Unix seconds: ``origin`` at the wall time
``wall_origin``, running ``speed`` times faster. (``cluster serve --clock virtual`` is
:class:`kubeflux.sim.apiserver.clock.VirtualClock`: no wall time at all.)
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["WallClock"]


@dataclass(frozen=True, slots=True)
class WallClock:
    """``origin`` simulated seconds at wall (Unix) time ``wall_origin`` (default: ``origin``), running ``speed``
    times faster than wall time. Raises ValueError on a speed that is not positive and finite."""

    speed: float = 1.0
    origin: float = field(default_factory=time.time)
    wall_origin: float | None = None

    def __post_init__(self) -> None:
        if not self.speed > 0 or math.isinf(self.speed):
            raise ValueError(f"speed must be positive, got {self.speed}")
        if self.wall_origin is None:
            object.__setattr__(self, "wall_origin", self.origin)

    @property
    def mode(self) -> str:
        """``wall`` (an accelerated clock too: it follows wall time)."""
        return "wall"

    def __call__(self) -> float:
        """The simulated time now (Unix seconds)."""
        assert self.wall_origin is not None
        return self.origin + (time.time() - self.wall_origin) * self.speed

    def wall(self, seconds: float) -> float:
        """Wall seconds to wait for ``seconds`` of simulated time to pass (a negative span: none)."""
        return max(seconds, 0.0) / self.speed

    def call_later(
        self, loop: asyncio.AbstractEventLoop, delay: float, priority: int, callback: Callable[..., Any], *args: Any
    ) -> asyncio.TimerHandle:
        """Run ``callback(*args)`` on ``loop`` ``delay`` simulated seconds from now (``priority``, the tie order of
        a virtual clock, means nothing in wall time)."""
        return loop.call_later(self.wall(delay), callback, *args)
