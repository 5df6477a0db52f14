"""A=A false alarms and a forced slowdown through `gpubench compare`'s own logic (issue 8's GPU acceptance):

    python tests/gpu/aa_pairs.py RUNS_ROOT SUITE [SLOW_RUN ...]      (THRESHOLDS=FILE.toml to use calibrated ones)

Every pair of the SUITE's runs under RUNS_ROOT (same machine, same command) is compared both ways: any WORSE
is a false alarm. Each SLOW_RUN (the same suite with a slower configuration forced) is then compared against
every A run: the cases that changed should read WORSE. Prints one line per comparison and a summary.
"""
import itertools
import os
import sys
from collections import Counter
from pathlib import Path

from gpubench.compare import thresholds
from gpubench.compare.comparison import build

th = thresholds.load(os.environ["THRESHOLDS"]) if os.environ.get("THRESHOLDS") else None

root, suite, slow = Path(sys.argv[1]), sys.argv[2], [Path(p) for p in sys.argv[3:]]
runs = sorted(p for p in root.rglob("run.json") if (p.parent / f"{suite}.parquet").exists()
              and p.parent not in slow)
runs = [p.parent for p in runs]
alarms, pairs, total, alarmed = Counter(), 0, Counter(), 0
for a, b in itertools.permutations(runs, 2):
    r = build(a, b, thresholds=th)
    c = r.counts()
    total.update(c)
    pairs += 1
    if c.get("WORSE"):
        alarmed += 1
        worse = r.rows[r.rows["verdict"] == "WORSE"]
        for _, row in worse.iterrows():
            alarms[f"{row['case']} {row['metric']}"] += 1
        print(f"A=A {a.name} -> {b.name}: {r.summary()}")
print(f"{suite}: {len(runs)} runs, {pairs} ordered pairs, verdicts {dict(total)}; "
      f"pairs with a WORSE: {alarmed} ({sum(alarms.values())} WORSE verdicts on {len(alarms)} figures)")
for k, v in alarms.most_common():
    print(f"  false alarm x{v}: {k}")
for s in slow:
    for a in runs:
        r = build(a, s, thresholds=th)
        worse = r.rows[r.rows["verdict"] == "WORSE"]
        print(f"slow {s.name} vs {a.name}: {r.summary()}; WORSE cases: "
              f"{sorted(set(worse['case']))[:6]}{' ...' if worse['case'].nunique() > 6 else ''}")
