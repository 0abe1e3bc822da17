"""ObjectMeta helpers every request goes through: the nesting limit of bodies and the uids of new objects."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kubeflux.sim.apiserver.metadata import MAX_DEPTH, too_deep, uid_from_bits


def _nested(levels: int, container: str, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value} if container == "mapping" else [value]
    return value


@pytest.mark.parametrize("container", ["mapping", "list"])
@pytest.mark.parametrize("leaf", [1, {}, [], {1: "an integer key, as YAML allows"}, b"binary"], ids=repr)
def test_nesting_limit_is_exact_whatever_the_leaf(container: str, leaf: Any) -> None:
    """A body nested exactly MAX_DEPTH levels is taken, one level more is refused (the encoder's answer and the
    walk's agree, also for values JSON cannot hold)."""
    containers = 1 if isinstance(leaf, dict | list) else 0
    assert not too_deep(_nested(MAX_DEPTH - containers, container, leaf))
    assert too_deep(_nested(MAX_DEPTH - containers + 1, container, leaf))
    assert too_deep(_nested(1000, container, leaf))


def test_uids_are_the_uuid4_of_their_random_bits() -> None:
    """Served uids stay what ``uuid.UUID(int=bits, version=4)`` made of the same seeded bits."""
    rng = random.Random(13)
    for bits in [0, (1 << 128) - 1, *(rng.getrandbits(128) for _ in range(1000))]:
        assert uid_from_bits(bits) == str(uuid.UUID(int=bits, version=4))
