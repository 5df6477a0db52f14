"""Sum the phases that sitecustomize.py recorded (rank 0's file): totals, and the median case."""

import json
import statistics
import sys

PHASES = ("prepare", "inputs", "check", "warmup", "timing", "write", "other")

for path in sys.argv[1:]:
    d = json.load(open(path))
    cases = d["cases"]
    tot = {p: sum(c.get(p, 0.0) for c in cases) for p in PHASES}
    med = {p: statistics.median(c.get(p, 0.0) for c in cases) if cases else 0.0 for p in PHASES}
    print(f"{path}: wall {d['wall_s']:.1f} s, start {d['start_s']:.1f} s, {len(cases)} cases "
          f"{sum(c['total'] for c in cases):.1f} s, after {d['end_s']:.2f} s")
    print("  total s:  " + "  ".join(f"{p} {tot[p]:.2f}" for p in PHASES))
    print("  median ms: " + "  ".join(f"{p} {1e3 * med[p]:.1f}" for p in PHASES))
    worst = sorted(cases, key=lambda c: -c["total"])[:3]
    for c in worst:
        print(f"  slowest: {c['case']} {c['total']:.2f} s " + " ".join(f"{p}={c.get(p, 0):.3f}" for p in PHASES)
              + f" samples={c.get('samples')} inner={c.get('inner')} stop={c.get('stop')}")
