"""``kubeflux demo``: what ``make demo`` runs on a fresh machine, with no cluster.

The main job: the bundled workload (``data/demo/hpc-mix.swf``, 200 synthetic HPC jobs of 1–128 processors, plus
``data/demo/services.yaml``, three long-running services placed by kube-scheduler on the same nodes) on a
simulated cluster of 16 nodes × 16 cores, under kubeflux with EASY backfilling, kubeflux without backfilling
(``kubeflux-fcfs``), the kube-scheduler-like baseline and the coscheduling baseline. ``kubeflux simulate`` prints
the comparison once (readable units: ``10.2 h``, ``79.4 %``) and its verdict lines, and writes the report
(``index.html``, plots, ``summary.csv``, one ``jobs.csv`` per scheduler) to ``out``; the demo adds where the page is.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from rich.console import Console

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
    index = out_dir / "index.html"
    console.print(f"\nReport: {index}", highlight=False)
    return index
