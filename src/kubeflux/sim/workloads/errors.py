"""The one error a workload or cluster reader raises when a whole file cannot be used."""

from __future__ import annotations


class WorkloadError(ValueError):
    """A file that cannot be read at all (missing, unknown format, broken JSON/YAML syntax).

    The message names the file and, where known, the line, document or field. Problems confined to one line or
    one document do not raise: they are collected in :attr:`kubeflux.sim.workloads.model.Workload.problems`.
    """
