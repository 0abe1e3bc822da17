"""The simulator's schedulers, by name: a registry of factories (``kubeflux simulate --list-schedulers``).

The built-in ones are listed here: the HPC baselines (``fcfs``, ``easy``), kubeflux itself (``kubeflux``,
``kubeflux-no-preemption``, ``kubeflux-fcfs``, ``kubeflux-conservative``) and the Kubernetes baselines
(``kube-default``, ``kube-default-no-preemption``, ``kube-gang``, ``coscheduling``). Each factory imports its module
when first called, so listing the schedulers imports none of them. Another module adds a scheduler with
:func:`register`; :func:`create` builds a fresh instance per run.

``fcfs`` and ``easy`` (with ``capacity`` and ``free_tree``) are compiled with mypyc when ``make`` built them
(``tools/build_native.py``: ``COMPILED_BASELINES``); the other baselines stay pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubeflux._native import use_compiled
from kubeflux.scheduler.interface import Scheduler

COMPILED: bool = use_compiled(__name__, __path__)
"""Whether this process runs the compiled baselines (mypyc) rather than the pure-Python sources."""

SchedulerFactory = Callable[[], Scheduler]
"""Builds a fresh scheduler; the instance's ``name`` is the ``schedulerName`` it owns."""


@dataclass(frozen=True, slots=True)
class SchedulerInfo:
    name: str
    factory: SchedulerFactory
    description: str
    in_all: bool = True
    """Run by ``--scheduler all``; False for a variant that differs only on some workloads (named to be run)."""


def _fcfs() -> Scheduler:
    from kubeflux.sim.baselines.fcfs import FCFSScheduler

    return FCFSScheduler()


def _easy() -> Scheduler:
    from kubeflux.sim.baselines.easy import EasyScheduler

    return EasyScheduler()


def _kubeflux(backfill: str, preemption: str = "lowerPriority") -> Callable[[str], Scheduler]:
    def factory(name: str) -> Scheduler:
        from kubeflux.scheduler.core import KubefluxScheduler

        return KubefluxScheduler(name, policy="lonode", backfill=backfill, preemption=preemption)

    return factory


def _kube_default() -> Scheduler:
    from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler

    return KubeDefaultScheduler()


def _kube_default_no_preemption() -> Scheduler:
    from kubeflux.sim.baselines.kube_default import KubeDefaultScheduler
    from kubeflux.sim.baselines.kube_preemption import PREEMPTION_NEVER

    return KubeDefaultScheduler(preemption=PREEMPTION_NEVER)


def _kube_gang() -> Scheduler:
    from kubeflux.sim.baselines.kube_gang import KubeGangScheduler

    return KubeGangScheduler()


def _coscheduling() -> Scheduler:
    from kubeflux.sim.baselines.coscheduling import simulated_coscheduling

    return simulated_coscheduling()


def _named(name: str, factory: Callable[[str], Scheduler]) -> SchedulerFactory:
    return lambda: factory(name)


_REGISTRY: dict[str, SchedulerInfo] = {
    info.name: info
    for info in (
        SchedulerInfo("fcfs", _fcfs, "strict FCFS on whole jobs (a job that does not fit blocks all later ones)"),
        SchedulerInfo("easy", _easy, "EASY backfilling on whole jobs (head reservation at the shadow time)"),
        SchedulerInfo(
            "kubeflux",
            _named("kubeflux", _kubeflux("easy")),
            "kubeflux: the graph engine (policy lonode), gangs, EASY backfilling with engine reservations, whole-job "
            "preemption",
        ),
        SchedulerInfo(
            "kubeflux-no-preemption",
            _named("kubeflux-no-preemption", _kubeflux("easy", "never")),
            "kubeflux (EASY) that never preempts: a job of higher priority waits for room like any other",
            in_all=False,
        ),
        SchedulerInfo(
            "kubeflux-fcfs",
            _named("kubeflux-fcfs", _kubeflux("fcfs")),
            "kubeflux without backfilling: strict FCFS, the blocked head holds a reservation",
        ),
        SchedulerInfo(
            "kubeflux-conservative",
            _named("kubeflux-conservative", _kubeflux("conservative")),
            "kubeflux with conservative backfilling: every blocked job reserves",
        ),
        SchedulerInfo(
            "kube-default",
            _kube_default,
            "kube-scheduler's default profile: pod by pod, LeastAllocated scoring, no gangs, pod-by-pod preemption",
        ),
        SchedulerInfo(
            "kube-default-no-preemption",
            _kube_default_no_preemption,
            "kube-default without DefaultPreemption (preemption: never): a pod of higher priority only goes first",
            in_all=False,
        ),
        SchedulerInfo(
            "kube-gang",
            _kube_gang,
            "kube-scheduler v1.36's own gang scheduling (GangScheduling gate): a gang placed whole on one snapshot, "
            "blocked gangs retried in a busy loop",
        ),
        SchedulerInfo(
            "coscheduling",
            _coscheduling,
            "scheduler-plugins coscheduling: PodGroup gangs (minMember, minResources = the members' requests), "
            "Permit timeout",
        ),
    )
}


def register(name: str, factory: SchedulerFactory, description: str) -> None:
    """Make ``factory`` available as ``name`` (a later registration of the same name replaces it)."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"scheduler name {name!r}: must be a non-empty word")
    _REGISTRY[name] = SchedulerInfo(name, factory, description)


def available() -> dict[str, SchedulerInfo]:
    """Every registered scheduler by name, sorted."""
    return dict(sorted(_REGISTRY.items()))


def create(name: str) -> Scheduler:
    """A new scheduler registered as ``name``; ValueError naming the known ones otherwise."""
    known = available()
    info = known.get(name)
    if info is None:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(known)}")
    return info.factory()


__all__ = ["SchedulerFactory", "SchedulerInfo", "available", "create", "register"]
