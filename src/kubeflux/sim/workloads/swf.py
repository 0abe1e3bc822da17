"""Standard Workload Format (SWF 2.2, Parallel Workloads Archive) reader, plain or gzip-compressed.

An SWF file is a header of ``; Key: value`` lines followed by one line per job of 18 whitespace-separated
numbers, ``-1`` meaning unknown (see :data:`SWF_FIELDS`). The reader streams the file line by line (the LCG log's
188,041 jobs parse in well under a second) and never stops at a bad line.

How a line becomes a :class:`~kubeflux.sim.workloads.model.WorkloadJob` (kind ``trace``):

* **id** is the job number (field 1), **name** ``job-<number>``; **submit_time** is field 2 as written (seconds
  from the log's ``UnixStartTime``; not shifted to start at 0).
* **processors**: field 8 (requested processors); when it is ``-1`` (or 0), field 5 (allocated processors).
* **run_time**: field 4, seconds the job ran. A run time of 0 is kept (the job ends as soon as it starts).
* **requested_time**: field 9 (the user's walltime estimate), ``-1`` when unknown.
* **status** (field 11): ``1`` completed, ``-1`` unknown (LCG) and ``2``/``3``/``4`` (partial records of
  checkpointed or swapped jobs) replay as successful jobs. ``0`` (failed) and ``5`` (cancelled) jobs consumed
  their processors for their run time in the real system, so they are replayed for their run time and then fail:
  their pods exit with :data:`FAILED_EXIT_CODE` (1) or :data:`CANCELLED_EXIT_CODE` (143, killed by SIGTERM) and
  the job ends ``COMPLETED_FAILED``. (Batsim's converters instead make them plain delay jobs that succeed; we keep
  the failure visible in ``jobs.csv``.) A job cancelled before it started has run time ``-1`` and is rejected
  by the next rule.
* **user** (field 12, the user id; ``-1`` unknown): kept on the job (``simulate --user-queues`` maps users to
  Kueue LocalQueues: :mod:`~kubeflux.sim.workloads.tenants`).
* A job whose run time is unknown or negative, or whose processor count is unknown in both fields 8 and 5, is
  **kept** with :attr:`~kubeflux.sim.workloads.model.WorkloadJob.rejected` set: it appears as ``REJECTED`` in
  ``jobs.csv``, never silently dropped.
* A **malformed** line (not 18 fields, a field that is not a finite number, an unknown submit time, a submit,
  run or requested time beyond :data:`~kubeflux.sim.workloads.limits.MAX_SECONDS` (100 years), a repeated job
  number) cannot be replayed at all: it is reported in
  :attr:`~kubeflux.sim.workloads.model.Workload.problems` as ``file:line: what is wrong`` and skipped.

:func:`kubeflux.sim.workloads.mapping.map_to_cluster` then turns the processors into pods on a concrete cluster.
"""

from __future__ import annotations

import gc
import gzip
import io
import math
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, TextIO

from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.limits import MAX_SECONDS, ReadBudget, echo, parse_number, seconds_problem
from kubeflux.sim.workloads.model import JobKind, Workload, WorkloadJob
from kubeflux.sim.workloads.platform import header_count, header_problems

SWF_FIELDS: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
"""The 18 SWF fields in file order (field *n* of the SWF definition is ``SWF_FIELDS[n - 1]``)."""

FAILED_EXIT_CODE = 1
"""Exit code given to the pods of a job whose SWF status is 0 (failed)."""
CANCELLED_EXIT_CODE = 143
"""Exit code given to the pods of a job whose SWF status is 5 (cancelled after it started): 128 + SIGTERM."""

_GZIP_MAGIC = b"\x1f\x8b"
_HEADER_KEY = re.compile(r";\s?([A-Za-z][\w-]*):(?!//)\s*(.*)$")
_INT_FIELDS = (0, 4, 7, 10, 11, 12, 13, 14, 15, 16)
_NOT_NUMERIC = re.compile(r"[^0-9eE+\-.\s]").search


class SwfRecord(NamedTuple):
    """One SWF job line with its 18 fields (units as in the SWF definition; -1 is unknown) and its line number."""

    job_number: int
    submit_time: float
    wait_time: float
    run_time: float
    allocated_processors: int
    average_cpu_time: float
    used_memory: float
    """KB per processor."""
    requested_processors: int
    requested_time: float
    requested_memory: float
    """KB per processor."""
    status: int
    user_id: int
    group_id: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float
    line: int


def _read_lines(stream: TextIO, path: Path) -> Iterator[tuple[int, str]]:
    """``enumerate(stream, start=1)``, with a read error (a truncated or corrupt gzip stream, an I/O error) raised
    as a :class:`WorkloadError` naming the file and the line it stopped at."""
    lineno = 0
    try:
        for lineno, line in enumerate(stream, start=1):
            yield lineno, line
    except (OSError, EOFError, zlib.error) as exc:
        raise WorkloadError(
            f"{path}: cannot read beyond line {lineno}: {exc} (is the file truncated or corrupt?)"
        ) from exc


def open_text(path: Path) -> TextIO:
    """Open ``path`` for reading text, gunzipping it when it starts with the gzip magic number (whatever its name).

    Raises :class:`WorkloadError` when the file cannot be opened.
    """
    try:
        with path.open("rb") as probe:
            magic = probe.read(2)
        if magic == _GZIP_MAGIC:
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", errors="replace")
        return path.open(encoding="utf-8-sig", errors="replace")  # -sig: a byte order mark is no text
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def read_text(path: Path) -> str:
    """The whole text of ``path``, plain or gzip-compressed (:func:`open_text`).

    Raises :class:`WorkloadError` when the file cannot be read, or ends early (a truncated or corrupt gzip file).
    """
    try:
        with open_text(path) as stream:
            return stream.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise WorkloadError(f"{path}: cannot read: {exc} (is the file truncated or corrupt?)") from exc


def _bad_field(parts: list[str]) -> str:
    """The message for a line whose fields did not all convert (slow path: only for bad lines)."""
    for index, text in enumerate(parts):
        try:
            value = parse_number(text)
        except ValueError:
            return f"field {index + 1} ({SWF_FIELDS[index]}) is not a number: {echo(text)}"
        if not math.isfinite(value):
            return f"field {index + 1} ({SWF_FIELDS[index]}) must be a finite number, got {echo(text)}"
        if index in _INT_FIELDS and value != int(value):
            return f"field {index + 1} ({SWF_FIELDS[index]}) must be a whole number, got {echo(text)}"
    return "unreadable line"  # pragma: no cover - only reached if conversion rules change


class SwfReader:
    """Streams an SWF file: :meth:`records` yields good lines; :attr:`header` and :attr:`problems` fill as it reads.

    ``problems`` holds one ``file:line: what is wrong`` string per malformed line (the line is skipped).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.header: dict[str, str] = {}
        self.problems: list[str] = []

    def _header_line(self, line: str, last_key: str | None) -> str | None:
        match = _HEADER_KEY.match(line)
        if match is not None:
            key, value = match.group(1), match.group(2).strip()
            previous = self.header.get(key)
            self.header[key] = value if previous is None else f"{previous}\n{value}"
            return key
        text = line[1:].strip()
        if not text:  # a bare ";" ends the header's values: a legend after it ("; job submit wait …") is no value
            return None
        if text.startswith("#"):  # a column legend such as ";  #  sub  runtime  cpus", not a value
            return None
        if text and last_key is not None:  # a continuation line (e.g. a second Information URL)
            self.header[last_key] = f"{self.header[last_key]}\n{text}"
        return last_key

    def lines(self) -> Iterator[tuple[int, str, list[str]]]:
        """Yield ``(line number, line, fields)`` for every job line with 18 fields; header lines fill
        :attr:`header`; lines with another field count are recorded in :attr:`problems`."""
        name = self.path.name
        last_key: str | None = None
        problems = self.problems
        with open_text(self.path) as stream:
            for lineno, line in _read_lines(stream, self.path):
                parts = line.split()
                if not parts:
                    continue
                if parts[0][0] == ";":
                    last_key = self._header_line(line.strip(), last_key)
                    continue
                if len(parts) != 18:
                    problems.append(f"{name}:{lineno}: expected 18 fields, found {len(parts)}")
                    continue
                yield lineno, line, parts

    def convert(self, lineno: int, parts: list[str]) -> SwfRecord | None:
        """All 18 fields of one line, or None (and a problem recorded) when one is not a number."""
        try:
            v = [parse_number(x) for x in parts]
            if not all(map(math.isfinite, v)) or any(v[i] != int(v[i]) for i in _INT_FIELDS):
                raise ValueError
        except (ValueError, OverflowError):
            self.problems.append(f"{self.path.name}:{lineno}: {_bad_field(parts)}")
            return None
        ints = [int(x) for x in v]
        return SwfRecord(
            ints[0], v[1], v[2], v[3], ints[4], v[5], v[6], ints[7], v[8], v[9], ints[10], ints[11], ints[12],
            ints[13], ints[14], ints[15], ints[16], v[17], lineno,
        )  # fmt: skip

    def records(self) -> Iterator[SwfRecord]:
        """Yield every well-formed job line with all 18 fields converted."""
        for lineno, _, parts in self.lines():
            record = self.convert(lineno, parts)
            if record is not None:
                yield record


def job_from_record(record: SwfRecord, source: str) -> WorkloadJob:
    """The trace job for one SWF line, following the rules in the module docstring."""
    return _job(
        record.job_number,
        record.submit_time,
        record.run_time,
        record.allocated_processors,
        record.requested_processors,
        record.requested_time,
        record.status,
        record.user_id,
        source,
    )


def _job(
    number: int,
    submit: float,
    run: float,
    allocated: int,
    requested: int,
    requested_time: float,
    status: int,
    user: int,
    source: str,
) -> WorkloadJob:
    processors = requested if requested > 0 else allocated
    rejected = ""
    if run < 0:
        rejected = "unknown run time (SWF field 4 is -1)" if run == -1 else "negative run time"
    elif processors <= 0:
        rejected = "unknown processor count (SWF fields 8 and 5)"
    return WorkloadJob(
        id=str(number),
        submit_time=submit,
        kind=JobKind.TRACE,
        name=f"job-{number}",
        requested_processors=processors if processors > 0 else 0,
        requested_time=requested_time if requested_time > 0 else -1.0,
        run_time=run if run >= 0 else None,
        rejected=rejected,
        exit_code=FAILED_EXIT_CODE if status == 0 else CANCELLED_EXIT_CODE if status == 5 else 0,
        source=source,
        user=str(user) if user >= 0 else "",
    )


def _time_problem(parts: list[str], submit: float, run: float, requested_time: float) -> str:
    """The message for a line whose submit, run or requested time is out of range (:mod:`.limits`); a negative
    run or requested time is no problem here (unknown: the job is rejected, or has no walltime)."""
    for index, value in ((1, submit), (3, run), (8, requested_time)):
        problem = seconds_problem(value if index == 1 else abs(value))
        if problem is not None:
            return f"field {index + 1} ({SWF_FIELDS[index]}) {problem.split(', got')[0]}, got {echo(parts[index])}"
    return "a time is out of range"  # pragma: no cover - the caller checked that one is


def _machine_size(header: dict[str, str]) -> int | None:
    return header_count(header, "MaxProcs")[0] or header_count(header, "MaxNodes")[0]


def workload_name(path: Path) -> str:
    """``HPC2N-2002-2.2.swf.gz`` → ``HPC2N-2002-2.2``."""
    name = path.name
    for suffix in (".gz", ".swf", ".json", ".yaml", ".yml"):
        name = name.removesuffix(suffix)
    return name


def read_swf(
    path: Path | str, *, limit: int | None = None, name: str | None = None, budget: ReadBudget | None = None
) -> Workload:
    """Read an SWF (or ``.swf.gz``) file into a workload of trace jobs.

    ``limit`` keeps only the first ``limit`` job lines that parse (a prefix of the log, e.g. 500 jobs of HPC2N).
    ``Workload.resources`` is the header's ``MaxProcs`` (else ``MaxNodes``). Raises :class:`WorkloadError` when
    the file cannot be opened or read, and when it has more jobs than ``budget`` allows (reading stops at the first
    one beyond: :class:`~kubeflux.sim.workloads.limits.ReadBudget`); bad lines end up in ``problems``.
    """
    path = Path(path)
    reader = SwfReader(path)
    jobs: list[WorkloadJob] = []
    allowed = None if budget is None else budget.max_jobs
    stop = limit if allowed is None or (limit is not None and limit <= allowed) else allowed + 1
    gc_was_enabled = gc.isenabled()
    gc.disable()  # 188k small objects and no cycles: the collector would only rescan them (about a third of the time)
    try:
        _read_jobs(reader, jobs, stop)
    finally:
        if gc_was_enabled:
            gc.enable()
    if budget is not None and allowed is not None and len(jobs) > allowed:
        raise WorkloadError(budget.refusal(path, len(jobs), f"line {jobs[-1].source.rpartition(':')[2]}"))
    skipped = len(reader.problems)
    reader.problems.extend(header_problems(reader.header, path.name))  # named, not taken as "no platform"
    return Workload(
        name=name or workload_name(path),
        jobs=jobs,
        resources=_machine_size(reader.header),
        problems=reader.problems,
        header=reader.header,
        skipped=skipped,
    )


def _read_jobs(reader: SwfReader, jobs: list[WorkloadJob], limit: int | None) -> None:
    seen: set[int] = set()
    file_name = reader.path.name
    problems = reader.problems
    for lineno, line, parts in reader.lines():
        # Fast path: convert only the fields a job needs; a cheap character check stands in for converting the
        # other eleven (any line it flags goes through the full conversion, which names the bad field).
        try:
            if _NOT_NUMERIC(line) is not None or "e" in line or "E" in line:
                raise ValueError  # letters, or an exponent that may overflow: convert (and check) all 18 fields
            number = int(parts[0])
            submit = float(parts[1])
            run = float(parts[3])
            allocated = int(parts[4])
            requested = int(parts[7])
            requested_time = float(parts[8])
            status = int(parts[10])
            user = int(parts[11])
        except ValueError:
            record = reader.convert(lineno, parts)
            if record is None:
                continue
            number, submit, run = record.job_number, record.submit_time, record.run_time
            allocated, requested = record.allocated_processors, record.requested_processors
            requested_time, status, user = record.requested_time, record.status, record.user_id
        if submit < 0:
            problems.append(f"{file_name}:{lineno}: unknown submit time (field 2 is {submit:g})")
            continue
        if not (
            submit <= MAX_SECONDS
            and -MAX_SECONDS <= run <= MAX_SECONDS
            and -MAX_SECONDS <= requested_time <= MAX_SECONDS
        ):
            problems.append(f"{file_name}:{lineno}: {_time_problem(parts, submit, run, requested_time)}")
            continue
        if number in seen:
            problems.append(f"{file_name}:{lineno}: job number {number} appears twice")
            continue
        seen.add(number)
        source = f"{file_name}:{lineno}"
        jobs.append(_job(number, submit, run, allocated, requested, requested_time, status, user, source))
        if limit is not None and len(jobs) >= limit:
            break


__all__ = [
    "CANCELLED_EXIT_CODE",
    "FAILED_EXIT_CODE",
    "SWF_FIELDS",
    "SwfReader",
    "SwfRecord",
    "job_from_record",
    "open_text",
    "read_swf",
    "read_text",
    "workload_name",
]
