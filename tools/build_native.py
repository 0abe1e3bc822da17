"""Compile kubeflux's engine (``kubeflux.match``) with mypyc into ``build/native``; ``make`` runs this after install.

The compiled modules never sit in ``src``: they go to ``build/native/kubeflux/match/`` with a stamp of the sources
the build read (see ``kubeflux._native``), and the package uses them only while that stamp matches its sources.
Nothing is rebuilt when the stamp already matches. A missing compiler, a missing mypyc or a failed build is not
an error: setup goes on and kubeflux runs in pure Python (one line says so; ``--strict`` makes it exit 1).

    python tools/build_native.py [--force] [--strict] [--jobs N]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from kubeflux import _native

PACKAGES = (
    "kubeflux.match",
    "kubeflux.scheduler",
    "kubeflux.apiobjects",
    "kubeflux.sim",
    "kubeflux.sim.baselines",
    "kubeflux.resources",
)
"""The packages compiled, as one mypyc group (calls between them are native) whose shared library lives in the
first; each package's ``__init__`` opts in with ``kubeflux._native.use_compiled``. Only a package's own modules
are compiled, never its subpackages (``kubeflux.sim.apiserver``, ``workloads`` … stay pure): ``baselines`` is a
package of the group of its own, of which only :data:`COMPILED_BASELINES` are compiled."""

COMPILED_BASELINES = ("capacity", "easy", "fcfs", "free_tree")
"""The HPC baselines' modules compiled: FCFS's scheduler, its first-fit capacity index and tree (what ``simulate -s
fcfs`` runs per event), and EASY, which subclasses FCFS (an interpreted subclass of a compiled class would need
``allow_interpreted_subclasses``, slower for both). LCG under fcfs (188,041 jobs, 24,515 nodes), the phase
``simulate fcfs`` of ``benchmarks/simulate.py --command``: 7.4-7.6 s of CPU pure, 5.5-6.3 s compiled (alternated,
load 11-18 on 2 cores, 2026-11-29). The Kubernetes baselines (``kube_default``, ``kube_gang``, ``coscheduling``,
``node_table``: NumPy per pass) stay pure."""

SIM_PURE_MODULES = {
    f"kubeflux.sim.{name}"
    for name in (
        "command",
        "jobcontroller",
        "metrics",
        "podstatus",
        "progress",
        "records",
        "report",
        "sweep",
        "sweep_command",
        "sweep_report",
        "verdict",
    )
}
"""The simulator's modules left pure: a run's hot loop is the event loop, the cluster, the job and pod bookkeeping,
resource ids and the driver (``clock``, ``cluster``, ``jobs``, ``pods``, ``resourceids``, ``driver``); the rest
parses commands, writes files, plots, sweeps in other processes, serves the API (``podstatus``) or runs Kubernetes
Jobs, which the traces do not use (``jobcontroller``), and ``records`` are the plain rows that readers and writers
share, built once per job at a run's end."""

BASELINES_PURE_MODULES = {
    f"kubeflux.sim.baselines.{name}"
    for name in _native.package_modules(_native.SRC / "kubeflux" / "sim" / "baselines")
    if name not in COMPILED_BASELINES
}
"""Every baseline module not named in :data:`COMPILED_BASELINES` (a new one starts pure)."""

DRA_PURE_MODULES = {
    "kubeflux.apiobjects.celfunctions",
    "kubeflux.apiobjects.devicecel",
    "kubeflux.apiobjects.resourceclaims",
    "kubeflux.scheduler.claimfreeing",
    "kubeflux.scheduler.devices",
    "kubeflux.sim.claims",
}
"""Dynamic Resource Allocation's modules, left pure: only pods with ResourceClaims reach them (their CEL is evaluated
by the library's Rust, once per selector and device)."""

PURE_MODULES = {
    *DRA_PURE_MODULES,
    "kubeflux.apiobjects.queuejobs",
    "kubeflux.resources.grug",
    "kubeflux.resources.jgf",
    "kubeflux.scheduler.interface",
    "kubeflux.scheduler.objects",
    "kubeflux.scheduler.queueview",
    "kubeflux.scheduler.storage",
    "kubeflux.scheduler.testing",
    "kubeflux.scheduler.validation",
    *SIM_PURE_MODULES,
    *BASELINES_PURE_MODULES,
}
"""Modules of those packages left pure. ``interface`` holds ``@runtime_checkable`` protocols, which a compiled
module cannot define. ``objects`` and ``validation`` hold and check what users send (pods, pod groups, nodes):
a pod's fields carry whatever a hostile client put there (a float count where the annotation says ``int``) until
validation rejects it naming the field, and compiled code would instead fail its type check with a TypeError.
``storage`` holds the storage objects beside ``objects``, for the same reason.
``testing`` is the tests' double of a cluster: nothing of a run. ``grug`` and ``jgf`` read graph files as users
wrote them (a hostile JGF's field of the wrong type is a ``GraphFormatError`` naming it), once per load.
``queueview`` copies the queue for people when asked (``kubeflux queue``), and ``queuejobs`` gathers it per Job:
nothing of a pass."""


def kubeflux_imports(path: Path, src: Path) -> set[Path]:
    """The source files of the kubeflux modules (and their packages' ``__init__``) that ``path`` imports."""
    tree = ast.parse(path.read_bytes(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    found: set[Path] = set()
    for name in names:
        if name != "kubeflux" and not name.startswith("kubeflux."):
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            base = src.joinpath(*parts[:i])
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def source_closure(roots: list[Path], src: Path) -> set[Path]:
    """``roots`` and every kubeflux source they import, transitively: what mypy reads to compile the roots."""
    seen: set[Path] = set()
    todo = list(roots)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(kubeflux_imports(path, src) - seen)
    return seen


def compiler_missing() -> str | None:
    """Why no C extension can be built here, or None."""
    for module in ("mypyc", "setuptools"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]  # as setuptools picks it
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").is_file():
        return f"no Python headers ({include}/Python.h)"
    return None


def build(packages: tuple[str, ...], jobs: int, verbose: bool, opt_level: str) -> None:
    """Compile ``packages`` (one group: one shared library, in the first package) and install them with their
    stamp into ``_native.BUILD_DIR`` (raises on failure)."""
    modules = {package: _native.package_modules(_package_dir(package)) for package in packages}
    paths = [
        _package_dir(package) / f"{module}.py"
        for package in packages
        for module in modules[package]
        if f"{package}.{module}" not in PURE_MODULES
    ]
    sources = source_closure(paths, _native.SRC)
    stamp = _native.make_stamp(modules, sources)
    stamp_file = _native.BUILD_DIR / _native.STAMP
    with tempfile.TemporaryDirectory(prefix="kubeflux-native-") as tmp:
        # A child process: mypyc and setuptools stay out of this one, and its output can be shown only on failure.
        script = (
            "import os, sys\n"
            "from setuptools import setup\n"
            "from mypyc.build import mypycify\n"
            "modules = mypycify(sys.argv[6:], opt_level=sys.argv[5], target_dir=sys.argv[2], group_name=sys.argv[4])\n"
            "os.chdir(sys.argv[2])  # away from our pyproject.toml, which is not setuptools' to read here\n"
            "setup(name='kubeflux-native', ext_modules=modules, script_args=['build_ext', '--build-lib',\n"
            "      sys.argv[1], '--build-temp', sys.argv[2], '--parallel', sys.argv[3]])\n"
        )
        library = str(stamp["library"]).removesuffix("__mypyc")
        command = [sys.executable, "-c", script, f"{tmp}/lib", f"{tmp}/c", str(jobs), library, opt_level]
        result = subprocess.run(command + [str(p) for p in paths], cwd=_native.SRC.parent, capture_output=not verbose)
        if result.returncode != 0:
            output = (result.stdout or b"").decode(errors="replace") + (result.stderr or b"").decode(errors="replace")
            lines = [line.strip() for line in output.splitlines() if line.strip() and "warning:" not in line]
            errors = [line for line in lines if "error" in line.lower()]
            last = (errors or lines or ["no output"])[-1]
            raise RuntimeError(f"mypyc failed (exit {result.returncode}): {last} (--verbose shows all)")
        stamp_file.unlink(missing_ok=True)
        for package in packages:
            built = Path(tmp, "lib").joinpath(*package.split("."))
            target = _native.BUILD_DIR.joinpath(*package.split("."))
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for extension in built.iterdir():
                if extension.is_file():  # a subpackage of the group (``kubeflux.sim.baselines``) has its own turn
                    shutil.copy2(extension, target / extension.name)
    # The stamp goes last: a build cut short leaves no stamp, hence no compiled engine in use.
    if _native.make_stamp(modules, sources) != stamp:
        raise RuntimeError("a source changed during the build; run it again")
    build_options = {"opt_level": opt_level, "pure_modules": sorted(PURE_MODULES)}
    stamp_file.write_text(json.dumps({**stamp, **build_options}, indent=1) + "\n")


def _package_dir(package: str) -> Path:
    return _native.SRC.joinpath(*package.split("."))


def up_to_date(opt_level: str) -> bool:
    """Whether the build in ``_native.BUILD_DIR`` matches the sources and ``PACKAGES`` at this ``-O`` level."""
    stamp = _native.read_stamp()
    return (
        isinstance(stamp, dict)
        and stamp.get("opt_level") == opt_level
        and stamp.get("pure_modules") == sorted(PURE_MODULES)
        and isinstance(packages := stamp.get("packages"), dict)
        and list(packages) == list(PACKAGES)
        and all(_native.stale_reason(package) is None for package in PACKAGES)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when the stamp matches the sources")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the engine cannot be compiled")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiler processes")
    parser.add_argument("--verbose", action="store_true", help="show mypyc's and the compiler's output")
    parser.add_argument("--opt-level", default="3", help="the C compiler's -O level (0 builds fastest, to debug)")
    args = parser.parse_args()
    names = ", ".join(PACKAGES)
    if not args.force and up_to_date(args.opt_level):
        print(f"kubeflux: the compiled {names} is up to date ({_native.BUILD_DIR})")
        return 0
    reason = compiler_missing()
    if reason is None:
        print(f"kubeflux: compiling {names} with mypyc (a few minutes) ...", flush=True)
        started = time.monotonic()
        try:
            build(PACKAGES, args.jobs, args.verbose, args.opt_level)
        except (RuntimeError, OSError) as error:
            reason = str(error)
        else:
            print(f"kubeflux: compiled {names} in {time.monotonic() - started:.0f} s into {_native.BUILD_DIR}")
            return 0
    print(f"kubeflux: {names} not compiled, all runs in pure Python: {reason}", file=sys.stderr)
    return 1 if args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
