"""The compiled engine is used only when its stamp matches the sources, and one can always tell which one runs.

The stamp tests build nothing: a fake package with a fake "compiled" directory (plain Python modules standing for
mypyc's extension modules) goes through the same :func:`kubeflux._native.use_compiled` as ``kubeflux.match``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubeflux.match
from kubeflux import _native
from kubeflux.apiobjects import manifests
from kubeflux.match import engine
from kubeflux.resources import graph
from kubeflux.scheduler import placing
from kubeflux.sim import cluster
from kubeflux.sim.baselines import fcfs
from tests.shared import REPO

PACKAGE = "fakeengine"
OTHER = "fakescheduler"


@pytest.fixture
def fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """``(src, build)``: a package ``fakeengine`` of two modules in ``src``, and its "compiled" twin, stamped."""
    src, build = tmp_path / "src", tmp_path / "build"
    (src / PACKAGE).mkdir(parents=True)
    (src / PACKAGE / "__init__.py").write_text("")
    (src / PACKAGE / "walk.py").write_text("from fakeengine import plan\nKIND = 'pure'\n")
    (src / PACKAGE / "plan.py").write_text("KIND = 'pure'\n")
    (build / PACKAGE).mkdir(parents=True)
    (build / PACKAGE / f"{_native.SHARED_LIBRARY}.py").write_text("")
    (build / PACKAGE / "walk.py").write_text("KIND = 'compiled'\n")
    (src / OTHER).mkdir()  # a second package compiled in the same group
    (src / OTHER / "__init__.py").write_text("")
    (src / OTHER / "place.py").write_text("from fakeengine import walk\n")
    sources = [*(src / PACKAGE).glob("*.py"), *(src / OTHER).glob("*.py")]
    stamp = _native.make_stamp({PACKAGE: ["plan", "walk"], OTHER: ["place"]}, sources, src)
    (build / _native.STAMP).write_text(json.dumps(stamp))
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.delenv("KUBEFLUX_PURE", raising=False)
    yield src, build
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def _walk_kind(src: Path, build: Path) -> tuple[bool, str]:
    """Import the fake package afresh the way ``kubeflux.match`` imports itself: (compiled?, its walk's KIND)."""
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]
    package = importlib.import_module(PACKAGE)
    compiled = _native.use_compiled(PACKAGE, package.__path__, build, src)
    return compiled, importlib.import_module(f"{PACKAGE}.walk").KIND


def test_the_compiled_modules_are_used_when_the_stamp_matches(fake_build: tuple[Path, Path]) -> None:
    assert _walk_kind(*fake_build) == (True, "compiled")
    assert _native.describe().splitlines().count(f"{PACKAGE}: compiled (mypyc, {fake_build[1]})") == 1


def test_an_edited_source_is_never_shadowed_by_its_stale_build(fake_build: tuple[Path, Path]) -> None:
    src, build = fake_build
    (src / PACKAGE / "plan.py").write_text("KIND = 'edited'\n")  # a module that was compiled in, not the walk
    assert _walk_kind(src, build) == (False, "pure")
    assert f"{PACKAGE}: pure Python (compiled: {PACKAGE}/plan.py changed since the build)" in _native.describe()


def test_an_edit_in_another_package_of_the_group_refuses_the_whole_group(fake_build: tuple[Path, Path]) -> None:
    src, build = fake_build
    (src / OTHER / "place.py").write_text("from fakeengine import walk, plan\n")
    assert _walk_kind(src, build) == (False, "pure")
    assert _native.stale_reason(OTHER, build, src) == _native.stale_reason(PACKAGE, build, src)


def test_a_module_added_since_the_build_refuses_it(fake_build: tuple[Path, Path]) -> None:
    src, build = fake_build
    (src / PACKAGE / "extra.py").write_text("")
    assert _walk_kind(src, build) == (False, "pure")
    assert _native.stale_reason(PACKAGE, build, src) == f"the modules of {PACKAGE} changed since the build"


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [
        (None, "not built (run `make`)"),
        ("{not json", "unreadable stamp"),
        ("[]", "malformed stamp"),
        ('{"cache_tag": "cpython-27", "sources": {}, "packages": {}, "library": "x"}', "built for cpython-27"),
        (
            f'{{"cache_tag": "{sys.implementation.cache_tag}", "sources": {{}}, "packages": {{}}, "library": "x"}}',
            f"{PACKAGE} was not compiled",
        ),
    ],
    ids=["no stamp", "not json", "not an object", "another python", "another package"],
)
def test_a_missing_or_foreign_stamp_means_pure_python(
    fake_build: tuple[Path, Path], stamp: str | None, reason: str
) -> None:
    src, build = fake_build
    stamp_file = build / _native.STAMP
    if stamp is None:
        stamp_file.unlink()
    else:
        stamp_file.write_text(stamp)
    assert _walk_kind(src, build) == (False, "pure")
    assert (_native.stale_reason(PACKAGE, build, src) or "").startswith(reason)


def test_a_library_that_does_not_load_means_pure_python(fake_build: tuple[Path, Path]) -> None:
    src, build = fake_build
    (build / PACKAGE / f"{_native.SHARED_LIBRARY}.py").write_text("raise ImportError('undefined symbol')\n")
    assert _walk_kind(src, build) == (False, "pure")
    assert "the compiled library does not load: undefined symbol" in _native.describe()


def test_kubeflux_pure_forces_pure_python(fake_build: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEFLUX_PURE", "1")
    assert _walk_kind(*fake_build) == (False, "pure")
    monkeypatch.setenv("KUBEFLUX_PURE", "0")
    assert _walk_kind(*fake_build) == (True, "compiled")


@pytest.mark.parametrize(
    "package",
    [
        "kubeflux.match",
        "kubeflux.scheduler",
        "kubeflux.apiobjects",
        "kubeflux.sim",
        "kubeflux.sim.baselines",
        "kubeflux.resources",
    ],
)
def test_the_engine_in_use_is_the_one_its_stamp_allows(package: str) -> None:
    """What this suite runs: the compiled engine, scheduler and simulator whenever ``make`` built them for these very
    sources."""
    pure = os.environ.get("KUBEFLUX_PURE", "") not in ("", "0")
    built = _native.stale_reason(package) is None
    compiled = importlib.import_module(package).COMPILED
    assert compiled is (built and not pure)
    module = {
        "kubeflux.match": engine,
        "kubeflux.scheduler": placing,
        "kubeflux.apiobjects": manifests,
        "kubeflux.sim": cluster,
        "kubeflux.sim.baselines": fcfs,
        "kubeflux.resources": graph,
    }[package]
    origin = Path(module.__file__ or "")
    if compiled:  # (mypyc names a module imported from compiled code with its package path twice: not checked)
        assert origin.is_relative_to(_native.BUILD_DIR) and origin.suffix == ".so"
    else:
        assert origin.parent == _native.SRC.joinpath(*package.split("."))


def test_kubeflux_version_says_which_engine_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kubeflux.cli", "version"], capture_output=True, text=True, check=True
    )
    expected = "compiled (mypyc" if kubeflux.match.COMPILED else "pure Python"
    lines = result.stdout.splitlines()[1:]
    assert [line.split(":")[0] for line in lines] == [
        "kubeflux.apiobjects",
        "kubeflux.match",
        "kubeflux.resources",
        "kubeflux.scheduler",
        "kubeflux.sim",
        "kubeflux.sim.baselines",
    ]  # every compiled package of the group, each one line
    assert all(line.split(": ", 1)[1].startswith(expected) for line in lines)


@pytest.mark.parametrize(("ci", "strict"), [("true", True), ("", False)], ids=["CI=true", "local"])
def test_under_ci_a_failed_compile_fails_make(ci: str, strict: bool) -> None:
    """``make test`` under ``CI=true`` builds with ``--strict``, so CI never tests the pure sources in the compiled
    engine's place; locally, a missing compiler is a one-line warning and everything runs pure."""
    plan = subprocess.run(["make", "-n", "native", f"CI={ci}"], cwd=REPO, capture_output=True, text=True, check=True)
    build = [line for line in plan.stdout.splitlines() if "tools/build_native.py" in line]
    assert len(build) == 1 and build[0].endswith("--strict") is strict
    command = [sys.executable, str(REPO / "tools" / "build_native.py"), "--force", *(["--strict"] if strict else [])]
    env = {**os.environ, "CC": "/nonexistent/cc"}  # no compiler: nothing is built, and build/native is left alone
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    assert result.returncode == (1 if strict else 0)
    assert result.stderr.splitlines() == [
        "kubeflux: kubeflux.match, kubeflux.scheduler, kubeflux.apiobjects, kubeflux.sim, kubeflux.sim.baselines, "
        "kubeflux.resources not compiled, all runs in pure Python: no C compiler (/nonexistent/cc)"
    ]


@pytest.mark.skipif(not kubeflux.match.COMPILED, reason="compares compiled with pure; this run is pure")
def test_whole_workloads_run_compiled_give_the_pure_runs_answers() -> None:
    """Some cases of tools/native_diff.py (all of them: ``python tools/native_diff.py --compare``): every job's
    and pod's times, nodes, resource ids and messages the same compiled and pure (KUBEFLUX_PURE=1)."""
    only = "kubeflux-conservative-0"  # every kind of workload, on uniform and mixed nodes: 8 runs
    command = [sys.executable, str(REPO / "tools" / "native_diff.py"), "--json", "--seeds", "1", "--only", only]
    compiled = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    pure_env = {**os.environ, "KUBEFLUX_PURE": "1"}
    pure = json.loads(subprocess.run(command, env=pure_env, capture_output=True, text=True, check=True).stdout)
    # every compiled package: apiobjects, match, resources, scheduler, sim, sim.baselines
    assert compiled["engine"].count("compiled (mypyc") == 6 and "KUBEFLUX_PURE" in pure["engine"]
    assert compiled["digests"] and compiled["digests"] == pure["digests"]
