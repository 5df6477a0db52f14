"""Confirmation of WORSE verdicts by a rerun: a figure fails a night only if it is WORSE twice.

One night's WORSE can be a passing disturbance (a clock dip, a neighbour's burst, a bad placement of one
process's buffers). PyTorch's HUD calls a series regressed only after two consecutive violating points; the
nightly gate does the same at the scale of one night, cheaply: it measures again, in a fresh process, only the
cases whose figures came out WORSE, and compares that rerun with the same baseline.

- :func:`plan` turns compare's JSON output into what to rerun: the suites and a ``--filter`` regex that matches
  exactly those cases. A WORSE derived figure (computed from other cases, such as launch's per-node graph
  cost) reruns its whole suite, since which cases it comes from is the suite's business.
- :func:`apply` keeps a row WORSE only where the rerun's verdict is WORSE too; any other rerun verdict makes it
  UNKNOWN with a note saying what the rerun saw. A WORSE row the rerun did not measure stays WORSE (no
  evidence is not an acquittal).

``python -m gpubench.compare.confirm COMPARE.json RUN_DIR`` prints the plan for ci/nightly.sh: the suites on
the first line and the regex on the second, or nothing when nothing is WORSE.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench import results
from gpubench.compare.verdict import COMPARED, UNKNOWN, WORSE
from gpubench.errors import UsageError

DERIVED_STOP = "derived"  # the runner's stop column for a suite's derived rows


def worse_cases(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(suite, case) of every WORSE row of a compare JSON document, in its order, once each."""
    out = [(str(r["suite"]), str(r["case"])) for r in doc.get("rows", [])
           if r.get("status") == COMPARED and r.get("verdict") == WORSE]
    return list(dict.fromkeys(out))


def plan(doc: dict[str, Any], current: pd.DataFrame) -> tuple[list[str], str] | None:
    """(suites, regex) that rerun the WORSE cases of ``doc`` (compare's JSON) measured in ``current`` (the
    night's run), or None when nothing is WORSE."""
    worse = worse_cases(doc)
    if not worse:
        return None
    measured = current[current["stop"].astype(str) != DERIVED_STOP] if "stop" in current.columns else current
    ids: dict[str, list[str]] = {}
    for suite, case in worse:
        own = measured.loc[measured["suite"] == suite, "case"].astype(str)
        cases = [case] if (own == case).any() else list(dict.fromkeys(own))  # derived: the whole suite
        ids.setdefault(suite, []).extend(cases)
    every = list(dict.fromkeys(c for cases in ids.values() for c in cases))
    if not every:
        return None
    return list(ids), "^(" + "|".join(re.escape(c) for c in every) + ")$"


def _change(r: dict[str, Any]) -> str:
    ch = r.get("change")
    try:
        v = float(ch)
    except (TypeError, ValueError):
        return ""
    return f" {round(100 * v, 1) + 0.0:+.1f}%" if math.isfinite(v) else ""  # + 0.0: no "-0.0%"


def apply(rows: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (compare's verdict rows) with each WORSE row kept only where ``rerun`` (the verdict rows of the
    same baseline against the rerun) is WORSE as well."""
    seen = {(r["suite"], r["case"], r["metric"]): r for r in rerun.to_dict("records")}
    rows = rows.copy()
    for i, r in rows.iterrows():
        if r["status"] != COMPARED or r["verdict"] != WORSE:
            continue
        again = seen.get((r["suite"], r["case"], r["metric"]))
        if again is None or again.get("status") != COMPARED:
            note = "not confirmed: the rerun did not measure it"
            rows.at[i, "note"] = "; ".join(x for x in (str(r["note"] or ""), note) if x)
            continue
        if again.get("verdict") == WORSE:
            note = f"confirmed by a rerun ({_change(again).strip()})"
        else:
            rows.at[i, "verdict"] = UNKNOWN
            note = f"WORSE once, {again.get('verdict')} on a rerun in a fresh process ({_change(again).strip()})"
        rows.at[i, "note"] = "; ".join(x for x in (str(r["note"] or ""), note) if x)
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m gpubench.compare.confirm COMPARE.json RUN_DIR", file=sys.stderr)
        return 2
    try:
        doc = json.loads(Path(argv[0]).read_text())
        current = results.load(argv[1])
    except (OSError, ValueError, UsageError) as e:
        print(f"confirm: {e}", file=sys.stderr)
        return 2
    p = plan(doc, current)
    if p is not None:
        print(",".join(p[0]))
        print(p[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
