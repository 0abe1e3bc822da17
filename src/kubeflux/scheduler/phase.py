"""A pod's phase, in a module of its own because the scheduler and the simulator read it on every event.

Compiled (mypyc), a member of an enum defined in a compiled module (``PodPhase.RUNNING``) is read as a C static;
defined in an interpreted one (:mod:`kubeflux.scheduler.objects` stays pure, see ``tools/build_native.py``) it is a
module dictionary lookup and an attribute read at each use. :mod:`kubeflux.scheduler.objects` re-exports it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


_PHASES: Final = {phase.value: phase for phase in PodPhase}


def pod_phase(text: str) -> PodPhase:
    """``PodPhase(text)`` at a dictionary's cost (the enum's own lookup by value is ~1 µs, and every pod event is
    read through it): ValueError for a text that is no phase."""
    phase = _PHASES.get(text)
    return PodPhase(text) if phase is None else phase
