"""Reserving gangs of whole nodes on a wide, fragmented cluster: the engine's slot bound on and off.

The cluster is ``--nodes`` nodes of ``--cores`` cores (10,000 x 64 by default, the synthetic-kubeflux case), each
with one single-core pod running to a different end (1,000 to 4,600 s, in no order along the nodes): its free cores
(all but one per node) always admit a gang, but a gang of ``k`` whole nodes fits only once ``k`` of those pods have
ended. Each gang ``slot(k) → core(cores)`` is reserved (``allocate_orelse_reserve`` at 10 s) and then cancelled, so
every match meets the same cluster, alternately with the slot bound (:mod:`kubeflux.match.slotbound`) and without:
without it the walk at now and at each pod's end before the gang fits is made in vain. Prints, per gang size, the
reservation's start (the same both ways), the start times tried, how many of them the bound refused without a
walk, and the median CPU time per match both ways.

The bound is switched off by patching the engine, which compiled code does not see (it calls the bound directly):
the benchmark runs on the pure-Python engine only (``KUBEFLUX_PURE=1``) and says so otherwise.

Usage: ``KUBEFLUX_PURE=1 python benchmarks/gang_reserve.py [--nodes 10000] [--cores 64] [--gangs 2,8,16,64]
[--repeat 3]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any
from unittest import mock

from rich.console import Console
from rich.table import Table

import kubeflux.match
from kubeflux.jobspec import Jobspec, jobspec_from_dict
from kubeflux.match import slotbound, traverser
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import NodeSpec, build_graph
from shared import at_least, comma_list


def gang(count: int, cores: int) -> Jobspec:
    return jobspec_from_dict(
        {
            "version": 9999,
            "resources": [
                {"type": "slot", "count": count, "label": "task", "with": [{"type": "core", "count": cores}]}
            ],
            "attributes": {"system": {"duration": 3600}},
            "tasks": [{"command": ["app"], "slot": "task", "count": {"per_slot": 1}}],
        }
    )


def fragmented(nodes: int, cores: int) -> Engine:
    """The cluster of the module docstring, its root laid out by a first walk."""
    engine = Engine(build_graph([NodeSpec(f"n{i}", cores=cores) for i in range(nodes)]), policy="lonode")
    for i, node in enumerate(engine.graph.by_type["node"]):
        core = engine.schedule.view.children(node)[0][1]
        assert engine.update_leaves(i + 1, [core], duration=1000 + (i * 7919) % 3600).matched
    assert engine.match(MatchOp.SATISFIABILITY, gang(1, 1)).matched
    return engine


def reserve(engine: Engine, spec: Jobspec, bound: bool) -> tuple[int, int, int, float]:
    """The gang's start, the start times tried, how many the bound refused without a walk, and the CPU time of the
    match (the reservation is then cancelled)."""
    tried = refused = 0
    check = slotbound.too_few_slots

    def counted(*args: Any) -> tuple[bool, slotbound.Elements | None]:
        nonlocal tried, refused
        tried += 1
        answer = check(*args) if bound else (False, None)
        refused += answer[0]
        return answer

    with mock.patch.object(traverser, "too_few_slots", counted):
        began = time.process_time()
        result = engine.match(MatchOp.ALLOCATE_ORELSE_RESERVE, spec, now=10)
        elapsed = time.process_time() - began
    assert result.matched, result
    engine.cancel(result.jobid)
    return result.at, tried, refused, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=at_least(1), default=10_000)
    parser.add_argument("--cores", type=at_least(1), default=64, help="cores per node")
    parser.add_argument(
        "--gangs", type=comma_list(at_least(1)), default="2,8,16,64", help="gang sizes in nodes, comma-separated"
    )
    parser.add_argument("--repeat", type=at_least(1), default=3)
    args = parser.parse_args()
    if max(args.gangs) > args.nodes:
        parser.error(f"--gangs: a gang of {max(args.gangs)} nodes does not fit on --nodes {args.nodes}")
    if kubeflux.match.COMPILED:  # its patch would count nothing and switch nothing off: a table of zeros
        raise SystemExit("gang_reserve.py patches the engine: run it on the pure one (KUBEFLUX_PURE=1)")
    began = time.process_time()
    engine = fragmented(args.nodes, args.cores)
    console = Console()
    console.print(f"{args.nodes} nodes x {args.cores} cores, filled in {time.process_time() - began:.1f} s CPU")
    table = Table("gang (nodes)", "reserved at", "start times tried", "walks refused", "ms/match bound on", "off")
    for count in args.gangs:
        spec = gang(count, args.cores)
        times: dict[bool, list[float]] = {True: [], False: []}
        answers: dict[bool, tuple[int, int, int]] = {}
        for _ in range(args.repeat):
            for bound in (True, False):  # alternated: the same cluster, the same load
                at, tried, refused, elapsed = reserve(engine, spec, bound)
                times[bound].append(elapsed)
                answers[bound] = (at, tried, refused)
        assert answers[True][:2] == answers[False][:2]
        on, off = (statistics.median(times[bound]) * 1000 for bound in (True, False))
        at, tried, refused = answers[True]
        table.add_row(str(count), str(at), str(tried), str(refused), f"{on:.1f}", f"{off:.1f}")
    console.print(table)


if __name__ == "__main__":
    main()
