"""busbw of one comm run over another's, case by case, as a collective × size table (issue 45's acceptance).

    python3 tests/gpu/bus_ratios.py LABEL RUN_A[,RUN_A2...] RUN_B[,RUN_B2...] [--from 1M] [--band 0.95 1.05]

Each cell is A's busbw / B's for one (collective, bytes, inplace), each side the median over its runs where it has
several (rounds of one command, alternated); cells outside the band are starred and counted on the last line, so
a log of several tables says at a glance which pairs hold.
"""

import argparse
import statistics

from gpubench import results
from gpubench.units import parse_size


def busbw(runs):
    per_run = []
    for run in runs.split(","):
        df = results.load(run)
        df = df[(df.metric == "busbw") & (df.status == "ok")]
        per_run.append({(r.collective, int(r.bytes), bool(r.inplace)): float(r.value) for r in df.itertuples()})
    keys = set.intersection(*(set(d) for d in per_run))
    return {k: statistics.median(d[k] for d in per_run) for k in keys}


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("label")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--from", dest="lo", default="1M", type=parse_size)
    p.add_argument("--band", nargs=2, type=float, default=(0.95, 1.05))
    args = p.parse_args()
    a, b = busbw(args.a), busbw(args.b)
    keys = sorted(k for k in set(a) & set(b) if k[1] >= args.lo and b[k] > 0)
    sizes = sorted({k[1] for k in keys})
    rows = sorted({(k[0], k[2]) for k in keys})
    lo, hi = args.band
    print(f"{args.label}: busbw A/B, A={args.a} B={args.b}, band {lo}-{hi}")
    both = {(c, i) for c, _, i in a} & {(c, i) for c, _, i in b}  # placements both runs measured at all
    missing = sorted(k for k in set(a) ^ set(b) if k[1] >= args.lo and (k[0], k[2]) in both)
    if missing:
        print("  not in both (failed or not run): "
              + ", ".join(f"{c} {size_label(s)} {'in' if i else 'out'}" for c, s, i in missing))
    print(f"  {'collective':20s}" + "".join(f"{size_label(s):>22s}" for s in sizes))
    out = []
    for coll, inplace in rows:
        cells = []
        for s in sizes:
            k = (coll, s, inplace)
            if k not in a or k not in b:
                cells.append(f"{'-':>22s}")
                continue
            r = a[k] / b[k]
            bad = not lo <= r <= hi
            out += [k] if bad else []
            cells.append(f"{a[k]:.1f}/{b[k]:.1f}={r:.3f}{'*' if bad else ' '}".rjust(22))
        print(f"  {coll + (' in' if inplace else ' out'):20s}" + "".join(cells))
    print(f"{args.label}: {len(keys) - len(out)} of {len(keys)} cells in band; outside: "
          + (", ".join(f"{c} {size_label(s)} {'in' if i else 'out'}" for c, s, i in out) or "none"))


if __name__ == "__main__":
    main()
