"""Matcher benchmark: the 1,024-node graph of ../shared/bench (and larger variants) under Fluxion's scenarios.

Prints, per graph size and policy, the mean and p99 time per match for
  (a) ``match allocate a_core1.yaml``            one core
  (b) ``match allocate b_node_excl.yaml``        one whole node, exclusive
  (c) ``match allocate c_128n_64c.yaml`` + cancel 128 nodes x 64 cores, then released (the match and the cancel
                                                 timed apart: Fluxion's ELAPSE times the match only)
  (d) ``match allocate_orelse_reserve d_1n_64c.yaml`` after 8 x (c) fill the cluster
plus graph load time and resident memory (with the engine in use after the scenarios), next to Fluxion v0.54's
figures from ../shared/bench/README.md.
Usage: python benchmarks/match.py [--jobs N] [--nodes 1024,5000,10000] [--policies first,lonode,low]
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

from kubeflux.jobspec import load_jobspec
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources import settle_gc
from kubeflux.resources.grug import read_grug

BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench"
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
    """Seconds per match and, with ``cancel``, per cancel of the job just matched."""
    jobspec = load_jobspec(path)
    times, cancels = [], []
    for _ in range(jobs):
        started = time.perf_counter()
        result = engine.match(op, jobspec)
        matched = time.perf_counter()
        times.append(matched - started)
        if cancel and result.matched:
            engine.cancel(result.jobid)
            cancels.append(time.perf_counter() - matched)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000, help="matches per scenario")
    parser.add_argument("--jobs-c", type=int, default=None, help="matches for (c) (default: --jobs)")
    parser.add_argument("--nodes", default="1024", help="comma-separated graph sizes, e.g. 1024,5000,10000")
    parser.add_argument("--policies", default="first,lonode,low")
    args = parser.parse_args()
    console = Console(width=200)
    jobs = f"{args.jobs} jobs per scenario" + (f", {args.jobs_c} for (c)" if args.jobs_c else "")
    table = Table(title=f"kubeflux matcher, {jobs} (ms per match: mean / p99)")
    for column in (
        "nodes",
        "policy",
        "load s",
        "init s",
        "(a) core",
        "(b) node x",
        "(c) 128n x 64c",
        "(c) its cancel",
        "(d) reserve",
        "RSS MB",
        "Fluxion (a/b/c/d)",
    ):
        table.add_column(column)
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in (int(n) for n in args.nodes.split(",")):
            path = graph_file(nodes, Path(tmp))
            for policy in args.policies.split(","):
                started = time.perf_counter()
                graph = read_grug(path)
                load = time.perf_counter() - started
                started = time.perf_counter()
                engine = Engine(graph, policy=policy)
                init = time.perf_counter() - started
                settle_gc()
                cells = []
                for spec in ("a_core1", "b_node_excl"):
                    times, _ = timed(engine, MatchOp.ALLOCATE, BENCH / f"{spec}.yaml", args.jobs)
                    cells.append(cell(times))
                    del engine, graph
                    gc.collect()
                    graph = read_grug(path)
                    engine = Engine(graph, policy=policy)
                    settle_gc()
                jobs_c = args.jobs_c or args.jobs
                times, cancels = timed(engine, MatchOp.ALLOCATE, BENCH / "c_128n_64c.yaml", jobs_c, cancel=True)
                cells += [cell(times), cell(cancels)]
                timed(engine, MatchOp.ALLOCATE, BENCH / "c_128n_64c.yaml", nodes // 128)
                times, _ = timed(engine, MatchOp.ALLOCATE_ORELSE_RESERVE, BENCH / "d_1n_64c.yaml", args.jobs)
                cells.append(cell(times))
                gc.collect()
                rss = resident_mb()
                fluxion = " / ".join(str(FLUXION_MS.get((policy, s), "-")) for s in "abcd")
                table.add_row(str(nodes), policy, f"{load:.2f}", f"{init:.2f}", *cells, f"{rss:.0f}", fluxion)

    console.print(table)


if __name__ == "__main__":
    main()
