"""What preemption cost a run (issue 31), for its summary row (:func:`kubeflux.sim.metrics.summarize`):

* ``preempted_pods``: pods ended by a scheduler's eviction (reason ``Preempted``);
* ``preempted_jobs``: the jobs that lost at least one pod so (a gang evicted whole counts once per job; a Job whose
  replacement pod is evicted again still counts once);
* ``work_lost_core_seconds`` and ``work_lost_gpu_seconds``: what those pods had computed when evicted, thrown away:
  each pod's time from its compute start (its Running, or its coupled job's start) to its end, times the cores
  (and gpus) it held. A pod evicted while it held its resources idle for its gang lost nothing of its own.
"""

from __future__ import annotations

from kubeflux.scheduler.messages import PREEMPTED_REASON
from kubeflux.scheduler.objects import GPU
from kubeflux.sim.records import PodRecord, RunRecord
from kubeflux.sim.resourceids import ResourceKind

__all__ = ["preemption_losses"]


def _held(pod: PodRecord, kind: ResourceKind | None) -> int:
    if kind is None:
        return 0
    last = kind.first + kind.count
    return sum(1 for rid in pod.resources if kind.first <= rid < last)


def preemption_losses(run: RunRecord) -> dict[str, int | float]:
    """The run's preemption figures (the module docstring); all 0 when nothing was preempted."""
    kinds = {kind.name: kind for kind in run.resources}
    cpu, gpu = kinds.get("cpu"), kinds.get(GPU)
    pods = [pod for pod in run.pods if pod.reason == PREEMPTED_REASON]
    core_seconds = gpu_seconds = 0.0
    for pod in pods:
        if pod.compute_time is None or pod.end_time is None:
            continue
        ran = max(0.0, pod.end_time - pod.compute_time)
        core_seconds += ran * _held(pod, cpu)
        gpu_seconds += ran * _held(pod, gpu)
    return {
        "preempted_pods": len(pods),
        "preempted_jobs": len({pod.job_id for pod in pods}),
        "work_lost_core_seconds": round(core_seconds, 6),
        "work_lost_gpu_seconds": round(gpu_seconds, 6),
    }
