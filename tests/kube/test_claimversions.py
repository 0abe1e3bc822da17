"""Which claim states serve's loop passes to the cores (:class:`ClaimVersions`): the watch's and its own writes'
answers, the newest only; an answer never brings back a claim the watch showed deleted or replaced."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.kube.claimversions import ClaimVersions


def _claim(version: str, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": "c", "uid": uid, "resourceVersion": version}}


@pytest.mark.parametrize(
    ("steps", "passed"),
    [
        pytest.param(
            [("ADDED", "5"), ("written", "7"), ("MODIFIED", "6"), ("MODIFIED", "7")],
            [1, 1, 0, 0],
            id="the watch's events of serve's own writes, and older ones, after the answer",
        ),
        pytest.param([("ADDED", "5"), ("written", "7"), ("MODIFIED", "8")], [1, 1, 1], id="a newer event passes"),
        pytest.param(
            [("ADDED", "5"), ("MODIFIED", "9"), ("written", "7")],
            [1, 1, 0],
            id="an answer older than the watch's state",
        ),
        pytest.param(
            [("ADDED", "5"), ("DELETED", "9"), ("written", "7")],
            [1, 1, 0],
            id="an answer after the claim's deletion does not bring it back",
        ),
        pytest.param([("written", "7")], [0], id="an answer about a claim never seen"),
        pytest.param([("ADDED", "5"), ("DELETED", "4")], [1, 1], id="a deletion always passes (a tombstone's state)"),
        pytest.param([("ADDED", "x"), ("MODIFIED", "x")], [1, 1], id="versions that are no integers always pass"),
    ],
)
def test_the_newest_state_of_a_claim_is_passed_on_once(steps: list[tuple[str, str]], passed: list[int]) -> None:
    versions = ClaimVersions()
    said = [
        versions.written(_claim(version)) if how == "written" else versions.watched(how, _claim(version))
        for how, version in steps
    ]
    assert said == [bool(p) for p in passed]


def test_a_claim_replaced_by_another_of_its_name_is_the_new_ones() -> None:
    versions = ClaimVersions()
    assert versions.watched("ADDED", _claim("9"))
    assert versions.watched("ADDED", _claim("3", uid="u2"))  # another uid (a relist's diff may order it so)
    assert not versions.written(_claim("12"))  # an answer about the old claim
    assert versions.written(_claim("12", uid="u2"))
