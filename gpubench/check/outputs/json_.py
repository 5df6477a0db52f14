"""JSON: the whole verdict, for tools (docs/schema.md describes it; ``schema.json`` in gpubench/check is its JSON
Schema). NaN and infinities are null (JSON has none), numpy scalars plain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpubench.check.verdicts import NodeVerdict
from gpubench.compare.outputs.common import jsonable

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema.json"


def check(node: NodeVerdict) -> str:
    """The verdict as JSON (:data:`SCHEMA_PATH`)."""
    return json.dumps(jsonable(node.as_dict()), indent=2, allow_nan=False) + "\n"


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :func:`check`'s document."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


__all__ = ["check", "load_schema", "SCHEMA_PATH"]
