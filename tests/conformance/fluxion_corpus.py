"""Runs one case of Fluxion's resource-query corpus through ``kubeflux query``, in process."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from kubeflux.query import QueryOptions, run_query

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "fluxion"
KNOWN_DIFFERENCES = Path(__file__).with_name("known_differences.txt")


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((CORPUS / "cases.json").read_text())
    return cases


def known_differences() -> dict[str, str]:
    """Case id -> why kubeflux still differs (one ``id: reason`` per line)."""
    known = {}
    for line in KNOWN_DIFFERENCES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            case_id, _, reason = line.partition(":")
            known[case_id.strip()] = reason.strip()
    return known


def options_from_argv(argv: list[str], output: Path) -> QueryOptions:
    args = [a.replace("@TEST_SRCDIR@", str(CORPUS)) for a in argv[1:]]
    options = QueryOptions(graph=Path())
    i = 0
    while i < len(args):
        flag = args[i]
        if flag.startswith("--prune-filters="):
            options.prune_filters = flag.partition("=")[2]
            i += 1
            continue
        value = args[i + 1]
        match flag:
            case "-L":
                options.graph = Path(value)
            case "-f":
                options.load_format = value
            case "-P":
                options.policy = value
            case "-F":
                options.match_format = value
            case "-T":
                options.traverser = value
            case "-S":
                options.subsystems = value
            case "-t":
                options.output = output
            case _:
                raise ValueError(f"unexpected resource-query option {flag}")
        i += 2
    return options


def run_case(case: dict[str, Any], workdir: Path) -> str:
    """The ``-t`` output kubeflux produces for ``case``."""
    output = workdir / "OUT"
    options = options_from_argv(case["argv"], output)
    commands = (CORPUS / case["cmds"]).read_text().replace("@TEST_SRCDIR@", str(CORPUS))
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        run_query(options, io.StringIO(commands))
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    return output.read_text() if output.exists() else ""
