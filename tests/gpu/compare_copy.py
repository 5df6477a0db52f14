"""Acceptance check for the copy suite against hand_copy_probe.py, run in the same command:

    python tests/gpu/compare_copy.py RUN_DIR hand-copy.json

pinned H2D and D2H at 1 GiB ≥ 0.98 × the hand figure; pageable printed with its spread (information).
Exits 1 if a pinned figure fails.
"""

from __future__ import annotations

import json
import sys

from gpubench import results

GIB = 1 << 30


def main(run_dir: str, hand_path: str) -> int:
    df = results.load(run_dir)
    bw = df[(df.suite == "copy") & (df.metric == "bandwidth")]
    hand = json.load(open(hand_path))
    failed = 0
    for direction in ("h2d", "d2h"):
        for memory in ("pinned", "registered", "pageable"):
            r = bw[(bw.direction == direction) & (bw.memory == memory) & (bw.copy_bytes == GIB)]
            if r.empty or r.iloc[0].status != "ok":
                print(f"{direction} {memory} 1 GiB: no ok row")
                failed += memory == "pinned"
                continue
            r = r.iloc[0]
            ref = hand.get(f"{direction}_{memory}_gbps")
            line = (f"{direction} {memory:10s} 1 GiB: gpubench {r.value:7.2f} GB/s (cv {r.cv:.2%}, "
                    f"min {r['min']:.2f} max {r['max']:.2f}, n {r.n})")
            if ref:
                line += f"  hand {ref:7.2f}  ratio {r.value / ref:.4f}"
            if memory == "pinned":
                ok = ref is not None and r.value >= 0.98 * ref
                line += "  PASS" if ok else "  FAIL"
                failed += not ok
            print(line)
    peers = bw[(bw.direction == "peer") & (bw.status == "ok")]
    for r in peers.sort_values(["copy_bytes", "src", "dst"]).itertuples():
        print(f"peer {r.src}->{r.dst} {r.copy_bytes:>11d} B: {r.value:8.2f} GB/s ({r.issued_on}, {r.link})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
