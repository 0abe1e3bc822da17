"""``kubeflux query``: a ``resource-query``-compatible shell over the matching engine.

Commands come one per line from stdin (or an interactive prompt); match results go to the ``-t`` file (or
stdout), everything else (info, list, stat, errors) to stdout/stderr, exactly as Fluxion's resource-query
does, so its test scripts run unchanged.
"""

from __future__ import annotations

import errno
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubeflux.collector import settle_gc
from kubeflux.jobspec import JobspecError, load_jobspec
from kubeflux.match.engine import Engine, EngineError, JobState, MatchOp, MatchResult
from kubeflux.resources import decode_idset, load_graph
from kubeflux.resources.graph import Graph, GraphFormatError, Status, Vertex

RULE = "INFO: ============================="


@dataclass(slots=True)
class QueryOptions:
    graph: Path
    load_format: str = "grug"
    policy: str = "first"
    match_format: str = "simple"
    traverser: str = "simple"
    subsystems: str = "CA"
    prune_filters: str = "ALL:core,ALL:node"
    output: Path | None = None
    elapse_time: bool = False
    long_running: bool = False
    """Tune the garbage collector for this process after loading (the command line; not in-process callers)."""


class QuerySession:
    """One resource-query session: an engine plus the command interpreter."""

    def __init__(self, engine: Engine, out: TextIO, *, elapse_time: bool = False) -> None:
        self.engine = engine
        self.out = out
        self.elapse_time = elapse_time
        self._commands: dict[str, Callable[[list[str]], None]] = {
            "match": self._match,
            "m": self._match,
            "multi-match": self._multi_match,
            "M": self._multi_match,
            "cancel": self._cancel,
            "c": self._cancel,
            "info": self._info,
            "i": self._info,
            "list": self._list,
            "l": self._list,
            "stat": self._stat,
            "s": self._stat,
            "set-status": self._set_status,
            "t": self._set_status,
            "get-status": self._get_status,
            "e": self._get_status,
            "set-property": self._set_property,
            "p": self._set_property,
            "get-property": self._get_property,
            "g": self._get_property,
            "update": self._update,
            "u": self._update,
            "partial-cancel": self._partial_cancel,
            "find": self._find,
            "attach": self._attach,
            "j": self._attach,
            "remove": self._remove,
            "f": self._find,
            "pc": self._partial_cancel,
        }

    def run(self, lines: Iterable[str]) -> None:
        for line in lines:
            if not self.execute(line):
                break

    def execute(self, line: str) -> bool:
        """Run one command line; False when the session should end (``quit``)."""
        text = line.strip()
        if not text or text.startswith("#"):
            return True
        args = text.split()
        if args[0] in ("quit", "q"):
            return False
        handler = self._commands.get(args[0])
        if handler is None:
            print(f"ERROR: unknown command: {args[0]}", file=sys.stderr)
            return True
        handler(args)
        self.out.flush()
        return True

    # ------------------------------------------------------------------ commands

    def _op(self, name: str) -> MatchOp | None:
        try:
            return MatchOp(name)
        except ValueError:
            print(f"ERROR: unknown subcmd {name}", file=sys.stderr)
            return None

    def _match(self, args: list[str]) -> None:
        if len(args) != 3:
            return _malformed()
        op = self._op(args[1])
        if op is not None:
            self._run_match(op, args[2])

    def _multi_match(self, args: list[str]) -> None:
        if len(args) <= 3:
            return _malformed()
        op = self._op(args[1])
        if op is None:
            return
        for path in args[2:]:
            if not self._run_match(op, path):
                break

    def _run_match(self, op: MatchOp, path: str) -> bool:
        engine = self.engine
        try:
            jobspec = load_jobspec(path)
        except JobspecError as exc:
            if not Path(path).is_file():
                print(f"ERROR: can't open {path}", file=sys.stderr)
                return True
            print(f"Jobspec error for {engine.next_jobid}: {exc}", file=sys.stderr)
            self._print_schedule(MatchResult(engine.next_jobid, False, consumed_id=False))
            return False
        result = engine.match(op, jobspec, source=path)
        if result.error:
            print(f"ERROR: {result.error}", file=sys.stderr)
        self.out.write(result.resources)
        if op == MatchOp.SATISFIABILITY:
            self.out.write(
                f"{RULE}\nINFO: {'Satisfiable' if result.satisfiable else 'Unsatisfiable'} request\n{RULE}\n"
            )
            if self.elapse_time:
                print(f"INFO: ELAPSE={result.elapsed:f}")
        else:
            self._print_schedule(result)
        return result.matched

    def _print_schedule(self, result: MatchResult) -> None:
        out = self.out
        out.write(f"{RULE}\n")
        if result.matched:
            mode = "RESERVED" if result.at else "ALLOCATED"
            at = str(result.at) if result.at else "Now"
            out.write(f"INFO: JOBID={result.jobid}\nINFO: RESOURCES={mode}\nINFO: SCHEDULED AT={at}\n")
            if self.elapse_time:
                out.write(f"INFO: ELAPSE={result.elapsed:f}\n")
        else:
            out.write("INFO: No matching resources found\n")
            if not result.satisfiable:
                out.write("INFO: Unsatisfiable request\n")
            out.write(f"INFO: JOBID={result.jobid}\n")
            if self.elapse_time:
                out.write(f"INFO: ELAPSE={result.elapsed:f}\n")
        out.write(f"{RULE}\n")

    def _cancel(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            return _malformed()
        try:
            self.engine.cancel(int(args[1]))
        except (EngineError, ValueError) as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return
        if len(args) == 3 and args[2] == "stats":
            self._walk_stats("CANCEL")

    def _walk_stats(self, what: str) -> None:
        """The vertex counts of the last cancel walk, as ``cancel … stats`` prints them."""
        state = self.engine.state
        self.out.write(
            f'{RULE}\nINFO: {what} PREORDER COUNT="{state.preorder}"\n'
            f'INFO: {what} POSTORDER COUNT="{state.postorder}"\n{RULE}\n'
        )

    def _update(self, args: list[str]) -> None:
        """``update allocate|reserve jgf <file> <jobid> <starttime> <duration>``."""
        if len(args) != 7:
            return _malformed()
        subcmd, reader, path = args[1], args[2], args[3]
        if subcmd not in ("allocate", "reserve"):
            print(f"ERROR: unknown subcmd {subcmd}", file=sys.stderr)
            return
        if reader not in ("jgf", "rv1exec"):
            print(f"ERROR: unsupported reader {reader}", file=sys.stderr)
            return
        text = _read(path)
        if text is None:
            return
        try:
            jobid, at, duration = int(args[4]), int(args[5]), int(args[6])
        except ValueError:
            print(f"ERROR: job id, start time and duration must be integers: {' '.join(args[4:])}", file=sys.stderr)
            return
        try:
            result = self.engine.update(jobid, text, at=at, duration=duration, reserve=subcmd == "reserve", source=path)
        except EngineError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return
        if result.error:
            print(f"ERROR: {result.error}", file=sys.stderr)
        self.out.write(result.resources)
        self._print_schedule(result)

    def _partial_cancel(self, args: list[str]) -> None:
        """``partial-cancel <jobid> jgf|rv1exec <file> [stats]``."""
        if len(args) not in (4, 5):
            return _malformed()
        if args[2] not in ("jgf", "rv1exec"):
            print(f"ERROR: unsupported reader {args[2]}", file=sys.stderr)
            return
        text = _read(args[3])
        if text is None:
            return
        try:
            jobid = int(args[1])
        except ValueError:
            print(f"ERROR: nonexistent job {args[1]}", file=sys.stderr)
            return
        info = self.engine.jobs.get(jobid)
        if info is None or info.state == JobState.CANCELED:
            print(f"ERROR: nonexistent job {jobid}", file=sys.stderr)
            return
        if info.state == JobState.RESERVED:
            print("ERROR: reservations not currently supported by partial cancel", file=sys.stderr)
            return
        try:
            self.engine.partial_cancel(jobid, text, source=args[3])
        except EngineError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            print(f"ERROR: error encountered while removing job {jobid}", file=sys.stderr)
        if len(args) == 5 and args[4] == "stats":
            self._walk_stats("PARTIAL CANCEL")

    def _attach(self, args: list[str]) -> None:
        if len(args) != 2:
            return _malformed()
        text = _read(args[1])
        if text is None:
            return
        try:
            added = self.engine.attach(text, source=args[1])
        except EngineError as exc:
            print(f"ERROR: can't attach JGF subgraph\nERROR: {exc}", file=sys.stderr)
            return
        _drop_units(self.engine.graph, added)

    def _remove(self, args: list[str]) -> None:
        """``remove <path> true`` or ``remove <idset> false``."""
        if len(args) != 3:
            return _malformed()
        target, is_path = args[1], args[2]
        try:
            if is_path == "true":
                self.engine.remove_path(target)
            elif is_path == "false":
                self.engine.remove_ranks(decode_idset(target, "remove: ranks"))
            else:
                print("ERROR: invalid path boolean input ", file=sys.stderr)
        except (EngineError, GraphFormatError) as exc:
            print(f"ERROR: can't remove subgraph\nERROR: {exc}", file=sys.stderr)

    def _find(self, args: list[str]) -> None:
        if len(args) < 2:
            print("ERROR: malformed command: ", file=sys.stderr)
            return
        criteria = " ".join(args[1:])
        try:
            found = self.engine.find(criteria, now=int(time.time()))
        except EngineError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return
        self.out.write(f'{found}{RULE}\nINFO: EXPRESSION="{criteria}"\n{RULE}\n')

    def _info(self, args: list[str]) -> None:
        if len(args) != 2:
            return _malformed()
        jobid = args[1]
        info = self.engine.jobs.get(int(jobid) if jobid.isascii() and jobid.isdigit() else -1)  # not '²'
        if info is None:
            print(f"ERROR: jobid doesn't exist: {args[1]}")
            return
        print(f"INFO: {info.jobid}, {info.state}, {info.at}, {info.jobspec}, {info.overhead:g}")

    def _list(self, args: list[str]) -> None:
        for info in self.engine.jobs.values():
            print(f"INFO: {info.jobid}, {info.state}, {info.at}, {info.jobspec}, {info.overhead:g}")

    def _stat(self, args: list[str]) -> None:
        times = self.engine.match_times
        print(f"INFO: Num. of Jobs Matched: {len(self.engine.jobs)}")
        if times.count:
            print(f"INFO: Min. Match Time: {times.low:f}")
            print(f"INFO: Max. Match Time: {times.high:f}")
            print(f"INFO: Avg. Match Time: {times.total / times.count:f}")

    def _named_vertex(self, args: list[str], words: int) -> Vertex | None:
        """The vertex a command of ``words`` words names by its path, or None after saying what is wrong (in
        resource-query's words)."""
        if len(args) != words:
            _malformed()
            return None
        vertex = self.engine.graph.vertex_at(args[1])
        if vertex is None:
            self.out.write(f"Could not find path {args[1]} in resource graph.\n")
        return vertex

    def _set_status(self, args: list[str]) -> None:
        if self._named_vertex(args, 3) is None:
            return
        statuses = {"up": Status.UP, "down": Status.DOWN}
        if args[2] not in statuses:
            print("ERROR: unrecognized status", file=sys.stderr)
            return
        self.engine.set_status(args[1], statuses[args[2]])

    def _get_status(self, args: list[str]) -> None:
        vertex = self._named_vertex(args, 2)
        if vertex is None:
            return
        self.out.write(f"{args[1]} is {'up' if vertex.status == Status.UP else 'down'}\n")

    def _set_property(self, args: list[str]) -> None:
        if len(args) != 3:
            return _malformed()
        key, sep, value = args[2].partition("=")
        if not sep or not key or not value:
            self.out.write("Incorrect input format. \nPlease use `set-property <resource> PROPERTY=VALUE`.\n")
            return
        vertex = self.engine.graph.vertex_at(args[1])
        if vertex is None:
            self.out.write(f"Couldn't find path {args[1]} in resource graph.\n")
            return
        vertex.properties[key] = value
        self.engine.schedule.touch(vertex.uid)

    def _get_property(self, args: list[str]) -> None:
        vertex = self._named_vertex(args, 2)
        if vertex is None:
            return
        if not vertex.properties:
            self.out.write(f"No properties were found for {args[1]} (vtx's uniq_id={vertex.uniq_id}).\n")
            return
        for key in sorted(vertex.properties):
            self.out.write(f"{key}={vertex.properties[key]}\n")


def _drop_units(graph: Graph, uids: Iterable[int]) -> None:
    """Forget the ``unit`` of vertices read from JGF, as resource-query does: Fluxion's JGF reader never stores
    it, so its JGF writer shows none for them (a GRUG recipe's units are kept). Only this shell mimics that."""
    vertices = graph.vertices
    for uid in uids:
        vertices[uid].unit = ""


def _malformed() -> None:
    """Say that a command has the wrong number of words, as resource-query does."""
    print("ERROR: malformed command", file=sys.stderr)


def _read(path: str) -> str | None:
    """A command's input file, or None after telling the user it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        print(f"ERROR: can't open {path}", file=sys.stderr)
        return None


def _output_problem(path: Path) -> str | None:
    """Why the ``-t`` file cannot be written, in the system's words (``Is a directory``), or None. Asked before
    the graph is loaded and without creating the file, so a bad path costs no load and a bad graph leaves no file."""
    if path.is_dir():
        code = errno.EISDIR
    elif not path.parent.exists():
        code = errno.ENOENT
    elif not path.parent.is_dir():
        code = errno.ENOTDIR
    elif not os.access(path if path.exists() else path.parent, os.W_OK):
        code = errno.EACCES
    else:
        return None
    return os.strerror(code)


def _refuse_output(path: Path, reason: str) -> int:
    """Say that the ``-t`` file cannot be written and why; returns exit status 2 (a usage error)."""
    print(f"ERROR: -t/--test-output {path}: {reason}", file=sys.stderr)
    return 2


def run_query(options: QueryOptions, commands: TextIO) -> int:
    """Load the graph, then run ``commands``; returns the process exit status (1 a graph or option the engine
    refuses, 2 a ``-t`` file that cannot be written)."""
    started = time.perf_counter()
    if options.output and (problem := _output_problem(options.output)):
        return _refuse_output(options.output, problem)
    try:
        graph = load_graph(options.graph, options.load_format)
    except (GraphFormatError, OSError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if options.load_format == "jgf":
        _drop_units(graph, range(len(graph.vertices)))
    try:
        engine = Engine(
            graph,
            policy=options.policy,
            prune_filters=options.prune_filters,
            match_format=options.match_format,
            traverser=options.traverser,
            subsystems=options.subsystems,
        )
    except (EngineError, ValueError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if options.long_running:
        settle_gc()
    if options.elapse_time:
        print(f"INFO: Graph Load Time: {time.perf_counter() - started:f}")
        print(f"INFO: Vertex Count: {len(graph.vertices)}")
        print(f"INFO: Edge Count: {len(graph.edges)}")
    out: TextIO = sys.stdout
    if options.output:
        try:
            out = open(options.output, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:  # what the check above cannot foresee (a read-only file system, a race)
            return _refuse_output(options.output, exc.strerror or str(exc))
    try:
        session = QuerySession(engine, out, elapse_time=options.elapse_time)
        if commands.isatty():
            _interactive(session)
        else:
            session.run(commands)
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _interactive(session: QuerySession) -> None:
    while True:
        try:
            line = input("resource-query> ")
        except EOFError:
            return
        try:
            words = shlex.split(line)
        except ValueError as exc:  # an unclosed quote: say so and read the next line, as for any bad command
            print(f"ERROR: malformed command: {exc}", file=sys.stderr)
            continue
        if not session.execute(" ".join(words)):
            return
