"""Matcher benchmark: the 1,024-node graph of ../shared/bench (and larger variants) under Fluxion's scenarios.

Prints, per graph size, policy and scenario, the first match alone and the mean / p99 time per match over the
first 200 and the first 1,000 jobs (--lengths), each run's first match included as a user's short session has it:
  (a) ``match allocate a_core1.yaml``            one core
  (b) ``match allocate b_node_excl.yaml``        one whole node, exclusive
  (c) ``match allocate c_128n_64c.yaml`` + cancel 128 nodes x 64 cores, then released (the match and the cancel
                                                 timed apart: Fluxion's ELAPSE times the match only)
  (d) ``match allocate_orelse_reserve d_1n_64c.yaml`` after 8 x (c) fill the cluster
(a), (b) and (c) start on a freshly read graph, so their first match evaluates every vertex once; (d)'s first comes
after the fill. Beside them, Fluxion v0.54's mean from ../shared/bench/README.md (1,000 jobs) and the ratio of it
to ours at each length. A second table gives graph load and engine init time and resident memory per policy.
Times are CPU time of the process (the machine may be shared).
Usage: python benchmarks/match.py [--lengths 200,1000] [--nodes 1024,5000] [--policies first,low,lonode,high,hinode]
       [--scenarios abcd]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kubeflux import _native
from kubeflux.collector import settle_gc
from kubeflux.jobspec import load_jobspec
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources.grug import read_grug
from shared import BENCH, at_least, comma_list, match_policy

FLUXION_MS = {  # (policy, scenario) -> mean ms of Fluxion's resource-query v0.54, 1,024 nodes
    ("first", "a"): 0.19,
    ("first", "b"): 0.45,
    ("first", "c"): 26,
    ("first", "d"): 0.96,
    ("low", "a"): 132,
    ("low", "b"): 32,
    ("low", "c"): 61,
    ("low", "d"): 36,
    ("lonode", "a"): 101,
    ("lonode", "b"): 28,
    ("lonode", "d"): 35,
    ("high", "a"): 110,
    ("high", "b"): 28,
    ("high", "d"): 32,
}


def graph_file(nodes: int, workdir: Path) -> Path:
    """The bench recipe resized to ``nodes`` (racks of 64 nodes when it divides, else racks of 100)."""
    recipe = (BENCH / "bench1024.graphml").read_text()
    if nodes == 1024:
        return BENCH / "bench1024.graphml"
    per_rack = 64 if nodes % 64 == 0 else 100
    racks = nodes // per_rack
    recipe = re.sub(r'(<edge id="cluster2rack"[^>]*>\s*<data key="multi_scale">)\d+', rf"\g<1>{racks}", recipe, count=1)
    recipe = re.sub(
        r'(<edge id="rack2node"[^>]*>(?:(?!</edge>).)*?"multi_scale">)\d+',
        rf"\g<1>{per_rack}",
        recipe,
        count=1,
        flags=re.S,
    )
    path = workdir / f"bench{nodes}.graphml"
    path.write_text(recipe)
    return path


def timed(engine: Engine, op: MatchOp, path: Path, jobs: int, cancel: bool = False) -> tuple[list[float], list[float]]:
    """CPU seconds per match and, with ``cancel``, per cancel of the job just matched."""
    jobspec = load_jobspec(path)
    clock = time.process_time
    times, cancels = [], []
    for _ in range(jobs):
        started = clock()
        result = engine.match(op, jobspec)
        matched = clock()
        times.append(matched - started)
        if cancel and result.matched:
            engine.cancel(result.jobid)
            cancels.append(clock() - matched)
    return times, cancels


def resident_mb() -> float:
    """The process's resident memory now (the graph, the engine and its caches after the scenarios), from
    /proc; the peak (ru_maxrss) would also count the engines of the rows before."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cell(times: list[float]) -> str:
    return f"{statistics.fmean(times) * 1e3:.2f} / {p99(times) * 1e3:.2f}" if times else "-"


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


SCENARIOS = {  # scenario -> (label, jobspec, operation)
    "a": ("(a) core", "a_core1", MatchOp.ALLOCATE),
    "b": ("(b) node x", "b_node_excl", MatchOp.ALLOCATE),
    "c": ("(c) 128n x 64c", "c_128n_64c", MatchOp.ALLOCATE),
    "d": ("(d) reserve", "d_1n_64c", MatchOp.ALLOCATE_ORELSE_RESERVE),
}


def fresh_engine(path: Path, policy: str) -> tuple[Engine, float, float]:
    """An engine on a freshly read graph, with the collector settled; (engine, load s, init s)."""
    gc.collect()
    started = time.perf_counter()
    graph = read_grug(path)
    load = time.perf_counter() - started
    started = time.perf_counter()
    engine = Engine(graph, policy=policy)
    init = time.perf_counter() - started
    settle_gc()
    return engine, load, init


def run_scenario(path: Path, policy: str, scenario: str, jobs: int, nodes: int) -> tuple[list[float], list[float]]:
    """Per-match (and, for (c), per-cancel) CPU seconds of ``jobs`` jobs of ``scenario`` on a fresh engine."""
    engine, _, _ = fresh_engine(path, policy)
    _, spec, op = SCENARIOS[scenario]
    if scenario == "d":
        timed(engine, MatchOp.ALLOCATE, BENCH / "c_128n_64c.yaml", nodes // 128)
    times, cancels = timed(engine, op, BENCH / f"{spec}.yaml", jobs, cancel=scenario == "c")
    del engine
    gc.unfreeze()
    return times, cancels


def ratio(fluxion: float | None, times: list[float]) -> str:
    return f"{fluxion / (statistics.fmean(times) * 1e3):.1f}x" if fluxion is not None and times else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--lengths",
        type=comma_list(at_least(1)),
        default="200,1000",
        help="jobs per run, comma-separated (prefixes of one run)",
    )
    parser.add_argument(
        "--nodes",
        type=comma_list(at_least(64)),
        default="1024",
        help="comma-separated graph sizes, each a multiple of 64 or of 100 (racks of 64 or 100), e.g. 1024,5000,10000",
    )
    parser.add_argument("--policies", type=comma_list(match_policy), default="first,low,lonode,high,hinode")
    parser.add_argument(
        "--scenarios", default="abcd", help=f"letters of the scenarios to run (of {''.join(SCENARIOS)})"
    )
    args = parser.parse_args()
    odd = [nodes for nodes in args.nodes if nodes % 64 and nodes % 100]
    if odd:
        parser.error(f"--nodes: {odd[0]} is not a multiple of 64 or of 100 (the graph is built of racks of 64 or 100)")
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown or not args.scenarios:
        parser.error(f"--scenarios {args.scenarios!r}: letters of {''.join(SCENARIOS)} (e.g. abcd)")
    lengths = sorted(args.lengths)
    console = Console(width=200)
    table = Table(title="kubeflux matcher, CPU ms per match (mean / p99), each run's first match included")
    columns = ["nodes", "policy", "scenario", "first match"]
    for length in lengths:
        columns += [f"{length} jobs", f"Fluxion / us at {length}"]
    columns += ["Fluxion (1,000)", "(c) cancel"]
    for column in columns:
        table.add_column(column, justify="right")
    setup = Table(title="graph load, engine init (wall s) and resident memory after the scenarios")
    for column in ("nodes", "policy", "load s", "init s", "RSS MB"):
        setup.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in args.nodes:
            path = graph_file(nodes, Path(tmp))
            for policy in args.policies:
                for scenario in args.scenarios:
                    times, cancels = run_scenario(path, policy, scenario, lengths[-1], nodes)
                    fluxion = FLUXION_MS.get((policy, scenario))
                    cells = [str(nodes), policy, SCENARIOS[scenario][0], f"{times[0] * 1e3:.2f}"]
                    for length in lengths:
                        cells += [cell(times[:length]), ratio(fluxion, times[:length])]
                    cells += ["-" if fluxion is None else str(fluxion), cell(cancels)]
                    table.add_row(*cells)
                engine, load, init = fresh_engine(path, policy)
                timed(engine, MatchOp.ALLOCATE, BENCH / "c_128n_64c.yaml", nodes // 128)
                gc.collect()
                setup.add_row(str(nodes), policy, f"{load:.2f}", f"{init:.2f}", f"{resident_mb():.0f}")
                del engine
                gc.unfreeze()
    console.print(table)
    console.print(setup)
    console.print(_native.describe())  # which engine ran: compiled (mypyc) or pure Python (KUBEFLUX_PURE=1)


if __name__ == "__main__":
    main()
