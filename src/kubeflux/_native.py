"""Which engine runs: the compiled one (mypyc C extensions, built by ``make``) or the pure-Python sources.

``tools/build_native.py`` compiles a package's modules into ``build/native/<package path>/`` beside ``src`` and
writes a stamp there (``build/native/<package>.stamp.json``): the SHA-256 of every source file the build read —
the compiled modules and the kubeflux modules they import, transitively — and the interpreter's cache tag. A
package opts in by calling :func:`use_compiled` from its ``__init__``; the compiled modules then shadow the
sources (the compiled directory goes first on the package's ``__path__``) only when every recorded source still
hashes the same and the package holds the same modules, so an edited source is never shadowed by a stale binary:
the package runs pure until ``make`` rebuilds. ``KUBEFLUX_PURE=1`` forces pure Python.

The check reads a few hundred kilobytes of sources once per process (well under a millisecond of hashing).

What mypyc compiles differently from CPython, and how the engine's sources avoid it:

* ``Cls.__new__(Cls)`` runs ``__init__`` (a native class's ``tp_new`` does both), so a copy is made by the
  constructor and then overwritten, not from a bare ``__new__``;
* a method alias in a class body (``__copy__ = copy``) looks the method up in the class namespace, where a native
  method is not, and leaves a ``KeyError`` set that surfaces later as an unrelated ``SystemError`` (mypyc issue
  https://github.com/mypyc/mypyc/issues/1108), so the alias is a method that calls the other;
* an attribute annotation in a mixin (``_explore: Callable[...]``) is a slot of its own that hides the subclass's
  method of that name, so the mixin declares a method that raises ``NotImplementedError`` instead;
* a variable that holds an ``int`` and a ``float`` (``last = float("inf")``, later ``last = score``) needs one
  representation: the ``int`` is converted.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from collections.abc import Iterable, MutableSequence
from pathlib import Path
from typing import Final

SRC: Final = Path(__file__).resolve().parent.parent
"""The directory that holds the ``kubeflux`` package (``src`` in a checkout)."""

BUILD_DIR: Final = SRC.parent / "build" / "native"
"""Where ``tools/build_native.py`` puts the compiled modules and their stamps."""

SHARED_LIBRARY: Final = "native__mypyc"
"""The last component of the name of mypyc's shared library, which lives in the compiled package directory."""

_STATE: dict[str, str] = {}
"""Package name -> a line saying which engine it runs and, when pure, why (see :func:`describe`)."""


def stamp_path(package: str, build_dir: Path = BUILD_DIR) -> Path:
    """The stamp file of ``package`` (e.g. ``kubeflux.match``) in ``build_dir``."""
    return build_dir / f"{package}.stamp.json"


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_modules(package_dir: Path) -> list[str]:
    """The names of the modules (``*.py`` files other than ``__init__.py``) in a package directory, sorted."""
    return sorted(p.stem for p in package_dir.glob("*.py") if p.name != "__init__.py")


def make_stamp(modules: Iterable[str], sources: Iterable[Path], src: Path = SRC) -> dict[str, object]:
    """The stamp of a build that compiled ``modules`` and read ``sources`` (paths under ``src``)."""
    return {
        "cache_tag": sys.implementation.cache_tag,
        "modules": sorted(modules),
        "sources": {p.relative_to(src).as_posix(): digest(p) for p in sorted(sources)},
    }


def stale_reason(package: str, build_dir: Path = BUILD_DIR, src: Path = SRC) -> str | None:
    """Why the compiled ``package`` in ``build_dir`` must not be used for the sources under ``src``, or None."""
    stamp_file = stamp_path(package, build_dir)
    try:
        stamp = json.loads(stamp_file.read_text())
    except FileNotFoundError:
        return "not built (run `make`)"
    except (OSError, ValueError) as error:
        return f"unreadable stamp {stamp_file}: {error}"
    if not isinstance(stamp, dict) or not isinstance(stamp.get("sources"), dict):
        return f"malformed stamp {stamp_file}"
    if stamp.get("cache_tag") != sys.implementation.cache_tag:
        return f"built for {stamp.get('cache_tag')}, this is {sys.implementation.cache_tag}"
    package_dir = src.joinpath(*package.split("."))
    if stamp.get("modules") != package_modules(package_dir):
        return f"the modules of {package} changed since the build"
    for name, expected in stamp["sources"].items():
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
    when nothing was built, when a source changed since the build, or when the compiled library fails to load.
    """
    if os.environ.get("KUBEFLUX_PURE", "") not in ("", "0"):
        _STATE[package] = "pure Python (KUBEFLUX_PURE is set)"
        return False
    reason = stale_reason(package, build_dir, src)
    if reason is None:
        compiled_dir = str(build_dir.joinpath(*package.split(".")))
        path.insert(0, compiled_dir)
        try:
            importlib.import_module(f"{package}.{SHARED_LIBRARY}")
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
