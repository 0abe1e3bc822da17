"""Jobspecs and random step parameters shared by the tests of the engine's shortcuts on wide roots (early stop,
excluded nodes, slot bounds, shared keys)."""

from __future__ import annotations

from kubeflux.jobspec import Jobspec, jobspec_from_dict

DURATIONS = [600, 3600, 5000]
"""Run times a random step's match may ask for."""
WAITS = [600, 1400, 3000]
"""Clock steps a random step may take."""


def slot(count: object, cores: int, gpus: int = 0) -> dict[str, object]:
    """``count`` slots labelled ``task`` of ``cores`` cores (and ``gpus`` gpus) each."""
    shape: list[dict[str, object]] = [{"type": "core", "count": cores}]
    if gpus:
        shape.append({"type": "gpu", "count": gpus})
    return {"type": "slot", "count": count, "label": "task", "with": shape}


def jobspec_of(resources: list[dict[str, object]]) -> Jobspec:
    """A jobspec of ``resources`` running one task per ``task`` slot for an hour."""
    return jobspec_from_dict(
        {
            "version": 9999,
            "resources": resources,
            "attributes": {"system": {"duration": 3600}},
            "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        }
    )


Step = tuple[str, int, int]
"""One random step: (operation, which jobspec or job, which duration or wait)."""
