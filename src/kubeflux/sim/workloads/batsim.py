"""Batsim workload JSON reader (``nb_res``, ``jobs``, ``profiles``), Batsim v2–v5 profile names.

How a Batsim job becomes a trace :class:`~kubeflux.sim.workloads.model.WorkloadJob`:

* **id** is the job's ``id`` (a string or a number, kept as written, e.g. ``"15"``), **name** ``job-<id>``;
  **submit_time** is ``subtime`` (seconds, not shifted); **processors** is ``res``; **requested_time** is
  ``walltime`` (``-1`` when absent); **profile** is the job's ``profile`` name (``jobs.csv``'s ``profile``, as
  Batsim writes it). Batsim kills a job that reaches its walltime; so does the simulator.
* **run time** comes from the job's profile:

  - ``delay`` / ``DelayProfile``: ``delay`` seconds;
  - ``parallel_homogeneous`` / ``ParallelTaskHomogeneousProfile``: ``cpu`` flops on each host, so
    ``cpu / host_speed`` seconds;
  - ``parallel_homogeneous_total`` / ``ParallelTaskHomogeneousTotalProfile``: ``cpu`` flops spread over the
    ``res`` hosts: ``cpu / (res × host_speed)``;
  - ``parallel`` / ``ParallelTaskProfile``: a ``cpu`` list, one amount per host: ``max(cpu) / host_speed``.

  Communication (``com``) and burst-buffer (``bb``) amounts are ignored: the simulator has no network model.
* **host_speed** defaults to :data:`DEFAULT_HOST_SPEED` = 1 Gflop/s (1e9 flop/s). That is the speed the
  shared KTH-SP2 workload (``KTH-SP2-1996-2.1-cln.first1000.batsim.json``) was generated with: its generator
  (Burst-Buffer-Scheduling ``generate_swf_workload.py``, platform ``cpu_speed: 1`` GFLOPS) wrote
  ``cpu = run_time × 1e9``, so dividing by 1e9 recovers the SWF run times (e.g. job 20: 16e9 flops → 16 s).
  Pass the ``speed`` of your SimGrid platform's hosts when a workload was written for another platform.
* A profile's ``ret`` other than 0 makes the job fail after its run time (pods exit with that code, the job ends
  ``COMPLETED_FAILED``), as in Batsim; a ``ret`` that is no integer (or beyond Batsim's ``int``) makes the profile
  bad, as any other unusable field.
* Numbers are said in messages as the file writes them (``1e400``, not the ``inf`` it reads as), long ones cut.
* A job whose profile is missing, of an unknown or unsupported type (``SequentialCompositionProfile``, SMPI
  traces …), or with an unusable field is **kept** with ``rejected`` set and the reason added to
  ``Workload.problems`` (``file: jobs[i] (id …): what``); each bad profile is reported once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.limits import MAX_SECONDS, echo, seconds_problem
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob
from kubeflux.sim.workloads.swf import read_text, workload_name

DEFAULT_HOST_SPEED = 1e9
"""Flop/s of one host; 1 Gflop/s recovers the run times of the shared KTH-SP2 workload."""

_DELAY = frozenset({"delay", "DelayProfile"})
_HOMOGENEOUS = frozenset({"parallel_homogeneous", "ParallelTaskHomogeneousProfile"})
_HOMOGENEOUS_TOTAL = frozenset({"parallel_homogeneous_total", "ParallelTaskHomogeneousTotalProfile"})
_PARALLEL = frozenset({"parallel", "ParallelTaskProfile"})
_UNSUPPORTED = frozenset(
    {
        "composed",
        "SequentialCompositionProfile",
        "parallel_homogeneous_pfs",
        "ParallelTaskOnStorageHomogeneousProfile",
        "data_staging",
        "ParallelTaskDataStagingBetweenStoragesProfile",
        "smpi",
        "TraceReplayProfile",
        "usage_trace",
        "scheduler_send",
        "scheduler_recv",
        "send",
        "recv",
    }
)


def _number(value: Any) -> float | None:
    """A finite JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    result = float(value)
    return result if math.isfinite(result) else None


def profile_run_time(profile: Any, res: int, host_speed: float) -> tuple[float | None, str]:
    """``(run time in seconds, "")`` for a supported profile, or ``(None, why not)``; a run time beyond
    :data:`~kubeflux.sim.workloads.limits.MAX_SECONDS` is a why not."""
    if isinstance(profile, dict):
        ret = profile.get("ret", 0)
        if isinstance(ret, bool) or not isinstance(ret, int) or not -(2**31) <= ret < 2**31:
            return None, f"'ret' must be an integer exit code (Batsim reads an int), got {echo(ret)}"
    run_time, why = _profile_run_time(profile, res, host_speed)
    if run_time is not None and run_time > MAX_SECONDS:
        return None, f"the run time it gives ({run_time:g} s) is beyond {MAX_SECONDS:,} s (100 years)"
    return run_time, why


def _profile_run_time(profile: Any, res: int, host_speed: float) -> tuple[float | None, str]:
    if not isinstance(profile, dict):
        return None, "profile is not a JSON object"
    kind = profile.get("type")
    if kind in _DELAY:
        delay = _number(profile.get("delay"))
        if delay is None or not 0 <= delay <= MAX_SECONDS:  # 1e400 reads as inf: said as the file writes it
            limits = f"a number of seconds from 0 to {MAX_SECONDS:,} (100 years)"
            return None, f"delay: must be {limits}, got {echo(profile.get('delay'))}"
        return delay, ""
    if kind in _HOMOGENEOUS or kind in _HOMOGENEOUS_TOTAL:
        cpu = _number(profile.get("cpu"))
        if cpu is None or cpu < 0:
            return None, f"cpu: must be a finite, non-negative number of flops, got {echo(profile.get('cpu'))}"
        hosts = max(res, 1) if kind in _HOMOGENEOUS_TOTAL else 1
        return cpu / (hosts * host_speed), ""
    if kind in _PARALLEL:
        cpus = profile.get("cpu")
        amounts = [_number(c) for c in cpus] if isinstance(cpus, list) else []
        if not amounts or any(a is None or a < 0 for a in amounts):
            return None, f"cpu: must be a non-empty list of finite, non-negative numbers of flops, got {echo(cpus)}"
        return max(a for a in amounts if a is not None) / host_speed, ""
    if kind in _UNSUPPORTED:
        return None, f"profile type {echo(kind)} is not supported by the simulator"
    return None, f"unknown profile type {echo(kind)}"


class _Written(float):
    """A JSON number that reads as no finite float (``1e400`` reads as ``inf``; ``NaN``, ``Infinity``), kept with
    the text it was written as, so that a message says what the file says."""

    def __new__(cls, text: str) -> _Written:
        number = super().__new__(cls, text)
        number.text = text
        return number

    text: str

    def __repr__(self) -> str:
        return self.text


def _json_float(text: str) -> float:
    number = float(text)
    return number if math.isfinite(number) else _Written(text)


def _load_json(path: Path) -> Any:
    text = read_text(path)  # plain or gzip-compressed
    try:
        return json.loads(text, parse_float=_json_float, parse_constant=_Written)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{path.name}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError as exc:
        raise WorkloadError(f"{path.name}: invalid JSON: nested too deeply") from exc
    except ValueError as exc:  # Python's limit on integer digits (its message tells a programmer what to call)
        raise WorkloadError(f"{path.name}: invalid JSON: an integer of more than 4,300 digits") from exc


def read_batsim(path: Path | str, *, host_speed: float = DEFAULT_HOST_SPEED, name: str | None = None) -> Workload:
    """Read a Batsim workload JSON file into trace jobs (rules in the module docstring).

    Raises :class:`WorkloadError` when the file is not JSON or lacks the ``jobs`` list; a bad job or profile only
    rejects that job and adds a problem.
    """
    path = Path(path)
    if host_speed <= 0:
        raise ValueError(f"host speed must be positive, got {host_speed}")
    data = _load_json(path)
    file_name = path.name
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise WorkloadError(f"{file_name}: not a Batsim workload: expected an object with a 'jobs' list")
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise WorkloadError(f"{file_name}: 'profiles' must be an object mapping names to profiles")
    nb_res = data.get("nb_res")
    problems: list[str] = []
    if nb_res is not None and (isinstance(nb_res, bool) or not isinstance(nb_res, int) or nb_res <= 0):
        problems.append(f"{file_name}: nb_res: must be a positive integer, got {echo(nb_res)}")
        nb_res = None

    run_times: dict[str, tuple[float | None, str]] = {}
    reported_profiles: set[str] = set()
    jobs: list[WorkloadJob] = []
    seen: set[str] = set()
    skipped = 0
    for index, raw in enumerate(data["jobs"]):
        where = f"{file_name}: jobs[{index}]"
        if not isinstance(raw, dict):
            problems.append(f"{where}: not a JSON object; skipped")
            skipped += 1
            continue
        job_id = raw.get("id")
        if isinstance(job_id, bool) or not isinstance(job_id, str | int) or str(job_id) == "":
            problems.append(f"{where}: id: must be a string or an integer, got {echo(job_id)}; skipped")
            skipped += 1
            continue
        job_id = str(job_id)
        where = f"{where} (id {job_id})"
        if job_id in seen:
            problems.append(f"{where}: id appears twice; skipped")
            skipped += 1
            continue
        subtime = _number(raw.get("subtime"))
        why = "must be a non-negative number" if subtime is None else seconds_problem(subtime)
        if subtime is None or why is not None:
            why = (why or "").split(", got")[0]
            problems.append(f"{where}: subtime: {why}, got {echo(raw.get('subtime'))}; skipped")
            skipped += 1
            continue
        seen.add(job_id)
        rejected = ""
        res = raw.get("res")
        if isinstance(res, bool) or not isinstance(res, int) or res <= 0:
            rejected = f"res: must be a positive integer, got {echo(res)}"
            res = 0
        walltime = _number(raw.get("walltime", -1))
        if walltime is None or walltime > MAX_SECONDS:
            rejected = (
                rejected or f"walltime: must be a number of at most {MAX_SECONDS:,} s, got {echo(raw.get('walltime'))}"
            )
            walltime = -1.0
        profile_name = raw.get("profile")
        run_time: float | None = None
        exit_code = 0
        bad_profile = False
        if not rejected:
            if not isinstance(profile_name, str) or profile_name not in profiles:
                rejected = f"profile {echo(profile_name)} is not defined in 'profiles'"
            else:
                profile = profiles[profile_name]
                key = f"{profile_name}@{res}"
                if key not in run_times:
                    run_times[key] = profile_run_time(profile, res, host_speed)
                run_time, why = run_times[key]
                if run_time is None:
                    bad_profile = True
                    if profile_name not in reported_profiles:  # one problem per bad profile, not per job
                        reported_profiles.add(profile_name)
                        problems.append(
                            f"{file_name}: profiles[{echo(profile_name)}]: {why}; jobs using it are rejected"
                        )
                    rejected = f"profile {echo(profile_name)}: {why}"
                else:
                    exit_code = profile.get("ret", 0)  # an int: profile_run_time refuses the profile otherwise
        if rejected and not bad_profile:
            problems.append(f"{where}: {rejected}; the job is rejected")
        jobs.append(
            WorkloadJob(
                id=job_id,
                submit_time=subtime,
                kind=JobKind.TRACE,
                name=f"job-{job_id}",
                requested_processors=res,
                requested_time=walltime if walltime > 0 else -1.0,
                run_time=run_time,
                rejected=rejected,
                exit_code=exit_code,
                source=f"{file_name}: jobs[{index}]",
                profile=profile_name if isinstance(profile_name, str) else "",
            )
        )
    header = {key: str(data[key]) for key in ("name", "description", "version") if key in data}
    return Workload(
        name=name or str(data.get("name") or workload_name(path)),
        jobs=jobs,
        resources=nb_res,
        problems=problems,
        header=header,
        skipped=skipped,
    )


__all__ = ["DEFAULT_HOST_SPEED", "profile_run_time", "read_batsim"]
