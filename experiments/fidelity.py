"""**Fidelity**: seed 004's cases on the real control plane (KWOK nodes, the real Job controller, the real
kube-scheduler — at its defaults and with v1.36's gang scheduling — and ``kubeflux serve``) beside ``kubeflux
simulate`` on the same presets under the baseline that stands for each real scheduler: real vs simulated mean JCT,
scheduling latency, longest wait and each job's start.

The real runs take wall time (1,000 s of arrivals and more per case and scheduler), so the workloads are compressed:
arrivals and run times divided by :data:`COMPRESSION` (the simulated runs get the same workload; the control plane's
own delays — the Job controller's 1 s, kube-scheduler's 1–10 s back-off — are not compressed, on either side).
The PodGroups case under kube-scheduler runs five times and under kube-scheduler's gangs twice: they are chaotic
(which pods starve, which gang the busy loop reaches, is decided by milliseconds), so each is judged by the mean of
its real runs against the mean of seeded simulated draws. The measured runs are kept in ``fidelity.json`` beside the
page: ``python -m experiments fidelity`` runs them all again (about an hour and a half of wall time, little CPU),
``KUBEFLUX_FIDELITY_REUSE=1`` re-renders the page from the kept runs.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from experiments.pages import markdown_table, stamp, write_page
from experiments.realrun import JobTimes, RealRun, real_run
from kubeflux.controlplane import find_binaries
from kubeflux.scheduler.interface import Scheduler
from kubeflux.sim.baselines import create
from kubeflux.sim.baselines.kube_default import QUEUE_CLASSIC, QUEUE_V136, KubeDefaultScheduler
from kubeflux.sim.baselines.kube_gang import KubeGangScheduler
from kubeflux.sim.clientrate import KCM_CLIENT_RATE
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.model import Workload
from kubeflux.sim.workloads.synthetic import preset, seed004_cluster

__all__ = [
    "CASES",
    "COMPRESSION",
    "CaseRow",
    "FidelityCase",
    "FidelityRow",
    "case_rows",
    "compress",
    "fidelity_rows",
    "run_real_cases",
    "simulated_times",
    "write_fidelity",
]

COMPRESSION = 4.0
"""Arrivals and run times are divided by this on both sides (1,000 s of arrivals take 250 s)."""
NODE_CAPACITY = {"cpu": "5", "memory": "256Gi", "nvidia.com/gpu": "8"}
"""Seed 004's KWOK nodes (:func:`~kubeflux.sim.workloads.synthetic.seed004_cluster`), four of them."""


@dataclass(frozen=True, slots=True)
class FidelityCase:
    """One real run of a case under one real scheduler, and the simulated baseline that stands for it."""

    label: str
    preset: str
    every: float
    real: str
    """One of :data:`experiments.realrun.REAL_SCHEDULERS`."""
    simulated: str
    """A scheduler of :func:`kubeflux.sim.baselines.available`."""
    compression: float = COMPRESSION
    tag: str = ""
    """Tells apart the real runs of one case (``first``, ``run3``, …)."""
    run: int = 0
    """The run's number among the case's repeated runs (0: the case runs once)."""

    @property
    def case_key(self) -> str:
        """The case, whichever its run."""
        return f"{self.preset}-{self.every:g}-{self.real}-x{self.compression:g}"

    @property
    def key(self) -> str:
        """The run (the key of its measurements in ``fidelity.json``)."""
        return f"{self.case_key}-{self.tag}" if self.tag else self.case_key

    @property
    def title(self) -> str:
        return f"{self.label} (run {self.run})" if self.run else self.label


def _repeated(label: str, real: str, simulated: str, tags: Sequence[str]) -> tuple[FidelityCase, ...]:
    """The PodGroups case run once per tag under ``real`` (the first tag's run is run 1)."""
    return tuple(
        FidelityCase(label, "seed004-podgroups", 34.0, real, simulated, tag=tag, run=number)
        for number, tag in enumerate(tags, 1)
    )


PODGROUPS = "PodGroups of 2, one every 34 s"
CASES: tuple[FidelityCase, ...] = (
    FidelityCase("Jobs, one every 20 s", "seed004-jobs", 20.0, "kube-scheduler", "kube-default"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "kube-scheduler", "kube-default"),
    *_repeated(PODGROUPS, "kube-scheduler", "kube-default", ("first", "", "run3", "run4", "run5")),
    *_repeated(PODGROUPS, "kube-scheduler-gang", "kube-gang", ("", "run2")),
    FidelityCase("Jobs, one every 20 s", "seed004-jobs", 20.0, "serve", "kubeflux"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "serve", "kubeflux"),
    FidelityCase(PODGROUPS, "seed004-podgroups", 34.0, "serve", "kubeflux"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "kube-scheduler", "kube-default", compression=1.0),
)
"""Every run, in the order they run; the last, uncompressed, shows what the compression changes. The PodGroups case
under kube-scheduler is chaotic (which pods starve is decided by milliseconds), so it runs several times and is
judged by its runs' mean; so is the one under kube-scheduler's own gangs, whose busy loop wall time steers."""
COMPRESSED_JOBS_17 = CASES[1].key
UNCOMPRESSED_JOBS_17 = CASES[-1].key


def compress(workload: Workload, factor: float, jobs: int | None = None) -> Workload:
    """``workload`` with submission times, pod run times and requested times divided by ``factor`` (its first
    ``jobs`` jobs only, when given)."""
    out = []
    for job in workload.jobs[:jobs]:
        pods = [replace(p, run_time=None if p.run_time is None else p.run_time / factor) for p in job.pods]
        requested = job.requested_time / factor if job.requested_time > 0 else job.requested_time
        out.append(replace(job, submit_time=job.submit_time / factor, pods=pods, requested_time=requested))
    return replace(workload, jobs=out)


def case_workload(case: FidelityCase, jobs: int | None = None) -> Workload:
    return compress(preset(case.preset, mean_interarrival=case.every), case.compression, jobs)


CYCLE_SECONDS = 0.0007
"""kube-scheduler's scheduling cycle for a pod that does not fit, as its ``/metrics`` measured it on the real runs
(``scheduler_scheduling_attempt_duration_seconds{result="unschedulable"}``: 300 attempts, 0.21 s)."""
GANG_SEEDS = range(10)
"""The draws of ``kube-gang``'s busy-loop order the page shows the spread of (the table: the first)."""


def _scheduler(name: str, seed: int = 0, window_offset: float = 0.0) -> Scheduler:
    """The simulated scheduler that stands for a real one: kube-default with kube-scheduler's measured cycle time
    and its back-off windows where the real run's fell (``window_offset``), kube-gang with the ``seed``-th draw of
    its busy loop's order, the others as registered."""
    if name == "kube-default":
        return KubeDefaultScheduler(queue=QUEUE_V136, cycle_seconds=CYCLE_SECONDS, window_offset=window_offset)
    if name == "kube-gang":
        return KubeGangScheduler(seed=seed)
    return create(name)


FIDELITY_LIFECYCLE = Lifecycle(
    end_jitter=0.01,
    end_delay=0.025,
    job_sync_delay=1.03,
    start_delay=0.04,
    job_client_qps=KCM_CLIENT_RATE.qps,
    job_client_burst=KCM_CLIENT_RATE.burst,
)
"""The simulated kubelets and Job controller as the real runs measured them: a Job is complete 1.03 s after its pod
ends (kube-controller-manager's 1 s ``syncJobBatchPeriod``, then its status write; median of the runs that kept each
pod's times); a pod runs 0.04 s after it could (the Job controller creating it, kube-scheduler binding it, KWOK
marking it Running: 0.029 + 0.009 s, median of the Jobs every 20 s run under kube-scheduler); a pod ends 0.025 s
plus up to 10 ms after its run time (KWOK marks it ``Succeeded`` 0.02–0.04 s late on average over each run's pods,
and two pods of a pair end 0.1–21 ms apart, each a watch event of its own); the Job controller creates pods at
kube-controller-manager's client rate (20 a second after a burst of 30, at most 500 a sync:
:mod:`kubeflux.sim.clientrate`)."""


def simulated_times(
    workload: Workload,
    scheduler: str,
    lifecycle: Lifecycle = FIDELITY_LIFECYCLE,
    seed: int = 0,
    window_offset: float = 0.0,
) -> list[JobTimes]:
    """``workload`` in virtual time under ``scheduler`` on seed 004's cluster, its pods uncoupled (each runs its
    run time from its own Running, as KWOK runs it); each job's times in submission order."""
    core = _scheduler(scheduler, seed, window_offset)
    options = SimulationOptions(lifecycle=lifecycle, couple=False)
    run = simulate(workload, seed004_cluster(), {core.name: core}, primary=core.name, options=options)
    records = sorted(run.jobs, key=lambda r: r.submission_time)
    return [JobTimes(r.job_id, r.submission_time, r.first_bind_time, r.starting_time, r.finish_time) for r in records]


@dataclass(frozen=True, slots=True)
class Figures:
    jct: float
    latency: float
    longest_wait: float


def figures(jobs: Sequence[JobTimes]) -> Figures:
    """Mean JCT (end − submission), mean scheduling latency (first bind − submission), longest wait (start −
    submission), over the jobs that got there."""
    jct = [j.end - j.submitted for j in jobs if j.end is not None]
    latency = [j.first_bind - j.submitted for j in jobs if j.first_bind is not None]
    wait = [j.start - j.submitted for j in jobs if j.start is not None]
    return Figures(statistics.fmean(jct), statistics.fmean(latency), max(wait, default=0.0))


@dataclass(frozen=True, slots=True)
class FidelityRow:
    case: FidelityCase
    real: Figures
    simulated: Figures
    start_error_median: float
    start_error_max: float
    worst_job: int
    """The job (in submission order, from 0) whose start differs most."""

    @property
    def jct_gap(self) -> float:
        """Simulated − real mean JCT, relative to the real one."""
        return (self.simulated.jct - self.real.jct) / self.real.jct

    def cells(self) -> list[str]:
        c = self.case
        return [
            c.title,
            f"{c.real} / {c.simulated}",
            f"{c.compression:g}",
            f"{self.real.jct:.2f} / {self.simulated.jct:.2f}",
            f"{100 * self.jct_gap:+.2f} %",
            f"{self.real.latency:.2f} / {self.simulated.latency:.2f}",
            f"{self.real.longest_wait:.2f} / {self.simulated.longest_wait:.2f}",
            f"{self.start_error_median:.2f}",
            f"{self.start_error_max:.2f} (job {self.worst_job})",
        ]


HEADER = (
    "case",
    "real / simulated scheduler",
    "compression",
    "mean JCT (s), real / sim",
    "JCT sim − real",
    "mean latency (s), real / sim",
    "longest wait (s), real / sim",
    "start error median (s)",
    "start error max (s)",
)


def compare(case: FidelityCase, real: Sequence[JobTimes], simulated: Sequence[JobTimes]) -> FidelityRow:
    """The case's figures, real and simulated, and each job's start error |real − simulated| (jobs in submission
    order; the real times counted from the first real submission, as the simulated ones)."""
    origin = real[0].submitted if real else 0.0
    errors = [
        abs(r.start - origin - s.start)
        for r, s in zip(real, simulated, strict=True)
        if r.start is not None and s.start is not None
    ]
    worst = max(range(len(errors)), key=errors.__getitem__) if errors else 0
    return FidelityRow(
        case,
        figures(real),
        figures(simulated),
        statistics.median(errors) if errors else 0.0,
        max(errors, default=0.0),
        worst,
    )


def run_real_cases(
    store: Path, cases: Sequence[FidelityCase] = CASES, *, jobs: int | None = None, keep: bool = True
) -> dict[str, RealRun]:
    """Run ``cases`` on the real control plane, one after the other, each on a new one in a temporary folder;
    each run is written to ``store`` (JSON, by :attr:`FidelityCase.key`) as soon as it is done, so an interrupted
    series keeps what it measured; with ``keep`` a case already in ``store`` is not run again."""
    runs = load_runs(store)
    for case in cases:
        if keep and case.key in runs:
            continue
        with tempfile.TemporaryDirectory(prefix="kubeflux-fidelity-") as folder:
            print(f"fidelity: {case.key} …", flush=True)
            run = real_run(case_workload(case, jobs), case.real, Path(folder), nodes=4, node_capacity=NODE_CAPACITY)
        runs[case.key] = run
        store.write_text(json.dumps({k: v.to_json() for k, v in runs.items()}, indent=1) + "\n")
    return runs


def load_runs(store: Path) -> dict[str, RealRun]:
    if not store.is_file():
        return {}
    return {key: RealRun.from_json(value) for key, value in json.loads(store.read_text()).items()}


def _window_offset(run: RealRun) -> float:
    """Where in a wall-clock second the run's first job was submitted (kube-scheduler's back-off windows end on
    whole seconds)."""
    return (run.origin_unix + run.jobs[0].submitted) % 1.0 if run.origin_unix else 0.0


def fidelity_rows(runs: dict[str, RealRun], cases: Sequence[FidelityCase] = CASES) -> list[FidelityRow]:
    """Each run of a case that has been measured, compared with its simulated run (the first draw)."""
    rows = []
    for case in cases:
        run = runs.get(case.key)
        if run is None:
            continue
        workload = case_workload(case, len(run.jobs))
        simulated = simulated_times(workload, case.simulated, window_offset=_window_offset(run))
        rows.append(compare(case, run.jobs, simulated))
    return rows


SIMULATED_DRAWS = range(10)
"""The seeded draws (the pods' end jitter; kube-gang's loop order) each real run's simulated side is averaged over
in the table of cases."""


@dataclass(frozen=True, slots=True)
class CaseRow:
    """A case's mean JCT over its real runs beside its mean over the simulated draws of each run."""

    case: FidelityCase
    real: tuple[float, ...]
    """Each real run's mean JCT."""
    simulated: tuple[float, ...]
    """Each simulated draw's mean JCT."""

    @property
    def jct_gap(self) -> float:
        """Simulated − real mean JCT, relative to the real one."""
        real = statistics.fmean(self.real)
        return (statistics.fmean(self.simulated) - real) / real

    def cells(self) -> list[str]:
        def spread(values: Sequence[float]) -> str:
            mean = f"{statistics.fmean(values):.2f}"
            return mean if len(values) == 1 else f"{mean} ({min(values):.2f}–{max(values):.2f})"

        c = self.case
        return [
            c.label,
            f"{c.real} / {c.simulated}",
            f"{c.compression:g}",
            str(len(self.real)),
            spread(self.real),
            str(len(self.simulated)),
            spread(self.simulated),
            f"{100 * self.jct_gap:+.2f} %",
        ]


CASE_HEADER = (
    "case",
    "real / simulated scheduler",
    "compression",
    "real runs",
    "mean JCT (s), real: mean (range)",
    "simulated draws",
    "mean JCT (s), simulated: mean (range)",
    "JCT sim − real",
)


def case_rows(runs: dict[str, RealRun], cases: Sequence[FidelityCase] = CASES) -> list[CaseRow]:
    """One row per case that has a measured run: its real runs' mean JCT beside the mean over
    :data:`SIMULATED_DRAWS` draws of each run's simulation."""
    groups: dict[str, list[FidelityCase]] = {}
    for case in cases:
        if case.key in runs:
            groups.setdefault(case.case_key, []).append(case)
    rows = []
    for group in groups.values():
        simulated = []
        for case in group:
            run = runs[case.key]
            workload = case_workload(case, len(run.jobs))
            for draw in SIMULATED_DRAWS:
                lifecycle = replace(FIDELITY_LIFECYCLE, seed=draw)
                times = simulated_times(workload, case.simulated, lifecycle, draw, _window_offset(run))
                simulated.append(figures(times).jct)
        real = tuple(figures(runs[case.key].jobs).jct for case in group)
        rows.append(CaseRow(group[0], real, tuple(simulated)))
    return rows


_PAGE = """# Fidelity: seed 004 on the real control plane and in the simulator

{stamp}

**The question.** Does `kubeflux simulate` give what the real Kubernetes gives? Seed 004's cases (50 Jobs of one
8-GPU pod running 72 s, one every 20 s and every 17 s; 50 PodGroups of 2 such pods, one every 34 s) run on a real
control plane (etcd, kube-apiserver, kube-controller-manager with its Job controller, KWOK running the pods, 4 KWOK
nodes of 8 GPUs) under the real kube-scheduler v1.36 — at its defaults, and with its own gang scheduling
(`GenericWorkload` and `GangScheduling` gates, `scheduling.k8s.io/v1alpha2` PodGroups with `gang.minCount: 2`) —
and under `kubeflux serve` (coscheduling's PodGroup, `minMember: 2`); then the same workloads in virtual time under
the baseline standing for each: `kube-default`, `kube-gang`, `kubeflux`.

**The setup.** The real runs are driven by `experiments/realrun.py`: each job submitted at its time (wall clock),
every pod and Job watched; a job's first bind is the first watch event with a `nodeName`, its start the event with
its last required pod `Running`, its end the Job's `Complete` condition (a Job) or its last pod `Succeeded` (a
PodGroup). KWOK runs each pod its run time from its own `Running` (pods of a pair are not coupled), so the simulated
runs use `couple=False`. **Compression**: the real runs take wall time, so arrivals and run times are divided by
the factor in the table (4: a Job every 5 s or 4.25 s running 18 s; PodGroups every 8.5 s) on both sides; the
control plane's own delays (the Job controller's 1 s, kube-scheduler's 1–10 s back-off) are not. The last row runs
the Jobs-every-17-s case uncompressed to show what compression changes. The PodGroups case under kube-scheduler is
chaotic (which pods starve is decided by milliseconds), so it runs several times and is judged by the mean of its
runs, and so does the one under kube-scheduler's own gangs (whose busy loop wall time steers). Measured on a
machine shared with other work: {machine}.

{table}

*(real / simulated, each real run against the first simulated draw; start error: |real − simulated| start of each
job, counted from the first submission.)*

**Per case**, over its real runs and {draws} seeded simulated draws of each (the pods' end jitter; kube-gang's loop
order):

{cases}

{explained}
"""


def _machine(runs: dict[str, RealRun]) -> str:
    loads = [run.load[0] for run in runs.values()]
    cores = os.cpu_count()
    if not loads:
        return f"{cores} cores"
    return f"{cores} cores, load average (1 min) {min(loads):.1f}–{max(loads):.1f} at the runs' ends"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _job_sync_delays(runs: dict[str, RealRun], rows: Sequence[FidelityRow]) -> list[float]:
    """Seconds from a Job's pod ending to the Job's ``Complete``, over the Jobs runs that kept their pods' times."""
    delays = []
    for case in (row.case for row in rows):
        run = runs[case.key]
        if case.preset != "seed004-jobs":
            continue
        ends = {name.rsplit("-", 1)[0]: times["end"] for name, times in run.pods.items() if "end" in times}
        delays += [job.end - ends[job.name] for job in run.jobs if job.end is not None and job.name in ends]
    return delays


def _end_delays(runs: dict[str, RealRun], rows: Sequence[FidelityRow]) -> list[float]:
    """Each run's mean of how long after its run time a pod was marked ``Succeeded`` (runs that kept pods' times)."""
    means = []
    for case in (row.case for row in rows):
        run = runs[case.key]
        if not run.pods:
            continue
        run_time = 72.0 / case.compression
        late = [t["end"] - t["running"] - run_time for t in run.pods.values() if "end" in t and "running" in t]
        if late:
            means.append(statistics.fmean(late))
    return means


def _gang_handover(run: RealRun, case: CaseRow) -> str:
    """What is left of the gangs' JCT gap: how long after its room is freed a queued gang runs, measured."""
    ends = sorted(times["end"] for times in run.pods.values() if "end" in times)
    members: dict[str, list[dict[str, float]]] = {}
    for name, times in run.pods.items():
        members.setdefault(name.rsplit("-", 1)[0], []).append(times)
    reach, spread, running = [], [], []
    for job in run.jobs:
        pods = members.get(job.name, [])
        binds = sorted(p["bind"] for p in pods if "bind" in p)
        runs = sorted(p["running"] for p in pods if "running" in p)
        if len(binds) < 2 or not runs or job.first_bind is None:
            continue
        spread.append(binds[-1] - binds[0])
        running.append(runs[-1] - binds[-1])
        before = [end for end in ends if end <= job.first_bind]
        if job.first_bind - job.submitted > 0.5 and before:  # queued: its room was freed by a pod's end
            reach.append(job.first_bind - before[-1])
    if not reach:
        return ""
    return (
        f" What is left of the JCT gap ({100 * case.jct_gap:+.1f} %) is the gangs' own hand-over: a queued gang's "
        f"first pod is bound {_median(reach):.3f} s after the pod whose end makes room for it ends (median; mean "
        f"{statistics.fmean(reach):.3f} s: the busy loop reaching it), its second {_median(spread):.3f} s later, "
        f"and both run {_median(running):.3f} s after that — about "
        f"{_median(reach) + _median(spread) + _median(running):.2f} s against the simulated 0.04 s per gang, "
        "added up along each queue of gangs."
    )


def _pair_end_gaps(run: RealRun) -> list[float]:
    """Seconds between the ends of the two pods of each pair bound at one release (ends less than 50 ms apart)."""
    ends: dict[str, list[float]] = {}
    for name, times in run.pods.items():
        if "end" in times:
            ends.setdefault(name.rsplit("-", 1)[0], []).append(times["end"])
    return sorted(abs(a - b) for a, b in (pair for pair in ends.values() if len(pair) == 2) if abs(a - b) < 0.05)


def _row(rows: Sequence[FidelityRow], key: str) -> FidelityRow | None:
    return next((row for row in rows if row.case.key == key), None)


def explain(runs: dict[str, RealRun], rows: Sequence[FidelityRow], cases: Sequence[CaseRow]) -> str:
    """The page's account of every difference, with the figures the real runs measured."""
    parts: list[str] = []
    measured = [r for r in rows if r.case.preset == "seed004-jobs" and r.case.real == "kube-scheduler"]
    measured.sort(key=lambda r: -r.case.every)  # no queue at one Job every 20 s: the delays alone
    jobs20 = runs[measured[0].case.key] if measured else None
    if jobs20 is not None:
        sync = _median(_job_sync_delays(runs, rows))
        bind = _median([j.first_bind - j.submitted for j in jobs20.jobs if j.first_bind is not None])
        start = _median([j.start - j.first_bind for j in jobs20.jobs if j.start is not None and j.first_bind])
        short = [f"{100 * FIDELITY_LIFECYCLE.job_sync_delay / r.real.jct:.1f} %" for r in (measured[0], measured[-1])]
        parts.append(
            f"1. **The Job controller.** A Job is `Complete` {sync:.2f} s after its pod ends (median over the Jobs "
            "runs that kept each pod's times): kube-controller-manager syncs a Job 1 s after a pod event "
            "(`syncJobBatchPeriod`), then writes its status. The simulator's Job controller waits as long "
            f"(`Lifecycle(job_sync_delay={FIDELITY_LIFECYCLE.job_sync_delay:g})`); without it every Job's JCT is "
            f"short by that second — {short[0]} of {measured[0].case.label.lower()}, {short[1]} of "
            f"{measured[-1].case.label.lower()} (compression {measured[-1].case.compression:g}).\n"
            f"2. **The control plane's own time.** A Job's pod is bound {bind:.3f} s after the Job is created (the "
            f"Job controller makes the pod, kube-scheduler binds it) and runs {start:.3f} s after its bind (KWOK): "
            "`Lifecycle(start_delay=0.04)`. Under high load a queued job inherits the delays of the jobs before it "
            "on its node, so they add up along the queue."
        )
    split = [runs[c.key] for c in CASES if c.run and c.key in runs and runs[c.key].pods]
    second = split[0] if split else None
    if second is not None:
        gaps = _pair_end_gaps(second)
        metrics = second.scheduler_metrics
        attempts = metrics.get("attempts_unschedulable", 0.0)
        cycle = metrics.get("attempt_seconds_unschedulable", 0.0) / attempts if attempts else float("nan")
        late = _end_delays(runs, rows)
        parts.append(
            f"3. **Pods end late, and apart.** KWOK marks a pod `Succeeded` {min(late):.3f}–{max(late):.3f} s after "
            f"its run time (the mean of each run that kept its pods' times, {len(late)} runs): its stage's queue "
            "and status write. Along a queue of jobs, each waiting for the one before it to end, these delays add "
            "up. And the two pods of a pair bound together end "
            f"{1000 * gaps[0]:.1f}–{1000 * gaps[-1]:.1f} ms apart (median {1000 * _median(gaps):.1f} ms): "
            "kube-scheduler sees two releases where virtual time has one instant. The simulated pods end 0.025 s "
            "plus up to 10 ms after their run time (`Lifecycle(end_delay=0.025, end_jitter=0.01)`, seeded).\n"
            "4. **kube-scheduler v1.36's queue** (`kube-default` with `queue='v1.36'` models it, "
            "`pkg/scheduler/backend/queue`; the published baselines keep the classic queue): a "
            "failed pod's timestamp becomes the time of its failure; its back-off (1, 2, 4, 8, then 10 s) ends on a "
            "whole second (`backoffQOrderingWindowDuration`); at a release every waiting pod is tried, first those "
            "done backing off (the active queue, by timestamp), then the others soonest expiry first "
            "(`SchedulerPopFromBackoffQ` pops the backoff queue when the active one is empty). Each failure "
            "restarts the back-off, so a pod that keeps losing falls behind pods that failed fewer times, and can "
            f"starve{_starving(rows)}. A cycle for a pod that does not fit takes "
            f"{1000 * cycle:.2f} ms (kube-scheduler's `/metrics`: {attempts:.0f} attempts): the simulated cycles take "
            f"as long (`cycle_seconds={CYCLE_SECONDS:g}`), so a pod that ends while the queue is being worked "
            "through finds the pods not yet tried still in the active queue, ahead of those that just failed.\n"
            "5. **PodGroups without gang support split.** At the first of a pair's two releases the oldest waiting "
            "pod binds and the others fail (their back-off restarts); at the second, its sibling is backing off "
            "and a younger pod — done backing off, or with a sooner expiry — takes the node. Pairs then run 8.4 or "
            "9.6 s apart, each pod's end frees one node for one waiting pod, and the split goes on to the last job: "
            "the real runs and the simulator fall into this same chain (the median start error is a fraction of a "
            "second), but which pods starve in it (lose at every release for minutes) is decided by milliseconds"
            f"{_split_spread(cases)}"
        )
    gangs = [row for row in rows if row.case.real == "kube-scheduler-gang"]
    gang_case = next((row for row in cases if row.case.real == "kube-scheduler-gang"), None)
    if gangs and gang_case is not None:
        first = runs[gangs[0].case.key]
        workload = case_workload(gangs[0].case, len(first.jobs))
        waits = [figures(simulated_times(workload, "kube-gang", seed=seed)).longest_wait for seed in GANG_SEEDS]
        real_waits = ", ".join(f"{row.real.longest_wait:.1f}" for row in gangs)
        timed = next((runs[row.case.key] for row in gangs if runs[row.case.key].pods), None)
        parts.append(
            "6. **kube-scheduler's own gangs** (`kube-gang`): a gang's pods are placed together on one snapshot, "
            "all or none; a gang that does not fit goes back to the backoff queue at once (pods of a scheduling "
            "group are never parked until an event) and, the active queue being empty, is popped again: a busy "
            "loop turning through the blocked gangs (the issue counted 11.4 million attempts in 31 minutes). The "
            "freed nodes go to whichever gang the loop reaches first, which wall time decides; `kube-gang` draws "
            "that order (seeded). Gangs being equal, the mean JCT does not depend on the order; the longest wait "
            f"does: {min(waits):.1f}–{max(waits):.1f} s over {len(waits)} draws "
            f"(median {_median(waits):.1f} s), real {real_waits} s; and each job's start differs by the draw."
            + (_gang_handover(timed, gang_case) if timed is not None else "")
        )
    parts.append(_serve_part(runs, rows))
    compression = _row(rows, UNCOMPRESSED_JOBS_17)
    compressed = _row(rows, COMPRESSED_JOBS_17)
    if compression is not None and compressed is not None:
        parts.append(
            f"**Compression.** Jobs every 17 s run uncompressed: JCT {compression.real.jct:.2f} s real, "
            f"{compression.simulated.jct:.2f} s simulated ({100 * compression.jct_gap:+.1f} %), against "
            f"{100 * compressed.jct_gap:+.1f} % compressed 4 times: the control plane's fixed delays weigh 4 times "
            "more against the compressed run times, and the simulator models them either way."
        )
    parts.append(_verdict(cases))
    return "**What makes the differences, and how the simulator models them.**\n\n" + "\n\n".join(
        part for part in parts if part
    )


def _verdict(cases: Sequence[CaseRow]) -> str:
    """Which cases agree within 2 % in mean JCT, which do not."""
    within = [row for row in cases if abs(row.jct_gap) <= 0.02]
    beyond = [row for row in cases if abs(row.jct_gap) > 0.02]
    if not cases:
        return ""

    def name(row: CaseRow) -> str:
        return f"{row.case.label} under {row.case.real} ({100 * row.jct_gap:+.2f} %)"

    text = f"**Within 2 % in mean JCT**: {len(within)} of {len(cases)} cases."
    if beyond:
        text += " Not: " + "; ".join(name(row) for row in beyond) + " — for the reasons above."
    return text


def _starving(rows: Sequence[FidelityRow]) -> str:
    """The Jobs-every-17-s case's longest wait, real, under v1.36's queue and under the first model's."""
    row = _row(rows, COMPRESSED_JOBS_17)
    if row is None:
        return ""
    workload = case_workload(row.case)
    core = KubeDefaultScheduler(queue=QUEUE_CLASSIC)
    options = SimulationOptions(lifecycle=FIDELITY_LIFECYCLE, couple=False)
    record = simulate(workload, seed004_cluster(), {core.name: core}, primary=core.name, options=options)
    classic = max(j.starting_time - j.submission_time for j in record.jobs if j.starting_time is not None)
    return (
        f": at {row.case.label.lower()} the longest wait is {row.real.longest_wait:.1f} s real, "
        f"{row.simulated.longest_wait:.1f} s under this queue, {classic:.1f} s under the first model's (priority, "
        "then creation, each pod retried when its own back-off ends)"
    )


def _split_spread(cases: Sequence[CaseRow]) -> str:
    """How far apart the real runs of the PodGroups case under kube-scheduler fall, and where the simulated draws'
    mean lies against theirs."""
    row = next((row for row in cases if row.case.run and row.case.real == "kube-scheduler"), None)
    if row is None or len(row.real) < 2:
        return "."
    mean = statistics.fmean(row.real)
    spread = 100 * (max(row.real) - min(row.real)) / mean
    return (
        f": its {len(row.real)} real runs span {spread:.1f} % of their mean JCT "
        f"({min(row.real):.2f}–{max(row.real):.2f} s), its {len(row.simulated)} simulated draws "
        f"{100 * (max(row.simulated) - min(row.simulated)) / statistics.fmean(row.simulated):.1f} %; "
        f"the two means are {100 * row.jct_gap:+.1f} % apart."
    )


def _serve_part(runs: dict[str, RealRun], rows: Sequence[FidelityRow]) -> str:
    served = [row for row in rows if row.case.real == "serve"]
    if not served:
        return ""
    gaps = ", ".join(f"{row.case.label}: {100 * row.jct_gap:+.1f} %" for row in served)

    def latencies(run: RealRun) -> list[float]:
        return [j.first_bind - j.submitted for j in run.jobs if j.first_bind is not None]

    first = latencies(runs[served[0].case.key])
    kube = runs.get(CASES[0].key)
    beside = f", kube-scheduler {_median(latencies(kube)):.3f} s" if kube is not None else ""
    unready = [
        run.jobs[0].first_bind - run.jobs[0].submitted
        for key, run in runs.items()
        if key.endswith("-unready") and run.jobs[0].first_bind is not None
    ]
    early = (
        f" A first series started the workload as soon as serve's process ran, before its `/readyz`: its first "
        f"job waited {min(unready):.1f}–{max(unready):.1f} s, and every job queued behind it inherited the wait "
        "(up to −9 % of JCT); the driver now waits for `/readyz`, as a user's readiness probe does."
        if unready
        else ""
    )
    return (
        f"7. **kubeflux serve** against `kubeflux` in virtual time ({gaps}). serve binds a pod "
        f"{_median(first):.3f} s after its Job's creation (median; mean {statistics.fmean(first):.3f} s{beside}): "
        "its watch, its batch and its Binding, in Python, take a little "
        "longer than kube-scheduler's, and under high load a queued job inherits the delays before it, which the "
        "simulated 0.04 s leaves out." + early
    )


def write_fidelity(folder: Path, runs: dict[str, RealRun] | None = None, cases: Sequence[FidelityCase] = CASES) -> Path:
    """Write ``fidelity.md`` (and the measured runs, ``fidelity.json``) into ``folder``: the real runs of ``cases``
    are run unless given or, with ``KUBEFLUX_FIDELITY_REUSE=1``, taken from ``fidelity.json``."""
    store = folder / "fidelity.json"
    if runs is None:
        missing = find_binaries()
        reuse = bool(os.environ.get("KUBEFLUX_FIDELITY_REUSE")) or isinstance(missing, str)
        if isinstance(missing, str):
            print(f"fidelity: {missing}; the page is rendered from the kept runs", flush=True)
        runs = load_runs(store) if reuse else run_real_cases(store, cases, keep=False)
    rows = fidelity_rows(runs, cases)
    per_case = case_rows(runs, cases)
    page = _PAGE.format(
        stamp=stamp("fidelity", "a test checks the page's structure and the driver on a tiny case"),
        machine=_machine(runs),
        table=markdown_table(HEADER, [row.cells() for row in rows]),
        draws=len(SIMULATED_DRAWS),
        cases=markdown_table(CASE_HEADER, [row.cells() for row in per_case]),
        explained=explain(runs, rows, per_case),
    )
    return write_page(folder, "fidelity", page)
