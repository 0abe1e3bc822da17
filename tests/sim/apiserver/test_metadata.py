"""ObjectMeta helpers every request goes through: the nesting limit of bodies, the uids of new objects, and the
checks of metadata an update changes."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubeflux.sim.apiserver.metadata import MAX_DEPTH, too_deep, uid_from_bits

from .conftest import pod_manifest


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


def test_an_update_rechecks_what_it_changes_and_keeps_what_was_valid(kube: Any) -> None:
    """An update is checked only for the metadata it changes (the stored rest passed at create), yet a bad new
    label, annotation or owner reference in it is still a 422 naming the field, and nothing is stored."""
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod("default", pod_manifest("p", labels={"app": "x"}))
    kept = core.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {"note": "fine"}}})
    assert kept.metadata.labels == {"app": "x"} and kept.metadata.annotations == {"note": "fine"}
    bad = [
        ({"metadata": {"labels": {"team": "not a value!"}}}, "metadata.labels"),
        ({"metadata": {"annotations": {"bad key!": "v"}}}, "metadata.annotations"),
        ({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j"}]}}, "uid"),
    ]
    for body, field in bad:
        with pytest.raises(ApiException) as raised:  # a merge patch: a strategic one needs the owner's uid to merge
            core.patch_namespaced_pod("p", "default", body, _content_type="application/merge-patch+json")
        assert raised.value.status == 422, body
        assert field in raised.value.body
    after = core.read_namespaced_pod("p", "default")
    assert after.metadata.resource_version == kept.metadata.resource_version
    assert after.metadata.labels == {"app": "x"} and after.metadata.owner_references is None
