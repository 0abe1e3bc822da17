"""``kubeflux query``: inputs that once stopped the shell with a traceback get resource-query's answer or a clear
error, and the session goes on."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kubeflux.jobspec import load_jobspec
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.query import RULE, QueryOptions, QuerySession, _interactive, run_query
from kubeflux.resources import NodeSpec, build_graph

_NO_DURATION_NODE = """\
version: 9999
resources:
  - type: node
    count: 1
    exclusive: true
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 1
attributes:
  system: {}
tasks:
  - command: [app]
    slot: default
    count: {per_slot: 1}
"""


def run(session: QuerySession, lines: list[str]) -> str:
    """The ``-t`` output of ``lines``, the last command's alone (earlier output is dropped)."""
    assert isinstance(session.out, io.StringIO)
    for line in lines:
        session.out.seek(0)
        session.out.truncate()
        session.execute(line)
    return session.out.getvalue()


def allocated(jobid: int, at: str = "Now") -> str:
    mode = "ALLOCATED" if at == "Now" else "RESERVED"
    return f"{RULE}\nINFO: JOBID={jobid}\nINFO: RESOURCES={mode}\nINFO: SCHEDULED AT={at}\n{RULE}\n"


def test_a_job_without_duration_is_checked_for_satisfiability_over_the_whole_horizon(tmp_path: Path) -> None:
    """Such a job spans the whole horizon, so its satisfiability window cannot start before the horizon does
    (graph_end - duration - 1 is base - 1): it is the horizon itself, where Fluxion checks a job one second
    shorter."""
    jobspec = tmp_path / "node.yaml"
    jobspec.write_text(_NO_DURATION_NODE)
    nodes = [NodeSpec(f"node{i}", cores=2) for i in range(2)]
    session = QuerySession(Engine(build_graph(nodes)), io.StringIO())
    satisfiable = f"{RULE}\nINFO: Satisfiable request\n{RULE}\n"

    assert run(session, [f"match satisfiability {jobspec}"]) == satisfiable
    assert run(session, [f"match allocate {jobspec}"]).endswith(allocated(1))
    # node0 is held for the whole horizon; node1 is free over it
    assert run(session, [f"match satisfiability {jobspec}"]) == satisfiable
    assert run(session, [f"match allocate_with_satisfiability {jobspec}"]).endswith(allocated(2))
    # both nodes are held until the horizon ends: no window is left for a job as long as the horizon
    for op in ("allocate_orelse_reserve", "allocate_with_satisfiability"):
        busy = run(session, [f"match {op} {jobspec}"])
        assert busy.startswith(f"{RULE}\nINFO: No matching resources found\nINFO: Unsatisfiable request\n")
    assert run(session, [f"match satisfiability {jobspec}"]) == f"{RULE}\nINFO: Unsatisfiable request\n{RULE}\n"
    assert run(session, ["cancel 1", f"match allocate {jobspec}"]).endswith(allocated(5))


_WHOLE_NODE = _NO_DURATION_NODE.replace("system: {}", "system: {duration: 3600}")


def test_a_match_never_takes_the_id_of_a_live_job_after_an_update_lowered_the_next_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``update`` sets the next job id to its job's id + 1. A match that took that id while the job holding it
    was still allocated recorded two jobs under one id: the root kept only the newer job's aggregate span, a
    cancel left the older one's behind as capacity no job held, and a later match that the nodes admitted could
    be refused by an aggregate filter part-way through being recorded (PlannerBusyError)."""
    jobspec = tmp_path / "node.yaml"
    jobspec.write_text(_WHOLE_NODE)
    nodes = [NodeSpec(f"node{i}", cores=2) for i in range(3)]
    rset = tmp_path / "R.json"
    rset.write_text(
        Engine(build_graph(nodes), match_format="jgf").match(MatchOp.ALLOCATE, load_jobspec(jobspec)).resources
    )
    session = QuerySession(Engine(build_graph(nodes)), io.StringIO())
    match = f"match allocate {jobspec}"

    run(session, [match, match, "cancel 1"])
    assert run(session, [f"update allocate jgf {rset} 1 0 3600"]).endswith(allocated(1))
    capsys.readouterr()
    assert run(session, [match]) == f"{RULE}\nINFO: No matching resources found\nINFO: JOBID=2\n{RULE}\n"
    assert capsys.readouterr().err == "ERROR: job 2 already exists (ALLOCATED); the next job id is 3\n"
    assert "node0[1:x]" in run(session, [match])  # job 3: node2 is job 1's, node1 job 2's
    # each node is held once: cancelling jobs 2 and 3 frees node1 and node0, and nothing else
    assert run(session, ["cancel 2", "cancel 3", match]).endswith(allocated(4))
    assert run(session, [match]).endswith(allocated(5))
    assert "No matching resources found" in run(session, [match])
    assert capsys.readouterr().err == ""


def test_a_graph_whose_vertex_has_two_containment_parents_is_refused_before_any_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """resource-query exits at start-up on such a graph (its store refuses "Invalid containment edge"); a
    match used to offer a core held through one parent again through the other, and recording it failed."""
    nodes = [
        {"id": "0", "metadata": {"type": "cluster", "name": "mp0", "paths": {"containment": "/mp0"}}},
        {"id": "1", "metadata": {"type": "node", "name": "node0", "paths": {"containment": "/mp0/node0"}}},
        {"id": "2", "metadata": {"type": "node", "name": "node1", "paths": {"containment": "/mp0/node1"}}},
        {"id": "3", "metadata": {"type": "core", "name": "core0", "paths": {"containment": "/mp0/node0/core0"}}},
    ]
    edges = [{"source": s, "target": t} for s, t in (("0", "1"), ("0", "2"), ("2", "3"), ("1", "3"))]
    graph = tmp_path / "mp.json"
    graph.write_text(json.dumps({"graph": {"nodes": nodes, "edges": edges}}))
    jobspec = tmp_path / "node.yaml"
    jobspec.write_text(_WHOLE_NODE)
    output = tmp_path / "out.txt"

    status = run_query(
        QueryOptions(graph, load_format="jgf", output=output), io.StringIO(f"match allocate {jobspec}\n" * 3)
    )

    assert status == 1 and not output.exists()
    assert capsys.readouterr().err == (
        f"ERROR: {graph}: edges[3] (1 -> 3): invalid containment edge: core0 would have two containment parents, "
        "node1 (edges[2]) and node0\n"
    )


@pytest.mark.parametrize(
    ("where", "reason"),
    [("", "Is a directory"), ("missing/out.txt", "No such file or directory")],
    ids=["a directory", "in a missing folder"],
)
def test_a_test_output_that_cannot_be_written_is_exit_2_naming_the_option_before_the_graph_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, reason: str
) -> None:
    """``-t`` used to be opened after the graph was loaded, and an unwritable path ended in a traceback."""
    output = tmp_path / where

    status = run_query(QueryOptions(tmp_path / "no-graph.graphml", output=output), io.StringIO("quit\n"))

    assert status == 2
    assert capsys.readouterr().err == f"ERROR: -t/--test-output {output}: {reason}\n"


def test_info_of_a_job_id_int_cannot_read_says_no_such_job_and_the_session_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``'²'.isdigit()`` is true but ``int('²')`` fails: ``info ²`` used to end the session with a traceback."""
    session = QuerySession(Engine(build_graph([NodeSpec("node0", cores=2)])), io.StringIO())

    assert session.execute("info ²") and session.execute("info x")

    assert capsys.readouterr().out == "ERROR: jobid doesn't exist: ²\nERROR: jobid doesn't exist: x\n"


def test_an_unclosed_quote_at_the_prompt_is_an_error_and_the_session_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The prompt splits a line as a shell would: ``info "`` used to end the session with a traceback."""
    lines = iter(['info "', "info 1"])

    def prompt(_: str) -> str:
        line = next(lines, None)
        if line is None:
            raise EOFError
        return line

    monkeypatch.setattr("builtins.input", prompt)
    _interactive(QuerySession(Engine(build_graph([NodeSpec("node0", cores=2)])), io.StringIO()))

    said = capsys.readouterr()
    assert said.err == "ERROR: malformed command: No closing quotation\n"
    assert said.out == "ERROR: jobid doesn't exist: 1\n"  # the next line still ran
