"""``benchmarks/serve.py --real`` runs: serve and the raw binding client on small real control planes, pinned apart
(``--pin``: the benchmark fails if any thread of the plane, the script or a binder runs elsewhere at the last bind),
each row's table line with its CPU a pod, and the run's ratios."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubeflux.controlplane import Binaries

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "serve.py"


def test_the_real_benchmark_pinned_prints_each_row_and_the_ratios(binaries: Binaries) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("--pin needs two CPUs")
    argv = [sys.executable, str(BENCHMARK), "--real", "--pin", "--nodes", "4", "--pods", "24"]
    argv += ["--rows", "kubeflux serve,raw binding", "--raw-processes", "2", "--raw-pipeline", "4"]
    env = {**os.environ, "KUBEFLUX_KUBE_DIR": str(binaries.folder)}
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "pinned: control plane on CPU" in lines[0]
    assert "row's CPU ms a pod" in lines[1]
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith(("| kubeflux", "| raw binding"))}
    assert set(rows) == {"kubeflux serve", "raw binding"}, run.stdout
    for line in rows.values():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert cells[2] == "24"  # every pod bound
        row_cpu, plane_cpu = cells[-2].replace("(plane", "").rstrip(")").split()
        assert float(row_cpu) > float(plane_cpu) > 0  # the row's CPU a pod, the control plane's part of it
    run_line = next(line for line in lines if line.startswith("run 1: kubeflux serve at"))
    assert "% of the raw limit" in run_line
    assert "the raw row's" not in run_line  # pinned, the busier CPU sets the pace: no ratio of the sums


def test_pin_is_refused_with_one_cpu() -> None:
    """On one CPU there is nothing to pin apart: said before any control plane starts."""
    code = "import os, runpy, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
    code += f"sys.argv = [{str(BENCHMARK)!r}, '--real', '--pin']; runpy.run_path(sys.argv[0], run_name='__main__')"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False, cwd=BENCHMARK.parent
    )
    assert run.returncode == 2, run.stderr[-2000:]
    assert "--pin needs two CPUs" in run.stderr
