"""A Job's ``podFailurePolicy``: what it makes of a failed pod (``matchPodFailurePolicy``), and what validation
refuses in it, in the real kube-apiserver v1.36's words (the differential test compares them with the real server's
answers; here, the shared validation itself)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeflux.apiobjects.batchjob import job_decode_error, job_problems
from kubeflux.apiobjects.podfailure import FailedPod, PodFailurePolicy, Verdict, failed_pod_of

POLICY = PodFailurePolicy.from_spec(
    {
        "rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1, 2]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}},
        ]
    }
)


def pod(
    *containers: tuple[str, int], conditions: tuple[tuple[str, str], ...] = (), init: tuple[Any, ...] = ()
) -> FailedPod:
    return FailedPod("default", "p", tuple(containers), tuple(init), conditions)


@pytest.mark.parametrize(
    ("failed", "verdict"),
    [
        pytest.param(
            pod(("main", 42)),
            Verdict(
                fail_job="Container main for pod default/p failed with exit code 42 matching FailJob rule at index 0"
            ),
            id="exit-42-fails-the-job",
        ),
        pytest.param(pod(("side", 42)), Verdict(), id="another-container-42-counts-by-rule-2"),
        pytest.param(
            pod(("main", 137), conditions=(("DisruptionTarget", "True"),)),
            Verdict(counts=False),
            id="disrupted-ignored",
        ),
        pytest.param(
            pod(("main", 137), conditions=(("DisruptionTarget", "False"),)), Verdict(), id="status-must-match"
        ),
        pytest.param(
            pod(("main", 1)),
            Verdict(
                fail_job="Container main for pod default/p failed with exit code 1 matching FailJob rule at index 3"
            ),
            id="later-rule",
        ),
        pytest.param(pod(("main", 0), init=(("setup", 42),)), Verdict(), id="init-42-not-main"),
        pytest.param(pod(("main", 0)), Verdict(), id="exit-0-never-matches"),
    ],
)
def test_the_first_matching_rule_decides(failed: FailedPod, verdict: Verdict) -> None:
    assert POLICY is not None and POLICY.judge(failed) == verdict


def test_a_pod_object_is_read_for_its_terminated_containers_and_conditions() -> None:
    status = {
        "phase": "Failed",
        "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByUser"}],
        "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 137}}}],
        "initContainerStatuses": [{"name": "setup", "state": {"running": {}}}],
    }
    seen = failed_pod_of({"metadata": {"namespace": "ns", "name": "p"}, "status": status})
    assert seen == FailedPod("ns", "p", (("main", 137),), (), (("DisruptionTarget", "True"),))


def _spec(rules: Any, restart: str = "Never", **more: Any) -> dict[str, Any]:
    containers = [{"name": "main", "image": "x"}]
    template = {"spec": {"restartPolicy": restart, "containers": containers}}
    return {"parallelism": 1, "completions": 1, "podFailurePolicy": {"rules": rules}, "template": template, **more}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            _spec([{"onExitCodes": {"operator": "In", "values": [42]}}]),
            [
                (
                    "spec.podFailurePolicy.rules[0].action",
                    'Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
                )
            ],
            id="no-action",
        ),
        pytest.param(
            _spec([{"action": "Ignore", "onExitCodes": {"operator": "NotIn", "values": [5, 3, 3]}}]),
            [
                ("spec.podFailurePolicy.rules[0].onExitCodes.values[2]", "Duplicate value: 3"),
                ("spec.podFailurePolicy.rules[0].onExitCodes.values", "Invalid value: [5,3,3]: must be ordered"),
            ],
            id="repeated-unordered",
        ),
        pytest.param(
            _spec([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}], "OnFailure"),
            [
                (
                    "spec.template.spec.restartPolicy",
                    'Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified',
                )
            ],
            id="restart-on-failure",
        ),
        pytest.param(
            _spec([{"action": "Ignore"}], podReplacementPolicy="TerminatingOrFailed"),
            [
                (
                    "spec.podFailurePolicy.rules[0]",
                    "Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
                ),
                ("spec.podReplacementPolicy", 'Unsupported value: "TerminatingOrFailed": supported values: "Failed"'),
            ],
            id="no-requirement-and-replacement",
        ),
    ],
)
def test_validation_refuses_bad_rules_in_the_servers_words(
    spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert [(p.field, p.message) for p in job_problems("j", spec)] == expected


def test_an_exit_code_beyond_int32_cannot_be_decoded() -> None:
    problem = job_decode_error(_spec([{"action": "Count", "onExitCodes": {"operator": "In", "values": [2**31]}}]))
    assert problem is not None and problem.message == (
        "json: cannot unmarshal number 2147483648 into Go struct field "
        "PodFailurePolicyOnExitCodesRequirement.spec.podFailurePolicy.rules.onExitCodes.values of type int32"
    )


def test_a_number_where_a_rule_belongs_is_named_by_its_kind_alone() -> None:
    """Go's decoder shows a number's literal only when it parsed it for an integer it does not fit: a number where
    an object belongs is just ``number``."""
    problem = job_decode_error(_spec([7]))
    assert problem is not None and problem.message == (
        "json: cannot unmarshal number into Go struct field "
        "PodFailurePolicy.spec.podFailurePolicy.rules of type v1.PodFailurePolicyRule"
    )
