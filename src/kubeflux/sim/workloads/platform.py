"""The machine a trace says it ran on, as a simulated cluster: what ``simulate`` uses when no cluster is given.

Batsim users replay an SWF log on the platform its header states; so does ``kubeflux simulate`` without
``--cluster`` or ``--nodes``/``--cores-per-node``:

* ``MaxNodes`` and ``MaxProcs`` both given, ``MaxProcs`` a multiple of ``MaxNodes``: ``MaxNodes`` nodes of
  ``MaxProcs / MaxNodes`` cores (HPC2N: 120 nodes x 2 cores);
* otherwise ``MaxProcs`` (else ``MaxNodes``) nodes of one core each: one host per processor, as Batsim's
  platforms for SWF logs have it (KTH-SP2: 100 nodes x 1 core);
* a Batsim workload's ``nb_res``: that many nodes of one core (one resource per host, as in Batsim).

A ``MaxNodes`` or ``MaxProcs`` that is no positive integer is a problem of the file (:func:`header_problems`:
``--strict`` fails on it, else it is a warning), and states no platform.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubeflux.sim.workloads.limits import echo
from kubeflux.sim.workloads.model import Workload


@dataclass(frozen=True, slots=True)
class HeaderPlatform:
    nodes: int
    cores_per_node: int
    source: str
    """Where it was read, for the first line of the output: ``HPC2N.swf's header (MaxNodes: 120, MaxProcs: 240)``."""


PLATFORM_KEYS = ("MaxNodes", "MaxProcs")


def header_count(header: dict[str, str], key: str) -> tuple[int | None, str]:
    """``(value, "")`` for a header key whose value starts with a positive integer in ASCII digits (``MaxNodes:
    120``), ``(None, "")`` when the key is absent, ``(None, why)`` when its value is no such integer."""
    text = header.get(key)
    if text is None:
        return None, ""
    stated = list(dict.fromkeys(value.strip() for value in text.split("\n")))  # a key given twice: joined by lines
    if len(stated) > 1:
        return None, f"header {key}: stated more than once, differently ({', '.join(echo(v) for v in stated[:3])})"
    first = (text.split() or [""])[0]
    if first.isascii() and first.isdigit() and 0 < int(first) < 2**63:
        return int(first), ""
    return None, f"header {key}: must be a positive integer, got {echo(text)}"


def header_problems(header: dict[str, str], file_name: str) -> list[str]:
    """``file: header MaxNodes: must be a positive integer, got 'abc'`` for each platform key that is unreadable."""
    return [f"{file_name}: {why}" for key in PLATFORM_KEYS if (why := header_count(header, key)[1])]


def _positive(header: dict[str, str], key: str) -> int | None:
    return header_count(header, key)[0]


def header_platform(workload: Workload, file_name: str) -> HeaderPlatform | None:
    """The platform ``workload``'s header states (rules in the module docstring), or None when it states none."""
    max_nodes = _positive(workload.header, "MaxNodes")
    max_procs = _positive(workload.header, "MaxProcs")
    if max_nodes is not None or max_procs is not None:
        said = ", ".join(
            f"{key}: {value}" for key, value in (("MaxNodes", max_nodes), ("MaxProcs", max_procs)) if value
        )
        source = f"{file_name}'s header ({said})"
        if max_nodes is not None and max_procs is not None and max_procs % max_nodes == 0:
            return HeaderPlatform(max_nodes, max_procs // max_nodes, source)
        return HeaderPlatform(max_procs or max_nodes or 0, 1, source)
    if workload.resources is not None:  # only a Batsim nb_res gets here: an SWF's comes from the keys above
        return HeaderPlatform(workload.resources, 1, f"{file_name}'s nb_res ({workload.resources})")
    return None


__all__ = ["PLATFORM_KEYS", "HeaderPlatform", "header_count", "header_platform", "header_problems"]
