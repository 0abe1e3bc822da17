"""**Seed 000** (sprint 3 of the KubeFlux informer project): the two demos, pi pods that succeed and pi pods that
segfault, on one worker of 16 cores with pods of 8 cores, run through the served cluster (the Kubernetes API, its
simulated kubelet and Job controller, kubeflux in the process) in virtual time, and the transcript a user of the
demo saw: ``kubectl get pods`` at the end (the server's own printer, which kubectl prints as it comes) and the
scheduler's Fluence-style log (``Match allocate …``, ``Cancel flux job …``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.pages import markdown_table, stamp, write_page
from experiments.served import replay_served
from kubeflux.scheduler.core import KubefluxScheduler
from kubeflux.sim.apiserver.clock import VirtualClock
from kubeflux.sim.apiserver.server import ApiServer
from kubeflux.sim.apiserver.tables import table
from kubeflux.sim.records import PodRecord
from kubeflux.sim.workloads.mapping import map_to_cluster
from kubeflux.sim.workloads.synthetic import preset, seed000_cluster

__all__ = [
    "DEMOS",
    "Demo",
    "kubectl_text",
    "run_demo",
    "seed000_demos",
    "seed000_page",
    "stable_log",
    "timeline_table",
    "write_seed000",
]

DEMOS: tuple[tuple[str, str], ...] = (
    ("seed000-succeed", "Demo 1: pi pods that succeed"),
    ("seed000-segfault", "Demo 2: pi pods that segfault"),
)
_ORIGIN = 1_700_000_000.0
"""The virtual clock's start (Unix seconds): fixed, so that the page's ages are the same at every run."""
_ELAPSED = re.compile(r" \([0-9.e-]+ s\)$")


@dataclass(frozen=True, slots=True)
class Demo:
    preset: str
    title: str
    pods: str
    """``kubectl get pods`` at the end, as kubectl prints it."""
    jobs: str
    """``kubectl get jobs`` at the end."""
    log: list[str]
    """The scheduler's log, in order."""
    records: list[PodRecord]
    """Every pod's life (bind, Running, end), from what the API showed."""


def kubectl_text(printed: dict[str, Any]) -> str:
    """A server-side ``Table`` as ``kubectl get`` prints it: the priority-0 columns, headers in capitals, each
    column as wide as its widest cell, three spaces apart."""
    columns = [i for i, c in enumerate(printed["columnDefinitions"]) if c.get("priority", 0) == 0]
    header = [str(printed["columnDefinitions"][i]["name"]).upper() for i in columns]
    rows = [[str(row["cells"][i]) for i in columns] for row in printed["rows"]]
    widths = [max(len(line[k]) for line in [header, *rows]) for k in range(len(columns))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in [header, *rows]
    )


def _kubectl_get(server: ApiServer, group: str, version: str, plural: str) -> str:
    resource = server.store.registry.find(group, version, plural)
    assert resource is not None, plural
    objects = sorted(server.store.objects(resource), key=lambda o: str(o["metadata"]["name"]))
    return kubectl_text(table(resource, objects, server.clock(), {}))


def run_demo(name: str, title: str = "") -> Demo:
    """Serve seed 000's cluster in virtual time, replay preset ``name`` through it with kubeflux in the process,
    and keep what kubectl and the scheduler's log show once the workload is done."""
    nodes = seed000_cluster()
    workload = map_to_cluster(preset(name), nodes)
    scheduler = KubefluxScheduler()
    server, record = replay_served(
        nodes, workload, [scheduler], scheduler.name, VirtualClock(_ORIGIN), label="kubeflux", timeout=600
    )
    pods = _kubectl_get(server, "", "v1", "pods")
    jobs = _kubectl_get(server, "batch", "v1", "jobs")
    return Demo(name, title, pods, jobs, list(scheduler.log), record.pods)


def stable_log(lines: Sequence[str]) -> list[str]:
    """The log without the matcher's measured times (``(0.000412 s)``), the part that differs between runs."""
    return [_ELAPSED.sub("", line) for line in lines]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def timeline_table(records: Sequence[PodRecord]) -> str:
    """Each pod's life in seconds from the first submission: bound, Running, ended and how."""
    rows = [
        (
            r.pod.split("/", 1)[-1],
            r.node or "—",
            _seconds(r.bind_time),
            _seconds(r.running_time),
            _seconds(r.end_time),
            f"{r.reason} (exit {r.exit_code})" if r.exit_code is not None else (r.reason or r.phase),
        )
        for r in sorted(records, key=lambda r: (r.created_time, r.pod))
    ]
    return markdown_table(("pod", "node", "bound (s)", "running (s)", "ended (s)", "how it ended"), rows)


def demo_section(demo: Demo) -> str:
    """One demo's part of the page: the timeline, then the transcript."""
    return f"""## {demo.title}

`kubeflux simulate --preset {demo.preset} --scheduler kubeflux --out out/{demo.preset}` runs it in the simulator; the
transcript below is from the served cluster (the same pods through the Kubernetes API).

{timeline_table(demo.records)}

```
$ kubectl get jobs
{demo.jobs}
$ kubectl get pods
{demo.pods}
```

The scheduler's log (Fluence's lines: the graph it built, each `Match allocate` with its job id, node, cores and
the matcher's time, each `Cancel flux job` when the informer sees a pod end):

```
{chr(10).join(demo.log)}
```
"""


_PAGE = """# Seed 000: the informer demos (pods that succeed, pods that segfault)

{stamp}

**The question.** The seed (sprint 3 of the KubeFlux informer project) shows a scheduler without feedback: on one
worker of 16 cores, pods of 8 cores, KubeFlux placed two pods and then waited for ever, because its graph never
heard that they had ended. The informer fixes it: it watches pods, and when one succeeds or fails it cancels the
pod's Flux job, so the cores are free again. Its two demos: pi pods that succeed (each ends `Completed`), and pi
pods that segfault (each ends `Error`, and its resources must be freed too; the Job controller replaces it). Does
kubeflux do the same?

**The setup.** The seed's cluster (one worker, `kind-worker`, of one 16-core socket) and its pods (`cpu: 8`), as
presets: `seed000-succeed` is a `batch/v1` Job of 4 pi pods that compute 60 s; `seed000-segfault` a Job of 4 pods
that crash after 30 s with exit code 139 and `backoffLimit: 4`. Each runs through `kubeflux cluster serve`'s
machinery in virtual time (`--clock virtual`): the API server, its simulated kubelet and Job controller, and
kubeflux in the process, binding through `pods/binding`. `kubectl get` below is the server's own printing of the
objects at the end (a `Table`, which kubectl prints as it comes: `kubectl get pods` against the served cluster
prints the same lines), so what a user sees is what ran.

{sections}
**What it shows.** In both demos two pods run at a time and the other two wait until the first two end (Fluence
logged `Unable to schedule pod; no fit; waiting`; kubeflux, which backfills, reserves the first waiting pod's start
instead: `Match allocate_orelse_reserve …: reserved at` the time the running pods end); then both are bound at once,
because the informer's `Cancel flux job` freed the cores. In demo 2 every failed pod's cores are freed the same way,
the Job controller replaces the failed pods after its back-off (10 s, doubled per failure), and the Job fails once
more than `backoffLimit` pods failed (`BackoffLimitExceeded`) and deletes its pods still active. Here the last two
pods fail at the same instant, and both end `Error` as each did: the Job controller looks at a Job once every pod
ending at that instant has ended, as a real one syncs after the kubelets' reports. So `kubectl get pods` lists 6
`Error` pods, where the seed's, whose pods segfaulted at different times, listed 5; the seed's log also cancelled
Flux jobs 1, 2, 7 and 8 for segfaulted pods, as here. A test regenerates both demos and checks this page's
tables, `kubectl` transcripts and log lines (the matcher's measured times aside).
"""


def seed000_demos() -> list[Demo]:
    return [run_demo(name, title) for name, title in DEMOS]


def seed000_page(demos: Sequence[Demo]) -> str:
    sections = "\n".join(demo_section(demo) for demo in demos)
    return _PAGE.format(
        stamp=stamp("seed000", "a test checks its tables and transcripts against the code"), sections=sections
    )


def write_seed000(folder: Path, demos: Sequence[Demo] | None = None) -> Path:
    """Write ``seed000.md`` into ``folder``; returns its path."""
    return write_page(folder, "seed000", seed000_page(demos or seed000_demos()))
