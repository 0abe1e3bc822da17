"""Evaluations below the root are reused by gangs of any size.

A scheduler matches ``slot(N) → core(k)`` for gangs of many sizes ``N``; the evaluations of the root's children
(and the cached spans of them) are the same for every ``N`` under a policy that does not stop early, so they are kept
under the request's shape without its count (:meth:`CacheKeys.count_free`). Random sequences of such gangs, with
reservations, cancels, releases of parts, excluded nodes and nodes going down, must give the same answers as with
no evaluation cached at all, and as with the count kept in the key.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kubeflux.jobspec import Jobspec, jobspec_from_dict
from kubeflux.match import evaluation, traverser, view, wide
from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.traverser import Traverser
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.graph import Status
from tests.match._helpers import schedule as recorded

pytestmark = pytest.mark.pure_engine  # patches the traverser's class switches and methods (tests/conftest.py)

POLICIES = ["lonode", "hinode", "low", "high", "lonodex", "first"]
DURATIONS = [100, 250, 600]


def _gang(slots: int, cores: int, duration: int) -> Jobspec:
    return jobspec_from_dict(
        {
            "version": 1,
            "resources": [
                {"type": "slot", "count": slots, "label": "task", "with": [{"type": "core", "count": cores}]}
            ],
            "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
            "attributes": {"system": {"duration": duration}},
        }
    )


def _engine(policy: str, shape: int) -> Engine:
    """Twelve nodes of 2 cores under the root, or nodes of 2 sockets of 2 cores in racks (``shape`` 1)."""
    if shape == 0:
        specs = [NodeSpec(f"n{i}", cores=2) for i in range(12)]
    else:
        specs = [NodeSpec(f"n{i}", cores=4, sockets=2, rack=f"r{i // 4}") for i in range(12)]
    return Engine(build_graph(specs), policy=policy)


def _run(policy: str, shape: int, steps: list[tuple[str, int, int]], *, cache: bool, count_free: bool) -> list[Any]:
    with (
        mock.patch.object(evaluation, "CACHE_PER_VERTEX", evaluation.CACHE_PER_VERTEX if cache else 0),
        mock.patch.object(traverser, "CACHE_PER_VERTEX", traverser.CACHE_PER_VERTEX if cache else 0),
        mock.patch.object(Traverser, "count_free_parts", count_free),
        # blocks of 4 children: the root's twelve nodes are explored through cached spans
        mock.patch.object(traverser, "BLOCK", 4),
        mock.patch.object(wide, "BLOCK", 4),
        mock.patch.object(view, "BLOCK", 4),
    ):
        engine = _engine(policy, shape)
        nodes = [engine.graph.vertices[uid] for uid in engine.graph.by_type["node"]]
        gangs = {(n, k, d): _gang(n, k, d) for n in range(1, 7) for k in (1, 2) for d in DURATIONS}
        live: list[int] = []
        out: list[Any] = []
        now = 0
        for kind, a, b in steps:
            if kind == "wait":
                now += 50 * (1 + b % 4)
            elif kind in ("cancel", "release") and not live:
                continue
            elif kind == "cancel":
                jobid = live.pop(a % len(live))
                engine.cancel(jobid)
                out.append(("cancel", jobid))
            elif kind == "release":
                jobid = live[a % len(live)]
                held = sorted(
                    uid
                    for uid, jobs in engine.schedule.allocations.items()
                    if jobid in jobs and not engine.graph.vertices[uid].out
                )
                try:
                    full = engine.release_vertices(jobid, held[: 1 + b % 3])
                except EngineError as error:  # a reservation is not released in part
                    out.append(("release", jobid, str(error)))
                    continue
                if full:
                    live.remove(jobid)
                out.append(("release", jobid, full))
            elif kind == "status":
                node = nodes[a % len(nodes)]
                engine.set_status(node.paths["containment"], Status.DOWN if b % 3 == 0 else Status.UP)
            else:
                spec = gangs[1 + a % 6, 1 + b % 2, DURATIONS[(a + b) % 3]]
                op = MatchOp.ALLOCATE if kind == "alloc" else MatchOp.ALLOCATE_ORELSE_RESERVE
                excluded = None  # (nodes directly below the root only, as the engine asks)
                if shape == 0 and b > 6:
                    excluded = frozenset(nodes[i].uid for i in range(len(nodes)) if (i * 7 + a) % 5 == 0)
                result = engine.match(op, spec, now=now, excluded=excluded)
                if result.matched:
                    live.append(result.jobid)
                out.append((kind, result.matched, result.at, result.errno, result.resources))
        out.append(recorded(engine.schedule.view))
        return out


steps = st.lists(
    st.tuples(
        st.sampled_from(["alloc", "alloc", "reserve", "reserve", "cancel", "release", "status", "wait"]),
        st.integers(0, 99),
        st.integers(0, 9),
    ),
    min_size=1,
    max_size=50,
)


@settings(max_examples=60, deadline=None)
@given(policy=st.sampled_from(POLICIES), shape=st.integers(0, 1), steps=steps)
# The root keeps the count: its walk for one slot stopped after the first span of nodes (a gang of 6 needs more).
@example(policy="lonode", shape=0, steps=[("alloc", 0, 1), ("cancel", 0, 0), ("alloc", 5, 1)])
# So does ``first`` below the root: a node's explore stops once it has the slots the count asks.
@example(
    policy="first",
    shape=0,
    steps=[
        ("reserve", 76, 3),
        ("cancel", 58, 7),
        ("reserve", 36, 4),
        ("cancel", 94, 4),
        ("alloc", 59, 3),
        ("cancel", 17, 4),
        ("reserve", 73, 6),
    ],
)
def test_gangs_of_any_size_share_the_evaluations_below_the_root_exactly(
    policy: str, shape: int, steps: list[tuple[str, int, int]]
) -> None:
    shared = _run(policy, shape, steps, cache=True, count_free=True)
    assert shared == _run(policy, shape, steps, cache=False, count_free=False)
    assert shared == _run(policy, shape, steps, cache=True, count_free=False)


def test_a_gang_reuses_the_node_evaluations_a_gang_of_another_size_made() -> None:
    """Twelve free nodes evaluated for a gang of 3 are not evaluated again for a gang of 5 (but are when the count
    is kept in the key)."""

    def evaluations(count_free: bool) -> int:
        with mock.patch.object(Traverser, "count_free_parts", count_free):
            engine = _engine("lonode", 0)
            assert engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, _gang(3, 2, 100), now=0).matched
            engine.cancel(1)
            with mock.patch.object(Traverser, "_evaluate", side_effect=Traverser._evaluate, autospec=True) as visit:
                assert engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, _gang(5, 2, 100), now=0).matched
            return sum(1 for call in visit.call_args_list if engine.graph.vertices[call.args[2]].type == "node")

    assert evaluations(count_free=True) == 0
    assert evaluations(count_free=False) > 0
