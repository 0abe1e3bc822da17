"""``kubeflux queue``: each kubeflux scheduler's queue, in the order it tries the jobs — as ``squeue`` shows Slurm's.

It asks ``GET /kubeflux/queue`` (:func:`kubeflux.apiobjects.queuejobs.queue_by_job`) of a running
``kubeflux serve`` (its operations port, ``--server``, by default ``http://127.0.0.1:10260``) or of a
``kubeflux cluster serve`` (its URL with ``--server``, or its kubeconfig with ``--kubeconfig``, whose credentials
are then sent). It prints a table per scheduler, one row per waiting job (a Job, a PodGroup or a lone pod: its
kind and name, how many pods wait, priority, time waited, state, expected start as a readable time, what the
reservation holds, why it waits), or the server's JSON (``-o json``), once or
every ``--interval`` seconds with ``--watch`` (until Ctrl-C).

Exit codes (also in ``--help``): 0 shown (a baseline scheduler listed as keeping no queue included); 1 the server
cannot be reached, is not ready (``/readyz`` 503: its queue would read empty) or serves no kubeflux queue (404: a
real API server); 2 bad options (an unusable ``--kubeconfig``: missing, a directory, a FIFO,
not a kubeconfig; a ``--server`` that is no URL); 3 ``--scheduler`` names no scheduler the server runs. With
``--watch`` a failure of the server is one line on stderr and the next refresh tries again, as ``kubectl get -w``
does; a piped table keeps its full width (no wrapping at 80 columns).
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kubeflux.apiobjects.queuejobs import QUEUE_PATH

__all__ = ["QueueUnavailable", "fetch_queue", "queue_command", "render_queue", "waited_text"]

DEFAULT_SERVER = "http://127.0.0.1:10260"
"""``kubeflux serve``'s operations port by default (``operations.port``, ``--operations-port``)."""


EXIT_UNAVAILABLE = 1
"""The server cannot be reached, is not ready, or answers no queue."""
EXIT_USAGE = 2
"""Bad options: an unusable kubeconfig, a server that is no URL, an unknown output."""
EXIT_NO_SCHEDULER = 3
"""``--scheduler`` names no scheduler the server runs."""
MAX_INTERVAL = 86400.0
"""The longest ``--interval``: a day (``time.sleep`` refuses infinity and overflows on 1e10 seconds)."""
PIPE_WIDTH = 1000
"""The width of a table written to a pipe or a file: as wide as its rows (a terminal's width otherwise)."""


class QueueUnavailable(Exception):
    """The queue could not be read; the message says from where and what to try, ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.code = code


def _reason(exc: BaseException) -> str:
    """The innermost reason of a connection error on one line (``[Errno 111] Connection refused``), not urllib3's
    repr of its connection object and retry state."""
    while getattr(exc, "reason", None) is not None and isinstance(exc.reason, BaseException):  # type: ignore[attr-defined]
        exc = exc.reason  # type: ignore[attr-defined]
    text = " ".join(str(exc).split())
    return text.rsplit(">: ", 1)[-1] or type(exc).__name__


def waited_text(seconds: float) -> str:
    """A duration as people read it: ``45s``, ``12m05s``, ``3h07m``, ``2d04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _start_text(start: float | None, now: float) -> str:
    if start is None:
        return "-"
    stamp = datetime.fromtimestamp(int(start), UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"{stamp} (in {waited_text(start - now)})" if start > now else f"{stamp} (now)"


def render_queue(document: dict[str, Any], scheduler: str | None = None) -> RenderableType:
    """The tables of ``document`` (a :data:`QUEUE_PATH` answer), one per scheduler (only ``scheduler`` if given)."""
    now = float(document.get("now") or 0.0)
    parts: list[RenderableType] = []
    listed = [s for s in document.get("schedulers") or [] if scheduler is None or s.get("name") == scheduler]
    when = document.get("nowTime", "")
    if not listed:
        what = f"no scheduler named {scheduler!r}" if scheduler else "no kubeflux scheduler runs there"
        return Text(f"{what} ({document.get('source', 'server')}, {when})")
    for entry in listed:
        jobs = entry.get("jobs")
        name = entry.get("name", "")
        if jobs is None:
            parts.append(Text(f"{name}: keeps no queue it can show (a baseline scheduler)"))
            continue
        title = f"{name}: {len(jobs)} job{'s' if len(jobs) != 1 else ''} waiting at {when}"
        if not jobs:
            parts.append(Text(f"{title} (the queue is empty)"))
            continue
        table = Table(title=title, title_justify="left", expand=False, show_lines=False)
        for header, justify in (
            ("#", "right"),
            ("JOB", "left"),
            ("PODS", "right"),
            ("PRIO", "right"),
            ("WAITED", "right"),
            ("STATE", "left"),
            ("EXPECTED START (UTC)", "left"),
            ("RESERVES", "left"),
            ("WHY IT WAITS", "left"),
        ):
            table.add_column(header, justify=justify, overflow="fold")  # type: ignore[arg-type]
        for job in jobs:
            reserved = ", ".join(f"{k}={v}" for k, v in (job.get("reserved") or {}).items())
            nodes = job.get("nodes") or []
            if nodes:
                reserved += f" on {', '.join(nodes)}"
            table.add_row(
                str(job.get("position", "")),
                f"{_kind(job)} {job.get('job', '')}",
                str(len(job.get("pods") or [])),
                str(job.get("priority", 0)),
                waited_text(float(job.get("waitedSeconds") or 0.0)),
                str(job.get("state", "")),
                _start_text(job.get("expectedStart"), now),
                reserved or "-",
                str(job.get("reason") or "-"),
            )
        parts.append(table)
    return Group(*parts)


def _kind(job: dict[str, Any]) -> str:
    """What a queue entry is: ``Job``, ``PodGroup`` or ``Pod`` (a server before kinds were given: from ``group``)."""
    return str(job.get("kind") or ("PodGroup" if job.get("group") else "Pod"))


def _fetch_url(server: str) -> bytes:
    if "://" not in server:  # host:port, as kubectl's --server takes it
        server = "http://" + server
    scheme = server.split("://", 1)[0].lower()
    if scheme not in ("http", "https"):
        raise QueueUnavailable(f"--server {server!r}: not an http or https URL", EXIT_USAGE)
    url = server.rstrip("/") + QUEUE_PATH
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            data: bytes = response.read()
        why = _not_ready(server)
        if why:  # its informers have not synced (or lost the API server): the queue it shows is empty, not true
            raise QueueUnavailable(f"{server} is not ready ({why}): its queue cannot be shown yet; ask again later")
        return data
    except (ValueError, http.client.InvalidURL) as exc:  # no URL urllib can send to (a broken IPv6 address, a space)
        raise QueueUnavailable(f"--server {server!r}: not a URL kubeflux queue can ask: {exc}", EXIT_USAGE) from None
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace").strip()[:300]
        if exc.code == 404:
            raise QueueUnavailable(
                f"{url}: 404: this server keeps no kubeflux queue (a real API server has none: ask kubeflux serve's "
                f"operations port, {DEFAULT_SERVER} by default)"
            ) from None
        if exc.code == 401:
            raise QueueUnavailable(f"{url}: 401 Unauthorized: give the server's kubeconfig with --kubeconfig") from None
        raise QueueUnavailable(f"{url}: {exc.code} {exc.reason}: {body}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise QueueUnavailable(
            f"cannot reach {url} ({_reason(exc)}): is kubeflux serve running? Its operations port is "
            "--operations-port (default 10260); for kubeflux cluster serve give its URL with --server, or its "
            "--kubeconfig"
        ) from None


def _not_ready(server: str) -> str:
    """Why ``server``'s ``/readyz`` says it is not ready (its 503 body), or empty (ready, or no such endpoint)."""
    try:
        with urllib.request.urlopen(server.rstrip("/") + "/readyz", timeout=15):
            return ""
    except urllib.error.HTTPError as exc:
        body = " ".join(exc.read().decode("utf-8", "replace").split())[:300]
        return (body or "not ready") if exc.code == 503 else ""
    except (urllib.error.URLError, OSError, ValueError):
        return ""  # the queue request says why it cannot be reached


def _fetch_kubeconfig(kubeconfig: Path, context: str | None) -> bytes:
    from kubernetes import client

    from kubeflux.kube.command import api_client
    from kubeflux.kube.rest import RawApi

    try:
        api = api_client(kubeconfig, context, False, 1)
    except Exception as exc:  # the kubernetes client's config errors have no common base
        raise QueueUnavailable(f"--kubeconfig {kubeconfig}: {' '.join(str(exc).split())[:300]}", EXIT_USAGE) from None
    url = f"{api.configuration.host}{QUEUE_PATH}"
    try:
        response = RawApi(api, (5.0, 15.0)).request("GET", QUEUE_PATH)
    except client.ApiException as exc:
        if exc.status == 404:
            raise QueueUnavailable(
                f"{url}: 404: this API server keeps no kubeflux queue (only kubeflux cluster serve does; for "
                f"kubeflux serve ask its operations port with --server, {DEFAULT_SERVER} by default)"
            ) from None
        raise QueueUnavailable(f"{url}: {exc.status} {exc.reason}") from None
    except Exception as exc:  # urllib3's and the socket's errors
        raise QueueUnavailable(f"cannot reach {url} ({_reason(exc)})") from None
    data: bytes = response.data
    return data


def fetch_queue(server: str, kubeconfig: Path | None = None, context: str | None = None) -> dict[str, Any]:
    """The :data:`QUEUE_PATH` document of ``server`` (or of the kubeconfig's server); :class:`QueueUnavailable`."""
    data = _fetch_kubeconfig(kubeconfig, context) if kubeconfig is not None else _fetch_url(server)
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or not isinstance(document.get("schedulers"), list):
        raise QueueUnavailable(f"{server}{QUEUE_PATH}: the answer is not a kubeflux queue: {data[:200]!r}")
    return document


def _check_scheduler(document: dict[str, Any], scheduler: str | None) -> None:
    """:class:`QueueUnavailable` (:data:`EXIT_NO_SCHEDULER`) when ``scheduler`` is none of the document's."""
    names = [str(s.get("name")) for s in document["schedulers"] if isinstance(s, dict)]
    if scheduler is not None and scheduler not in names:
        runs = ", ".join(names) or "none"
        raise QueueUnavailable(
            f"--scheduler {scheduler}: no such scheduler at {document.get('source', 'the server')} (it runs: {runs})",
            EXIT_NO_SCHEDULER,
        )


def queue_command(
    server: Annotated[
        str,
        typer.Option(
            "--server",
            "-s",
            help="kubeflux serve's operations URL, or kubeflux cluster serve's URL.",
            show_default=True,
        ),
    ] = DEFAULT_SERVER,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="Ask the server of this kubeconfig (kubeflux cluster serve) with its token."),
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="The kubeconfig context to use.")] = None,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Only this scheduler's queue (its schedulerName).")
    ] = None,
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C (as watch squeue).")] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            "-i",
            min=0.1,
            max=MAX_INTERVAL,
            help="Seconds between refreshes with --watch (0.1 to 86400, a day).",
        ),
    ] = 2.0,
    iterations: Annotated[
        int | None, typer.Option("--iterations", min=1, help="With --watch: stop after this many refreshes.")
    ] = None,
) -> None:
    """Show each kubeflux scheduler's queue: job, pods, priority, waited, expected start, reason, reservation.

    Exit codes: 0 shown (also a baseline scheduler listed as keeping no queue); 1 the server cannot be reached, is
    not ready or serves no kubeflux queue (404); 2 bad options (an unusable --kubeconfig, a --server that is no
    http or https URL); 3 --scheduler names no scheduler the server runs. With
    --watch, a failure is one line and the next refresh tries again."""
    from kubeflux.kube.command import kubeconfig_problem

    if output not in ("table", "json"):
        raise typer.BadParameter(f"{output!r}: expected table or json", param_hint="--output")
    problem = kubeconfig_problem(kubeconfig) if kubeconfig is not None else ""
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(EXIT_USAGE)

    def fetch() -> dict[str, Any]:
        document = fetch_queue(server, kubeconfig, context)
        _check_scheduler(document, scheduler)
        return document

    try:
        if not watch:
            _show(fetch(), output, scheduler)
        elif output == "json":  # one document a line, for programs that follow it
            _repeat(lambda: typer.echo(orjson.dumps(fetch()).decode()), interval, iterations)
        else:
            _watch_table(fetch, scheduler, interval, iterations)
    except QueueUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.code) from None
    except KeyboardInterrupt:
        return


def _console() -> Console:
    """A terminal's console, or one as wide as its tables when the output is piped (no wrapping at 80 columns)."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPE_WIDTH)


def _show(document: dict[str, Any], output: str, scheduler: str | None) -> None:
    if output == "json":
        typer.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
    else:
        _console().print(render_queue(document, scheduler))


def _repeat(step: Callable[[], None], interval: float, iterations: int | None) -> None:
    """``step()`` every ``interval`` seconds; a server failure (:data:`EXIT_UNAVAILABLE`) is one line on stderr
    and the next refresh tries again, as ``kubectl get -w`` retries its watch; other failures end it."""
    done = 0
    while True:
        failed: QueueUnavailable | None = None
        try:
            step()
        except QueueUnavailable as exc:
            if exc.code != EXIT_UNAVAILABLE:
                raise
            failed = exc
            stamp = datetime.now(UTC).strftime("%H:%M:%SZ")
            last = iterations is not None and done + 1 >= iterations
            typer.echo(f"{stamp} error: {exc}" + ("" if last else f" (retrying every {interval:g} s)"), err=True)
        done += 1
        if iterations is not None and done >= iterations:
            if failed is not None:  # the last refresh failed: the exit code says so
                raise QueueUnavailable("the last refresh failed", EXIT_UNAVAILABLE)
            return
        time.sleep(interval)


def _watch_table(
    fetch: Callable[[], dict[str, Any]], scheduler: str | None, interval: float, iterations: int | None
) -> None:
    console = _console()
    if not console.is_terminal:  # piped: one table per refresh, as watch -t would write them
        _repeat(lambda: console.print(render_queue(fetch(), scheduler)), interval, iterations)
        return
    with Live(Text(""), console=console, auto_refresh=False) as live:
        _repeat(lambda: live.update(render_queue(fetch(), scheduler), refresh=True), interval, iterations)
