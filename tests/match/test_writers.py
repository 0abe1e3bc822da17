"""Match writers (``-F``): R formats byte-compatible with Fluxion's."""

from __future__ import annotations

import json

import pytest

from kubeflux.jobspec import jobspec_from_yaml
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.match.writers import compress_hosts, compress_ids
from kubeflux.resources import NodeSpec, build_graph

JOB = """
version: 9999
resources:
  - type: node
    count: 2
    with:
      - type: slot
        count: 1
        label: default
        with:
          - type: core
            count: 2
          - type: gpu
            count: 1
attributes:
  system:
    duration: 60
tasks:
  - command: ["app"]
    slot: default
    count:
      per_slot: 1
"""


@pytest.mark.parametrize(
    ("ids", "text"),
    [([], ""), ([4], "4"), ([0, 1, 2, 3], "0-3"), ([0, 2, 3, 5], "0,2-3,5"), ([1, 35, 100], "1,35,100")],
)
def test_ids_compress_into_idsets(ids: list[int], text: str) -> None:
    assert compress_ids(ids) == text


@pytest.mark.parametrize(
    ("hosts", "text"),
    [
        (["node0"], "node0"),
        (["node0", "node1", "node2"], "node[0-2]"),
        (["node3", "node0", "node1", "node2"], "node[3,0-2]"),
        (["nid007", "nid008", "login1"], "nid[007-008],login1"),
        (["fe", "node1"], "fe,node1"),
    ],
)
def test_hosts_compress_into_hostlists_in_order(hosts: list[str], text: str) -> None:
    assert compress_hosts(hosts) == text


def test_rv1_nosched_groups_ranks_by_their_children() -> None:
    nodes = [NodeSpec(f"node{i}", cores=4, gpus=1, properties={"arch": "x86"} if i else {}) for i in range(3)]
    engine = Engine(build_graph(nodes), policy="low", match_format="rv1_nosched")

    result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, jobspec_from_yaml(JOB))

    assert result.resources.endswith("\n")
    assert json.loads(result.resources) == {
        "version": 1,
        "execution": {
            "R_lite": [{"rank": "0-1", "children": {"core": "0-1", "gpu": "0"}}],
            "nodelist": ["node[0-1]"],
            "properties": {"arch=x86": "1"},
            "starttime": 0,
            "expiration": 60,
        },
    }
    later = engine.match(
        MatchOp.ALLOCATE_ORELSE_RESERVE, jobspec_from_yaml(JOB.replace("count: 2\n    with", "count: 3\n    with"))
    )
    assert json.loads(later.resources)["execution"]["starttime"] == later.at > 0
