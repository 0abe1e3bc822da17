"""The real kube-apiserver v1.36 and kubeflux's reading of a ResourceClaim's CEL selector agree: each expression
below is posted to the real server and read by :func:`~kubeflux.apiobjects.resourceclaims.claim_from_manifest`;
both accept it, or both refuse it naming the same field with the same words (the server's first line; it quotes
the value as Go does and adds a caret under the error, kubeflux quotes it as Python does).

Many more expressions, in batches: :mod:`tests.realkube.test_cel_agreement`."""

from __future__ import annotations

import pytest

from kubeflux.controlplane import ControlPlane
from tests.dra import DRIVER, claim

from ._selectors import kubeflux_says, server_says, words
from .conftest import Api

MODEL = f'device.attributes["{DRIVER}"].model'
LIST = "[" + ",".join(["1"] * 200) + "]"
EXPRESSIONS = [
    f'device.driver == "{DRIVER}"',
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
    'devise.driver == "x"',
    "device.driver",
    "1",
    "device.driver == 1",
    f"{MODEL} + {MODEL}",
    "true ? 1 : 2",
    "size(device.driver)",
    'device.atributes["x"].y == 1',
    "[true]",
    "[1].exists(x, y > 0)",
    'device.driver == "' + "x" * 10240 + '"',
    'device.driver == "' + "x" * (10240 - 19) + '"',
    f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a == b)))",
    f"{LIST}.all(a, {LIST}.all(b, a == b))",
    f'device.attributes["{DRIVER}"].all(k, k.size() > 0)',
    f'{MODEL}.lowerAscii() == "h100" && {MODEL}.find("[0-9]+") == "100" && [1, 2].isSorted()',
    f'sets.contains([1], [1]) && isIP("10.0.0.1") && cel.bind(m, {MODEL}, m == "x")',
    "[1].all(i, v, v > 0)",
    f'[1].exists(x, x == 1) && {MODEL}.matches("^H") && bool("true")',
    'isURL("https://example.com")',
]


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
