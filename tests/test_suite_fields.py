"""Every field a suite can set on a Workload, its Method and a Graph is documented in docs/writing-a-suite.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpubench.suite import Graph, Method, Workload

DOC = Path(__file__).resolve().parent.parent / "docs" / "writing-a-suite.md"
HEADING = "## Workload and Method fields"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/writing-a-suite.md has no {HEADING!r} section"
    rest = text.split(HEADING, 1)[1]
    return rest.split("\n## ", 1)[0]


@pytest.mark.parametrize("cls", [Workload, Method, Graph], ids=lambda c: c.__name__)
def test_every_field_is_documented(cls):
    section = _section()
    missing = [f.name for f in dataclasses.fields(cls) if f"| `{f.name}` |" not in section]
    assert not missing, f"{cls.__name__} fields missing from docs/writing-a-suite.md ({HEADING}): {missing}"


def test_method_is_frozen_and_the_default():
    w = Workload(run=lambda x: x, make_inputs=lambda: 0)
    assert w.method == Method()
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.method.hold = True  # type: ignore[misc]
