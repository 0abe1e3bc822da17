"""What a workload's job is (:class:`JobKind`) and how it ended (:class:`FinalState`): the simulator reads them for
every job and pod, so they live in a compiled module.

Compiled (mypyc), a member of an enum defined in a compiled module (``JobKind.TRACE``) is read as a C static;
defined in an interpreted one (:mod:`kubeflux.sim.workloads.model` and :mod:`kubeflux.sim.records` stay pure, see
``tools/build_native.py``) it is a module dictionary lookup and an attribute read at each use. Those modules
re-export them.
"""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    TRACE = "trace"
    """A job of an HPC trace (SWF, Batsim): P processors for a run time; becomes a gang of pods."""
    JOB = "job"
    """A Kubernetes ``batch/v1`` Job: ``completions`` pods, ``parallelism`` at a time, retried up to
    ``backoff_limit`` times."""
    POD_GROUP = "podgroup"
    """A ``scheduling.x-k8s.io`` PodGroup and the pods that name it."""
    POD = "pod"
    """A lone pod."""


class FinalState(StrEnum):
    """Batsim's final states, as written in ``jobs.csv``."""

    COMPLETED_SUCCESSFULLY = "COMPLETED_SUCCESSFULLY"
    COMPLETED_FAILED = "COMPLETED_FAILED"
    COMPLETED_WALLTIME_REACHED = "COMPLETED_WALLTIME_REACHED"
    COMPLETED_KILLED = "COMPLETED_KILLED"
    REJECTED = "REJECTED"
    NOT_FINISHED = "NOT_FINISHED"
    """Still pending or running when the run ended (e.g. a pod that can never be placed)."""
