"""The gang-at-once shortcut (``Placer._run_at_once``) measured against matching members one by one: a scenario's
outcome pod by pod, with the shortcut on or off, for the tests that compare the two."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import Any
from unittest import mock

from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.placing import Placer
from tests.scheduler._invariants import INVARIANTS
from tests.scheduler._workload import Scenario, run


def outcome(
    scenario: Scenario, *, at_once: bool, checks: Iterable[str] = INVARIANTS, **options: Any
) -> tuple[dict[str, tuple[Any, ...]], int]:
    """Every pod's (bound at, node, cores, gpus, finished at), and how many runs of members one match placed, with
    kubeflux made with ``options`` (its policy, its sharing); the ``checks`` are kept by the run with the shortcut."""
    calls = 0
    real = Placer._run_at_once

    def counted(self: Placer, *args: object) -> object:
        nonlocal calls
        made = real(self, *args)  # type: ignore[arg-type]
        calls += bool(made)
        return made

    core = functools.partial(KubefluxScheduler, **options)
    with (
        mock.patch.object(Placer, "_run_at_once", counted if at_once else lambda *_: None),
        mock.patch("tests.scheduler._workload.KubefluxScheduler", core),
    ):
        outcome = run(scenario, checks=checks if at_once else ())
    pods: dict[str, tuple[Any, ...]] = {}
    for key, sim_pod in outcome.simulation.cluster.pods.items():
        text = sim_pod.pod.annotations.get(ALLOCATION_ANNOTATION)
        where = json.loads(text) if text else {}
        pods[key] = (
            sim_pod.bound_at,
            sim_pod.node_index,
            tuple(where.get("cores", ())),
            tuple(where.get("gpus", ())),
            sim_pod.finished_at,
        )
    return pods, calls
