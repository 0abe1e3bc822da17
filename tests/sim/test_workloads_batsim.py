import json
from pathlib import Path
from typing import Any

import pytest

from kubeflux.sim.workloads import WorkloadError
from kubeflux.sim.workloads.batsim import DEFAULT_HOST_SPEED, read_batsim
from tests.shared import SHARED

KTH = SHARED / "traces" / "KTH-SP2-1996-2.1-cln.first1000.batsim.json"


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def test_kth_run_times_are_recovered_with_one_gigaflop_hosts() -> None:
    workload = read_batsim(KTH)
    assert DEFAULT_HOST_SPEED == 1e9
    assert len(workload.jobs) == 1000
    assert workload.resources == 96
    assert workload.problems == []
    assert workload.name == "KTH-SP2-1996-2.1-cln"
    assert workload.header["description"] == "1000 jobs from swf job number 15 to 1014 inclusive"
    jobs = {job.id: job for job in workload.jobs}
    # job 20: subtime 5547, walltime 60, res 1, cpu 16e9 flops -> 16 s
    assert (jobs["20"].submit_time, jobs["20"].requested_time, jobs["20"].requested_processors) == (5547, 60, 1)
    assert jobs["20"].run_time == 16.0
    # job 15: cpu 3354800145280 flops -> 3354.80014528 s, within its 53940 s walltime
    assert jobs["15"].run_time == pytest.approx(3354.80014528)
    assert all(not job.rejected and job.exit_code == 0 for job in workload.jobs)


def test_host_speed_scales_run_times() -> None:
    fast = {job.id: job for job in read_batsim(KTH, host_speed=2e9).jobs}
    assert fast["20"].run_time == 8.0


def test_profiles_of_every_supported_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "nb_res": 8,
            "jobs": [
                {"id": 1, "subtime": 0, "walltime": 100, "res": 2, "profile": "d"},
                {"id": "2", "subtime": 5, "res": 4, "profile": "total"},
                {"id": 3, "subtime": 6, "res": 2, "profile": "par"},
                {"id": 4, "subtime": 7, "res": 1, "profile": "fails"},
                {"id": 5, "subtime": 8, "res": 1, "profile": "new-name"},
            ],
            "profiles": {
                "d": {"type": "delay", "delay": 20.25},
                "total": {"type": "parallel_homogeneous_total", "cpu": 8e9, "com": 0},
                "par": {"type": "parallel", "cpu": [1e9, 3e9], "com": [0, 0, 0, 0]},
                "fails": {"type": "delay", "delay": 5, "ret": 2},
                "new-name": {"type": "DelayProfile", "delay": 7},
            },
        },
    )
    workload = read_batsim(path)
    jobs = {job.id: job for job in workload.jobs}
    assert workload.problems == []
    assert (jobs["1"].run_time, jobs["1"].requested_time) == (20.25, 100)
    assert jobs["2"].run_time == 2.0 and jobs["2"].requested_time == -1  # 8 Gflop over 4 hosts of 1 Gflop/s
    assert jobs["3"].run_time == 3.0  # the slowest host
    assert jobs["4"].exit_code == 2 and jobs["4"].run_time == 5
    assert jobs["5"].run_time == 7


def test_bad_jobs_and_profiles_are_reported_and_rejected_not_dropped(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "nb_res": 4,
            "jobs": [
                {"id": "a", "subtime": 0, "res": 1, "profile": "smpi"},
                {"id": "b", "subtime": 1, "res": 1, "profile": "smpi"},
                {"id": "c", "subtime": 2, "res": 1, "profile": "missing"},
                {"id": "d", "subtime": 3, "res": 0, "profile": "ok"},
                {"id": "e", "subtime": "soon", "res": 1, "profile": "ok"},
                {"id": "f", "subtime": 4, "res": 1, "profile": "weird"},
                {"id": "g", "subtime": 5, "res": 1, "profile": "ok"},
            ],
            "profiles": {
                "smpi": {"type": "SequentialCompositionProfile", "seq": ["ok"]},
                "weird": {"type": "quantum"},
                "ok": {"type": "delay", "delay": 1},
            },
        },
    )
    workload = read_batsim(path)
    jobs = {job.id: job for job in workload.jobs}
    assert sorted(jobs) == ["a", "b", "c", "d", "f", "g"]  # e has no usable submit time: skipped
    assert (
        jobs["a"].rejected
        == "profile 'smpi': profile type 'SequentialCompositionProfile' is not supported by the simulator"
    )
    assert jobs["b"].rejected == jobs["a"].rejected
    assert jobs["c"].rejected == "profile 'missing' is not defined in 'profiles'"
    assert jobs["d"].rejected == "res: must be a positive integer, got 0"
    assert jobs["f"].rejected == "profile 'weird': unknown profile type 'quantum'"
    assert not jobs["g"].rejected
    assert workload.problems == [
        "w.json: profiles['smpi']: profile type 'SequentialCompositionProfile' is not supported by the simulator; "
        "jobs using it are rejected",
        "w.json: jobs[2] (id c): profile 'missing' is not defined in 'profiles'; the job is rejected",
        "w.json: jobs[3] (id d): res: must be a positive integer, got 0; the job is rejected",
        "w.json: jobs[4] (id e): subtime: must be a non-negative number, got 'soon'; skipped",
        "w.json: profiles['weird']: unknown profile type 'quantum'; jobs using it are rejected",
    ]


def test_broken_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "nb_res": 4,\n  "jobs": [\n    {"id": 1,,}\n  ]\n}\n')
    with pytest.raises(WorkloadError, match=r"bad.json:4: invalid JSON"):
        read_batsim(path)


def test_json_without_jobs_is_not_a_batsim_workload(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="expected an object with a 'jobs' list"):
        read_batsim(write(tmp_path, {"nb_res": 4}))


def test_profile_names_are_kept_for_jobs_csv() -> None:
    jobs = {job.id: job for job in read_batsim(KTH).jobs}
    assert (jobs["15"].profile, jobs["15"].profile_name(), jobs["20"].profile_name()) == ("15", "15", "20")


@pytest.mark.parametrize(
    ("ret", "says"),
    [
        ("1", "got '1'"),
        (1.5, "got 1.5"),
        (True, "got True"),
        (None, "got None"),
        (2**31, "got 2147483648"),
        (int("9" * 400), "got 9999999999999999999999999999999999999999… (400 characters)"),
    ],
    ids=["string", "fraction", "bool", "null", "beyond-int", "400-digits"],
)
def test_a_profiles_ret_that_is_no_exit_code_rejects_its_jobs_by_name(tmp_path: Path, ret: object, says: str) -> None:
    path = write(
        tmp_path,
        {
            "nb_res": 4,
            "jobs": [
                {"id": 1, "subtime": 0, "res": 1, "profile": "p"},
                {"id": 2, "subtime": 0, "res": 1, "profile": "ok"},
            ],
            "profiles": {
                "p": {"type": "delay", "delay": 5, "ret": ret},
                "ok": {"type": "delay", "delay": 5, "ret": -1},
            },
        },
    )
    workload = read_batsim(path)
    assert workload.problems == [
        f"w.json: profiles['p']: 'ret' must be an integer exit code (Batsim reads an int), {says}; jobs using it are "
        "rejected"
    ]
    jobs = {job.id: job for job in workload.jobs}
    assert jobs["1"].rejected and not jobs["2"].rejected and jobs["2"].exit_code == -1


@pytest.mark.parametrize(
    ("field", "written", "says"),
    [
        ("subtime", "1e400", "w.json: jobs[0] (id 1): subtime: must be a non-negative number, got 1e400; skipped"),
        (
            "subtime",
            "-Infinity",
            "w.json: jobs[0] (id 1): subtime: must be a non-negative number, got -Infinity; skipped",
        ),
        ("subtime", "NaN", "w.json: jobs[0] (id 1): subtime: must be a non-negative number, got NaN; skipped"),
        (
            "walltime",
            "1e999",
            "w.json: jobs[0] (id 1): walltime: must be a number of at most 3,153,600,000 s, got 1e999; the job is "
            "rejected",
        ),
        (
            "delay",
            "1" + "0" * 60 + "e400",
            "w.json: profiles['p']: delay: must be a number of seconds from 0 to 3,153,600,000 (100 years), got "
            "1000000000000000000000000000000000000000… (65 characters); jobs using it are rejected",
        ),
        (  # it said "'delay' must be a non-negative number", which 1e400 is
            "delay",
            "1e400",
            "w.json: profiles['p']: delay: must be a number of seconds from 0 to 3,153,600,000 (100 years), got "
            "1e400; jobs using it are rejected",
        ),
        (
            "delay",
            "-Infinity",
            "w.json: profiles['p']: delay: must be a number of seconds from 0 to 3,153,600,000 (100 years), got "
            "-Infinity; jobs using it are rejected",
        ),
    ],
    ids=[
        "subtime-1e400",
        "subtime-minus-infinity",
        "subtime-nan",
        "walltime-1e999",
        "delay-65-characters",
        "delay-1e400",
        "delay-minus-infinity",
    ],
)
def test_a_number_beyond_any_float_is_said_as_the_file_writes_it(
    tmp_path: Path, field: str, written: str, says: str
) -> None:
    """JSON's ``1e400`` reads as ``inf`` in Python: the message says ``1e400``, what the user wrote (cut when long)."""
    job = {"id": 1, "subtime": 0, "res": 1, "profile": "p", "walltime": 10}
    profile = {"type": "delay", "delay": 5}
    (job if field != "delay" else profile)[field] = "@"
    text = json.dumps({"nb_res": 4, "jobs": [job], "profiles": {"p": profile}}).replace('"@"', written)
    path = tmp_path / "w.json"
    path.write_text(text)
    assert read_batsim(path).problems == [says]
