"""A pod's reading skips its ResourceClaims only when there is nothing to read or refuse: every generated spec that
``pod_from_manifest`` reads without :func:`~kubeflux.apiobjects.resourceclaims.pod_claims` gives what pod_claims
would give (none), and a spec whose claims are wrong is still refused, naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeflux.apiobjects.manifests import ManifestError, _may_claim, pod_from_manifest
from kubeflux.apiobjects.reader import ManifestReader
from kubeflux.apiobjects.resourceclaims import pod_claims

_ODD = st.sampled_from([None, "x", 0, 1, [], {}, [1], ["x"], [{}], [{"name": "gpu"}], {"name": "gpu"}])
"""Values of any type a hostile client might put where a reader expects a list or a mapping."""


@st.composite
def _resources(draw: st.DrawFn) -> Any:
    resources: Any = draw(st.sampled_from(["absent", "odd", "map"]))
    if resources == "odd":
        return draw(_ODD)
    if resources == "absent":
        return "absent"
    made: dict[str, Any] = {"requests": {"cpu": "1"}}
    if draw(st.booleans()):
        made["claims"] = draw(_ODD)
    return made


@st.composite
def _container(draw: st.DrawFn, name: str) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_ODD)
    container: dict[str, Any] = {"name": name, "image": "busybox"}
    resources = draw(_resources())
    if resources != "absent":
        container["resources"] = resources
    return container


@st.composite
def _spec(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    for kind in ("initContainers", "containers"):
        shape = draw(st.sampled_from(["absent", "odd", "list"]))
        if shape == "odd":
            spec[kind] = draw(_ODD)
        elif shape == "list":
            spec[kind] = [draw(_container(f"{kind}-{i}")) for i in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        spec["resourceClaims"] = draw(_ODD)
    return spec


def _manifest(spec: Any) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


@settings(max_examples=400, deadline=None)
@given(_spec())
def test_a_spec_read_without_its_claims_is_one_pod_claims_finds_none_in(spec: dict[str, Any]) -> None:
    if _may_claim(spec):
        return
    reader = ManifestReader("Pod", _manifest(spec), ("Pod",))
    assert pod_claims(reader) == ()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}, "resources.claims[0]"),
        ({"containers": [{"name": "c"}], "resourceClaims": "gpu"}, "spec.resourceClaims"),
        ({"containers": [{"name": "c", "resources": {"claims": "gpu"}}]}, "resources.claims"),
    ],
)
def test_a_pod_naming_claims_wrongly_is_still_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError, match=field.replace("[", r"\[").replace("]", r"\]")):
        pod_from_manifest(_manifest(spec))


def test_a_plain_pod_has_no_claims_to_read() -> None:
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], "initContainers": []}
    assert not _may_claim(spec)
    assert pod_from_manifest(_manifest(spec)).resource_claims == ()
