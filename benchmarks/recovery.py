"""Recovery benchmark: replaying allocations (``Engine.update``), releasing parts of them
(``Engine.partial_cancel``) and ``find`` on the 1,024-node graph of ../shared/bench.

An origin engine fills the cluster with ``--jobs`` node-exclusive jobs (``b_node_excl.yaml``, JGF writer); a fresh
engine then replays every job from its JGF, as a restarted scheduler would, and finally releases every job with
its own JGF (the bench graph has no broker ranks, so release by R does not apply). Prints ms per call
(mean / p99) and checks that the replica agrees with the origin and ends empty.
Usage: python benchmarks/recovery.py [--jobs N] [--policy first]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from rich.console import Console
from rich.table import Table

from kubeflux.jobspec import load_jobspec
from kubeflux.match.engine import Engine, MatchOp
from kubeflux.resources.grug import read_grug
from shared import BENCH, at_least, match_policy


def timed(calls: list[Callable[[], object]]) -> str:
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"{statistics.fmean(times) * 1e3:.2f} / {p99 * 1e3:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=at_least(1), default=200, help="node-exclusive jobs to place and replay")
    parser.add_argument("--policy", type=match_policy, default="first")
    args = parser.parse_args()
    path = BENCH / "bench1024.graphml"
    origin = Engine(read_grug(path), policy=args.policy, match_format="jgf")
    jobspec = load_jobspec(BENCH / "b_node_excl.yaml")
    placed = [origin.match(MatchOp.ALLOCATE, jobspec) for _ in range(args.jobs)]
    placed = [result for result in placed if result.matched]
    duration = jobspec.duration_seconds(origin.horizon)
    replica = Engine(read_grug(path), policy=args.policy)

    rows = [
        (
            "update (replay one job)",
            timed([partial(replica.update, r.jobid, r.resources, duration=duration) for r in placed]),
        )
    ]
    same = all(replica.jobs[r.jobid].state == origin.jobs[r.jobid].state for r in placed)
    rows.append(("find sched-now=allocated", timed([lambda: replica.find("sched-now=allocated")] * 5)))
    rows.append(("find jobid-tag=<last>", timed([lambda: replica.find(f"jobid-tag={placed[-1].jobid}")] * 5)))

    rows.append(
        ("partial_cancel by own JGF", timed([partial(replica.partial_cancel, r.jobid, r.resources) for r in placed]))
    )
    released = all(not jobs for jobs in replica.schedule.view.tags.values())

    table = Table(title=f"kubeflux recovery on bench1024 ({len(placed)} jobs, policy {args.policy}): ms mean / p99")
    table.add_column("operation")
    table.add_column("ms")
    for name, cell in rows:
        table.add_row(name, cell)
    Console(width=160).print(table)
    print(f"replica states match the origin: {same}; everything released afterwards: {released}")


if __name__ == "__main__":
    main()
