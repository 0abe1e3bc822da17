"""Runs one case of a Fluxion ``resource-query`` corpus through ``kubeflux query``, in process.

Two corpora share one layout (see ``../shared/conformance/fluxion/README.md``): ``fluxion``, Fluxion's own test
data, and ``fluxion-random``, random graphs and jobspecs whose expected outputs Fluxion's ``resource-query`` wrote.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeflux.query import QueryOptions, run_query
from tests.shared import SHARED

CORPORA = ("fluxion", "fluxion-random")
KNOWN_DIFFERENCES = Path(__file__).with_name("known_differences.txt")


@dataclass(frozen=True)
class Case:
    """One case of a corpus: its ``cases.json`` record and the folder that plays the role of ``t/``."""

    corpus: Path
    record: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def tier(self) -> int:
        return int(self.record["tier"])

    def expected(self) -> str:
        return (self.corpus / self.record["expected"]).read_text()


def corpus_path(name: str) -> Path:
    return SHARED / "conformance" / name


def load_cases(name: str) -> list[Case]:
    corpus = corpus_path(name)
    records: list[dict[str, Any]] = json.loads((corpus / "cases.json").read_text())
    return [Case(corpus, record) for record in records]


def known_differences() -> dict[str, str]:
    """Case id -> why kubeflux still differs (one ``id: reason`` per line; ids are unique across corpora)."""
    known = {}
    for line in KNOWN_DIFFERENCES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            case_id, _, reason = line.partition(":")
            known[case_id.strip()] = reason.strip()
    return known


def options_from_argv(argv: list[str], output: Path, corpus: Path) -> QueryOptions:
    args = [a.replace("@TEST_SRCDIR@", str(corpus)) for a in argv[1:]]
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


def run_case(case: Case, workdir: Path) -> str:
    """The ``-t`` output kubeflux produces for ``case``."""
    output = workdir / "OUT"
    options = options_from_argv(case.record["argv"], output, case.corpus)
    commands = (case.corpus / case.record["cmds"]).read_text().replace("@TEST_SRCDIR@", str(case.corpus))
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
    try:
        run_query(options, io.StringIO(commands))
    finally:
        sys.stdout, sys.stderr = stdout, stderr
    return output.read_text() if output.exists() else ""
