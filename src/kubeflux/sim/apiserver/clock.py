"""The served cluster's clock: wall time, or wall time accelerated ``speed`` times (``cluster serve --speed``).

Simulated time is Unix seconds that start at the wall time the server started and run ``speed`` times faster;
object timestamps (creation, conditions, events, deletion), the kubelet's stage delays and the schedulers' ``now``
all read it. The stage timers of the kubelet and the schedulers' wake-ups wait ``seconds / speed`` of wall time.
Virtual time (jumping to the next event when the cluster is quiescent) is not served yet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["ServedClock"]


@dataclass(frozen=True, slots=True)
class ServedClock:
    speed: float = 1.0
    origin: float = field(default_factory=time.time)
    """Wall (Unix) time at which simulated time equals wall time."""

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise ValueError(f"speed must be positive, got {self.speed}")

    def __call__(self) -> float:
        """The simulated time now (Unix seconds)."""
        return self.origin + (time.time() - self.origin) * self.speed

    def wall(self, seconds: float) -> float:
        """Wall seconds to wait for ``seconds`` of simulated time to pass."""
        return max(seconds, 0.0) / self.speed
