"""The real kube-apiserver v1.36 and kubeflux's reading of a ResourceClaim's CEL selector agree: each expression
below is posted to the real server and read by :func:`~kubeflux.apiobjects.resourceclaims.claim_from_manifest`;
both accept it, or both refuse it naming the same field with the same words (the server's first line; it quotes
the value as Go does and adds a caret under the error, kubeflux quotes it as Python does).

Many more expressions, in batches: :mod:`tests.realkube.test_cel_agreement`."""

from __future__ import annotations

import pytest

from kubeflux.controlplane import ControlPlane
from tests.dra import claim

from ._celcases import ONE_BY_ONE
from ._selectors import kubeflux_says, server_says, words
from .conftest import Api

EXPRESSIONS = ONE_BY_ONE


@pytest.mark.parametrize("number", range(len(EXPRESSIONS)))
def test_kubeflux_refuses_a_selector_when_and_as_the_real_api_server_does(
    plane: ControlPlane, api: Api, number: int
) -> None:
    body = claim(f"c{number}", 1, EXPRESSIONS[number])
    del body["metadata"]["uid"]
    real, ours = server_says(api, body), kubeflux_says(body)
    if real is None or ours is None:
        assert real == ours, (real, ours)
        return
    assert ours[0] == real[0] and words(ours[1]) == words(real[1]), (real, ours)
