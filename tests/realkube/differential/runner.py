"""Running one scripted sequence of requests and kubectl commands against an API server, and comparing two runs.

A :class:`Step` is one HTTP request (raw, as the admin) or one kubectl command. Strings in its path, body and
arguments are templates (``$name``, :class:`string.Template`) filled from the run's context, which earlier steps
fill with values of their responses (``save``): names from ``generateName``, resourceVersions, uids. Each run keeps
its own context, so the variable parts are threaded through both servers alike.

A run turns each step into an :class:`Observation`: the status code, for a ``Status`` its reason and causes (field
and reason), else the *shape* of the response: every path in it with its JSON type (``metadata.uid:str``,
``items[].spec.containers[].image:str``), values left out. :func:`differences` compares two observations.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import urllib3

__all__ = ["Observation", "Server", "Step", "differences", "run", "shape"]

Json = Any
View = Callable[[Json], Json]

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

OPAQUE = ("managedFields[].fieldsV1",)
"""Paths whose content is not walked (the set of fields a manager owns: its own shape is the object's)."""


@dataclass(frozen=True)
class Step:
    """One request or kubectl command; see the module docstring."""

    name: str
    method: str = "GET"
    path: str = ""
    body: Json = None
    content_type: str = "application/json"
    accept: str = "application/json"
    save: Mapping[str, str] = field(default_factory=dict)
    """Context name → dotted path in the response body (``metadata.name``, ``items.0.metadata.name``)."""
    kubectl: Sequence[str] = ()
    stdin: str | None = None
    stream: bool = False
    """A watch: the response is read to its end and observed event by event."""
    view: View | None = None
    """What of the body is compared (default: all of it); e.g. one resource of a discovery document."""
    exact: Callable[[Json], dict[str, Json]] | None = None
    """Values compared exactly, by key (e.g. a resource's short names in discovery), besides the shape; of a success's
    body, and of a refusal's Status (e.g. the words of its causes)."""
    until: Callable[[int, Json], bool] | None = None
    """Repeat the request (up to :data:`UNTIL_SECONDS`) until this holds of (code, body): a wait for a controller."""
    pause: float = 0.0
    """Seconds to wait before the step (a graceful deletion's deadline, a watch to fall idle)."""


UNTIL_SECONDS = 60.0


@dataclass(frozen=True)
class Observation:
    code: int
    reason: str = ""
    causes: tuple[tuple[str, str], ...] = ()
    shape: frozenset[str] = frozenset()
    events: tuple[str, ...] = ()
    """A watch's event types (``BOOKMARK:initial-events-end`` for that bookmark, ``ERROR:<code>:<reason>``)."""
    values: tuple[tuple[str, str], ...] = ()
    """What :attr:`Step.exact` picked: (key, JSON of the value)."""
    message: str = field(default="", compare=False)
    """A Status's message or kubectl's error (shown with a different code, never compared)."""
    text: str = ""
    """A kubectl command's output, normalised (numbers, ages and uids masked)."""


@dataclass
class Server:
    """Where a run sends its requests: a URL with the admin's credentials, and kubectl with a kubeconfig."""

    name: str
    url: str
    kubectl: Path
    kubeconfig: Path
    cert: tuple[Path, Path] | None = None
    ca: Path | None = None
    context: dict[str, str] = field(default_factory=dict)
    pool: urllib3.PoolManager = field(init=False)

    def __post_init__(self) -> None:
        if self.ca is not None:
            context = ssl.create_default_context(cafile=str(self.ca))
            if self.cert is not None:
                context.load_cert_chain(*self.cert)
            self.pool = urllib3.PoolManager(ssl_context=context, retries=False, timeout=urllib3.Timeout(30.0))
        else:
            self.pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(30.0))


def _fill(value: Json, context: Mapping[str, str]) -> Json:
    if isinstance(value, str):
        return Template(value).safe_substitute(context)
    if isinstance(value, dict):
        return {_fill(k, context): _fill(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, context) for v in value]
    return value


def _dig(body: Json, dotted: str) -> Json:
    node = body
    for part in dotted.split("."):
        if isinstance(node, list):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


def shape(value: Json, path: str = "", out: set[str] | None = None) -> set[str]:
    """Every path in ``value`` with its JSON type; list items share their list's path (``items[]``)."""
    found: set[str] = set() if out is None else out
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}.get(
        type(value), "null"
    )
    found.add(f"{path}:{kind}")
    if path.endswith(OPAQUE):
        return found
    if isinstance(value, dict):
        for key, child in value.items():
            shape(child, f"{path}.{key}" if path else key, found)
    elif isinstance(value, list):
        for child in value:
            shape(child, f"{path}[]", found)
    return found


def _observe_body(code: int, body: Json, step: Step) -> Observation:
    refused = isinstance(body, dict) and body.get("kind") == "Status" and body.get("apiVersion") == "v1"
    picked = step.exact(body) if step.exact is not None and (code < 300 or refused) else {}
    values = tuple(sorted((key, json.dumps(value, sort_keys=True)) for key, value in picked.items()))
    if refused:
        details = body.get("details") or {}
        causes = tuple(sorted((str(c.get("field", "")), str(c.get("reason", ""))) for c in details.get("causes") or ()))
        reason = str(body.get("reason", body.get("status", "")))
        return Observation(code, reason, causes, values=values, message=str(body.get("message", "")))
    return Observation(code, shape=frozenset(shape(step.view(body) if step.view else body)), values=values)


def _stream_events(data: bytes) -> tuple[tuple[str, ...], set[str]]:
    events: list[str] = []
    shapes: set[str] = set()
    for line in data.splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        type_, obj = event.get("type", ""), event.get("object") or {}
        if type_ == "BOOKMARK":
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            events.append("BOOKMARK:initial-events-end" if "k8s.io/initial-events-end" in annotations else "BOOKMARK")
        elif type_ == "ERROR":
            events.append(f"ERROR:{obj.get('code')}:{obj.get('reason')}")
        else:
            events.append(f"{type_}:{(obj.get('metadata') or {}).get('name', '')}")
            shape(obj, f"{type_}", shapes)
    return tuple(events), shapes


def _collapse_bookmarks(events: tuple[str, ...]) -> tuple[str, ...]:
    """Periodic bookmarks come when the server's timer says (not part of what is compared); the initial-events-end
    bookmark is kept."""
    return tuple(e for e in events if e != "BOOKMARK")


_MASKS = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uid>"),
    (re.compile(r"\b\d+(?:m\d+)?[smhdy]\b"), "<age>"),
    (re.compile(r"\d+"), "<n>"),
    (re.compile(r"[ \t]+"), " "),
)


def normalise(text: str) -> str:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.strip() for line in text.strip().splitlines())


_SERVER_ERROR = re.compile(r"Error from server \((\w+)\)")


def _kubectl(server: Server, step: Step) -> Observation:
    args = [_fill(a, server.context) for a in step.kubectl]
    stdin = _fill(step.stdin, server.context) if step.stdin is not None else None
    result = subprocess.run(
        [str(server.kubectl), "--kubeconfig", str(server.kubeconfig), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
    )
    reasons = _SERVER_ERROR.findall(result.stderr)
    output = result.stdout
    for key, value in sorted(server.context.items(), key=lambda item: -len(item[1])):
        if len(value) >= 5:  # a generated name or a uid: the same variable on both servers
            output = output.replace(value, f"${key}")
    text = step.view(output) if step.view else output
    message = result.stderr.strip()[-300:]
    return Observation(result.returncode, ",".join(reasons), text=normalise(str(text)), message=message)


def _request(server: Server, step: Step) -> tuple[int, Json, bytes]:
    path = _fill(step.path, server.context)
    headers = {"Accept": step.accept, "User-Agent": "kubeflux-differential/1.0"}
    data: bytes | None = None
    if step.body is not None:
        body = _fill(step.body, server.context)
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["Content-Type"] = step.content_type
    response = server.pool.request(step.method, server.url + path, body=data, headers=headers, preload_content=True)
    raw: bytes = response.data
    try:
        decoded = json.loads(raw) if raw and not step.stream else None
    except ValueError:
        decoded = {"_text": raw.decode(errors="replace")[:200]}
    return response.status, decoded, raw


def run_step(server: Server, step: Step) -> Observation:
    if step.pause:
        time.sleep(step.pause)
    if step.kubectl:
        return _kubectl(server, step)
    deadline = time.monotonic() + UNTIL_SECONDS
    while True:
        code, body, raw = _request(server, step)
        if step.until is None or step.until(code, body) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for name, dotted in step.save.items():
        value = _dig(body, dotted)
        if value is not None:
            server.context[name] = str(value)
    if step.stream and code == 200:
        events, shapes = _stream_events(raw)
        return Observation(code, events=_collapse_bookmarks(events), shape=frozenset(shapes))
    if step.stream:
        body = json.loads(raw) if raw else None
    return _observe_body(code, body, step)


def run(server: Server, steps: Sequence[Step]) -> list[Observation]:
    """Every step in order against ``server``; a step that raises is observed as code -1 with the exception."""
    observed = []
    for step in steps:
        try:
            observed.append(run_step(server, step))
        except Exception as exc:  # one broken step must not hide the differences of the others
            observed.append(Observation(-1, f"{type(exc).__name__}: {exc}"))
    return observed


def differences(real: Observation, served: Observation) -> list[str]:
    """What differs, one string each: ``code 201 != 415``, ``reason ...``, ``cause ...``, ``events ...``,
    ``-path:type`` (the real server's only), ``+path:type`` (``cluster serve``'s only), ``text ...``."""
    found: list[str] = []
    if real.code != served.code:
        found.append(f"code {real.code} != {served.code}")
        return found
    if real.reason != served.reason:
        found.append(f"reason {real.reason} != {served.reason}")
    if real.causes != served.causes:
        found.append(f"causes {list(real.causes)} != {list(served.causes)}")
    if real.events != served.events:
        found.append(f"events {list(real.events)} != {list(served.events)}")
    real_values, served_values = dict(real.values), dict(served.values)
    for key in sorted(real_values.keys() | served_values.keys()):
        if real_values.get(key) != served_values.get(key):
            found.append(f"value {key}: {real_values.get(key)} != {served_values.get(key)}")
    found.extend(f"-{p}" for p in sorted(real.shape - served.shape))
    found.extend(f"+{p}" for p in sorted(served.shape - real.shape))
    if real.text != served.text:
        found.append(f"text {real.text!r} != {served.text!r}")
    return found
