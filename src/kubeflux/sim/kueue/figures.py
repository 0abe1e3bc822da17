"""The admission layer's figures for the summary: admission wait (as Kueue's ``admission_wait_time_seconds``
observes it: each admission's wait from the workload's creation or its last requeuing after an eviction), quota use
and borrowed share per ClusterQueue over time, preemptions for quota. (``jobs.csv``'s ``admission_wait`` is each
job's wait for its first admission, from its submission.)

Keys (only in a run with Kueue objects): ``admitted_jobs``, ``mean_admission_wait`` (over their admissions),
``never_admitted``, ``quota_preemptions`` (evictions), with ``waitForPodsReady`` ``pods_ready_timeouts`` (evictions
for pods not ready in time), with fair sharing ``fair_sharing_preemptions`` (those of ``quota_preemptions`` that
fair sharing made in another ClusterQueue); per ClusterQueue ``admitted_jobs[<cq>]``,
``mean_admission_wait[<cq>]``, ``quota_preemptions[<cq>]`` (its workloads evicted), and per resource it has a
nominal quota for, summed over its flavors, ``quota_use[<cq>:<resource>]`` (mean usage over [0, last finish] /
nominal quota; absent for a nominal quota of 0, a queue that only borrows) and
``borrowed_share[<cq>:<resource>]`` (the part of its usage above its nominal quota, per flavor,
over its usage, both integrated over time).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubeflux.sim.kueue.admission import Admitter
from kubeflux.sim.kueue.objects import KueueObjects
from kubeflux.sim.output.arrays import step_area
from kubeflux.sim.output.csvcolumns import seconds_column, text_column
from kubeflux.sim.records import JobRecord

Figures = dict[str, int | float]
ADMISSION_COLUMNS = ("cluster_queue", "admission_wait", "quota_evictions")
"""The columns ``jobs.csv`` ends with in a run with Kueue objects (:func:`admission_columns`)."""


def admission_columns(jobs: Sequence[JobRecord]) -> list[list[str]]:
    """:data:`ADMISSION_COLUMNS` of ``jobs.csv``: each job's ClusterQueue, admission wait (seconds, six decimals;
    empty when Kueue never admitted it or does not hold it) and quota evictions."""
    waits = np.array(
        [np.nan if job.admission_time is None else job.admission_time - job.submission_time for job in jobs],
        dtype=np.float64,
    )
    return [
        text_column([job.cluster_queue for job in jobs]),
        seconds_column(waits),
        [str(job.quota_evictions) for job in jobs],
    ]


class UsageSeries:
    """Per ClusterQueue and resource, (time, usage, borrowed) at each change, usage and borrowed summed over
    flavors."""

    def __init__(self, objects: KueueObjects) -> None:
        self.nominal: dict[str, dict[str, int]] = {}
        for cq in objects.cluster_queues.values():
            totals = self.nominal[cq.name] = {}
            for (_flavor, resource), quota in cq.quotas().items():
                totals[resource] = totals.get(resource, 0) + quota.nominal
        self.points: dict[str, list[tuple[float, dict[str, int], dict[str, int]]]] = {name: [] for name in self.nominal}

    def sample(self, now: float, admitter: Admitter) -> None:
        book = admitter.book
        for name, points in self.points.items():
            used: dict[str, int] = {}
            borrowed: dict[str, int] = {}
            for (flavor, resource), amount in book.usage[name].items():
                used[resource] = used.get(resource, 0) + amount
                quota = book.quotas[name].get((flavor, resource))
                over = amount - (quota.nominal if quota is not None else 0)
                if over > 0:
                    borrowed[resource] = borrowed.get(resource, 0) + over
            if points and points[-1][0] == now:
                points[-1] = (now, used, borrowed)
            elif not points or points[-1][1:] != (used, borrowed):
                points.append((now, used, borrowed))

    def integrals(self, name: str, end: float) -> tuple[dict[str, float], dict[str, float]]:
        """∫ usage and ∫ borrowed per resource of ``name`` over [0, ``end``]."""
        points = self.points[name]
        used = {r for _, amounts, _ in points for r in amounts}
        borrowed = {r for _, _, over in points for r in over}
        return (
            {r: step_area([(at, amounts.get(r, 0)) for at, amounts, _ in points], 0.0, end) for r in used},
            {r: step_area([(at, over.get(r, 0)) for at, _, over in points], 0.0, end) for r in borrowed},
        )


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 6) if values else 0.0


def kueue_figures(admitter: Admitter, series: UsageSeries, end: float) -> Figures:
    """The summary figures of a run (module docstring); ``end``: the last finish (the run's makespan's end)."""
    workloads = list(admitter.workloads.values())
    admitted = [wl for wl in workloads if wl.first_admitted is not None]
    figures: Figures = {
        "admitted_jobs": len(admitted),
        "mean_admission_wait": _mean([wait for wl in admitted for wait in wl.waits]),
        "never_admitted": len(workloads) - len(admitted),
        "quota_preemptions": sum(wl.evictions for wl in workloads),
    }
    if admitter.objects.wait_for_pods_ready is not None:
        figures["pods_ready_timeouts"] = sum(wl.timeouts + wl.deactivated for wl in workloads)
    if admitter.objects.fair_sharing is not None:
        figures["fair_sharing_preemptions"] = admitter.fair_evictions
    for name in admitter.objects.cluster_queues:
        mine = [wl for wl in admitted if wl.cluster_queue == name]
        figures[f"admitted_jobs[{name}]"] = len(mine)
        figures[f"mean_admission_wait[{name}]"] = _mean([wait for wl in mine for wait in wl.waits])
        figures[f"quota_preemptions[{name}]"] = sum(wl.evictions for wl in workloads if wl.cluster_queue == name)
        used, borrowed = series.integrals(name, end)
        for resource, nominal in series.nominal[name].items():
            area = used.get(resource, 0.0)
            if nominal > 0:
                figures[f"quota_use[{name}:{resource}]"] = round(area / (nominal * end), 6) if end > 0 else 0.0
            figures[f"borrowed_share[{name}:{resource}]"] = (
                round(borrowed.get(resource, 0.0) / area, 6) if area > 0 else 0.0
            )
    return figures


__all__ = ["ADMISSION_COLUMNS", "Figures", "UsageSeries", "admission_columns", "kueue_figures"]
