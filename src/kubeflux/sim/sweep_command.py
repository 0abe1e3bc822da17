"""``kubeflux sweep GRID.yaml --out DIR``: run a grid of simulations and write one merged report.

Runs go to a local process pool (``--workers``, default the machine's cores, at most
:data:`MAX_WORKERS_PER_CORE` times as many; never more processes than runs) or to a Dask cluster
(``--dask ADDRESS``). A run already finished in ``DIR`` is not run again; one that fails is reported and the rest
go on. What the grid file holds is in :mod:`kubeflux.sim.sweep`; the report in :mod:`kubeflux.sim.sweep_report`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Final

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["sweep_command"]

MAX_WORKERS_PER_CORE: Final = 8
"""``--workers`` is refused beyond this many local processes per core of the machine: each process holds a whole
simulation, so far more than the cores only queue for them while taking memory (``--workers 100000`` started
thousands and exhausted it)."""


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def sweep_command(
    grid: Annotated[Path, typer.Argument(help="The grid: a YAML file (see examples/sweep/grid.yaml).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder of the runs and the merged report.")],
    workers: Annotated[
        int | None, typer.Option("--workers", help="Local processes (default: the machine's cores).")
    ] = None,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Run on the Dask scheduler at this address (tcp://host:8786).")
    ] = None,
) -> None:
    """Run every point of a grid of simulations (workloads x schedulers x policies x clusters x seeds)."""
    from kubeflux.sim.command import REPORT_WIDTH
    from kubeflux.sim.sweep import Outcome, SweepError, done_keys, execute, load_grid, plan, pool_size, record
    from kubeflux.sim.sweep_report import summary_table, write_sweep_report

    console = Console(width=None if sys.stdout.isatty() else REPORT_WIDTH)
    if workers is not None and workers < 1:
        raise typer.BadParameter(f"--workers must be at least 1, got {workers}")
    cores = os.cpu_count() or 1
    if workers is not None and workers > MAX_WORKERS_PER_CORE * cores:
        raise typer.BadParameter(
            f"--workers must be at most {MAX_WORKERS_PER_CORE * cores:,} ({MAX_WORKERS_PER_CORE} per core; this "
            f"machine has {cores} cores), got {workers:,}"
        )
    if dask is not None and workers is not None:
        raise typer.BadParameter("give --workers (local processes) or --dask (a Dask cluster), not both")
    try:
        loaded, base = load_grid(grid)
        tasks = plan(loaded, base)
    except SweepError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    if out.exists() and not out.is_dir():
        console.print(f"[red]error:[/] --out {escape(str(out))}: exists and is not a folder")
        raise typer.Exit(2)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        console.print(
            f"[red]error:[/] --out {escape(str(out))}: cannot be the output folder: {escape(str(exc.strerror or exc))}"
        )
        raise typer.Exit(2) from None
    finished = done_keys(out)
    todo = [task for task in tasks if task.key not in finished]
    where = f"Dask at {dask}" if dask else f"{pool_size(workers or cores, len(todo))} local process(es)"
    name = escape(loaded.name)
    console.print(f"{name}: {len(tasks)} runs, {len(tasks) - len(todo)} already done, {len(todo)} to run on {where}")
    began = time.perf_counter()
    count = 0

    def done(outcome: Outcome) -> None:
        nonlocal count
        count += 1
        record(outcome, out)
        point = ", ".join(f"{v}" for v in outcome.point.values())
        if outcome.error:
            last = outcome.error.strip().splitlines()[-1] if outcome.error.strip() else "failed"
            console.print(f"[{count}/{len(todo)}] {escape(point)}: [red]failed[/]: {escape(last)}")
        else:
            console.print(f"[{count}/{len(todo)}] {escape(point)}: done in {outcome.seconds:.1f} s")

    previous = signal.signal(signal.SIGTERM, _interrupted)  # `kill`: stop the workers too, as Ctrl-C does
    try:
        outcomes = execute(todo, workers=workers or cores, dask=dask, on_done=done)
    except SweepError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    except KeyboardInterrupt:
        console.print(f"stopped: {count} of {len(todo)} runs recorded; run the same command again to go on")
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    merged = write_sweep_report(tasks, out, loaded.name)
    console.print(summary_table(merged, title=f"{name}: means over seeds"))
    failed = [o for o in outcomes if o.error]
    console.print(
        f"report: {out / 'index.html'}, {out / 'sweep.csv'}, {out / 'sweep-summary.csv'} "
        f"({time.perf_counter() - began:.1f} s)"
    )
    if failed:
        console.print(
            f"[yellow]{len(failed)} run(s) failed[/]: see sweep.csv and runs/<key>/error.txt; run again to retry"
        )
        if len(failed) == len(tasks):
            raise typer.Exit(1)
