"""What each case of a run cost (``case_s``), the largest first, with its suite's total and the run's wall time:

    python3 tests/gpu/case_cost.py RUN_DIR [TOP]

For finding where a quick night's time goes (issue 48) on the machine that ran it."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from gpubench import results
from gpubench.console import cost_line


def main(argv: list[str]) -> int:
    run, top = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 25
    df = results.load(run)
    one = df[df["case_s"].notna()].drop_duplicates(["suite", "case", "device_index"])
    meta = json.loads((run / "run.json").read_text())
    wall = (datetime.fromisoformat(meta["end_time"]) - datetime.fromisoformat(meta["start_time"])).total_seconds()
    print(f"{run.name}: run {wall:.1f} s (start to end as run.json has them); {cost_line(df)}")
    cols = [c for c in ("suite", "case", "processes", "sets", "warmup_s", "n", "case_s") if c in one.columns]
    print(one.sort_values("case_s", ascending=False)[cols].head(top).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
