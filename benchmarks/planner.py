"""Time planner micro-benchmarks: mean microseconds per call, printed as a table.

Run: ``.venv/bin/python benchmarks/planner.py``. Scenarios:

* an empty per-core planner (total 1): ``avail_during``, ``add_span`` and ``rem_span``, the calls the matcher makes
  millions of times;
* the root planner of a 1,000-node x 32-core cluster filled with 1,000 or 10,000 jobs placed as conservative
  backfill would place them (each at its earliest fit), then ``avail_time_first`` for 64 cores for an hour (the
  common case) and for the whole machine (the worst case: only the end of the schedule fits);
* the same with a ``MultiPlanner`` over (core, node), the root's pruning filter.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from kubeflux.match.multiplanner import MultiPlanner
from kubeflux.match.planner import Planner

NODES, CORES_PER_NODE = 1000, 32
CORES = NODES * CORES_PER_NODE
HORIZON = 2**62


def mean_us(call: Callable[[], object], repeat: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(repeat):
        call()
    return (time.perf_counter_ns() - start) / repeat / 1000


def jobs(count: int, seed: int = 1) -> list[tuple[int, int]]:
    """(cores, duration) pairs: mostly small jobs, a few wide ones, durations from a minute to a day."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        nodes = min(NODES, int(rng.paretovariate(1.2)))
        cores = nodes * CORES_PER_NODE if rng.random() < 0.5 else rng.randint(1, CORES_PER_NODE)
        out.append((cores, rng.randint(60, 86400)))
    return out


def filled_planner(count: int) -> Planner:
    p = Planner(CORES, 0, HORIZON, "core")
    for cores, duration in jobs(count):
        t = p.avail_time_first(0, duration, cores)
        assert t is not None
        p.add_span(t, duration, cores)
    return p


def filled_multi(count: int) -> MultiPlanner:
    m = MultiPlanner({"core": CORES, "node": NODES}, 0, HORIZON)
    for cores, duration in jobs(count):
        request = [cores, -(-cores // CORES_PER_NODE)]
        t = m.avail_time_first(0, duration, request)
        assert t is not None
        m.add_span(t, duration, request)
    return m


Row = tuple[str, float]


def per_call_us(start_ns: int, calls: int) -> float:
    return (time.perf_counter_ns() - start_ns) / calls / 1000


def empty_rows(repeat: int = 200_000) -> list[Row]:
    p = Planner(1, 0, HORIZON, "core")
    rows = [("empty planner: avail_during", mean_us(lambda: p.avail_during(100, 3600, 1), repeat))]
    start = time.perf_counter_ns()
    for _ in range(repeat):
        p.rem_span(p.add_span(100, 3600, 1))
    rows.append(("empty planner: add_span + rem_span", per_call_us(start, repeat)))
    wide = Planner(repeat, 0, HORIZON, "core")
    start = time.perf_counter_ns()
    span_ids = [wide.add_span(100, 3600, 1) for _ in range(repeat)]
    rows.append(("planner, same window each time: add_span", per_call_us(start, repeat)))
    start = time.perf_counter_ns()
    for span_id in span_ids:
        wide.rem_span(span_id)
    rows.append(("planner, same window each time: rem_span", per_call_us(start, repeat)))
    m = MultiPlanner({"core": 1, "node": 1}, 0, HORIZON)
    rows.append(("empty multi: avail_during", mean_us(lambda: m.avail_during(100, 3600, [1, 1]), repeat // 4)))
    start = time.perf_counter_ns()
    for _ in range(repeat // 4):
        m.rem_span(m.add_span(100, 3600, [1, 1]))
    rows.append(("empty multi: add_span + rem_span", per_call_us(start, repeat // 4)))
    return rows


def planner_rows(count: int) -> list[Row]:
    start = time.perf_counter_ns()
    p = filled_planner(count)
    rows = [(f"{count} jobs: fill (avail_time_first + add_span), per job", per_call_us(start, count))]
    rows.append(
        (f"{count} jobs: avail_time_first 64 cores, 1h", mean_us(lambda: p.avail_time_first(0, 3600, 64), 2000))
    )
    rows.append(
        (f"{count} jobs: avail_time_first all cores, 1h", mean_us(lambda: p.avail_time_first(0, 3600, CORES), 200))
    )
    rows.append((f"{count} jobs: avail_during 64 cores at 0, 1h", mean_us(lambda: p.avail_during(0, 3600, 64), 2000)))
    last = p.span_ids()[-1]
    window = (p.span_start(last), p.span_duration(last), p.span_resources(last))
    start = time.perf_counter_ns()
    for _ in range(500):
        p.rem_span(last)
        last = p.add_span(*window)
    rows.append((f"{count} jobs: rem_span + add_span of the last job", per_call_us(start, 500)))
    return rows


def multi_rows(count: int) -> list[Row]:
    start = time.perf_counter_ns()
    m = filled_multi(count)
    rows = [(f"{count} jobs, multi: fill, per job", per_call_us(start, count))]
    rows.append(
        (
            f"{count} jobs, multi: avail_time_first [64 cores, 2 nodes], 1h",
            mean_us(lambda: m.avail_time_first(0, 3600, [64, 2]), 2000),
        )
    )
    rows.append(
        (
            f"{count} jobs, multi: avail_time_first all, 1h",
            mean_us(lambda: m.avail_time_first(0, 3600, [CORES, NODES]), 200),
        )
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()  # no options: --help prints the docstring, anything else is refused
    rows = empty_rows()
    for count in (1000, 10000):
        rows += planner_rows(count) + multi_rows(count)
    width = max(len(name) for name, _ in rows)
    print(f"{'operation':<{width}}  mean µs")
    print(f"{'-' * width}  -------")
    for name, value in rows:
        print(f"{name:<{width}}  {value:7.2f}")


if __name__ == "__main__":
    main()
