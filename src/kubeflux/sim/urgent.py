"""Urgent jobs in a workload (``kubeflux simulate --urgent FRACTION[:PRIORITY]``): a seeded fraction of its jobs is
given a priority on all their pods, so that a trace with no priorities of its own shows what preemption does.

:func:`parse_urgent` reads the option (``0.1`` or ``0.1:5000``; the priority is :data:`URGENT_PRIORITY` by
default); :func:`mark_urgent` chooses the jobs, ``round(FRACTION × jobs that have pods)`` of them, with a generator
seeded by the run's ``--seed`` (the same jobs under every scheduler of the run), among the jobs of the workload as
mapped to the cluster (a rejected job has no pods, and is never chosen); :func:`with_priority` sets the priority
of the jobs named. A pod's ``preemptionPolicy`` stays as its workload gives it (``PreemptLowerPriority`` for a
trace's).
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Final

from kubeflux.match.picklable import Picklable
from kubeflux.sim.workloads.model import Workload

__all__ = ["URGENT_PRIORITY", "Urgent", "mark_urgent", "parse_urgent", "with_priority"]

URGENT_PRIORITY: Final = 1000
"""The priority ``--urgent FRACTION`` gives when it names none."""
LOWEST_PRIORITY: Final = -(2**31)
HIGHEST_PRIORITY: Final = 1_000_000_000
"""The highest a user's PriorityClass may have (kube-apiserver's ``HighestUserDefinablePriority``)."""


@dataclass(frozen=True, slots=True, init=False)
class Urgent(Picklable):
    """``--urgent FRACTION[:PRIORITY]`` read: the share of jobs made urgent, and their pods' priority. Its own
    ``__init__`` and :class:`~kubeflux.match.picklable.Picklable`: compiled, a frozen dataclass is unpickled (a
    sweep's or an experiment's worker process) only so."""

    fraction: float
    priority: int = URGENT_PRIORITY

    def __init__(self, fraction: float, priority: int = URGENT_PRIORITY) -> None:
        object.__setattr__(self, "fraction", fraction)
        object.__setattr__(self, "priority", priority)


def parse_urgent(text: str) -> Urgent:
    """``0.1`` → ``Urgent(0.1, 1000)``; ``0.25:5000`` → ``Urgent(0.25, 5000)``. Raises ValueError naming the
    option when the fraction is no number from 0 to 1 or the priority no integer from -2,147,483,648 to
    1,000,000,000."""
    fraction_text, _, priority_text = text.strip().partition(":")
    try:
        fraction = float(fraction_text)
    except ValueError:
        fraction = -1.0
    if not 0.0 <= fraction <= 1.0:  # NaN too
        raise ValueError(f"--urgent {text!r}: FRACTION must be a number from 0 to 1 (FRACTION[:PRIORITY])")
    if not priority_text:
        return Urgent(fraction)
    try:
        priority = int(priority_text)
    except ValueError:
        priority = HIGHEST_PRIORITY + 1
    if not LOWEST_PRIORITY <= priority <= HIGHEST_PRIORITY:
        raise ValueError(
            f"--urgent {text!r}: PRIORITY must be an integer from {LOWEST_PRIORITY:,} to {HIGHEST_PRIORITY:,} (the "
            "highest a user's PriorityClass may have)"
        )
    return Urgent(fraction, priority)


def mark_urgent(workload: Workload, urgent: Urgent, seed: int) -> Workload:
    """A new workload whose chosen jobs (see the module docstring) have ``urgent.priority`` on every pod; the input
    is not modified. Nothing is chosen when the fraction rounds to no job."""
    candidates = [job.id for job in workload.jobs if job.pods]
    count = round(urgent.fraction * len(candidates))
    if count == 0:
        return workload
    chosen = random.Random(f"kubeflux-urgent:{seed}").sample(candidates, count)
    return with_priority(workload, set(chosen), urgent.priority)


def with_priority(workload: Workload, ids: Collection[str], priority: int) -> Workload:
    """A new workload in which the jobs whose id is in ``ids`` have ``priority`` on every pod (the others as they
    were)."""
    jobs = [
        replace(job, pods=[replace(pod, priority=priority) for pod in job.pods]) if job.id in ids else job
        for job in workload.jobs
    ]
    return replace(workload, jobs=jobs)
