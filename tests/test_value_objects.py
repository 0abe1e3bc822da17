"""The values kubeflux hands its users (decisions and events, placements, the engine's match results and job
records) are plain values in every build: they pickle (a sweep's worker sends results back so), copy, compare and
rebuild with ``dataclasses.replace``. Compiled (mypyc), a class with its own ``__init__`` is not rebuilt field by
field as a dataclass is, so each says how (``__reduce__``); this fails if one forgets."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from kubeflux.match.engine import JobInfo, JobState, MatchResult
from kubeflux.match.meta import Errno
from kubeflux.scheduler.interface import Bind, ClusterEvent, EventKind, PodWarning, Reject, Unschedulable
from kubeflux.scheduler.objects import CPU, Node, Pod
from kubeflux.scheduler.translate import Placement

VALUES = [
    Bind("default/p", "uid-1", "n1", {"kubeflux.io/allocation": "{}"}),
    Bind("default/p", "uid-1", "n1"),
    Unschedulable("default/p", "uid-1", "0/1 nodes are available: 1 Insufficient cpu.", 60.0),
    Unschedulable("default/p", "uid-1", "waiting"),
    Reject("default/p", "uid-1", "never fits"),
    PodWarning("default/p", "uid-1", "InvalidAllocation", "bad annotation"),
    ClusterEvent(EventKind.ADDED, Pod("default", "p", "uid-1", requests={CPU: 1000})),
    ClusterEvent(EventKind.DELETED, Node("n1", allocatable={CPU: 2000})),
    Placement("n1", ("core0", "core1"), ("gpu0",)),
    Placement("n1"),
    MatchResult(3, True, at=60, resources="text", errno=Errno.EBUSY, elapsed=0.5, now=10),
    JobInfo(3, JobState.RESERVED, 60, "jobspec", 0.25),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_a_value_pickles_copies_and_rebuilds_as_itself(value: object) -> None:
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value
    assert copy.deepcopy(value) == value
    assert dataclasses.replace(value) == value  # type: ignore[type-var]
    assert repr(value).startswith(type(value).__name__ + "(")


def test_a_changed_copy_differs_and_a_frozen_value_stays_as_it_was() -> None:
    bind = Bind("default/p", "uid-1", "n1")
    moved = dataclasses.replace(bind, node="n2")
    assert moved != bind and moved.node == "n2" and moved.annotations == {}
    assert bind.annotations is not Bind("default/p", "uid-1", "n1").annotations  # no dict shared between decisions
    with pytest.raises(dataclasses.FrozenInstanceError):
        bind.node = "n3"  # type: ignore[misc]
    assert hash(Placement("n1", ("core0",))) == hash(Placement("n1", ("core0",)))
    assert MatchResult(1, True, at=5, now=0).reserved
