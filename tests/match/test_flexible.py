"""The flexible traverser's pieces: xor-slot expansion and the choice among or-slots."""

from __future__ import annotations

import pytest

from kubeflux.jobspec import jobspec_from_yaml, load_jobspec
from kubeflux.match.engine import Engine, EngineError, MatchOp
from kubeflux.match.flexible import _select_or_config, split_xor_slots
from kubeflux.match.request import requests_from_jobspec
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.resources.grug import read_grug
from tests.shared import SHARED

DATA = SHARED / "conformance" / "fluxion" / "data" / "resource"
FLEXIBLE = DATA / "jobspecs" / "flexible"

pytestmark = pytest.mark.skipif(not FLEXIBLE.exists(), reason="the shared Fluxion corpus is not checked out")


def _shape(requests: list) -> list:  # type: ignore[type-arg]
    return [(r.type, r.label, _shape(r.with_)) for r in requests]


def test_xor_slots_expand_into_one_request_per_choice() -> None:
    requests = requests_from_jobspec(load_jobspec(FLEXIBLE / "test016.yaml").resources)
    variants = split_xor_slots(requests)
    assert len(variants) == 3
    for variant, count in zip(variants, (2, 3, 4), strict=True):
        socket = variant[0]
        assert socket.type == "socket"
        assert [(slot.type, slot.count.min) for slot in socket.with_] == [("slot", count)]


def test_nested_xor_slots_expand_below_each_choice() -> None:
    requests = requests_from_jobspec(load_jobspec(FLEXIBLE / "test012.yaml").resources)
    variants = split_xor_slots(requests)
    labels = [_shape(variant) for variant in variants]
    assert all(variant[0][0] == "slot" for variant in labels)
    assert len(variants) == 9  # three top-level choices, each with three choices below its socket


def test_requests_without_xor_slots_are_left_alone() -> None:
    requests = requests_from_jobspec(load_jobspec(FLEXIBLE / "test002.yaml").resources)
    (variant,) = split_xor_slots(requests)
    assert all(a is b for a, b in zip(variant, requests, strict=True))


def test_or_slots_choose_the_mix_that_fits_most_slots() -> None:
    spec = jobspec_from_yaml(
        """
version: 9999
resources:
  - type: slot
    count: 1
    label: small
    with: [{type: core, count: 2}, {type: gpu, count: 1}]
  - type: slot
    count: 1
    label: big
    with: [{type: core, count: 6}]
tasks: [{command: [app], slot: small, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
"""
    )
    slots = requests_from_jobspec(spec.resources)
    # 10 cores and 1 gpu: one small (2 cores + the gpu) and one big slot fit; two bigs would need 12 cores.
    _, fitted, first = _select_or_config(slots, (("core", 10), ("gpu", 1)), 1, {})
    assert fitted == 2
    assert first in (0, 1)
    _, fitted, _ = _select_or_config(slots, (("core", 5), ("gpu", 0)), 1, {})
    assert fitted == 0


def test_an_unknown_traverser_is_refused() -> None:
    graph = read_grug(DATA / "grugs" / "tiny.graphml")
    with pytest.raises(EngineError, match="unknown traverser"):
        Engine(graph, traverser="sideways")


def test_the_flexible_traverser_matches_xor_choices_in_order() -> None:
    engine = Engine(read_grug(DATA / "grugs" / "small.graphml"), policy="high", traverser="flexible")
    spec = load_jobspec(FLEXIBLE / "test016.yaml")
    result = engine.match(MatchOp.ALLOCATE, spec)
    assert result.matched
    assert result.resources.count("core") == 2  # the first choice (2 slots of one core) fits


@pytest.mark.parametrize("policy", ["high", "low"])
def test_several_requests_of_one_type_choose_as_if_each_sorted_all_their_candidates(policy: str) -> None:
    """Three top-level slot requests choose among one set of slot candidates three times; with many candidates
    the first choice computes only its best prefix, and the later ones must still see them all."""
    from unittest import mock

    from kubeflux.match import scoring

    spec = load_jobspec(FLEXIBLE / "test003.yaml")

    def matched(partial_min: int) -> str:
        with mock.patch.object(scoring, "PARTIAL_MIN", partial_min):
            engine = Engine(read_grug(DATA / "grugs" / "medium.graphml"), traverser="flexible", policy=policy)
            results = [engine.match(MatchOp.ALLOCATE, spec) for _ in range(3)]
            return "\n".join(f"{r.matched} {r.resources}" for r in results)

    assert matched(scoring.PARTIAL_MIN) == matched(10**9)


def test_an_or_slot_alternative_that_requests_nothing_is_refused_and_the_engine_goes_on() -> None:
    """Each sibling of a slot is another shape of the slot; ``memory`` with nothing below it fits without using
    anything up, so the search for the best mix never ended (Fluxion overflows its stack)."""
    engine = Engine(build_graph([NodeSpec(f"node{i}", cores=4, sockets=2) for i in range(2)]), traverser="flexible")
    body = """
version: 9999
resources:
  - type: node
    count: 1
    with:
      - type: slot
        count: 1
        label: default
        with: [{type: socket, count: 1}]
%s
tasks: [{command: [app], slot: default, count: {per_slot: 1}}]
attributes: {system: {duration: 60}}
"""
    bad = jobspec_from_yaml(body % "      - {type: memory, count: 1}")

    result = engine.match(MatchOp.ALLOCATE, bad)

    assert not result.matched
    assert result.error == (
        "memory requests nothing below it, but it is a sibling of a slot: the flexible traverser takes each "
        "sibling of a slot as another shape of the slot, and a shape needs resources"
    )
    assert engine.match(MatchOp.SATISFIABILITY, bad).error == result.error
    good = engine.match(MatchOp.ALLOCATE, jobspec_from_yaml(body % ""))
    assert good.matched and good.jobid == 2
    assert good.resources.count("socket") == 1
