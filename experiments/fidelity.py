"""**Fidelity**: seed 004's cases on the real control plane (KWOK nodes, the real Job controller, the real
kube-scheduler — at its defaults and with v1.36's gang scheduling — and ``kubeflux serve``) beside ``kubeflux
simulate`` on the same presets under the baseline that stands for each real scheduler: real vs simulated mean JCT,
scheduling latency, longest wait and each job's start.

The real runs take wall time (1,000 s of arrivals and more per case and scheduler), so the workloads are compressed:
arrivals and run times divided by :data:`COMPRESSION` (the simulated runs get the same workload; the control plane's
own delays — the Job controller's 1 s, kube-scheduler's 1–10 s back-off — are not compressed, on either side).
The PodGroups case under kube-scheduler runs twice: it is chaotic (which pods starve is decided by milliseconds),
and the two runs show how far apart two real runs fall. The measured runs are kept in ``fidelity.json`` beside the
page: ``python -m experiments fidelity`` runs them all again (about an hour of wall time, little CPU),
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
from kubeflux.sim.driver import SimulationOptions, simulate
from kubeflux.sim.pods import Lifecycle
from kubeflux.sim.workloads.model import Workload
from kubeflux.sim.workloads.synthetic import preset, seed004_cluster

__all__ = [
    "CASES",
    "COMPRESSION",
    "FidelityCase",
    "FidelityRow",
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
    """One case under one real scheduler and the simulated baseline that stands for it."""

    label: str
    preset: str
    every: float
    real: str
    """One of :data:`experiments.realrun.REAL_SCHEDULERS`."""
    simulated: str
    """A scheduler of :func:`kubeflux.sim.baselines.available`."""
    compression: float = COMPRESSION
    tag: str = ""
    """Tells apart two real runs of one case (``first``)."""

    @property
    def key(self) -> str:
        key = f"{self.preset}-{self.every:g}-{self.real}-x{self.compression:g}"
        return f"{key}-{self.tag}" if self.tag else key


CASES: tuple[FidelityCase, ...] = (
    FidelityCase("Jobs, one every 20 s", "seed004-jobs", 20.0, "kube-scheduler", "kube-default"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "kube-scheduler", "kube-default"),
    FidelityCase(
        "PodGroups of 2, one every 34 s (run 1)",
        "seed004-podgroups",
        34.0,
        "kube-scheduler",
        "kube-default",
        tag="first",
    ),
    FidelityCase("PodGroups of 2, one every 34 s (run 2)", "seed004-podgroups", 34.0, "kube-scheduler", "kube-default"),
    FidelityCase("PodGroups of 2, one every 34 s", "seed004-podgroups", 34.0, "kube-scheduler-gang", "kube-gang"),
    FidelityCase("Jobs, one every 20 s", "seed004-jobs", 20.0, "serve", "kubeflux"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "serve", "kubeflux"),
    FidelityCase("PodGroups of 2, one every 34 s", "seed004-podgroups", 34.0, "serve", "kubeflux"),
    FidelityCase("Jobs, one every 17 s", "seed004-jobs", 17.0, "kube-scheduler", "kube-default", compression=1.0),
)
"""Every case, in the order they run; the last, uncompressed, shows what the compression changes."""


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


FIDELITY_LIFECYCLE = Lifecycle(end_jitter=0.01, job_sync_delay=1.03, start_delay=0.04)
"""The simulated kubelets and Job controller as the real runs measured them (median of the Jobs every 20 s run
under kube-scheduler): a Job is complete 1.03 s after its pod ends (kube-controller-manager's 1 s
``syncJobBatchPeriod``, then its status write); a pod runs 0.04 s after it could (the Job controller creating it,
kube-scheduler binding it, KWOK marking it Running: 0.029 + 0.009 s); pods end up to 10 ms apart (two pods of a pair
end 0.1–7 ms apart on the real cluster, each a watch event of its own)."""


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
            c.label,
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


def fidelity_rows(runs: dict[str, RealRun], cases: Sequence[FidelityCase] = CASES) -> list[FidelityRow]:
    """Each case that has a real run, compared with its simulated run."""
    rows = []
    for case in cases:
        run = runs.get(case.key)
        if run is None:
            continue
        workload = case_workload(case, len(run.jobs))
        offset = (run.origin_unix + run.jobs[0].submitted) % 1.0 if run.origin_unix else 0.0
        rows.append(compare(case, run.jobs, simulated_times(workload, case.simulated, window_offset=offset)))
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
the Jobs-every-17-s case uncompressed to show what compression changes. Measured on a machine shared with other
work: {machine}.

{table}

*(real / simulated; start error: |real − simulated| start of each job, counted from the first submission.)*

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


def _run_of(runs: dict[str, RealRun], key: str) -> RealRun | None:
    return runs.get(key)


def _pair_end_gaps(run: RealRun) -> list[float]:
    """Seconds between the ends of the two pods of each pair bound at one release (ends less than 50 ms apart)."""
    ends: dict[str, list[float]] = {}
    for name, times in run.pods.items():
        if "end" in times:
            ends.setdefault(name.rsplit("-", 1)[0], []).append(times["end"])
    return sorted(abs(a - b) for a, b in (pair for pair in ends.values() if len(pair) == 2) if abs(a - b) < 0.05)


def _row(rows: Sequence[FidelityRow], key: str) -> FidelityRow | None:
    return next((row for row in rows if row.case.key == key), None)


def explain(runs: dict[str, RealRun], rows: Sequence[FidelityRow]) -> str:
    """The page's account of every difference, with the figures the real runs measured."""
    parts: list[str] = []
    measured = [r for r in rows if r.case.preset == "seed004-jobs" and r.case.real == "kube-scheduler"]
    measured.sort(key=lambda r: -r.case.every)  # no queue at one Job every 20 s: the delays alone
    jobs20 = runs[measured[0].case.key] if measured else None
    if jobs20 is not None:
        run_time = 72.0 / measured[0].case.compression
        sync = _median([j.end - j.start for j in jobs20.jobs if j.end is not None and j.start is not None])
        bind = _median([j.first_bind - j.submitted for j in jobs20.jobs if j.first_bind is not None])
        start = _median([j.start - j.first_bind for j in jobs20.jobs if j.start is not None and j.first_bind])
        parts.append(
            f"1. **The Job controller.** A Job is `Complete` {sync - run_time:.2f} s after its pod ends (median, "
            f"{measured[0].case.label} under kube-scheduler): kube-controller-manager syncs a Job 1 s after a pod "
            "event (`syncJobBatchPeriod`), then writes its status. The simulator's Job controller waits as long "
            "(`Lifecycle(job_sync_delay=1.03)`); without it every Job's JCT is short by that second — −5.5 % at "
            "compression 4, −1.4 % uncompressed: the whole gap of the Jobs cases.\n"
            f"2. **The control plane's own time.** A Job's pod is bound {bind:.3f} s after the Job is created (the "
            f"Job controller makes the pod, kube-scheduler binds it) and runs {start:.3f} s after its bind (KWOK): "
            "`Lifecycle(start_delay=0.04)`. Under high load a queued job inherits the delays of the jobs before it "
            "on its node, so they add up along the queue."
        )
    second = _run_of(runs, CASES[3].key)
    if second is not None and second.pods:
        gaps = _pair_end_gaps(second)
        metrics = second.scheduler_metrics
        attempts = metrics.get("attempts_unschedulable", 0.0)
        cycle = metrics.get("attempt_seconds_unschedulable", 0.0) / attempts if attempts else float("nan")
        parts.append(
            f"3. **Pods end apart.** The two pods of a pair bound together end {1000 * gaps[0]:.1f}–"
            f"{1000 * gaps[-1]:.1f} ms apart (median {1000 * _median(gaps):.1f} ms; KWOK completes each on a timer "
            "of its own): kube-scheduler sees two releases where virtual time has one instant. The simulated "
            "pods end up to 10 ms after their run time (`Lifecycle(end_jitter=0.01)`, seeded).\n"
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
            "second), but which pods starve in it (lose at every release for minutes) is decided by milliseconds: "
            "the two real runs of the case differ from each other by "
            f"{_real_spread(rows):.1f} % in JCT, and the simulator lies below both."
        )
    gang = _row(rows, CASES[4].key)
    if gang is not None:
        real_run = runs[gang.case.key]
        workload = case_workload(gang.case, len(real_run.jobs))
        waits = [figures(simulated_times(workload, "kube-gang", seed=seed)).longest_wait for seed in GANG_SEEDS]
        parts.append(
            "6. **kube-scheduler's own gangs** (`kube-gang`): a gang's pods are placed together on one snapshot, "
            "all or none; a gang that does not fit goes back to the backoff queue at once (pods of a scheduling "
            "group are never parked until an event) and, the active queue being empty, is popped again: a busy "
            "loop turning through the blocked gangs (the issue counted 11.4 million attempts in 31 minutes). The "
            "freed nodes go to whichever gang the loop reaches first, which wall time decides; `kube-gang` draws "
            "that order (seeded). Gangs being equal, the mean JCT does not depend on the order; the longest wait "
            f"does: {min(waits):.1f}–{max(waits):.1f} s over {len(waits)} draws "
            f"(median {_median(waits):.1f} s), real {gang.real.longest_wait:.1f} s; and each job's start differs "
            "by the draw. What is left of the JCT gap "
            f"({100 * gang.jct_gap:+.1f} %, latency {gang.real.latency - gang.simulated.latency:+.2f} s) is the "
            "gangs' own hand-over: a gang runs once both its pods do (their `Running` "
            f"{_median([j.start - j.first_bind for j in real_run.jobs if j.start and j.first_bind]):.3f} s apart, "
            "median), the next gang waits for the later one to end, and the two Bindings and `Running` writes "
            "take longer than the one of a Job: a few hundredths of a second more than the simulated 0.04 s per "
            "gang, added up along each queue of gangs."
        )
    parts.append(_serve_part(runs, rows))
    compression = _row(rows, CASES[-1].key)
    compressed = _row(rows, CASES[1].key)
    if compression is not None and compressed is not None:
        parts.append(
            f"**Compression.** Jobs every 17 s run uncompressed: JCT {compression.real.jct:.2f} s real, "
            f"{compression.simulated.jct:.2f} s simulated ({100 * compression.jct_gap:+.1f} %), against "
            f"{100 * compressed.jct_gap:+.1f} % compressed 4 times: the control plane's fixed delays weigh 4 times "
            "more against the compressed run times, and the simulator models them either way."
        )
    parts.append(_verdict(rows))
    return "**What makes the differences, and how the simulator models them.**\n\n" + "\n\n".join(
        part for part in parts if part
    )


def _verdict(rows: Sequence[FidelityRow]) -> str:
    """Which rows agree within 2 % in mean JCT, which do not."""
    within = [row for row in rows if abs(row.jct_gap) <= 0.02]
    beyond = [row for row in rows if abs(row.jct_gap) > 0.02]
    if not rows:
        return ""

    def name(row: FidelityRow) -> str:
        return f"{row.case.label} under {row.case.real} ({100 * row.jct_gap:+.2f} %)"

    text = f"**Within 2 % in mean JCT**: {len(within)} of {len(rows)} rows."
    if beyond:
        text += " Not: " + "; ".join(name(row) for row in beyond) + " — for the reasons above (5 and 6)."
    return text


def _starving(rows: Sequence[FidelityRow]) -> str:
    """The Jobs-every-17-s case's longest wait, real, under v1.36's queue and under the first model's."""
    row = _row(rows, CASES[1].key)
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


def _real_spread(rows: Sequence[FidelityRow]) -> float:
    """How far the two real runs of the PodGroups case under kube-scheduler are apart, in % of their mean JCT."""
    first, second = _row(rows, CASES[2].key), _row(rows, CASES[3].key)
    if first is None or second is None:
        return float("nan")
    mean = (first.real.jct + second.real.jct) / 2
    return 100 * abs(first.real.jct - second.real.jct) / mean


def _serve_part(runs: dict[str, RealRun], rows: Sequence[FidelityRow]) -> str:
    served = [row for row in rows if row.case.real == "serve"]
    if not served:
        return ""
    gaps = ", ".join(f"{row.case.label}: {100 * row.jct_gap:+.1f} %" for row in served)

    def latencies(run: RealRun) -> list[float]:
        return [j.first_bind - j.submitted for j in run.jobs if j.first_bind is not None]

    first = latencies(runs[served[0].case.key])
    kube = next((runs[r.case.key] for r in rows if r.case.key == CASES[0].key), None)
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
    page = _PAGE.format(
        stamp=stamp("fidelity", "a test checks the page's structure and the driver on a tiny case"),
        machine=_machine(runs),
        table=markdown_table(HEADER, [row.cells() for row in rows]),
        explained=explain(runs, rows),
    )
    return write_page(folder, "fidelity", page)
