"""Match writers (``-F``): R formats byte-compatible with Fluxion's."""

from __future__ import annotations

import json

import pytest

from kubeflux.match.engine import Engine, MatchOp
from kubeflux.match.writers import compress_hosts, compress_ids
from kubeflux.resources import NodeSpec, build_graph
from tests.match._helpers import node_cores_job


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

    result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, node_cores_job(nodes=2, cores=2, gpus=1, duration=60))

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
    later = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, node_cores_job(nodes=3, cores=2, gpus=1, duration=60))
    assert json.loads(later.resources)["execution"]["starttime"] == later.at > 0
