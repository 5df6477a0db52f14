"""Native comm rows against nccl-tests rows of the same command (issue acceptance): busbw ratio per case.

    python3 tests/gpu/compare_comm.py NATIVE_RUN NCCL_TESTS_RUN [--graph-native RUN --graph-nt RUN]
    python3 tests/gpu/compare_comm.py --rounds NATIVE_1 NT_1 NATIVE_2 NT_2 ...

With --rounds, each side's figure per case is the median over its runs (alternated in one command by
run_comm.sh ROUNDS=N): between processes, busbw at 4 GiB moves up to 8 % on both tools (2 x H200, 2026-11-23)
while one run's CV stays under 1 %, so one pair of runs compares two draws of that spread.
"""

import argparse
import statistics

from gpubench import results


def busbw(run):
    df = results.load(run)
    df = df[(df.metric == "busbw") & (df.status == "ok")]
    return {(r.collective, int(r.bytes), bool(r.inplace)): float(r.value) for r in df.itertuples()}


def median_busbw(runs):
    per_run = [busbw(r) for r in runs]
    keys = set.intersection(*(set(d) for d in per_run))
    return {k: statistics.median(d[k] for d in per_run) for k in keys}


def table(native, nt, floor_bytes, need, label):
    a, b = (median_busbw(native), median_busbw(nt)) if isinstance(native, list) else (busbw(native), busbw(nt))
    worst = None
    print(f"{label}: collective bytes inplace native nccl-tests ratio")
    for key in sorted(set(a) & set(b)):
        if not b[key]:  # a world of one GPU moves nothing across the bus: busbw 0 on both sides
            print(f"  {key[0]:15s} {key[1]:>11d} {str(key[2]):5s} {a[key]:8.2f} {b[key]:8.2f}      - no bus traffic")
            continue
        ratio = a[key] / b[key]
        mark = ""
        if key[1] >= floor_bytes:
            mark = "ok" if ratio >= need else "FAIL"
            worst = ratio if worst is None else min(worst, ratio)
        print(f"  {key[0]:15s} {key[1]:>11d} {str(key[2]):5s} {a[key]:8.2f} {b[key]:8.2f} {ratio:6.3f} {mark}")
    print(f"{label}: worst ratio at >= {floor_bytes} B: {worst} (need >= {need})")


p = argparse.ArgumentParser()
p.add_argument("native", nargs="?")
p.add_argument("nt", nargs="?")
p.add_argument("--graph-native")
p.add_argument("--graph-nt")
p.add_argument("--rounds", nargs="+", metavar="RUN", help="native and nccl-tests runs, alternating")
a = p.parse_args()
if a.rounds:
    if len(a.rounds) % 2:
        p.error("--rounds takes pairs: NATIVE NT NATIVE NT ...")
    table(a.rounds[0::2], a.rounds[1::2], 64 << 20, 0.98, f"eager, median of {len(a.rounds) // 2} rounds")
else:
    table(a.native, a.nt, 64 << 20, 0.98, "eager")
if a.graph_native and a.graph_nt:
    table(a.graph_native, a.graph_nt, 1 << 20, 0.90, "graph")
