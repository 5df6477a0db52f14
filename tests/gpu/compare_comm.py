"""Native comm rows against nccl-tests rows of the same command (issue acceptance): busbw ratio per case.

    python3 tests/gpu/compare_comm.py NATIVE_RUN NCCL_TESTS_RUN [--graph-native RUN --graph-nt RUN]
"""

import argparse

from gpubench import results


def busbw(run):
    df = results.load(run)
    df = df[(df.metric == "busbw") & (df.status == "ok")]
    return {(r.collective, int(r.bytes), bool(r.inplace)): float(r.value) for r in df.itertuples()}


def table(native, nt, floor_bytes, need, label):
    a, b = busbw(native), busbw(nt)
    worst = None
    print(f"{label}: collective bytes inplace native nccl-tests ratio")
    for key in sorted(set(a) & set(b)):
        ratio = a[key] / b[key]
        mark = ""
        if key[1] >= floor_bytes:
            mark = "ok" if ratio >= need else "FAIL"
            worst = ratio if worst is None else min(worst, ratio)
        print(f"  {key[0]:15s} {key[1]:>11d} {str(key[2]):5s} {a[key]:8.2f} {b[key]:8.2f} {ratio:6.3f} {mark}")
    print(f"{label}: worst ratio at >= {floor_bytes} B: {worst} (need >= {need})")


p = argparse.ArgumentParser()
p.add_argument("native")
p.add_argument("nt")
p.add_argument("--graph-native")
p.add_argument("--graph-nt")
a = p.parse_args()
table(a.native, a.nt, 64 << 20, 0.98, "eager")
if a.graph_native and a.graph_nt:
    table(a.graph_native, a.graph_nt, 1 << 20, 0.90, "graph")
