"""An independent simulator checks kubeflux's on real traces: the same start time for every job.

The reference below shares no code with :mod:`kubeflux.sim`: it reads the trace files with plain ``str.split``
and ``json``, and replays them on a list of free cores per node with strict FCFS, or EASY backfilling, written
from the rules the issue and the baselines' docstrings state:

* a job asks SWF field 8 processors (field 5 when field 8 is unknown) for field 4 seconds, and is killed at its
  requested time (field 9) when it runs longer, as Batsim does; Batsim jobs ask ``res`` for ``cpu / 1e9``
  seconds and are killed at ``walltime``; an unknown or negative run time, or more processors than the cluster
  has, never runs;
* times count from the first submission; at one time point, jobs end before jobs arrive, and a job that ends at
  once (run time 0) frees its cores within that time point;
* on nodes of C cores a job of P processors is ``P // C`` pods of C cores plus one pod of the rest, placed in that
  order, each on the lowest-numbered node with room (first fit); a job starts when all its pods are placed;
* FCFS starts jobs in submission order (ties by job number) and a job that does not fit blocks the later ones;
* EASY: when the head does not fit, its shadow time is the earliest expected end (start + requested time, or
  run time when unknown) at which, releasing running jobs in expected-end order, its pods fit by first fit; those
  nodes are reserved. A later job (in queue order) starts now if it fits now and ends by the shadow time, or if
  it fits now on nodes outside the reservation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubeflux.sim.baselines.easy import EasyScheduler
from kubeflux.sim.baselines.fcfs import FCFSScheduler
from kubeflux.sim.workloads import load_workload
from kubeflux.sim.workloads.cluster_file import uniform_cluster

from ._helpers import run

TRACES = Path("/work/shared/traces")
HPC2N = TRACES / "HPC2N-2002-2.2.first3170.swf"
KTH = TRACES / "KTH-SP2-1996-2.1-cln.first1000.batsim.json"


@dataclass
class RefJob:
    number: int
    submit: float
    procs: int
    run: float
    walltime: float
    """The requested time in seconds; <= 0 when unknown."""


def read_swf_plainly(path: Path) -> list[RefJob]:
    jobs = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith(";"):
            continue
        number, submit, run, allocated = int(fields[0]), float(fields[1]), float(fields[3]), int(fields[4])
        requested, walltime = int(fields[7]), float(fields[8])
        jobs.append(RefJob(number, submit, requested if requested != -1 else allocated, run, walltime))
    return jobs


def read_batsim_plainly(path: Path) -> list[RefJob]:
    data = json.loads(path.read_text())
    profiles = data["profiles"]
    return [
        RefJob(int(job["id"]), float(job["subtime"]), int(job["res"]), profiles[job["profile"]]["cpu"] / 1e9,
               float(job.get("walltime", -1)))
        for job in data["jobs"]
    ]  # fmt: skip


def reference_starts(jobs: list[RefJob], nodes: int, cores: int, *, easy: bool) -> dict[str, float | None]:
    """Replay ``jobs`` on ``nodes`` nodes of ``cores`` cores; the start time of every job (None: never ran)."""
    t0 = min(job.submit for job in jobs)
    free = [cores] * nodes
    starts: dict[str, float | None] = {str(job.number): None for job in jobs}
    arrivals = sorted(
        (job for job in jobs if job.run >= 0 and 0 < job.procs <= nodes * cores),
        key=lambda job: (job.submit, job.number),
    )
    running: list[tuple[float, float, list[tuple[int, int]]]] = []  # (end, expected end, [(node, cores)])
    queue: list[RefJob] = []

    def place(job: RefJob, cores_free: list[int], avoid: set[int]) -> list[tuple[int, int]] | None:
        sizes = [cores] * (job.procs // cores) + ([job.procs % cores] if job.procs % cores else [])
        taken: list[tuple[int, int]] = []
        for size in sizes:
            node = next((i for i, c in enumerate(cores_free) if c >= size and i not in avoid), None)
            if node is None:
                for i, c in taken:
                    cores_free[i] += c
                return None
            cores_free[node] -= size
            taken.append((node, size))
        return taken

    def start(job: RefJob, taken: list[tuple[int, int]], now: float) -> None:
        starts[str(job.number)] = now
        killed = 0 < job.walltime < job.run
        estimate = job.walltime if job.walltime > 0 else job.run
        running.append((now + (job.walltime if killed else job.run), now + estimate, taken))
        queue.remove(job)

    next_arrival = 0
    while next_arrival < len(arrivals) or running:
        times = [end for end, _, _ in running]
        if next_arrival < len(arrivals):
            times.append(arrivals[next_arrival].submit - t0)
        now = min(times)
        for entry in [entry for entry in running if entry[0] == now]:
            running.remove(entry)
            for i, c in entry[2]:
                free[i] += c
        while next_arrival < len(arrivals) and arrivals[next_arrival].submit - t0 == now:
            queue.append(arrivals[next_arrival])
            next_arrival += 1
        while queue and (taken := place(queue[0], free, set())) is not None:
            start(queue[0], taken, now)
        if not easy or not queue:
            continue
        shadow, reserved, later = math.inf, set[int](), list(free)
        for end in sorted({expected for _, expected, _ in running}):
            for _, expected, taken in running:
                for i, c in taken if expected == end else ():
                    later[i] += c
            if (at_shadow := place(queue[0], later, set())) is not None:
                shadow, reserved = max(end, now), {i for i, _ in at_shadow}
                break
        for job in list(queue[1:]):
            short = now + (job.walltime if job.walltime > 0 else job.run) <= shadow
            if (taken := place(job, free, set() if short else reserved)) is not None:
                start(job, taken, now)
    return starts


@pytest.mark.parametrize("easy", [False, True], ids=["fcfs", "easy"])
@pytest.mark.parametrize(
    ("path", "read", "nodes", "cores"),
    [(HPC2N, read_swf_plainly, 120, 2), (KTH, read_batsim_plainly, 96, 1)],
    ids=["HPC2N-120x2", "KTH-96x1"],
)
def test_every_job_starts_when_the_independent_simulator_says(
    path: Path, read: object, nodes: int, cores: int, easy: bool
) -> None:
    assert callable(read)
    expected = reference_starts(read(path), nodes, cores, easy=easy)
    record = run(load_workload(path), uniform_cluster(nodes, cores), EasyScheduler() if easy else FCFSScheduler())
    got = {job.job_id: job.starting_time for job in record.jobs}
    assert got.keys() == expected.keys()
    differ = {k: (got[k], expected[k]) for k in got if got[k] != expected[k]}
    assert not differ, f"{len(differ)} jobs start differently (kubeflux, reference), e.g. {list(differ.items())[:5]}"
    assert sum(start is not None for start in got.values()) > 0.9 * len(got)


def test_the_reference_itself_on_a_hand_made_case() -> None:
    # 2 nodes of 2 cores. j1 (3 procs: pods 2 + 1) leaves node 1 half free and j2 (1 proc) takes it at t=1;
    # j3 (4 procs) waits for j1 (t=100); at t=51 j2 ends and j3 reserves both nodes from t=100.
    jobs = [RefJob(1, 0, 3, 100, 100), RefJob(2, 1, 1, 50, 50), RefJob(3, 2, 4, 10, 10), RefJob(4, 3, 1, 500, 500)]
    assert reference_starts(jobs, 2, 2, easy=False) == {"1": 0.0, "2": 1.0, "3": 100.0, "4": 110.0}
    assert reference_starts(jobs, 2, 2, easy=True) == {"1": 0.0, "2": 1.0, "3": 100.0, "4": 110.0}  # too long
    jobs[3].run = jobs[3].walltime = 20  # ends by the shadow time: backfilled when j2 frees a core
    assert reference_starts(jobs, 2, 2, easy=True)["4"] == 51.0
    jobs[2].procs, jobs[3].run, jobs[3].walltime = 2, 500, 500  # j3 reserves node 0 only: j4 runs on node 1
    assert reference_starts(jobs, 2, 2, easy=True) == {"1": 0.0, "2": 1.0, "3": 100.0, "4": 51.0}
    jobs[3].walltime = 400  # killed at its requested time (t=500, not 600); its core comes back then
    jobs.append(RefJob(5, 60, 4, 10, 10))
    assert reference_starts(jobs, 2, 2, easy=False)["5"] == 500.0


def test_two_merged_traces_run_side_by_side_without_name_clashes() -> None:
    # HPC2N and KTH both number their jobs from 1: merged, every job must still run (none refused as a duplicate).
    from kubeflux.sim.command import merge_workloads

    merged = merge_workloads([load_workload(HPC2N), load_workload(KTH)])
    record = run(merged, uniform_cluster(120, 2), FCFSScheduler())
    assert not [p for p in record.problems if "already exists" in p]
    alone = sum(job.final_state == "REJECTED" for path in (HPC2N, KTH) for job in
                run(load_workload(path), uniform_cluster(120, 2), FCFSScheduler()).jobs)  # fmt: skip
    assert sum(job.final_state == "REJECTED" for job in record.jobs) == alone
    assert {job.job_id.split(":")[0] for job in record.jobs} == {"HPC2N-2002-2.2.first3170", "KTH-SP2-1996-2.1-cln"}
