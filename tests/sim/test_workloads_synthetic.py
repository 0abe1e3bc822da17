import itertools
import math
from pathlib import Path

import pytest

from kubeflux.scheduler.objects import CPU, GPU, MEMORY, POD_GROUP_LABEL
from kubeflux.sim.workloads import JobKind, WorkloadJob
from kubeflux.sim.workloads.manifests import read_manifests
from kubeflux.sim.workloads.synthetic import (
    KWOK_TOLERATION,
    PRESETS,
    Arrival,
    SyntheticSpec,
    generate,
    preset,
    seed004_cluster,
    to_manifests,
)


def snapshot(spec: SyntheticSpec, seed: int) -> list[tuple[float, int, float | None, float]]:
    return [(j.submit_time, j.requested_processors, j.run_time, j.requested_time) for j in generate(spec, seed).jobs]


def test_same_seed_same_workload_other_seed_other_workload() -> None:
    spec = SyntheticSpec(jobs=200)
    assert snapshot(spec, 7) == snapshot(spec, 7)
    assert snapshot(spec, 7) != snapshot(spec, 8)


def test_poisson_arrivals_have_the_requested_mean_and_start_at_zero() -> None:
    jobs = generate(SyntheticSpec(jobs=5000, mean_interarrival=30.0), seed=1).jobs
    gaps = [b.submit_time - a.submit_time for a, b in itertools.pairwise(jobs)]
    assert jobs[0].submit_time == 0.0
    assert sum(gaps) / len(gaps) == pytest.approx(30.0, rel=0.05)
    assert min(gaps) < 1.0 < 60.0 < max(gaps)  # exponential, not fixed


def test_sizes_runtimes_and_walltime_estimates() -> None:
    spec = SyntheticSpec(jobs=2000, max_size=32, runtime="log_uniform", min_runtime=10, max_runtime=10_000)
    jobs = generate(spec, seed=3).jobs
    assert {j.requested_processors for j in jobs} == {1, 2, 4, 8, 16, 32}
    assert all(10 <= (j.run_time or 0) <= 10_000 for j in jobs)
    decades = [sum(1 for j in jobs if 10**k <= (j.run_time or 0) < 10 ** (k + 1)) for k in (1, 2, 3)]
    assert max(decades) < 1.3 * min(decades)  # log-uniform: about as many jobs per decade
    assert all(j.requested_time == pytest.approx(2.0 * (j.run_time or 0), abs=1e-3) for j in jobs)


def test_weighted_sizes() -> None:
    jobs = generate(SyntheticSpec(jobs=4000, sizes={1: 3.0, 8: 1.0}), seed=5).jobs
    ones = sum(1 for j in jobs if j.requested_processors == 1)
    assert {j.requested_processors for j in jobs} == {1, 8}
    assert ones / len(jobs) == pytest.approx(0.75, abs=0.03)


def test_seed004_jobs_preset() -> None:
    workload = preset("seed004-jobs")
    assert len(workload.jobs) == 50
    assert [j.submit_time for j in workload.jobs[:3]] == [0.0, 17.0, 34.0]
    job = workload.jobs[0]
    assert (job.kind, job.completions, job.parallelism, job.min_member) == (JobKind.JOB, 1, 1, 0)
    assert job.pods[0].requests[GPU] == 8 and job.pods[0].run_time == 72.0
    slower = preset("seed004-jobs", mean_interarrival=20.0, jobs=10)
    assert len(slower.jobs) == 10 and slower.jobs[1].submit_time == 20.0
    nodes = seed004_cluster()
    assert [n.allocatable[GPU] for n in nodes] == [8, 8, 8, 8]


def test_seed004_podgroups_preset_is_a_gang_of_two_gpu_pods() -> None:
    job = preset("seed004-podgroups").jobs[0]
    assert (job.kind, job.min_member, job.schedule_timeout_seconds) == (JobKind.POD_GROUP, 2, 10.0)
    assert [p.labels[POD_GROUP_LABEL] for p in job.pods] == [job.name, job.name]
    assert PRESETS["seed004-podgroups"].mean_interarrival == 34.0


@pytest.mark.parametrize("arrival", ["poisson", "fixed"])
def test_a_mean_interarrival_of_zero_submits_every_job_at_once(arrival: Arrival) -> None:
    """``mean_interarrival=0`` under ``poisson`` was a ZeroDivisionError (``expovariate(1.0 / 0)``); as under
    ``fixed``, and as ``mean_runtime=0`` gives no run time, it is a burst: every job at 0."""
    jobs = generate(SyntheticSpec(jobs=5, arrival=arrival, mean_interarrival=0.0), seed=3).jobs
    assert [job.submit_time for job in jobs] == [0.0] * 5


def test_invalid_specs_name_the_field() -> None:
    with pytest.raises(ValueError, match="max_size"):
        generate(SyntheticSpec(max_size=0))
    with pytest.raises(ValueError, match="sizes"):
        generate(SyntheticSpec(sizes={0: 1.0}))
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        preset("nope")


def test_trace_jobs_request_processors_and_pods_request_cores() -> None:
    trace = generate(SyntheticSpec(jobs=1, sizes={4: 1}), seed=0).jobs[0]
    assert trace.pods == [] and trace.requested_processors == 4 and trace.run_time is not None
    pods = generate(SyntheticSpec(jobs=1, kind=JobKind.POD, pod_requests={CPU: 1500}), seed=0).jobs[0]
    assert pods.requested_processors == math.ceil(1.5) and len(pods.pods) == 1


def test_synthetic_profiles_are_named_after_the_run_time_as_batsims_converters_do() -> None:
    """A synthetic job has no profile of its own: like an SWF job, its run time in whole seconds plus one."""
    jobs = generate(SyntheticSpec(jobs=50, runtime="fixed", mean_runtime=3600.0), seed=2).jobs
    assert {job.profile_name() for job in jobs} == {"3601"}
    assert preset("seed004-jobs").jobs[0].profile_name() == "73"  # pods of 72 s


@pytest.mark.parametrize("kind", [JobKind.JOB, JobKind.POD_GROUP, JobKind.POD])
def test_a_generated_workload_written_as_yaml_reads_back_as_the_same_jobs(tmp_path: Path, kind: JobKind) -> None:
    """What ``to_manifests`` writes is a file ``simulate`` and ``sweep`` read as the jobs generated."""
    spec = SyntheticSpec(
        jobs=20,
        sizes="uniform",
        max_size=4,
        kind=kind,
        pod_requests={CPU: 1500, MEMORY: 2**30, GPU: 1},
        annotations={"kubeflux.io/required-topology": "topology.kubeflux.io/rack"},
        schedule_timeout_seconds=30.0,
        exit_code=3,
        tolerations=(KWOK_TOLERATION,),
    )
    made = generate(spec, seed=4)
    path = tmp_path / "work.yaml"
    path.write_text(to_manifests(made))
    read = read_manifests(path)

    def shape(job: WorkloadJob) -> tuple[object, ...]:
        pods = [
            (
                p.requests,
                p.run_time,
                p.exit_code,
                {k: p.annotations[k] for k in spec.annotations},
                p.labels,
                p.tolerations,
            )
            for p in job.pods
        ]
        counts = (job.min_member, job.schedule_timeout_seconds) if kind is JobKind.POD_GROUP else ()
        counts += (job.completions, job.parallelism, job.backoff_limit) if kind is JobKind.JOB else ()
        return (job.name, job.kind, job.submit_time, counts, pods)

    assert not read.problems and [shape(j) for j in read.jobs] == [shape(j) for j in made.jobs]
    with pytest.raises(ValueError, match="a trace job has no pods"):
        to_manifests(generate(SyntheticSpec(jobs=1)))
