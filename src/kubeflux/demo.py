"""``kubeflux demo``: what ``make demo`` runs on a fresh machine, with no cluster.

The main job: the bundled workload (``data/demo/hpc-mix.swf``, 200 synthetic HPC jobs of 1–128 processors, plus
``data/demo/services.yaml``, three long-running services placed by kube-scheduler on the same nodes) on a
simulated cluster of 16 nodes × 16 cores, under kubeflux with EASY backfilling, kubeflux without backfilling
(``kubeflux-fcfs``), the kube-scheduler-like baseline and the coscheduling baseline. It prints the comparison
table and writes the report (``index.html``, plots, ``summary.csv``, one ``jobs.csv`` per scheduler) to ``out``.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from kubeflux.sim.command import REPORT_WIDTH, simulate_command

SCHEDULERS = ("kubeflux", "kubeflux-fcfs", "kube-default", "coscheduling")
NODES = 16
CORES_PER_NODE = 16


def run_demo(out_dir: Path) -> Path:
    """Run the comparison into ``out_dir``; returns the report's ``index.html``."""
    console = Console(width=None if sys.stdout.isatty() else REPORT_WIDTH)
    console.rule(
        f"kubeflux demo: {', '.join(SCHEDULERS)} on {NODES} nodes x {CORES_PER_NODE} cores (simulated, virtual time)"
    )
    data = resources.files("kubeflux") / "data" / "demo"
    with resources.as_file(data) as folder:
        simulate_command(
            workload=[folder / "hpc-mix.swf", folder / "services.yaml"],
            scheduler=list(SCHEDULERS),
            out=out_dir,
            force=True,  # the demo replaces its previous report
            cluster=None,
            nodes=NODES,
            cores_per_node=CORES_PER_NODE,
            memory_per_node="64Gi",
            gpus_per_node=0,
            seed=0,
            start_delay=0.0,
            start_jitter=0.0,
            fail_fraction=0.0,
            list_schedulers=False,
        )
    console.print(headline(json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))))
    index = out_dir / "index.html"
    console.print(f"\nReport: {index}")
    return index


HEADLINE = (
    ("mean_waiting_time", "mean wait", 0),
    ("max_waiting_time", "max wait", 0),
    ("mean_bounded_slowdown", "bsld", 1),
    ("useful_utilization", "useful", 3),
    ("makespan", "makespan", 0),
    ("wall_seconds", "wall", 1),
)


def headline(rows: list[dict[str, object]]) -> Table:
    """The comparison's key columns, narrow enough for an 80-column terminal."""
    table = Table(
        title=(
            "kubeflux demo (times in s of virtual time; bsld = mean bounded slowdown; useful = share of the cores "
            "computing, not held idle; wall = s of real time)"
        ),
        box=box.SIMPLE,
    )
    table.add_column("scheduler", no_wrap=True)
    for _, title, _ in HEADLINE:
        table.add_column(title, justify="right")
    for row in rows:
        cells = [str(row.get("scheduler", ""))]
        for key, _, digits in HEADLINE:
            value = row.get(key)
            cells.append(f"{value:,.{digits}f}" if isinstance(value, int | float) else str(value))
        table.add_row(*cells)
    return table
