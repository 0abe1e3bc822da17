"""The engine is composed, not stacked: the select walk holds the walk state and the schedule's view, and what it can
reach says what it may do.

* The select walk's modules never import the writable :class:`~kubeflux.match.schedule.Schedule` (nor the walks
  that write it): it reads the schedule through :class:`~kubeflux.match.view.ScheduleView` and leaves marks.
* The traverser, the walk state and the schedule's view are separate classes, each holding the next (members, not
  bases); the writable schedule holds the view too, and the view holds nothing that writes.
* No part of the walks declares a method only to be overridden (``raise NotImplementedError``), as the layers of
  the stacked walk had to for mypyc.
"""

from __future__ import annotations

import ast

import pytest

from kubeflux.match.engine import Engine
from kubeflux.match.schedule import Schedule
from kubeflux.match.state import WalkState
from kubeflux.match.subsystems import SubsystemView
from kubeflux.match.traverser import Traverser
from kubeflux.match.view import ScheduleView
from kubeflux.resources import NodeSpec, build_graph
from tests.shared import REPO

MATCH = REPO / "src" / "kubeflux" / "match"
SELECT_WALK = ["traverser", "wide", "leaves", "slots", "slotbound", "ranked", "state", "visit", "keys", "view"]
"""The modules of the select walk and of what it holds."""
WRITERS_OF_THE_SCHEDULE = {"schedule", "record", "cancel", "update", "elastic", "engine"}


def _imported(module: str) -> set[str]:
    tree = ast.parse((MATCH / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kubeflux.match"):
            found.add(node.module.removeprefix("kubeflux.match").lstrip("."))
            if node.module == "kubeflux.match":
                found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("module", SELECT_WALK)
def test_the_select_walk_cannot_reach_the_writable_schedule(module: str) -> None:
    assert not _imported(module) & WRITERS_OF_THE_SCHEDULE


def test_the_walk_holds_its_state_which_holds_the_schedule() -> None:
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=2) for i in range(3)]))
    assert Traverser.__bases__ == (object,) and WalkState.__bases__ == (object,)
    assert Schedule.__bases__ == (object,) and ScheduleView.__bases__ == (object,)
    assert SubsystemView.__bases__ == (ScheduleView,)  # the same tables read along another tree (-S)
    assert engine.traverser.state is engine.state
    assert engine.state.schedule is engine.schedule.view
    assert engine.traverser.schedule is engine.schedule.view
    # a Schedule holds its view, never the other way round (nor does view.py import it: see the test above)
    assert not isinstance(engine.schedule.view, Schedule)


@pytest.mark.parametrize("module", [*SELECT_WALK, "schedule", "record", "cancel", "flexible", "subsystems"])
def test_no_walk_method_is_a_stub_to_override(module: str) -> None:
    assert "NotImplementedError" not in (MATCH / f"{module}.py").read_text()
