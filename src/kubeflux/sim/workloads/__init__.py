"""Workloads for the simulator: HPC traces (SWF, Batsim JSON), Kubernetes manifests and synthetic jobs.

:func:`load_workload` reads any supported file, detecting its format from the content (not the name);
:func:`~kubeflux.sim.workloads.mapping.map_to_cluster` then fits trace jobs to a cluster.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from enum import StrEnum
from pathlib import Path

from kubeflux.sim.workloads.errors import WorkloadError
from kubeflux.sim.workloads.files import check_file
from kubeflux.sim.workloads.limits import ReadBudget
from kubeflux.sim.workloads.model import JobKind, PodTemplate, Workload, WorkloadJob


class WorkloadFormat(StrEnum):
    SWF = "swf"
    BATSIM = "batsim"
    KUBERNETES = "kubernetes"


_PROBE_BYTES = 64 * 1024
_SWF_JOB_LINE = re.compile(r"\s*(?:-?[0-9.]+(?:[eE][-+]?[0-9]+)?\s+){17}-?[0-9.]+(?:[eE][-+]?[0-9]+)?\s*")
_YAML_KEYS = re.compile(r"^(?:apiVersion|kind)\s*:", re.MULTILINE)
_BATSIM_KEYS = re.compile(r'"(?:nb_res|profiles)"\s*:')


def _head(path: Path) -> str:
    try:
        with path.open("rb") as stream:
            raw = stream.read(_PROBE_BYTES)
        if raw[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as stream:
                raw = stream.read(_PROBE_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise WorkloadError(f"{path}: cannot read: {exc} (is the file truncated or corrupt?)") from exc
    return raw.decode("utf-8-sig", errors="replace")  # -sig: a byte order mark (Windows editors) is no text


def detect_format(path: Path | str) -> WorkloadFormat:
    """The format of a workload file, from its first 64 KiB (gunzipped if needed).

    SWF: a line starting with ``;`` or a first data line of 18 numbers. Batsim: a JSON object with a ``jobs``
    list and ``nb_res`` or ``profiles``. Kubernetes: YAML (or JSON) with ``apiVersion``/``kind``. Anything else
    raises :class:`WorkloadError` saying what was expected.
    """
    path = Path(path)
    head = _head(path)
    text = head.lstrip()
    if not text:
        raise WorkloadError(f"{path}: the file is empty")
    if text.startswith("{"):
        if '"jobs"' in head and _BATSIM_KEYS.search(head):
            return WorkloadFormat.BATSIM
        if '"apiVersion"' in head and '"kind"' in head:
            return WorkloadFormat.KUBERNETES
        try:  # a small file: look at the real keys
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and "jobs" in data:
            return WorkloadFormat.BATSIM
    else:
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith(";") or _SWF_JOB_LINE.fullmatch(stripped):
                return WorkloadFormat.SWF
            break
        if _YAML_KEYS.search(text):
            return WorkloadFormat.KUBERNETES
    raise WorkloadError(
        f"{path}: unknown workload format: expected SWF (';' header lines or 18 numbers per line, may be gzipped), "
        "Batsim workload JSON (an object with 'nb_res', 'jobs' and 'profiles') or Kubernetes YAML "
        "(documents with apiVersion and kind)"
    )


def load_workload(
    path: Path | str, *, default_run_time: float | None = None, budget: ReadBudget | None = None
) -> Workload:
    """Read a workload file of any supported format (see :func:`detect_format`).

    Raises :class:`WorkloadError` for a path that is no readable regular file (each case with its own message:
    :func:`~kubeflux.sim.workloads.files.check_file`) or an unknown format; problems with single lines or
    documents are in :attr:`Workload.problems`. ``default_run_time``: seconds a manifest's pod without a run time
    runs (:func:`~kubeflux.sim.workloads.manifests.read_manifests`). ``budget``: an SWF file is read only as far
    as the memory budget allows (:class:`~kubeflux.sim.workloads.limits.ReadBudget`: WorkloadError at the first job
    beyond); the other formats are read whole, then held to the budget with the cluster (``check_budget``).
    """
    path = Path(path)
    check_file(path)
    kind = detect_format(path)
    if kind is WorkloadFormat.SWF:
        from kubeflux.sim.workloads.swf import read_swf

        return read_swf(path, budget=budget)
    if kind is WorkloadFormat.BATSIM:
        from kubeflux.sim.workloads.batsim import read_batsim

        return read_batsim(path)
    from kubeflux.sim.workloads.manifests import read_manifests

    return read_manifests(path, default_run_time=default_run_time)


__all__ = [
    "JobKind",
    "PodTemplate",
    "Workload",
    "WorkloadError",
    "WorkloadFormat",
    "WorkloadJob",
    "detect_format",
    "load_workload",
]
