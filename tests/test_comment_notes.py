"""Comments say why; measured evidence (a date, a GPU, a figure) lives in docs/measurements.md or a result folder's
README, and the code links to it. A dated note in a comment or docstring is a lab diary kept in the code."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATE = re.compile(r"20\d\d-\d\d-\d\d")
# a figure said of a GPU one measured ("on 4 × H100 it read 92.4"), dated or not; a spec's key names no count
ON_A_GPU = re.compile(r"\b(?:one|an?|\d+ ?[x×]) ?(?:H100|H200|H800|A100|B200|MI\d{3}X?)\b")


def _notes(source: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and each bare string statement (docstrings) of ``source`` holding an ISO date
    or a figure of a GPU one measured."""
    def note(text: str) -> re.Match | None:
        return DATE.search(text) or ON_A_GPU.search(text)

    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT and note(tok.string)]
    for node in ast.walk(ast.parse(source)):
        text = node.value.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) else None
        if isinstance(text, str) and (m := note(text)):
            found.append((node.lineno + text[:m.start()].count("\n"), m.group()))
    return sorted(found)


def _dated() -> dict[str, list[tuple[int, str]]]:
    files = sorted(p for folder in ("gpubench", "suites") for p in (ROOT / folder).rglob("*.py"))
    out = {}
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if notes := _notes(path.read_text()):
            out[rel] = notes
    return out


def _say(dated: dict[str, list[tuple[int, str]]]) -> str:
    return "\n".join(f"{f}: {len(n)} dated note(s), first at line {n[0][0]}" for f, n in dated.items())


def test_the_finder_sees_a_date_in_a_comment_and_a_docstring_but_not_in_code():
    source = ('def f():\n    """Measured on 2026-11-25."""\n    x = "2026-11-25"  # H100, 2026-11-26\n    return x\n'
              '"""On 4 × H100 it read 92.4."""\nY = "NVIDIA H100 SXM5"  # a spec key, no measurement\n')
    assert _notes(source) == [(2, "2026-11-25"), (3, "# H100, 2026-11-26"), (5, "4 × H100")]


def test_no_dated_note_in_a_comment_or_docstring():
    dated = _dated()
    assert not dated, "dated notes (move the evidence to docs/measurements.md):\n" + _say(dated)
