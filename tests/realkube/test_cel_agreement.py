"""kubeflux judges a device selector's CEL expression as the real kube-apiserver v1.36 does, over some 2,700
expressions (:mod:`tests.realkube._celcases`: every operator over every kind of operand, every function of the
environment, literals, macros, errors of each kind).

The expressions are posted to the real server as a few ResourceClaims of 32 requests × 32 selectors each (server-side
dry run: nothing is stored), and each is read by kubeflux alone in a claim
(:func:`~kubeflux.apiobjects.resourceclaims.claim_from_manifest`). Both accept it, or both refuse it naming the
selector's field, in the same words (the server's first line; for a syntax error, up to the parser's list of expected
tokens, which is ANTLR's and not kubeflux's). The few known differences are listed with why, and must still differ.

Then every expression both accept is evaluated on a device: none may fail for want of a function, except the
overloads kubeflux documents as missing.
"""

from __future__ import annotations

import re

import orjson
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubeflux.apiobjects.celcheck import KUBERNETES_ONLY
from kubeflux.apiobjects.devicecel import CelSelector
from kubeflux.apiobjects.resourceclaims import slice_from_manifest
from kubeflux.controlplane import ControlPlane
from tests.dra import DRIVER, claim, gpu_slice

from ._celcases import EXPRESSIONS, TRUE_ON_ANY_DEVICE
from ._selectors import kubeflux_says, words
from .conftest import Api

PER_REQUEST = 32
"""``DeviceSelectorsMaxSize``."""
REQUESTS = 32
"""``DeviceRequestsMaxSize``."""
FIELD = "spec.devices.requests[{}].exactly.selectors[{}].cel.expression"

KNOWN = {
    "[1][?0].hasValue()": "the library does not parse optional indexing (``[?``); the server accepts it",
    f'device.attributes[?"{DRIVER}"].hasValue()': "the library does not parse optional indexing",
    "(" * 100 + "true" + ")" * 100: "the library parses at most 96 levels of nesting, the server 250",
    "null[0] == null": "cel-go indexes null as an optional; kubeflux has no overload of ``_[_]`` for null",
    'null["a"] == 1': "cel-go indexes null as an optional (``optional_type(dyn)``); kubeflux says so of ``_[_]``",
}
"""Expressions the two judge differently, and why (each must still differ: a fixed one leaves the list)."""


def server_verdicts(api: Api, expressions: list[str]) -> list[tuple[str, str] | None]:
    """What the real server says of each expression (its field and first message), None when it accepts it."""
    verdicts: list[tuple[str, str] | None] = [None] * len(expressions)
    batch = PER_REQUEST * REQUESTS
    for first in range(0, len(expressions), batch):
        chunk = expressions[first : first + batch]
        requests = [
            {
                "name": f"r{number}",
                "exactly": {
                    "deviceClassName": "gpu",
                    "count": 1,
                    "selectors": [{"cel": {"expression": e}} for e in chunk[at : at + PER_REQUEST]],
                },
            }
            for number, at in enumerate(range(0, len(chunk), PER_REQUEST))
        ]
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "selectors"},
            "spec": {"devices": {"requests": requests}},
        }
        try:
            client.CustomObjectsApi(api.client).create_namespaced_custom_object(
                "resource.k8s.io", "v1", "default", "resourceclaims", body, dry_run="All"
            )
        except ApiException as exc:
            for cause in orjson.loads(exc.body)["details"]["causes"]:
                request, selector = map(int, re.findall(r"\[(\d+)\]", cause["field"]))
                at = first + request * PER_REQUEST + selector
                assert cause["field"] == FIELD.format(request, selector), cause
                if verdicts[at] is None:
                    verdicts[at] = (FIELD.format(0, 0), str(cause["message"]))
    return verdicts


def said(message: str) -> str:
    """:func:`words`, a syntax error's only up to the tokens the parser expected."""
    first = words(message)
    return first.split(" expecting ")[0] if "Syntax error: " in first else first


def disagreement(expression: str, real: tuple[str, str] | None) -> str:
    """How kubeflux's verdict on ``expression`` differs from the server's ``real`` one ("" when it does not)."""
    body = claim("c", 1, expression)
    del body["metadata"]["uid"]
    ours = kubeflux_says(body)
    if real is None or ours is None:
        return "" if real == ours else f"server {real}, kubeflux {ours}"
    if ours[0] != real[0] or said(ours[1]) != said(real[1]):
        return f"server {real[0]}: {said(real[1])!r}\nkubeflux {ours[0]}: {said(ours[1])!r}"
    return ""


@pytest.fixture(scope="module")
def verdicts(plane: ControlPlane) -> list[tuple[str, str] | None]:
    api = Api(plane.kubeconfig)
    try:
        return server_verdicts(api, EXPRESSIONS)
    finally:
        api.close()


def test_kubeflux_judges_every_selector_as_the_real_api_server_does(verdicts: list[tuple[str, str] | None]) -> None:
    assert len(EXPRESSIONS) >= 300
    assert 0 < sum(v is None for v in verdicts) < len(verdicts)  # both kinds, in numbers
    found = {e: disagreement(e, real) for e, real in zip(EXPRESSIONS, verdicts, strict=True)}
    differing = {e: why for e, why in found.items() if why and e not in KNOWN}
    assert not differing, "\n\n".join(f"{e}\n{why}" for e, why in differing.items())
    assert all(found[e] for e in KNOWN), [e for e in KNOWN if not found[e]]


DEVICE = slice_from_manifest(gpu_slice("w1", 1)).devices[0]
_UNDEFINED = re.compile(r"Undefined variable or function: '([\w.]+)'")


def test_what_both_accept_evaluates_but_for_the_overloads_kubeflux_documents_as_missing(
    verdicts: list[tuple[str, str] | None],
) -> None:
    """On a device, no expression both accept fails for want of a function (``Undefined variable or function``),
    but those of :data:`~kubeflux.apiobjects.celcheck.KUBERNETES_ONLY`; those kubeflux adds to the library (two-
    variable comprehensions, ``sortBy``, ``format``, IP, CIDR and URL values, ``flatten``, ``lists.range`` …)
    give what Kubernetes' give."""
    accepted = [e for e, real in zip(EXPRESSIONS, verdicts, strict=True) if real is None and e not in KNOWN]
    assert set(TRUE_ON_ANY_DEVICE) <= set(accepted)
    missing: dict[str, str] = {}
    for expression in accepted:
        try:
            result = CelSelector(expression).matches(DEVICE, DRIVER)
        except ValueError as exc:
            undefined = _UNDEFINED.search(str(exc))
            if undefined is not None and undefined.group(1) not in KUBERNETES_ONLY:
                missing[expression] = str(exc)
            result = False
        if expression in TRUE_ON_ANY_DEVICE and not result:
            missing[expression] = "not true"
    assert not missing, "\n".join(f"{e}: {why}" for e, why in missing.items())
