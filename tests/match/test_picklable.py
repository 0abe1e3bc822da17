"""Value classes with a written ``__init__`` (:class:`~kubeflux.match.picklable.Picklable` and the others that
docs/native.md allows one for speed): each takes every field of its dataclass, in order, and sets each to what it
was given, so nothing forgets a field the generated ``__init__`` would have set and pickle rebuilds it as it was."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pickle
from typing import Any

import pytest

import kubeflux.match
from kubeflux.match.engine import JobInfo, JobState, MatchResult
from kubeflux.match.meta import Errno
from kubeflux.match.picklable import Picklable
from kubeflux.match.writers import Placement
from kubeflux.scheduler.devices import AllocatedDevice, ClaimAllocation
from kubeflux.scheduler.messages import (
    Bind,
    ClusterEvent,
    Deallocate,
    EventKind,
    Evict,
    PodWarning,
    Reject,
    Unschedulable,
)
from kubeflux.scheduler.objects import Pod
from kubeflux.sim.urgent import Urgent
from tests.shared import REPO

SRC = REPO / "src"


def _written_inits() -> list[tuple[str, type[Any], list[str]]]:
    """Every dataclass in ``src/kubeflux`` that writes its own ``__init__``: (name, class, the parameters)."""
    found = []
    for path in sorted((SRC / "kubeflux").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            if not any("dataclass" in ast.unparse(decorator) for decorator in node.decorator_list):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    params = [arg.arg for arg in item.args.posonlyargs + item.args.args + item.args.kwonlyargs]
                    cls = getattr(importlib.import_module(module), node.name)
                    found.append((f"{module}.{node.name}", cls, params[1:]))
    return found


WRITTEN = _written_inits()


def test_the_written_inits_are_found() -> None:
    names = {name for name, _, _ in WRITTEN}
    assert {"kubeflux.scheduler.messages.Bind", "kubeflux.match.evaluation.Evaluation"} <= names
    assert len(names) >= 15


DERIVED = {
    "kubeflux.scheduler.allocation.Allocation.named": "placement",
    "kubeflux.scheduler.queue.PendingJob.slot": "seq",
}
"""Fields a written ``__init__`` sets from another argument, by design: field → the argument."""


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize(("cls", "params"), [pytest.param(cls, params, id=name) for name, cls, params in WRITTEN])
def test_a_written_init_takes_its_first_fields_in_order(cls: type[Any], params: list[str]) -> None:
    """The parameters are the class's first fields, in their order (all of them for a :class:`Picklable`: its
    ``__reduce__`` calls the class with every field); a field left out has a default."""
    fields = dataclasses.fields(cls)
    assert params == [f.name for f in fields[: len(params)]]
    assert all(_default(f) is not dataclasses.MISSING for f in fields[len(params) :])
    if issubclass(cls, Picklable):
        assert len(params) == len(fields)


@pytest.mark.skipif(kubeflux.match.COMPILED, reason="sets fields to placeholders their types reject when compiled")
@pytest.mark.parametrize(
    ("name", "cls", "params"), [pytest.param(name, cls, params, id=name) for name, cls, params in WRITTEN]
)
def test_a_written_init_sets_each_field_to_its_argument_or_default(
    name: str, cls: type[Any], params: list[str]
) -> None:
    given = {param: object() for param in params}
    built = cls(**given)
    for field in dataclasses.fields(cls):
        value = getattr(built, field.name)
        if field.name in given:
            assert value is given[field.name], field.name
        elif f"{name}.{field.name}" in DERIVED:
            assert value is given[DERIVED[f"{name}.{field.name}"]], field.name
        else:
            assert value == _default(field), field.name
    assert list(inspect.signature(cls).parameters) == params


PICKLED = [
    ("event", ClusterEvent(EventKind.ADDED, Pod("default", "p", uid="u"))),
    ("bind", Bind("default/p", "u", "n0", {"kubeflux.io/allocation": "{}"})),
    ("unschedulable", Unschedulable("default/p", "u", "0/1 nodes are available.", 60.0)),
    ("reject", Reject("default/p", "u", "too big")),
    ("warning", PodWarning("default/p", "u", "InvalidAllocation", "bad")),
    ("evict", Evict("default/v", "u", "default/p", "Preempted by pod group default/p", budgets=False)),
    (
        "deallocate",
        Deallocate(
            "default/p", "u", ClaimAllocation("default", "c", "cu", "n0", (AllocatedDevice("gpus", "d", "n0", "g0"),))
        ),
    ),
    ("nominated", Unschedulable("default/p", "u", "waits", None, "n1")),
    ("urgent", Urgent(0.1, 5000)),
    ("placement", Placement("n0", ("core0", "core1"), ("gpu0",))),
    ("job info", JobInfo(3, JobState.RESERVED, 60, "{}", 0.5)),
    ("match result", MatchResult(3, False, 60, False, "", "busy", Errno.EBUSY, 0.1, False, 5, ())),
]


@pytest.mark.parametrize("value", [pytest.param(value, id=name) for name, value in PICKLED])
def test_a_value_comes_back_from_pickle_as_it_was(value: Picklable) -> None:
    back = pickle.loads(pickle.dumps(value))
    assert type(back) is type(value)
    assert [getattr(back, f.name) for f in dataclasses.fields(value)] == [  # type: ignore[arg-type]
        getattr(value, f.name)
        for f in dataclasses.fields(value)  # type: ignore[arg-type]
    ]


def _picklable_classes() -> set[str]:
    """The names of the classes in ``src/kubeflux`` that subclass :class:`Picklable` (written ``__init__`` or not)."""
    found = set()
    for path in sorted((SRC / "kubeflux").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(base) == "Picklable" for base in node.bases):
                found.add(node.name)
    return found


def test_every_picklable_value_is_pickled_here() -> None:
    assert _picklable_classes() == {type(value).__name__ for _, value in PICKLED}
