"""Within one process (issue 47): does the host-timed launch level move while the thread runs busy, and after idle
gaps of which length? 3 s of 10-ms bursts back to back, then bursts after gaps of 0, 0.2, 2, 20 and 200 ms, twice;
each burst's median launch time (sync before each launch) and event poll, and its CPU. Prints each sequence as
F/S (below/above the midpoint of the bursts' 10th and 90th percentiles).
    python3 tests/gpu/host_level_gaps.py OUT.json        (a GPU)
"""
import ctypes
import json
import statistics
import sys
import time

import torch

libc = ctypes.CDLL(None)
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()


def burst(seconds):
    """Per-launch host times (sync before each) for `seconds`; their median, and the CPU."""
    out = []
    end = time.perf_counter() + seconds
    cpu = libc.sched_getcpu()
    while time.perf_counter() < end:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.add_(1.0)
        out.append(time.perf_counter() - t0)
        e = torch.cuda.Event()
        e.record()
        t1 = time.perf_counter()
        while not e.query():
            pass
        out[-1] = (out[-1], time.perf_counter() - t1)
    torch.cuda.synchronize()
    return (statistics.median(o[0] for o in out) * 1e6, statistics.median(o[1] for o in out) * 1e6, cpu,
            libc.sched_getcpu(), len(out))


def main():
    res = {"busy": [], "gaps": {}}
    burst(0.5)  # warm-up
    # continuous: 3 s busy, medians per 10 ms
    for _ in range(300):
        res["busy"].append(burst(0.01))
    for rnd in range(2):
        for gap in (0.0, 0.0002, 0.002, 0.02, 0.2):
            seq = []
            for _ in range(40 if gap < 0.2 else 15):
                if gap:
                    time.sleep(gap)
                seq.append(burst(0.01))
            res["gaps"].setdefault(str(gap), []).append(seq)
    json.dump(res, open(sys.argv[1], "w"))

    allv = sorted(b[0] for b in res["busy"] + [b for seqs in res["gaps"].values() for q in seqs for b in q])
    cut = (allv[len(allv) // 10] + allv[9 * len(allv) // 10]) / 2
    print(f"launch burst medians: p10 {allv[len(allv) // 10]:.2f} p90 {allv[9 * len(allv) // 10]:.2f} us; F below {cut:.2f}")

    def states(seq):
        return "".join("F" if b[0] < cut else "S" for b in seq)

    s = states(res["busy"])
    print(f"busy 3 s, per 10 ms : {s.count('F')}/{len(s)} F, "
          f"switches {sum(a != b for a, b in zip(s, s[1:]))}")
    print("  ", s)
    print("   launch us:", " ".join(f"{b[0]:.1f}" for b in res["busy"][:60]))
    for gap, seqs in res["gaps"].items():
        for seq in seqs:
            st = states(seq)
            print(f"gap {float(gap) * 1e3:6.1f} ms: {st.count('F')}/{len(st)} F, switches "
                  f"{sum(a != b for a, b in zip(st, st[1:]))}  {st}  cpus {sorted({b[2] for b in seq})}")


if __name__ == "__main__":
    main()
