"""history-json (``gpubench export DIR --format history-json``): the history document itself, as the page embeds
it (gpubench.report.history.document says what it holds)."""

from __future__ import annotations

import json
from typing import Any


def history(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False) + "\n"


__all__ = ["history"]
