"""The fidelity page's driver on the real control plane, on a tiny case: seed 004's first three Jobs, compressed
eight times, under the real kube-scheduler; and the page written from that run (``make experiments`` runs the whole
cases, which take most of an hour)."""

from __future__ import annotations

from pathlib import Path

from experiments.fidelity import HEADER, FidelityCase, run_real_cases, write_fidelity
from kubeflux.controlplane import Binaries

TINY = FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "kube-scheduler", "kube-default", compression=8.0)


def test_the_driver_times_every_job_on_the_real_plane_and_the_page_compares_it(
    binaries: Binaries, tmp_path: Path
) -> None:
    store = tmp_path / "fidelity.json"
    runs = run_real_cases(store, [TINY], jobs=3)
    run = runs[TINY.key]
    assert [job.name for job in run.jobs] == [f"seed004-jobs-{i:05d}" for i in range(3)]
    for job in run.jobs:
        assert job.first_bind is not None and job.start is not None and job.end is not None, job
        assert job.submitted <= job.first_bind <= job.start < job.end, job
        assert job.end - job.start >= 72.0 / 8  # KWOK ran the pod its (compressed) run time, then the Job completed
    assert store.is_file()
    page = write_fidelity(tmp_path, runs, cases=[TINY]).read_text(encoding="utf-8")
    assert "| " + " | ".join(HEADER) + " |" in page
    assert "| Jobs, one every 17 s | kube-scheduler / kube-default | 8 |" in page
    assert "**What makes the differences, and how the simulator models them.**" in page
    assert "1. **The Job controller.** A Job is `Complete`" in page
