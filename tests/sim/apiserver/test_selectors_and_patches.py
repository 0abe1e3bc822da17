"""Label/field selectors and the three patch formats, as tables of named cases."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.sim.apiserver.errors import ApiError
from kubeflux.sim.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from kubeflux.sim.apiserver.registry import field_path
from kubeflux.sim.apiserver.selectors import parse_field_selector, parse_label_selector

LABELS = {"app": "web", "tier": "3", "team": "hpc"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param("", True, id="empty-matches-all"),
        pytest.param("app=web", True, id="equal"),
        pytest.param("app==web", True, id="double-equal"),
        pytest.param("app!=web", False, id="not-equal"),
        pytest.param("missing!=x", True, id="not-equal-absent-key"),
        pytest.param("app in (db, web)", True, id="in-with-spaces"),
        pytest.param("app notin (web)", False, id="notin"),
        pytest.param("app", True, id="exists"),
        pytest.param("!app", False, id="does-not-exist"),
        pytest.param("tier>2,tier<4", True, id="gt-and-lt"),
        pytest.param("tier>3", False, id="gt-strict"),
        pytest.param("app=web,team=ops", False, id="and"),
        pytest.param("example.com/role", False, id="prefixed-key"),
        pytest.param("app in (web,)", True, id="in-with-empty-value"),
    ],
)
def test_label_selectors(selector: str, matches: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is matches


@pytest.mark.parametrize(
    "selector",
    [
        pytest.param("app in (web", id="unclosed"),
        pytest.param("app in ()", id="empty-set"),
        pytest.param("app=web,", id="trailing-comma"),
        pytest.param("Bad Key=1", id="space-in-key"),
        pytest.param("app=" + "x" * 64, id="value-too-long"),
        pytest.param("tier>x", id="gt-not-integer"),
        pytest.param("app=a=b", id="two-equals"),
        pytest.param("a b", id="two-keys"),
    ],
)
def test_bad_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(ApiError) as refused:
        parse_label_selector(selector)
    assert refused.value.code == 400


POD = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"nodeName": ""}, "status": {"phase": "Running"}}
ALLOWED = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"})


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        pytest.param("status.phase!=Succeeded,status.phase!=Failed", True, id="scheduler-pods"),
        pytest.param("spec.nodeName=", True, id="unbound"),
        pytest.param("spec.nodeName!=", False, id="bound"),
        pytest.param("metadata.name==p", True, id="name"),
        pytest.param(r"metadata.name=a\,b", False, id="escaped-comma"),
    ],
)
def test_field_selectors(selector: str, matches: bool) -> None:
    assert parse_field_selector(selector, ALLOWED, "pods").matches(POD, field_path) is matches


def test_a_field_the_resource_does_not_index_is_400_naming_the_allowed_ones() -> None:
    with pytest.raises(ApiError) as refused:
        parse_field_selector("spec.hostname=x", ALLOWED, "pods")
    assert refused.value.code == 400
    assert '"spec.nodeName"' in refused.value.message


POD_SPEC: dict[str, Any] = {
    "metadata": {"labels": {"a": "1"}, "finalizers": ["x"]},
    "spec": {"containers": [{"name": "main", "image": "i:1"}, {"name": "side", "image": "s:1"}], "tolerations": [1]},
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "side", "image": "s:2"}]}},
            lambda r: [c["image"] for c in r["spec"]["containers"]] == ["i:1", "s:2"],
            id="containers-merge-by-name",
        ),
        pytest.param(
            {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            lambda r: [c["status"] for c in r["status"]["conditions"]] == ["True", "True"],
            id="conditions-merge-by-type",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            lambda r: [c["name"] for c in r["spec"]["containers"]] == ["main"],
            id="delete-directive",
        ),
        pytest.param(
            {"spec": {"tolerations": [2]}}, lambda r: r["spec"]["tolerations"] == [2], id="list-without-key-replaces"
        ),
        pytest.param(
            {"metadata": {"finalizers": ["y"]}},
            lambda r: r["metadata"]["finalizers"] == ["x", "y"],
            id="finalizers-set",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}},
            lambda r: r["metadata"]["finalizers"] == [],
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}]}},
            lambda r: [c["name"] for c in r["spec"]["containers"]] == ["side", "main"],
            id="set-element-order",
        ),
        pytest.param({"metadata": {"labels": {"a": None}}}, lambda r: r["metadata"]["labels"] == {}, id="null-deletes"),
        pytest.param(
            {"spec": {"$patch": "replace", "containers": []}},
            lambda r: r["spec"] == {"containers": []},
            id="replace-directive",
        ),
    ],
)
def test_strategic_merge_patch(patch: dict[str, Any], check: Any) -> None:
    assert check(strategic_merge_patch(POD_SPEC, patch))
    assert POD_SPEC["spec"]["containers"][1]["image"] == "s:1", "the target is not changed in place"


def test_strategic_merge_deletes_only_the_gate_it_names_and_puts_new_items_first_as_the_real_server() -> None:
    """``schedulingGates`` merge by name: a controller deleting its own gate leaves the others' gates, so the pod
    stays gated. Items a patch adds go before the live ones (strategicpatch's order, which kube-apiserver shows)."""
    gated = {"spec": {"schedulingGates": [{"name": "example.com/a"}, {"name": "example.com/b"}]}}
    deleted = strategic_merge_patch(
        gated, {"spec": {"schedulingGates": [{"name": "example.com/a", "$patch": "delete"}]}}
    )
    assert deleted["spec"]["schedulingGates"] == [{"name": "example.com/b"}]
    named = strategic_merge_patch(gated, {"spec": {"schedulingGates": [{"name": "example.com/b"}]}})
    assert named["spec"]["schedulingGates"] == gated["spec"]["schedulingGates"]
    added = strategic_merge_patch(
        POD_SPEC, {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}}
    )
    assert [c["type"] for c in added["status"]["conditions"]] == ["DisruptionTarget", "Ready", "PodScheduled"]
    applied = strategic_merge_patch(POD_SPEC, {"status": {"conditions": [{"type": "X"}]}}, appended=True)
    assert [c["type"] for c in applied["status"]["conditions"]] == ["Ready", "PodScheduled", "X"]


def test_merge_patch_replaces_lists_and_deletes_nulls() -> None:
    result = merge_patch(POD_SPEC, {"spec": {"containers": [{"name": "only"}]}, "status": None})
    assert result["spec"]["containers"] == [{"name": "only"}]
    assert "status" not in result


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        pytest.param([{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3], "b": {"c": 1}}, id="append"),
        pytest.param([{"op": "remove", "path": "/a/0"}], {"a": [2], "b": {"c": 1}}, id="remove-index"),
        pytest.param([{"op": "replace", "path": "/b/c", "value": 2}], {"a": [1, 2], "b": {"c": 2}}, id="replace"),
        pytest.param([{"op": "move", "from": "/b/c", "path": "/d"}], {"a": [1, 2], "b": {}, "d": 1}, id="move"),
        pytest.param(
            [{"op": "copy", "from": "/a", "path": "/e"}], {"a": [1, 2], "b": {"c": 1}, "e": [1, 2]}, id="copy"
        ),
        pytest.param([{"op": "test", "path": "/b/c", "value": 1}], {"a": [1, 2], "b": {"c": 1}}, id="test-passes"),
        pytest.param(
            [{"op": "add", "path": "/b/x~1y", "value": 0}], {"a": [1, 2], "b": {"c": 1, "x/y": 0}}, id="escape"
        ),
    ],
)
def test_json_patch(operations: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert json_patch({"a": [1, 2], "b": {"c": 1}}, operations) == expected


@pytest.mark.parametrize(
    "operations",
    [
        pytest.param({"op": "add"}, id="not-a-list"),
        pytest.param([{"op": "test", "path": "/b/c", "value": 2}], id="test-fails"),
        pytest.param([{"op": "remove", "path": "/zz"}], id="remove-missing"),
        pytest.param([{"op": "add", "path": "/a/9", "value": 1}], id="index-out-of-range"),
        pytest.param([{"op": "add", "path": "a", "value": 1}], id="not-a-pointer"),
        pytest.param([{"op": "frobnicate", "path": "/a"}], id="unknown-op"),
    ],
)
def test_bad_json_patches_are_4xx(operations: Any) -> None:
    with pytest.raises(ApiError) as refused:
        json_patch({"a": [1, 2], "b": {"c": 1}}, operations)
    assert refused.value.code in (400, 422)
