"""Measured evidence (a date, a GPU and its figure) lives in docs/measurements.md or a results/reference/ folder's
README; the code says why in a line or two and points there. Read from the comments and strings of suites/."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
ON_A_GPU = re.compile(r"\b(?:one|an?|\d+ ?[x×]) ?(?:H100|H200|H800|A100|B200|MI\d{3}X?)\b")


def _dated_notes(base: Path) -> list[str]:
    out = []
    for path in sorted(base.rglob("*.py")):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type in (tokenize.COMMENT, tokenize.STRING) and (DATE.search(tok.string)
                                                                    or ON_A_GPU.search(tok.string)):
                out.append(f"{path.relative_to(base.parent)}:{tok.start[0]} {tok.string.strip()[:90]}")
    return out


def test_no_dated_measurement_note_in_a_suite():
    notes = _dated_notes(ROOT / "suites")
    assert not notes, "move these to docs/measurements.md and point there:\n" + "\n".join(notes)


def test_the_reader_finds_a_date_and_a_gpu_in_a_comment_or_a_docstring(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "m.py").write_text('"""On 4 × H100 it read 92.4."""\n\nX = 1  # 2026-11-23: 35 %\n'
                                         'Y = "NVIDIA H100 SXM5"  # a spec key, no measurement\n')
    assert [n.split(" ")[0] for n in _dated_notes(tmp_path / "s")] == ["s/m.py:1", "s/m.py:3"]
