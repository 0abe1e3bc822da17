"""CEL device selectors as the API server reads them and kube-scheduler evaluates them: what the real
kube-apiserver v1.36 refuses when a claim is written (too long, an undeclared variable or function, a field
``device`` lacks, operands of no common overload, a result that is not bool, too costly) is refused when kubeflux reads
it, naming the field in the server's words (each message below is what it answered, run against it); and the
functions of Kubernetes' CEL environment that device selectors use (strings, regex, lists, sets, IP, ``cel.bind``)
evaluate as there."""

from __future__ import annotations

import pytest

from kubeflux.apiobjects.reader import ManifestError
from kubeflux.apiobjects.resourceclaims import claim_from_manifest, device_class_from_manifest, slice_from_manifest
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.objects import ResourceClaimRef
from kubeflux.scheduler.testing import ADDED, Cluster, bound, messages, node, pod
from tests.dra import DRIVER, claim, gpu_class
from tests.dra import gpu_slice as gpus

FIELD = "ResourceClaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression"
MODEL = f'device.attributes["{DRIVER}"].model'
LIST = "[" + ",".join(["1"] * 200) + "]"


def refusal(expression: str) -> str:
    with pytest.raises(ManifestError) as caught:
        claim_from_manifest(claim("c", 1, expression))
    return str(caught.value)


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        pytest.param(
            'devise.driver == "x"',
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'devise' (in container '')",
            id="undeclared-variable",
        ),
        pytest.param(
            "[1].exists(x, y > 0)",
            "compilation failed: ERROR: <input>:1:15: undeclared reference to 'y' (in container '')",
            id="undeclared-in-a-macro",
        ),
        pytest.param(
            'device.atributes["x"].y == 1',
            "compilation failed: ERROR: <input>:1:7: undefined field 'atributes'",
            id="device-has-no-such-field",
        ),
        pytest.param(
            "device.driver == 1",
            "compilation failed: ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(string, int)'",
            id="string-and-int",
        ),
        pytest.param(
            "device.driver", "must evaluate to bool or the unknown type, not string", id="a-string-is-not-bool"
        ),
        pytest.param("1", "must evaluate to bool or the unknown type, not int", id="an-int-is-not-bool"),
        pytest.param("true ? 1 : 2", "must evaluate to bool or the unknown type, not int", id="ternary-of-ints"),
        pytest.param("size(device.driver)", "must evaluate to bool or the unknown type, not int", id="size"),
        pytest.param("[true]", "must evaluate to bool or the unknown type, not list(bool)", id="a-list"),
        pytest.param(f"{MODEL} + {MODEL}", "must evaluate to bool or the unknown type, not dyn", id="an-attribute"),
    ],
)
def test_an_expression_the_api_server_refuses_is_refused_when_read_naming_the_field(expression: str, said: str) -> None:
    """These were accepted, then failed on every device at run time (or read a non-bool result as an error)."""
    assert f"{FIELD}: Invalid value: {expression!r}: {said}" in refusal(expression)


def test_an_expression_over_10_kib_is_refused_without_echoing_it_and_one_of_10_kib_is_read() -> None:
    longest = f'device.driver == "{"x" * (10240 - 19)}"'
    assert len(longest) == 10240
    claim_from_manifest(claim("c", 1, longest))
    said = refusal(longest[:-1] + 'x"')
    assert said.endswith(f"{FIELD}: Too long: may not be more than 10240 bytes")
    assert "xxxx" not in said
    assert "Too long" in refusal(f'device.driver == "{"x" * 2_000_000}"')  # once read and compiled, 2 MB of it


def test_a_comprehension_too_costly_is_refused_and_a_cheaper_one_is_read() -> None:
    """Three nested comprehensions over 200 items (8 M steps, once 9.5 s for one device in one pass) exceed
    Kubernetes' cost limit; two (40,000) do not, as the real API server answered."""
    costly = f"{LIST}.all(a, {LIST}.all(b, {LIST}.all(c, a == b)))"
    assert refusal(costly).endswith(f"{FIELD}: Forbidden: too complex, exceeds cost limit")
    claim_from_manifest(claim("c", 1, f"{LIST}.all(a, {LIST}.all(b, a == b))"))
    assert "expression recursion limit exceeded: 250" in refusal(
        "!" * 5000 + f"({costly})"
    )  # too deep to estimate: not let through
    claim_from_manifest(claim("c", 1, " || ".join([f'device.driver == "{DRIVER}"'] * 250)))  # a long chain is flat
    claim_from_manifest(claim("c", 1, f'device.attributes["{DRIVER}"].all(k, k.size() > 0)'))


def cluster_of(*models: str) -> Cluster:
    cluster = Cluster(KubefluxScheduler(), [node(f"w{i}", cores=8) for i in range(len(models))])
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    for i, model in enumerate(models):
        cluster.tell(ADDED, slice_from_manifest(gpus(f"w{i}", 1, model=model)))
    return cluster


def placed(cluster: Cluster, expression: str) -> tuple[dict[str, str], dict[str, str]]:
    name = f"c{len(cluster.claims)}"
    cluster.tell(ADDED, claim_from_manifest(claim(name, 1, expression)))
    cluster.add(pod(f"p-{name}", 1000, resource_claims=(ResourceClaimRef(name, name),)))
    decisions = cluster.run(float(len(cluster.claims)))
    return bound(decisions), messages(decisions)


@pytest.mark.parametrize(
    "expression",
    [
        f'{MODEL}.lowerAscii() == "h100-sxm"',
        f'{MODEL}.upperAscii().startsWith("H100-S")',
        f'{MODEL}.split("-")[1] == "SXM"',
        f'{MODEL}.substring(0, 4) == "H100" && {MODEL}.indexOf("-") == 4 && {MODEL}.lastIndexOf("0") == 3',
        f'{MODEL}.replace("-SXM", "") == "H100" && {MODEL}.trim() == {MODEL} && {MODEL}.charAt(0) == "H"',
        f'{MODEL}.find("[0-9]+") == "100" && {MODEL}.findAll("[0-9]").size() == 3 && {MODEL}.matches("^H1")',
        f'["A100", "H100"].indexOf({MODEL}.split("-")[0]) == 1 && [1, 2, 3].isSorted() && [1, 2, 3].sum() == 6',
        f'[4, 2].min() == 2 && [4, 2].max() == 4 && [3, 1, 3].distinct().sort() == [1, 3] && {MODEL}.contains("SXM")',
        f'sets.contains(["H100-SXM", "B200"], [{MODEL}]) && sets.intersects([1], [1, 2])',
        f'isIP("10.0.0.1") && !isIP("10.0.0") && isCIDR("10.0.0.0/8") && {MODEL}.contains("SXM")',
        f'cel.bind(m, {MODEL}, m.startsWith("H") && m.endsWith("SXM"))',
        f'bool("true") && [{MODEL}].exists(m, m.contains("SXM"))',
        f'[{MODEL}].all(i, m, i == 0 && m.endsWith("SXM")) && {{"a": {MODEL}}}.exists(k, m, m.startsWith("H"))',
        f'{MODEL}.split("-").transformList(i, part, part.lowerAscii())[1] == "sxm" && [2, 1].sortBy(x, x) == [1, 2]',
        f'"%s/%d".format([dyn({MODEL}), dyn(1)]) == "H100-SXM/1" && lists.range(3).exists(i, {MODEL}.charAt(i) == "1")',
        f'cidr("10.0.0.0/8").containsIP("10.1.2.3") && url("https://x/" + {MODEL}).getEscapedPath() == "/H100-SXM"',
    ],
)
def test_selectors_using_kubernetes_cel_libraries_select_the_devices_they_say(expression: str) -> None:
    """Only w1's GPU is an H100-SXM: each selector picks it (they were accepted, then failed on every device with
    "Undefined variable or function", so the pod was rejected where kube-scheduler binds it)."""
    assert placed(cluster_of("A100-PCIE", "H100-SXM"), expression)[0] == {"default/p-c0": "w1"}


def test_an_overload_kubernetes_has_and_kubeflux_lacks_is_read_and_fails_its_pod_saying_so() -> None:
    _, said = placed(cluster_of("H100-SXM"), 'int(duration("1s")) == 1')
    assert (
        "Undefined variable or function: 'int': an overload of Kubernetes' CEL environment that kubeflux"
        in (said["default/p-c0"])
    )


@pytest.mark.parametrize(
    ("expression", "where"),
    [("device.allowMultipleAllocations == true", "w1"), ("!device.allowMultipleAllocations", "w0")],
)
def test_a_selector_on_allow_multiple_allocations_is_read_and_selects_the_devices_that_say_so(
    expression: str, where: str
) -> None:
    """rev34y #3: ``device.allowMultipleAllocations`` is a field of resource.k8s.io/v1's device the API server
    accepts in a selector; kubeflux refused the claim ("undefined field"). A device that does not say it is false."""
    cluster = Cluster(KubefluxScheduler(), [node("w0", cores=8), node("w1", cores=8)])
    cluster.tell(ADDED, device_class_from_manifest(gpu_class()))
    cluster.tell(ADDED, slice_from_manifest(gpus("w0", 1)))
    shared = gpus("w1", 1)
    shared["spec"]["devices"][0]["allowMultipleAllocations"] = True
    cluster.tell(ADDED, slice_from_manifest(shared))
    assert placed(cluster, expression)[0] == {"default/p-c0": where}
