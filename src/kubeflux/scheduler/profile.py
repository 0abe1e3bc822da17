"""The settings one kubeflux scheduler runs with, shared by its parts (books, informer, filter, placer, reserver).

One object that every part is given, as kube-scheduler's profile is: a setting changed after the scheduler was made
(the simulator's ``--sockets`` sets :attr:`Profile.shape`, a sweep sets :attr:`Profile.policy`, both before the
first node is seen) reaches every part at once. It also holds the two conversions every part makes the same way:
a time to the engine's whole seconds (:func:`tick`) and a pod's planned time (:meth:`Profile.planned`).
"""

from __future__ import annotations

import math
from typing import Final

from kubeflux.scheduler.kept import keeps_reservations
from kubeflux.scheduler.objects import Pod
from kubeflux.scheduler.sharing import SharingPolicy
from kubeflux.scheduler.translate import NodeShape, pod_duration

__all__ = ["LOWER_PRIORITY", "NEVER", "PREEMPTION_SETTINGS", "Profile", "tick"]

LOWER_PRIORITY: Final = "lowerPriority"
NEVER: Final = "never"
PREEMPTION_SETTINGS: Final = (NEVER, LOWER_PRIORITY)
"""The values of a profile's ``preemption`` setting: ``lowerPriority`` (kube-scheduler's default) lets a job that
cannot start now evict jobs of lower priority (:mod:`kubeflux.scheduler.preempting`); ``never`` does not."""


class Profile:
    """What one kubeflux scheduler is configured with (see the module docstring)."""

    def __init__(
        self,
        name: str,
        policy: str,
        sharing: SharingPolicy,
        horizon: int,
        shape: NodeShape | None = None,
        preemption: str = LOWER_PRIORITY,
    ) -> None:
        if preemption not in PREEMPTION_SETTINGS:
            raise ValueError(f"preemption must be one of {', '.join(PREEMPTION_SETTINGS)}, got {preemption!r}")
        self.name = name
        """The ``schedulerName`` it owns."""
        self.policy = policy
        """The match policy of pods that name none (``kubeflux.io/match-policy``)."""
        self.sharing = sharing
        self.horizon = horizon
        """The engine's time axis: whole seconds from 0 to this."""
        self.shape = shape or NodeShape()
        """How nodes become graph vertices (sockets, which resources are gpus)."""
        self.preemption = preemption
        """``lowerPriority`` or ``never`` (:data:`PREEMPTION_SETTINGS`)."""
        self.keep_reservations = keeps_reservations(policy)
        """Whether a gang's reservation may be put back as it was when the engine would make it again
        (:mod:`kubeflux.scheduler.kept`); False re-plans every one."""

    def planned(self, pod: Pod, start: int, *, reserve: bool = False) -> int:
        """Seconds to plan the pod's allocation for, from ``start``: its duration, cut at the horizon.

        A pod without a duration holds its resources to the end of the graph's horizon; reserved for later, it
        plans half the time left, so that a later start still fits the horizon.
        """
        left = self.horizon - start
        duration = pod_duration(pod)
        if duration is None:
            return left // 2 if reserve else left
        return max(1, min(math.ceil(duration), left // 2 if reserve else left))


def tick(now: float) -> int:
    """A time (seconds) as the engine's whole second it falls in (never before 0)."""
    return max(0, math.floor(now))
