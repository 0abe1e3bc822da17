"""Hypothesis strategies of whole workloads for the scheduler's property tests (:mod:`tests.scheduler._workload`'s
scenario model), simplest value first; ``KUBEFLUX_PROPS_EXAMPLES`` sets how many examples each property runs."""

from __future__ import annotations

import dataclasses
import os

from hypothesis import strategies as st

from tests.scheduler._workload import (
    Change,
    JobShape,
    NodeShape,
    PodShape,
    Scenario,
)

EXAMPLES = int(os.environ.get("KUBEFLUX_PROPS_EXAMPLES", "20"))


node_shapes = st.builds(
    NodeShape,
    cpu=st.sampled_from([8000, 4000, 2000, 3500, 16000]),
    memory=st.sampled_from([32, 16, 8, 64]),
    storage=st.sampled_from([100, 20]),
    fpga=st.sampled_from([0, 0, 0, 1, 2]),
    gpu=st.sampled_from([0, 0, 0, 2]),
    pods=st.sampled_from([110, 110, 110, 3]),
    zone=st.sampled_from(["a", "a", "b"]),
    tainted=st.sampled_from([False, False, False, True]),
)


pod_shapes = st.builds(
    PodShape,
    cpu=st.sampled_from([1000, 500, 250, 1500, 2000, 4000, 8000]),
    memory=st.sampled_from([0, 0, 0, 1, 4, 12, 0, 30]),
    storage=st.sampled_from([0, 0, 0, 10, 0, 0, 0, 50]),
    fpga=st.sampled_from([0, 0, 0, 0, 0, 0, 0, 1]),
    gpu=st.sampled_from([0, 0, 0, 0, 0, 0, 0, 1]),
    run=st.sampled_from([60, 10, 30, 100, 300]),
    zone=st.sampled_from(["", "", "", "", "", "", "a", "b"]),
    tolerates=st.sampled_from([False, False, True]),
    policy=st.sampled_from(["", "", "", "", "lonodex"]),
)


times = st.integers(0, 30).map(lambda tens: tens * 10)


priorities = st.sampled_from([0, 0, 0, 10])


@st.composite
def gangs(draw: st.DrawFn) -> JobShape:
    """A pod group: workers of one shape, maybe an MPI launcher of 500m first, or members all different."""
    if draw(st.booleans()):
        worker = draw(pod_shapes)
        members = (worker,) * draw(st.integers(1, 4))
        if draw(st.booleans()):
            members = (dataclasses.replace(worker, cpu=500, memory=min(worker.memory, 1)), *members)
    else:
        members = tuple(draw(st.lists(pod_shapes, min_size=2, max_size=4)))
    size = len(members)
    min_member = draw(st.sampled_from([size, size, max(1, size - 1), max(1, size // 2)]))
    timeout = draw(st.sampled_from([None, None, 30, 120]))
    return JobShape(draw(times), members, min_member, timeout, draw(priorities))


lone_pods = st.builds(
    lambda at, pod, priority, other: JobShape(at, (pod,), priority=priority, other=other),
    times,
    pod_shapes,
    priorities,
    st.sampled_from([False, False, False, True]),
)


kinds = st.sampled_from(["pod", "gang", "pod"])


changes = st.builds(
    Change,
    at=times.map(lambda t: t + 5),
    what=st.sampled_from(
        [
            *("restart", "add", "remove", "cordon", "uncordon", "grow", "shrink", "relabel", "taint", "restart"),
            *("readd", "delete", "recreate", "recreate"),
        ]
    ),
    node=st.integers(0, 5),
    shape=node_shapes,
)


def scenarios(backfill: str, *, jobs: int = 8, changes_: int = 4) -> st.SearchStrategy[Scenario]:
    return st.builds(
        Scenario,
        nodes=st.lists(node_shapes, min_size=2, max_size=4).map(tuple),
        jobs=st.lists(
            kinds.flatmap(lambda kind: gangs() if kind == "gang" else lone_pods), min_size=1, max_size=jobs
        ).map(tuple),
        changes=st.lists(changes, max_size=changes_).map(tuple),
        backfill=st.just(backfill),
    )
