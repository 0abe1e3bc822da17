"""The scheduler core on nodes with sockets (``node → socket → core, gpu``) and GPUs under other resource names.

Each test drives a real :class:`KubefluxScheduler` with the engine underneath, through the tiny stand-in API server
of ``test_core``; the placements are read back from the bind decisions' allocation annotations.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.jobspec import jobspec_from_dict
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from kubeflux.scheduler.allocation import ALLOCATION_ANNOTATION
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.scheduler.graphview import CLUSTER_NAME
from kubeflux.scheduler.interface import Bind, Decision, Unschedulable
from kubeflux.scheduler.objects import CPU, GPU, MEMORY, Node, Pod, PodGroup, PodPhase
from kubeflux.scheduler.testing import ADDED, MODIFIED, Cluster
from kubeflux.scheduler.translate import (
    SOCKETS_LABEL,
    NodeShape,
    Placement,
    node_spec,
    placement_from_output,
    pod_jobspec,
)
from tests.shared import REPO

AMD = "amd.com/gpu"
SOCKETED = NodeShape(SOCKETS_LABEL, 1, (GPU, AMD))


def node(name: str, cores: int = 16, sockets: str | None = "2", **extra: int) -> Node:
    labels = {} if sockets is None else {SOCKETS_LABEL: sockets}
    return Node(name, uid=name, allocatable={CPU: cores * 1000, MEMORY: 64 * 2**30, **extra}, labels=labels)


def pod(name: str, cpu: int, *, scheduler: str = "kubeflux", t: float = 0.0, **extra: int) -> Pod:
    return Pod("default", name, f"uid-{name}", scheduler, creation_time=t, requests={CPU: cpu * 1000, **extra})


def core(policy: str = "lonode", shape: NodeShape = SOCKETED) -> KubefluxScheduler:
    return KubefluxScheduler(policy=policy, shape=shape)


def placed(decisions: list[Decision]) -> dict[str, tuple[str, list[str], list[str]]]:
    """Pod name → (node, cores, gpus) of each bind, as its allocation annotation records them."""
    result = {}
    for d in decisions:
        if isinstance(d, Bind):
            record = json.loads(d.annotations[ALLOCATION_ANNOTATION])
            result[d.pod.split("/")[1]] = (d.node, record["cores"], record["gpus"])
    return result


def cores(first: int, last: int) -> list[str]:
    return [f"core{i}" for i in range(first, last + 1)]


def test_a_labelled_node_is_built_with_its_sockets_and_an_unlabelled_one_with_the_default() -> None:
    assert node_spec(node("w0", sockets="2"), shape=SOCKETED).sockets == 2
    assert node_spec(node("w1", sockets=None), shape=SOCKETED).sockets == 1
    assert node_spec(node("w2", sockets="2"), shape=NodeShape()).sockets == 0  # no label read: today's shape


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("two", "must be a whole number of sockets"),
        ("0", "must be a whole number of sockets"),
        ("-1", "must be a whole number of sockets"),
        ("99999999", "must be a whole number of sockets"),
        ("\u00b2", "must be a whole number of sockets"),
        (" 2.0", "must be a whole number of sockets"),
        ("32", "32 sockets but only 16 whole cores"),
    ],
)
def test_a_bad_sockets_label_names_the_node_and_label_and_the_node_keeps_the_default_shape(
    value: str, why: str
) -> None:
    sockets, problem = SOCKETED.sockets(node("w7", sockets=value))
    assert sockets == 1
    assert problem is not None
    assert problem.startswith(f"Node w7: metadata.labels[{SOCKETS_LABEL}]: {why}")
    assert problem.endswith("taken as 1 socket(s)")


def test_a_shape_reading_a_label_gives_every_node_sockets() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        NodeShape(SOCKETS_LABEL, 0)


def test_a_pod_of_a_socket_takes_the_socket_the_engine_prefers_and_the_next_takes_the_other() -> None:
    cluster = Cluster(core(), [node("w0")])
    cluster.add(pod("a", 8), pod("b", 8, t=1), pod("c", 8, t=2))
    decisions = cluster.run()
    assert placed(decisions) == {"a": ("w0", cores(0, 7), []), "b": ("w0", cores(8, 15), [])}
    assert "default/c" not in {d.pod for d in decisions if isinstance(d, Bind)}


def test_the_scheduler_places_a_pod_where_the_engine_alone_places_it() -> None:
    """The same graph and jobspec given to the engine directly choose the same cores (one socket, packed)."""
    for policy in ("lonode", "hinode", "first", "lonodex"):
        cluster = Cluster(core(policy), [node("w0", 16, sockets="2")])
        cluster.add(pod("a", 5))
        got = placed(cluster.run())["a"]
        engine = Engine(
            build_graph([NodeSpec("w0", cores=16, memory=64 * 2**30, sockets=2)], cluster=CLUSTER_NAME),
            policy=policy,
        )
        spec = pod_jobspec(pod("a", 5), 3600, socket_size=(8, 0))
        assert spec is not None
        result = engine.match(MatchOp.ALLOCATE, spec, now=0)
        want = placement_from_output(result.resources)
        assert got == ("w0", list(want.cores), []), policy
        sockets_used = {int(name.removeprefix("core")) // 8 for name in got[1]}
        assert len(sockets_used) == (2 if policy == "lonodex" else 1), policy  # lonodex holds the node whole


def test_a_pod_larger_than_a_socket_spans_the_fewest_sockets() -> None:
    cluster = Cluster(core(), [node("w0", 16, sockets="2")])
    cluster.add(pod("big", 12))
    assert placed(cluster.run()) == {"big": ("w0", [*cores(0, 5), *cores(8, 13)], [])}


def test_an_odd_pod_larger_than_a_socket_holds_exactly_what_it_asks() -> None:
    cluster = Cluster(core(), [node("w0", 32, sockets="2")])
    cluster.add(pod("odd", 25), pod("rest", 7, t=1))
    assert placed(cluster.run()) == {
        "odd": ("w0", [*cores(0, 12), *cores(16, 27)], []),  # 13 + 13 matched, the 26th released at once
        "rest": ("w0", [*cores(13, 15), *cores(28, 31)], []),
    }
    graph = cluster.scheduler.books.graph
    assert graph is not None and graph.busy_cores("w0", 0) == 32


def test_gpus_under_another_resource_name_come_from_the_pods_socket_and_are_released_at_its_end() -> None:
    cluster = Cluster(core(), [node("g0", 16, sockets="2", **{AMD: 4})])
    cluster.add(pod("a", 4, **{AMD: 2}), pod("b", 4, t=1, **{AMD: 2}), pod("c", 1, t=2, **{AMD: 1}))
    first = placed(cluster.run())
    assert first == {"a": ("g0", cores(0, 3), ["gpu0", "gpu1"]), "b": ("g0", cores(8, 11), ["gpu2", "gpu3"])}
    cluster.end("a")
    assert placed(cluster.run(10.0)) == {"c": ("g0", ["core0"], ["gpu0"])}


def test_a_pod_asking_a_gpu_the_node_does_not_have_waits() -> None:
    cluster = Cluster(core(), [node("g0", 16, sockets="2", **{AMD: 4})])
    cluster.add(pod("nv", 1, **{GPU: 1}))
    assert placed(cluster.run()) == {}


def test_another_schedulers_pod_is_replayed_onto_the_socketed_node_and_kubeflux_fills_the_rest() -> None:
    cluster = Cluster(core(), [node("w0", 16, sockets="2")])
    other = pod("other", 8, scheduler="default-scheduler")
    other.node_name, other.phase = "w0", PodPhase.RUNNING
    cluster.add(other)
    cluster.add(pod("a", 8, t=1), pod("b", 8, t=2))
    assert placed(cluster.run()) == {"a": ("w0", cores(8, 15), [])}
    cluster.delete("other")
    assert placed(cluster.run(5.0)) == {"b": ("w0", cores(0, 7), [])}


def test_a_restarted_scheduler_recovers_the_socketed_allocations_from_the_annotations() -> None:
    nodes = [node("w0", 16, sockets="2"), node("w1", 16, sockets="2")]
    cluster = Cluster(core(), nodes)
    cluster.add(pod("a", 8), pod("b", 4, t=1), pod("c", 8, t=2))
    before = placed(cluster.run())
    assert before == {"a": ("w0", cores(0, 7), []), "b": ("w0", cores(8, 11), []), "c": ("w1", cores(0, 7), [])}

    restarted = core()
    again = Cluster(restarted, nodes)
    for p in cluster.pods.values():
        again.pods[p.key] = p
        again.tell(ADDED, p)
    again.add(pod("d", 4, t=3), pod("e", 8, t=4))
    after = placed(again.run(1.0))
    assert after == {"d": ("w0", cores(12, 15), []), "e": ("w1", cores(8, 15), [])}
    graph = restarted.books.graph
    assert graph is not None
    assert graph.busy_cores("w0", 1) == 16
    assert graph.busy_cores("w1", 1) == 16
    for name in ("a", "b", "c", "d", "e"):
        again.end(name)
    again.run(2.0)
    assert graph.busy_cores("w0", 2) == 0
    assert graph.busy_cores("w1", 2) == 0
    assert not restarted.books.allocations


def test_a_gang_of_socket_sized_members_is_placed_one_member_a_socket() -> None:
    cluster = Cluster(core(), [node("w0", 16, sockets="2"), node("w1", 16, sockets="2")])
    members = [pod(f"m{i}", 8, t=float(i)) for i in range(4)]
    for m in members:
        m.labels = {"scheduling.x-k8s.io/pod-group": "g"}
    cluster.tell(ADDED, PodGroup("default", "g", 4))
    cluster.add(*members)
    got = placed(cluster.run())
    assert sorted(got.values()) == [
        ("w0", cores(0, 7), []),
        ("w0", cores(8, 15), []),
        ("w1", cores(0, 7), []),
        ("w1", cores(8, 15), []),
    ]


def test_a_placement_is_read_back_through_the_socket_lines() -> None:
    output = (
        "      ---------core0[1:x]\n"
        "      ---------gpu0[1:x]\n"
        "      ------socket0[1:s]\n"
        "      ---------core8[1:x]\n"
        "      ------socket1[1:s]\n"
        "      ---socket-node-3[1:s]\n"
        "      kubeflux0[1:s]\n"
    )
    assert placement_from_output(output) == Placement("socket-node-3", ("core0", "core8"), ("gpu0",))


def test_jobspecs_are_shared_between_pods_of_one_shape() -> None:
    one = pod_jobspec(pod("a", 4), 60, socket_size=(8, 2))
    two = pod_jobspec(pod("b", 4), 60, socket_size=(8, 2))
    assert one is two
    assert one == jobspec_from_dict(
        {
            "version": 1,
            "resources": [
                {
                    "type": "node",
                    "count": 1,
                    "with": [
                        {
                            "type": "socket",
                            "count": 1,
                            "with": [
                                {"type": "slot", "count": 1, "label": "task", "with": [{"type": "core", "count": 4}]}
                            ],
                        }
                    ],
                }
            ],
            "attributes": {"system": {"duration": 60}},
            "tasks": [{"command": ["pod"], "slot": "task", "count": {"per_slot": 1}}],
        }
    )


def test_a_node_relabelled_with_more_sockets_is_reshaped_and_keeps_its_pods_on_their_cores() -> None:
    one = node("w0", 16, sockets="1")
    cluster = Cluster(core(), [one])
    cluster.add(pod("a", 4), pod("b", 4, t=1))
    assert placed(cluster.run()) == {"a": ("w0", cores(0, 3), []), "b": ("w0", cores(4, 7), [])}
    two = node("w0", 16, sockets="2")
    cluster.tell(MODIFIED, two)
    graph = cluster.scheduler.books.graph
    assert graph is not None
    assert graph.specs["w0"].sockets == 2
    assert graph.socket_size == (8, 0)  # was (16, 0): one socket of 16
    cluster.add(pod("c", 8, t=2), pod("d", 4, t=3))
    # a and b still hold socket 0's first 8 cores: c takes socket 1, d has no socket with 4 free
    assert placed(cluster.run(1.0)) == {"c": ("w0", cores(8, 15), [])}
    assert graph.busy_cores("w0", 1) == 16


def test_the_simulator_runs_kubeflux_on_socketed_nodes(tmp_path: Path) -> None:
    """``kubeflux simulate --sockets 2``: the seed's demo (pods of one socket each) runs as on flat nodes."""
    starts = {}
    for sockets in ("0", "2"):
        out = tmp_path / f"sockets-{sockets}"
        args = ["simulate", "--workload", str(REPO / "examples/workloads/pi-demo.yaml"), "--nodes", "1"]
        args += ["--cores-per-node", "16", "--sockets", sockets, "-s", "kubeflux", "--out", str(out)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        with (out / "kubeflux" / "jobs.csv").open() as rows:
            starts[sockets] = {row["job_id"]: row["starting_time"] for row in csv.DictReader(rows)}
    assert starts["2"] == starts["0"]
    assert [float(start) for start in starts["2"].values()].count(0.0) == 2  # two pods of 8 cores at a time on 16 cores


def test_a_node_claiming_more_gpus_than_a_graph_node_holds_is_kept_out_and_logged() -> None:
    scheduler = core()
    cluster = Cluster(scheduler, [node("huge", 16, **{AMD: 10**9}), node("fine", 16, **{AMD: 2})])
    cluster.add(pod("a", 1, **{AMD: 1}))
    assert placed(cluster.run()) == {"a": ("fine", ["core0"], ["gpu0"])}
    graph = scheduler.books.graph
    assert graph is not None and "huge" not in graph.specs
    assert any(
        line.startswith("Node huge: allocatable[nvidia.com/gpu+amd.com/gpu]: more than 65536 GPUs in total")
        for line in scheduler.log
    )


def test_a_pod_no_single_socket_has_room_for_spans_the_sockets_with_room() -> None:
    cluster = Cluster(core(), [node("w0", 16, sockets="2")])
    cluster.add(pod("a", 6), pod("b", 6, t=1))
    assert placed(cluster.run()) == {"a": ("w0", cores(0, 5), []), "b": ("w0", cores(8, 13), [])}
    cluster.add(pod("c", 4, t=2), pod("d", 1, t=3))
    # 2 + 2 cores free: c spans both sockets' leftovers; d finds nothing left
    assert placed(cluster.run(1.0)) == {"c": ("w0", ["core6", "core7", "core14", "core15"], [])}
    cluster.end("c")
    assert placed(cluster.run(2.0)) == {"d": ("w0", ["core6"], [])}


def test_a_node_exclusive_pod_never_spans_sockets_of_a_busy_node() -> None:
    cluster = Cluster(core("lonodex"), [node("w0", 16, sockets="2")])
    cluster.add(pod("a", 6))
    assert placed(cluster.run()) == {"a": ("w0", cores(0, 15), [])}  # held whole: every core listed
    cluster.add(pod("b", 4, t=1))
    assert placed(cluster.run(1.0)) == {}


def test_a_node_exclusive_pod_takes_an_empty_node_whose_sockets_split_its_gpus_unevenly() -> None:
    """3 gpus over 2 sockets are 2 + 1: a pod of 3 gpus, split evenly, asks 2 + 2 and no socket pair has them; the
    pod spans the empty node's sockets and holds it whole, as its policy says (it waited forever before)."""
    cluster = Cluster(core("lonodex"), [node("g0", 4, sockets="2", **{AMD: 3})])
    cluster.add(pod("a", 1, **{AMD: 3}), pod("b", 1, t=1))
    assert placed(cluster.run()) == {"a": ("g0", ["core0"], ["gpu0", "gpu1", "gpu2"])}
    assert placed(cluster.run(1.0)) == {}  # a holds g0 whole: b waits though three cores are free
    cluster.end("a")
    assert placed(cluster.run(2.0)) == {"b": ("g0", cores(0, 3), ["gpu0", "gpu1", "gpu2"])}  # held whole in turn
    cluster.end("b")
    cluster.run(3.0)
    graph = cluster.scheduler.books.graph
    assert graph is not None and graph.free_counts("g0", 3, 1, exact=True) == (4, 3, True)


def test_a_pod_of_a_whole_unevenly_socketed_node_is_reserved_and_not_overtaken_by_small_pods() -> None:
    """5 cores over 2 sockets are 3 + 2: a pod of 5, split evenly, asks 3 + 3, which the engine can neither place
    nor reserve; the pod runs spanned. It is reserved by the exact search instead, so a small pod arriving behind
    it does not take the cores it waits for (before, one small pod after another did, and it never ran)."""
    cluster = Cluster(core(), [node("w0", 5, sockets="2")])
    cluster.add(pod("s0", 1))
    cluster.pods["default/s0"].active_deadline_seconds = 20
    assert placed(cluster.run()) == {"s0": ("w0", ["core0"], [])}
    big = pod("big", 5, t=0.5)
    big.active_deadline_seconds = 20
    cluster.add(big)
    waiting = cluster.run(0.5)
    assert [d.expected_start for d in waiting if isinstance(d, Unschedulable)] == [20.0]
    late = pod("s1", 1, t=1)
    late.active_deadline_seconds = 30  # would still run at 20: it waits behind big
    cluster.add(late)
    assert placed(cluster.run(1.0)) == {}
    cluster.end("s0")
    assert placed(cluster.run(20.0)) == {"big": ("w0", cores(0, 4), [])}


@pytest.mark.parametrize(
    ("label", "sockets", "why"),
    [
        ("two", "2", "Node node-0: metadata.labels[kubeflux.io/sockets]: must be a whole number of sockets"),
        ("32", "2", "Node node-0: metadata.labels[kubeflux.io/sockets]: 32 sockets but only 16 whole cores"),
        (None, "17", "--sockets 17: Node node-0 has only 16 whole cores"),
    ],
)
def test_the_simulator_refuses_a_socket_count_a_node_cannot_have(
    tmp_path: Path, label: str | None, sockets: str, why: str
) -> None:
    """A cluster file is the user's input: a bad sockets label, or more sockets than cores, is an error naming the
    node and the label (it was silently taken as the --sockets count)."""
    labels = "" if label is None else f"\n  labels: {{kubeflux.io/sockets: {label!r}}}"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        f"apiVersion: v1\nkind: Node\nmetadata:\n  name: node-0{labels}\nstatus:\n  allocatable: {{cpu: '16'}}\n"
    )
    args = ["simulate", "--workload", str(REPO / "examples/workloads/pi-demo.yaml"), "--cluster", str(cluster)]
    args += ["--sockets", sockets, "-s", "kubeflux", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert why in " ".join(result.output.split())
