"""The seeds' experiments, reproduced: ``python -m experiments [NAME …]`` (``make experiments``)
regenerates each page of ``docs/experiments/`` — its tables, its plots and the command — so what the docs quote is
what the code gives (tests regenerate the deterministic tables and compare them with the pages).

One module per experiment, each with a ``write_<name>(folder)`` that writes its page: :mod:`.seed000` (the
informer demos), :mod:`.graph_update` (seed 000's update-vs-rebuild experiment), :mod:`.seed004` (MCAD and KWOK's
batch experiment, in virtual time and through the simulated API), :mod:`.traces` (the real traces under every
scheduler), :mod:`.preemption` (a trace with urgent jobs, with and without preemption),
:mod:`.topology` (GROMACS-like gangs on racks with a cross-rack penalty), :mod:`.tenants` (a trace's users as
two Kueue tenants), :mod:`.fidelity` (seed 004 on the real
control plane beside the simulator; :mod:`.realrun` drives the real runs). :mod:`.pages` holds
what the pages share.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.fidelity import write_fidelity
from experiments.graph_update import write_graph_update
from experiments.preemption import write_preemption
from experiments.seed000 import write_seed000
from experiments.seed004 import SEED004_SCHEDULERS, Seed004Row, seed004_rows, seed004_table, write_seed004
from experiments.tenants import write_tenants
from experiments.topology import write_topology
from experiments.traces import write_traces

__all__ = [
    "EXPERIMENTS",
    "SEED004_SCHEDULERS",
    "Seed004Row",
    "main",
    "seed004_rows",
    "seed004_table",
    "write_fidelity",
    "write_graph_update",
    "write_preemption",
    "write_seed000",
    "write_seed004",
    "write_tenants",
    "write_topology",
    "write_traces",
]

EXPERIMENTS: dict[str, Callable[[Path], Path]] = {
    "seed000": write_seed000,
    "seed000-graph-update": write_graph_update,
    "seed004": write_seed004,
    "traces": write_traces,
    "preemption": write_preemption,
    "topology": write_topology,
    "tenants": write_tenants,
    "fidelity": write_fidelity,
}
"""Each experiment's name and the function that writes its page into a folder."""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Regenerate the experiment pages of docs/experiments/.")
    parser.add_argument("experiment", nargs="*", help=f"{', '.join(EXPERIMENTS)} (default: every experiment)")
    parser.add_argument("--out", type=Path, default=Path("docs/experiments"))
    args = parser.parse_args(argv)
    unknown = [name for name in args.experiment if name not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(EXPERIMENTS)}")
    for name in args.experiment or list(EXPERIMENTS):
        print(f"wrote {EXPERIMENTS[name](args.out)}", flush=True)
