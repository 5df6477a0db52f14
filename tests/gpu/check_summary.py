"""Summaries for tests/gpu/check_acceptance.sh:

    python3 check_summary.py PART WALL_S EXIT_CODE CLUSTER_DIR   one check: the newest check.json under CLUSTER_DIR
    python3 check_summary.py --tally SUMMARY                    the idle checks of a summary: PASS, WARN, FAIL, walls
"""

import json
import statistics
import sys
from pathlib import Path


def one(part: str, wall: str, rc: str, root: str) -> None:
    found = sorted(Path(root).rglob("check.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        print(f"{part} wall={wall} rc={rc} state=NONE (no check.json: see {part}.log)")
        return
    doc = json.loads(found[-1].read_text())
    phases = ", ".join(f"{p['what']} {p['wall_s']:.1f}" for p in doc.get("phases", []))
    bound = "; ".join(f"GPU {g['index']} {(g.get('binding') or {}).get('cpus') if (g.get('binding') or {}).get('bound') else 'unbound'}"
                      for g in doc.get("gpus", []))
    print(f"{part} wall={wall} rc={rc} state={doc['state']} check_wall={doc.get('wall_s')} phases=[{phases}] "
          f"bound=[{bound}]")
    for v in doc["verdicts"]:
        if v["state"] in ("WARN", "FAIL"):
            print(f"  {v['state']} {v['target']} {v['check']}: {v['text']}")
    skipped = [f"{v['check']} {v['target']}" for v in doc["verdicts"] if v["state"] == "SKIP"]
    if skipped:
        print(f"  SKIP {len(skipped)}: {', '.join(skipped)}")


def tally(summary: str) -> None:
    lines = [ln for ln in Path(summary).read_text().splitlines() if ln.startswith("idle-")]
    states = [ln.split("state=")[1].split()[0] for ln in lines]
    walls = [float(ln.split("wall=")[1].split()[0]) for ln in lines]
    counts = {s: states.count(s) for s in ("PASS", "WARN", "FAIL", "SKIP", "NONE")}
    # A WARN or FAIL on the idle node is a false alarm; a check that gave no verdict (SKIP: a figure it could not
    # take; NONE: no check.json) is a failure of another kind, counted apart.
    false, none = counts["WARN"] + counts["FAIL"], counts["SKIP"] + counts["NONE"]
    print(f"idle checks: {len(states)}; " + ", ".join(f"{s} {c}" for s, c in counts.items() if c)
          + f"; false alarms on an idle node (WARN or FAIL): {false} of {len(states)}"
          + (f"; no verdict (SKIP or no check.json): {none}" if none else ""))
    if walls:
        print(f"idle wall s: min {min(walls):.1f}, median {statistics.median(walls):.1f}, max {max(walls):.1f}")


if __name__ == "__main__":
    if sys.argv[1] == "--tally":
        tally(sys.argv[2])
    else:
        one(*sys.argv[1:5])
