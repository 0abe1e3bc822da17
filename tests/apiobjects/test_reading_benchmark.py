"""``benchmarks/reading.py`` runs on a fresh checkout: one small round reads every pod and binds every one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "reading.py"


def test_one_small_round_binds_every_pod() -> None:
    spec = importlib.util.spec_from_file_location("reading_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    figures = module.measure(nodes=3, pods=150)
    assert figures["bound"] == 150  # 3 nodes of 64 cores hold 150 one-core pods
    assert figures["added_us"] > 0 and figures["modified_us"] > 0 and figures["passes_s"] > 0
    assert "kubeflux.match" in figures["engine"]
