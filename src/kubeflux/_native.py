"""Which engine runs: the compiled one (mypyc C extensions, built by ``make``) or the pure-Python sources.

``tools/build_native.py`` compiles a group of packages (the engine, ``kubeflux.match``, the scheduler's core,
``kubeflux.scheduler``, the Kubernetes objects layer, ``kubeflux.apiobjects``, and the simulator's hot modules in
``kubeflux.sim``) into ``build/native/<package path>/`` beside ``src``, with one shared library, and writes one stamp
(``build/native/kubeflux.stamp.json``): each package's modules, the SHA-256 of every source file the build read (the
compiled modules and the kubeflux modules they import, transitively) and the interpreter's cache tag. A package opts in
by calling :func:`use_compiled` from its ``__init__``; its compiled modules then shadow the sources (the compiled
directory goes first on the package's ``__path__``) only when every recorded source still hashes the same and every
package of the group holds the same modules, so an edited source is never shadowed by a stale binary: the whole group
runs pure until ``make`` rebuilds. ``KUBEFLUX_PURE=1`` forces pure Python.

The check reads under a megabyte of sources once per process (about a millisecond of hashing).

What mypyc compiles differently from CPython, and how kubeflux's sources avoid it:

* ``Cls.__new__(Cls)`` runs ``__init__`` (a native class's ``tp_new`` does both), so a copy is made by the
  constructor and then overwritten, not from a bare ``__new__``;
* a method alias in a class body (``__copy__ = copy``) looks the method up in the class namespace, where a native
  method is not, and leaves a ``KeyError`` set that surfaces later as an unrelated ``SystemError`` (mypyc issue
  https://github.com/mypyc/mypyc/issues/1108), so the alias is a method that calls the other;
* a module function assigned in a class body (``leaves = emit_leaves``) does not bind ``self`` when compiled, so
  it is a method that calls the function;
* a native exception class loses its class attribute defaults (``errno = ERANGE``), so such exceptions are
  ``@mypyc_attr(native_class=False)``;
* a variable has one type: one that holds an ``int`` and a ``float`` converts the ``int``; two ``except`` clauses
  of one function bind different names;
* compiled classes and functions cannot be patched: tests that do carry ``@pytest.mark.pure_engine``;
* an interpreted class cannot subclass a compiled one unless it (and its compiled bases) carry
  ``@mypyc_attr(allow_interpreted_subclasses=True)``, as ``KubefluxScheduler`` and ``Engine`` do;
* reading an attribute of a pure object (a user's ``Pod``) checks its value against the annotation and raises
  ``TypeError`` on a mismatch, so the scheduler type-checks what it reads before validation (``observe``);
* a native ``int`` (or tuple of them) stored into a dict, set, list or tuple becomes a new object at each store,
  where the pure sources store one shared object: tables with millions of entries keep the graph's uid objects
  (``ScheduleView.uid_objects``) and values boxed once (locals typed ``Any``), or memory grows by 32 bytes an entry.
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
