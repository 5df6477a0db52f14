"""The layers point one way, read from the source: every import statement (those inside functions too, which
hide cycles from a plain ``import``), resolved to the module it names.

Units are gpubench's subpackages (gpubench.ranks, gpubench.compare, ...) and its top-level modules
(gpubench.run.runner, gpubench.timing.engine, ...); ``suites/`` installs as gpubench.suites.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = "gpubench.suites"


def _modules() -> dict[str, Path]:
    found = {}
    for base, package in ((ROOT / "gpubench", "gpubench"), (ROOT / "suites", SUITES)):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _imports(name: str, path: Path, modules: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The gpubench modules ``name`` imports anywhere in its source (``from a import b`` counts b where b is one
    of ``modules``, else a)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            subs = [f"{base}.{a.name}" for a in node.names]
            out.update(m for m in subs if m in modules)
            if any(m not in modules for m in subs):
                out.add(base)
    return {m for m in out if m == "gpubench" or m.startswith("gpubench.")}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {m for m in _imports(name, path, set(modules)) if m in modules} for name, path in modules.items()}


def _unit(module: str) -> str:
    """gpubench.ranks.group → gpubench.ranks; gpubench.run.runner → gpubench.run.runner; gpubench → gpubench."""
    return ".".join(module.split(".")[:2])


def test_the_graph_sees_imports_inside_functions():
    graph = _graph()
    # gpubench.report imports the registry inside a function only: a reader of top-level imports would miss it.
    assert "gpubench.registry" in graph["gpubench.report"]
    assert len(graph) > 50 and sum(map(len, graph.values())) > 200


def test_no_module_outside_the_suites_imports_a_suite():
    graph = _graph()
    bad = sorted(f"{m} imports {i}" for m, deps in graph.items() if not m.startswith(SUITES)
                 for i in deps if i.startswith(SUITES + "."))
    assert not bad, "the library must not import a suite (a suite hands the library what it needs):\n" + "\n".join(bad)
    # Not even the suites' package: the registry loads it by name at run time, as it loads third-party suites.
    users = sorted(m for m, deps in graph.items() if not m.startswith(SUITES) and SUITES in deps)
    assert not users


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_packages():
    units: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        # gpubench/__init__.py holds the version only; every module may read it.
        units.setdefault(_unit(module), set()).update(
            _unit(d) for d in deps if _unit(d) not in (_unit(module), "gpubench"))
    cycles = _cycles(units)
    assert not cycles, "import cycles between packages/modules: " + "; ".join(" ↔ ".join(c) for c in cycles)


# The floors of the house, bottom first: a unit imports only units of its own floor or below. Each package's
# __init__ says what it owns and what it may import; this holds them to it.
FLOORS = (
    ("gpubench", "gpubench.errors", "gpubench.units", "gpubench.files", "gpubench.child", "gpubench.kernels",
     "gpubench.nccltests"),
    ("gpubench.machine",),
    ("gpubench.backends",),
    ("gpubench.options", "gpubench.suite", "gpubench.registry", "gpubench.declared"),
    ("gpubench.results",),
    ("gpubench.console", "gpubench.ranks"),
    ("gpubench.timing",),
    ("gpubench.run",),
    ("gpubench.compare",),
    ("gpubench.report",),
    ("gpubench.check",),
    ("gpubench.toolkit",),
    (SUITES, "gpubench.pytest_plugin"),
    ("gpubench.commands", "gpubench.cli", "gpubench.__main__"),
)


def _floor(unit: str) -> int:
    unit = SUITES if unit.startswith(SUITES) else unit
    return next(k for k, floor in enumerate(FLOORS) if unit in floor)


def test_every_unit_has_a_floor_and_imports_nothing_above_it():
    graph = _graph()
    units = {SUITES if _unit(m).startswith(SUITES) else _unit(m) for m in graph}
    assert units <= {u for floor in FLOORS for u in floor}, sorted(units - {u for f in FLOORS for u in f})
    up = sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps
                if _floor(_unit(d)) > _floor(_unit(m)))
    assert not up, "imports that climb a floor (tests/test_layers.py FLOORS):\n" + "\n".join(up)


def test_each_package_says_what_it_owns_and_what_it_may_import():
    for package in sorted({u for floor in FLOORS for u in floor if (ROOT / Path(*u.split("."))).is_dir()}):
        if package in ("gpubench", SUITES):
            continue
        doc = ast.get_docstring(ast.parse((ROOT / Path(*package.split(".")) / "__init__.py").read_text())) or ""
        assert len(doc.splitlines()) >= 3 and "import" in doc, f"{package}/__init__.py says nothing of its floor"


def test_the_root_holds_at_most_twelve_modules():
    root = sorted(p.name for p in (ROOT / "gpubench").glob("*.py"))
    assert len(root) <= 12, root


def test_the_ranks_sit_below_the_runner():
    graph = _graph()
    assert "gpubench.ranks" in {_unit(d) for d in graph["gpubench.run.runner"]}
    assert not any(_unit(d) == "gpubench.run" for m, deps in graph.items() if _unit(m) == "gpubench.ranks"
                   for d in deps)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules():
    # Inside a package too: two modules that import each other (one of them from inside a function, or below
    # its other imports) can only be read together and load in one order.
    graph = {m: {d for d in deps if d != "gpubench"} for m, deps in _graph().items()}
    cycles = _cycles(graph)
    assert not cycles, "import cycles between modules: " + "; ".join(" ↔ ".join(c) for c in cycles)


def _command_line_leaks(name: str, path: Path) -> list[str]:
    """Where ``name`` takes in the command line's parse: an import of argparse, the name ``Namespace``, or a
    function parameter called ``args`` (``*args`` is a function's own, and fine)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names) or \
                isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            found.append(f"{name}:{node.lineno} imports argparse")
        elif isinstance(node, ast.Name) and node.id == "Namespace" or \
                isinstance(node, ast.Attribute) and node.attr == "Namespace":
            found.append(f"{name}:{node.lineno} names Namespace")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            if any(p.arg == "args" for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)):
                found.append(f"{name}:{node.lineno} {getattr(node, 'name', 'lambda')}() takes args")
    return found


def test_the_command_line_stops_at_the_commands():
    # gpubench/commands/ turns the parsed command line into a typed request (gpubench.run.request); below it, nothing
    # reads argparse's Namespace, so what a layer needs is written in its signature. gpubench.cli.reference sits
    # above the parsers (it writes docs/cli.md from them), not below them.
    leaks = sorted(leak for name, path in _modules().items()
                   if not (name in ("gpubench.cli", "gpubench.cli.reference") or name.startswith("gpubench.commands"))
                   for leak in _command_line_leaks(name, path))
    assert not leaks, "the command line's Namespace reaches below gpubench/commands/:\n" + "\n".join(leaks)


def test_the_leak_finder_finds_a_leak(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import argparse\ndef f(args, *rest): pass\ndef g(*args): return argparse.Namespace()\n")
    assert _command_line_leaks("m", src) == ["m:1 imports argparse", "m:2 f() takes args", "m:3 names Namespace"]


# Strings in gpubench/ that equal a built-in suite's name but do not name the suite: (module, string) → why.
NOT_SUITE_NAMES = {
    ("gpubench.machine.contention", "comm"): "/proc/<pid>/comm: the kernel's file of a process's name",
    ("gpubench.kernels.matmul_triton", "gemm"): "the GEMM kernel's key in the launch-configuration files "
                                                "(gpubench/kernels/configs/*.json)",
    ("gpubench.kernels.matmul_triton", "autotune"): "where a launch configuration came from: Triton's autotuner",
    ("gpubench.kernels.config_export", "gemm"): "the GEMM kernel's name in a kernel sweep's `kernel` column and "
                                                "in the launch-configuration files",
}


def test_no_module_outside_the_suites_names_a_suite():
    """Library code selects rows and runs by what suites declare (their tags, Suite attributes read through the
    registry), never by a suite's name written into it."""
    from gpubench.registry import builtin_suites

    suites = set(builtin_suites())
    found, used = [], set()
    for module, path in _modules().items():
        if module.startswith(SUITES):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in suites:
                if (module, node.value) in NOT_SUITE_NAMES:
                    used.add((module, node.value))
                else:
                    found.append(f"{module}:{node.lineno}: {node.value!r}")
    assert not found, "library code names a suite (declare it on the suite instead):\n" + "\n".join(found)
    assert used == set(NOT_SUITE_NAMES), f"allowed but no longer there: {set(NOT_SUITE_NAMES) - used}"


def test_one_place_builds_a_row():
    # A result row is built by gpubench/run/rows.py alone (beside the schema): a dict display naming a row's suite,
    # metric, value and samples anywhere else is a second row builder, free to drift from the schema and from
    # rows.finish (compare's own tables, which hold no samples, are not result rows).
    found = []
    for name, path in _modules().items():
        if name == "gpubench.run.rows":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"suite", "metric", "value", "samples"} <= keys:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "rows built outside gpubench/run/rows.py (use rows.figure and rows.finish):\n" + "\n".join(found)


# A module name found in more than one package means the same kind of thing in each (the base class of the package's
# family, its fake, a format of its outputs, what its formats share, a command's module and the logic it runs).
SHARED_NAMES = {
    "base.py": "the base class of the package's family (backends, the check's fact readers)",
    "fake.py": "the fake of the package's family (a backend, the check's fact readers)",
    "common.py": "what the package's modules share (compare's and check's outputs, the check's rules)",
    "json_.py": "the JSON format of an outputs package", "junit.py": "the JUnit format of an outputs package",
    "page.py": "an HTML page (the report's, the history's)",
    "charts.py": "a suite's charts, and what they draw with (gpubench.toolkit.charts)",
    "console.py": "what the terminal shows (gpubench.console; gpubench.toolkit.console offers it to suites)",
    "calibrate.py": "gpubench calibrate: its command and its logic", "roofline.py": "gpubench roofline: its command "
    "and the report's roofline", "sensitivity.py": "compare's sensitivity: its figures and its output format",
    "judge.py": "what a check decides from its figures (the node's, the fabric's)",
    "table.py": "a table: the check's terminal table, the comm suite's table of rows",
}


def test_no_two_modules_share_a_name_for_different_things():
    by_name: dict[str, list[str]] = {}
    for folder in ("gpubench", "suites"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "__init__.py" and "__pycache__" not in path.parts:
                by_name.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    shared = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert set(shared) <= set(SHARED_NAMES), {n: p for n, p in shared.items() if n not in SHARED_NAMES}
