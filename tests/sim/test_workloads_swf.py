import gzip
import shutil
from pathlib import Path

import pytest

from kubeflux.sim.workloads import JobKind, WorkloadError
from kubeflux.sim.workloads.swf import CANCELLED_EXIT_CODE, FAILED_EXIT_CODE, SWF_FIELDS, SwfReader, read_swf
from tests.shared import SHARED

TRACES = SHARED / "traces"
HPC2N = TRACES / "HPC2N-2002-2.2.first3170.swf"
LCG = TRACES / "LCG-2005-1.swf.gz"


def line(*fields: object) -> str:
    return " ".join(str(f) for f in fields) + "\n"


def job_line(
    number: int, submit: float = 0, run: float = 100, procs: int = 4, req_procs: int = 4, status: int = 1
) -> str:
    return line(number, submit, -1, run, procs, -1, -1, req_procs, 200, -1, status, 1, 1, -1, 1, 1, -1, -1)


def test_hpc2n_trace_jobs_have_the_swf_fields_as_documented() -> None:
    workload = read_swf(HPC2N)
    assert len(workload.jobs) == 3170
    assert workload.problems == []
    assert workload.resources == 240  # MaxProcs
    assert workload.name == "HPC2N-2002-2.2.first3170"
    assert workload.header["UnixStartTime"] == "1027839845"
    assert workload.header["Partition"] == "1 DEFAULT\n2 ALL"  # a repeated key keeps every value
    first = workload.jobs[0]
    # "1  0 308434  31405  30  31405  -1  30  37980  -1  1 ..."
    assert (first.id, first.name, first.kind) == ("1", "job-1", JobKind.TRACE)
    assert (first.submit_time, first.run_time, first.requested_processors, first.requested_time) == (
        0.0,
        31405.0,
        30,
        37980.0,
    )
    assert first.source == "HPC2N-2002-2.2.first3170.swf:24"
    assert first.rejected == "" and first.exit_code == 0


def test_hpc2n_jobs_with_unknown_run_time_are_kept_rejected() -> None:
    workload = read_swf(HPC2N)
    rejected = [job for job in workload.jobs if job.rejected]
    assert len(rejected) == 25  # the 25 lines whose field 4 is -1
    job16 = next(job for job in workload.jobs if job.id == "16")
    assert job16.rejected == "unknown run time (SWF field 4 is -1)"
    assert job16.run_time is None and job16.requested_processors == 8


def test_lcg_parses_all_its_jobs() -> None:
    # Its parse speed is a figure of benchmarks/simulate.py, not a timed test.
    workload = read_swf(LCG)
    assert len(workload.jobs) == 188_041
    assert workload.resources == 24515
    assert all(job.requested_processors == 1 for job in workload.jobs)
    second = workload.jobs[1]  # "2  3  -1  3611  1  -1 -1  -1  116400 ..." (field 8 is -1: field 5 is used)
    assert (second.submit_time, second.run_time, second.requested_time) == (3.0, 3611.0, 116400.0)
    assert "#" not in workload.header["Partition"]  # the column legend line is not a header value


def test_gzip_is_detected_by_content_and_records_carry_all_18_fields(tmp_path: Path) -> None:
    packed = tmp_path / "hpc2n-copy.swf.gz"
    with HPC2N.open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert len(read_swf(packed).jobs) == 3170
    record = next(SwfReader(packed).records())
    assert len(record) == len(SWF_FIELDS) + 1  # the 18 fields and the line number
    assert record.wait_time == 308434 and record.average_cpu_time == 31405 and record.status == 1
    assert record.line == 24


def test_status_and_processor_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.swf"
    path.write_text(
        "; MaxProcs: 64\n"
        + job_line(1, status=0)  # failed: runs, then fails
        + job_line(2, status=5)  # cancelled while running
        + job_line(3, procs=6, req_procs=-1)  # requested unknown: allocated is used
        + job_line(4, procs=-1, req_procs=-1)  # no processor count at all
        + job_line(5, run=0)  # zero run time is a valid job
        + job_line(6, run=-1, status=5)  # cancelled before it started
    )
    jobs = {job.id: job for job in read_swf(path).jobs}
    assert jobs["1"].exit_code == FAILED_EXIT_CODE and not jobs["1"].rejected
    assert jobs["2"].exit_code == CANCELLED_EXIT_CODE and jobs["2"].run_time == 100
    assert jobs["3"].requested_processors == 6
    assert jobs["4"].rejected == "unknown processor count (SWF fields 8 and 5)"
    assert jobs["5"].run_time == 0 and not jobs["5"].rejected
    assert jobs["6"].rejected.startswith("unknown run time")


def test_every_bad_line_is_reported_with_its_line_number_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "broken.swf"
    path.write_text(
        "; Version: 2.2\n"  # line 1
        + job_line(1)  # 2 good
        + "2 10 -1 100 4 -1 -1 4 200 -1 1 1 1 -1 1 1 -1\n"  # 3: 17 fields
        + "3 20 -1 abc 4 -1 -1 4 200 -1 1 1 1 -1 1 1 -1 -1\n"  # 4: run time not a number
        + "\n"  # 5: blank lines are fine
        + job_line(1, submit=30)  # 6: repeated job number
        + job_line(4, submit=-1)  # 7: unknown submit time
        + "5 50 -1 100 4 -1 -1 4 200 -1 1 1 1 x 1 1 -1 -1\n"  # 8: executable not a number
        + "6 60 -1 100 4.5 -1 -1 4 200 -1 1 1 1 -1 1 1 -1 -1\n"  # 9: fractional processor count
        + job_line(7, submit=70)  # 10 good
    )
    workload = read_swf(path)
    assert [job.id for job in workload.jobs] == ["1", "7"]
    assert workload.problems == [
        "broken.swf:3: expected 18 fields, found 17",
        "broken.swf:4: field 4 (run_time) is not a number: 'abc'",
        "broken.swf:6: job number 1 appears twice",
        "broken.swf:7: unknown submit time (field 2 is -1)",
        "broken.swf:8: field 14 (executable) is not a number: 'x'",
        "broken.swf:9: field 5 (allocated_processors) must be a whole number, got '4.5'",
    ]


def test_limit_keeps_a_prefix_of_the_log() -> None:
    workload = read_swf(HPC2N, limit=500)
    assert len(workload.jobs) == 500
    assert workload.jobs[-1].id == read_swf(HPC2N).jobs[499].id


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"nope\.swf: cannot read"):
        read_swf(tmp_path / "nope.swf")


def test_profiles_are_named_as_batsims_swf_converters_name_them(tmp_path: Path) -> None:
    """``swf_to_batsim_workload_delay.py``: profile ``int((run_time // 1 + 1) * 1)``, so a 100 s job is ``"101"``."""
    path = tmp_path / "p.swf"
    path.write_text(job_line(1, run=100) + job_line(2, run=0) + job_line(3, run=59.7) + job_line(4, run=-1))
    jobs = read_swf(path).jobs
    assert [job.profile_name() for job in jobs] == ["101", "1", "60", ""]  # unknown run time: rejected, no profile
    assert read_swf(HPC2N).jobs[0].profile_name() == "31406"  # run time 31405 s


def test_a_bare_semicolon_ends_a_header_continuation(tmp_path: Path) -> None:
    # examples/workloads/small.swf: "; MaxProcs: 64", ";", ";  job submit wait …" — the column legend after the
    # bare ";" was appended to MaxProcs, which then read as stated twice, and the platform fell back to 4 x 1 core.
    workload = read_swf(Path(__file__).parents[2] / "examples" / "workloads" / "small.swf")
    assert workload.header["MaxProcs"] == "64"
    assert workload.resources == 64
    path = tmp_path / "legend.swf"
    path.write_text(
        "; Information: http://a.example/\n;   http://b.example/\n;\n;  job submit wait\n"
        + "1 0 -1 10 1 -1 -1 1 20 -1 1 1 1 -1 1 1 -1 -1\n"
    )
    assert read_swf(path).header["Information"] == "http://a.example/\nhttp://b.example/"
