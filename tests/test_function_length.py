"""No function in gpubench/ or suites/ is longer than one person can hold: 80 lines, read from the source (a function's
nested functions count within it, as a reader meets them)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80


def _long_functions(base: Path, limit: int = LIMIT) -> list[str]:
    out = []
    for path in sorted(base.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out.append(f"{path.relative_to(base)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_in_the_library_or_a_suite_over_80_lines():
    long = _long_functions(ROOT / "gpubench") + [f"suites/{x}" for x in _long_functions(ROOT / "suites")]
    assert not long, "split these into named steps:\n" + "\n".join(long)


def test_the_measure_counts_what_it_should(tmp_path):
    (tmp_path / "m.py").write_text("def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 80 + "    return x\n")
    assert _long_functions(tmp_path) == ["m.py:5 long (82 lines)"]


def test_no_module_in_the_library_or_a_suite_over_500_lines():
    # A module past 500 lines holds more than one thing: move a cohesive part out, named for what it does.
    long = [f"{p.relative_to(ROOT)} ({n} lines)" for base in ("gpubench", "suites")
            for p in sorted((ROOT / base).rglob("*.py")) if (n := len(p.read_text().splitlines())) > 500]
    assert not long, "split these modules:\n" + "\n".join(long)
