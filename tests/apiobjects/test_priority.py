"""The Priority admission plugin's verdicts (:mod:`kubeflux.apiobjects.priority`), as kube-apiserver v1.36 gives
them, as named cases."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.priority import (
    SYSTEM_PRIORITY_CLASSES,
    PriorityClass,
    PriorityRefused,
    admit_priority,
    default_class,
)

URGENT = PriorityClass("urgent", 1000, "PreemptLowerPriority")
POLITE = PriorityClass("polite", 500, "Never")
BATCH = PriorityClass("batch", 10, global_default=True)
CLASSES = {pc.name: pc for pc in (URGENT, POLITE, BATCH, *SYSTEM_PRIORITY_CLASSES)}


@pytest.mark.parametrize(
    ("spec", "default", "admitted"),
    [
        pytest.param({}, None, {"priority": 0, "preemptionPolicy": "PreemptLowerPriority"}, id="no class, no default"),
        pytest.param(
            {},
            BATCH,
            {"priorityClassName": "batch", "priority": 10, "preemptionPolicy": "PreemptLowerPriority"},
            id="the global default",
        ),
        pytest.param(
            {"priorityClassName": "urgent"},
            BATCH,
            {"priorityClassName": "urgent", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"},
            id="a named class",
        ),
        pytest.param(
            {"priorityClassName": "polite"},
            None,
            {"priorityClassName": "polite", "priority": 500, "preemptionPolicy": "Never"},
            id="the class's preemptionPolicy",
        ),
        pytest.param(
            {"priorityClassName": "urgent", "priority": 1000},
            None,
            {"priorityClassName": "urgent", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"},
            id="the same priority given",
        ),
        pytest.param(
            {"priorityClassName": "system-node-critical"},
            None,
            {
                "priorityClassName": "system-node-critical",
                "priority": 2000001000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
            id="a system class",
        ),
    ],
)
def test_admitted_pods_get_their_class_priority_and_policy(
    spec: dict[str, Any], default: PriorityClass | None, admitted: dict[str, Any]
) -> None:
    admit_priority(spec, CLASSES.get, default)
    assert spec == admitted


@pytest.mark.parametrize(
    ("spec", "default", "message"),
    [
        pytest.param({"priorityClassName": "nope"}, None, "no PriorityClass with name nope was found", id="unknown"),
        pytest.param(
            {"priorityClassName": "urgent", "priority": 5},
            None,
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller "
            "computed 1000 from the given PriorityClass name",
            id="another priority given",
        ),
        pytest.param(
            {"priority": 5},
            None,
            "the integer value of priority (5) must not be provided in pod spec; priority admission controller "
            "computed 0 from the given PriorityClass name",
            id="a priority without a class",
        ),
        pytest.param(
            {"preemptionPolicy": "Never"},
            None,
            "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission "
            "controller computed PreemptLowerPriority from the given PriorityClass name",
            id="Never without a class saying so",
        ),
        pytest.param(
            {"priorityClassName": "polite", "preemptionPolicy": "PreemptLowerPriority"},
            None,
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority "
            "admission controller computed Never from the given PriorityClass name",
            id="another policy given",
        ),
    ],
)
def test_the_plugin_forbids_as_the_real_one(spec: dict[str, Any], default: PriorityClass | None, message: str) -> None:
    with pytest.raises(PriorityRefused) as refused:
        admit_priority(spec, CLASSES.get, default)
    assert str(refused.value) == message


def test_of_two_global_defaults_the_lowest_wins_and_none_without_one() -> None:
    low = PriorityClass("low", 1, global_default=True)
    assert default_class([URGENT, BATCH, low]) == low
    assert default_class([URGENT, POLITE]) is None


def test_a_class_reads_from_its_object_with_the_defaults() -> None:
    pc = PriorityClass.from_object({"metadata": {"name": "x"}, "value": 7, "globalDefault": True})
    assert pc == PriorityClass("x", 7, "PreemptLowerPriority", True)
    assert (
        PriorityClass.from_object(
            {"metadata": {"name": "y"}, "value": 3, "preemptionPolicy": "Never"}
        ).preemption_policy
        == "Never"
    )
