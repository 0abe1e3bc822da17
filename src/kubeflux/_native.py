"""Which engine runs: the compiled one (mypyc C extensions, built by ``make``) or the pure-Python sources.

A package of the compiled group opts in by calling :func:`use_compiled` from its ``__init__``; its compiled modules
then shadow the sources only when the build's stamp (``build/native/kubeflux.stamp.json``: every source's SHA-256,
the group's modules, the interpreter's cache tag) still matches, so an edited source is never shadowed by a stale
binary. ``KUBEFLUX_PURE=1`` forces pure Python.

How the build is chosen, and what mypyc compiles differently from CPython and how kubeflux's sources avoid it (the
``see kubeflux._native`` of a comment), are in ``docs/native.md``: the one place for those rules.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from collections.abc import Iterable, Mapping, MutableSequence
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parent.parent
"""The directory that holds the ``kubeflux`` package (``src`` in a checkout)."""

BUILD_DIR: Final = SRC.parent / "build" / "native"
"""Where ``tools/build_native.py`` puts the compiled modules and their stamp."""

STAMP: Final = "kubeflux.stamp.json"
"""The stamp's file name in the build directory."""

SHARED_LIBRARY: Final = "native__mypyc"
"""The last component of the name of mypyc's shared library (in the compiled directory of the group's first
package, e.g. ``kubeflux.match.native__mypyc``)."""

_STATE: dict[str, str] = {}
"""Package name -> a line saying which engine it runs and, when pure, why (see :func:`describe`)."""


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_modules(package_dir: Path) -> list[str]:
    """The names of the modules (``*.py`` files other than ``__init__.py``) in a package directory, sorted."""
    return sorted(p.stem for p in package_dir.glob("*.py") if p.name != "__init__.py")


def make_stamp(packages: Mapping[str, Iterable[str]], sources: Iterable[Path], src: Path = SRC) -> dict[str, object]:
    """The stamp of a build that compiled ``packages`` (name -> its modules) and read ``sources`` (under ``src``).

    The first package holds the group's shared library."""
    return {
        "cache_tag": sys.implementation.cache_tag,
        "packages": {package: sorted(modules) for package, modules in packages.items()},
        "library": f"{next(iter(packages))}.{SHARED_LIBRARY}",
        "sources": {p.relative_to(src).as_posix(): digest(p) for p in sorted(sources)},
    }


def read_stamp(build_dir: Path = BUILD_DIR) -> dict[str, object] | str:
    """The stamp in ``build_dir``, or why there is none to use."""
    stamp_file = build_dir / STAMP
    try:
        stamp = json.loads(stamp_file.read_text())
    except FileNotFoundError:
        return "not built (run `make`)"
    except (OSError, ValueError) as error:
        return f"unreadable stamp {stamp_file}: {error}"
    if (
        not isinstance(stamp, dict)
        or not isinstance(stamp.get("sources"), dict)
        or not isinstance(stamp.get("packages"), dict)
        or not isinstance(stamp.get("library"), str)
    ):
        return f"malformed stamp {stamp_file}"
    return stamp


def stale_reason(package: str, build_dir: Path = BUILD_DIR, src: Path = SRC) -> str | None:
    """Why the compiled ``package`` in ``build_dir`` must not be used for the sources under ``src``, or None."""
    stamp = read_stamp(build_dir)
    if isinstance(stamp, str):
        return stamp
    if stamp.get("cache_tag") != sys.implementation.cache_tag:
        return f"built for {stamp.get('cache_tag')}, this is {sys.implementation.cache_tag}"
    packages = stamp["packages"]
    assert isinstance(packages, dict)
    if package not in packages:
        return f"{package} was not compiled"
    for name, modules in packages.items():
        if modules != package_modules(src.joinpath(*name.split("."))):
            return f"the modules of {name} changed since the build"
    sources = stamp["sources"]
    assert isinstance(sources, dict)
    for name, expected in sources.items():
        try:
            actual = digest(src / name)
        except OSError:
            return f"{name} is gone since the build"
        if actual != expected:
            return f"{name} changed since the build"
    return None


def use_compiled(package: str, path: MutableSequence[str], build_dir: Path = BUILD_DIR, src: Path = SRC) -> bool:
    """Put the compiled modules of ``package`` first on its ``__path__`` when they match its sources.

    Returns whether they are in use. Pure Python when ``KUBEFLUX_PURE`` is set (to anything but ``0`` or empty),
    when nothing was built, when a source of the group changed since the build, or when the group's compiled
    library fails to load (a package of the group imported later then finds it pure too).
    """
    if os.environ.get("KUBEFLUX_PURE", "") not in ("", "0"):
        _STATE[package] = "pure Python (KUBEFLUX_PURE is set)"
        return False
    reason = stale_reason(package, build_dir, src)
    if reason is None:
        compiled_dir = str(build_dir.joinpath(*package.split(".")))
        path.insert(0, compiled_dir)
        stamp = read_stamp(build_dir)
        try:
            assert isinstance(stamp, dict)
            importlib.import_module(str(stamp["library"]))
        except ImportError as error:
            path.remove(compiled_dir)
            reason = f"the compiled library does not load: {error}"
    if reason is not None:
        _STATE[package] = f"pure Python (compiled: {reason})"
        return False
    _STATE[package] = f"compiled (mypyc, {build_dir})"
    return True


def describe() -> str:
    """One line per package that opted in: which engine it runs, e.g. ``kubeflux.match: compiled (mypyc, …)``."""
    return "\n".join(f"{package}: {state}" for package, state in sorted(_STATE.items()))
