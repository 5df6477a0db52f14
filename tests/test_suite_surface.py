"""Suites import the library through one public surface, gpubench/toolkit/ (docs/writing-a-suite.md): the built-in
suites and the model plugin suite of the tests, read from the source (imports inside functions too)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

from test_layers import ROOT, SUITES, _imports, _modules

SURFACE = "gpubench.toolkit"
PLUGIN = ROOT / "tests" / "plugin" / "gpubench_square.py"


def _on_surface(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in (SURFACE, SUITES))


def _past_the_surface(name: str, path: Path, modules: set[str]) -> list[str]:
    """Where module ``name`` imports gpubench other than through the toolkit or a suite: its import statements, and
    ``import_module``/``__import__`` of a name written out."""
    found = {m for m in _imports(name, path, modules) if not _on_surface(m)}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__"):
            target = str(node.args[0].value)
            if target.split(".")[0] == "gpubench" and not _on_surface(target):
                found.add(target)
    return sorted(f"{name} imports {m}" for m in found)


def test_suites_import_the_library_through_the_toolkit():
    modules = _modules()
    readers = {name: path for name, path in modules.items() if name.startswith(SUITES)}
    assert len(readers) > 20  # every built-in suite's module, not a folder missed
    readers["gpubench_square"] = PLUGIN  # the docs' model of a plugin suite goes the same way
    bad = [leak for name, path in readers.items() for leak in _past_the_surface(name, path, set(modules))]
    assert not bad, ("a suite imports the library past its surface (import it from gpubench.toolkit; add a name "
                     "there if it lacks one):\n" + "\n".join(bad))


def test_the_surface_finder_finds_imports_past_it(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import gpubench\nfrom gpubench import results\nfrom gpubench.toolkit import results as r\n"
                   "from gpubench.suites.comm import table\nfrom gpubench.toolkit.charts import Chart\n"
                   "def f():\n    from gpubench.timing import fills\n"
                   "    return importlib.import_module('gpubench.units')\n")
    modules = {"gpubench.results", "gpubench.toolkit.results", "gpubench.timing.fills"}
    assert _past_the_surface("gpubench.suites.m", src, modules) == [
        "gpubench.suites.m imports gpubench", "gpubench.suites.m imports gpubench.results",
        "gpubench.suites.m imports gpubench.timing.fills", "gpubench.suites.m imports gpubench.units"]


def test_only_suites_import_the_toolkit():
    # The toolkit is the suites' way in; the library beneath it imports the modules that own each name.
    users = sorted(name for name, path in _modules().items() if not _on_surface(name)
                   for m in _imports(name, path) if _on_surface(m) and m.startswith(SURFACE))
    assert not users, users


def _toolkit() -> dict[str, Path]:
    return {name: path for name, path in _modules().items() if name == SURFACE or name.startswith(SURFACE + ".")}


def test_the_toolkit_only_re_exports():
    # One place owns each thing: the toolkit names what the library holds and writes nothing of its own, but for
    # the loader of the names it loads on first use (gpubench.toolkit.loaded_on_use).
    for name, path in _toolkit().items():
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{name} says nothing of what it offers and to whom"
        for node in tree.body[1:]:
            lazy = isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING" or \
                isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id in ("__all__", "_LAZY",
                                                     "__getattr__") for t in node.targets) or \
                name == SURFACE and isinstance(node, ast.FunctionDef) and node.name == "loaded_on_use"
            assert lazy or isinstance(node, (ast.Import, ast.ImportFrom)), f"{name}:{node.lineno} is not a re-export"


def _lazy_names(module) -> dict[str, str]:
    return dict(getattr(module, "_LAZY", {}))


def test_every_name_the_toolkit_offers_is_there():
    for name in _toolkit():
        module = importlib.import_module(name)
        lazy = _lazy_names(module)
        held = {n for n, v in vars(module).items() if n[0].isalpha() and n not in ("annotations", "importlib",
                "TYPE_CHECKING", "Any", "Callable", "Mapping", "loaded_on_use") and
                not getattr(v, "__name__", "").startswith(SURFACE + ".")}  # a part of the toolkit is not a name of it
        assert set(module.__all__) == held | set(lazy), name
        for n in module.__all__:
            owner = lazy.get(n, "").partition(":")[0]
            if owner.startswith("gpubench.kernels."):  # these import triton
                assert importlib.util.find_spec(owner), f"{name}.{n}"
            else:
                assert getattr(module, n) is not None, f"{name}.{n}"


def test_a_name_loaded_on_first_use_loads_its_owner_then():
    probe = ("import sys; import gpubench.toolkit.workloads, gpubench.toolkit.kernels; "
             "before = {m for m in ('gpubench.run.request', 'gpubench.timing.engine', 'gpubench.machine.topology', "
             "'numpy', 'triton') if m in sys.modules}; "
             "from gpubench.toolkit import RunRequest; from gpubench.toolkit.workloads import FULL, topology; "
             "print(sorted(before), 'gpubench.run.request' in sys.modules, 'gpubench.timing.engine' in sys.modules, "
             "topology.__name__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "True", "True", "gpubench.machine.topology"]


HEAVY = ("torch", "triton", "matplotlib", "pandas", "numpy")
# What importing each part of the surface may load of HEAVY: a suite pays for what it uses (matplotlib not even for
# charts: pyplot() loads it when a chart is drawn).
COST = {"": (), "workloads": (), "console": (), "nccl": (), "kernels": (),
        "charts": ("numpy", "pandas"), "results": ("numpy", "pandas"), "ranks": ()}


def test_each_part_of_the_toolkit_loads_only_what_its_names_need():
    assert set(COST) == {n[len(SURFACE) + 1:] for n in _toolkit()}
    probe = ("import importlib, json, sys; importlib.import_module(sys.argv[1]); "
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))")
    for part, allowed in COST.items():
        name = f"{SURFACE}.{part}" if part else SURFACE
        out = subprocess.run([sys.executable, "-c", probe, name], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout) == sorted(allowed), name
