"""busbw of one comm run over another's, case by case, as a collective × size table (issue 45's acceptance).

    python3 tests/gpu/bus_ratios.py LABEL RUN_A RUN_B [--from 1M] [--band 0.95 1.05] [--inplace both|in|out]

Each cell is A's busbw / B's for one (collective, bytes, inplace); cells outside the band are starred and counted
on the last line, so a log of several tables says at a glance which pairs hold.
"""

import argparse

from gpubench import results
from gpubench.units import parse_size


def busbw(run):
    df = results.load(run)
    df = df[(df.metric == "busbw") & (df.status == "ok")]
    return {(r.collective, int(r.bytes), bool(r.inplace)): float(r.value) for r in df.itertuples()}


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
    print(f"  {'collective':24s}" + "".join(f"{size_label(s):>16s}" for s in sizes))
    out = []
    for coll, inplace in rows:
        cells = []
        for s in sizes:
            k = (coll, s, inplace)
            if k not in a or k not in b:
                cells.append(f"{'-':>16s}")
                continue
            r = a[k] / b[k]
            bad = not lo <= r <= hi
            out += [k] if bad else []
            cells.append(f"{a[k]:6.1f}/{b[k]:6.1f}={r:4.2f}{'*' if bad else ' '}"[-16:].rjust(16))
        print(f"  {coll + (' in' if inplace else ' out'):24s}" + "".join(cells))
    print(f"{args.label}: {len(keys) - len(out)} of {len(keys)} cells in band; outside: "
          + (", ".join(f"{c} {size_label(s)} {'in' if i else 'out'}" for c, s, i in out) or "none"))


if __name__ == "__main__":
    main()
