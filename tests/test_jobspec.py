"""Jobspec parsing and validation, checked against Fluxion's libjobspec rules."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kubeflux import jobspec as jobspec_module
from kubeflux.jobspec import (
    UINT_MAX,
    AndConstraint,
    Count,
    HostlistConstraint,
    Jobspec,
    JobspecError,
    MatchAll,
    NotConstraint,
    OrConstraint,
    PropertyConstraint,
    RankConstraint,
    Resource,
    jobspec_from_dict,
    jobspec_from_yaml,
    load_jobspec,
    parse_jobspec,
)
from tests.shared import SHARED

CORPUS = SHARED / "conformance" / "fluxion" / "data" / "resource" / "jobspecs"
BENCH = SHARED / "bench"
FIXTURES = Path(__file__).parent / "data" / "jobspecs"
HORIZON = 3_153_600_000

# The jobspecs of Fluxion's corpus that Fluxion's parser refuses, with the message we give. In this copy of the
# corpus there are none: the refused ones upstream (basics/bad.yaml, duration/test00[12].yaml and, against a
# graph, basics/bad_res_type.yaml) are not in it, so they are reproduced under tests/data/jobspecs.
CORPUS_ERRORS: dict[str, str] = {}


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.yaml"))


def fixture_files(kind: str) -> list[Path]:
    return sorted((FIXTURES / kind).glob("*.yaml"))


def walk(resources: tuple[Resource, ...]) -> list[Resource]:
    found: list[Resource] = []
    for resource in resources:
        found.append(resource)
        found.extend(walk(resource.with_))
    return found


def base() -> dict[str, Any]:
    """A small valid jobspec as a loaded document; tests change one thing in a deep copy."""
    return {
        "version": 1,
        "resources": [
            {
                "type": "node",
                "count": 1,
                "with": [
                    {"type": "slot", "count": 2, "label": "task", "with": [{"type": "core", "count": 4}]},
                ],
            }
        ],
        "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        "attributes": {"system": {"duration": 3600}},
    }


def changed(edit: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    doc = copy.deepcopy(base())
    edit(doc)
    return doc


def core(doc: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = doc["resources"][0]["with"][0]["with"][0]
    return resource


def system(doc: dict[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = doc["attributes"]["system"]
    return attributes


def error_of(doc: Any, **kwargs: Any) -> str:
    with pytest.raises(JobspecError) as info:
        jobspec_from_dict(doc, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------------------------------------------
# Fluxion's corpus, the benchmark inputs and our fixtures


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_jobspec(path: Path) -> None:
    name = str(path.relative_to(CORPUS))
    if name in CORPUS_ERRORS:
        with pytest.raises(JobspecError, match=re.escape(CORPUS_ERRORS[name])):
            load_jobspec(path)
        return
    js = load_jobspec(path)
    text = path.read_text()
    resources = walk(js.resources)
    assert len(resources) == len(re.findall(r"^\s*-?\s*type:", text, re.MULTILINE))
    assert all(r.label for r in resources if r.type == "slot")
    assert js.duration == float(re.findall(r"duration:\s*(\S+)", text)[0])
    assert js.version in (1, 9999)
    assert js.tasks and js.tasks[0].count == {"per_slot": "1"}


def test_corpus_is_present() -> None:
    assert len(corpus_files()) >= 150


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.yaml")), ids=lambda p: p.name)
def test_bench_jobspec(path: Path) -> None:
    js = load_jobspec(path)
    assert js.resources and js.duration > 0


@pytest.mark.parametrize("path", fixture_files("invalid"), ids=lambda p: p.name)
def test_invalid_fixture(path: Path) -> None:
    expected = re.findall(r"^# expect: (.*)$", path.read_text(), re.MULTILINE)[0]
    with pytest.raises(JobspecError) as info:
        load_jobspec(path)
    assert str(info.value) == expected.format(file=path)


@pytest.mark.parametrize("path", fixture_files("valid"), ids=lambda p: p.name)
def test_valid_fixture(path: Path) -> None:
    assert load_jobspec(path).resources


def test_unknown_type_refused_against_a_graph() -> None:
    path = FIXTURES / "valid" / "bad_res_type.yaml"
    tiny_types = {"cluster", "rack", "node", "socket", "core", "gpu", "memory"}
    with pytest.raises(JobspecError) as info:
        load_jobspec(path, known_types=tiny_types)
    assert str(info.value) == (
        f"{path}: resources[0].with[0].with[0].with[0].with[0].type: "
        "'invalid_res_type' is not a resource type known to the resource graph"
    )
    assert load_jobspec(FIXTURES / "valid" / "everything.yaml", known_types=tiny_types).resources


def test_duration_longer_than_the_graph() -> None:
    path = FIXTURES / "valid" / "duration_too_large.yaml"
    js = load_jobspec(path)
    assert js.duration == 1e30
    with pytest.raises(JobspecError) as info:
        js.duration_seconds(HORIZON)
    assert str(info.value) == (
        f"{path}: attributes.system.duration: duration 1e+30 s does not fit in the graph's horizon of {HORIZON} s"
    )


def test_everything_is_read() -> None:
    js = load_jobspec(FIXTURES / "valid" / "everything.yaml")
    node = js.resources[0]
    assert node.count == Count(2, 16, "*", 2)
    assert node.exclusive is True and node.id == "n" and node.label is None
    slot, xor_slot = node.with_
    assert (slot.type, slot.label, slot.exclusive) == ("slot", "task", None)
    assert slot.with_[0].count == Count(4, UINT_MAX, "+", 1)
    memory = slot.with_[1]
    assert (memory.unit, memory.exclusive, memory.count) == ("GB", False, Count(16, 16))
    assert (xor_slot.type, xor_slot.label) == ("xor_slot", None)
    assert js.duration == 90.5 and js.duration_seconds(HORIZON) == 91
    assert (js.queue, js.cwd) == ("batch", "/home/me")
    assert js.environment == {"OMP_NUM_THREADS": "4", "HOME": "/home/me"}
    assert js.user == {"note": ["free", "form"]}
    assert js.system == {"shell": {"options": {"verbose": 1}}}
    task = js.tasks[0]
    assert task.command == ("app", "--size", "3")
    assert (task.slot, task.distribution) == ("task", "block")
    assert task.count == {"per_slot": "1"} and task.attributes == {"affinity": "core"}
    assert isinstance(js.constraints, OrConstraint)
    assert js.matches("node05", {"ssd": ""}, 100)
    assert not js.matches("node05", {"ssd": "", "slow": "", "amd": ""}, 100)
    assert js.matches("node05", {"amd": ""}, 7)
    assert not js.matches("node5", {"amd": ""}, 7)
    assert js.matches("login0", {"amd": ""}, 9)
    assert js.matches("x", {}, 100)


# --------------------------------------------------------------------------------------------------------------
# Entry points, files and YAML


def test_entry_points_agree(tmp_path: Path) -> None:
    text = yaml.safe_dump(base())
    path = tmp_path / "job.yaml"
    path.write_text(text)
    from_text = parse_jobspec(text)
    assert parse_jobspec(path) == from_text
    assert parse_jobspec(base()) == from_text
    assert load_jobspec(str(path)) == from_text
    assert load_jobspec(path).source == str(path)
    assert from_text.source is None


def test_json_is_yaml(tmp_path: Path) -> None:
    text = '{"version": 1, "resources": [{"type": "core", "count": 1}], "tasks": [], "attributes": null}'
    assert jobspec_from_yaml(text).resources == (Resource("core", Count(1, 1)),)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(JobspecError) as info:
        load_jobspec(path)
    assert str(info.value) == f"{path}: cannot read: No such file or directory"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"version: 1\n# caf\xe9\n")
    with pytest.raises(JobspecError, match=r"latin1\.yaml: cannot read: not UTF-8 text"):
        load_jobspec(path)


def test_yaml_error_without_a_file() -> None:
    with pytest.raises(JobspecError) as info:
        jobspec_from_yaml("version: 1\nresources: [\n")
    assert str(info.value).startswith("line 3:1: invalid YAML: ")
    assert info.value.line == 3 and info.value.source is None


def test_several_documents() -> None:
    with pytest.raises(JobspecError) as info:
        jobspec_from_yaml("a: 1\n---\nb: 2\n", source="job")
    assert str(info.value) == (
        "job:2:1: invalid YAML: expected a single document in the stream, but found another document"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a jobspec must be a mapping, not null"),
        ("- 1\n", "a jobspec must be a mapping, not a sequence"),
        ("just text", "a jobspec must be a mapping, not the string 'just text'"),
    ],
)
def test_top_level_not_a_mapping(text: str, message: str) -> None:
    with pytest.raises(JobspecError) as info:
        jobspec_from_yaml(text, source="j.yaml")
    assert str(info.value) == f"j.yaml: {message}"


def test_recursive_alias_is_refused() -> None:
    text = "version: 1\nresources: &r\n  - type: node\n    count: 1\n    with: *r\ntasks: []\nattributes:\n"
    with pytest.raises(JobspecError, match="nested more than 64 levels deep"):
        jobspec_from_yaml(text)


def test_alias_bomb_is_refused() -> None:
    lines = ["version: 1", "tasks: []", "attributes:", "a0: &a0 {type: core, count: 1}"]
    for level in range(1, 20):
        lines.append(f"a{level}: &a{level} {{type: core, count: 1, with: [*a{level - 1}, *a{level - 1}]}}")
    doc = yaml.load("\n".join(lines), Loader=jobspec_module._Loader)
    doc = {"version": 1, "tasks": [], "attributes": None, "resources": [doc["a19"]] * 8}
    with pytest.raises(JobspecError, match="at most 100000 resource entries"):
        jobspec_from_dict(doc)


def test_yaml_scalars_are_read_as_yaml_cpp_reads_them() -> None:
    doc = yaml.load(
        "a: yes\nb: True\nc: 2001-12-14\nd: 1_000\ne: 1:30\nf: 010\ng: 0x1f\nh: 1e3\ni: .inf\nj: ~\nk: true\nl: 1.5",
        Loader=jobspec_module._Loader,
    )
    assert doc == {
        "a": "yes",
        "b": "True",
        "c": "2001-12-14",
        "d": "1_000",
        "e": "1:30",
        "f": 8,
        "g": 31,
        "h": 1000.0,
        "i": math.inf,
        "j": None,
        "k": True,
        "l": 1.5,
    }


def test_c_loader_is_used_when_available() -> None:
    if yaml.__with_libyaml__:
        assert issubclass(jobspec_module._Loader, yaml.CSafeLoader)


# --------------------------------------------------------------------------------------------------------------
# One rule per case: (id, edit of the base document, full message)

INVALID: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    # top level
    ("missing-version", lambda d: d.pop("version"), "missing top-level key 'version' (a jobspec has version, "),
    ("missing-attributes", lambda d: d.pop("attributes"), "missing top-level key 'attributes'"),
    ("missing-tasks", lambda d: d.pop("tasks"), "missing top-level key 'tasks'"),
    ("fifth-key", lambda d: d.update(name="x"), "unknown top-level key 'name' (a jobspec has exactly "),
    ("version-0", lambda d: d.update(version=0), "version: only versions 1 to 9999 are supported, not 0"),
    ("version-10000", lambda d: d.update(version=10000), "version: only versions 1 to 9999 are supported, not 10000"),
    ("version-text", lambda d: d.update(version="one"), "version: must be an unsigned integer, not the string 'one'"),
    ("version-list", lambda d: d.update(version=[1]), "version: must be an unsigned integer, not a sequence"),
    ("version-negative", lambda d: d.update(version=-1), "version: must be an unsigned integer, not -1"),
    ("version-float", lambda d: d.update(version=1.0), "version: must be an unsigned integer, not the number 1.0"),
    # resources
    ("resources-map", lambda d: d.update(resources={}), "resources: must be a sequence of resources, not a mapping"),
    ("resource-scalar", lambda d: d.update(resources=[3]), "resources[0]: a resource must be a mapping, not the "),
    ("no-type", lambda d: core(d).pop("type"), "resources[0].with[0].with[0]: a resource needs a type"),
    ("type-null", lambda d: core(d).update(type=None), "resources[0].with[0].with[0].type: must be a scalar, not "),
    ("no-count", lambda d: core(d).pop("count"), "resources[0].with[0].with[0]: a resource needs a count"),
    ("count-null", lambda d: core(d).update(count=None), "count: must be an unsigned integer or a mapping, not null"),
    ("count-list", lambda d: core(d).update(count=[1]), "count: must be an unsigned integer or a mapping, not a seq"),
    ("count-negative", lambda d: core(d).update(count=-1), "count: must be an unsigned integer, not -1"),
    ("count-float", lambda d: core(d).update(count=1.5), "count: must be an unsigned integer, not the number 1.5"),
    ("count-bool", lambda d: core(d).update(count=True), "count: must be an unsigned integer, not the boolean true"),
    ("count-huge", lambda d: core(d).update(count=UINT_MAX + 1), "count: must be at most 4294967295, not 4294967296"),
    ("count-text", lambda d: core(d).update(count="4 cores"), "count: must be an unsigned integer, not the string"),
    ("no-min", lambda d: core(d).update(count={"max": 4}), "resources[0].with[0].with[0].count: a count mapping needs"),
    ("min-list", lambda d: core(d).update(count={"min": [1]}), "count.min: must be a scalar, not a sequence"),
    ("min-0", lambda d: core(d).update(count={"min": 0}), "count.min: min must be greater than zero"),
    ("min-negative", lambda d: core(d).update(count={"min": -2}), "count.min: must be an unsigned integer, not -2"),
    (
        "max-alone",
        lambda d: core(d).update(count={"min": 1, "max": 4}),
        "count: max, operator and operand go together: operator, operand missing",
    ),
    (
        "operand-alone",
        lambda d: core(d).update(count={"min": 1, "operand": 4}),
        "count: max, operator and operand go together: max, operator missing",
    ),
    (
        "max-below-min",
        lambda d: core(d).update(count={"min": 4, "max": 3, "operator": "+", "operand": 1}),
        "count.max: max (3) must be greater than or equal to min (4)",
    ),
    (
        "max-map",
        lambda d: core(d).update(count={"min": 4, "max": {}, "operator": "+", "operand": 1}),
        "count.max: must be a scalar, not a mapping",
    ),
    (
        "operator-unknown",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "-", "operand": 1}),
        "count.operator: must be one of '+', '*', '^', not '-'",
    ),
    (
        "operator-long",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "++", "operand": 1}),
        "count.operator: must be one of '+', '*', '^', not '++'",
    ),
    (
        "plus-operand-0",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "+", "operand": 0}),
        "count.operand: operand must be at least 1 for '+', not 0",
    ),
    (
        "times-operand-1",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "*", "operand": 1}),
        "count.operand: operand must be at least 2 for '*', not 1",
    ),
    (
        "power-operand-1",
        lambda d: core(d).update(count={"min": 2, "max": 4, "operator": "^", "operand": 1}),
        "count.operand: operand must be at least 2 for '^', not 1",
    ),
    (
        "power-min-1",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "^", "operand": 2}),
        "count.min: min must be at least 2 for '^', not 1",
    ),
    (
        "operand-huge",
        lambda d: core(d).update(count={"min": 1, "max": 4, "operator": "+", "operand": 2**31}),
        "count.operand: must be an integer from -2147483648 to 2147483647, not 2147483648",
    ),
    ("unknown-key", lambda d: core(d).update(size=4), "resources[0].with[0].with[0].size: unknown key 'size' (a "),
    ("unit-list", lambda d: core(d).update(unit=["GB"]), "resources[0].with[0].with[0].unit: must be a scalar, not a"),
    ("label-null", lambda d: core(d).update(label=None), "resources[0].with[0].with[0].label: must be a scalar, not "),
    ("id-map", lambda d: core(d).update(id={}), "resources[0].with[0].with[0].id: must be a scalar, not a mapping"),
    ("exclusive-yes", lambda d: core(d).update(exclusive="yes"), "exclusive: must be true or false, not the string "),
    ("exclusive-1", lambda d: core(d).update(exclusive=1), "exclusive: must be true or false, not the number 1"),
    ("exclusive-list", lambda d: core(d).update(exclusive=[]), "exclusive: must be true or false, not a sequence"),
    ("with-null", lambda d: core(d).update({"with": None}), "with: must be a sequence of resources, not null"),
    ("slot-no-label", lambda d: d["resources"][0]["with"][0].pop("label"), "resources[0].with[0]: a slot needs a"),
    # tasks
    ("tasks-map", lambda d: d.update(tasks={}), "tasks: must be a sequence of tasks, not a mapping"),
    ("task-scalar", lambda d: d.update(tasks=["app"]), "tasks[0]: a task must be a mapping, not the string 'app'"),
    ("no-command", lambda d: d["tasks"][0].pop("command"), "tasks[0]: a task needs a command"),
    ("command-text", lambda d: d["tasks"][0].update(command="app"), "tasks[0].command: must be a sequence, not the"),
    ("command-nested", lambda d: d["tasks"][0].update(command=[["a"]]), "tasks[0].command[0]: must be a string, not"),
    ("no-slot", lambda d: d["tasks"][0].pop("slot"), "tasks[0]: a task needs a slot"),
    ("slot-list", lambda d: d["tasks"][0].update(slot=["x"]), "tasks[0].slot: must be a scalar, not a sequence"),
    ("task-count-int", lambda d: d["tasks"][0].update(count=1), "tasks[0].count: must be a mapping, not the number 1"),
    ("task-count-empty", lambda d: d["tasks"][0].update(count={}), "tasks[0].count: must have exactly one entry"),
    ("task-count-list-value", lambda d: d["tasks"][0].update(count={"total": [1]}), "tasks[0].count.total: must be"),
    ("distribution-map", lambda d: d["tasks"][0].update(distribution={}), "tasks[0].distribution: must be a scalar"),
    ("task-attrs-list", lambda d: d["tasks"][0].update(attributes=[]), "tasks[0].attributes: must be a mapping, not"),
    ("task-two-entries", lambda d: d["tasks"][0].pop("count"), "tasks[0]: a task has 3 to 5 entries (command, slot,"),
    (
        "task-six-entries",
        lambda d: d["tasks"][0].update(distribution="block", attributes={}, extra=1),
        "tasks[0]: a task has 3 to 5 entries (command, slot, and some of count, distribution, attributes), not 6",
    ),
    # attributes
    ("attributes-list", lambda d: d.update(attributes=[]), "attributes: must be a mapping, not a sequence"),
    ("attributes-other", lambda d: d["attributes"].update(job={}), "attributes.job: unknown key 'job' (attributes has"),
    (
        "system-list",
        lambda d: d["attributes"].update(system=[]),
        "attributes.system: must be a mapping, not a sequence",
    ),
    ("duration-text", lambda d: system(d).update(duration="1h"), "attributes.system.duration: must be a number, not"),
    ("duration-bool", lambda d: system(d).update(duration=True), "duration: must be a number, not the boolean true"),
    ("duration-null", lambda d: system(d).update(duration=None), "attributes.system.duration: must be a number, not "),
    (
        "duration-negative",
        lambda d: system(d).update(duration=-0.5),
        "must be a finite number of seconds ≥ 0, not -0.5",
    ),
    ("duration-nan", lambda d: system(d).update(duration=math.nan), "must be a finite number of seconds ≥ 0, not nan"),
    ("duration-inf", lambda d: system(d).update(duration=".inf"), "must be a finite number of seconds ≥ 0, not inf"),
    ("queue-map", lambda d: system(d).update(queue={}), "attributes.system.queue: must be a string, not a mapping"),
    ("cwd-list", lambda d: system(d).update(cwd=[]), "attributes.system.cwd: must be a string, not a sequence"),
    ("environment-list", lambda d: system(d).update(environment=[]), "system.environment: must be a mapping, not a"),
    ("environment-value", lambda d: system(d).update(environment={"A": []}), "system.environment.A: must be a string"),
    # attributes happen before resources in Fluxion, so that error wins
    (
        "attributes-first",
        lambda d: (d["attributes"].update(job={}), core(d).pop("count")),
        "attributes.job: unknown key 'job'",
    ),
]

CONSTRAINTS = "attributes.system.constraints"
INVALID_CONSTRAINTS: list[tuple[str, Any, str]] = [
    ("null", None, f"{CONSTRAINTS}: a constraint must be a mapping, not null"),
    ("list", [], f"{CONSTRAINTS}: a constraint must be a mapping, not a sequence"),
    ("two-operators", {"properties": [], "ranks": []}, f"{CONSTRAINTS}: a constraint has at most one operator, not 2"),
    ("not-array", {"properties": "ssd"}, f"{CONSTRAINTS}.properties: the operands of 'properties' must be a sequence"),
    ("unknown-not-array", {"where": 1}, f"{CONSTRAINTS}.where: the operands of 'where' must be a sequence, not the "),
    ("unknown", {"where": []}, f"{CONSTRAINTS}.where: unknown constraint operator 'where' (properties, hostlist, "),
    ("property-int", {"properties": [3]}, f"{CONSTRAINTS}.properties[0]: a property must be a quoted string, not "),
    ("property-pipe", {"properties": ["a|b"]}, f"{CONSTRAINTS}.properties[0]: invalid property 'a|b': it may not "),
    ("property-caret", {"properties": ["^^a"]}, f"{CONSTRAINTS}.properties[0]: invalid property '^^a': it may not "),
    ("hostlist-open", {"hostlist": ["n[1-"]}, f"{CONSTRAINTS}.hostlist[0]: invalid hostlist 'n[1-'"),
    ("hostlist-backwards", {"hostlist": ["n[3-1]"]}, f"{CONSTRAINTS}.hostlist[0]: invalid hostlist 'n[3-1]'"),
    ("hostlist-letters", {"hostlist": ["n[a-b]"]}, f"{CONSTRAINTS}.hostlist[0]: invalid hostlist 'n[a-b]'"),
    ("hostlist-nested", {"hostlist": ["n[[1]]"]}, f"{CONSTRAINTS}.hostlist[0]: invalid hostlist 'n[[1]]'"),
    ("hostlist-close", {"hostlist": ["n1]"]}, f"{CONSTRAINTS}.hostlist[0]: invalid hostlist 'n1]'"),
    ("hostlist-list", {"hostlist": [["n1"]]}, f"{CONSTRAINTS}.hostlist[0]: must be a string, not a sequence"),
    ("ranks-negative", {"ranks": [-1]}, f"{CONSTRAINTS}.ranks[0]: invalid idset '-1'"),
    ("ranks-text", {"ranks": ["all"]}, f"{CONSTRAINTS}.ranks[0]: invalid idset 'all'"),
    ("ranks-backwards", {"ranks": ["4-2"]}, f"{CONSTRAINTS}.ranks[0]: invalid idset '4-2'"),
    ("and-scalar", {"and": ["x"]}, f"{CONSTRAINTS}.and[0]: a constraint must be a mapping, not the string 'x'"),
    (
        "deep",
        {"not": [{"or": [{"properties": [1]}]}]},
        f"{CONSTRAINTS}.not[0].or[0].properties[0]: a property must be a quoted string, not the number 1",
    ),
]


@pytest.mark.parametrize(("edit", "message"), [(e, m) for _, e, m in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid(edit: Callable[[dict[str, Any]], object], message: str) -> None:
    text = error_of(changed(edit), source="job.yaml")
    assert text.startswith("job.yaml: ")
    assert message in text


@pytest.mark.parametrize(
    ("constraint", "message"), [(c, m) for _, c, m in INVALID_CONSTRAINTS], ids=[i for i, _, _ in INVALID_CONSTRAINTS]
)
def test_invalid_constraint(constraint: Any, message: str) -> None:
    assert message in error_of(changed(lambda d: system(d).update(constraints=constraint)))


def test_messages_are_exact() -> None:
    doc = changed(lambda d: core(d).update(count={"min": 1, "max": 8, "operator": "*", "operand": 1}))
    assert error_of(doc, source="jobspec.yaml") == (
        "jobspec.yaml: resources[0].with[0].with[0].count.operand: operand must be at least 2 for '*', not 1"
    )
    doc = changed(lambda d: d["resources"][0]["with"][0].pop("label"))
    assert error_of(doc, source="jobspec.yaml") == "jobspec.yaml: resources[0].with[0]: a slot needs a label"
    assert error_of(doc) == "resources[0].with[0]: a slot needs a label"
    with pytest.raises(JobspecError) as info:
        jobspec_from_dict(doc, source="j")
    assert (info.value.source, info.value.path, info.value.reason) == (
        "j",
        "resources[0].with[0]",
        "a slot needs a label",
    )
    assert isinstance(info.value, ValueError)


VALID: list[tuple[str, Callable[[dict[str, Any]], object], Callable[[Jobspec], object]]] = [
    ("version-9999", lambda d: d.update(version=9999), lambda j: j.version == 9999),
    ("version-text", lambda d: d.update(version="2"), lambda j: j.version == 2),
    ("attributes-null", lambda d: d.update(attributes=None), lambda j: j.duration == 0 and j.user is None),
    ("attributes-empty", lambda d: d.update(attributes={}), lambda j: j.duration == 0),
    ("system-null", lambda d: d["attributes"].update(system=None), lambda j: j.duration == 0),
    ("system-scalar-ignored", lambda d: d["attributes"].update(system=3), lambda j: j.duration == 0),
    ("user-anything", lambda d: d["attributes"].update(user=[1, {"a": None}]), lambda j: j.user == [1, {"a": None}]),
    ("count-0", lambda d: core(d).update(count=0), lambda j: walk(j.resources)[2].count == Count(0, 0)),
    ("count-text", lambda d: core(d).update(count="3"), lambda j: walk(j.resources)[2].count == Count(3, 3)),
    ("count-octal-text", lambda d: core(d).update(count="010"), lambda j: walk(j.resources)[2].count == Count(8, 8)),
    ("count-max", lambda d: core(d).update(count=UINT_MAX), lambda j: walk(j.resources)[2].count.min == UINT_MAX),
    ("count-min", lambda d: core(d).update(count={"min": 3}), lambda j: walk(j.resources)[2].count == Count(3)),
    (
        "count-extra-keys-ignored",
        lambda d: core(d).update(count={"min": 3, "note": "x"}),
        lambda j: walk(j.resources)[2].count == Count(3),
    ),
    (
        "count-strings",
        lambda d: core(d).update(count={"min": "2", "max": "64", "operator": "^", "operand": "2"}),
        lambda j: walk(j.resources)[2].count == Count(2, 64, "^", 2),
    ),
    ("exclusive-text", lambda d: core(d).update(exclusive="true"), lambda j: walk(j.resources)[2].exclusive is True),
    ("exclusive-false", lambda d: core(d).update(exclusive=False), lambda j: walk(j.resources)[2].exclusive is False),
    ("with-empty", lambda d: core(d).update({"with": []}), lambda j: walk(j.resources)[2].with_ == ()),
    ("type-number", lambda d: core(d).update(type=7), lambda j: walk(j.resources)[2].type == "7"),
    ("label-on-core", lambda d: core(d).update(label="c"), lambda j: walk(j.resources)[2].label == "c"),
    ("resources-empty", lambda d: d.update(resources=[]), lambda j: j.resources == ()),
    ("tasks-empty", lambda d: d.update(tasks=[]), lambda j: j.tasks == ()),
    (
        "xor-slot-unlabeled",
        lambda d: core(d).update(type="xor_slot"),
        lambda j: walk(j.resources)[2].type == "xor_slot",
    ),
    (
        "task-unknown-key-fits",
        lambda d: d["tasks"][0].update(foo=1),
        lambda j: j.tasks[0].count == {"per_slot": "1"},
    ),
    (
        "task-without-count",
        lambda d: (d["tasks"][0].pop("count"), d["tasks"][0].update(distribution="block")),
        lambda j: j.tasks[0].count == {} and j.tasks[0].distribution == "block",
    ),
    (
        "task-null-word",
        lambda d: d["tasks"][0].update(command=[None, 1]),
        lambda j: j.tasks[0].command == ("null", "1"),
    ),
    ("duration-text", lambda d: system(d).update(duration="1e3"), lambda j: j.duration == 1000.0),
    ("duration-fraction", lambda d: system(d).update(duration=0.1), lambda j: j.duration_seconds(100) == 1),
    ("duration-zero", lambda d: system(d).update(duration=0), lambda j: j.duration_seconds(100) == 100),
    ("queue-number", lambda d: system(d).update(queue=5), lambda j: j.queue == "5"),
    ("environment-null", lambda d: system(d).update(environment=None), lambda j: j.environment == {}),
    ("optional", lambda d: system(d).update(shell={"x": 1}), lambda j: j.system == {"shell": {"x": 1}}),
    ("constraints-empty", lambda d: system(d).update(constraints={}), lambda j: j.constraints == MatchAll()),
    ("no-constraints", lambda d: None, lambda j: j.constraints is None and j.matches("x", {}, -1)),
    (
        "property-empty",
        lambda d: system(d).update(constraints={"properties": ["", "^"]}),
        lambda j: j.constraints == PropertyConstraint(("", "^")),
    ),
    (
        "ranks-ints",
        lambda d: system(d).update(constraints={"ranks": [0, "[2-3]", ""]}),
        lambda j: j.constraints == RankConstraint(((0, 0), (2, 3))),
    ),
]


@pytest.mark.parametrize(("edit", "check"), [(e, c) for _, e, c in VALID], ids=[i for i, _, _ in VALID])
def test_valid(edit: Callable[[dict[str, Any]], object], check: Callable[[Jobspec], object]) -> None:
    assert check(jobspec_from_dict(changed(edit)))


def test_unquoted_property_is_fine_outside_yaml_and_when_quoted() -> None:
    text = yaml.safe_dump(changed(lambda d: system(d).update(constraints={"properties": ["ssd"]})))
    assert "- ssd" in text
    with pytest.raises(JobspecError, match="not the unquoted string 'ssd'"):
        jobspec_from_yaml(text)
    quoted = text.replace("- ssd", "- 'ssd'")
    assert jobspec_from_yaml(quoted).constraints == PropertyConstraint(("ssd",))
    block = text.replace("- ssd", "- >-\n        ssd")
    assert jobspec_from_yaml(block).constraints == PropertyConstraint(("ssd",))


def test_unquoted_strings_elsewhere_are_strings() -> None:
    text = yaml.safe_dump(changed(lambda d: system(d).update(constraints={"hostlist": ["n1"]}, queue="batch")))
    js = jobspec_from_yaml(text)
    assert js.queue == "batch" and js.matches("n1", {}, 0)


# --------------------------------------------------------------------------------------------------------------
# Constraint semantics (RFC 31 as constraint.cpp evaluates it)


def constraint_of(tree: Any) -> Any:
    return jobspec_from_dict(changed(lambda d: system(d).update(constraints=tree))).constraints


def test_properties() -> None:
    c = constraint_of({"properties": ["ssd", "^slow"]})
    assert c.matches("n", {"ssd": "1"}, 0)
    assert not c.matches("n", {"ssd": "1", "slow": ""}, 0)
    assert not c.matches("n", {}, 0)
    assert constraint_of({"properties": []}).matches("n", {}, 0)


def test_hostlist() -> None:
    c = constraint_of({"hostlist": ["node[1-3,10],login0", "io[01-02]-ib"]})
    assert isinstance(c, HostlistConstraint)
    assert [c.matches(n, {}, 0) for n in ("node1", "node3", "node10", "node4", "node01", "login0", "login1")] == [
        True,
        True,
        True,
        False,
        False,
        True,
        False,
    ]
    assert [c.matches(n, {}, 0) for n in ("io01-ib", "io1-ib", "io02-ib", "io03-ib", "io01")] == [
        True,
        False,
        True,
        False,
        False,
    ]
    assert not c.matches("node", {}, 0)


def test_ranks() -> None:
    c = constraint_of({"ranks": ["0-3,7"]})
    assert [c.matches("n", {}, r) for r in (-1, 0, 3, 4, 7, 8)] == [False, True, True, False, True, False]


def test_logic() -> None:
    yes: dict[str, list[str]] = {"properties": []}
    no: dict[str, list[str]] = {"ranks": []}
    assert isinstance(constraint_of({"and": [yes, no]}), AndConstraint)
    assert constraint_of({"and": []}).matches("n", {}, 0)
    assert not constraint_of({"or": []}).matches("n", {}, 0)
    assert constraint_of({"or": [no, yes]}).matches("n", {}, 0)
    assert not constraint_of({"and": [yes, no]}).matches("n", {}, 0)
    not_both = constraint_of({"not": [yes, no]})
    assert isinstance(not_both, NotConstraint) and not_both.matches("n", {}, 0)
    assert not constraint_of({"not": [yes]}).matches("n", {}, 0)
    assert not constraint_of({"not": []}).matches("n", {}, 0)


# --------------------------------------------------------------------------------------------------------------
# duration_seconds (jobmeta_t::build)


@pytest.mark.parametrize(
    ("duration", "horizon", "seconds"),
    [(3600, HORIZON, 3600), (1.2, 10, 2), (0.1, 10, 1), (0, 1234, 1234), (10, 10, 10)],
)
def test_duration_seconds(duration: float, horizon: int, seconds: int) -> None:
    js = jobspec_from_dict(changed(lambda d: system(d).update(duration=duration)))
    assert js.duration_seconds(horizon) == seconds


def test_duration_seconds_errors() -> None:
    js = jobspec_from_dict(changed(lambda d: system(d).update(duration=10.5)))
    with pytest.raises(JobspecError, match=r"^attributes.system.duration: duration 10.5 s does not fit"):
        js.duration_seconds(10)
    with pytest.raises(ValueError, match="horizon must be positive"):
        js.duration_seconds(0)


# --------------------------------------------------------------------------------------------------------------
# Count.calc (matcher.cpp calc_count)


@pytest.mark.parametrize(
    ("count", "available", "expected"),
    [
        (Count(1, 2), 5, 2),
        (Count(4, 4), 3, 0),
        (Count(1, 99999), 36, 36),
        (Count(1), 17, 17),
        (Count(3, 10, "+", 4), 9, 7),
        (Count(3, 10, "+", 4), 12, 7),
        (Count(3, 20, "+", 4), 12, 11),
        (Count(1, 64, "*", 2), 36, 32),
        (Count(1, 2, "*", 2), 36, 2),
        (Count(3, 100, "*", 3), 80, 27),
        (Count(2, 64, "^", 4), 64, 16),
        (Count(2, 64, "^", 2), 64, 16),
        (Count(2, 300, "^", 2), 300, 256),
        (Count(0, 0), 5, 0),
        (Count(UINT_MAX, UINT_MAX), UINT_MAX, UINT_MAX),
        (Count(1, UINT_MAX, "*", 2), UINT_MAX, 2**31),
    ],
)
def test_calc(count: Count, available: int, expected: int) -> None:
    assert count.calc(available) == expected


def test_count_refuses_what_cannot_be_computed() -> None:
    with pytest.raises(ValueError, match="invalid count"):
        Count(1, 4, "-", 1)
    with pytest.raises(ValueError, match="invalid count"):
        Count(1, 4, "+", 0)


@st.composite
def counts(draw: st.DrawFn) -> Count:
    operator = draw(st.sampled_from("+*^"))
    low = draw(st.integers(2 if operator == "^" else 1, 5000))
    high = draw(st.one_of(st.just(UINT_MAX), st.integers(low, 10**6)))
    operand = draw(st.integers(1 if operator == "+" else 2, 40))
    return Count(low, high, operator, operand)


def step(count: Count, value: int) -> int:
    if count.operator == "+":
        return value + count.operand
    if count.operator == "*":
        return value * count.operand
    return int(value**count.operand)


@given(counts(), st.integers(0, UINT_MAX))
def test_calc_properties(count: Count, available: int) -> None:
    result = count.calc(available)
    if count.min > available:
        assert result == 0
        return
    assert count.min <= result <= min(count.max, available)
    if count.operator == "+":
        assert (result - count.min) % count.operand == 0, "reachable from min by the operator"
    else:
        value = count.min
        while value < result:
            value = step(count, value)
        assert value == result, "reachable from min by the operator"
    assert step(count, result) > min(count.max, available), "the largest such value"


@given(counts(), st.integers(0, 3000))
def test_calc_plus_matches_fluxion_loop(count: Count, available: int) -> None:
    """The older calc_count looped ``cur += operand``; the newer arithmetic must agree."""
    if count.operator != "+":
        return
    expected, current = 0, count.min
    while current <= available and current <= count.max:
        expected, current = current, current + count.operand
    assert count.calc(available) == expected
