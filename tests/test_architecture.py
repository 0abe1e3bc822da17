"""The package's shape, as DESIGN.md draws it: layers whose imports point one way, no import circles, short modules.

Layers, lowest first (a module may import its own unit and the units of lower layers, nothing beside or above):

0. ``resources`` (the graph), above only ``_native`` (which engine runs, compiled or pure; it imports no kubeflux
   module, and every compiled package, the graph's included, asks it) and ``collector`` (the garbage collector
   tuned for a long-running process; it imports nothing either), 1. ``jobspec``, 2. ``match`` (the engine),
   3. ``scheduler`` (the core),
4. ``apiobjects``: Kubernetes objects as kubeflux reads and writes them (manifests, quantities, the Binding, the
   ``PodScheduled`` condition and Events, the event budget), between the core and the shells, and ``wallclock``
   (the wall clock ``serve`` and ``cluster serve`` share: a clock read, which the core never makes) and
   ``stopsignals`` (Ctrl-C and SIGTERM heard by the long-running commands, with no lock in the handler),
5. the shells over them: ``sim`` and ``kube`` (drivers), and ``query`` (``resource-query``'s command language
   over the engine: a shell, so the engine never imports it),
6. ``controlplane``: the real Kubernetes control plane started on loopback, for the tests and ``kubeflux kube up``
   (it uses the simulated API server's certificate helpers),
7. the command line: ``cli``, ``commands`` (what each subcommand does) and ``demo`` (the demo it runs), one unit.

Every import counts, ``TYPE_CHECKING`` ones included (a type a module names is a module it depends on), and so do
an import inside a function and ``importlib.import_module``/``__import__`` of a literal name.

The functional core of DESIGN.md is layers 0 to 3 (:data:`CORE`: the graph, the jobspec, the engine and the
scheduler): it reads no Kubernetes wire format, so besides the layering it imports neither ``apiobjects`` nor a
shell nor the official ``kubernetes`` client (:func:`test_the_core_imports_no_kubernetes_wire_format`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import pytest

from tests.shared import REPO

SRC = REPO / "src"
PACKAGE = "kubeflux"
LAYERS: list[set[str]] = [
    {"_native", "collector"},
    {"resources"},
    {"jobspec"},
    {"match"},
    {"scheduler"},
    {"apiobjects", "wallclock", "stopsignals"},
    {"sim", "kube", "query"},
    {"controlplane"},
    {"cli", "commands", "demo", "__main__"},
]
CLI_UNIT = {"cli", "commands", "demo", "__main__"}
"""The units of the top layer import each other freely (one command line); elsewhere a unit is one name."""


MAX_MODULE_LINES = 800
LONG_MODULE_MARK = "Why this module is long:"
"""A module over :data:`MAX_MODULE_LINES` lines says why in its docstring, in a paragraph starting so."""
MAX_CLASS_LINES = 500
SPLIT_PENDING: set[str] = set()
"""Modules still to be split (issue 17); this list may only shrink."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


DYNAMIC_IMPORTS = {"import_module", "__import__"}
"""Calls that import the module their first argument names (``importlib.import_module("a.b")``, ``__import__``)."""


def _dynamic_imports(tree: ast.AST) -> Iterator[str]:
    """The modules ``tree`` imports by a call of :data:`DYNAMIC_IMPORTS` with a literal name (an absolute one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            first = node.args[0]
            if name in DYNAMIC_IMPORTS and isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value


def _imports(
    module: str, path: Path, source: str | None = None, *, package: str = PACKAGE, modules: Collection[str] = ()
) -> Iterator[str]:
    """The modules of ``package`` (kubeflux) that ``module`` imports (a ``from a.b import c`` names ``a.b.c`` when
    that is one of ``modules``, by default :data:`MODULES`), wherever the import stands (a function's body too) and
    also by :data:`DYNAMIC_IMPORTS` calls."""
    modules = modules or MODULES
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    yield from (name for name in _dynamic_imports(tree) if name.split(".")[0] == package)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == package)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != package:
                continue
            yield target
            for alias in node.names:
                if f"{target}.{alias.name}" in modules:
                    yield f"{target}.{alias.name}"


GRAPH = {module: set(_imports(module, path)) & set(MODULES) for module, path in MODULES.items()}


CORE = {"resources", "_native", "collector", "jobspec", "match", "scheduler"}
"""The functional core: what a scheduling decision is made of, with no I/O and no Kubernetes wire format."""
WIRE = {
    "apiobjects",
    "wallclock",
    "stopsignals",
    "sim",
    "kube",
    "controlplane",
    "query",
    "cli",
    "commands",
    "demo",
    "__main__",
}
"""What the core may never import: the Kubernetes objects layer and everything above it."""
WIRE_LIBRARIES = {"kubernetes"}
"""Third-party packages that speak the Kubernetes API, which the core may not import either."""


def _third_party_imports(path: Path, source: str | None = None) -> Iterator[str]:
    """The top-level packages other than kubeflux that ``path`` imports (absolute imports only, also lazy ones and
    :data:`DYNAMIC_IMPORTS` calls)."""
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    yield from (name.split(".")[0] for name in _dynamic_imports(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module.split(".")[0]


def _unit(module: str) -> str:
    """The unit a module belongs to: ``kubeflux.match.engine`` -> ``match``; the package root -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(unit: str) -> int:
    for rank, units in enumerate(LAYERS):
        if unit in units:
            return rank
    raise AssertionError(f"kubeflux.{unit} is in no layer: add it to LAYERS in {Path(__file__).name}")


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        if _unit(module):
            _layer(_unit(module))


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for module, imported in sorted(GRAPH.items()):
        unit = _unit(module)
        for target in sorted(imported):
            other = _unit(target)
            if not other or other == unit or (unit in CLI_UNIT and other in CLI_UNIT):
                continue
            if not unit or _layer(other) >= _layer(unit):
                wrong.append(f"{module} imports {target}")
    assert not wrong, "imports against the layering of DESIGN.md:\n" + "\n".join(wrong)


def _wire_imports_of_the_core() -> list[str]:
    wrong = []
    for module, imported in sorted(GRAPH.items()):
        if _unit(module) not in CORE:
            continue
        wrong += [f"{module} imports {target}" for target in sorted(imported) if _unit(target) in WIRE]
        wrong += [
            f"{module} imports {library}"
            for library in sorted(set(_third_party_imports(MODULES[module])) & WIRE_LIBRARIES)
        ]
    return wrong


def test_the_core_imports_no_kubernetes_wire_format() -> None:
    wrong = _wire_imports_of_the_core()
    assert not wrong, "the core imports the Kubernetes layer or a shell:\n" + "\n".join(wrong)


def test_the_wire_check_finds_a_core_module_importing_the_layer() -> None:
    GRAPH["kubeflux.scheduler.filtering"].add("kubeflux.apiobjects.quantity")
    try:
        assert "kubeflux.scheduler.filtering imports kubeflux.apiobjects.quantity" in _wire_imports_of_the_core()
    finally:
        GRAPH["kubeflux.scheduler.filtering"].discard("kubeflux.apiobjects.quantity")


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("from kubeflux.apiobjects import quantity\n", "kubeflux.apiobjects.quantity", id="from-import"),
        pytest.param(
            "def f():\n    from ..apiobjects.quantity import cpu_millis\n",
            "kubeflux.apiobjects.quantity",
            id="lazy-relative-import-in-a-function",
        ),
        pytest.param(
            "import importlib\ndef f():\n    return importlib.import_module('kubeflux.kube.rest')\n",
            "kubeflux.kube.rest",
            id="importlib",
        ),
        pytest.param(
            "def f():\n    return __import__('kubeflux.sim.cluster')\n", "kubeflux.sim.cluster", id="dunder-import"
        ),
    ],
)
def test_the_import_reader_finds_every_way_of_importing(source: str, found: str) -> None:
    """A core module's import of the Kubernetes layer is found however it is written (the wire check reads
    :data:`GRAPH`, which :func:`_imports` builds)."""
    path = MODULES["kubeflux.scheduler.filtering"]
    assert found in set(_imports("kubeflux.scheduler.filtering", path, source))


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("def f():\n    import kubernetes.client\n", id="lazy-import"),
        pytest.param("import importlib\nclient = importlib.import_module('kubernetes.client')\n", id="importlib"),
    ],
)
def test_the_library_reader_finds_the_kubernetes_client_however_imported(source: str) -> None:
    assert "kubernetes" in set(_third_party_imports(MODULES["kubeflux.scheduler.filtering"], source))


def test_every_unit_is_core_or_not() -> None:
    units = {_unit(module) for module in MODULES if _unit(module)}
    assert units <= CORE | WIRE, f"units neither in CORE nor in WIRE: {sorted(units - CORE - WIRE)}"


def _circles() -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: set[frozenset[str]] = set()
    for start in sorted(GRAPH):
        if start in index:
            continue
        work = [(start, iter(sorted(GRAPH[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(GRAPH[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == module:
                        break
                if len(component) > 1:
                    circles.add(frozenset(component))
    return circles


def test_no_import_circle() -> None:
    circles = [sorted(circle) for circle in _circles()]
    assert not circles, f"modules that import each other, directly or through others: {circles}"


def test_the_circle_finder_finds_a_circle() -> None:
    GRAPH["kubeflux.resources.graph"].add("kubeflux.match.engine")
    try:
        assert any("kubeflux.resources.graph" in circle for circle in _circles())
    finally:
        GRAPH["kubeflux.resources.graph"].discard("kubeflux.match.engine")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_long_module_says_why(module: str) -> None:
    source = MODULES[module].read_text()
    lines = source.count("\n")
    if lines <= MAX_MODULE_LINES:
        assert module not in SPLIT_PENDING, f"{module} has {lines} lines now: remove it from SPLIT_PENDING"
        return
    if module in SPLIT_PENDING:
        pytest.xfail(f"{module}: {lines} lines, to be split (issue 17)")
    docstring = ast.get_docstring(ast.parse(source)) or ""
    assert LONG_MODULE_MARK in docstring, (
        f"{module} has {lines} lines (more than {MAX_MODULE_LINES}): split it, or say at its top, in a paragraph "
        f"starting {LONG_MODULE_MARK!r}, why it is one module"
    )


LONG_CLASS_MARK = "Why this class is long:"
"""A class over :data:`MAX_CLASS_LINES` lines says why in its docstring, in a paragraph starting so."""


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_class_over_500_lines(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text())
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and node.end_lineno
        and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
        and LONG_CLASS_MARK not in (ast.get_docstring(node) or "")
    ]
    assert not long, (
        f"{module}: classes over {MAX_CLASS_LINES} lines: {long}; compose them of parts, or say in the class's "
        f"docstring, in a paragraph starting {LONG_CLASS_MARK!r}, why it is one class"
    )


README_MAX_LINES = 150


def test_the_readme_is_a_map_not_a_log() -> None:
    """README.md says what kubeflux is, how to start and where to read next; figures live in docs/performance.md."""
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def _doc_links() -> Iterator[tuple[Path, str]]:
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for match in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in match.group(1):
                yield page, match.group(1)


def test_the_docs_links_lead_somewhere() -> None:
    broken = [
        f"{page.relative_to(REPO)} → {target}" for page, target in _doc_links() if not (page.parent / target).exists()
    ]
    assert not broken, f"links to nothing: {broken}"


def _listed_in_architecture(page: str | None = None) -> set[str]:
    """The modules docs/architecture.md lists: ``file.py`` in a section whose heading names its package
    (```sim/apiserver/```; ```kubeflux/``` for the package root), or a path from the package root
    (``sim/cluster.py``) anywhere. A bare ``file.py`` elsewhere lists nothing: ``engine.py`` in the engine's section
    does not list a ``kubeflux/engine.py``."""
    listed: set[str] = set()
    text = (REPO / "docs" / "architecture.md").read_text() if page is None else page
    for section in re.split(r"\n(?=#{2,3} )", text):
        heading = section.split("\n", 1)[0]
        packages = ["" if name == "kubeflux/" else name for name in re.findall(r"`([a-z_/]+/)`", heading)]
        for name in re.findall(r"`([A-Za-z0-9_/]+\.py)`", section):
            if "/" in name:
                listed.add(name)
            listed.update(package + name for package in packages)
    return listed


def _unlisted(paths: list[Path], page: str | None = None) -> list[str]:
    listed = _listed_in_architecture(page)
    return [
        str(path.relative_to(SRC / PACKAGE))
        for path in paths
        if path.name not in ("__init__.py", "__main__.py") and str(path.relative_to(SRC / PACKAGE)) not in listed
    ]


def test_the_architecture_page_lists_every_module() -> None:
    unlisted = _unlisted(list(MODULES.values()))
    assert not unlisted, f"docs/architecture.md does not list {unlisted}: add each under its package's heading"


def test_the_listing_check_finds_a_module_listed_only_under_another_package() -> None:
    page = (
        "# page\n### `kubeflux/` (the root)\n`cli.py`\n"
        "### `sim/`\n`cluster.py`, `store.py`; see `sim/apiserver/app.py`\n"
        "## The engine (`match/`)\n`engine.py`\n"
    )
    root, new = SRC / PACKAGE, ["engine.py", "store.py", "sim/engine.py", "sim/store.py", "sim/apiserver/app.py"]
    assert _unlisted([root / name for name in ["cli.py", *new]], page) == ["engine.py", "store.py", "sim/engine.py"]


# ---------------------------------------------------------------------------------------------------- the tests' shape

TESTS = REPO / "tests"


def _test_modules() -> dict[str, Path]:
    """Every module under tests/ by its dotted name (a package by its own)."""
    modules: dict[str, Path] = {}
    for path in sorted(TESTS.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _is_test_module(module: str) -> bool:
    return module.rsplit(".", 1)[-1].startswith("test_")


def _test_modules_imported(module: str, modules: Mapping[str, Path], source: str | None = None) -> list[str]:
    """The other ``test_*`` modules that test module ``module`` imports (``source``: a text in place of its file)."""
    path = modules[module]
    imported = set(_imports(module, path, source, package="tests", modules=modules))
    return sorted(other for other in imported if other != module and other in modules and _is_test_module(other))


def test_no_test_module_imports_another() -> None:
    """A test module is a leaf: what several share lives in an underscore helper module beside them (as
    tests/scheduler/_workload.py, tests/sim/apiserver/_served.py), so that moving, renaming or deleting one test
    file never breaks another."""
    modules = _test_modules()
    wrong = [
        f"{modules[module].relative_to(REPO)} imports {other}"
        for module in modules
        if _is_test_module(module)
        for other in _test_modules_imported(module, modules)
    ]
    assert not wrong, (
        "a test module imports another; move what they share into an underscore helper module beside them "
        "(e.g. tests/sim/apiserver/_served.py):\n" + "\n".join(wrong)
    )


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("from tests.sim.apiserver.test_virtual_time import call\n", id="absolute"),
        pytest.param("def f():\n    from .test_virtual_time import call\n", id="relative-in-a-function"),
        pytest.param("from . import test_virtual_time\n", id="the-module-itself"),
        pytest.param("import tests.sim.apiserver.test_virtual_time\n", id="plain-import"),
    ],
)
def test_the_test_import_check_finds_a_test_module_importing_another(source: str) -> None:
    found = _test_modules_imported("tests.sim.apiserver.test_kubelet", _test_modules(), source)
    assert found == ["tests.sim.apiserver.test_virtual_time"]


def test_the_test_import_check_lets_a_test_import_a_helper_module() -> None:
    source = "from tests.sim.apiserver._served import call\nfrom .conftest import kubernetes\n"
    assert _test_modules_imported("tests.sim.apiserver.test_kubelet", _test_modules(), source) == []


PRIVATE_REACHES_ALLOWED: dict[str, str] = {
    "kube/binderprocess.py: formatter._fmt": "logging.Formatter keeps its format string only there (no public "
    "reader): the binder's child process logs in the format of the parent's handler",
    "kube/keepalive.py: self.pool._new_conn": "urllib3's pool makes a connection exactly as the client configured "
    "it (TLS, certificates, socket options); pyproject.toml pins urllib3 below 3 for it",
    "sim/sweep.py: pool._processes": "ProcessPoolExecutor has no public way to stop its running workers before "
    "Python 3.14's terminate_workers: an interrupted sweep must not wait for them",
}
"""``path: expression`` -> why that module of ``src/kubeflux`` may reach another object's private attribute. None
of kubeflux's own: each part offers what the others use under a public name and keeps the rest to itself; the
entries are libraries' objects with no public way to what is used."""
DOCUMENTED_PRIVATE_NAMES = {"os._exit"}
"""Names the standard library documents as public in spite of their underscore."""


def _private_reaches(module: str, source: str) -> list[str]:
    """Where ``source`` reads or writes ``x._name`` on an object ``x`` other than ``self``/``cls`` and no class or
    function of the module defines ``_name``: a reach into the private state of another module's object. By name,
    not by type: a module's functions and classes may share their own private names (Python's privacy is the
    module's), never another module's. ``from m import _name`` is one too, unless ``m._name`` is a module (a
    private module is private to its package, not to its siblings: ``from kubeflux import _native``)."""
    tree = ast.parse(source)
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            for alias in node.names:
                if _private(alias.name) and not _is_module(node.level, target, alias.name):
                    found.append(f"{module}:{node.lineno}: from {'.' * node.level}{target} import {alias.name}")
            continue
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        reach = ast.unparse(node)
        allowed = f"{module}: {reach}" in PRIVATE_REACHES_ALLOWED or reach in DOCUMENTED_PRIVATE_NAMES
        if node.attr not in own and not allowed:
            found.append(f"{module}:{node.lineno}: {reach}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(level: int, target: str, name: str) -> bool:
    """Whether ``from <level dots><target> import <name>`` imports a module of kubeflux (by its last parts: a
    relative import names no more)."""
    tail = ".".join(part for part in (*target.split("."), name) if part)
    return any(module == tail or (level and module.endswith(f".{tail}")) for module in MODULES)


def test_no_module_reaches_into_another_s_private_state() -> None:
    """All of ``src/``. Not the tests: a test may reach into the unit it tests, to watch it (a spy on
    ``Traverser._evaluate`` counts evaluations) or break it (urllib3's ``_new_conn`` failing), which a public name
    would offer every caller for the tests' sake; what such a test costs when the unit changes is the test's."""
    root = SRC / PACKAGE
    found = [
        reach
        for path in sorted(root.rglob("*.py"))
        for reach in _private_reaches(path.relative_to(root).as_posix(), path.read_text())
    ]
    assert not found, (
        f"modules reaching into another module's objects' private attributes: {found}; give the owner a "
        "public method or attribute for what is read, or list the reach in PRIVATE_REACHES_ALLOWED with its reason"
    )


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("def f(view):\n    return view._plans\n", ["m:2: view._plans"], id="a-read"),
        pytest.param("def f(state):\n    state._marked = {}\n", ["m:2: state._marked"], id="a-write"),
        pytest.param("def f(a):\n    a.b._c()\n", ["m:2: a.b._c"], id="through-an-attribute"),
        pytest.param("class A:\n    def f(self):\n        return self._x\n", [], id="its-own"),
        pytest.param(
            "class A:\n    def __init__(self):\n        self._x = 1\n\ndef f(a: A):\n    return a._x\n",
            [],
            id="a-name-of-the-module",
        ),
        pytest.param(
            "from kubeflux.sim.command import _few, run\n",
            ["m:1: from kubeflux.sim.command import _few"],
            id="an-imported-private-name",
        ),
        pytest.param("from .command import _few\n", ["m:1: from .command import _few"], id="relative"),
        pytest.param("from kubeflux import _native\nfrom .. import _native\n", [], id="a-private-module"),
        pytest.param("import os\n\ndef f():\n    os._exit(0)\n", [], id="documented-public"),
    ],
)
def test_the_private_reach_check_finds_a_reach_into_another_module(source: str, found: list[str]) -> None:
    assert _private_reaches("m", source) == found
