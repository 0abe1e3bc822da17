"""The simulator's schedulers, by name: a registry of factories (``kubeflux simulate --list-schedulers``).

A module adds a scheduler with :func:`register`; :func:`create` builds a fresh instance per run. The built-in HPC
baselines (``fcfs``, ``easy``) and kubeflux itself (``kubeflux``, ``kubeflux-fcfs``, ``kubeflux-conservative``)
are always there; ``kube-default``, ``kube-gang`` and ``coscheduling`` are imported lazily, so the
registry works whether or not those modules exist.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from kubeflux.scheduler.interface import Scheduler

SchedulerFactory = Callable[[], Scheduler]
"""Builds a fresh scheduler; the instance's ``name`` is the ``schedulerName`` it owns."""


@dataclass(frozen=True, slots=True)
class SchedulerInfo:
    name: str
    factory: SchedulerFactory
    description: str


_REGISTRY: dict[str, SchedulerInfo] = {}
_LOADED = False

_LAZY: tuple[tuple[str, str, str, str], ...] = (
    # (registry name, module, factory, description) — used when the module does not register itself
    (
        "kube-default",
        "kubeflux.sim.baselines.kube_default",
        "KubeDefaultScheduler",
        "kube-scheduler's default profile: pod by pod, LeastAllocated scoring, no gangs",
    ),
    (
        "kube-gang",
        "kubeflux.sim.baselines.kube_gang",
        "KubeGangScheduler",
        "kube-scheduler v1.36's own gang scheduling (GangScheduling gate): a gang placed whole on one snapshot, "
        "blocked gangs retried in a busy loop",
    ),
    (
        "coscheduling",
        "kubeflux.sim.baselines.coscheduling",
        "simulated_coscheduling",
        "scheduler-plugins coscheduling: PodGroup gangs (minMember, minResources = the members' requests), "
        "Permit timeout",
    ),
)


def register(name: str, factory: SchedulerFactory, description: str) -> None:
    """Make ``factory`` available as ``name`` (a later registration of the same name replaces it)."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"scheduler name {name!r}: must be a non-empty word")
    _REGISTRY[name] = SchedulerInfo(name, factory, description)


def _fcfs() -> Scheduler:
    from kubeflux.sim.baselines.fcfs import FCFSScheduler

    return FCFSScheduler()


def _easy() -> Scheduler:
    from kubeflux.sim.baselines.easy import EasyScheduler

    return EasyScheduler()


_KUBEFLUX: tuple[tuple[str, str, str], ...] = (
    # (registry name = schedulerName, backfill, description)
    (
        "kubeflux",
        "easy",
        "kubeflux: the graph engine (policy lonode), gangs, EASY backfilling with engine reservations",
    ),
    ("kubeflux-fcfs", "fcfs", "kubeflux without backfilling: strict FCFS, the blocked head holds a reservation"),
    ("kubeflux-conservative", "conservative", "kubeflux with conservative backfilling: every blocked job reserves"),
)


def _kubeflux(name: str, backfill: str) -> SchedulerFactory:
    def factory() -> Scheduler:
        from kubeflux.scheduler.core import KubefluxScheduler

        return KubefluxScheduler(name, policy="lonode", backfill=backfill)

    return factory


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    _REGISTRY.setdefault(
        "fcfs",
        SchedulerInfo("fcfs", _fcfs, "strict FCFS on whole jobs (a job that does not fit blocks all later ones)"),
    )
    _REGISTRY.setdefault(
        "easy",
        SchedulerInfo("easy", _easy, "EASY backfilling on whole jobs (head reservation at the shadow time)"),
    )
    for name, backfill, description in _KUBEFLUX:
        _REGISTRY.setdefault(name, SchedulerInfo(name, _kubeflux(name, backfill), description))
    for name, module_name, factory_name, description in _LAZY:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if name not in _REGISTRY and hasattr(module, factory_name):
            register(name, getattr(module, factory_name), description)


def available() -> dict[str, SchedulerInfo]:
    """Every registered scheduler by name, sorted."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def create(name: str) -> Scheduler:
    """A new scheduler registered as ``name``; ValueError naming the known ones otherwise."""
    known = available()
    info = known.get(name)
    if info is None:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(known)}")
    return info.factory()


__all__ = ["SchedulerFactory", "SchedulerInfo", "available", "create", "register"]
