"""``kubeflux demo``: what ``make demo`` runs on a fresh machine, with no cluster."""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path

from rich.console import Console

from kubeflux.match.engine import Engine
from kubeflux.query import QuerySession
from kubeflux.resources.grug import read_grug


def run_demo(out_dir: Path) -> Path:
    """Match a short job stream on the bundled 8-node graph; print it and write ``out_dir/query.txt``."""
    console = Console()
    data = resources.files("kubeflux") / "data" / "demo"
    with resources.as_file(data) as folder:
        graph = read_grug(folder / "cluster.graphml")
        engine = Engine(graph, policy="lonode")
        buffer = io.StringIO()
        session = QuerySession(engine, buffer)
        transcript = []
        for line in (folder / "commands.txt").read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "match":
                line = f"{words[0]} {words[1]} {folder / words[2]}"
            start = buffer.tell()
            if not session.execute(line):
                break
            if line.strip() and not line.startswith("#"):
                transcript.append(f"resource-query> {' '.join(line.split()[:2])} {Path(line.split()[-1]).name}")
                transcript.append(buffer.getvalue()[start:].rstrip("\n"))
    console.rule("kubeflux query: lonode policy on 2 racks x 4 nodes (2 sockets x 8 cores, 1 gpu each)")
    text = "\n".join(part for part in transcript if part)
    console.print(text, highlight=False, markup=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "query.txt"
    report.write_text(text + "\n")
    console.print(f"\nWrote {report}")
    return report
