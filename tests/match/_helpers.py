"""Helpers shared by the matcher tests."""

from __future__ import annotations

from typing import Any

from kubeflux.match.traverser import Traverser


def schedule(traverser: Traverser) -> dict[str, Any]:
    """Everything the matcher records per vertex (planner spans, exclusivity uses, aggregate filters, tags),
    keyed by containment path, with span ids left out, so two engines' schedules can be compared."""
    paths = {vertex.uid: vertex.paths.get("containment", str(vertex.uid)) for vertex in traverser.graph.vertices}
    state: dict[str, Any] = {}
    for uid, plan in traverser.plans.items():
        if plan.span_count():
            state[f"plan {paths[uid]}"] = plan.points()
    for uid, uses in traverser.x_uses.items():
        if uses:
            state[f"x {paths[uid]}"] = sorted((jobid, start, end) for jobid, (start, end, _) in uses.items())
    for uid, subplan in traverser.subplans.items():
        state[f"agg {paths[uid]}"] = {t: subplan.planner(t).points() for t in subplan.resource_types}
    for label, table in (
        ("tags", traverser.tags),
        ("alloc", traverser.allocations),
        ("rsv", traverser.reservations),
        ("job2span", traverser.job2span),
    ):
        for uid, jobs in table.items():
            if jobs:
                state[f"{label} {paths[uid]}"] = sorted(jobs)
    return state
